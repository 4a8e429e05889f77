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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiosqlite
import anyio
import anyio.to_thread
import numpy as np

from ..domain.reflection import Rows
from ..domain.schema import (
    AccessRecord,
    EdgeType,
    Memory,
    content_hash,
)
from ..domain.scope import Scope
from ..errors import AmbiguousId, NotFound, StoreTooNew, StoreUnavailable
from .base import (
    ACCESS_COLUMNS,
    COMMON_FLOOR,
    COMMON_SHARE,
    DUMP_COLUMNS,
    DUMP_JSON,
    DUMP_KEYS,
    DUMP_TABLES,
    REFLECTION_COLUMNS,
    Counts,
    EdgeRow,
    KpiTotals,
    RowChanges,
    ScoringRow,
    VectorRow,
    tell_faded_sql,
)
from .checkpoints import Checkpointer
from .keywords import query_stems, row_stems
from .rows import (
    MIN_PREFIX,
    SCORING_COLUMNS,
    epoch,
    memory_from_row,
    memory_values,
    scoring_from_row,
    time_from_epoch,
    vector_row_from_row,
)
from .sql_core import SQLITE, SqlVerbs

__all__ = ["SQLiteStore", "copy_store", "fts_query"]

logger = logging.getLogger(__name__)

#: 1: the first release. 2: content_hash is taken after NFKC and case folding (exact repeats,
#: DESIGN.md §4.2); a version-1 file is rehashed in place when opened. 3: the access stream's
#: counts per memory, channel and reader (`access_counts`, kept by triggers) and a covering
#: index for scans by scope, so stats reads neither the stream nor the wide rows; an older
#: file's counts are taken from its stream when it is opened. 4: `faded`, which tells a memory
#: maintenance archived (recall still reaches it) from one its user forgot; an older file's
#: archived rows are told apart by their standing tombstone's reason (`domain.archive`).
#: 5: keyword search over the stems of `storage.keywords` (`stems`, `_KEYWORDS`), as
#: PostgreSQL indexes them; an older file's rows are stemmed and indexed anew when opened.
SCHEMA_VERSION = 5

_SCHEMA = """
CREATE TABLE memories (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    role TEXT NOT NULL DEFAULT '',
    title TEXT NOT NULL DEFAULT '',
    content TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '[]',
    entities TEXT NOT NULL DEFAULT '[]',
    place_or_task TEXT NOT NULL DEFAULT '',
    importance REAL NOT NULL,
    salience REAL NOT NULL,
    confidence REAL NOT NULL,
    strength INTEGER NOT NULL DEFAULT 1,
    reinforcement_count INTEGER NOT NULL DEFAULT 0,
    access_count INTEGER NOT NULL DEFAULT 0,
    status TEXT,
    archived INTEGER NOT NULL DEFAULT 0,
    archived_at REAL,
    -- Archived by maintenance (prune, merge, reconcile), not by its user: recall reaches it.
    faded INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    last_accessed_at REAL NOT NULL,
    valid_from REAL,
    valid_to REAL,
    actr_count INTEGER NOT NULL DEFAULT 0,
    first_access_at REAL,
    actr_times TEXT NOT NULL DEFAULT '[]',
    refs TEXT NOT NULL DEFAULT '[]',
    trigger TEXT,
    ring TEXT NOT NULL DEFAULT '[]',
    channels TEXT NOT NULL DEFAULT '{}',
    embedding BLOB,
    rev INTEGER NOT NULL DEFAULT 0,
    -- What the author said, kept apart from `importance`, which rescore may raise: rescore
    -- recomputes from this, so running it twice changes nothing (DESIGN.md §8.5).
    authored_importance REAL,
    -- The searchable columns as keyword search indexes them (storage.keywords).
    stems TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX memories_type ON memories(type, archived);
CREATE INDEX memories_role ON memories(role, owner);
CREATE INDEX memories_status ON memories(status) WHERE status IS NOT NULL;
CREATE INDEX memories_hash ON memories(content_hash);
CREATE INDEX memories_importance ON memories(importance);
CREATE INDEX memories_strength ON memories(strength);
CREATE INDEX memories_created ON memories(created_at);
CREATE INDEX memories_accessed ON memories(last_accessed_at);
CREATE INDEX memories_valid ON memories(valid_from, valid_to);
CREATE INDEX memories_rev ON memories(rev);

CREATE TABLE edges (
    src TEXT NOT NULL,
    dst TEXT NOT NULL,
    type TEXT NOT NULL,
    weight REAL NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (src, dst, type)
) WITHOUT ROWID;
CREATE INDEX edges_dst ON edges(dst, type);

CREATE TABLE accesses (
    seq INTEGER PRIMARY KEY,
    memory_id TEXT NOT NULL,
    ts REAL NOT NULL,
    channel TEXT NOT NULL,
    reader_owner TEXT NOT NULL DEFAULT '',
    session_ref TEXT,
    trace_ref TEXT,
    query TEXT,
    score REAL,
    rank INTEGER,
    components TEXT
);
CREATE INDEX accesses_memory ON accesses(memory_id, ts);
CREATE INDEX accesses_ts ON accesses(ts);

CREATE TABLE maintenance_log (
    seq INTEGER PRIMARY KEY,
    ts REAL NOT NULL,
    kind TEXT NOT NULL,
    report TEXT NOT NULL
);

CREATE TABLE tombstones (
    seq INTEGER PRIMARY KEY,
    memory_id TEXT NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    role TEXT NOT NULL DEFAULT '',
    type TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    embedding BLOB,
    reason TEXT NOT NULL,
    ts REAL NOT NULL,
    lifted_at REAL
);
CREATE INDEX tombstones_hash ON tombstones(content_hash);
CREATE INDEX tombstones_memory ON tombstones(memory_id);

CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

CREATE TRIGGER memories_authored AFTER INSERT ON memories
WHEN new.authored_importance IS NULL BEGIN
    UPDATE memories SET authored_importance = new.importance WHERE seq = new.seq;
END;
"""

