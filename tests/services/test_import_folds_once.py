"""A line an import folds into a memory stored under another id is folded once: running the
same import again (after a kill, or by mistake) leaves that memory as the first run left it.

Before: each run reinforced the memory again (reinforcements 3 → 5 after a kill and a re-run),
logged another `reinforced` access, and revived it when a pass had faded it since. The fold
notes the line's id on its access (`imports.fold_note`), which travels with the memory.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.domain.schema import now as utc_now
from nooa_mcp.embeddings import HashEmbedder

pytestmark = pytest.mark.anyio

TEXT = "The harbour crane is serviced on Tuesdays"


def _open(store: Path | str, owner: str = "alice@a") -> Memory:
    return Memory.open(settings=Settings(store=store, owner=owner), embedder=HashEmbedder())


async def _plain_export(store: Path | str) -> list[tuple[int, dict[str, Any]]]:
    """An export of the source as an earlier release wrote it (no use history): its lines are
    learned at their import, and one that says a stored memory again is folded into it."""
    async with _open(store) as mem:
        await mem.author(TEXT, importance="HIGH", tags=["harbour"])
        lines = [r async for r in mem.export_records()]
    return [
        (n, {k: v for k, v in item.items() if k != "history"}) for n, item in enumerate(lines, 1)
    ]


async def _state(mem: Memory, memory_id: str) -> tuple[Any, ...]:
    got = await mem.get(memory_id)
    stream = [a for _, a in await mem.access_log(memory_id, limit=100)]
    return (
        got.reinforcement_count,
        got.access_count,
        got.importance,
        sorted(got.tags),
        got.archived,
        [(a.ts, a.channel, a.query) for a in stream],
    )


async def test_an_import_run_again_does_not_fold_its_lines_again(store_target, tmp_path) -> None:
    lines = await _plain_export(tmp_path / "source.sqlite")
    async with _open(store_target) as mem:
        held = (await mem.author(TEXT)).id
        first = await mem.import_records(lines)
        assert first.ids == [held]
        assert first.counts == {"exists": 1, "folded": 1, "edges": 0}
        after_first = await _state(mem, held)
        assert after_first[:4] == (1, 1, 8.0, ["harbour"])
        for _ in range(2):
            again = await mem.import_records(lines)
            assert await _state(mem, held) == after_first
            assert again.ids == [held]
            assert again.counts == {"exists": 1, "already_folded": 1, "edges": 0}


async def test_the_fold_is_remembered_through_export_and_import(store_target, tmp_path) -> None:
    """The target's own export, imported into another store, carries the fold: the first
    file imported there is folded no second time."""
    lines = await _plain_export(tmp_path / "source.sqlite")
    async with _open(tmp_path / "target.sqlite") as mem:
        held = (await mem.author(TEXT)).id
        await mem.import_records(lines)
        copy = list(enumerate([r async for r in mem.export_records()], 1))
    async with _open(store_target) as mem:
        await mem.import_records(copy)
        before = await _state(mem, held)
        again = await mem.import_records(lines)
        assert await _state(mem, held) == before
        assert again.counts == {"exists": 1, "already_folded": 1, "edges": 0}


async def test_a_memory_faded_since_the_fold_is_not_revived_by_the_import_run_again(
    store_target, tmp_path
) -> None:
    lines = await _plain_export(tmp_path / "source.sqlite")
    async with _open(store_target) as mem:
        held = (await mem.author(TEXT, importance="LOW")).id
        await mem.import_records([(1, {**lines[0][1], "importance": 3})])
        await mem.reflect(["prune"], now=utc_now() + timedelta(days=730))
        faded = await _state(mem, held)
        assert faded[4]  # archived by the pass
        again = await mem.import_records([(1, {**lines[0][1], "importance": 3})])
        assert await _state(mem, held) == faded  # before: revived and reinforced
        assert again.ids == [held] and again.counts.get("already_folded") == 1


async def test_the_fold_is_remembered_after_a_migrate_to_postgresql(postgres, tmp_path) -> None:
    from nooa_mcp.storage.migrate import migrate

    lines = await _plain_export(tmp_path / "source.sqlite")
    sqlite = tmp_path / "target.sqlite"
    async with _open(sqlite) as mem:
        held = (await mem.author(TEXT)).id
        await mem.import_records(lines)
        before = await _state(mem, held)
    await migrate(sqlite, postgres)
    async with _open(postgres) as mem:
        again = await mem.import_records(lines)
        assert await _state(mem, held) == before
        assert again.counts == {"exists": 1, "already_folded": 1, "edges": 0}


async def test_a_line_that_revived_a_faded_memory_does_not_fold_into_it_again(
    store_target, tmp_path
) -> None:
    """A line said again by a memory a pass faded revives it (`revived`); run again, the line
    is that fold, not a reinforcement of the memory it brought back."""
    lines = await _plain_export(tmp_path / "source.sqlite")
    async with _open(store_target) as mem:
        held = (await mem.author(TEXT, importance="LOW")).id
        await mem.reflect(["prune"], now=utc_now() + timedelta(days=730))
        assert (await mem.get(held)).archived
        first = await mem.import_records(lines)
        assert first.ids == [held] and first.counts.get("revived") == 1
        revived = await _state(mem, held)
        assert not revived[4]
        again = await mem.import_records(lines)
        assert await _state(mem, held) == revived
        assert again.counts == {"exists": 1, "already_folded": 1, "edges": 0}


async def _history_line(store: Path | str) -> dict[str, Any]:
    """TEXT as an export of this release writes it (with its history): its own memory."""
    async with _open(store) as mem:
        await mem.author(TEXT)
        return next(iter([r async for r in mem.export_records()]))


async def test_a_line_whose_own_id_holds_its_words_is_that_memory_not_a_newer_one(
    store_target, tmp_path
) -> None:
    """Before: the newest memory with the line's words was repeated, so a plain line imported
    once (its own memory) was folded into a copy with its words imported later, on each run."""
    plain = {"id": "5" * 32, "content": TEXT, "created_at": "2026-01-01T10:00:00Z"}
    newer = await _history_line(tmp_path / "other.sqlite")
    async with _open(store_target) as mem:
        assert (await mem.import_records([(1, plain)])).counts.get("created") == 1
        assert (await mem.import_records([(1, newer)])).counts.get("created") == 1
        kept = await _state(mem, newer["id"])
        again = await mem.import_records([(1, plain)])
        assert again.ids == [plain["id"]] and again.counts == {"exists": 1, "edges": 0}
        assert await _state(mem, newer["id"]) == kept


async def test_a_fold_into_a_memory_merged_since_is_not_made_again(store_target, tmp_path) -> None:
    """The memory a line was folded into, merged by reflection with a copy of its words (or
    merged into it), still answers for the line: run again, the import writes nothing."""
    lines = await _plain_export(tmp_path / "source.sqlite")
    copy = await _history_line(tmp_path / "other.sqlite")
    async with _open(store_target) as mem:
        held = (await mem.author(TEXT)).id
        assert (await mem.import_records(lines)).counts.get("folded") == 1
        assert (await mem.import_records([(1, copy)])).counts.get("created") == 1
        [merge] = [s for s in (await mem.reflect(["merge"])).steps if s.step == "merge"]
        assert merge.applied == 1, merge
        both = [await _state(mem, i) for i in (held, copy["id"])]
        again = await mem.import_records(lines)
        assert [await _state(mem, i) for i in (held, copy["id"])] == both
        assert again.counts == {"exists": 1, "already_folded": 1, "edges": 0}
