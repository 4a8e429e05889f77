"""The PostgreSQL store: one database shared by several nooa-mcp servers (DESIGN.md §15).

Selected with `--store postgresql://user@host:5432/database` (or NOOA_STORE). The store lives
in the connection's schema (`public` unless the URL sets `options=-csearch_path%3D<schema>`),
so several stores can share one database.

Concurrency comes from PostgreSQL, never from a process-local lock:

- `transaction()` borrows one pooled connection for its whole body and binds it to the running
  task (a context variable): every store call inside the block runs on it. Reads outside a
  transaction borrow a pooled connection per call (autocommit). A transaction costs no round
  trip of its own: BEGIN goes with its first statement, COMMIT with the writes whose answer
  nobody reads (`_exec_many`: the access log, edges, a new row whose seq was taken ahead),
  held back until then, and the notification other servers wait for follows the COMMIT in
  that same round trip (an author: 2 round trips, from 5). The write path's statements are
  prepared once per connection (`PREPARE_ONLY_ASKED`); every other statement is planned
  with its values.
- Rows read to be rewritten are locked: inside a transaction, `fetch`, `fetch_many` and
  `context_rows` read with `FOR UPDATE` (in id order, so two transactions cannot deadlock on
  the rows of one call). SQLite gets the same guarantee from its file-wide write lock.
- The access log never waits for a row while it holds another (`log_uses`): it takes the rows
  nobody holds at once (`SKIP LOCKED`), then waits for each held row alone, in a transaction
  of its own. A write holds rows from several statements in no one order (the row a repeat
  found, then its near-duplicates, link targets, …), and a log taking the same rows in id
  order held one of them while waiting for another: a deadlock, and under load a log lost
  after all its attempts.
- An exact repeat is idempotent across servers: `find_by_hash` inside a transaction first takes
  a transaction-scoped advisory lock on (role, type, content hash), so two servers authoring the
  same text take turns and the second finds the first's row. `lock_meta` does the same for a
  meta key (reflection leases), whether or not the row exists yet. (A unique index on
  (content_hash, role, type) would enforce repeats too, but would also make an update into an
  existing text or the revival of an archived twin fail where SQLite accepts them.)
- Revision numbers are transaction ids (`rev xid8`, see pg_search): a vector cache pulls every
  row another server committed, whatever order transactions commit in. A LISTEN connection
  hears other servers' commits, so `change_token` costs no round trip. The notification is
  sent after the COMMIT, not inside the transaction (pg_schema `_NOTIFY_AFTER`), so commits
  of concurrent writers no longer queue on PostgreSQL's notify lock through each other's WAL
  flush. This process's own
  commits do not move it (`_own_commit`): what they wrote the service noted in the vector
  cache already, or marked it dirty, so a write is not followed by a pull of itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import weakref
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..domain.accesses import AccessState
from ..domain.schema import EdgeType
from ..domain.scope import Scope
from ..errors import (
    CommitUnknown,
    StoreConflict,
    StoreUnavailable,
)
from .base import (
    COMMON_FLOOR,
    DUMP_COLUMNS,
    Counts,
    EdgeRow,
    RowChanges,
    UsesApplier,
    UseState,
    VectorRow,
)
from .dialect import POSTGRES, scope_where
from .pg_schema import (
    NOTIFY_AFTER_COMMIT,
    NOTIFY_OWED,
    ensure_schema,
    migrate_schema,
    notify_channel,
    short_error,
)
from .pg_search import (
    SNAPSHOT,
    CommonTerms,
    DocStats,
    Mark,
    bm25_sql,
    changes_sql,
    common_cap,
    next_mark,
    tsquery_text,
)
from .rows import (
    FACT_COLUMNS,
    USE_COLUMNS,
    KeywordAsk,
    Row,
    edge_from_row,
    use_from_row,
    vector_row_from,
)
from .sql_core import SqlVerbs
from .sql_reports import SqlReports

try:
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict, make_conninfo
    from psycopg.pq import TransactionStatus
    from psycopg.rows import dict_row
    from psycopg.types.string import TextLoader
    from psycopg_pool import AsyncConnectionPool, PoolTimeout
except ImportError:  # pragma: no cover - exercised only without the extra installed
    psycopg = None  # type: ignore[assignment]

__all__ = ["PostgresStore"]

#: Connections per server process. Each open transaction holds one for its whole body.
POOL_MAX = 10
#: Seconds to wait for the server (connect) and for a free pooled connection.
CONNECT_TIMEOUT = 10
POOL_TIMEOUT = 30.0
#: Rows per page while this process catches up on BM25's document lengths.
STATS_PAGE = 20000
#: Planner statistics are checked when the store first reaches this many rows, then each
#: time it grows by STATS_GROWTH (see `_keep_statistics`).
ANALYZE_FROM = 1000
STATS_GROWTH = 1.2

_FIRST_SEQ = -(2**63)

#: psycopg prepares a statement after this many runs on a connection: never, in effect. A
#: read whose plan depends on its values (a revision, a tsquery, an id list) must not be
#: switched to a generic plan after five runs (measured 0.1 -> 8 ms for the change query),
#: so statements are one-shot and planned with their values, except those sent with
#: `prepare=True` and those of `executemany` (psycopg always asks there): the write path's
#: lookups by key and its inserts (`_PREPARED`), whose plan is the same for any value. Each
#: is parsed and planned once per connection instead of once per write (PostgreSQL's CPU
#: per author, four clients: 2.0-2.3 ms one-shot, 1.1-1.5 ms prepared).
PREPARE_ONLY_ASKED = 2**62

#: The next value of `memories.seq`, read in the first round trip of an author
#: (`_locked_read`), so its INSERT needs no answer and rides with the COMMIT (`_insert_row`).
_NEXT_SEQ = ("SELECT nextval(pg_get_serial_sequence('memories', 'seq')) AS seq", None)


@dataclass
class _Tx:
    """An open transaction: its connection, and whether it changed what vector caches hold.

    BEGIN is not sent on its own: it goes in one pipeline with the transaction's first
    statement (`_conn`), or with its COMMIT if nothing else was sent (`_commit`); a block
    that sent nothing sends nothing. Until that first round trip succeeds nothing of the
    transaction reached the database, so a connection found dead there (one that died
    while pooled) is replaced and the statement sent again (`_reconnect`).
    """

    lease: Any  # the pool's connection context, held for the whole block
    conn: Any
    begun: Any  # psycopg's transaction on `conn`, entered with the first round trip
    started: bool = False
    moved: bool = False
    #: A read `_locked_read` sent ahead (authoring's tombstone check, in `find_by_hash`'s
    #: pipeline) and its answer: served by `_read_ahead` only as the very next statement of
    #: the transaction (`_conn` drops it before any other).
    ahead: tuple[tuple[str, Any], Sequence[Row]] | None = None
    #: Writes whose answer nobody reads (`_exec_many`: the access log, edges), held back
    #: and sent ahead of the transaction's next statement, or with its COMMIT (`_commit`):
    #: an author's access record costs no round trip of its own.
    pending: list[tuple[str, Sequence[dict[str, Any]]]] = field(default_factory=list)
    #: A `memories.seq` taken from the sequence for this transaction's next INSERT
    #: (`_locked_read`, `_insert_row`); one it did not use is a gap, as a rollback leaves.
    seq: int | None = None


#: The open transaction of each store in the running task (store id -> _Tx).
_TX: contextvars.ContextVar[dict[int, _Tx]] = contextvars.ContextVar("nooa_pg_tx", default={})  # noqa: B039


def _label(params: dict[str, Any]) -> str:
    """What to show people: user, host, port and database — never the password."""
    user = params.get("user") or ""
    host = params.get("host") or "localhost"
    port = params.get("port") or "5432"
    database = params.get("dbname") or user
    return f"postgresql://{user + '@' if user else ''}{host}:{port}/{database}"


async def holds_store(url: str) -> str | None:
    """Where `url` points when no nooa-mcp store is there ("postgresql://…/test, schema x":
    its schema is missing, or holds no store's tables), else None — also when it cannot tell
    (a bad URL, a server down: opening the store says why). A command that only reads asks
    first: opening creates a missing schema, and a mistyped schema name left a new, empty
    store behind, as a mistyped file name no longer does."""
    if psycopg is None:
        return None
    try:
        params = conninfo_to_dict(url)
        params.setdefault("connect_timeout", CONNECT_TIMEOUT)
        async with await psycopg.AsyncConnection.connect(
            make_conninfo("", **params), autocommit=True
        ) as conn:
            path = await _one(conn, "SHOW search_path")
            schema = await _one(conn, "SELECT current_schema()")
            if schema is not None:
                table = await _one(
                    conn, "SELECT to_regclass(format(%s, current_schema()))", ("%I.memories",)
                )
                if table is not None:
                    return None
            where = schema or str(path).split(",")[0].strip().strip('"')
            if schema is None and await _one(
                conn, "SELECT 1 FROM pg_namespace WHERE nspname = %s", (where,)
            ):
                return None  # there, but not this user's to use: opening says so, and how
    except psycopg.Error:
        return None
    return f"{_label(params)}, schema {where}"


async def _one(conn: Any, query: str, params: tuple[Any, ...] = ()) -> Any:
    """The first column of a query's one row (None without one)."""
    row = await (await conn.execute(query, params or None)).fetchone()
    return None if row is None else row[0]


#: What PostgreSQL raises when it aborts a transaction for a concurrent one. psycopg files a
#: deadlock (40P01) under OperationalError, not TransactionRollback: it read as a lost
#: connection ("check that PostgreSQL is up") and was retried like one.
_CONFLICTS = (psycopg.errors.TransactionRollback, psycopg.errors.DeadlockDetected)


logger = logging.getLogger(__name__)

#: Attempts of the access log's transaction for one row another transaction held
#: (`PostgresStore.log_uses`). It holds no row while it waits: aborted, it was only queued
#: on the row among writers deadlocking each other.
HELD_ROW_ATTEMPTS = 3


class PostgresStore(SqlVerbs, SqlReports):
    """An open PostgreSQL store. Create with `await PostgresStore.open(url)`; `close()` it."""

    kind = "postgresql"

    dialect = POSTGRES

    def __init__(self, pool: Any, conninfo: str, label: str, schema: str) -> None:
        self.pool = pool
        self.label = label
        self.schema = schema
        self.writable = True
        #: See COMMON_FLOOR; tests lower it to exercise the cut-off on a small store.
        self.common_floor = COMMON_FLOOR
        self._conninfo = conninfo
        self._stats = DocStats()
        self._stats_seen: Any = None
        self._common = CommonTerms()
        # Commits heard on the LISTEN connection (or made here); `_listening` is False while
        # that connection is down, and the change token then always says "look".
        self._changes = 0
        self._generation = 0
        #: Commits of this process that changed what vector caches hold (`_own_commit`), and
        #: the open connections they were made on, by backend pid: their notifications are
        #: this process's own, heard again (see `_listen`).
        self._own = 0
        self._own_pids: dict[int, weakref.ref[Any]] = {}
        self._listening = False
        self._changed = asyncio.Event()
        self._listener: asyncio.Task[None] | None = None
        self._analyze_at = ANALYZE_FROM
        self._seen_mark: Mark | None = None
        self._seen_token: Any = None
        self._seen_own = -1
        self._analyzing: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    async def open(cls, url: str) -> PostgresStore:
        """Connect, create or migrate the store's schema, and start listening for commits.

        Raises:
            StoreUnavailable: the URL is malformed, the server cannot be reached, the driver
                is not installed, or the schema cannot be used (the message names the fix).
            StoreTooNew: the schema was written by a newer nooa-mcp; it is left untouched.
        """
        if psycopg is None:
            raise StoreUnavailable(
                "--store",
                "a postgresql:// store needs the PostgreSQL driver, which is not installed.",
                "Install it with: pip install 'nooa-mcp[postgres]'.",
            )
        try:
            params = conninfo_to_dict(url)
        except psycopg.ProgrammingError as exc:
            raise StoreUnavailable(
                "--store",
                f"this is not a valid PostgreSQL URL ({short_error(exc)}).",
                "Use postgresql://USER@HOST:5432/DATABASE.",
            ) from None
        params.setdefault("connect_timeout", CONNECT_TIMEOUT)
        params.setdefault("application_name", "nooa-mcp")
        conninfo = make_conninfo("", **params)
        label = _label(params)
        try:
            conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise StoreUnavailable(
                label,
                f"cannot connect to PostgreSQL ({short_error(exc)}).",
                "Check that the server is running and that the host, port, user, password and "
                "database in --store / NOOA_STORE are right.",
            ) from None
        try:
            schema = await ensure_schema(conn, label)
            await migrate_schema(conn, label, schema)
        finally:
            await conn.close()
        pool = AsyncConnectionPool(
            conninfo,
            min_size=1,
            max_size=POOL_MAX,
            timeout=POOL_TIMEOUT,
            # Server-side prepared statements only where asked (`PREPARE_ONLY_ASKED`).
            kwargs={
                "autocommit": True,
                "row_factory": dict_row,
                "prepare_threshold": PREPARE_ONLY_ASKED,
            },
            configure=_configure,
            open=False,
            name=f"nooa-{schema}",
        )
        try:
            await pool.open(wait=True, timeout=CONNECT_TIMEOUT)
        except PoolTimeout as exc:
            await pool.close()
            raise StoreUnavailable(
                label, f"cannot open a connection pool ({short_error(exc)}).", "Retry."
            ) from None
        # kind:label is what stats shows, e.g. postgresql:nooa@db1:5432/team (schema alpha).
        shown = label.removeprefix("postgresql://")
        shown = shown if schema == "public" else f"{shown} (schema {schema})"
        store = cls(pool, conninfo, shown, schema)
        store._listener = asyncio.create_task(store._listen(), name="nooa pg listener")
        return store

    async def close(self) -> None:
        if self._analyzing is not None:
            self._analyzing.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._analyzing
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._listener
            self._listener = None
        await self.pool.close()

    async def check_writable(self) -> None:
        """Writes are possible whenever the database answers (errors say so per call)."""

    async def _listen(self) -> None:
        """Hear commits of every server on this store; reconnect when the connection drops."""
        channel = sql.SQL("LISTEN {}").format(sql.Identifier(notify_channel(self.schema)))
        delay = 0.2
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
                async with conn:
                    await conn.execute(channel)
                    self._listening = True
                    # Commits made while nobody listened are pulled on the next sync.
                    self._generation += 1
                    self._signal()
                    delay = 0.2
                    async for note in conn.notifies():
                        if self._is_own(note.pid):
                            continue
                        self._changes += 1
                        self._signal()
            except psycopg.Error:
                pass
            finally:
                self._listening = False
                self._signal()
            await asyncio.sleep(delay)  # reconnect back-off, not a wait for a result
            delay = min(delay * 2, 5.0)

    def _is_own(self, pid: int) -> bool:
        """Whether a notification came from a connection of this process's pool that is still
        open (so no other server's backend can have that pid) and has committed through
        `transaction()`, which counts its writes (`_own_commit`) as the commit returns; the
        connection is claimed before its COMMIT is sent (`_commit`)."""
        ref = self._own_pids.get(pid)
        conn = None if ref is None else ref()
        if conn is None or conn.closed:
            self._own_pids.pop(pid, None)
            return False
        return True

    def _own_commit(self, conn: Any) -> None:
        """A transaction of this process that changed what vector caches hold has committed.

        The change token stays: the services noted its rows in this process's vector cache
        (`VectorIndex.note`) or marked the cache dirty, so pulling them back would only cost a
        round trip per write. `_own` still moves, for what the services do not keep: BM25's
        document statistics and the "nothing committed since" shortcut of `vector_changes`.
        """
        self._own += 1
        self._own_connection(conn)

    def _own_connection(self, conn: Any) -> None:
        """Tell this connection's notifications from other servers' (`_is_own`)."""
        pid = conn.info.backend_pid
        ref = self._own_pids.get(pid)
        if ref is None or ref() is not conn:  # new, or a closed connection's pid reused
            self._own_pids[pid] = weakref.ref(conn)

    def _signal(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_changed(self, token: Any) -> None:
        """Return once the change token differs from `token` (tests and watchers)."""
        while await self.change_token() == token:
            await self._changed.wait()

    @property
    def listening(self) -> bool:
        """Whether the LISTEN connection is up (commits elsewhere are heard without asking)."""
        return self._listening

    async def wait_listening(self, up: bool = True) -> None:
        """Return once the LISTEN connection is up (or, with up=False, down)."""
        while self._listening != up:
            await self._changed.wait()

    # ------------------------------------------------------------------ primitives

    def _tx(self) -> Any:
        tx = _TX.get().get(id(self))
        return None if tx is None else tx.conn

    @asynccontextmanager
    async def _moving(self, noted: bool = False) -> AsyncIterator[None]:
        """A write that changes what vector caches hold, in the caller's transaction or, outside
        one, in a transaction of its own: its commit is then always counted by `_own_commit`,
        never heard back over NOTIFY as another server's (other servers hear it there)."""
        if not noted:
            self.row_writes += 1
        tx = _TX.get().get(id(self))
        if tx is not None:
            tx.moved = True
            yield
            return
        async with self.transaction():
            _TX.get()[id(self)].moved = True
            yield

    @property
    def in_transaction(self) -> bool:
        return self._tx() is not None

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """One transaction on one connection; every store call inside the block runs on it.

        Nested blocks become savepoints. A conflict PostgreSQL resolves by aborting this
        transaction (a deadlock) or a lost connection rolls everything back and raises
        StoreUnavailable, whose message says to retry. A pooled connection that died while
        idle (a database restart) is replaced at the block's first round trip, which
        carries BEGIN and is sent again on a fresh connection (`_Tx`).

        A connection lost while the COMMIT is on its way is different: the database may
        have committed before the answer was lost, so CommitUnknown says it may have been
        written and claims neither.
        """
        outer = _TX.get().get(id(self))
        if outer is not None:
            # A savepoint: the writes held back so far go before it, its own before it ends.
            await self._start(outer)
            await self._flush(outer)
            try:
                async with outer.conn.transaction():
                    yield
                    await self._flush(outer)
            except BaseException:
                outer.pending.clear()
                raise
            return
        committing = False
        try:
            tx = await self._lease()
            try:
                token = _TX.set({**_TX.get(), id(self): tx})
                try:
                    yield
                except BaseException as exc:
                    _TX.reset(token)
                    if tx.started:  # ROLLBACK
                        await tx.begun.__aexit__(type(exc), exc, exc.__traceback__)
                    raise
                _TX.reset(token)
                # The block ended without an error: COMMIT, with what it held back.
                committing = True
                await self._commit(tx)
                # Counted before the connection goes back to the pool, where another call
                # could commit on it first, or the pool close it (past its lifetime) so
                # that its pid can no longer be read and a commit made would look unknown.
                if tx.moved:
                    self._own_commit(tx.conn)
                else:
                    # Its notification, if any (a use logged: schema 7), is this process's
                    # own too: the uses it logged are noted in the vector cache as they
                    # commit (`note_uses`).
                    self._own_connection(tx.conn)
            finally:
                await tx.lease.__aexit__(None, None, None)
        except PoolTimeout as exc:
            raise self._unavailable(exc) from None
        except psycopg.OperationalError as exc:
            if committing and not isinstance(exc, _CONFLICTS):
                raise self._commit_unknown(exc) from None
            raise self._unavailable(exc) from None

    async def _lease(self) -> _Tx:
        """A pooled connection for a transaction, not yet begun (see `_Tx`)."""
        lease = self.pool.connection()
        conn = await lease.__aenter__()
        # psycopg's transaction object itself: `conn.transaction()` entered in a pipeline
        # would hold the pipeline open until the transaction ends.
        return _Tx(lease, conn, psycopg.AsyncTransaction(conn))

    async def _reconnect(self, tx: _Tx) -> None:
        """Replace the connection of a transaction whose first round trip failed on it
        (nothing of it reached the database): the pool drops the dead one."""
        await tx.lease.__aexit__(None, None, None)
        fresh = await self._lease()
        tx.lease, tx.conn, tx.begun, tx.started = fresh.lease, fresh.conn, fresh.begun, False

    async def _start(self, tx: _Tx) -> None:
        """BEGIN (with the writes held back) now, in a round trip of its own: before a
        savepoint, and before a COMMIT that would otherwise be the transaction's first trip
        (a lost connection there cannot tell "never sent" from "committed")."""
        token = _TX.set({**_TX.get(), id(self): tx})  # `_commit` runs after the block
        try:
            while not tx.started:
                try:
                    async with self._conn():
                        pass
                except psycopg.OperationalError as exc:
                    if not self._may_resend(tx, exc):
                        raise self._unavailable(exc) from None
                    await self._reconnect(tx)
        finally:
            _TX.reset(token)

    async def _send_owed(self, conn: Any) -> None:
        """Queue, in `conn`'s pipeline after a commit, the notification the committed
        transaction owes (pg_schema `NOTIFY_OWED`: sent only if the trigger noted it)."""
        await conn.execute(NOTIFY_OWED, {"ch": notify_channel(self.schema)}, prepare=True)

    async def _commit(self, tx: _Tx) -> None:
        """One round trip: the writes held back, COMMIT, then the notification the
        transaction owes (pg_schema `NOTIFY_OWED`: after the commit, off its WAL flush).
        A transaction that sent and held back nothing sends nothing.

        The answer is awaited before this returns, so a write is acknowledged only once
        committed. What failed decides the error: a held-back write (the transaction is
        then aborted and its COMMIT skipped: nothing written; rolled back here, the error
        raised as it would have been where the write was made); a conflict; otherwise a lost
        connection or a failure after the writes, where the commit may have happened:
        CommitUnknown.

        A held-back write's error may arrive while the writes after it are still being
        queued (psycopg reads the answers already in), before the COMMIT is: psycopg's
        transaction is then still open, and is rolled back through it (a plain rollback is
        refused inside it, and the pool's commit on the way back would be too).
        """
        if not tx.started and not tx.pending:
            return
        conn = tx.conn
        queued = False
        try:
            await self._start(tx)  # the writes held back go with BEGIN if it is not sent yet
            conn = tx.conn
            # Claimed before the COMMIT goes: the notification it sends may be heard before
            # this call resumes, and is this process's own (`_is_own`).
            self._own_connection(conn)
            async with conn.pipeline():
                for query, rows in tx.pending:
                    await conn.cursor().executemany(query, rows)
                queued = True
                await tx.begun.__aexit__(None, None, None)
                await self._send_owed(conn)
        except psycopg.Error as exc:
            if not queued:  # no COMMIT was sent: nothing of the transaction is written
                if tx.begun.status == psycopg.AsyncTransaction.Status.ACTIVE:
                    with contextlib.suppress(psycopg.Error):
                        await tx.begun.__aexit__(type(exc), exc, exc.__traceback__)
                if isinstance(exc, psycopg.OperationalError):
                    raise self._unavailable(exc) from None
                raise
            if conn.info.transaction_status == TransactionStatus.INERROR:
                with contextlib.suppress(psycopg.Error):
                    await conn.rollback()
                if isinstance(exc, psycopg.OperationalError):
                    raise self._unavailable(exc) from None
                raise
            if isinstance(exc, _CONFLICTS):
                raise self._unavailable(exc) from None
            raise self._commit_unknown(exc) from None

    async def _flush(self, tx: _Tx) -> None:
        """Send the writes `tx` held back (one pipeline), before anything else runs on it."""
        if not tx.pending:
            return
        pending, tx.pending = tx.pending, []
        try:
            async with tx.conn.pipeline():
                for query, rows in pending:
                    await tx.conn.cursor().executemany(query, rows)
        except psycopg.OperationalError as exc:
            raise self._unavailable(exc) from None

    def _commit_unknown(self, exc: BaseException) -> CommitUnknown:
        """The error for a commit that may have happened, and the store marked changed: the
        services noted none of its rows in this process's caches, and the notification it
        sent, if it did, may be taken for this process's own (`_is_own`) and move nothing, so
        the next recall reads what changed from the store."""
        self._changes += 1
        self._signal()
        return CommitUnknown(
            self.label,
            f"the database connection failed while this call was being committed "
            f"({short_error(exc)}): it may have been written; retrying is safe (an exact repeat "
            "is not stored twice).",
            "Retry the call once PostgreSQL answers.",
        )

    def _unavailable(self, exc: BaseException) -> StoreUnavailable:
        if isinstance(exc, PoolTimeout):
            return StoreUnavailable(
                self.label,
                f"no database connection was free within {POOL_TIMEOUT:g} s; nothing was written.",
                "Retry, or raise max_connections on the server.",
            )
        if isinstance(exc, _CONFLICTS):
            return StoreConflict(
                self.label,
                "a concurrent write on another connection conflicted with this one "
                f"({short_error(exc)}); nothing of this call was written.",
                "Retry the call.",
            )
        return StoreUnavailable(
            self.label,
            f"the database connection failed ({short_error(exc)}); "
            "nothing of this call was written.",
            "Check that PostgreSQL is up, then retry.",
        )

    @asynccontextmanager
    async def _conn(self) -> AsyncIterator[Any]:
        """The connection to send on: the transaction's, or a pooled one. A transaction's
        first statements go in one pipeline with its BEGIN and the writes it held back: the
        caller sends inside the block and reads the answers after it (`_rows`)."""
        tx = _TX.get().get(id(self))
        if tx is not None:
            tx.ahead = None  # any other statement first: a read sent ahead is stale
            if tx.started:
                if not tx.pending:
                    yield tx.conn
                    return
                # The writes held back go first, in one pipeline with what the caller sends
                # (no round trip of their own); their errors surface with its answers.
                pending, tx.pending = tx.pending, []
                async with tx.conn.pipeline():
                    for query, rows in pending:
                        await tx.conn.cursor().executemany(query, rows)
                    yield tx.conn
                return
            try:
                async with tx.conn.pipeline():
                    await tx.begun.__aenter__()
                    for query, rows in tx.pending:
                        await tx.conn.cursor().executemany(query, rows)
                    yield tx.conn
            except BaseException:
                # BEGIN ran unless the connection is gone (then nothing did: `_reconnect`).
                tx.started = not tx.conn.broken
                raise
            tx.started = True
            tx.pending = []
            return
        try:
            async with self.pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise self._unavailable(exc) from None

    async def _rows(
        self, query: Any, params: dict[str, Any] | None = None, binary: bool = False
    ) -> list[dict]:
        """Run one statement; `binary` fetches results in binary (embeddings: no hex text)."""
        # Outside a transaction every call is a read (writes run in transactions), so a read
        # that met a connection which died while pooled is tried once more on a fresh one.
        # So is a transaction's first statement (`_Tx`).
        retries = 1
        while True:
            tx = _TX.get().get(id(self))
            try:
                async with self._conn() as conn:
                    cur = await conn.execute(query, params, binary=binary)
                return await cur.fetchall() if cur.description else []
            except psycopg.OperationalError as exc:
                if retries == 0 or not self._may_resend(tx, exc):
                    raise self._unavailable(exc) from None
                retries -= 1
                await self._retry_on(tx)

    async def _blob_rows(self, query: Any, params: dict[str, Any] | None = None) -> list[dict]:
        return await self._rows(query, params, binary=True)

    async def _scalar(self, query: Any, params: dict[str, Any] | None = None) -> Any:
        rows = await self._rows(query, params)
        return next(iter(rows[0].values())) if rows else None

    async def _exec(self, query: Any, params: dict[str, Any] | None = None) -> int:
        tx = _TX.get().get(id(self))
        retries = 0 if tx is None else 1  # an autocommit write may have happened
        while True:
            try:
                async with self._conn() as conn:
                    if tx is not None:
                        cur = await conn.execute(query, params)
                    else:
                        # Autocommit: a notification the write owes goes with it (`_commit`).
                        async with conn.pipeline():
                            cur = await conn.execute(query, params)
                            await self._send_owed(conn)
                # Read once out of `_conn`: a first statement's pipeline has answered then.
                return cur.rowcount
            except psycopg.OperationalError as exc:
                if retries == 0 or not self._may_resend(tx, exc):
                    raise self._unavailable(exc) from None
                retries -= 1
                await self._retry_on(tx)

    async def _exec_many(self, query: Any, rows: Sequence[dict[str, Any]]) -> None:
        """Inside a transaction the write is held back (`_Tx.pending`); its errors then
        surface at the transaction's next statement or COMMIT, which it aborts."""
        if not rows:
            return
        tx = _TX.get().get(id(self))
        if tx is not None:
            tx.ahead = None
            tx.pending.append((query, list(rows)))
            return
        try:
            async with self._conn() as conn, conn.pipeline():
                await conn.cursor().executemany(query, rows)
                await self._send_owed(conn)
        except psycopg.OperationalError as exc:
            raise self._unavailable(exc) from None

    def _reserved_seq(self) -> int | None:
        tx = _TX.get().get(id(self))
        if tx is None or tx.seq is None:
            return None
        seq, tx.seq = tx.seq, None
        return seq

    async def _insert_row(self, query: str, params: dict[str, Any]) -> int:
        """With a seq taken ahead (`_reserved_seq`), the INSERT is held back like any
        `_exec_many` and rides with the transaction's next statement or its COMMIT; its
        errors surface there and abort the transaction. Without one it returns the seq."""
        if "seq" in params:
            await self._exec_many(query, [params])
            return int(params["seq"])
        return await self._scalar(f"{query} RETURNING seq", params)

    def _lock_statement(self, key: str) -> tuple[str, dict[str, Any]]:
        return (
            "SELECT pg_advisory_xact_lock(hashtextextended(%(k)s, 0))",
            {"k": f"{self.schema}/{key}"},
        )

    async def _lock_key(self, key: str) -> None:
        """Inside a transaction, an advisory lock on `key` in this store's schema, held
        until it ends (`find_by_hash`, `lock_meta`: see the module's docstring)."""
        if self.in_transaction:
            await self._exec(*self._lock_statement(key))

    async def _lock_keys(self, keys: Sequence[str]) -> None:
        """`_lock_key` for each of `keys`, in their order, in one statement held back to
        ride with the transaction's next one (no round trip of its own: an import's batch
        holds 256 texts, and a batch's first lookup follows at once)."""
        if self.in_transaction and keys:
            await self._exec_many(
                "SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) "
                "FROM unnest(%(ks)s::text[]) WITH ORDINALITY AS t(k, at)",
                [{"ks": [f"{self.schema}/{key}" for key in keys]}],
            )

    async def _locked_read(
        self, key: str, statement: tuple[str, Any], ahead: tuple[str, Any]
    ) -> Sequence[Row]:
        """Inside a transaction, the advisory lock on `key`, `statement` and `ahead` in one
        pipeline (one round trip), `ahead`'s answer kept for `_read_ahead`. Three statements,
        not one: the read takes its snapshot once the lock is held, so it sees a row
        committed by the transaction that held the lock before (one statement would read a
        snapshot taken before waiting, and miss it). Outside one nothing is locked.

        A lookup by key before an INSERT (`find_by_hash`) also takes the seq of the row the
        caller may insert next (`_NEXT_SEQ`, unless one is held already), so that INSERT
        needs no answer (`_insert_row`). All four are prepared: their plans do not depend
        on the values."""
        tx = _TX.get().get(id(self))
        if tx is None:
            return await self._rows(*statement)
        statements = [self._lock_statement(key), statement, ahead]
        if tx.seq is None:
            statements.append(_NEXT_SEQ)
        _, found, after, *seq = await self._reads(statements, prepare=True)
        tx.ahead = (ahead, after)
        if seq:
            tx.seq = seq[0][0]["seq"]
        return found

    def _read_ahead(self, statement: tuple[str, Any]) -> Sequence[Row] | None:
        tx = _TX.get().get(id(self))
        if tx is None or tx.ahead is None or tx.ahead[0] != statement:
            return None
        rows, tx.ahead = tx.ahead[1], None
        return rows

    async def _after_load(self, table: str) -> None:
        """Keep the identity ahead of the copied seqs, so the next insert gets a fresh one."""
        if "seq" in DUMP_COLUMNS[table]:
            await self._exec(
                sql.SQL(
                    "SELECT setval(pg_get_serial_sequence({t}, 'seq'), "
                    "(SELECT coalesce(max(seq), 0) + 1 FROM {i}), false)"
                ).format(t=sql.Literal(table), i=sql.Identifier(table))
            )

    async def change_token(self) -> Any:
        """Moves when any server commits to this store (heard over LISTEN, no round trip).

        While the LISTEN connection is down every call returns a new token, so a cache
        always looks at the store itself.
        """
        if not self._listening:
            return object()
        return (self._generation, self._changes)

    def _lock(self) -> str:
        return " FOR UPDATE" if self.in_transaction else ""

    async def log_uses(self, ids: Sequence[str], apply: UsesApplier) -> dict[str, AccessState]:
        """See `Store.log_uses`; never waits for a row while holding another, so no
        deadlock is of its making. The rows no transaction holds are read locked without
        waiting (`SKIP LOCKED`), logged and committed together; each row held elsewhere (or
        gone) is then waited for alone, in a transaction of its own. A write takes its rows
        in several statements, in no one order: a log that took the same rows in id order
        held the first while waiting for the next, which the write then asked for (a
        deadlock the server ran again; under load a log lost after all its attempts).
        Inside a transaction already, all at once (the caller's order is the caller's).

        Raises StoreConflict only when nothing was written (a caller running the log again
        must not log twice what committed): a held row's own transaction is run again on a
        conflict (queued on the row among writers deadlocking each other), and after
        `HELD_ROW_ATTEMPTS` its accesses alone are dropped, with a warning."""
        wanted = sorted(set(ids))
        if not wanted or self.in_transaction:
            return await super().log_uses(wanted, apply)
        written, free = await self._log_rows(wanted, apply, " FOR UPDATE SKIP LOCKED")
        for memory_id in wanted:
            if memory_id in free:
                continue
            for attempt in range(1, HELD_ROW_ATTEMPTS + 1):
                try:
                    written |= (await self._log_rows([memory_id], apply, " FOR UPDATE"))[0]
                    break
                except StoreConflict as exc:
                    if attempt == HELD_ROW_ATTEMPTS:
                        logger.warning("the accesses of %s were not logged: %s", memory_id, exc)
                    else:
                        await asyncio.sleep(0.05 * attempt)
        return written

    # ------------------------------------------------------------------ recall

    async def row_count(self) -> int:
        return await self._scalar("SELECT count(*) FROM memories")

    async def vector_changes(
        self, mark: Any, limit: int, roles: Sequence[str] | None = None
    ) -> tuple[list[VectorRow], Any]:
        """Rows changed since `mark` (a pg_search.Mark; None: every row), in seq order."""
        mark = mark if isinstance(mark, Mark) else Mark()
        token = await self.change_token()
        own = self._own
        if (
            mark.after is None
            and mark == self._seen_mark
            and token == self._seen_token
            and own == self._seen_own
        ):
            # Nothing committed since this mark was taken (no NOTIFY heard, no own write).
            return [], mark
        embedding = "m.embedding"
        if roles is not None:
            embedding = (
                f"CASE WHEN {self.dialect.one_of('m.role', 'roles')} THEN m.embedding END "
                "AS embedding"
            )
        rows = await self._changes_since(
            mark,
            f"m.seq, m.id, m.role, m.owner, m.type, m.archived, m.faded, {embedding}, "
            f"{FACT_COLUMNS}",
            limit,
            roles,
        )
        out = [vector_row_from(r) for r in rows if r["seq"] is not None]
        full = len(out) >= limit
        new = next_mark(mark, rows[0]["xmax"], rows[0]["xip"], out[-1].seq if out else None, full)
        if new.after is None:
            self._seen_mark, self._seen_token, self._seen_own = new, token, own
        return out, new

    async def keyword_changes(self, mark: Any, limit: int) -> tuple[list[tuple[int, Any]], Any]:
        """See `Store.keyword_changes` (the snapshot marks of `vector_changes`)."""
        mark = mark if isinstance(mark, Mark) else Mark()
        rows = await self._changes_since(mark, "m.seq, m.stems", limit)
        out = [(r["seq"], r["stems"]) for r in rows if r["seq"] is not None]
        full = len(out) >= limit
        last = out[-1][0] if out else None
        return out, next_mark(mark, rows[0]["xmax"], rows[0]["xip"], last, full)

    async def vector_mark(self) -> Any:
        row = (await self._rows(f"WITH {SNAPSHOT} SELECT xmax, xip FROM snap"))[0]
        return Mark(int(row["xmax"]), tuple(int(x) for x in row["xip"]))

    async def ranking_mark(self) -> Any:
        return await self.vector_mark()

    async def ranking_changes(
        self, mark: Any, roles: Sequence[str] | None = None
    ) -> tuple[list[EdgeRow], Any]:
        """Edges stamped by a transaction `mark`'s snapshot had not seen (`edges.rev`; see
        `pg_search` on change tracking), with the statement's snapshot as the next mark, in
        one statement; with `roles`, the edges between their memories."""
        edges = "SELECT e.src, e.dst, e.type, e.weight FROM edges e WHERE"
        if roles is not None:
            edges = (
                "SELECT e.src, e.dst, e.type, e.weight FROM edges e "
                "JOIN memories a ON a.id = e.src JOIN memories b ON b.id = e.dst "
                "WHERE a.role = ANY(%(roles)s) AND b.role = ANY(%(roles)s) AND"
            )
        rows = await self._rows(
            f"""WITH {SNAPSHOT},
changed AS ({edges} (e.rev >= %(xmax)s::xid8 OR e.rev = ANY(%(xip)s::xid8[])))
SELECT snap.xmax, snap.xip, c.* FROM snap LEFT JOIN changed c ON true""",
            {
                "xmax": str(mark.xmax),
                "xip": [str(x) for x in mark.xip],
                "roles": sorted(set(roles or ())),
            },
        )
        first = rows[0]
        return [edge_from_row(r) for r in rows if r["src"] is not None], Mark(
            int(first["xmax"]), tuple(int(x) for x in first["xip"])
        )

    async def use_changes(self, mark: Any) -> tuple[dict[str, UseState], Any]:
        """See `Store.use_changes`: the memories with an access stamped by a transaction
        `mark`'s snapshot had not seen (`accesses.xid`), with their use columns, and the
        statement's snapshot as the next mark, in one statement."""
        rows = await self._rows(
            f"""WITH {SNAPSHOT},
used AS (
    SELECT DISTINCT memory_id FROM accesses
    WHERE xid >= %(xmax)s::xid8 OR xid = ANY(%(xip)s::xid8[])
),
changed AS (SELECT m.id, {USE_COLUMNS} FROM used u JOIN memories m ON m.id = u.memory_id)
SELECT snap.xmax, snap.xip, c.* FROM snap LEFT JOIN changed c ON true""",
            {"xmax": str(mark.xmax), "xip": [str(x) for x in mark.xip]},
        )
        first = rows[0]
        return {r["id"]: use_from_row(r) for r in rows if r["id"] is not None}, Mark(
            int(first["xmax"]), tuple(int(x) for x in first["xip"])
        )

    async def _changes_since(
        self, mark: Mark, columns: str, limit: int, roles: Sequence[str] | None = None
    ) -> list[dict]:
        return await self._rows(
            changes_sql(columns, cold=mark.xmax == 0 and not mark.xip),
            {
                "xmax": str(mark.xmax),
                "xip": [str(x) for x in mark.xip],
                "after": _FIRST_SEQ if mark.after is None else mark.after,
                "limit": limit,
                "roles": sorted(roles or ()),
            },
            binary=True,
        )

    async def _sync_stats(self) -> DocStats:
        """Bring N and the token total up to date (skipped when no commit was heard)."""
        token = (await self.change_token(), self._own)
        if token == self._stats_seen:
            return self._stats
        self._stats_seen = token
        stats = self._stats
        while True:
            rows = await self._changes_since(stats.mark, "m.seq, m.doc_len", STATS_PAGE)
            pairs = [(r["seq"], r["doc_len"]) for r in rows if r["seq"] is not None]
            if stats.apply(pairs):
                self._common.forget()  # a rewritten row may have lost a common lexeme
            full = len(pairs) >= STATS_PAGE
            last = pairs[-1][0] if pairs else None
            stats.mark = next_mark(stats.mark, rows[0]["xmax"], rows[0]["xip"], last, full)
            if not full:
                break
        if stats.rows >= self._analyze_at and self._analyzing is None:
            self._analyze_at = int(stats.rows * STATS_GROWTH) + 1
            self._analyzing = asyncio.create_task(self._keep_statistics(), name="nooa analyze")
        return stats

    async def _keep_statistics(self) -> None:
        """ANALYZE the tables when PostgreSQL has not: the GIN and row-count estimates decide
        between an index and a scan for every search (without statistics, counting one word
        scanned the whole table: 19 ms at 10k rows against 0.4 ms). Autovacuum normally does
        this; where it is off or behind, the store does it, in the background, with the same
        threshold (a tenth of the rows changed)."""
        try:
            rows = await self._rows(
                "SELECT n_mod_since_analyze, n_live_tup FROM pg_stat_user_tables "
                "WHERE relid = 'memories'::regclass"
            )
            if rows and rows[0]["n_mod_since_analyze"] > 0.1 * rows[0]["n_live_tup"] + 500:
                await self._exec("ANALYZE memories, edges, accesses, access_counts")
        except (psycopg.Error, StoreUnavailable):
            pass  # statistics are an optimisation; the next growth step tries again
        finally:
            self._analyzing = None

    async def _keyword_candidates(self, ask: KeywordAsk) -> list[Any]:
        """The BM25 top `limit` of live rows for `stems` in scope and the top `faded` of faded
        rows (bm25 set), and the rows `ids`; BM25 exactly as SQLite's FTS5 computes it (see
        pg_search), in one statement; `columns` of each, made into `decode`'s result."""
        stems, scope, limit, ids = ask.stems, ask.scope, ask.limit, ask.ids
        faded, wide, columns, decode = ask.faded, ask.wide, ask.columns, ask.decode
        stats = await self._sync_stats()
        rows = stats.rows
        cap = common_cap(rows, self.common_floor)
        common = set(self._common.known(rows))
        # Words whose lexemes this process already found too common are cut without counting.
        words = [lex for lex in stems if lex not in common]
        lexemes = sorted(set(words))
        if not lexemes:
            return await self.scoring_rows(ids) if ids else []
        where, params = scope_where(scope, POSTGRES)
        params.update(
            {f"q{i}": tsquery_text([lex]) for i, lex in enumerate(lexemes)},
            cap=cap,
            rows=rows,
            words=[lexemes.index(lex) for lex in words],
            lexes=words,
            avgdl=max(stats.avgdl, 1e-9),
            limit=limit,
            faded=faded,
            ids=list(ids),
        )
        found = await self._rows(bm25_sql(columns, where, faded > 0, len(lexemes), wide), params)
        *ranked, last = found
        self._common.learn(
            [lex for lex, n in zip(lexemes, last["counts"], strict=True) if n >= cap]
        )
        return [decode(r, r["bm25"]) for r in ranked]

    # ------------------------------------------------------------------ several reads, one trip

    async def _reads(
        self, statements: Sequence[tuple[str, Any]], prepare: bool = False
    ) -> list[Sequence[Row]]:
        """Run read statements in one pipeline (one round trip), retried once like `_rows`;
        `prepare`: as server-side prepared statements (see `PREPARE_ONLY_ASKED`)."""
        if len(statements) <= 1:
            return [await self._rows(query, params) for query, params in statements]
        retries = 1
        while True:
            tx = _TX.get().get(id(self))
            try:
                # A transaction's first statements are in `_conn`'s pipeline already.
                async with self._conn() as conn, self._pipelined(conn):
                    cursors = [await conn.execute(q, p, prepare=prepare) for q, p in statements]
                return [await cur.fetchall() for cur in cursors]
            except psycopg.OperationalError as exc:
                if retries == 0 or not self._may_resend(tx, exc):
                    raise self._unavailable(exc) from None
                retries -= 1
                await self._retry_on(tx)

    @staticmethod
    def _pipelined(conn: Any) -> contextlib.AbstractAsyncContextManager[Any]:
        """A pipeline on `conn`, unless it is in one (a nested one would sync at once)."""
        if conn.info.pipeline_status == psycopg.pq.PipelineStatus.OFF:
            return conn.pipeline()  # type: ignore[no-any-return]
        return contextlib.nullcontext()

    def _may_resend(self, tx: _Tx | None, exc: BaseException) -> bool:
        """Whether what failed may be sent again: a read outside a transaction, or a
        transaction's first round trip on a connection found dead (see `_Tx`); never a
        conflict."""
        if isinstance(exc, _CONFLICTS):
            return False
        return tx is None or (not tx.started and tx.conn.broken)

    async def _retry_on(self, tx: _Tx | None) -> None:
        if tx is not None:
            await self._reconnect(tx)

    # ------------------------------------------------------------------ maintenance

    async def add_edges(self, edges: Sequence[tuple[str, str, EdgeType, float]]) -> None:
        """`add_edge` for each edge, as one statement over arrays (`unnest`), held back like
        any `_exec_many`: a reflection pass links hundreds of pairs per transaction, and one
        statement per edge cost PostgreSQL a parse, bind and execute each (and the driver as
        much). One statement may not touch a row twice, so repeats of an edge within the
        call are folded first into their largest weight: what upserting them in order gives
        (the first one's created_at, the same for all of them)."""
        if not edges:
            return
        best: dict[tuple[str, str, str], float] = {}
        for src, dst, kind, weight in edges:
            key = (src, dst, EdgeType(kind).value)
            best[key] = max(weight, best.get(key, weight))
        await self._exec_many(
            "INSERT INTO edges(src, dst, type, weight, created_at) "
            "SELECT s, d, t, w, %(c)s FROM unnest(%(s)s::text[], %(d)s::text[], %(t)s::text[], "
            "%(w)s::float8[]) AS e(s, d, t, w) "
            "ON CONFLICT (src, dst, type) DO UPDATE SET weight = greatest(edges.weight, "
            "excluded.weight)",
            [
                {
                    "s": [k[0] for k in best],
                    "d": [k[1] for k in best],
                    "t": [k[2] for k in best],
                    "w": list(best.values()),
                    "c": datetime.now(UTC).timestamp(),
                }
            ],
        )

    async def reflection_changes(self, since: int | None, limit: int) -> RowChanges | None:
        """None: `rev` moves only with what vector caches hold (not status, importance or
        the counters rescore reads), so a pass here reads every row (`reflection_rows`)."""
        return None

    # ------------------------------------------------------------------ statistics

    async def counts(self, scope: Scope) -> Counts:
        where, params = scope_where(scope, POSTGRES, "")
        # One scan for all three: per type, per owner and overall, each set in the database's
        # own order (as ORDER BY type, ORDER BY owner); live counts per type and owner only.
        rows = await self._rows(
            "SELECT grouping(type, owner) AS level, type, owner, count(*) AS n, "
            "count(*) FILTER (WHERE archived) AS archived, "
            "count(*) FILTER (WHERE NOT archived) AS live "
            f"FROM memories WHERE {where} GROUP BY GROUPING SETS ((type), (owner), ()) "
            "ORDER BY level, type, owner",
            params,
        )
        by_type = {r["type"]: r["live"] for r in rows if r["level"] == 1 and r["live"]}
        by_owner = {r["owner"]: r["live"] for r in rows if r["level"] == 2 and r["live"]}
        overall = next(r for r in rows if r["level"] == 3)
        return Counts(overall["n"], overall["archived"], by_type, by_owner)


# ---------------------------------------------------------------------------- opening


async def _configure(conn: Any) -> None:
    """JSON columns come back as their text, decoded by the same code as SQLite's rows; a
    commit's notification is sent after it (pg_schema `_NOTIFY_AFTER`), by `_commit`."""
    conn.adapters.register_loader("json", TextLoader)
    conn.adapters.register_loader("jsonb", TextLoader)
    await conn.execute(NOTIFY_AFTER_COMMIT)
