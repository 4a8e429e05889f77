"""A write whose COMMIT reached PostgreSQL but whose answer was lost is reported as "may have
been written; retrying is safe", never as not written, and the retry stores nothing twice.

The connection goes through a TCP proxy in this test that forwards everything, and cuts the
connection right after the database has answered the COMMIT of the transaction that inserted
a memory, before the answer reaches nooa-mcp: the write is in the database, and the server
only knows the connection died during COMMIT. (Before: the reply said "nothing of this call
was written" although the memory was there, as with backends terminated mid-commit.)
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import anyio
import psycopg
import pytest
from mcp import Client

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.errors import CommitUnknown
from nooa_mcp.mcp.server import build_server

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

FACT = "The invoice worker pool restarts at two in the morning."


class CommitCutter:
    """A TCP proxy to PostgreSQL that, once armed, drops the connection carrying the next
    COMMIT of a transaction that inserted into `memories`, after the server answered it."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.armed = False
        self.cuts = 0
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        state = {"insert": False, "commit": False}
        names: set[bytes] = set()

        async def upstream() -> None:
            while data := await reader.read(65536):
                # The INSERT is a prepared statement: its text goes once per connection
                # (Parse: name, then text); later ones name it (Bind: portal, then name).
                for name in re.findall(rb"(_pg3_\d+)\x00INSERT INTO memories", data):
                    names.add(b"\x00" + name + b"\x00")
                if self.armed and (
                    b"INSERT INTO memories" in data or any(n in data for n in names)
                ):
                    state["insert"] = True
                if state["insert"] and b"COMMIT\x00" in data:
                    state["commit"] = True
                up_writer.write(data)
                await up_writer.drain()

        async def downstream() -> None:
            while data := await up_reader.read(65536):
                if state["commit"] and self.armed and b"COMMIT\x00" in data:
                    # The database has committed; its answer is dropped with the connection.
                    self.armed = False
                    self.cuts += 1
                    return
                writer.write(data)
                await writer.drain()

        tasks = [asyncio.create_task(upstream()), asyncio.create_task(downstream())]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            task.cancel()
        for w in (writer, up_writer):
            with contextlib.suppress(Exception):
                w.close()


@pytest.fixture
async def cutter(postgres: str) -> AsyncIterator[tuple[CommitCutter, str]]:
    # The fixture's URL names the test server and a fresh schema; the proxy stands in
    # for the server.
    base = urlsplit(postgres)
    proxy = CommitCutter(base.hostname or "127.0.0.1", base.port or 5432)
    port = await proxy.start()
    netloc = f"{base.username + '@' if base.username else ''}127.0.0.1:{port}"
    query = base.query + "&sslmode=disable&gssencmode=disable"
    try:
        yield proxy, urlunsplit((base.scheme, netloc, base.path, query, ""))
    finally:
        await proxy.close()


def _rows(postgres: str, content: str) -> list[str]:
    with psycopg.connect(postgres, autocommit=True) as conn:
        return [
            r[0] for r in conn.execute("SELECT id FROM memories WHERE content = %s", (content,))
        ]


async def test_a_write_committed_while_the_connection_was_lost_says_it_may_have_been_written(
    cutter: tuple[CommitCutter, str], postgres: str
) -> None:
    proxy, url = cutter
    settings = Settings(store=url, owner="alice")
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as client:
        await client.call_tool("memory_author", {"content": "A first memory opens the pool."})
        proxy.armed = True
        lost = await client.call_tool("memory_author", {"content": FACT})
        assert proxy.cuts == 1
        stored = _rows(postgres, FACT)
        retry = await client.call_tool("memory_author", {"content": FACT})
    text = lost.content[0].text
    assert lost.is_error, text
    assert "may have been written; retrying is safe" in text, text
    assert "nothing" not in text.lower(), text
    assert len(stored) == 1  # it was written
    assert not retry.is_error, retry.content[0].text
    assert (retry.structured_content["status"], retry.structured_content["id"]) == (
        "exists",
        stored[0],
    )
    assert _rows(postgres, FACT) == stored  # the retry stored nothing twice


async def test_a_commit_that_may_have_happened_is_read_back_by_the_next_recall(
    cutter: tuple[CommitCutter, str], postgres: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The services note a write in this process's vector cache only once its commit
    returns. The notification a lost commit sent comes from a connection still claimed as
    this server's own, so it moves nothing; the store marks itself changed as it raises
    CommitUnknown, and the next recall reads the row back from the database.

    Whether the listener hears that notification before or after the lost connection is
    seen closed depends on timing; every notification is taken as this server's own here,
    so only the store's own mark can move the token."""
    proxy, url = cutter
    settings = Settings(store=url, owner="alice", reflect_every_writes=0)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        await mem.author("A first memory opens the pool.")
        store = mem.engine.store
        with anyio.fail_after(10):
            await store.wait_listening()
        monkeypatch.setattr(store, "_is_own", lambda pid: True)
        before = await store.change_token()
        proxy.armed = True
        with pytest.raises(CommitUnknown):
            await mem.author(FACT)
        assert proxy.cuts == 1
        (stored,) = _rows(postgres, FACT)
        assert await store.change_token() != before
        assert mem.engine.index.vector(stored) is None  # not noted: its commit never returned
        result = await mem.recall(FACT, k=3)
        assert result.hits[0].id == stored
        assert mem.engine.index.vector(stored) is not None
