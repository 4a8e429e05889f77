"""Minimal reproductions of what the randomized round trip (`test_roundtrip_random`) found."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import anyio
import pytest
import time_machine

from nooa_mcp import Memory
from nooa_mcp.embeddings import HashEmbedder

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
ROLE = "coder@laptop"


async def _build(path) -> str:
    async with Memory.open(path, owner="", embedder=HashEmbedder()) as shared:
        memory_id = (await shared.author("The build cache lives on the NAS share")).id
    async with Memory.open(path, owner=ROLE, embedder=HashEmbedder()) as mem:
        await mem.recall("build cache NAS")
    return memory_id


async def _copy(source, target) -> None:
    """The README's way to move a store: the shared owner's file first, then each role's."""
    for owner in ("", ROLE):
        async with Memory.open(source, owner=owner, embedder=HashEmbedder()) as mem:
            lines = [r async for r in mem.export_records(include_archived=True)]
        async with Memory.open(target, owner=owner, embedder=HashEmbedder()) as mem:
            await mem.import_records(list(enumerate(lines, 1)))


async def _replay(path, memory_id) -> list[tuple[str, str | None]]:
    async with Memory.open(path, owner=ROLE, embedder=HashEmbedder()) as mem:
        got = await mem.explain(memory_id=memory_id)
        return [(str(a.channel), a.query) for a in got.accesses]


@pytest.mark.xfail(
    strict=True,
    reason="export redacts every role's queries on a shared memory (views.redact) for the "
    "shared owner's file, and a role's own file says the shared memory again (`exists`, its "
    "history ignored): no export/import path keeps a role's own recall queries on shared "
    "memories, so explain's replay for that role loses them",
)
def test_a_roles_queries_on_a_shared_memory_survive_export_and_import(tmp_path) -> None:
    source, target = tmp_path / "s.sqlite", tmp_path / "t.sqlite"
    with time_machine.travel(T0, tick=False):
        memory_id = anyio.run(_build, source)
    with time_machine.travel(T0 + timedelta(days=1), tick=False):
        anyio.run(_copy, source, target)
        before = anyio.run(_replay, source, memory_id)
        after = anyio.run(_replay, target, memory_id)
    assert ("recalled", "build cache NAS") in before
    assert after == before


async def _reflected(path) -> None:
    async with Memory.open(path, owner=ROLE, embedder=HashEmbedder()) as mem:
        await mem.intent("add", content="Ask about the audit", fire_at=T0 - timedelta(hours=1))
        await mem.author("The invoices database is backed up nightly")  # fires the intent
        await mem.reflect(["rescore"])


async def _log(path) -> dict:
    async with Memory.open(path, owner=ROLE, embedder=HashEmbedder()) as mem:
        extra = (await mem.stats()).extra
        return {
            "stats": {k: extra.get(k) for k in ("reflection_passes", "intents_fired")},
            "reflections": len(await mem.maintenance_log("reflection")),
            "fired": len(await mem.maintenance_log("intent")),
        }


