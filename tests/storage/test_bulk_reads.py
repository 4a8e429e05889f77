"""Whole-role reads on SQLite run on a connection of their own: a reflection pass's
rows and the KPI statistics read every memory, and on the store's one connection every
statement of a client's write queued behind them."""

from __future__ import annotations

import anyio
import pytest
from held_statement import Held

from nooa_mcp.domain.scope import Scope
from nooa_mcp.errors import StoreUnavailable
from nooa_mcp.storage.sqlite import SQLiteStore

pytestmark = pytest.mark.anyio


async def test_a_write_does_not_wait_for_a_whole_role_read(store_path):
    store = await SQLiteStore.open(store_path)
    held = Held()
    try:
        for conn in (store.conn, await store._side("bulk")):
            await held.install(conn)
        order: list[str] = []

        async def bulk() -> None:
            assert (await store._bulk_rows("SELECT held()"))[0][0] == 1
            order.append("read")

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(bulk)
            await held.wait_started()  # the read is under way, and stays
            try:
                with anyio.fail_after(30):  # queued behind the held read, it never ends
                    async with store.transaction():
                        await store.set_meta("probe", "written")
                order.append("write")
            finally:
                held.release.set()
        assert order == ["write", "read"]
        assert await store.get_meta("probe") == "written"
    finally:
        held.release.set()
        await store.close()


async def test_the_pass_rows_and_the_kpis_are_read_on_the_second_connection(mem):
    await mem.author("the deploy key lives in the team vault")
    store = mem.engine.store
    assert "bulk" not in store._sides
    bulk: list[str] = []
    real = store._bulk_rows

    async def counted(sql, params=()):
        bulk.append(sql)
        return await real(sql, params)

    store._bulk_rows = counted
    await mem.stats()
    assert len(bulk) == 4  # counts, then the KPI totals' three reads
    assert store._sides["bulk"] not in (store.conn, store._sides.get("reads"))
    rows = await store.reflection_rows(mem.role, None, 10)
    assert len(rows) == 1 and len(bulk) == 5
    counts = await store.counts(Scope(owner=mem.engine.settings.owner))
    assert counts.total == 1 and len(bulk) == 6


async def test_no_read_connection_opens_once_the_store_is_closed(store_path):
    """A connection's thread keeps the process alive: one opened by a read arriving after
    `close` (a late background task) would never be closed."""
    store = await SQLiteStore.open(store_path)
    await store.get_meta("probe")  # opens the read connection on the event loop's thread
    assert store._here is not None and store._sides == {}
    await store.close()
    assert store._here is None
    with pytest.raises(StoreUnavailable, match="closed"):
        await store._bulk_rows("SELECT 1")
    assert store._sides == {}
