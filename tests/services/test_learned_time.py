"""Learned time and event time: decay counts from when this store learned a memory.

A date a user gives (`created_at` in an import, a LoCoMo session date) is when it happened: it
is kept and shown, and it orders versions. Base-level recency, retention, prune age and prune
ETA count from the store's first access to the memory and its uses here. Before: 200 notes
dated 2023 imported today were all archived by the first `reflect` (active 0, archived 200).
Driven through the CLI and the MCP tools, on SQLite and PostgreSQL; the clock is moved with
time-machine, so every part of the product sees the same time pass.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
import time_machine
from click.testing import CliRunner
from mcp import Client

from nooa_mcp import Memory, Settings, cli
from nooa_mcp.domain.forgetting import ForgettingPolicy
from nooa_mcp.domain.schema import now as utc_now
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp.server import build_server

OWNER = "coder@laptop"
DAUGHTER = "Maria's daughter is called Lena"
QUESTION = "what is Maria's daughter called?"
PEOPLE = ["John", "Aisha", "Tom", "Ravi", "Chen", "Olga", "Pedro", "Yuki"]
HABITS = [
    "likes hiking in the Alps",
    "works at the corner bakery",
    "moved to Porto last spring",
    "plays the cello on Sundays",
    "has a dog named Rex",
    "prefers green tea",
    "runs marathons",
    "studies maritime law",
    "owns a red bike",
    "visits Lisbon often",
]


def notes_2023(path: Path) -> Path:
    """200 notes dated through 2023, as a user brings them from another tool."""
    lines = [
        {
            "content": f"{PEOPLE[i % 8]} {HABITS[i % 10]} (note {i})",
            "created_at": f"2023-{i % 12 + 1:02d}-{i % 27 + 1:02d}T10:00:00Z",
        }
        for i in range(199)
    ]
    lines.insert(77, {"content": DAUGHTER, "created_at": "2023-06-14T09:00:00Z"})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def cli_runner(target: Path | str, monkeypatch) -> callable:
    monkeypatch.setenv("NOOA_STORE", str(target))
    monkeypatch.setenv("NOOA_OWNER", OWNER)
    from nooa_mcp import engine

    monkeypatch.setattr(engine, "default_embedder", lambda cache_dir=None: HashEmbedder())
    runner = CliRunner()

    def invoke(*args: str) -> dict:
        out = runner.invoke(cli.main, [*args, "--json"], catch_exceptions=False)
        assert out.exit_code == 0, out.output
        return json.loads(out.stdout)

    return invoke


def test_notes_dated_2023_imported_today_survive_reflection_and_answer(
    store_target, tmp_path, monkeypatch
) -> None:
    run = cli_runner(store_target, monkeypatch)
    assert run("import", str(notes_2023(tmp_path / "notes.jsonl")))["created"] == 200
    run("reflect")
    stats = run("stats")
    assert (stats["active"], stats["archived"]) == (200, 0)
    hit = run("recall", QUESTION)["hits"][0]
    assert hit["content"] == DAUGHTER and not hit["flags"]["faded"]
    # When it happened is kept and shown; it is not when the store learned it.
    assert hit["created_at"].startswith("2023-06-14T09:00")
    assert hit["retention"] > 0.99


def test_what_nobody_asks_for_still_fades_as_time_passes_here(
    store_target, tmp_path, monkeypatch
) -> None:
    run = cli_runner(store_target, monkeypatch)
    run("import", str(notes_2023(tmp_path / "notes.jsonl")))
    with time_machine.travel(utc_now() + timedelta(days=60)):
        # The daughter is asked about once, two months on: what that recall returns and does
        # not flag weak is used (a weak hit is only shown).
        hits = run("recall", QUESTION)["hits"]
        used = {h["id"] for h in hits if not h["flags"]["weak"]}
    assert hits[0]["content"] == DAUGHTER and 1 <= len(used) < 5
    with time_machine.travel(utc_now() + timedelta(days=150)):
        run("reflect")
        stats = run("stats")
        # 92 days without a use (S·ln 50 at strength 1) fade every note nobody asked for; the
        # ones used at day 60 are live (strength 2: they fade after 156 days).
        assert (stats["active"], stats["archived"]) == (len(used), 200 - len(used))
        assert stats["extra"]["archived_share"] == pytest.approx(1 - len(used) / 200, abs=1e-3)
        hit = run("recall", QUESTION)["hits"][0]
        assert hit["content"] == DAUGHTER and not hit["flags"]["faded"]


async def _mcp(settings: Settings, *calls: tuple[str, dict]) -> list[dict]:
    out = []
    async with Client(build_server(settings, embedder=HashEmbedder())) as client:
        for tool, args in calls:
            result = await client.call_tool(tool, args)
            assert not result.is_error, result.content
            out.append(result.structured_content)
    return out


def test_a_tool_write_is_learned_and_happened_at_once(store_target) -> None:
    settings = Settings(store=store_target, owner=OWNER)
    before = utc_now()
    written, found = anyio.run(
        _mcp,
        settings,
        ("memory_author", {"content": "The staging cluster has four worker nodes"}),
        ("memory_recall", {"query": "staging cluster worker nodes"}),
    )
    hit = found["hits"][0]
    assert hit["id"] == written["id"]
    created = datetime.fromisoformat(hit["created_at"])
    assert before <= created <= utc_now()

    async def view() -> tuple[datetime, datetime | None]:
        async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
            shown = await mem.get(written["id"])
            return shown.created_at, shown.learned_at

    created_at, learned_at = anyio.run(view)
    assert learned_at == created_at == created


def test_prune_age_counts_from_when_the_store_learned_it(store_target) -> None:
    """A fast-forgetting policy (τ of six minutes): retention is under the prune line within
    the hour, and the one-day minimum age still protects a note learned an hour ago, however
    old its date."""
    policy = ForgettingPolicy(tau_hours=0.1)
    settings = Settings(store=store_target, owner=OWNER, forgetting=policy)

    async def go() -> tuple[int, int, datetime, datetime]:
        async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
            result = await mem.import_records(
                [(1, {"content": DAUGHTER, "created_at": "2019-03-01T00:00:00Z"})]
            )
            memory_id = result.ids[0]
            shown = await mem.get(memory_id)
            soon = await mem.reflect(["prune"], now=utc_now() + timedelta(hours=2))
            later = await mem.reflect(["prune"], now=utc_now() + timedelta(hours=25))
            return soon.steps[0].applied, later.steps[0].applied, shown.created_at, shown.prune_eta

    soon, later, happened, eta = anyio.run(go)
    assert (soon, later) == (0, 1)
    assert happened == datetime(2019, 3, 1, tzinfo=UTC)
    # The ETA counts from the import, not from 2019.
    assert eta > utc_now()
