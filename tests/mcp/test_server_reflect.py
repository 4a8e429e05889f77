"""memory_reflect over the in-memory client (DESIGN.md §8, §13.1)."""

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import time_machine
from mcp import Client

from nooa_mcp.config import Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp.server import build_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def client(tmp_path: Path):
    settings = Settings(store=tmp_path / "memory.sqlite", owner="tester")
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as c:
        yield c


async def test_reflect_is_marked_destructive(client: Client) -> None:
    # Reflection archives (prunes, merges): not read-only, and it changes what recall returns.
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert tools["memory_reflect"].annotations.destructive_hint is True


async def test_reflect_runs_the_requested_steps_only(client: Client) -> None:
    await client.call_tool("memory_author", {"content": "A fact to consolidate."})
    result = await client.call_tool("memory_reflect", {"steps": ["link", "rescore"]})
    assert [s["step"] for s in result.structured_content["steps"]] == ["link", "rescore"]


async def test_reflect_reports_a_completed_pass(client: Client) -> None:
    result = await client.call_tool("memory_reflect", {})
    assert result.structured_content["status"] == "completed"


async def test_reflect_with_an_unknown_step_is_refused_naming_steps(client: Client) -> None:
    result = await client.call_tool("memory_reflect", {"steps": ["dream"]})
    assert result.is_error and "steps" in result.content[0].text


async def test_reflect_reports_progress_to_the_caller(client: Client) -> None:
    # Two close neighbours (HashEmbedder cosine 0.89): the link step plans an edge between them.
    for content in (
        "The billing service deploys from the main branch every Monday morning.",
        "The billing service deploys from the release branch every Monday.",
    ):
        await client.call_tool("memory_author", {"content": content})
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    await client.call_tool("memory_reflect", {"steps": ["link"]}, progress_callback=on_progress)
    assert seen == [(1, 1, "link 1/1")]  # the step and how far it is, for the client to show


async def test_a_second_reflect_says_it_compared_only_what_changed(client: Client) -> None:
    await client.call_tool("memory_author", {"content": "A fact to consolidate."})
    first = await client.call_tool("memory_reflect", {})
    assert first.structured_content["sweep"] == "full"
    assert "Compared every pair of 1 memories." in first.content[0].text
    await client.call_tool("memory_author", {"content": "Another fact, written after."})
    second = await client.call_tool("memory_reflect", {})
    assert (second.structured_content["sweep"], second.structured_content["changed"]) == (
        "changed",
        1,
    )
    assert "the 1 memories changed since the last pass" in second.content[0].text


async def test_a_prune_names_what_it_faded_and_counts_the_rest(client: Client) -> None:
    # What a pass archives is what a reader may want back: each line says it in its own
    # words (ten of them; the others are counted, and memory://archived lists them all).
    for i in range(14):
        await client.call_tool(
            "memory_author", {"content": f"Widget {i} of the plant turns on gear number {i * 7}."}
        )
    with time_machine.travel(datetime.now(UTC) + timedelta(days=400), tick=False):
        result = await client.call_tool("memory_reflect", {"steps": ["prune"]})
    text = result.content[0].text
    lines = [line.strip() for line in text.splitlines() if "(retention" in line]
    assert len(lines) == 10
    assert all(line.split(") ", 1)[1].startswith("Widget ") for line in lines)
    assert "… and 4 more (memory://archived lists what faded)" in text
    assert result.structured_content["steps"][0]["applied"] == 14
