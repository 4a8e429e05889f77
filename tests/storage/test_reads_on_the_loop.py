"""SQLite reads apart from the writes run on the event loop's thread (DESIGN §15): a recall
hops to no connection thread, sees only what was committed, and a busy file still answers."""

import sqlite3

import aiosqlite
import pytest

from nooa_mcp import Memory
from nooa_mcp.errors import StoreUnavailable
from nooa_mcp.storage.sqlite import SQLiteStore as Store

pytestmark = pytest.mark.anyio


class Hops:
    """Counts the jobs handed to aiosqlite's connection threads."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = aiosqlite.Connection._execute

        async def counted(conn, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
            self.count += 1
            return await original(conn, fn, *args, **kwargs)

        monkeypatch.setattr(aiosqlite.Connection, "_execute", counted)


async def test_a_recall_makes_no_hop_to_a_connection_thread(mem: Memory, monkeypatch) -> None:
    for text in ("The staging database restarts at midnight.", "Deploys go out on Tuesdays."):
        await mem.author(text, links=[])
    await mem.recall("when does staging restart?")
    await mem.engine.flush()
    hops = Hops(monkeypatch)
    result = await mem.recall("when does the staging database restart?")
    assert result.hits and "staging" in result.hits[0].content
    assert hops.count == 0
    # The access log behind the reply is a write: it still goes to the store's connection.
    await mem.engine.flush()
    assert hops.count > 0


async def test_a_read_on_the_loop_sees_commits_of_other_connections(store_path) -> None:
    store = await Store.open(store_path)
    try:
        before = await store.change_token()
        await store._scalar("SELECT count(*) FROM memories")
        other = sqlite3.connect(store_path)
        other.execute("INSERT INTO meta(key, value) VALUES ('probe', 'x')")
        other.commit()
        other.close()
        assert await store._scalar("SELECT value FROM meta WHERE key = 'probe'") == "x"
        assert await store.change_token() != before
    finally:
        await store.close()


class BusyFile:
    """A connection whose every statement finds the file busy, as SQLite reports it."""

    def __init__(self) -> None:
        self.tried = 0

    def execute(self, sql: str, params: object = ()) -> None:
        self.tried += 1
        exc = sqlite3.OperationalError("database is locked")
        exc.sqlite_errorcode = sqlite3.SQLITE_BUSY_RECOVERY  # type: ignore[attr-defined]
        raise exc


async def test_a_busy_file_is_read_on_the_reads_thread(store_path) -> None:
    """The loop's read waits only briefly on a busy file; the "reads" thread then waits the
    store's full busy timeout, so the read answers instead of failing."""
    store = await Store.open(store_path)
    try:
        await store._scalar("SELECT count(*) FROM memories")  # the loop's connection is open
        busy = BusyFile()
        store._here = busy  # type: ignore[assignment]
        assert await store._scalar("SELECT count(*) FROM memories") == 0
        assert isinstance(await store.change_token(), int)
        assert busy.tried == 2
    finally:
        store._here = None
        await store.close()


async def test_a_read_that_fails_otherwise_names_the_store(store_path) -> None:
    store = await Store.open(store_path)
    try:
        with pytest.raises(StoreUnavailable) as info:
            await store._scalar("SELECT nothing FROM nowhere")
        assert "memory.sqlite" in str(info.value)
    finally:
        await store.close()
