"""Fixtures for the console tests: a store with a few memories written through the facade."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from browsing import browser, console_at, require_browser

from nooa_mcp import Memory, Settings
from nooa_mcp.console import LoopbackOnly

OWNER = "alice@laptop"
MONTH_AGO = datetime.now(UTC) - timedelta(days=30)

FACTS = {
    "keys": ("The production SSH keys are in the team vault", "HIGH", ["ops", "security"]),
    "lunch": ("Lunch orders are due by 11am on Fridays", "LOW", ["office"]),
    "staging": ("The staging cluster has three worker nodes", "MEDIUM", ["ops"]),
    "deploys": ("Deploys to production need two approvals in the release channel", "HIGH", ["ops"]),
    "bastion": ("The SSH bastion host rotates its host keys every quarter", "MEDIUM", ["security"]),
}


@pytest.fixture
def owner_settings(tmp_path) -> Settings:
    return Settings(store=tmp_path / "memory.sqlite", owner=OWNER)


@pytest.fixture
async def seeded(owner_settings, embedder) -> dict[str, str]:
    """Five facts learned a month ago, so that recency stays steady while a test runs."""
    ids: dict[str, str] = {}
    async with Memory.open(settings=owner_settings, embedder=embedder) as mem:
        for key, (content, importance, tags) in FACTS.items():
            with time_machine.travel(MONTH_AGO):
                result = await mem.author(content, importance=importance, tags=tags)
            ids[key] = result.id
    return ids


@pytest.fixture
async def linked(owner_settings, embedder, seeded) -> dict[str, str]:
    """The seeded facts with staging -related-> deploys -supports-> keys."""
    async with Memory.open(settings=owner_settings, embedder=embedder) as mem:
        await mem.link(seeded["staging"], seeded["deploys"], "related", "MODERATE")
        await mem.link(seeded["deploys"], seeded["keys"], "supports")
    return seeded


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    # Module-wide, so that one Chromium serves a whole test module (it starts in seconds).
    return "asyncio"


@pytest.fixture(scope="module")
async def chromium():
    """Headless Chromium for the module; `new_page()` gives every page a fresh context."""
    require_browser()
    async with browser() as instance:
        yield instance


@pytest.fixture
async def site(owner_settings, embedder, seeded, chromium):
    """The console for alice on loopback, and the browser."""
    async with console_at(owner_settings, embedder, LoopbackOnly(OWNER)) as url:
        yield url, chromium


def pytest_terminal_summary(terminalreporter) -> None:
    """Say at the end of the run that the browser tests were skipped, and why."""
    reasons = {
        str(report.longrepr[2])
        for report in terminalreporter.stats.get("skipped", [])
        if isinstance(report.longrepr, tuple) and "browser tests skipped" in str(report.longrepr[2])
    }
    for reason in sorted(reasons):
        terminalreporter.write_line(reason.removeprefix("Skipped: "), yellow=True)