#: Schema version 5. Keyword search over the stems `storage.keywords` writes in each row (so
#: PostgreSQL, indexing the same stems, ranks alike): a contentless FTS5 table whose plain
#: unicode61 tokenizer only splits them at the spaces, kept by triggers on `stems`.
_KEYWORDS = """
CREATE VIRTUAL TABLE memories_fts USING fts5(
    title, content, tags, entities, content='', tokenize='unicode61 remove_diacritics 0'
);
CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts(rowid, title, content, tags, entities)
    VALUES (new.seq, json_extract(new.stems, '$[0]'), json_extract(new.stems, '$[1]'),
            json_extract(new.stems, '$[2]'), json_extract(new.stems, '$[3]'));
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, title, content, tags, entities)
    VALUES ('delete', old.seq, json_extract(old.stems, '$[0]'), json_extract(old.stems, '$[1]'),
            json_extract(old.stems, '$[2]'), json_extract(old.stems, '$[3]'));
END;
CREATE TRIGGER memories_au AFTER UPDATE OF stems ON memories
WHEN new.stems IS NOT old.stems BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, title, content, tags, entities)
    VALUES ('delete', old.seq, json_extract(old.stems, '$[0]'), json_extract(old.stems, '$[1]'),
            json_extract(old.stems, '$[2]'), json_extract(old.stems, '$[3]'));
    INSERT INTO memories_fts(rowid, title, content, tags, entities)
    VALUES (new.seq, json_extract(new.stems, '$[0]'), json_extract(new.stems, '$[1]'),
            json_extract(new.stems, '$[2]'), json_extract(new.stems, '$[3]'));
END;
"""

#: Schema version 3. The stream's counts per (memory, channel, reader): stats sums these
#: instead of joining every access ever logged to its memory (benchmarks/bench_stats.py's
#: stores, read 5 times per memory on average, hold 6 stream rows per memory, a number every
#: recall raises, and 2.6 of these, bounded by channels x readers). Triggers on the stream keep
#: them, so every writer keeps them exact: recall logging, the hooks' own connection, import,
#: migrate, a server of the previous release still running on the file. They are derived
#: data, never dumped or copied. `memories_kpi` lets stats scan a scope and look edges and
#: tombstones up by id without reading the wide rows (text, embedding, access ring).
_ACCESS_COUNTS = """
CREATE TABLE IF NOT EXISTS access_counts (
    memory_id TEXT NOT NULL,
    channel TEXT NOT NULL,
    reader_owner TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (memory_id, channel, reader_owner)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS accesses_count AFTER INSERT ON accesses BEGIN
    INSERT INTO access_counts(memory_id, channel, reader_owner, n)
    VALUES (new.memory_id, new.channel, new.reader_owner, 1)
    ON CONFLICT (memory_id, channel, reader_owner) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS accesses_uncount AFTER DELETE ON accesses BEGIN
    UPDATE access_counts SET n = n - 1 WHERE memory_id = old.memory_id
        AND channel = old.channel AND reader_owner = old.reader_owner;
END;
CREATE TRIGGER IF NOT EXISTS accesses_recount
AFTER UPDATE OF memory_id, channel, reader_owner ON accesses BEGIN
    UPDATE access_counts SET n = n - 1 WHERE memory_id = old.memory_id
        AND channel = old.channel AND reader_owner = old.reader_owner;
    INSERT INTO access_counts(memory_id, channel, reader_owner, n)
    VALUES (new.memory_id, new.channel, new.reader_owner, 1)
    ON CONFLICT (memory_id, channel, reader_owner) DO UPDATE SET n = n + 1;
END;
CREATE INDEX IF NOT EXISTS memories_kpi ON memories(id, owner, role, archived, type);
"""

