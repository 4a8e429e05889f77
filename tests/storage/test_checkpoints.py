"""WAL checkpoints run in a thread of their own, never inside a commit a call waits on."""

from __future__ import annotations

import sqlite3
import time

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
