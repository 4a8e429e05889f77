"""A write with `revive=true` that meets a forget committing under it revives the memory.

PostgreSQL runs the two side by side: the write found the memory live by its words (a snapshot
taken before the forget committed), waited for the forget's row lock, and then took the row it
read locked, forgotten by now, as an exact repeat: it answered `exists` and the memory stayed
forgotten, while the author had asked for it back. A repeat is of a live memory only: the row as
locked is checked again, and a forgotten one is a tombstone's business (revived here, refused
without `revive`), as if the forget had committed before the write began.
"""

from __future__ import annotations

import threading

import anyio
import psycopg
import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

TEXT = "The boiler key hangs behind the pantry door"


def _open(url: str) -> Memory:
    return Memory.open(settings=Settings(store=url, owner="alice@a"), embedder=HashEmbedder())


def _forget_held(url: str, memory_id: str, locked: threading.Event, go: threading.Event) -> None:
    """Another process's forget: the row archived and its tombstone written, committed only
    once `go` is set (the row stays locked until then)."""
    with psycopg.connect(url) as conn:
        conn.execute(
            "UPDATE memories SET archived = true, archived_at = extract(epoch from now()), "
            "faded = false WHERE id = %s",
            (memory_id,),
        )
        conn.execute(
            "INSERT INTO tombstones(memory_id, owner, role, type, content_hash, embedding, "
            "reason, ts) SELECT id, owner, role, type, content_hash, embedding, 'forgotten', "
            "extract(epoch from now()) FROM memories WHERE id = %s",
            (memory_id,),
        )
        locked.set()
        go.wait(30)
        conn.commit()


@pytest.mark.parametrize("revive", [True, False])
async def test_a_write_waiting_on_a_forget_meets_the_forgotten_memory(postgres, revive) -> None:
    async with _open(postgres) as mem:
        key = (await mem.author(TEXT)).id
        await mem.wait_ready()
        locked, go = threading.Event(), threading.Event()
        forget = threading.Thread(target=_forget_held, args=(postgres, key, locked, go))
        forget.start()
        try:
            assert await anyio.to_thread.run_sync(locked.wait, 30)

            async def release() -> None:
                await anyio.sleep(0.5)  # the write is waiting on the row by then
                go.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(release)
                result = await mem.author(TEXT, revive=revive)
        finally:
            go.set()
            await anyio.to_thread.run_sync(forget.join)
        got = await mem.get(key)
        if revive:
            assert (result.id, result.status) == (key, "revived")
            assert not got.archived
        else:
            assert (result.id, result.status) == (key, "blocked-by-tombstone")
            assert got.archived
