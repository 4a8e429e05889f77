"""What only the PostgreSQL store has to get right: late commits, rollbacks, lost connections,
its schema and text search configuration, and its error sentences."""

from __future__ import annotations

import anyio
import numpy as np
import psycopg
import pytest

from nooa_mcp.domain.schema import Memory
from nooa_mcp.domain.scope import Scope
from nooa_mcp.errors import StoreConflict, StoreUnavailable
from nooa_mcp.storage import open_store
from nooa_mcp.storage.pg_schema import SCHEMA_VERSION, TS_CONFIG, notify_channel
from nooa_mcp.storage.postgres import PostgresStore

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

CODER = Scope(roles=frozenset({"coder"}))


@pytest.fixture
def store_target(postgres):
    """PostgreSQL only: the `store` fixture (tests/conftest.py) opens a fresh schema."""
    return postgres


def raw_insert(conn: psycopg.Connection, content: str) -> str:
    memory = Memory(content=content, owner="coder@laptop")
    conn.execute(
        "INSERT INTO memories (id, type, owner, role, content, content_hash, importance, "
        "salience, confidence, created_at, last_accessed_at, embedding) VALUES "
        "(%s, 'info', 'coder@laptop', 'coder', %s, %s, 5, 0.3, 0.75, 0, 0, %s)",
        (memory.id, content, memory.content_hash, np.ones(4, np.float32).tobytes()),
    )
    return memory.id


async def test_a_row_whose_transaction_commits_late_is_still_pulled(store, postgres) -> None:
    """A counter would miss it: the late row's transaction began before rows that committed
    first and were already read."""
    with psycopg.connect(postgres) as late:
        early_id = raw_insert(late, "begun first, committed last")  # not committed yet
        with psycopg.connect(postgres, autocommit=True) as other:
            prompt = [raw_insert(other, f"committed at once {i}") for i in range(3)]
        got, mark = await store.vector_changes(None, 100)
        assert [r.id for r in got] == prompt
        late.commit()
    got, mark = await store.vector_changes(mark, 100)
    assert [r.id for r in got] == [early_id]
    got, _ = await store.vector_changes(mark, 100)
    assert got == []


async def test_rows_of_a_rolled_back_transaction_never_appear(store, postgres) -> None:
    _, mark = await store.vector_changes(None, 100)
    with psycopg.connect(postgres) as conn:
        raw_insert(conn, "never committed")
        conn.rollback()
    got, _ = await store.vector_changes(mark, 100)
    assert got == []


async def test_logging_reads_does_not_move_the_revision_other_caches_pull(store) -> None:
    memory = Memory(content="read often", owner="coder@laptop")
    async with store.transaction():
        await store.insert(memory, np.ones(4, np.float32))
    _, mark = await store.vector_changes(None, 100)
    async with store.transaction():
        fetched = await store.fetch(memory.id)
        fetched.access_count += 1
        fetched.strength += 1
        await store.save_accesses([fetched])
    assert (await store.vector_changes(mark, 100))[0] == []
    async with store.transaction():
        await store.set_archived(memory.id, True, fetched.created_at)
    assert [r.archived for r in (await store.vector_changes(mark, 100))[0]] == [True]


async def test_the_change_token_keeps_moving_while_the_listener_is_gone(postgres) -> None:
    app = "nooa_listener_test"
    store = await open_store(f"{postgres}&application_name={app}")
    try:
        with anyio.fail_after(10):
            await store.wait_listening()
        with psycopg.connect(postgres, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND query ILIKE %s",
                (app, f"LISTEN%{notify_channel(store.schema)}%"),
            ).fetchall()
        assert killed == [(True,)]
        with anyio.fail_after(10):
            await store.wait_listening(False)  # the listener notices its connection is gone
            # Down: every token differs, so a cache always looks at the store itself.
            assert await store.change_token() != await store.change_token()
            await store.wait_listening()  # and it reconnects on its own
        before = await store.change_token()
        with psycopg.connect(postgres, autocommit=True) as other:
            raw_insert(other, "heard after the reconnect")
        with anyio.fail_after(5):
            await store.wait_changed(before)
    finally:
        await store.close()


async def test_connections_that_died_in_the_pool_are_replaced(postgres) -> None:
    app = "nooa_pool_test"
    store = await open_store(f"{postgres}&application_name={app}")
    try:
        await store.get_meta("warm")
        with psycopg.connect(postgres, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND query NOT ILIKE 'LISTEN%%'",
                (app,),
            )
        assert await store.get_meta("warm") is None  # a read, retried on a fresh connection
        async with store.transaction():
            await store.set_meta("after", "restart")
        assert await store.get_meta("after") == "restart"
    finally:
        await store.close()


async def test_a_connection_lost_inside_a_transaction_is_one_sentence_to_retry(
    postgres,
) -> None:
    app = "nooa_lost_test"
    store = await open_store(f"{postgres}&application_name={app}")
    try:
        with pytest.raises(StoreUnavailable) as info:
            async with store.transaction():
                await store.set_meta("k", "v")
                with psycopg.connect(postgres, autocommit=True) as admin:
                    admin.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE application_name = %s AND query NOT ILIKE 'LISTEN%%'",
                        (app,),
                    )
                await store.set_meta("k2", "v2")
        assert "nothing of this call was written" in str(info.value)
        assert "\n" not in str(info.value)
        assert await store.get_meta("k") is None
    finally:
        await store.close()


