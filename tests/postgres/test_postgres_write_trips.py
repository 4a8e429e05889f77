"""What one `Memory.author` sends to PostgreSQL: the statements a write needs and no more —
no pull of the row it just noted, no re-read of the intents it did not touch, BEGIN with the
first statement, the new row's seq taken there so its INSERT and the access record ride with
the COMMIT, the notification sent right after the COMMIT in the same round trip, the write
path's statements prepared — while another server's commit is still heard and pulled, and an
intent written here still reaches the reminders."""

from __future__ import annotations

import weakref
from typing import Any

import anyio
import psycopg
import pytest

from nooa_mcp.config import Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.memory import Memory
from nooa_mcp.storage.pg_schema import NOTIFY_OWED

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


class Sent:
    """Every statement sent by `execute` or `executemany`, whether it went in a pipeline and
    whether it was sent as a prepared statement (BEGIN and COMMIT, sent by psycopg's
    transaction itself, are not among them; psycopg prepares every executemany)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.statements: list[tuple[str, bool]] = []
        self.prepared: list[bool] = []
        sent, prepared = self.statements, self.prepared
        for name in ("execute", "executemany"):
            original = getattr(psycopg.AsyncCursor, name)

            async def send(
                cur: Any, query: Any, *args: Any, _o: Any = original, _n: str = name, **kw: Any
            ) -> Any:
                text = " ".join((query if isinstance(query, str) else repr(query)).split())
                sent.append((text, cur._conn._pipeline is not None))
                prepared.append(_n == "executemany" or kw.get("prepare") is True)
                return await _o(cur, query, *args, **kw)

            monkeypatch.setattr(psycopg.AsyncCursor, name, send)

    def take(self) -> list[tuple[str, bool]]:
        out = list(self.statements)
        self.statements.clear()
        return out

    def all_prepared(self) -> bool:
        out = all(self.prepared)
        self.prepared.clear()
        return out


class Trips:
    """Round trips to PostgreSQL: each statement, BEGIN and COMMIT sent outside a pipeline,
    and each pipeline (its statements, a BEGIN or COMMIT inside it, go together)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n = 0
        for owner, name in (
            (psycopg.AsyncCursor, "execute"),
            (psycopg.AsyncTransaction, "__aenter__"),
            (psycopg.AsyncTransaction, "__aexit__"),
            (psycopg.AsyncPipeline, "__aexit__"),
        ):
            original = getattr(owner, name)

            async def counted(obj: Any, *args: Any, _o: Any = original, **kwargs: Any) -> Any:
                if isinstance(obj, psycopg.AsyncPipeline) or obj._conn._pipeline is None:
                    self.n += 1
                return await _o(obj, *args, **kwargs)

            monkeypatch.setattr(owner, name, counted)

    def take(self) -> int:
        out, self.n = self.n, 0
        return out


async def test_an_author_sends_only_its_write_and_a_foreign_commit_is_still_pulled(
    postgres, monkeypatch
) -> None:
    settings = Settings(store=postgres, owner="coder@laptop", reflect_every_writes=0)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        store = mem.engine.store
        with anyio.fail_after(10):
            await store.wait_listening()
        for i in range(3):  # the first writes read the vectors and the intents once
            await mem.author(f"warm-up note number {i} about the harbour")
        sent = Sent(monkeypatch)
        trips = Trips(monkeypatch)
        for i in range(4):
            await mem.author(f"the ferry leaves pier {i} at dawn")
            # BEGIN with the lock, lookup, tombstone check and the new row's seq; the INSERT,
            # the access record, COMMIT and the notification: two round trips.
            assert trips.take() == 2
            await anyio.sleep(0.05)  # its own NOTIFY comes back meanwhile, and is not a change
            statements = sent.take()
            texts = [text for text, _ in statements]
            assert all(pipelined for _, pipelined in statements), texts
            assert "pg_advisory_xact_lock" in texts[0]
            assert "content_hash" in texts[1] and "tombstones" in texts[2]
            assert "nextval" in texts[3]
            assert texts[4].startswith("INSERT INTO memories (seq,")
            assert texts[5].startswith("INSERT INTO accesses")
            # The notification it owes, after the COMMIT, in the COMMIT's pipeline.
            assert texts[6] == NOTIFY_OWED, texts
            assert len(statements) == 7, texts
            # Each planned once per connection, not once per write.
            assert sent.all_prepared()
            assert not any("pg_snapshot" in t for t in texts), texts  # no pull of itself
            assert not any("type = 'intent'" in t for t in texts), texts  # intents kept
            assert trips.take() == 0  # and nothing behind the reply
        # Another server's commit is heard and pulled before the next write checks for twins.
        before = await store.change_token()
        async with Memory.open(
            settings=Settings(store=postgres, owner="coder@desktop"), embedder=HashEmbedder()
        ) as other:
            elsewhere = await other.author("a note written by the other server")
        with anyio.fail_after(10):
            await store.wait_changed(before)
        again = await mem.author("a note written by the other server")
        assert again.status == "exists" and again.id == elsewhere.id
        assert mem.engine.index.ids.get(elsewhere.id) is not None
        assert any("pg_snapshot" in t for t, _ in sent.take())


