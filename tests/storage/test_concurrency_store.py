"""One store file, several connections, many coroutines per connection (DESIGN.md §15).

A server process shares one aiosqlite connection between every request it serves, while other
processes commit to the same file. A read left half-done on that connection holds an old WAL
snapshot; a `BEGIN IMMEDIATE` issued beside it cannot take the write lock from a stale snapshot
and fails at once with "database is locked", whatever `busy_timeout` says. These tests drive
that interleaving hard through the Store API and require every transaction to go through.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from nooa_mcp.storage.sqlite import SQLiteStore as Store

pytestmark = pytest.mark.anyio

ROUNDS = 60


async def _fill(store: Store, rows: int) -> None:
    async with store.transaction():
        await store.conn.executemany(
            "INSERT INTO meta(key, value) VALUES (?, ?)",
            [(f"seed{i}", "x" * 50) for i in range(rows)],
        )


async def test_transactions_beside_reads_survive_commits_from_another_connection(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memory.sqlite"
    shared = await Store.open(path)  # one process's connection, shared by its requests
    other = await Store.open(path)  # another process on the same file
    committed = 0
    try:
        await _fill(shared, 200)

        async def reader() -> None:
            for _ in range(ROUNDS):
                assert len(await shared._rows("SELECT key FROM meta")) >= 200
                assert await shared._scalar("SELECT count(*) FROM meta") >= 200

        async def writer(name: str) -> None:
            nonlocal committed
            for i in range(ROUNDS):
                async with shared.transaction():
                    await shared.set_meta(f"{name}{i}", "v")
                committed += 1

        async def elsewhere() -> None:
            for i in range(ROUNDS * 2):
                async with other.transaction():
                    await other.set_meta(f"other{i}", "v")

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(reader)
            for n in range(2):
                tg.start_soon(writer, f"w{n}")
            tg.start_soon(elsewhere)
    finally:
        await shared.close()
        await other.close()
    assert committed == 2 * ROUNDS