#: Store-wide next revision as an SQL expression (memories_rev index: O(log n)). Every write
#: bumps it inside its own statement, so a vector cache in any process can pull exactly the
#: rows that changed since it last looked, without an extra round trip per write. Writers are
#: serialised by the file's write lock, so revisions commit in order.
NEXT_REV = "(SELECT coalesce(max(rev), 0) + 1 FROM memories)"
#: How long a read on the event loop's thread (`SQLiteStore._read_here`) waits for a busy
#: file before it goes to the "reads" thread instead: readers of a WAL file wait only in rare
#: moments (recovery, a log being reset), and this wait holds every other call.
HERE_BUSY_MS = 20


def fts_query(text: str | list[str], max_terms: int = 32) -> str | None:
    """Turn user text (or its stems) into a safe FTS5 query: each stem quoted, OR-ed together.

    Quoting every term means FTS5 operators (AND, NEAR, *, ^, :, column filters) and stray
    quotes in the text are matched as words and can never raise a syntax error.
    """
    terms = query_stems(text, max_terms) if isinstance(text, str) else text
    if not terms:
        return None
    return " OR ".join(f'"{w}"' for w in terms)


def scope_sql(scope: Scope, alias: str = "") -> tuple[str, list[Any]]:
    """The visibility rule of `Scope.allows` as an SQL condition and its parameters."""
    p = f"{alias}." if alias else ""
    if scope.owner is not None:
        return f"({p}owner = '' OR {p}owner = ?)", [scope.owner]
    if scope.roles is None:
        return "1", []
    roles = sorted(scope.roles)
    return f"({p}owner = '' OR {p}role IN ({','.join('?' * len(roles))}))", roles


def _chunks(values: list[Any], size: int) -> Iterable[list[Any]]:
    for i in range(0, len(values), size):
        yield values[i : i + size]


def _marks(values: Sequence[Any]) -> str:
    return ",".join("?" * len(values))


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


def _split_sql(script: str) -> list[str]:
    """Split the schema into statements, keeping trigger bodies whole."""
    statements, current = [], []
    for line in script.strip().splitlines():
        current.append(line)
        text = "\n".join(current).strip()
        if not text.endswith(";"):
            continue
        if text.upper().startswith("CREATE TRIGGER") and not text.upper().endswith("END;"):
            continue
        statements.append(text)
        current = []
    return statements


#: The stores (by `id`) whose write transaction the current task is inside: its reads go to
#: the store's own connection, where its uncommitted rows are.
_WRITING: ContextVar[frozenset[int]] = ContextVar("nooa_sqlite_writing", default=frozenset())