async def test_the_schema_is_versioned_and_searches_in_nooa_english(store, postgres) -> None:
    with psycopg.connect(postgres) as conn:
        assert conn.execute("SELECT max(version) FROM schema_version").fetchone() == (
            SCHEMA_VERSION,
        )
        lexemes = conn.execute(
            f"SELECT to_tsvector('{TS_CONFIG}', 'after the deploys were not running')::text"
        ).fetchone()[0]
    # Snowball stems, and no stopword is dropped (stock `english` drops after/not/the/were).
    assert "'deploy'" in lexemes and "'run'" in lexemes
    assert "'after'" in lexemes and "'not'" in lexemes and "'the'" in lexemes
    assert store.label.endswith(f"(schema {store.schema})") and "@" in store.label


async def test_two_servers_migrating_one_new_schema_at_once_both_open_it(postgres) -> None:
    stores: list[PostgresStore] = []

    async def start() -> None:
        stores.append(await open_store(postgres))

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(start)
    try:
        with psycopg.connect(postgres) as conn:
            # Each version's migration ran once, not once per server.
            assert conn.execute("SELECT count(*) FROM schema_version").fetchone() == (
                SCHEMA_VERSION,
            )
    finally:
        for s in stores:
            await s.close()


async def test_words_stem_alike_in_rows_and_queries(store) -> None:
    async with store.transaction():
        await store.insert(
            Memory(content="The deployments were running late", owner="coder@laptop"), None
        )
    rows = await store.candidates("deployment runs", CODER, limit=5)
    assert [r.content for r in rows] == ["The deployments were running late"]


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgresql://postgres@127.0.0.1:1/test", "cannot connect to PostgreSQL"),
        ("postgresql://postgres@127.0.0.1:5432/test?bogus=1", "not a valid PostgreSQL URL"),
    ],
)
async def test_a_wrong_url_is_one_sentence_naming_the_store_and_the_fix(url, says) -> None:
    with pytest.raises(StoreUnavailable) as info:
        await open_store(url)
    text = str(info.value)
    assert says in text and "\n" not in text
    assert "postgresql://" in text or "--store" in text
    assert "Check" in text or "Use postgresql://" in text


async def test_a_deadlock_is_a_conflict_to_retry_not_a_lost_connection(store) -> None:
    """psycopg files a deadlock under OperationalError, not TransactionRollback: it read as
    "the database connection failed … check that PostgreSQL is up"."""
    both = anyio.Event()
    started = 0
    failures: list[BaseException] = []

    async def lock(first: str, second: str) -> None:
        nonlocal started
        try:
            async with store.transaction():
                await store.set_meta(first, "held")
                started += 1
                if started == 2:
                    both.set()
                await both.wait()
                await store.set_meta(second, "wanted")  # each waits for the other's row
        except StoreUnavailable as exc:
            failures.append(exc)

    await store.set_meta("a", "")
    await store.set_meta("b", "")
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(lock, "a", "b")
            tasks.start_soon(lock, "b", "a")
    assert len(failures) == 1  # PostgreSQL aborts one of the two; the other commits
    assert isinstance(failures[0], StoreConflict)
    assert "deadlock detected" in str(failures[0]) and "Retry the call." in str(failures[0])


async def test_another_store_hears_a_commit_and_a_rolled_back_write_owes_nothing(
    store, postgres
) -> None:
    """The notification is sent after the COMMIT (pg_schema `NOTIFY_OWED`), not inside the
    transaction; another server must still hear every commit, including an autocommit write
    outside a transaction, and a rolled-back write must leave nothing owed."""
    other = await open_store(postgres)
    try:
        with anyio.fail_after(10):
            await other.wait_listening()
        memory = Memory(content="heard by the other server", owner="coder@laptop")
        before = await other.change_token()
        async with store.transaction():
            await store.insert(memory, np.ones(4, np.float32))
        with anyio.fail_after(10):
            await other.wait_changed(before)
        assert (await other.vector_changes(None, 100))[0][0].id == memory.id
        before = await other.change_token()
        await store._exec("UPDATE memories SET archived = true WHERE id = %(i)s", {"i": memory.id})
        with anyio.fail_after(10):
            await other.wait_changed(before)
    finally:
        await other.close()
    with psycopg.connect(postgres, autocommit=True) as conn:
        conn.execute("SET nooa.notify = 'after commit'")
        owed = "SELECT current_setting('nooa.notify_owed', true)"
        with conn.transaction():
            raw_insert(conn, "announced after its commit")
            assert conn.execute(owed).fetchone() == ("yes",)  # owed, not sent inside
        assert conn.execute(owed).fetchone() == ("yes",)  # still owed once committed
        conn.execute("SELECT set_config('nooa.notify_owed', '', false)")
        with pytest.raises(psycopg.errors.DivisionByZero), conn.transaction():
            raw_insert(conn, "rolled back")
            conn.execute("SELECT 1 / 0")
        assert conn.execute(owed).fetchone() == ("",)