async def test_a_batch_sends_each_item_with_the_rows_held_back_before_it(
    postgres, monkeypatch
) -> None:
    """In `author_many` each item's INSERT and access record wait for the next item's lookup
    and go in its pipeline (no round trip of their own); the last ride with the COMMIT."""
    settings = Settings(store=postgres, owner="coder@laptop", reflect_every_writes=0)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        for i in range(3):
            await mem.author(f"warm-up note number {i} about the harbour")
        trips = Trips(monkeypatch)
        results = await mem.author_many([{"content": f"batch note {i} on tides"} for i in range(4)])
        assert trips.take() == 4 + 1
        assert [r.status for r in results] == ["created"] * 4
    with psycopg.connect(postgres) as conn:
        found = conn.execute(
            "SELECT count(*) FROM memories m JOIN accesses a ON a.memory_id = m.id "
            "WHERE m.content LIKE 'batch note %'"
        ).fetchone()
    assert found == (4,)


async def test_an_intent_authored_here_fires_on_the_next_cue(postgres) -> None:
    """The intents are cached across writes of other memories: an intent's own write must
    still reach them (its commit is this process's, heard from no NOTIFY)."""
    settings = Settings(store=postgres, owner="coder@laptop", reflect_every_writes=0)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        await mem.author("an ordinary note about lunch")
        assert await mem.engine.intents("coder") == []
        intent = await mem.author(
            "Remind me to renew the parking permit", type="intent", trigger={"cue": "parking"}
        )
        await mem.author("a second ordinary note")
        cached = await mem.engine.intents("coder")
        assert [m.id for m in cached] == [intent.id]
        fired = await mem.author("where is the parking garage")
        assert [r.intent_id for r in fired.reminders] == [intent.id]


async def test_an_author_is_acknowledged_only_once_committed(postgres) -> None:
    """The COMMIT rides a pipeline with the held-back access record and the notification;
    the reply still waits for its answer: another connection sees the row at once."""
    settings = Settings(store=postgres, owner="coder@laptop", reflect_every_writes=0)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        for i in range(3):
            result = await mem.author(f"a note committed before its reply, number {i}")
            # A blocking connection: nothing of the server runs until it has answered.
            with psycopg.connect(postgres) as conn:
                found = conn.execute(
                    "SELECT count(*) FROM memories WHERE id = %s", (result.id,)
                ).fetchone()
                accesses = conn.execute(
                    "SELECT count(*) FROM accesses WHERE memory_id = %s", (result.id,)
                ).fetchone()
            assert (found, accesses) == ((1,), (1,))


async def test_a_transaction_sends_begin_with_its_first_statement_and_nothing_when_empty(
    postgres, monkeypatch
) -> None:
    from nooa_mcp.domain.accesses import created_record
    from nooa_mcp.domain.schema import Memory as Record
    from nooa_mcp.storage import open_store

    store = await open_store(postgres)
    try:
        with anyio.fail_after(10):
            await store.wait_listening()  # its LISTEN is no statement of the transactions
        await store.get_meta("warm")
        trips = Trips(monkeypatch)
        async with store.transaction():
            pass
        assert trips.take() == 0  # nothing sent, nothing to commit
        async with store.transaction():
            assert await store.get_meta("k") is None
            await store.set_meta("k", "v")
        assert trips.take() == 3  # BEGIN + read, write, COMMIT
        record = Record(content="held back", owner="coder@laptop")
        async with store.transaction():
            await store.append_accesses([(record.id, created_record(record, "coder@laptop"))])
        # Only held-back writes: BEGIN (and them) first, so a lost connection there is
        # never mistaken for a lost COMMIT; then COMMIT.
        assert trips.take() == 2
        assert await store.count_accesses(record.id) == 1
    finally:
        await store.close()


