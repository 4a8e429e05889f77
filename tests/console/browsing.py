"""A real console on a loopback socket and a real Chromium to look at it (tests only).

The socket is bound and listening before uvicorn starts, so no test waits on a timer for the
port. Chromium is Debian's /usr/bin/chromium driven by Playwright; it is never downloaded.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount

from nooa_mcp import Settings
from nooa_mcp.console import Authenticator, Console, standalone_app
from nooa_mcp.engine import Engine
from nooa_mcp.hosts import server_config

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).parent / "artifacts"


def require_browser() -> None:
    """Skip (or, with NOOA_REQUIRE_BROWSER=1, fail) when Chromium or Playwright is missing."""
    problem = None
    if not CHROMIUM.exists():
        problem = f"no Chromium at {CHROMIUM} (apt-get install -y chromium)"
    elif shutil.which("chromium") is None and not os.access(CHROMIUM, os.X_OK):
        problem = f"{CHROMIUM} is not executable"
    else:
        try:
            import playwright.async_api  # noqa: F401
        except ImportError:
            problem = "Playwright for Python is not installed (pip install playwright)"
    if problem is None:
        return
    if os.environ.get("NOOA_REQUIRE_BROWSER") == "1":
        pytest.fail(f"browser tests need a browser: {problem}; NOOA_REQUIRE_BROWSER=1 is set")
    pytest.skip(f"browser tests skipped: {problem}; set NOOA_REQUIRE_BROWSER=1 to fail instead")


@asynccontextmanager
async def browser() -> AsyncIterator[object]:
    """Headless Chromium; Playwright gives it a fresh profile directory of its own."""
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        instance = await p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        try:
            yield instance
        finally:
            await instance.close()


@asynccontextmanager
async def console_at(
    settings: Settings,
    embedder: object,
    authenticator: Authenticator,
    *,
    mount: str = "",
    hosts: Sequence[str] = ("127.0.0.1",),
) -> AsyncIterator[str]:
    """Serve the console for `settings`; yields its base URL (with the mount path, if any).

    With `mount`, the console is mounted inside a parent app the way the HTTP transport
    mounts it beside /mcp, and the parent's lifespan runs the console.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    async with Engine.open(settings, embedder) as engine:  # type: ignore[arg-type]
        console = Console.for_engine(engine, authenticator)
        if mount:

            @asynccontextmanager
            async def lifespan(_: Starlette) -> AsyncIterator[None]:
                async with console.running():
                    yield

            app = Starlette(routes=[Mount(mount, app=console.app())], lifespan=lifespan)
        else:
            app = standalone_app(console, list(hosts))
        server = uvicorn.Server(server_config(app, log_level="warning", lifespan="on"))
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(server.serve, [sock])
            try:
                yield f"http://127.0.0.1:{port}{mount}"
            finally:
                server.should_exit = True


async def shot(page: object, name: str) -> Path:
    """Save a full-page screenshot under tests/console/artifacts/."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    await page.screenshot(path=str(path), full_page=True)  # type: ignore[attr-defined]
    return path
