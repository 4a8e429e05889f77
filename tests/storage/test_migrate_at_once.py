"""Two `migrate`s into one new store at once: one copies, the other is refused whole.

Found by an audit: DEST was checked empty before the copy's transaction began, so two
migrates started together both found it empty and the second failed on a duplicate key
("UNIQUE constraint failed: memories.seq ... Check the file, its disk and its permissions"),
which reads as a broken disk. The check now runs inside the transaction, after the second
waits for the first (SQLite's write lock, PostgreSQL's advisory lock), so the loser says
DEST is not empty and that nothing was written.
"""

from __future__ import annotations

import anyio
import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.errors import StoreUnavailable
from nooa_mcp.storage import open_store
from nooa_mcp.storage.migrate import copy_rows

pytestmark = pytest.mark.anyio


async def test_the_second_of_two_migrates_at_once_says_dest_is_not_empty(
    store_target, tmp_path
) -> None:
    source = tmp_path / "source.sqlite"
    async with Memory.open(
        settings=Settings(store=source, owner="coder"), embedder=HashEmbedder()
    ) as mem:
        for n in range(5):
            await mem.author(f"Fact number {n} about the cluster")
    sources = [await open_store(source) for _ in range(2)]
    dests = [await open_store(store_target) for _ in range(2)]
    # Both copies read SOURCE's sizes (the step before the copy's transaction) before either
    # goes on: both passed any check made before the transaction.
    both_ready = anyio.Event()
    ready = 0
    for src in sources:
        real = src.table_sizes

        async def table_sizes(real=real):
            nonlocal ready
            sizes = await real()
            ready += 1
            if ready == 2:
                both_ready.set()
            await both_ready.wait()
            return sizes

        src.table_sizes = table_sizes
    outcomes: list[object] = []

    async def run(src, dst) -> None:
        try:
            outcomes.append(await copy_rows(src, dst))
        except StoreUnavailable as error:
            outcomes.append(error)

    try:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for src, dst in zip(sources, dests, strict=True):
                    tg.start_soon(run, src, dst)
        refused = [o for o in outcomes if isinstance(o, StoreUnavailable)]
        assert len(outcomes) == 2 and len(refused) == 1, outcomes
        assert "is not empty" in str(refused[0]) and "nothing was written" in str(refused[0])
        assert (await dests[0].table_sizes())["memories"] == 5
    finally:
        for store in (*sources, *dests):
            await store.close()
