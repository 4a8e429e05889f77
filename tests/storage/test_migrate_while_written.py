"""`migrate` from a store a server is writing to: the copy holds one state of it, or nothing.

Found by an audit: the source is read a page at a time, table after table, so a forget made
while the copy ran landed half (the memory copied live, its tombstone copied standing) and
recall on the copy returned what the user had forgotten. The copy is now undone and run
again when the source's row counts moved while it was read.
"""

from __future__ import annotations

import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.errors import StoreUnavailable
from nooa_mcp.storage import open_store
from nooa_mcp.storage.migrate import COPY_ATTEMPTS, copy_rows

pytestmark = pytest.mark.anyio


def _settings(target) -> Settings:
    return Settings(store=target, owner="coder@laptop")


async def _source(target) -> list[str]:
    async with Memory.open(settings=_settings(target), embedder=HashEmbedder()) as mem:
        return [(await mem.author(f"Fact number {n} about the cluster")).id for n in range(5)]


def _write_after_reading_memories(src, target, write, times: int) -> list[int]:
    """Make `src.dump` run `write` (on another connection) right after it reads the first
    page of memories, on the first `times` copies; returns the list of copies seen."""
    real = src.dump
    seen: list[int] = []

    async def dump(table, after, limit):
        rows = await real(table, after, limit)
        if table == "memories" and after is None:
            seen.append(len(seen) + 1)
            if len(seen) <= times:
                async with Memory.open(settings=_settings(target), embedder=HashEmbedder()) as m:
                    await write(m, len(seen))
        return rows

    src.dump = dump
    return seen


async def _copy_with_one_write(store_target, dest, write) -> tuple[list[int], bool]:
    """Copy `store_target` into `dest` with `write` made during the first copy; the copies
    seen and whether the report's sizes are SOURCE's at the end."""
    src, dst = await open_store(store_target), await open_store(dest)
    try:
        seen = _write_after_reading_memories(src, store_target, write, times=1)
        report = await copy_rows(src, dst)
        return seen, report.dest_sizes == await src.table_sizes()
    finally:
        await src.close()
        await dst.close()


async def test_a_forget_during_the_copy_is_copied_whole(store_target, tmp_path) -> None:
    ids = await _source(store_target)

    async def forget(mem: Memory, _: int) -> None:
        await mem.forget(ids[0])

    seen, whole = await _copy_with_one_write(store_target, tmp_path / "copy.sqlite", forget)
    assert seen == [1, 2] and whole
    async with Memory.open(
        tmp_path / "copy.sqlite", owner="coder@laptop", embedder=HashEmbedder()
    ) as copy:
        assert (await copy.get(ids[0])).archived
        hits = (await copy.recall("Fact number 0 about the cluster", k=5)).hits
        assert ids[0] not in [h.id for h in hits]


async def test_a_source_that_never_holds_still_is_refused_and_nothing_written(
    store_target, tmp_path
) -> None:
    await _source(store_target)
    src, dst = await open_store(store_target), await open_store(tmp_path / "copy.sqlite")

    async def author(mem: Memory, n: int) -> None:
        await mem.author(f"Written while copying, time {n}")

    try:
        _write_after_reading_memories(src, store_target, author, times=COPY_ATTEMPTS)
        with pytest.raises(StoreUnavailable) as exc:
            await copy_rows(src, dst)
        assert "changed while it was copied, 3 times (a server is writing to it)" in str(exc.value)
        assert "Stop the servers that use it" in str(exc.value)
        assert set((await dst.table_sizes()).values()) == {0}
    finally:
        await src.close()
        await dst.close()


async def test_an_edit_during_the_copy_is_in_the_copy(store_target, tmp_path) -> None:
    """The copy read the memory before the edit: it is undone and run again (the edit's
    access record moved the counts), and the copy holds the edit."""
    ids = await _source(store_target)

    async def edit(mem: Memory, _: int) -> None:
        await mem.update(ids[0], content="Fact number 0 about the cluster, corrected")

    seen, whole = await _copy_with_one_write(store_target, tmp_path / "copy.sqlite", edit)
    assert seen == [1, 2] and whole
    async with Memory.open(
        tmp_path / "copy.sqlite", owner="coder@laptop", embedder=HashEmbedder()
    ) as copy:
        assert (await copy.get(ids[0])).content == "Fact number 0 about the cluster, corrected"