class SQLiteStore(SqlVerbs):
    """An open store file. Create with `await SQLiteStore.open(path)`; close with `close()`."""

    kind = "sqlite"
    batches_reads = False

    dialect = SQLITE

    def __init__(self, conn: aiosqlite.Connection, path: Path) -> None:
        self.conn = conn
        self.path = path
        self.label = path.name
        self.writable = True
        self._identity: tuple[int, int] = (0, 0)
        #: See COMMON_FLOOR; tests lower it to exercise the cut-off on a small store.
        self.common_floor = COMMON_FLOOR
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
                for statement in _split_sql(_SCHEMA + _KEYWORDS + _ACCESS_COUNTS):
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
        for statement in _split_sql(_KEYWORDS):
            await self._execute(statement)
        await self._execute(
            "INSERT INTO memories_fts(rowid, title, content, tags, entities) "
            "SELECT seq, json_extract(stems, '$[0]'), json_extract(stems, '$[1]'), "
            "json_extract(stems, '$[2]'), json_extract(stems, '$[3]') FROM memories"
        )

    async def _count_accesses(self) -> None:
        """Version 2 → 3: the counts table, its triggers and the scope index; the counts so
        far from the stream (under the write lock: no access lands between the two). Counted
        afresh even where the objects exist (a file whose version was set back by hand)."""
        for statement in _split_sql(_ACCESS_COUNTS):
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
        async with self._write_lock:
            await self.check_writable()
            writing = _WRITING.set(_WRITING.get() | {id(self)})
            try:
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
            finally:
                _WRITING.reset(writing)

    # Reads run to completion in one hop of the connection's thread: a statement left open
    # between `execute` and `fetch` would hold an old WAL snapshot, and a BEGIN IMMEDIATE that
    # another coroutine slips in beside it fails at once with "database is locked" as soon as
    # another process has committed (busy_timeout does not retry a stale snapshot).

    async def _scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        rows = list(await self._fetch(sql, params))
        return rows[0][0] if rows else None

    async def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
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

    async def _exec(self, sql: str, params: Any = ()) -> aiosqlite.Cursor:
        return await self._execute(sql, params)

    async def _execute_many(self, sql: str, rows: Any) -> aiosqlite.Cursor:
        try:
            return await self.conn.executemany(sql, rows)
        except sqlite3.Error as exc:
            raise unavailable(self.path, exc) from None

    async def _bulk_rows(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
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

    async def _rows_in(
        self, sql: str, values: Sequence[Any], params: Sequence[Any] = ()
    ) -> list[sqlite3.Row]:
        """Run `sql` (with `{marks}` for an IN list) over `values` in chunks of 500."""
        out: list[sqlite3.Row] = []
        for chunk in _chunks(list(values), 500):
            out += await self._rows(sql.format(marks=_marks(chunk)), [*chunk, *params])
        return out

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

    async def lock_meta(self, key: str) -> str | None:
        # BEGIN IMMEDIATE already holds the file's write lock for the whole transaction.
        return await self.get_meta(key)

    # ------------------------------------------------------------------ ids

    async def resolve_id(
        self, ident: str, field: str = "memory_id", scope: Scope | None = None
    ) -> str:
        """Full id of an id or unique prefix (≥ 6 characters) among the memories `scope`
        sees (every memory when None): a prefix is never ambiguous with, nor names, a
        memory outside it.

        Raises:
            NotFound: nothing matches, or the prefix is shorter than 6 characters.
            AmbiguousId: several memories share the prefix.
        """
        where, params = scope_sql(scope) if scope is not None else ("1", [])
        if len(ident) == 32:
            found = await self._scalar(
                f"SELECT id FROM memories WHERE id = ? AND {where}", (ident, *params)
            )
            if found is None:
                raise NotFound(ident, field)
            return found
        if len(ident) < MIN_PREFIX:
            raise NotFound(ident, field)
        upper = ident[:-1] + chr(ord(ident[-1]) + 1)
        matches = [
            r[0]
            for r in await self._rows(
                f"SELECT id FROM memories WHERE id >= ? AND id < ? AND {where} LIMIT 6",
                (ident, upper, *params),
            )
        ]
        if not matches:
            raise NotFound(ident, field)
        if len(matches) > 1:
            raise AmbiguousId(ident, matches, field)
        return matches[0]

    # ------------------------------------------------------------------ memories

    async def insert(self, memory: Memory, embedding: np.ndarray | None) -> int:
        """Insert one memory row (inside a transaction); returns and sets its seq."""
        values = memory_values(memory, embedding)
        cols = ", ".join(values)
        marks = ", ".join(f":{k}" for k in values)
        # The next revision is computed inside the statement: one round trip, not two.
        cursor = await self._execute(
            f"INSERT INTO memories ({cols}, rev) VALUES ({marks}, {NEXT_REV})", values
        )
        seq = cursor.lastrowid
        if seq is None:  # never after an INSERT; said, not assumed
            raise RuntimeError("SQLite gave no row id for an inserted memory")
        memory.seq = seq
        return seq

    async def save(self, memory: Memory, embedding: np.ndarray | None = None) -> None:
        """Rewrite a memory row from its record (inside a transaction).

        The embedding is only written when given, so callers that did not change the
        content never ship 1.5 kB of vector back and forth.
        """
        values = memory_values(memory, embedding)
        if embedding is None:
            values.pop("embedding")
        sets = ", ".join(f"{k} = :{k}" for k in values if k != "id")
        await self._execute(f"UPDATE memories SET {sets}, rev = {NEXT_REV} WHERE id = :id", values)

    async def save_accesses(self, memories: Sequence[Memory]) -> None:
        """See `Store.save_accesses`: access columns only, revision unchanged."""
        if not memories:
            return
        rows = []
        for memory in memories:
            values = memory_values(memory, None)
            rows.append({k: values[k] for k in ("id", *ACCESS_COLUMNS)})
        sets = ", ".join(f"{k} = :{k}" for k in ACCESS_COLUMNS)
        await self._execute_many(f"UPDATE memories SET {sets} WHERE id = :id", rows)

    async def set_embedding(self, memory_id: str, vector: np.ndarray) -> None:
        await self._execute(
            f"UPDATE memories SET embedding = ?, rev = {NEXT_REV} WHERE id = ?",
            (np.asarray(vector, np.float32).tobytes(), memory_id),
        )

    async def set_archived(
        self, memory_id: str, archived: bool, when: datetime, *, faded: bool = False
    ) -> None:
        await self._execute(
            "UPDATE memories SET archived = ?, archived_at = ?, faded = ?, "
            f"rev = {NEXT_REV} WHERE id = ?",
            (int(archived), epoch(when) if archived else None, int(archived and faded), memory_id),
        )

    async def set_importance(
        self, memory_id: str, importance: float | None = None, authored: float | None = None
    ) -> None:
        """Set importance (rescore) and/or the authored importance of one row."""
        sets, params = [], []
        if importance is not None:
            sets.append("importance = ?")
            params.append(importance)
        if authored is not None:
            sets.append("authored_importance = ?")
            params.append(authored)
        if sets:
            await self._execute(
                f"UPDATE memories SET {', '.join(sets)}, rev = {NEXT_REV} WHERE id = ?",
                (*params, memory_id),
            )

    async def fetch(self, memory_id: str) -> Memory | None:
        rows = await self._rows("SELECT * FROM memories WHERE id = ?", (memory_id,))
        return memory_from_row(rows[0]) if rows else None

    async def fetch_many(self, ids: Sequence[str]) -> dict[str, Memory]:
        rows = await self._rows_in("SELECT * FROM memories WHERE id IN ({marks})", ids)
        return {r["id"]: memory_from_row(r) for r in rows}

    async def find_by_hash(self, content_hash: str, role: str, type: str) -> str | None:
        """A live memory of this role and type with exactly this content."""
        # INDEXED BY: without statistics the planner chose memories_type (type, archived) and
        # scanned every live row of the type — 68 ms per write at 100k rows, O(n) per write.
        return await self._scalar(
            "SELECT id FROM memories INDEXED BY memories_hash "
            "WHERE content_hash = ? AND role = ? AND type = ? "
            "AND archived = 0 ORDER BY created_at LIMIT 1",
            (content_hash, role, type),
        )

    async def context_rows(self, scope: Scope, limit: int) -> list[Memory]:
        """What the context block shows: open todos first, then by importance and recency.

        Scratch notes and closed todos never appear (they are not worth the reader's context).
        """
        where, params = scope_sql(scope)
        rows = await self._rows(
            f"SELECT * FROM memories WHERE {where} AND archived = 0 AND type != 'scratch' "
            "AND NOT (type = 'todo' AND status != 'open') "
            "ORDER BY (type = 'todo' AND status = 'open') DESC, importance DESC, "
            "last_accessed_at DESC LIMIT ?",
            [*params, limit],
        )
        return [memory_from_row(r) for r in rows]

    # ------------------------------------------------------------------ recall

    async def row_count(self) -> int:
        # max(seq) is O(log n) and equals the count until rows are deleted (they never are).
        return await self._scalar("SELECT coalesce(max(seq), 0) FROM memories")

    async def vector_changes(
        self, mark: Any, limit: int, roles: Sequence[str] | None = None
    ) -> tuple[list[VectorRow], Any]:
        """Rows with a revision above `mark`, oldest change first (revisions are unique)."""
        since = int(mark or 0)
        embedding = "embedding"
        params: tuple[Any, ...] = (since, limit)
        if roles is not None:
            embedding = "CASE WHEN role IN (SELECT value FROM json_each(?)) THEN embedding END"
            params = (json.dumps(list(roles)), since, limit)
        rows = await self._rows(
            "SELECT seq, id, role, owner, type, archived, faded, "
            f"{embedding} AS embedding, rev FROM memories WHERE rev > ? ORDER BY rev LIMIT ?",
            params,
        )
        out = [vector_row_from_row(r) for r in rows]
        return out, (rows[-1]["rev"] if rows else since)

    async def vector_mark(self) -> Any:
        # Writers hold the write lock while they number revisions: the highest committed one
        # is a mark no later commit falls below.
        return await self._scalar("SELECT coalesce(max(rev), 0) FROM memories")

    async def _selective_terms(self, terms: list[str]) -> list[str]:
        """Drop terms too common to be worth ranking (see COMMON_SHARE); one SQL round trip.

        Each count stops at the cap, so checking costs the same at any store size. When every
        term is common the keyword search is skipped and dense candidates stand alone.
        """
        if not terms:
            return terms
        # The store's size and each term's capped count in one statement (one round trip).
        cap = "max(?, CAST((SELECT coalesce(max(seq), 0) FROM memories) * ? AS INTEGER))"
        probe = ", ".join(
            "(SELECT count(*) FROM (SELECT rowid FROM memories_fts "
            f"WHERE memories_fts MATCH ? LIMIT {cap}))"
            for _ in terms
        )
        params: list[Any] = [self.common_floor, COMMON_SHARE]
        for term in terms:
            params += [f'"{term}"', self.common_floor, COMMON_SHARE]
        rows, limit, *counts = (
            await self._rows(
                f"SELECT (SELECT coalesce(max(seq), 0) FROM memories), {cap}, {probe}", params
            )
        )[0]
        if rows < limit:
            return terms
        return [term for term, n in zip(terms, counts, strict=True) if n < limit]

    async def candidates(
        self,
        text: str,
        scope: Scope,
        *,
        limit: int,
        ids: Sequence[str] = (),
        faded: int = 0,
        include_archived: bool = False,
    ) -> list[ScoringRow]:
        """The keyword top `limit` of live rows and top `faded` of faded rows for `text`, and
        the rows `ids`, with what scoring needs (see `Store.candidates`).

        Two round trips: the terms' counts (`_selective_terms`), then one statement that
        ranks inside FTS5, joins only the best rows and adds the rows `ids` beside them.
        """
        query = fts_query(await self._selective_terms(query_stems(text))) if limit > 0 else None
        where, params = scope_sql(scope, "m")
        # A row its user forgot is never a keyword candidate; a faded one only when asked for.
        states = "AND (m.archived = 0 OR m.faded = 1)" if faded > 0 else "AND m.archived = 0"
        tier = "m.archived"
        if include_archived:
            states, tier = "", "0"
        wanted = list(dict.fromkeys(ids))[:500]
        by_id = (
            f"SELECT {SCORING_COLUMNS}, NULL AS score, 0 AS tier, 0 AS tier_rank FROM memories m "
            f"WHERE m.id IN ({_marks(wanted)})"
        )
        if query is None:
            if not wanted:
                return []
            return [scoring_from_row(r) for r in await self._rows(by_id, wanted)]
        # Each tier (live, faded) keeps its own best rows: faded rows never take a live
        # row's place among the `limit` best.
        tiers = "WHERE tier_rank <= CASE tier WHEN 0 THEN ? ELSE ? END"
        ranked = (
            f"{tier} AS tier, "
            f"row_number() OVER (PARTITION BY {tier} ORDER BY {{score}}) AS tier_rank"
        )
        # Rank inside FTS5 first and join only the best `pool` rows: joining every match to
        # `memories` before the LIMIT cost 3-5x the ranking itself on common words (10k rows:
        # 14 ms -> 4 ms). If the scope or archive filter leaves fewer than `limit` live rows
        # out of a full pool, fall back to filtering every match, so the live answer never
        # changes. Faded rows are those among the same pool: the best keyword matches.
        pool = max(limit * 4, 200)
        keyword = (
            f"SELECT {SCORING_COLUMNS}, f.score AS score, {ranked.format(score='f.score')} "
            "FROM (SELECT rowid AS seq, "
            "bm25(memories_fts, 2.0, 1.0, 1.5, 1.5) AS score FROM memories_fts "
            "WHERE memories_fts MATCH ? ORDER BY score LIMIT ?) f "
            f"JOIN memories m ON m.seq = f.seq WHERE {where} {states}"
        )
        sql = f"SELECT * FROM ({keyword}) {tiers}"
        args: list[Any] = [query, pool, *params, limit, faded]
        if wanted:
            sql += f" UNION ALL {by_id}"
            args += wanted
        rows = await self._rows(sql, args)
        hits = [r for r in rows if r["score"] is not None]
        if sum(1 for r in hits if not r["tier"]) < limit:
            matched = await self._scalar(
                "SELECT count(*) FROM (SELECT rowid FROM memories_fts "
                "WHERE memories_fts MATCH ? LIMIT ?)",
                [query, pool],
            )
            if matched >= pool:
                # FTS5's bm25() cannot sit inside a window: rank the scored rows outside it.
                scored = (
                    f"SELECT {SCORING_COLUMNS}, bm25(memories_fts, 2.0, 1.0, 1.5, 1.5) AS score "
                    "FROM memories_fts JOIN memories m ON m.seq = memories_fts.rowid "
                    f"WHERE memories_fts MATCH ? AND {where} {states}"
                )
                outer = "0" if include_archived else "archived"
                hits = await self._rows(
                    f"SELECT * FROM (SELECT s.*, {outer} AS tier, row_number() OVER "
                    f"(PARTITION BY {outer} ORDER BY score) AS tier_rank FROM ({scored}) s) "
                    f"{tiers}",
                    [query, *params, limit, faded],
                )
        hits = sorted(hits, key=lambda r: (r["score"], r["seq"]))
        out = [scoring_from_row(r, -r["score"]) for r in hits]
        seen = {r.id for r in out}
        out += [scoring_from_row(r) for r in rows if r["score"] is None and r["id"] not in seen]
        missing = [i for i in dict.fromkeys(ids) if i not in seen and i not in set(wanted)]
        if missing:
            out += await self.scoring_rows(missing)
        return out

    # ------------------------------------------------------------------ edges

    # Adding or copying an edge does not move its memories' revision (`NEXT_REV`), as on
    # PostgreSQL: no cache holds edges (the vector cache holds vectors and masks, a pass's
    # kept rows their columns), and every recall and pass reads edges afresh. Moving it
    # rewrote each linked row and its entry in the revision index (a quarter of a first pass
    # at 100k), and every other process's vector cache then read those rows again.

    async def add_edge(
        self, src: str, dst: str, type: EdgeType, weight: float, at: datetime | None = None
    ) -> None:
        """Add an edge (made `at`, an import's, else now); an existing (dst, type) keeps the
        larger weight and its created_at."""
        await self._execute(
            "INSERT INTO edges(src, dst, type, weight, created_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(src, dst, type) DO UPDATE SET weight = MAX(weight, excluded.weight)",
            (src, dst, EdgeType(type).value, weight, (at or datetime.now(UTC)).timestamp()),
        )

    async def add_edges(self, edges: Sequence[tuple[str, str, EdgeType, float]]) -> None:
        """`add_edge` for each edge, in order: one statement run many times, in one hop."""
        if not edges:
            return
        when = datetime.now(UTC).timestamp()
        await self._execute_many(
            "INSERT INTO edges(src, dst, type, weight, created_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(src, dst, type) DO UPDATE SET weight = MAX(weight, excluded.weight)",
            [(src, dst, EdgeType(kind).value, weight, when) for src, dst, kind, weight in edges],
        )

    async def edges_touching(self, ids: Sequence[str]) -> list[EdgeRow]:
        """Edges with `src` or `dst` among `ids` (each once), through both edge indexes."""
        out: dict[tuple[str, str, str], EdgeRow] = {}
        for chunk in _chunks(list(dict.fromkeys(ids)), 400):
            marks = _marks(chunk)
            rows = await self._rows(
                f"SELECT src, dst, type, weight FROM edges WHERE src IN ({marks}) "
                f"UNION SELECT src, dst, type, weight FROM edges WHERE dst IN ({marks})",
                [*chunk, *chunk],
            )
            for r in rows:
                out[(r["src"], r["dst"], r["type"])] = EdgeRow(
                    r["src"], r["dst"], r["type"], r["weight"]
                )
        return list(out.values())

    async def copy_edges(self, src: str, dst: str) -> int:
        """Copy `src`'s outgoing edges onto `dst` (larger weight wins); returns how many."""
        cur = await self._execute(
            "INSERT INTO edges(src, dst, type, weight, created_at) "
            "SELECT ?, dst, type, weight, created_at FROM edges WHERE src = ? AND dst != ? "
            "ON CONFLICT(src, dst, type) DO UPDATE SET weight = MAX(weight, excluded.weight)",
            (dst, src, dst),
        )
        return cur.rowcount

    # ------------------------------------------------------------------ accesses

    async def append_accesses(self, records: Sequence[tuple[str, AccessRecord]]) -> None:
        """Append to the access stream (inside a transaction); the stream is never rewritten."""
        await self._execute_many(
            "INSERT INTO accesses(memory_id, ts, channel, reader_owner, session_ref, trace_ref, "
            "query, score, rank, components) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    mid,
                    r.ts.timestamp(),
                    r.channel.value,
                    r.reader_owner,
                    r.session_ref,
                    r.trace_ref,
                    r.query,
                    r.score,
                    r.rank,
                    r.components.model_dump_json() if r.components else None,
                )
                for mid, r in records
            ],
        )

    # ------------------------------------------------------------------ tombstones

    # ------------------------------------------------------------------ maintenance

    async def reflection_rows(
        self, role: str | None, after: tuple[str, int] | None, limit: int
    ) -> Rows:
        """A page of live rows after (owner, seq), no vectors. The key follows the role index
        (role, owner, rowid): each page is one index range, no sort (paging by seq alone
        sorted the whole role for every page)."""
        where, params = ("role = ?", [role]) if role is not None else ("1", [])
        owner, seq = after or ("", 0)
        rows = await self._bulk_rows(
            f"SELECT {REFLECTION_COLUMNS} FROM memories WHERE {where} AND (owner, seq) > (?, ?) "
            "AND archived = 0 ORDER BY owner, seq LIMIT ?",
            [*params, owner, seq, limit],
        )
        return Rows.from_records(rows)

    async def reflection_changes(self, since: int | None, limit: int) -> RowChanges | None:
        """See `Store.reflection_changes`: every rewrite but an access log's moves `rev`
        (`NEXT_REV`), and writers commit in revision order under the file's write lock, so
        a row committed after this read has a higher revision than it reached."""
        if since is None:
            upto = await self._bulk_rows("SELECT coalesce(max(rev), 0) FROM memories")
            return RowChanges(Rows.from_records([]), [], np.zeros(0, dtype=bool), upto[0][0])
        rows = await self._bulk_rows(
            f"SELECT {REFLECTION_COLUMNS}, role, archived, rev FROM memories WHERE rev > ? "
            "ORDER BY rev LIMIT ?",
            (since, limit),
        )
        return RowChanges(
            Rows.from_records(tuple(r)[:-3] for r in rows),
            [r["role"] for r in rows],
            np.array([bool(r["archived"]) for r in rows], dtype=bool),
            rows[-1]["rev"] if rows else since,
        )

    # ------------------------------------------------------------------ statistics

    async def counts(self, scope: Scope) -> Counts:
        where, params = scope_sql(scope)
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

    async def kpi_totals(self, scope: Scope, reads: Sequence[str]) -> KpiTotals:
        """`kpi_rows` summed here, from `access_counts`: one pass over the scope's memories."""
        where, params = scope_sql(scope, "m")
        marks = _marks(reads)
        # Per memory in the scope: is it a reflection (or derived by one), its accesses, its
        # deliberate reads, and those by a reader of another role (shared rows and unnamed
        # readers never count). Then memories are counted per (archived, reflective, reads).
        per_memory = (
            "SELECT m.archived AS archived, (m.type = 'reflection' OR m.id IN "
            "(SELECT src FROM edges WHERE type = 'derived_from')) AS reflective, "
            "coalesce(sum(c.n), 0) AS accesses, "
            f"coalesce(sum(CASE WHEN c.channel IN ({marks}) THEN c.n END), 0) AS reads, "
            f"coalesce(sum(CASE WHEN c.channel IN ({marks}) AND m.owner != '' "
            "AND c.reader_owner != '' AND m.role != CASE WHEN instr(c.reader_owner, '@') > 0 "
            "THEN substr(c.reader_owner, 1, instr(c.reader_owner, '@') - 1) "
            "ELSE c.reader_owner END THEN c.n END), 0) AS foreign_reads "
            "FROM memories m LEFT JOIN access_counts c ON c.memory_id = m.id "
            f"WHERE {where} GROUP BY m.id"
        )
        rows = await self._bulk_rows(
            "SELECT archived, reflective, reads, count(*) AS memories, "
            "sum(accesses) AS accesses, sum(foreign_reads) AS foreign_reads "
            f"FROM ({per_memory}) GROUP BY archived, reflective, reads",
            [*reads, *reads, *params],
        )
        todos = await self._bulk_rows(
            f"SELECT status, created_at FROM memories m WHERE m.type = 'todo' AND {where} "
            "AND m.archived = 0",
            params,
        )
        # Tombstones not lifted, and edges with both ends visible, in one round trip. The
        # planner looks ids up in the unique index and reads each wide row for its owner and
        # role; memories_kpi holds both (3x faster at 10k).
        b_where, b_params = scope_sql(scope, "b")
        rest = (
            await self._bulk_rows(
                "SELECT (SELECT count(*) FROM tombstones t JOIN memories m INDEXED BY "
                "memories_kpi ON m.id = t.memory_id WHERE t.lifted_at IS NULL "
                f"AND {where}) AS tombstones, "
                "(SELECT count(*) FROM edges e JOIN memories m INDEXED BY memories_kpi "
                "ON m.id = e.src JOIN memories b INDEXED BY memories_kpi ON b.id = e.dst "
                f"WHERE {where} AND {b_where}) AS edges",
                [*params, *params, *b_params],
            )
        )[0]
        return KpiTotals(
            read_counts=[
                (bool(r["reflective"]), r["reads"], r["memories"])
                for r in rows
                if not r["archived"]
            ],
            todos=[(r["status"], time_from_epoch(r["created_at"])) for r in todos],
            cross_owner_reads=sum(r["foreign_reads"] for r in rows),
            tombstones=rest["tombstones"],
            edges=rest["edges"],
            accesses=sum(r["accesses"] for r in rows),
        )

    # ------------------------------------------------------------------ whole-store copies

    async def table_sizes(self) -> dict[str, int]:
        return {t: await self._scalar(f"SELECT count(*) FROM {t}") for t in DUMP_TABLES}

    async def dump(
        self, table: str, after: tuple[Any, ...] | None, limit: int
    ) -> tuple[list[dict[str, Any]], tuple[Any, ...] | None]:
        """A page of `table` in key order, JSON decoded, `archived` a bool (see DUMP_COLUMNS)."""
        columns, keys = DUMP_COLUMNS[table], DUMP_KEYS[table]
        decode = DUMP_JSON.get(table, frozenset())
        where, params = "1", [limit]
        if after is not None:
            where = f"({', '.join(keys)}) > ({_marks(keys)})"
            params = [*after, limit]
        rows = await self._rows(
            f"SELECT {', '.join(columns)} FROM {table} WHERE {where} "
            f"ORDER BY {', '.join(keys)} LIMIT ?",
            params,
        )
        out = []
        for r in rows:
            row = {c: r[c] for c in columns}
            for name in decode:
                if row[name] is not None:
                    row[name] = json.loads(row[name])
            for flag in ("archived", "faded"):
                if flag in row:
                    row[flag] = bool(row[flag])
            out.append(row)
        return out, (tuple(out[-1][k] for k in keys) if len(out) >= limit else None)

    async def load(self, table: str, rows: Sequence[dict[str, Any]]) -> None:
        """Insert dumped rows as they are (inside a transaction); memories get fresh revisions."""
        if not rows:
            return
        columns = DUMP_COLUMNS[table]
        encode = DUMP_JSON.get(table, frozenset())
        names, marks = ", ".join(columns), ", ".join(f":{c}" for c in columns)
        if table == "memories":
            names, marks = f"{names}, stems, rev", f"{marks}, :stems, {NEXT_REV}"
        verb = "INSERT OR REPLACE" if table == "meta" else "INSERT"
        values = []
        for row in rows:
            value = {c: row.get(c) for c in columns}
            for name in encode:
                if value[name] is not None:
                    value[name] = json.dumps(value[name])
            for flag in ("archived", "faded"):
                if flag in value:
                    value[flag] = int(bool(value[flag]))
            if table == "memories":
                value["stems"] = row_stems(
                    row["title"], row["content"], row["tags"], row["entities"]
                )
            values.append(value)
        await self._execute_many(f"{verb} INTO {table} ({names}) VALUES ({marks})", values)


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