async def test_a_transaction_whose_pooled_connection_died_begins_on_a_fresh_one(
    postgres,
) -> None:
    """BEGIN rides the first statement, so a connection that died while pooled is found
    there, not by a BEGIN of its own: that first trip is sent again on a fresh connection."""
    from nooa_mcp.storage import open_store

    app = "nooa_lazy_begin_test"
    store = await open_store(f"{postgres}&application_name={app}")
    try:
        await store.get_meta("warm")
        with psycopg.connect(postgres, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND query NOT ILIKE 'LISTEN%%'",
                (app,),
            ).fetchall()
        assert killed and all(ok for (ok,) in killed)
        async with store.transaction():
            assert await store.get_meta("after") is None
            await store.set_meta("after", "restart")
        assert await store.get_meta("after") == "restart"
    finally:
        await store.close()


async def test_an_insert_refused_at_the_commit_writes_nothing_and_the_seq_is_the_rows(
    postgres,
) -> None:
    """The INSERT rides with the COMMIT (its seq was taken in the first round trip), so the
    database refuses it only there: the call fails with the database's own error, nothing of
    it or of its batch is stored, the vector cache forgets it, and the next write goes on.
    A seq taken for a repeat that inserted nothing is a gap, never another row's number."""
    settings = Settings(store=postgres, owner="coder@laptop", reflect_every_writes=0)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        kept = await mem.author("a note that is kept")
        again = await mem.author("a note that is kept")  # a repeat: its seq goes unused
        assert (again.status, again.id) == ("exists", kept.id)
        with psycopg.connect(postgres, autocommit=True) as conn:
            conn.execute(
                "ALTER TABLE memories ADD CONSTRAINT no_refusals "
                "CHECK (content NOT LIKE '%refused%')"
            )
        with pytest.raises(psycopg.errors.CheckViolation):
            await mem.author("a refused note")
        for i in range(10):  # the refusal reaches this process before or after its COMMIT
            with pytest.raises(psycopg.errors.CheckViolation):
                await mem.author_many(
                    [{"content": f"first of batch {i}"}, {"content": f"refused second {i}"}]
                )
        after = await mem.author("a note written after the refusals")
        with psycopg.connect(postgres) as conn:
            rows = conn.execute("SELECT seq, id, content FROM memories ORDER BY seq").fetchall()
            accesses = conn.execute(
                "SELECT memory_id, count(*) FROM accesses GROUP BY memory_id ORDER BY 1"
            ).fetchall()
        assert [content for _, _, content in rows] == [
            "a note that is kept",
            "a note written after the refusals",
        ]
        written = {memory_id for _, memory_id, _ in rows}
        assert {memory_id for memory_id, _ in accesses} == written
        assert dict(accesses)[kept.id] == 2  # created, then reinforced
        index = mem.engine.index
        refused = set(index.ids) - written
        assert len(refused) == 21  # noted while written, then withdrawn from every search
        assert not any(index.has_vector[index.ids.get(memory_id)] for memory_id in refused)
        for seq, memory_id, _ in rows:  # the cache numbers each row as the database does
            assert index.seqs[index.ids.get(memory_id)] == seq
        assert rows[1][0] > rows[0][0] + 1  # the repeat's seq was not reused: a gap
        assert after.status == "created"


async def test_a_recall_after_recalls_is_one_round_trip(postgres, monkeypatch) -> None:
    """The rows shown, no more: the keyword search runs on the postings the process holds
    (`storage.postings`), and the previous recall's access log (committed behind its reply,
    notifying other servers of the uses) is this process's own, and sends its next recall
    on no sync of the feeds or the postings."""
    settings = Settings(store=postgres, owner="coder@laptop", reflect_every_writes=0)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as writer:
        for i in range(6):
            await writer.author(f"the ferry leaves pier {i} at dawn")
    # A server that only recalls: none of its connections ever committed a row.
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        store = mem.engine.store
        with anyio.fail_after(10):
            await store.wait_listening()
            await mem.engine.keywords_loaded()
        for _ in range(2):
            await mem.recall("ferry pier", k=3)
            await mem.engine.flush()
        await anyio.sleep(0.2)  # its own notifications come back meanwhile, and are not changes
        trips = Trips(monkeypatch)
        result = await mem.recall("ferry dawn", k=3)
        assert result.hits and result.hits[0].components.source == "both"
        assert trips.take() == 1


