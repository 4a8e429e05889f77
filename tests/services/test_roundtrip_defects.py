"""Minimal reproductions of what the randomized round trip (`test_roundtrip_random`) found."""

from __future__ import annotations

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


@pytest.mark.xfail(
    strict=True,
    reason="the maintenance log (reflection passes, fired intents) is the store's, and no "
    "export line carries it: after export/import, stats' reflection_passes, "
    "last_reflection_at and intents_fired and maintenance_log start from zero (the fired "
    "intent itself keeps fired_at/fired_count)",
)
def test_the_maintenance_log_survives_export_and_import(tmp_path) -> None:
    source, target = tmp_path / "s.sqlite", tmp_path / "t.sqlite"
    with time_machine.travel(T0, tick=False):
        anyio.run(_reflected, source)
    with time_machine.travel(T0 + timedelta(days=1), tick=False):
        anyio.run(_copy, source, target)
        before, after = anyio.run(_log, source), anyio.run(_log, target)
    assert before["stats"] == {"reflection_passes": 1, "intents_fired": 1}
    assert after == before
