"""What a write in progress shows to the reads beside it, on both backends.

A write transaction stays open across several statements. On the store's one connection every
other statement of the process ran inside it: a recall beside the write saw the new rows before
they were committed, and the vector index read them and moved its mark past them. When the
write then rolled back (its client cancelled it, a later item failed), the rows it had noted
stayed searchable, and the next write committed — by another process — took the revision the
index had already passed: stored and acknowledged, never found by meaning in this process.
"""

from __future__ import annotations

import asyncio
import contextlib

import anyio
import pytest
from held_statement import Held

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.storage.sqlite import SQLiteStore

pytestmark = pytest.mark.anyio


async def _paused_write(mem: Memory, contents: list[str]) -> tuple[asyncio.Task, asyncio.Event]:
    """`author_many(contents)` paused inside its transaction once its last row is in."""
    store = mem.engine.store
    await mem.engine.flush()  # earlier recalls' access logs go first, unpaused
    inside, release = asyncio.Event(), asyncio.Event()
    real = store.append_accesses
    calls = 0

    async def paused(items):
        nonlocal calls
        await real(items)
        calls += 1
        if calls == len(contents):
            inside.set()
            await release.wait()

    store.append_accesses = paused
    task = asyncio.create_task(mem.author_many([{"content": c} for c in contents]))
    await inside.wait()
    store.append_accesses = real
    return task, release


@pytest.fixture
def settings(store_target) -> Settings:
    return Settings(store=store_target, owner="coder@laptop")


async def test_a_recall_beside_an_open_write_does_not_see_its_rows(mem) -> None:
    await mem.author("The build runs on the self-hosted runners.")
    task, release = await _paused_write(mem, ["The deploy key rotates every ninety days."])
    seen = await mem.recall("deploy key rotates every ninety days", k=5)
    release.set()
    (written,) = await task
    assert written.id not in [h.id for h in seen.hits]
    again = await mem.recall("deploy key rotates every ninety days", k=5)
    assert again.hits[0].id == written.id


async def test_a_write_rolled_back_beside_a_recall_hides_no_later_write(mem, settings) -> None:
    await mem.author("The build runs on the self-hosted runners.")
    await mem.recall("build runners", k=5)
    task, _ = await _paused_write(
        mem, ["The deploy key rotates every ninety days.", "Backups are kept for a year."]
    )
    await mem.recall("deploy key rotates", k=5)
    task.cancel()  # the client gave up: the transaction rolls back
    with contextlib.suppress(asyncio.CancelledError):
        await task
    # Another process commits the next write: it takes the revision of the first row that
    # was rolled back.
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as other:
        later = await other.author("The staging database lives in Frankfurt.")
    index = mem.engine.index
    # PostgreSQL tells this server of another's commit by NOTIFY, which can arrive after the
    # commit returns: sync until the row is there (a lost row never comes, and the guard fails).
    with anyio.fail_after(30):
        while True:
            await index.sync(mem.engine.store)
            if index.vector(later.id) is not None:
                break
            await anyio.sleep(0.05)
    hits = await mem.recall("staging database in Frankfurt", k=3)
    assert hits.hits[0].id == later.id
    # The rows never committed are not searchable: every row a search can reach is stored.
    reachable = {index.ids[r] for r in index.mask(mem.scope("mine")).nonzero()[0].tolist()}
    assert await mem.engine.store.row_count() == 2
    assert len(reachable) == 2
    assert await mem.engine.store.live_ids(list(reachable)) == reachable


async def test_a_read_outside_a_write_does_not_queue_behind_its_statements(store_path) -> None:
    store = await SQLiteStore.open(store_path)
    held = Held()
    try:
        await held.install(store.conn)
        async with store.transaction():
            await store.set_meta("probe", "committed")
        order: list[str] = []

        async def write() -> None:
            async with store.transaction():
                await store.set_meta("probe", "uncommitted")
                await store._rows("SELECT held()")  # inside the write: on the store's connection
            order.append("write")

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(write)
            await held.wait_started()  # the write's statement is under way, and stays
            try:
                with anyio.fail_after(30):  # queued behind the held statement, it never ends
                    assert await store.get_meta("probe") == "committed"
                order.append("read")
            finally:
                held.release.set()
        assert order == ["read", "write"]
        assert await store.get_meta("probe") == "uncommitted"
    finally:
        held.release.set()
        await store.close()
