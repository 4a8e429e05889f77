"""WAL checkpoints run in a thread of their own, never inside a commit a call waits on."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest

from nooa_mcp import Memory
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.storage import checkpoints

pytestmark = pytest.mark.anyio

#: Over SQLite's automatic threshold (1,000 pages of 4 KB) in one burst of commits.
TEXT = "a long note about the deployment of service {i}: " + "details " * 500


def wal(path):
    return path.with_name(path.name + "-wal")


async def test_commits_leave_the_log_to_the_checkpoint_thread(settings, monkeypatch):
    """Before: the commit that found the log over 1,000 pages copied it into the file (and a
    recall's access log paid it, 150-200 ms at 100k). Now the file does not move until the
    thread checkpoints, and nothing written is lost on the way."""
    monkeypatch.setattr(checkpoints, "CHECKPOINT_SECONDS", 3600.0)  # no tick during the test
    path = settings.store
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        store = mem.engine.store
        assert (await store.conn.execute_fetchall("PRAGMA wal_autocheckpoint"))[0][0] == 0
        store._checkpointer.checkpoint()
        before = path.stat().st_size
        for start in range(0, 600, 100):
            await mem.author_many(
                [{"content": TEXT.format(i=i)} for i in range(start, start + 100)]
            )
        assert wal(path).stat().st_size > 1000 * 4096
        assert path.stat().st_size == before  # every page still only in the log
        store._checkpointer.checkpoint()
        assert path.stat().st_size > before + 2_000_000
        assert store._checkpointer.running
    # Closed: the thread stopped, the last connection emptied the log into the file.
    assert store._checkpointer is None
    assert not wal(path).exists() or wal(path).stat().st_size == 0
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 600


async def test_the_thread_checkpoints_every_tick_and_stops_with_the_store(settings, monkeypatch):
    monkeypatch.setattr(checkpoints, "CHECKPOINT_SECONDS", 0.02)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        checkpointer = mem.engine.store._checkpointer
        await mem.author("the build server moved to the basement")
        deadline = time.monotonic() + 10
        while checkpointer.runs < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert checkpointer.runs >= 3
    assert not checkpointer.running
    assert mem.engine.store._checkpointer is None


async def test_without_a_checkpoint_thread_sqlite_keeps_checkpointing_in_commits(
    settings, monkeypatch, caplog
):
    """The log is never left without a checkpoint: if the thread's connection cannot be
    opened, the store keeps SQLite's own (and says so in the log)."""

    def refuse(self):
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(checkpoints.Checkpointer, "start", refuse)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        store = mem.engine.store
        assert store._checkpointer is None
        assert (await store.conn.execute_fetchall("PRAGMA wal_autocheckpoint"))[0][0] == 1000
        await mem.author("the build server moved to the basement")
    assert "no checkpoint thread" in caplog.text


@asynccontextmanager
async def long_log(settings, monkeypatch) -> AsyncIterator[tuple[Memory, list]]:
    """A store whose ticks run by hand, with a log past a 64-page restart line: 40 long
    memories written, none of it copied yet."""
    monkeypatch.setattr(checkpoints, "CHECKPOINT_SECONDS", 3600.0)  # ticks by hand
    monkeypatch.setattr(checkpoints, "RESTART_PAGES", 64)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        authored = await mem.author_many([{"content": TEXT.format(i=i)} for i in range(40)])
        assert wal(settings.store).stat().st_size > 64 * 4096
        yield mem, authored


async def test_a_long_log_is_started_again_by_the_tick_when_no_write_holds_it(
    settings, monkeypatch
):
    async with long_log(settings, monkeypatch) as (mem, _):
        checkpointer = mem.engine.store._checkpointer
        checkpointer.checkpoint()
        assert checkpointer.restarts == 1 and not checkpointer.long_log
        assert wal(settings.store).stat().st_size == 0  # copied, then truncated
        await mem.author("the build server moved to the basement")
    with sqlite3.connect(settings.store) as conn:
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 41


async def test_a_long_log_the_writes_never_pause_for_is_started_again_by_the_next_write(
    settings, monkeypatch
):
    """SQLite starts its log again only when a write begins with every frame copied. A tick
    that lands inside a transaction copies all but that transaction's frames, and when
    writes follow each other (a pass, an import) the next one begins before any tick comes
    back: the log grew to 3.2 GB over a 100k pass. The tick cannot take the lock from a busy
    writer, so the store's next transaction restarts the log before it begins."""
    async with long_log(settings, monkeypatch) as (mem, authored):
        store = mem.engine.store
        checkpointer = store._checkpointer
        ids = [a.id for a in authored]
        async with store.transaction():
            await store.set_importance(ids[0], importance=7.0)
            # The tick, inside the transaction: it copies what was committed and finds the
            # log long, and its restart gives up waiting for the writer.
            await anyio.to_thread.run_sync(checkpointer.checkpoint)
        assert checkpointer.long_log and checkpointer.restarts == 0
        long = wal(settings.store).stat().st_size
        assert long > 64 * 4096
        async with store.transaction():
            await store.set_importance(ids[1], importance=6.0)
        assert checkpointer.restarts == 1 and not checkpointer.long_log
        # Started again from its beginning: only the last transaction's frames are in it.
        assert wal(settings.store).stat().st_size < 16 * 4096 < long
        assert (await store.fetch(ids[0])).importance == 7.0
        assert (await store.fetch(ids[1])).importance == 6.0


async def test_a_reader_that_keeps_the_log_costs_one_try_a_tick_not_one_a_write(
    settings, monkeypatch
):
    """While another connection reads an old snapshot, the log cannot start again: the tick
    and then the next transaction each try once and give up, and the writes after that go on
    without waiting; once the reader is gone the next tick starts the log again."""
    async with long_log(settings, monkeypatch) as (mem, authored):
        store = mem.engine.store
        checkpointer = store._checkpointer
        reader = sqlite3.connect(settings.store, isolation_level=None)
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM memories").fetchone()[0] == 40
        checkpointer.checkpoint()
        assert checkpointer.long_log and checkpointer.restarts == 0  # the reader kept it
        assert checkpointer.tries == 1
        async with store.transaction():  # tries once, gives up
            await store.set_importance(authored[0].id, importance=7.0)
        assert not checkpointer.long_log and checkpointer.restarts == 0
        assert checkpointer.tries == 2
        for i in (1, 2):  # no try
            async with store.transaction():
                await store.set_importance(authored[i].id, importance=6.0)
        assert checkpointer.tries == 2 and checkpointer.restarts == 0
        reader.execute("COMMIT")
        reader.close()
        checkpointer.checkpoint()
        assert checkpointer.restarts == 1 and not checkpointer.long_log
        assert checkpointer.tries == 3
        assert wal(settings.store).stat().st_size == 0


async def test_a_write_does_not_wait_for_a_tick_that_is_copying(settings, monkeypatch):
    """The store asks for the restart under its write lock: were it to wait for a tick's
    copy (seconds of a long log), every write of the process would wait too. While the tick
    runs, the tick tries the restart itself; the write goes on and leaves the flag to it."""
    async with long_log(settings, monkeypatch) as (mem, authored):
        store = mem.engine.store
        checkpointer = store._checkpointer
        checkpointer.long_log = True
        released, written = threading.Event(), threading.Event()
        checkpointer._lock.acquire()  # a tick, mid-copy

        def finish_the_tick() -> None:
            written.wait(5)  # a write that waited for the tick is let go after 5 s
            released.set()
            checkpointer._lock.release()

        tick = threading.Thread(target=finish_the_tick)
        tick.start()
        try:
            async with store.transaction():
                await store.set_importance(authored[0].id, importance=7.0)
            assert not released.is_set()  # it did not wait for the tick
            assert checkpointer.tries == 0 and checkpointer.long_log  # left to the tick
        finally:
            written.set()
            await anyio.to_thread.run_sync(tick.join)
        assert (await store.fetch(authored[0].id)).importance == 7.0