async def test_a_held_back_write_refused_before_its_commit_is_queued_rolls_back(
    store, monkeypatch
) -> None:
    """psycopg reads the answers already in while it queues the writes held back for the
    COMMIT: a refusal can arrive before the COMMIT is queued, with psycopg's transaction still
    open. The call fails with the database's error, nothing is written and the connection
    goes back to the pool usable (not refused by the pool's commit on its way back)."""
    original = psycopg.AsyncCursor.executemany

    async def late(cur, query, *args, **kwargs):
        await anyio.sleep(0.2)  # the refusal of the write queued before is in by then
        return await original(cur, query, *args, **kwargs)

    refused = "INSERT INTO accesses (memory_id, ts, channel) VALUES (%(m)s, 0, NULL)"
    kept = "INSERT INTO accesses (memory_id, ts, channel) VALUES (%(m)s, 0, 'recalled')"
    for _ in range(3):
        with pytest.raises(psycopg.errors.NotNullViolation):
            async with store.transaction():
                await store.set_meta("begun", "yes")  # BEGIN goes with this
                await store._exec_many(refused, [{"m": "refused"}])
                await store._exec_many(kept, [{"m": "queued after the refusal"}])
                monkeypatch.setattr(psycopg.AsyncCursor, "executemany", late)
        monkeypatch.setattr(psycopg.AsyncCursor, "executemany", original)
        assert await store.get_meta("begun") is None
        assert await store.count_accesses("queued after the refusal") == 0
    async with store.transaction():
        await store.set_meta("after", "the refusals")
    assert await store.get_meta("after") == "the refusals"


async def test_held_back_writes_are_read_back_and_their_error_aborts_the_commit(
    store,
) -> None:
    """The access log is held back until the next statement or the COMMIT (`_Tx.pending`):
    a read in the same transaction sees it, and a held-back write that fails rolls back
    the whole transaction, with the database's own error."""
    from nooa_mcp.domain.accesses import created_record

    kept = Memory(content="read back in its transaction", owner="coder@laptop")
    async with store.transaction():
        await store.insert(kept, np.ones(4, np.float32))
        record = created_record(kept, "coder@laptop")
        await store.append_accesses([(kept.id, record), (kept.id, record)])
        assert await store.count_accesses(kept.id) == 2
    assert await store.count_accesses(kept.id) == 2
    lost = Memory(content="never stored", owner="coder@laptop")
    with pytest.raises(psycopg.errors.NotNullViolation):
        async with store.transaction():
            await store.insert(lost, np.ones(4, np.float32))
            await store._exec_many(
                "INSERT INTO accesses (memory_id, ts, channel) VALUES (%(m)s, 0, NULL)",
                [{"m": lost.id}],
            )
    assert await store.fetch(lost.id) is None
    with pytest.raises(psycopg.errors.NotNullViolation):
        async with store.transaction():  # only held-back writes: they go with BEGIN
            await store._exec_many(
                "INSERT INTO accesses (memory_id, ts, channel) VALUES (%(m)s, 0, NULL)",
                [{"m": lost.id}],
            )
    async with store.transaction():  # the connection went back to the pool usable
        await store.set_meta("after", "the failed commit")
    assert await store.get_meta("after") == "the failed commit"


def test_a_schema_the_user_may_not_use_is_named_as_there_not_missing(postgres) -> None:
    """A schema without USAGE for the URL's user is left out of current_schema(): the
    sentence says it exists and which grant is missing, not that it cannot be created."""
    import uuid

    user = f"nooa_nousage_{uuid.uuid4().hex[:8]}"
    schema = postgres.rsplit("%3D", 1)[1]
    with psycopg.connect(postgres, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        admin.execute(f'CREATE ROLE "{user}" LOGIN')
        admin.execute(f'GRANT CREATE ON DATABASE "{admin.info.dbname}" TO "{user}"')
    try:
        url = postgres.replace("://postgres@", f"://{user}@", 1)
        assert url != postgres

        async def attempt() -> None:
            store = await open_store(url)
            await store.close()

        with pytest.raises(StoreUnavailable) as info:
            anyio.run(attempt)
        text = str(info.value)
        assert f"schema {schema} exists but user {user} may not use it" in text
        assert f"GRANT USAGE, CREATE ON SCHEMA {schema} TO {user}" in text
        assert "cannot be created" not in text and "\n" not in text
        # A command that only reads says the same, not that no store is there (a typo).
        from click.testing import CliRunner

        from nooa_mcp import cli

        out = CliRunner().invoke(cli.main, ["--store", url, "stats"])
        assert out.exit_code == 1
        assert f"schema {schema} exists but user {user} may not use it" in out.output
        assert "No store at" not in out.output
    finally:
        with psycopg.connect(postgres, autocommit=True) as admin:
            admin.execute(f'REVOKE CREATE ON DATABASE "{admin.info.dbname}" FROM "{user}"')
            admin.execute(f'DROP ROLE "{user}"')
