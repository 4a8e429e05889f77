"""A re-imported export carries its user's forgets: a memory this store holds already (the
same id and words) that the file says its user forgot since is forgotten here too.

Before: the line was answered `exists` and nothing else happened, so syncing two machines by
export and import left a memory forgotten on one recalled forever on the other. A forget older
than the memory's revival here is not applied (this store's user brought it back since), and a
file that says a memory is live leaves one forgotten here forgotten: only revive restores it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import time_machine

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 12, 1, 9, tzinfo=UTC)
KEY = "The boiler key hangs behind the pantry door"


def _open(store: Path | str) -> Memory:
    return Memory.open(settings=Settings(store=store, owner="alice@a"), embedder=HashEmbedder())


async def _export(store: Path | str) -> list[tuple[int, dict]]:
    async with _open(store) as mem:
        return list(enumerate([r async for r in mem.export_records(include_archived=True)], 1))


async def test_a_forget_in_the_file_is_applied_to_the_copy_held_here(
    tmp_path, store_target
) -> None:
    source = tmp_path / "source.sqlite"
    with time_machine.travel(T0, tick=False):
        async with _open(source) as mem:
            key = (await mem.author(KEY)).id
            other = (await mem.author("The fuse box is in the cellar")).id
        live = await _export(source)
        async with _open(store_target) as mem:
            assert (await mem.import_records(live)).counts.get("created") == 2
    with time_machine.travel(T0 + timedelta(days=30), tick=False):
        async with _open(source) as mem:
            await mem.forget(key, "moved the key")
        forgot = await _export(source)
    with time_machine.travel(T0 + timedelta(days=60), tick=False):
        async with _open(store_target) as mem:
            report = await mem.import_records(forgot)
            assert report.counts.get("exists") == 2
            assert report.counts.get("forgotten") == 1
            assert (await mem.get(key)).archived
            hits = (await mem.recall("boiler key pantry door", k=5, include_archived=True)).hits
            assert key not in [h.id for h in hits]
            assert not (await mem.get(other)).archived  # what the file keeps live stays live
            # Kept, not dropped: shown by id, with the file's reason and time.
            stones = [r async for r in mem.export_records(include_archived=True)]
            [line] = [r for r in stones if r.get("id") == key]
            assert [t["reason"] for t in line["tombstones"]] == ["moved the key"]
            # Again: nothing more to do.
            again = await mem.import_records(forgot)
            assert "forgotten" not in again.counts
            # The user here brings it back; the same (older) file does not forget it again.
        with time_machine.travel(T0 + timedelta(days=61), tick=False):
            async with _open(store_target) as mem:
                await mem.revive(key)
                assert "forgotten" not in (await mem.import_records(forgot)).counts
                assert not (await mem.get(key)).archived


async def test_a_file_that_says_live_leaves_a_memory_forgotten_here_forgotten(
    tmp_path, store_target
) -> None:
    source = tmp_path / "source.sqlite"
    with time_machine.travel(T0, tick=False):
        async with _open(source) as mem:
            key = (await mem.author(KEY)).id
        live = await _export(source)
        async with _open(store_target) as mem:
            await mem.import_records(live)
    with time_machine.travel(T0 + timedelta(days=30), tick=False):
        async with _open(store_target) as mem:
            await mem.forget(key)
            assert "forgotten" not in (await mem.import_records(live)).counts
            assert (await mem.get(key)).archived