async def test_a_commit_heard_back_before_its_call_resumes_is_this_servers_own(
    postgres, monkeypatch
) -> None:
    """The notification a commit sends can reach this server's listener before the call
    that committed resumes (a loaded machine). It is this server's own all the same: its
    connection is claimed before the COMMIT goes. Claimed after, a pooled connection's
    first commit was taken for another server's, and the next recall synced every feed
    (the test above failed 2 runs in 10 on 2 loaded cores: 6 round trips, not 2)."""
    from nooa_mcp.storage.postgres import PostgresStore

    settings = Settings(store=postgres, owner="coder@laptop", reflect_every_writes=0)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        store = mem.engine.store
        kept = await mem.author("the ferry leaves pier 9 at dawn")
        other = await mem.author("the bakery opens at six")
        spare = [(await mem.author(f"the bus leaves stop {i} at noon")).id for i in range(3)]
        with anyio.fail_after(10):
            await store.wait_listening()
            await mem.engine.keywords_loaded()
        real, real_is_own = PostgresStore._commit, store._is_own
        heard: list[int] = []
        stall = False

        def is_own(pid: int) -> bool:
            heard.append(pid)
            return real_is_own(pid)

        async def commit_then_stall(self: Any, tx: Any) -> None:
            await real(self, tx)
            if stall:  # until the listener has heard this commit's notification
                while tx.conn.info.backend_pid not in heard:
                    await anyio.sleep(0.01)

        monkeypatch.setattr(store, "_is_own", is_own)
        monkeypatch.setattr(PostgresStore, "_commit", commit_then_stall)
        await anyio.sleep(0.3)
        before = await store.change_token()
        # Every connection the pool has open is held (the keyword postings' background
        # read may have opened a second one beside the writes above).
        size = store.pool.get_stats()["pool_size"]
        assert size <= 4
        held, done = [anyio.Event() for _ in range(size)], anyio.Event()

        async def hold_a_connection(mine: anyio.Event, memory_id: str) -> None:
            async with store.transaction():
                await store.access_states([memory_id])  # leases its connection now
                mine.set()
                await done.wait()

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                for mine, memory_id in zip(held, [other.id, *spare], strict=False):
                    tg.start_soon(hold_a_connection, mine, memory_id)
                for mine in held:
                    await mine.wait()
                fresh = set(store._own_pids)
                stall = True
                async with store.transaction():  # on a connection the pool opens for it
                    await store.set_importance(kept.id, importance=7.0)
                stall = False
                assert set(store._own_pids) - fresh  # one that had not committed before
                done.set()
        await anyio.sleep(0.3)
        assert await store.change_token() == before


async def test_a_pid_a_closed_connection_had_is_claimed_again_by_the_new_one(postgres) -> None:
    """PostgreSQL reuses the pids of closed backends. A pooled connection that reuses one
    this server once claimed is this server's own all the same: kept as the old, closed
    entry, its notifications were taken for another server's (every feed synced)."""
    from nooa_mcp.storage import open_store

    store = await open_store(postgres)
    try:
        old = await psycopg.AsyncConnection.connect(postgres)
        await old.close()
        new = await psycopg.AsyncConnection.connect(postgres)
        try:
            pid = new.info.backend_pid
            store._own_pids[pid] = weakref.ref(old)  # as if `old` had had this pid
            store._own_connection(new)
            assert store._is_own(pid)
        finally:
            await new.close()
        assert not store._is_own(pid)  # closed since: no longer this server's
    finally:
        await store.close()


async def test_a_commit_on_a_connection_the_pool_retires_is_acknowledged(postgres) -> None:
    """The pool closes a connection past its lifetime as it comes back. The commit is counted
    as this server's own before that: counted after, reading the closed connection's pid
    raised, and a write that had committed was reported as "may have been written"."""
    settings = Settings(store=postgres, owner="coder@laptop", reflect_every_writes=0)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        store = mem.engine.store
        kept = await mem.author("the ferry leaves pier 9 at dawn")
        async with store.transaction():
            await store.set_importance(kept.id, importance=7.0)
            conn = store._tx()
            conn._expire_at = 0.0  # past its lifetime: the pool closes it on return
        assert conn.closed
        assert (await store.fetch(kept.id)).importance == 7.0
