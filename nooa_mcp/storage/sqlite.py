"""The SQLite store: one file is the source of truth on one machine (DESIGN.md §15).

Several server processes share the file. WAL lets readers run beside one writer;
`busy_timeout` makes writers wait for each other; every read-then-write transaction takes the
write lock up front (`BEGIN IMMEDIATE`), because a deferred transaction that upgrades to a write
can fail with SQLITE_BUSY without `busy_timeout` ever retrying it. Inside one process, an anyio
lock keeps one coroutine's statements out of another's transaction on the store's connection,
and reads made outside a transaction run on read-only connections of their own: on the one
connection they ran inside whatever write another coroutine had open, and saw its rows before
they were committed (or rolled back).

This module implements `storage.base.Store`; its rows leave it decoded and typed.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import aiosqlite
import anyio
import anyio.to_thread
import numpy as np

from ..domain.accesses import AccessState
from ..domain.reflection import Rows
from ..domain.schema import (
    content_hash,
)
from ..domain.scope import Scope
from ..errors import StoreTooNew, StoreUnavailable
from .base import (
    COMMON_FLOOR,
    Counts,
    EdgeRow,
    RowChanges,
    UsesApplier,
    UseState,
    VectorRow,
    tell_faded_sql,
)
from .checkpoints import Checkpointer
from .dialect import NEXT_REV, SQLITE, reflection_columns, scope_where
from .keywords import row_stems
from .rows import (
    FACT_COLUMNS,
    USE_COLUMNS,
    KeywordAsk,
    access_state_from_row,
    edge_from_row,
    use_from_row,
    vector_row_from,
)
from .sql_core import (
    SqlVerbs,
    access_states_sql,
    append_accesses_sql,
    apply_uses,
    save_accesses_sql,
)
from .sql_reports import SqlReports
from .sqlite_schema import (
    ACCESS_COUNTS,
    EDGE_REVS,
    KEYWORDS,
    SCHEMA,
    SCHEMA_VERSION,
    split_sql,
)
from .sqlite_search import BM25, KEYWORD_POOL, TermCounts, fts_query, selective, selective_sql

__all__ = ["NEXT_REV", "SCHEMA_VERSION", "SQLiteStore", "copy_store", "fts_query"]

logger = logging.getLogger(__name__)

#: How long a read on the event loop's thread (`SQLiteStore._read_here`) waits for a busy
#: file before it goes to the "reads" thread instead: readers of a WAL file wait only in rare
#: moments (recovery, a log being reset), and this wait holds every other call.
HERE_BUSY_MS = 20


#: Tables of a nooa-mcp store; a database holding others, and none of these, is not ours.
OUR_TABLES = frozenset({"memories", "edges", "accesses", "maintenance_log", "tombstones", "meta"})


#: Columns every release's `memories` table has had.
_OUR_COLUMNS = frozenset({"id", "type", "content", "content_hash", "owner"})


def _ours(db: sqlite3.Connection, tables: set[str]) -> bool:
    """Whether a database with tables is a nooa-mcp store: its schema version is set (a store
    gets its tables and its version in one transaction) and its `memories` table has the
    columns of one. A table name alone is not enough: a notes app may have `memories` too."""
    if not OUR_TABLES & tables or "memories" not in tables:
        return False
    if db.execute("PRAGMA user_version").fetchone()[0] < 1:
        return False
    columns = {r[1] for r in db.execute("PRAGMA table_info(memories)")}
    return columns >= _OUR_COLUMNS


def _inspect(path: Path) -> bool:
    """Check an existing file before opening it for real; whether it can be written.

    Reads without writing anything (a read-only connection, no WAL switch), so a file that is
    refused is left byte for byte as it was. Damage deeper in the file shows when a page is
    read, as the same kind of sentence (see `unavailable`).

    Raises:
        StoreUnavailable: not SQLite, or another application's database.
    """
    query = "SELECT name FROM sqlite_master WHERE type='table'"
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            db.execute(query).fetchall()
        except sqlite3.OperationalError:
            # A WAL database on a read-only mount: its -shm file cannot be made (see _connect).
            db.close()
            db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    except sqlite3.Error as exc:
        raise unavailable(path, exc) from None
    try:
        tables = {r[0] for r in db.execute(query)}
        foreign = sorted(t for t in tables if not t.startswith(("sqlite_", "memories_")))
        if tables and not _ours(db, tables):
            shown = ", ".join(foreign[:3]) + (", …" if len(foreign) > 3 else "")
            raise StoreUnavailable(
                str(path),
                f"is another application's database (tables {shown}), not a nooa-mcp store; "
                "it was not changed.",
                "Point --store at a nooa-mcp store, or at a new file to create one.",
            )
    except sqlite3.Error as exc:
        raise unavailable(path, exc) from None
    finally:
        db.close()
    return (
        os.access(path, os.W_OK) and os.access(path.parent, os.W_OK) and not _read_only_mount(path)
    )


async def _connect(path: Path, writable: bool, immutable: bool = True) -> aiosqlite.Connection:
    """A connection to the store file; read-only ones never create -wal or -shm files.

    On a read-only mount SQLite cannot create the shared-memory file a WAL database needs,
    so a read-only open that fails is retried as immutable (the file cannot change under us
    there anyway), unless `immutable` is False.
    """
    if writable:
        return await aiosqlite.connect(str(path), isolation_level=None)
    conn = await aiosqlite.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    try:
        await conn.execute_fetchall("PRAGMA user_version")
        return conn
    except sqlite3.OperationalError:
        await conn.close()
        if not immutable:
            raise
    return await aiosqlite.connect(
        f"file:{path}?mode=ro&immutable=1", uri=True, isolation_level=None
    )


def _read_only_mount(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def unavailable(path: Path, exc: sqlite3.Error) -> StoreUnavailable:
    """One sentence for what SQLite reported about the store file, naming it and the fix."""
    text = str(exc).lower()
    if "full" in text:
        problem, fix = (
            "cannot be written: its disk is full; nothing was written.",
            ("Free space on that disk and try again."),
        )
    elif "readonly" in text or "read-only" in text:
        problem, fix = (
            "is read-only: nothing can be written.",
            ("Make the file and its folder writable, or point --store at a writable copy."),
        )
    elif "not a database" in text:
        problem, fix = (
            "is not a nooa-mcp store (it is not an SQLite database).",
            ("Point --store at a nooa-mcp store, or at a new file to create one."),
        )
    elif "malformed" in text or "corrupt" in text:
        problem, fix = (
            f"is damaged (SQLite: {exc}).",
            ("Restore it from a backup or an export, or point --store at another file."),
        )
    elif "unable to open" in text:
        problem, fix = "cannot be opened.", "Check the path and its permissions."
    elif "locked" in text or "busy" in text:
        problem, fix = (
            "is busy: another process held its write lock for over 30 s.",
            ("Try again; if it persists, look for a stuck nooa-mcp process."),
        )
    else:
        problem, fix = f"failed: {exc}.", "Check the file, its disk and its permissions."
    return StoreUnavailable(str(path), problem, fix)


#: The stores (by `id`) whose write transaction the current task is inside: its reads go to
#: the store's own connection, where its uncommitted rows are.
_WRITING: ContextVar[frozenset[int]] = ContextVar("nooa_sqlite_writing", default=frozenset())


class SQLiteStore(SqlVerbs, SqlReports):
    """An open store file. Create with `await SQLiteStore.open(path)`; close with `close()`."""

    kind = "sqlite"

    @property
    def in_transaction(self) -> bool:
        """Whether the caller is inside this store's transaction."""
        return id(self) in _WRITING.get()

    dialect = SQLITE

    def __init__(self, conn: aiosqlite.Connection, path: Path) -> None:
        self.conn = conn
        self.path = path
        self.label = path.name
        self.writable = True
        self._identity: tuple[int, int] = (0, 0)
        #: See COMMON_FLOOR; tests lower it to exercise the cut-off on a small store.
        self.common_floor = COMMON_FLOOR
        #: Words' row counts for the common-word cut, kept while no row changes.
        self._term_counts = TermCounts()
        self._write_lock = anyio.Lock()
        self._checkpointer: Checkpointer | None = None
        #: Read-only connections, each with a thread of its own, opened on first use
        #: (`_side`): "reads" for every read outside a transaction once the store is open,
        #: "bulk" for whole-role reads (`_bulk_rows`).
        self._sides: dict[str, aiosqlite.Connection] = {}
        self._sides_lock = anyio.Lock()
        #: The "reads" connection's twin run on the event loop's own thread (`_read_here`),
        #: opened with the side connections; None until then or if it cannot be opened.
        self._here: sqlite3.Connection | None = None
        #: Set once the store is open and migrated: reads outside a transaction may then
        #: leave the store's connection.
        self._reads_apart = False
        #: Set by `close`: no side connection opens after it (its thread would outlive us).
        self._closed = False

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    async def open(cls, path: Path | str) -> SQLiteStore:
        """Open (creating if needed) and migrate a store file.

        A file that is not a nooa-mcp store (another application's database, a damaged or
        non-SQLite file, a directory) is refused and left exactly as it was. A file that can
        only be read is opened read-only: recall works, writes are refused.

        Raises:
            StoreTooNew: the file was written by a newer schema; it is left untouched.
            StoreUnavailable: the path cannot be used as a store (the message says why).
        """
        path = Path(path).expanduser()
        if path.is_dir():
            raise StoreUnavailable(
                str(path),
                "is a directory, not a store file.",
                "Pass a file path with --store (or NOOA_STORE), e.g. memory.sqlite.",
            )
        writable = True
        if path.exists():
            writable = await anyio.to_thread.run_sync(_inspect, path)
        else:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreUnavailable(
                    str(path), f"cannot be created ({exc.strerror}).", "Pick a writable folder."
                ) from None
            if not os.access(path.parent, os.W_OK | os.X_OK):
                # Told before SQLite tries: a failed connect leaves aiosqlite's thread to
                # report into a closed event loop, a traceback after the one sentence.
                raise StoreUnavailable(
                    str(path),
                    "cannot be created (its folder is read-only).",
                    "Pick a writable folder.",
                )
        try:
            conn = await _connect(path, writable)
        except sqlite3.Error as exc:
            raise unavailable(path, exc) from None
        conn.row_factory = sqlite3.Row
        store = cls(conn, path)
        store.writable = writable
        try:
            await store._configure()
            await store._migrate()
            if writable:
                await store._checkpoint_aside()
        except BaseException:
            await store.close()
            raise
        # A read-only file has no writes in progress to keep reads apart from.
        store._reads_apart = writable
        return store

    async def _checkpoint_aside(self) -> None:
        """Checkpoint the WAL from a thread of its own, not in the commits calls wait on
        (see `checkpoints`); if its connection cannot be opened, SQLite's own stay on."""
        checkpointer = Checkpointer(self.path)
        try:
            await anyio.to_thread.run_sync(checkpointer.start)
        except (sqlite3.Error, RuntimeError):  # RuntimeError: no thread could be started
            logger.warning("no checkpoint thread for %s; SQLite checkpoints in commits", self.path)
            return
        self._checkpointer = checkpointer
        await self._execute("PRAGMA wal_autocheckpoint = 0")

    async def _configure(self) -> None:
        await self._execute("PRAGMA busy_timeout = 30000")
        if self.writable:
            await self._fetch("PRAGMA journal_mode = WAL")
        # NORMAL is durable across process crashes in WAL mode; only power loss can drop the
        # newest commits, and the file stays consistent either way.
        await self._execute("PRAGMA synchronous = NORMAL")
        await self._execute("PRAGMA foreign_keys = ON")
        info = os.stat(self.path)
        self._identity = (info.st_dev, info.st_ino)

    async def _migrate(self) -> None:
        version = await self._scalar("PRAGMA user_version")
        if version > SCHEMA_VERSION:
            raise StoreTooNew(str(self.path), version, SCHEMA_VERSION)
        if version == SCHEMA_VERSION:
            return
        if not self.writable:
            raise StoreUnavailable(
                str(self.path),
                f"is read-only and has schema version {version}, which this nooa-mcp would "
                f"upgrade to {SCHEMA_VERSION}.",
                "Make it writable once so it can be upgraded, or use an older nooa-mcp.",
            )
        async with self.transaction():
            # Re-read under the write lock: another process may have migrated meanwhile.
            version = await self._scalar("PRAGMA user_version")
            if version == 0:
                for statement in split_sql(SCHEMA + KEYWORDS + ACCESS_COUNTS + EDGE_REVS):
                    await self._execute(statement)
            else:
                if version == 1:
                    await self._rehash()
                if version <= 2:
                    await self._count_accesses()
                if version <= 3:
                    await self._tell_faded()
                if version <= 4:
                    await self._index_stems()
                if version <= 5:
                    await self._number_edges()
                if 5 <= version <= 6:  # (before 5, `_index_stems` stemmed them as 7 does)
                    await self._restem()
            await self._execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    async def _rehash(self) -> None:
        """Version 1 → 2: recompute every content hash under the normalised rule."""
        rows = await self._rows("SELECT id, content FROM memories")
        await self._execute_many(
            "UPDATE memories SET content_hash = ? WHERE id = ?",
            [(content_hash(r["content"]), r["id"]) for r in rows],
        )
        await self._execute(
            "UPDATE tombstones SET content_hash = (SELECT m.content_hash FROM memories m "
            "WHERE m.id = tombstones.memory_id) "
            "WHERE memory_id IN (SELECT id FROM memories)"
        )

    async def _tell_faded(self) -> None:
        """Version 3 → 4: the `faded` flag, set on the archived rows whose standing tombstone
        says maintenance archived them; every other archived row stays forgotten (a file
        whose version was set back by hand keeps its column)."""
        columns = {r["name"] for r in await self._rows("PRAGMA table_info(memories)")}
        if "faded" not in columns:
            await self._execute("ALTER TABLE memories ADD COLUMN faded INTEGER NOT NULL DEFAULT 0")
        await self._execute(tell_faded_sql("archived = 1", "1"))

    async def _index_stems(self) -> None:
        """Version 4 → 5: every row's stems, and the keyword index built from them (the
        old one, stemmed by FTS5's Porter, is dropped)."""
        for name in ("memories_ai", "memories_ad", "memories_au"):
            await self._execute(f"DROP TRIGGER IF EXISTS {name}")
        await self._execute("DROP TABLE IF EXISTS memories_fts")
        columns = {r["name"] for r in await self._rows("PRAGMA table_info(memories)")}
        if "stems" not in columns:
            await self._execute("ALTER TABLE memories ADD COLUMN stems TEXT NOT NULL DEFAULT '[]'")
        rows = await self._rows("SELECT seq, title, content, tags, entities FROM memories")
        await self._execute_many(
            "UPDATE memories SET stems = ? WHERE seq = ?",
            [(row_stems(r[1], r[2], json.loads(r[3]), json.loads(r[4])), r[0]) for r in rows],
        )
        for statement in split_sql(KEYWORDS):
            await self._execute(statement)
        await self._execute(
            "INSERT INTO memories_fts(rowid, title, content, tags, entities) "
            "SELECT seq, json_extract(stems, '$[0]'), json_extract(stems, '$[1]'), "
            "json_extract(stems, '$[2]'), json_extract(stems, '$[3]') FROM memories"
        )

    async def _restem(self) -> None:
        """Version 6 → 7: every row's stems with CJK runs as bigrams, written where they
        changed (the `memories_au` trigger re-indexes those rows)."""
        rows = await self._rows("SELECT seq, title, content, tags, entities, stems FROM memories")
        changed = []
        for r in rows:
            stems = row_stems(r[1], r[2], json.loads(r[3]), json.loads(r[4]))
            if stems != r[5]:
                changed.append((stems, r[0]))
        await self._execute_many("UPDATE memories SET stems = ? WHERE seq = ?", changed)

    async def _number_edges(self) -> None:
        """Version 5 → 6: each edge's `rev` and the triggers that move it (edges written
        before keep 0: a reader of changes starts from a mark taken after it read them all)."""
        columns = {r["name"] for r in await self._rows("PRAGMA table_info(edges)")}
        if "rev" not in columns:
            await self._execute("ALTER TABLE edges ADD COLUMN rev INTEGER NOT NULL DEFAULT 0")
        for statement in split_sql(EDGE_REVS):
            await self._execute(statement)

    async def _count_accesses(self) -> None:
        """Version 2 → 3: the counts table, its triggers and the scope index; the counts so
        far from the stream (under the write lock: no access lands between the two). Counted
        afresh even where the objects exist (a file whose version was set back by hand)."""
        for statement in split_sql(ACCESS_COUNTS):
            await self._execute(statement)
        await self._execute("DELETE FROM access_counts")
        await self._execute(
            "INSERT INTO access_counts(memory_id, channel, reader_owner, n) "
            "SELECT memory_id, channel, reader_owner, count(*) FROM accesses "
            "GROUP BY memory_id, channel, reader_owner"
        )

    async def close(self) -> None:
        # The checkpoint thread first: the store's own connection, closing last, then
        # checkpoints what is left and removes the log.
        checkpointer, self._checkpointer = self._checkpointer, None
        if checkpointer is not None:
            await anyio.to_thread.run_sync(checkpointer.stop)
        self._reads_apart, self._closed = False, True
        here, self._here = self._here, None
        if here is not None:
            here.close()
        sides, self._sides = self._sides, {}
        for side in sides.values():
            await side.close()
        await self.conn.close()

    async def check_writable(self) -> None:
        """Raise StoreUnavailable unless a write now would land in the file that is there.

        A store file deleted under a running server, or replaced (a backup restored over it),
        would take writes into a file nobody will open again, or hide them behind the old WAL:
        they would be acknowledged and lost. So every transaction checks the file first.
        """
        if not self.writable:
            raise StoreUnavailable(
                str(self.path),
                "is read-only: recall works, but nothing can be written.",
                "Make the file and its folder writable, or point --store at a writable copy.",
            )
        try:
            info = os.stat(self.path)
        except OSError:
            info = None
        if info is None or (info.st_dev, info.st_ino) != self._identity:
            raise StoreUnavailable(
                str(self.path),
                "was deleted or replaced while nooa-mcp had it open; nothing was written.",
                "Restart nooa-mcp so it opens the file that is there now.",
            )

    # ------------------------------------------------------------------ primitives

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """One write transaction at a time, lock taken up front (BEGIN IMMEDIATE).

        Raises:
            StoreUnavailable: the store is read-only, or its file was deleted or replaced.
        """
        async with self._writer():
            await self._execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await self._execute("ROLLBACK")
                raise
            else:
                with anyio.CancelScope(shield=True):
                    await self._execute("COMMIT")

    @asynccontextmanager
    async def _writer(self) -> AsyncIterator[None]:
        """This process's one writer at a time, on a store still writable and still there."""
        async with self._write_lock:
            await self.check_writable()
            checkpointer = self._checkpointer
            if checkpointer is not None and checkpointer.long_log:
                # No other write of this process can be under way: the log's restart gets
                # the lock it needs (`checkpoints`).
                await anyio.to_thread.run_sync(checkpointer.restart)
            writing = _WRITING.set(_WRITING.get() | {id(self)})
            try:
                yield
            finally:
                _WRITING.reset(writing)

    async def log_uses(self, ids: Sequence[str], apply: UsesApplier) -> dict[str, AccessState]:
        """See `Store.log_uses`: the whole transaction is one function run on the
        connection's thread, one hop there and back instead of five (each a wake of that
        thread and of the event loop's, beside the next call's query embedding). Run there,
        it always ends in COMMIT or ROLLBACK, even when its caller is cancelled meanwhile."""
        read = access_states_sql(SQLITE, ids, self._lock())

        def run(db: sqlite3.Connection) -> dict[str, AccessState]:
            db.execute("BEGIN IMMEDIATE")
            try:
                states = {r["id"]: access_state_from_row(r) for r in db.execute(*read)}
                written, logged = apply_uses(states, apply)
                if written:
                    db.executemany(*save_accesses_sql(SQLITE, list(written.values())))
                    db.executemany(*append_accesses_sql(SQLITE, logged))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return written

        async with self._writer():
            try:
                # aiosqlite runs every statement as a function queued to the connection's
                # thread (`Connection._execute`); it has no public verb for one of our own.
                return await self.conn._execute(run, self.conn._conn)
            except sqlite3.Error as exc:
                raise unavailable(self.path, exc) from None

    # Reads run to completion in one hop of the connection's thread: a statement left open
    # between `execute` and `fetch` would hold an old WAL snapshot, and a BEGIN IMMEDIATE that
    # another coroutine slips in beside it fails at once with "database is locked" as soon as
    # another process has committed (busy_timeout does not retry a stale snapshot).

    async def _scalar(self, sql: str, params: Any = ()) -> Any:
        rows = list(await self._fetch(sql, params))
        return rows[0][0] if rows else None

    async def _rows(self, sql: str, params: Any = ()) -> list[sqlite3.Row]:
        return list(await self._fetch(sql, params))

    # Every statement goes through these three, so a failure of the file (full disk, damaged
    # pages, a read-only mount) reaches the caller as one sentence naming the store.

    async def _fetch(self, sql: str, params: Any = ()) -> Iterable[sqlite3.Row]:
        """Rows of a read: inside this task's transaction on the store's connection, which
        holds its uncommitted rows; outside, on the "reads" connection, which sees only what
        was committed (in WAL mode, the last commit as each statement starts), so a recall
        beside a write never returns, or caches in the vector index, a row that may yet be
        rolled back. Apart, such reads no longer queue behind a write's statements either."""
        apart = self._reads_apart and id(self) not in _WRITING.get()
        return await self._read("reads" if apart else None, sql, params)

    async def _execute(self, sql: str, params: Any = ()) -> aiosqlite.Cursor:
        try:
            return await self.conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise unavailable(self.path, exc) from None

    async def _exec(self, sql: str, params: Any = ()) -> int:
        return (await self._execute(sql, params)).rowcount

    async def _exec_many(self, sql: str, rows: Sequence[dict[str, Any]]) -> None:
        await self._execute_many(sql, rows)

    async def _insert_row(self, sql: str, params: dict[str, Any]) -> int:
        seq = (await self._execute(sql, params)).lastrowid
        if seq is None:  # never after an INSERT; said, not assumed
            raise RuntimeError("SQLite gave no row id for an inserted memory")
        return seq

    async def _execute_many(self, sql: str, rows: Any) -> aiosqlite.Cursor:
        try:
            return await self.conn.executemany(sql, rows)
        except sqlite3.Error as exc:
            raise unavailable(self.path, exc) from None

    async def _bulk_rows(self, sql: str, params: Any = ()) -> list[sqlite3.Row]:
        """A read over a whole role (a reflection pass's rows, statistics), outside any
        transaction, on a read-only connection of its own ("bulk").

        On the store's one connection such a read held its thread for tens of ms a page, and
        every statement of the writes clients were waiting on queued behind it; on the
        "reads" connection, every recall would. In WAL mode it reads the last commit while the
        store's connection writes. Callers are never inside a transaction.
        """
        return list(await self._read("bulk", sql, params))

    async def _read(self, side: str | None, sql: str, params: Any) -> Iterable[sqlite3.Row]:
        """Run a read on the store's connection (`side` None) or on the side connection.

        A read apart from the writes ("reads") runs on this thread when it can
        (`_read_here`): one hop to a connection's thread and back through the event loop
        cost more than the statement itself, and a recall made about ten of them (DESIGN
        §15)."""
        if side == "reads":
            rows = self._read_here(sql, params)
            if rows is not None:
                return rows
        try:
            conn = self.conn if side is None else await self._side(side)
            return await conn.execute_fetchall(sql, params)
        except sqlite3.Error as exc:
            raise unavailable(self.path, exc) from None

    def _read_here(self, sql: str, params: Any) -> list[sqlite3.Row] | None:
        """A read on the event loop's thread, on a read-only connection of its own that
        sees what was committed, like "reads"; None when it cannot run here (not open yet,
        or the file is busy past a short wait: recovery, a checkpoint resetting the log),
        and the caller goes to the "reads" thread, which waits the full busy timeout.

        SQLite leaves the interpreter lock while a statement runs, so the model's thread
        embeds the query beside it as it did beside the "reads" thread."""
        conn = self._here
        if conn is None:
            if not self._reads_apart or self._closed:
                return None
            conn = self._here = self._open_here()
            if conn is None:
                return None
        try:
            return conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                return None
            raise unavailable(self.path, exc) from None
        except sqlite3.Error as exc:
            raise unavailable(self.path, exc) from None

    def _open_here(self) -> sqlite3.Connection | None:
        try:
            conn = sqlite3.connect(
                f"file:{self.path}?mode=ro",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error:
            return None
        conn.row_factory = sqlite3.Row
        # Short: this wait holds the event loop; a longer one is waited on the "reads" thread.
        conn.execute(f"PRAGMA busy_timeout = {HERE_BUSY_MS}")
        return conn

    async def _side(self, name: str) -> aiosqlite.Connection:
        """The read-only connection `name`, opened on first use (sqlite3.Error if it cannot).

        Never immutable: this process writes the file, and an immutable connection would
        go on reading what was there when it opened."""
        conn = self._sides.get(name)
        if conn is not None:
            return conn
        async with self._sides_lock:
            if self._closed:
                raise sqlite3.ProgrammingError("the store is closed")
            if name not in self._sides:
                conn = await _connect(self.path, writable=False, immutable=False)
                conn.row_factory = sqlite3.Row
                await conn.execute("PRAGMA busy_timeout = 30000")
                self._sides[name] = conn
            return self._sides[name]

    async def change_token(self) -> int:
        """PRAGMA data_version of a connection that does not write: changes when another
        connection commits (DESIGN §15), this process's own included once the store is open
        (a sync after its writes then finds what they already noted), with no hop to a
        connection's thread while reads run on the event loop's (`_read_here`)."""
        if self._reads_apart and id(self) not in _WRITING.get():
            rows = self._read_here("PRAGMA data_version", ())
            if rows is not None:
                return rows[0][0]
        return next(iter(await self._read(None, "PRAGMA data_version", ())))[0]

    # ------------------------------------------------------------------ recall

    async def row_count(self) -> int:
        # max(seq) is O(log n) and equals the count until rows are deleted (they never are).
        return await self._scalar("SELECT coalesce(max(seq), 0) FROM memories")

    async def vector_changes(
        self, mark: Any, limit: int, roles: Sequence[str] | None = None
    ) -> tuple[list[VectorRow], Any]:
        """Rows with a revision above `mark`, oldest change first (revisions are unique)."""
        since = int(mark or 0)
        d = self.dialect
        embedding = "embedding"
        params: dict[str, Any] = {"since": since, "limit": limit}
        if roles is not None:
            # Rows of roles not held come without their vector (see `VectorIndex` residency).
            embedding = f"CASE WHEN {d.one_of('role', 'roles')} THEN embedding END"
            params["roles"] = d.values(list(roles))
        rows = await self._rows(
            "SELECT seq, id, role, owner, type, archived, faded, "
            f"{embedding} AS embedding, rev, {FACT_COLUMNS} FROM memories m "
            "WHERE rev > :since ORDER BY rev LIMIT :limit",
            params,
        )
        out = [vector_row_from(r) for r in rows]
        return out, (rows[-1]["rev"] if rows else since)

    async def keyword_changes(self, mark: Any, limit: int) -> tuple[list[tuple[int, Any]], Any]:
        """See `Store.keyword_changes`: revisions are unique and committed in order."""
        since = int(mark or 0)
        rows = await self._rows(
            "SELECT seq, stems, rev FROM memories WHERE rev > :since ORDER BY rev LIMIT :limit",
            {"since": since, "limit": limit},
        )
        return [(r["seq"], r["stems"]) for r in rows], (rows[-1]["rev"] if rows else since)

    async def vector_mark(self) -> Any:
        # Writers hold the write lock while they number revisions: the highest committed one
        # is a mark no later commit falls below.
        return await self._scalar("SELECT coalesce(max(rev), 0) FROM memories")

    async def ranking_mark(self) -> Any:
        # Writers hold the write lock while they number accesses and edges: the highest
        # committed numbers are a mark no later commit falls below.
        rows = await self._rows(
            "SELECT (SELECT coalesce(max(seq), 0) FROM accesses) AS used, "
            "(SELECT coalesce(max(rev), 0) FROM edges) AS linked"
        )
        return (rows[0]["used"], rows[0]["linked"])

    async def ranking_changes(
        self, mark: Any, roles: Sequence[str] | None = None
    ) -> tuple[list[EdgeRow], Any]:
        """Edges numbered (rev, `sqlite_schema.EDGE_REVS`) above `mark`, in one statement;
        with `roles`, the edges between their memories, and the highest number of all (kind
        2) for the next mark. The mark's uses part (`use_changes`) passes through."""
        used, linked = mark
        params: dict[str, Any] = {"linked": linked}
        sql = "SELECT 1 AS kind, src, dst, type, weight, rev AS at FROM edges WHERE rev > :linked"
        if roles is not None:
            params["roles"] = SQLITE.values(sorted(set(roles)))
            sql = (
                # From the edges past the mark (SQLite went from every memory of the roles
                # into their edges: 9 ms a sync at 10k, 0.06 through edges_rev).
                "SELECT 1 AS kind, e.src AS src, e.dst AS dst, e.type AS type, "
                "e.weight AS weight, e.rev AS at FROM edges e INDEXED BY edges_rev "
                "JOIN memories a ON a.id = e.src JOIN memories b ON b.id = e.dst "
                f"WHERE e.rev > :linked AND {SQLITE.one_of('a.role', 'roles')} "
                f"AND {SQLITE.one_of('b.role', 'roles')} "
                "UNION ALL SELECT 2, NULL, NULL, NULL, NULL, max(rev) FROM edges "
                "WHERE rev > :linked"
            )
        edges = []
        for r in await self._rows(sql, params):
            if r["at"] is not None:
                if r["kind"] == 1:
                    edges.append(edge_from_row(r))
                linked = max(linked, r["at"])
        return edges, (used, linked)

    async def use_changes(self, mark: Any) -> tuple[dict[str, UseState], Any]:
        """See `Store.use_changes`: the accesses numbered above the mark's (seq), through the
        rowid (NOT INDEXED: grouping by memory, the planner walked every entry of
        `accesses_memory` instead, 18 ms at 100k), and each one's memory's use columns."""
        used, linked = mark
        rows = await self._rows(
            f"SELECT m.id, {USE_COLUMNS}, c.at FROM (SELECT memory_id, max(seq) AS at "
            "FROM accesses NOT INDEXED WHERE seq > :used GROUP BY memory_id) c "
            "JOIN memories m ON m.id = c.memory_id",
            {"used": used},
        )
        return {r["id"]: use_from_row(r) for r in rows}, (
            max([used, *(r["at"] for r in rows)]),
            linked,
        )

    async def _selective_terms(self, terms: list[str]) -> list[str]:
        """Drop terms too common to be worth ranking (see COMMON_SHARE).

        Outside a transaction the counts are kept while no row changes (`TermCounts`): a
        recall whose words were all counted since the last change asks only for the
        store's highest `rev` (an index's last entry), not for each word's rows again."""
        if not terms:
            return terms
        floor = self.common_floor
        if id(self) in _WRITING.get():
            return selective(terms, (await self._rows(*selective_sql(terms, floor)))[0])
        rev = await self.vector_mark()  # the highest committed row revision
        kept = self._term_counts
        missing = kept.missing(rev, floor, terms)
        if missing:
            kept.learn(missing, (await self._rows(*selective_sql(missing, floor)))[0])
        return selective(terms, kept.row(terms))

    async def _keyword_candidates(self, ask: KeywordAsk) -> list[Any]:
        """The keyword top `limit` of live rows and top `faded` of faded rows for `stems`, and
        the rows `ids`, with what scoring needs (see `Store.candidates`), or only `columns`
        of each, made into what `decode` makes of a row and its keyword score.

        Two round trips: the terms' counts (`_selective_terms`), then one statement that
        ranks inside FTS5, joins only the best rows and adds the rows `ids` beside them.
        """
        stems, scope, limit, ids = ask.stems, ask.scope, ask.limit, ask.ids
        faded, wide, columns, decode = ask.faded, ask.wide, ask.columns, ask.decode
        query = fts_query(await self._selective_terms(stems))
        where, params = scope_where(scope, SQLITE)
        # A row its user forgot is never a keyword candidate; a faded one only when asked for.
        states = "AND (m.archived = 0 OR m.faded = 1)" if faded > 0 else "AND m.archived = 0"
        tier = "m.archived"
        if wide:
            states, tier = "", "0"
        wanted = list(dict.fromkeys(ids))[:500]
        by_id = (
            f"SELECT {columns}, NULL AS score, 0 AS tier, 0 AS tier_rank FROM memories m "
            f"WHERE {SQLITE.one_of('m.id', 'ids')}"
        )
        params.update(ids=SQLITE.values(wanted), query=query, limit=limit, faded=faded)
        if query is None:
            if not wanted:
                return []
            return [decode(r, None) for r in await self._rows(by_id, params)]
        # Each tier (live, faded) keeps its own best rows: faded rows never take a live
        # row's place among the `limit` best.
        tiers = "WHERE tier_rank <= CASE tier WHEN 0 THEN :limit ELSE :faded END"
        ranked = (
            f"{tier} AS tier, "
            f"row_number() OVER (PARTITION BY {tier} ORDER BY {{score}}) AS tier_rank"
        )
        # Join only the best `pool` rows (KEYWORD_POOL). If the scope or archive filter
        # leaves fewer than `limit` live rows out of a full pool, fall back to filtering every
        # match, so the live answer never changes. Faded rows are those among the same pool:
        # the best keyword matches.
        params["pool"] = max(limit * 4, 200)
        keyword = (
            f"SELECT {columns}, f.score AS score, {ranked.format(score='f.score')} "
            f"FROM ({KEYWORD_POOL}) f JOIN memories m ON m.seq = f.seq WHERE {where} {states}"
        )
        sql = f"SELECT * FROM ({keyword}) {tiers}"
        if wanted:
            sql += f" UNION ALL {by_id}"
        rows = await self._rows(sql, params)
        hits = [r for r in rows if r["score"] is not None]
        if sum(1 for r in hits if not r["tier"]) < limit:
            matched = await self._scalar(
                "SELECT count(*) FROM (SELECT rowid FROM memories_fts "
                "WHERE memories_fts MATCH :query LIMIT :pool)",
                params,
            )
            if matched >= params["pool"]:
                # FTS5's bm25() cannot sit inside a window: rank the scored rows outside it.
                scored = (
                    f"SELECT {columns}, {BM25} AS score "
                    "FROM memories_fts JOIN memories m ON m.seq = memories_fts.rowid "
                    f"WHERE memories_fts MATCH :query AND {where} {states}"
                )
                outer = "0" if wide else "archived"
                hits = await self._rows(
                    f"SELECT * FROM (SELECT s.*, {outer} AS tier, row_number() OVER "
                    f"(PARTITION BY {outer} ORDER BY score) AS tier_rank FROM ({scored}) s) "
                    f"{tiers}",
                    params,
                )
        hits = sorted(hits, key=lambda r: (r["score"], r["seq"]))
        out = [decode(r, -r["score"]) for r in hits]
        seen = {r["id"] for r in hits}
        out += [decode(r, None) for r in rows if r["score"] is None and r["id"] not in seen]
        missing = [i for i in dict.fromkeys(ids) if i not in seen and i not in set(wanted)]
        if missing:
            out += await self.scoring_rows(missing)
        return out

    # ------------------------------------------------------------------ maintenance

    async def reflection_changes(self, since: int | None, limit: int) -> RowChanges | None:
        """See `Store.reflection_changes`: every rewrite but an access log's moves `rev`
        (`NEXT_REV`), and writers commit in revision order under the file's write lock, so
        a row committed after this read has a higher revision than it reached."""
        if since is None:
            upto = await self._bulk_rows("SELECT coalesce(max(rev), 0) FROM memories")
            return RowChanges(Rows.from_records([]), [], np.zeros(0, dtype=bool), upto[0][0])
        rows = await self._bulk_rows(
            f"SELECT {reflection_columns(SQLITE)}, role, archived, rev FROM memories "
            "WHERE rev > :since ORDER BY rev LIMIT :limit",
            {"since": since, "limit": limit},
        )
        return RowChanges(
            Rows.from_records(tuple(r)[:-3] for r in rows),
            [r["role"] for r in rows],
            np.array([bool(r["archived"]) for r in rows], dtype=bool),
            rows[-1]["rev"] if rows else since,
        )

    # ------------------------------------------------------------------ statistics

    async def counts(self, scope: Scope) -> Counts:
        where, params = scope_where(scope, SQLITE, "")
        # One pass over the covering index (grouped by owner first: grouped by type first,
        # the planner walks memories_type and reads every wide row for its owner).
        rows = await self._bulk_rows(
            f"SELECT owner, archived, type, count(*) AS n FROM memories WHERE {where} "
            "GROUP BY owner, archived, type",
            params,
        )
        by_type: dict[str, int] = {}
        by_owner: dict[str, int] = {}
        for r in rows:
            if not r["archived"]:
                by_type[r["type"]] = by_type.get(r["type"], 0) + r["n"]
                by_owner[r["owner"]] = by_owner.get(r["owner"], 0) + r["n"]
        return Counts(
            total=sum(r["n"] for r in rows),
            archived=sum(r["n"] for r in rows if r["archived"]),
            by_type=dict(sorted(by_type.items())),
            by_owner=dict(sorted(by_owner.items())),
        )


async def copy_store(source: Path, target: Path) -> None:
    """Copy a store file consistently (SQLite's online backup), e.g. to run variants on copies."""

    def copy() -> None:
        src = sqlite3.connect(source)
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)
        finally:
            dst.close()
            src.close()

    await anyio.to_thread.run_sync(copy)
