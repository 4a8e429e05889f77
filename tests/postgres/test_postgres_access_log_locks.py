"""The access log cannot deadlock with a write holding rows in another order.

A write takes its rows in several statements, in no one order (the row a repeat found, then
its near-duplicates, link targets, …). The access log took the rows it logs in id order, in one
statement: holding the first, it waited for the next, which the write held and which, next,
asked for the first. PostgreSQL aborted one of them (a stress run of nine workers lost logs
after all their attempts). The log now takes at once only the rows nobody holds, and waits for
each held row alone: while it waits, it holds nothing.
"""

from __future__ import annotations

import threading
import time

import anyio
import psycopg
import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.domain.kinds import Channel
from nooa_mcp.embeddings import HashEmbedder

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


def _write_in_other_order(
    url: str, first: str, then: str, locked: threading.Event, outcome: list[str]
) -> None:
    """Another server's write: `first` locked, then — once a transaction waits on it —
    `then` (lower in id order), committed; `outcome` gets "committed" or the error's name."""
    with psycopg.connect(url) as conn, psycopg.connect(url, autocommit=True) as watch:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        conn.execute("SELECT id FROM memories WHERE id = %s FOR UPDATE", (first,))
        locked.set()
        deadline = time.monotonic() + 10
        while not watch.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", (pid,)
        ).fetchone()[0]:
            if time.monotonic() > deadline:
                outcome.append("nobody waited")
                return
            time.sleep(0.02)
        try:
            conn.execute("SELECT id FROM memories WHERE id = %s FOR UPDATE", (then,))
            conn.commit()
            outcome.append("committed")
        except psycopg.Error as exc:
            outcome.append(type(exc).__name__)


async def test_a_log_and_a_write_taking_rows_in_other_orders_both_commit(postgres) -> None:
    settings = Settings(store=postgres, owner="alice@a", reflect_every_writes=0)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        low, high = sorted(
            [
                (await mem.author("The boiler key hangs behind the pantry door")).id,
                (await mem.author("The spare fuse box is in the cellar")).id,
            ]
        )
        caller = mem._caller
        store = mem.engine.store
        access = caller.access(Channel.recalled, query="keys")
        before = {i: len(await mem.access_log(i)) for i in (low, high)}

        def apply(states):
            for state in states.values():
                caller.apply(state, access)
            return [(i, access) for i in states]

        locked, outcome = threading.Event(), []
        writer = threading.Thread(
            target=_write_in_other_order, args=(postgres, high, low, locked, outcome)
        )
        writer.start()
        try:
            assert await anyio.to_thread.run_sync(locked.wait, 10)
            with anyio.fail_after(20):
                written = await store.log_uses([low, high], apply)
        finally:
            await anyio.to_thread.run_sync(writer.join)
        assert outcome == ["committed"]
        assert set(written) == {low, high}
        after = {i: len(await mem.access_log(i)) for i in (low, high)}
        assert after == {i: before[i] + 1 for i in (low, high)}