def test_the_maintenance_log_survives_export_and_import_once_and_only_for_its_role(
    tmp_path,
) -> None:
    """A copy's stats and log are the source's; entries are the importer's history only
    when they are its role's, and a file imported again adds none."""
    source, target = tmp_path / "s.sqlite", tmp_path / "t.sqlite"
    with time_machine.travel(T0, tick=False):
        anyio.run(_reflected, source)
    with time_machine.travel(T0 + timedelta(days=1), tick=False):
        anyio.run(_copy, source, target)
        before, after = anyio.run(_log, source), anyio.run(_log, target)
        assert before["stats"] == {"reflection_passes": 1, "intents_fired": 1}
        assert after == before
        anyio.run(_copy, source, target)
        assert anyio.run(_log, target) == before

        async def as_other() -> dict:
            async with Memory.open(source, owner=ROLE, embedder=HashEmbedder()) as mem:
                lines = [r async for r in mem.export_records(include_archived=True)]
            other = tmp_path / "o.sqlite"
            async with Memory.open(other, owner="ops@desk", embedder=HashEmbedder()) as mem:
                counts = (await mem.import_records(list(enumerate(lines, 1)))).counts
                return {"counts": counts, "stats": await mem.stats()}

        got = anyio.run(as_other)
    assert got["counts"]["maintenance"] == 0
    assert (got["stats"].extra["reflection_passes"], got["stats"].extra["intents_fired"]) == (0, 0)


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ({"maintenance": "", "ts": "2026-01-01T00:00:00Z", "report": {}}, "line 2: maintenance:"),
        ({"maintenance": "reflection", "ts": "soon", "report": {}}, "line 2: ts:"),
        (
            {"maintenance": "reflection", "ts": "2026-01-01T00:00:00Z", "report": []},
            "line 2: report:",
        ),
        ({"maintenance": "reflection", "when": "x", "report": {}}, "line 2: when"),
        (
            {"maintenance": "bogus", "ts": "2026-01-01T00:00:00Z", "report": {}},
            "line 2: maintenance:",
        ),
        *(
            (
                {"maintenance": "intent", "ts": "2026-01-01T00:00:00Z", "report": bad},
                "line 2: report:",
            )
            for bad in (
                {"role": ROLE, "text": "x\x00y"},
                {"role": ROLE, "text": "x\ud800y"},
                {"role": ROLE, "x": json.loads("[" * 500 + "]" * 500)},
            )
        ),
    ],
)
def test_a_malformed_maintenance_line_is_refused_by_line_and_key(tmp_path, line, said) -> None:
    async def body() -> str:
        async with Memory.open(tmp_path / "t.sqlite", owner=ROLE, embedder=HashEmbedder()) as mem:
            with pytest.raises(Exception) as refused:
                await mem.import_records([(1, {"content": "A note."}), (2, line)])
            assert await mem.list_memories() == []  # nothing was written
            return str(refused.value)

    assert anyio.run(body).startswith(said)


def test_entries_imported_into_a_log_of_its_own_keep_their_order_in_time(tmp_path) -> None:
    """The target's own pass, made later, stays the last one; the imported older entries
    go before it (they were inserted after it)."""
    source, target = tmp_path / "s.sqlite", tmp_path / "t.sqlite"
    with time_machine.travel(T0, tick=False):
        anyio.run(_reflected, source)

    async def own_pass() -> None:
        async with Memory.open(target, owner=ROLE, embedder=HashEmbedder()) as mem:
            await mem.author("A note of the target's own.")
            await mem.reflect(["rescore"])

    async def last_and_order() -> tuple[str, list[str]]:
        async with Memory.open(target, owner=ROLE, embedder=HashEmbedder()) as mem:
            extra = (await mem.stats()).extra
            lines = [r async for r in mem.export_records() if "maintenance" in r]
            return extra["last_reflection_at"], [r["ts"] for r in lines]

    with time_machine.travel(T0 + timedelta(days=5), tick=False):
        anyio.run(own_pass)
    with time_machine.travel(T0 + timedelta(days=6), tick=False):
        anyio.run(_copy, source, target)
        last, order = anyio.run(last_and_order)
    assert last.startswith((T0 + timedelta(days=5)).date().isoformat())
    assert order == sorted(order) and len(order) == 3


def test_an_entry_from_a_clock_ahead_counts_as_now(tmp_path) -> None:
    line = {"maintenance": "reflection", "ts": "2999-01-01T00:00:00Z", "report": {"role": "coder"}}

    async def body() -> str:
        async with Memory.open(tmp_path / "t.sqlite", owner=ROLE, embedder=HashEmbedder()) as mem:
            await mem.import_records([(1, {"content": "A note."}), (2, line)])
            return (await mem.stats()).extra["last_reflection_at"]

    with time_machine.travel(T0, tick=False):
        assert anyio.run(body).startswith(T0.date().isoformat())
