"""The PostgreSQL schema of a store and its migrations (the SQLite schema's twin).

The tables and columns mirror `storage/sqlite.py`, so `migrate` copies a store between backends
column for column. What PostgreSQL adds for several servers on one database:

- `rev xid8`: the id of the transaction that last changed what the vector cache holds
  (embedding, archived, owner, type, searchable text). A vector cache pulls exactly the rows
  whose transaction it has not seen (see `pg_search.VECTOR_CHANGES`); unlike a counter, this
  never misses a row whose transaction commits late. A trigger stamps it, so no write can
  forget it; writes that only log accesses leave it alone.
- `tf`, `fts` and `doc_len` are kept by a trigger from `stems`, the row's searchable columns
  as `storage.keywords` cuts and stems them for both backends: `tf` each stem's frequency
  weighted as FTS5 weighs the columns (title 2.0, tags and entities 1.5, content 1.0), `fts`
  the stems for the GIN index, `doc_len` their count. (Until version 4 PostgreSQL's own
  parser and stemmer built `fts`: the `nooa_english` configuration is left from then.)
- A notification on `nooa_<hash of the schema>` when a transaction changed what vector caches
  hold: other servers wake and pull. Collapsed per transaction. Since version 5 a connection
  that sets `nooa.notify = 'after commit'` (nooa-mcp's own pool) only notes it owes one
  (`nooa.notify_owed`, a session setting a rollback undoes) and sends it right after its
  COMMIT, in the same round trip (`NOTIFY_OWED`): a NOTIFY inside a transaction holds
  PostgreSQL's global notify lock from before the commit's WAL flush until after it, so
  every writer's commit waits for the previous one's flush (once, quiet: four clients 0.76x
  SQLite's writes per second with NOTIFY inside, 0.94x with no notification at all; after
  the COMMIT and inside it measured alike on a VM whose flush is cheap, 0.92x / 0.93x,
  BENCHMARKS.md P8). Any other connection (a migration, a tool) still notifies at commit.

JSON columns are `json` (the text kept as written), except tags and entities (`jsonb`, which
the text search reads). Times are epoch seconds in `double precision`, exactly as SQLite stores
them, so a copy between backends is lossless.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from psycopg import sql

from ..errors import StoreTooNew, StoreUnavailable
from .base import tell_faded_sql
from .keywords import row_stems

__all__ = [
    "AFTER",
    "MIGRATIONS",
    "NOTIFY_AFTER_COMMIT",
    "NOTIFY_OWED",
    "SCHEMA_VERSION",
    "TS_CONFIG",
    "ensure_schema",
    "migrate_schema",
    "notify_channel",
    "restem",
    "short_error",
]

#: 1: the first release. 2: the access stream's counts per memory, channel and reader
#: (`access_counts`, kept by triggers), taken from the stream of an existing store. 3: `faded`,
#: as `storage/sqlite.py`'s version 4 (a memory maintenance archived, which recall still
#: reaches, told from one its user forgot), and the revision moving when it changes. 4: keyword
#: search over the stems of `storage.keywords` (`stems`, written by every writer, and `tf` and
#: `fts` built from them), as `storage/sqlite.py`'s version 5; an older store's rows are
#: stemmed anew when it is opened (`restem`). 5: the notification of a commit sent after it
#: by nooa-mcp's own connections (`_NOTIFY_AFTER`), off the commit's WAL flush. 6: the id of
#: the transaction that logged each access (`accesses.xid`) and that last added or
#: strengthened each edge (`edges.rev`), so a process holding what ranking reads learns of
#: another's uses and links (`Store.use_changes`, `Store.ranking_changes`), as
#: `storage/sqlite.py`'s version 6. 7: the revision also moves when what ranking holds
#: beside the vectors changes, and a use logged notifies (`_FACTS`). 8: a run of Chinese,
#: Japanese or Korean is indexed as its character bigrams (`storage.keywords.words`), as
#: `storage/sqlite.py`'s version 7; an older store's rows are stemmed anew (`restem`).
SCHEMA_VERSION = 8

#: The text search configuration every search and generated column uses.
TS_CONFIG = "nooa_english"


def notify_channel(schema: str) -> str:
    """The LISTEN channel of a schema's store (a hash: channel names are capped at 63 bytes)."""
    return "nooa_" + hashlib.md5(schema.encode()).hexdigest()[:20]


_TEXT_SEARCH = f"""
CREATE TEXT SEARCH DICTIONARY nooa_stem (TEMPLATE = snowball, Language = english);
CREATE TEXT SEARCH CONFIGURATION {TS_CONFIG} (COPY = pg_catalog.english);
ALTER TEXT SEARCH CONFIGURATION {TS_CONFIG}
    ALTER MAPPING FOR asciiword, word, hword_asciipart, hword_part WITH nooa_stem;
ALTER TEXT SEARCH CONFIGURATION {TS_CONFIG} DROP MAPPING FOR asciihword, hword, numhword;
"""

_FUNCTIONS = f"""
-- The searchable text of a row, as FTS5 sees its four columns: title (weight A), tags and
-- entities (B), content (D); and FTS5's document length, every token unweighted.
CREATE FUNCTION nooa_index_text() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.title <> OLD.title OR NEW.content <> OLD.content
       OR NEW.tags <> OLD.tags OR NEW.entities <> OLD.entities THEN
        NEW.fts := setweight(to_tsvector('{TS_CONFIG}'::regconfig, NEW.title), 'A')
            || setweight(jsonb_to_tsvector('{TS_CONFIG}'::regconfig, NEW.tags, '["string"]'), 'B')
            || setweight(jsonb_to_tsvector('{TS_CONFIG}'::regconfig, NEW.entities, '["string"]'),
                         'B')
            || setweight(to_tsvector('{TS_CONFIG}'::regconfig, NEW.content), 'D');
        NEW.doc_len := regexp_count(NEW.title || ' ' || NEW.content || ' ' || NEW.tags::text
                                    || ' ' || NEW.entities::text, '[[:alnum:]]+');
    END IF;
    IF TG_OP = 'UPDATE' THEN
        NEW.rev := pg_current_xact_id();
    END IF;
    RETURN NEW;
END $$;
CREATE FUNCTION nooa_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('nooa_' || substr(md5(TG_TABLE_SCHEMA), 1, 20), '');
    RETURN NULL;
END $$;
"""

_MEMORIES = """
CREATE TABLE memories (
    seq bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    id text COLLATE "C" NOT NULL UNIQUE,
    type text NOT NULL,
    owner text NOT NULL DEFAULT '',
    role text NOT NULL DEFAULT '',
    title text NOT NULL DEFAULT '',
    content text NOT NULL,
    content_hash text NOT NULL,
    tags jsonb NOT NULL DEFAULT '[]',
    entities jsonb NOT NULL DEFAULT '[]',
    place_or_task text NOT NULL DEFAULT '',
    importance double precision NOT NULL,
    salience double precision NOT NULL,
    confidence double precision NOT NULL,
    strength integer NOT NULL DEFAULT 1,
    reinforcement_count integer NOT NULL DEFAULT 0,
    access_count integer NOT NULL DEFAULT 0,
    status text,
    archived boolean NOT NULL DEFAULT false,
    archived_at double precision,
    created_at double precision NOT NULL,
    last_accessed_at double precision NOT NULL,
    valid_from double precision,
    valid_to double precision,
    actr_count integer NOT NULL DEFAULT 0,
    first_access_at double precision,
    actr_times json NOT NULL DEFAULT '[]',
    refs json NOT NULL DEFAULT '[]',
    trigger json,
    ring json NOT NULL DEFAULT '[]',
    channels json NOT NULL DEFAULT '{}',
    embedding bytea,
    authored_importance double precision,
    rev xid8 NOT NULL DEFAULT pg_current_xact_id(),
    -- Kept by nooa_index_text when the text changes (a generated column would recompute the
    -- tsvector on every update, and recall logging updates rows all the time).
    doc_len integer NOT NULL DEFAULT 0,
    fts tsvector
) WITH (fillfactor = 80);
-- Free space per page lets the updates of recall logging stay on their page (HOT) and skip
-- every index: no index covers the columns logging changes (access times, counters, ring).
-- fastupdate off: searches never scan a pending list, which only VACUUM would merge.
CREATE INDEX memories_fts ON memories USING gin (fts) WITH (fastupdate = off);
CREATE INDEX memories_rev ON memories (rev);
CREATE INDEX memories_type ON memories (type, archived);
CREATE INDEX memories_role ON memories (role, owner);
CREATE INDEX memories_status ON memories (status) WHERE status IS NOT NULL;
CREATE INDEX memories_hash ON memories (content_hash, role, type) WHERE NOT archived;
CREATE TRIGGER memories_text BEFORE INSERT ON memories FOR EACH ROW
    EXECUTE FUNCTION nooa_index_text();
-- Only changes a vector cache (or the BM25 statistics) holds move the revision: logging a
-- read rewrites counters and the access ring, and must not make every other server re-pull.
CREATE TRIGGER memories_rev BEFORE UPDATE ON memories FOR EACH ROW
    WHEN (OLD.embedding IS DISTINCT FROM NEW.embedding OR OLD.archived <> NEW.archived
          OR OLD.owner <> NEW.owner OR OLD.role <> NEW.role OR OLD.type <> NEW.type
          OR OLD.title <> NEW.title OR OLD.content <> NEW.content
          OR OLD.tags <> NEW.tags OR OLD.entities <> NEW.entities)
    EXECUTE FUNCTION nooa_index_text();
CREATE TRIGGER memories_notify_insert AFTER INSERT ON memories
    FOR EACH STATEMENT EXECUTE FUNCTION nooa_notify();
CREATE TRIGGER memories_notify_update AFTER UPDATE ON memories FOR EACH ROW
    WHEN (OLD.rev IS DISTINCT FROM NEW.rev) EXECUTE FUNCTION nooa_notify();
"""

_REST = """
CREATE TABLE edges (
    src text COLLATE "C" NOT NULL,
    dst text COLLATE "C" NOT NULL,
    type text COLLATE "C" NOT NULL,
    weight double precision NOT NULL,
    created_at double precision NOT NULL,
    PRIMARY KEY (src, dst, type)
);
CREATE INDEX edges_dst ON edges (dst, type);

CREATE TABLE accesses (
    seq bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    memory_id text COLLATE "C" NOT NULL,
    ts double precision NOT NULL,
    channel text NOT NULL,
    reader_owner text NOT NULL DEFAULT '',
    session_ref text,
    trace_ref text,
    query text,
    score double precision,
    rank integer,
    components json
);
CREATE INDEX accesses_memory ON accesses (memory_id, ts);
CREATE INDEX accesses_ts ON accesses (ts);

CREATE TABLE maintenance_log (
    seq bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    ts double precision NOT NULL,
    kind text NOT NULL,
    report json NOT NULL
);
CREATE INDEX maintenance_kind ON maintenance_log (kind, seq);

CREATE TABLE tombstones (
    seq bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    memory_id text COLLATE "C" NOT NULL,
    owner text NOT NULL DEFAULT '',
    role text NOT NULL DEFAULT '',
    type text NOT NULL,
    content_hash text NOT NULL,
    embedding bytea,
    reason text NOT NULL,
    ts double precision NOT NULL,
    lifted_at double precision
);
CREATE INDEX tombstones_hash ON tombstones (content_hash);
CREATE INDEX tombstones_memory ON tombstones (memory_id);

CREATE TABLE meta (key text COLLATE "C" PRIMARY KEY, value text NOT NULL);
"""

#: Version 2, as `storage/sqlite.py`'s version 3: stats sums these counts instead of joining
#: every access ever logged to its memory. Statement triggers with transition tables count a
#: whole batch (a migrate page, a recall's hits) in one upsert. The stream is locked first
#: (inserts wait until this migration commits), so no access lands between the triggers and
#: the counts taken from the stream so far.
_ACCESS_COUNTS = """
LOCK TABLE accesses IN SHARE ROW EXCLUSIVE MODE;
CREATE TABLE access_counts (
    memory_id text COLLATE "C" NOT NULL,
    channel text COLLATE "C" NOT NULL,
    reader_owner text COLLATE "C" NOT NULL,
    n bigint NOT NULL,
    PRIMARY KEY (memory_id, channel, reader_owner)
);
CREATE FUNCTION nooa_count_accesses() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE access_counts c SET n = c.n - o.n
        FROM (SELECT memory_id, channel, reader_owner, count(*) AS n FROM old_rows
              GROUP BY memory_id, channel, reader_owner) o
        WHERE c.memory_id = o.memory_id AND c.channel = o.channel
          AND c.reader_owner = o.reader_owner;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO access_counts AS c (memory_id, channel, reader_owner, n)
        SELECT memory_id, channel, reader_owner, count(*) FROM new_rows
        GROUP BY memory_id, channel, reader_owner
        ON CONFLICT (memory_id, channel, reader_owner) DO UPDATE SET n = c.n + EXCLUDED.n;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER accesses_count AFTER INSERT ON accesses REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION nooa_count_accesses();
CREATE TRIGGER accesses_uncount AFTER DELETE ON accesses REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION nooa_count_accesses();
CREATE TRIGGER accesses_recount AFTER UPDATE ON accesses
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION nooa_count_accesses();
INSERT INTO access_counts (memory_id, channel, reader_owner, n)
SELECT memory_id, channel, reader_owner, count(*) FROM accesses
GROUP BY memory_id, channel, reader_owner;
"""

#: Version 3: the faded flag, set from the standing tombstones of the rows archived so far
#: (every other archived row stays forgotten), and a revision that moves when it changes, so
#: every server's vector cache learns which archived rows recall may still search.
_FADED = f"""
ALTER TABLE memories ADD COLUMN IF NOT EXISTS faded boolean NOT NULL DEFAULT false;
{tell_faded_sql("archived", "true")};
DROP TRIGGER IF EXISTS memories_rev ON memories;
CREATE TRIGGER memories_rev BEFORE UPDATE ON memories FOR EACH ROW
    WHEN (OLD.embedding IS DISTINCT FROM NEW.embedding OR OLD.archived <> NEW.archived
          OR OLD.faded <> NEW.faded
          OR OLD.owner <> NEW.owner OR OLD.role <> NEW.role OR OLD.type <> NEW.type
          OR OLD.title <> NEW.title OR OLD.content <> NEW.content
          OR OLD.tags <> NEW.tags OR OLD.entities <> NEW.entities)
    EXECUTE FUNCTION nooa_index_text();
"""

#: Version 4: the index is built from `stems` (`storage.keywords`), no longer by PostgreSQL's
#: parser and stemmer: `tf` maps each stem to its weighted frequency in the row (title 2.0,
#: content 1.0, tags and entities 1.5, as FTS5 weighs its columns), `doc_len` counts every
#: stem, and `fts` holds the stems (no positions) for the GIN index to find rows by.
_STEMS = """
ALTER TABLE memories ADD COLUMN IF NOT EXISTS stems text NOT NULL DEFAULT '[]';
ALTER TABLE memories ADD COLUMN IF NOT EXISTS tf jsonb NOT NULL DEFAULT '{}';
CREATE OR REPLACE FUNCTION nooa_index_text() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.stems <> OLD.stems THEN
        SELECT coalesce(jsonb_object_agg(t.w, t.f), '{}'::jsonb), coalesce(sum(t.n), 0)
        INTO NEW.tf, NEW.doc_len
        FROM (SELECT w, sum(c.weight) AS f, count(*) AS n
              FROM (VALUES (0, 2.0), (1, 1.0), (2, 1.5), (3, 1.5)) AS c(i, weight),
                   unnest(string_to_array(NEW.stems::json ->> c.i, ' ')) AS w
              WHERE w <> ''
              GROUP BY w) t;
        NEW.fts := array_to_tsvector(ARRAY(SELECT jsonb_object_keys(NEW.tf)));
    END IF;
    IF TG_OP = 'UPDATE' THEN
        NEW.rev := pg_current_xact_id();
    END IF;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS memories_rev ON memories;
CREATE TRIGGER memories_rev BEFORE UPDATE ON memories FOR EACH ROW
    WHEN (OLD.embedding IS DISTINCT FROM NEW.embedding OR OLD.archived <> NEW.archived
          OR OLD.faded <> NEW.faded
          OR OLD.owner <> NEW.owner OR OLD.role <> NEW.role OR OLD.type <> NEW.type
          OR OLD.title <> NEW.title OR OLD.content <> NEW.content
          OR OLD.tags <> NEW.tags OR OLD.entities <> NEW.entities OR OLD.stems <> NEW.stems)
    EXECUTE FUNCTION nooa_index_text();
"""

#: Version 5: the notify trigger of a connection that asked for it (`NOTIFY_AFTER_COMMIT`)
#: notes the notification as owed instead of sending it inside the transaction; the
#: connection sends it after its COMMIT (`NOTIFY_OWED`). `set_config(..., false)` is a session
#: setting that survives the commit and that a rollback (of the transaction or of the
#: savepoint the write was in) undoes, so only a committed change is announced.
_NOTIFY_AFTER = """
CREATE OR REPLACE FUNCTION nooa_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('nooa.notify', true) = 'after commit' THEN
        PERFORM set_config('nooa.notify_owed', 'yes', false);
    ELSE
        PERFORM pg_notify('nooa_' || substr(md5(TG_TABLE_SCHEMA), 1, 20), '');
    END IF;
    RETURN NULL;
END $$;
"""

#: What nooa-mcp's pooled connections set once (see `_NOTIFY_AFTER`).
NOTIFY_AFTER_COMMIT = "SET nooa.notify = 'after commit'"

#: Sent right after a COMMIT (same pipeline, so no round trip of its own), in the implicit
#: transaction that follows it: the notification the committed transaction owes, if any
#: (parameter `ch`: `notify_channel`), and the debt cleared, in one statement (the select
#: list runs only when the WHERE holds). That transaction writes no WAL, so its commit waits
#: for no flush while it holds the notify lock.
NOTIFY_OWED = (
    "SELECT pg_notify(%(ch)s, ''), set_config('nooa.notify_owed', '', false) "
    "WHERE current_setting('nooa.notify_owed', true) = 'yes'"
)

#: Version 6: uses and links read against snapshots, as rows are (`pg_search`). Nullable
#: columns with a default, so adding them rewrites no table (rows written before stay NULL:
#: a reader of changes starts from a mark taken after it read them). A trigger moves an
#: edge's `rev` when an upsert changes its weight, so no writer can forget it; writing edges
#: notifies, so servers holding them (`storage.links`) pull another's links.
_RANKING_CHANGES = """
ALTER TABLE accesses ADD COLUMN IF NOT EXISTS xid xid8;
ALTER TABLE accesses ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
CREATE INDEX IF NOT EXISTS accesses_xid ON accesses (xid);
ALTER TABLE edges ADD COLUMN IF NOT EXISTS rev xid8;
ALTER TABLE edges ALTER COLUMN rev SET DEFAULT pg_current_xact_id();
CREATE INDEX IF NOT EXISTS edges_rev ON edges (rev);
CREATE OR REPLACE FUNCTION nooa_edge_rev() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.rev := pg_current_xact_id();
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS edges_rev ON edges;
CREATE TRIGGER edges_rev BEFORE UPDATE ON edges FOR EACH ROW
    WHEN (OLD.weight IS DISTINCT FROM NEW.weight) EXECUTE FUNCTION nooa_edge_rev();
DROP TRIGGER IF EXISTS edges_notify ON edges;
CREATE TRIGGER edges_notify AFTER INSERT OR UPDATE ON edges
    FOR EACH STATEMENT EXECUTE FUNCTION nooa_notify();
"""

#: Version 7: vector caches hold what ranking scores on (`storage.facts`: importance, when
#: learned, validity, cue words, uses), so a change of importance, created_at, valid_to or
#: place_or_task moves the revision too, as every rewrite does on SQLite. A use alone still
#: does not (a recall logs uses on every call): caches learn of uses from `accesses.xid`,
#: and logging uses notifies, so another server asks for them on its next sync.
_FACTS = """
DROP TRIGGER IF EXISTS accesses_notify ON accesses;
CREATE TRIGGER accesses_notify AFTER INSERT ON accesses
    FOR EACH STATEMENT EXECUTE FUNCTION nooa_notify();
DROP TRIGGER IF EXISTS memories_rev ON memories;
CREATE TRIGGER memories_rev BEFORE UPDATE ON memories FOR EACH ROW
    WHEN (OLD.embedding IS DISTINCT FROM NEW.embedding OR OLD.archived <> NEW.archived
          OR OLD.faded <> NEW.faded
          OR OLD.owner <> NEW.owner OR OLD.role <> NEW.role OR OLD.type <> NEW.type
          OR OLD.title <> NEW.title OR OLD.content <> NEW.content
          OR OLD.tags <> NEW.tags OR OLD.entities <> NEW.entities OR OLD.stems <> NEW.stems
          OR OLD.importance IS DISTINCT FROM NEW.importance
          OR OLD.created_at IS DISTINCT FROM NEW.created_at
          OR OLD.valid_to IS DISTINCT FROM NEW.valid_to
          OR OLD.place_or_task IS DISTINCT FROM NEW.place_or_task)
    EXECUTE FUNCTION nooa_index_text();
"""

#: Version 4's rows, a page at a time: their text, to be stemmed in Python.
RESTEM_PAGE = 1000


async def restem(conn: Any) -> None:
    """Write every row's `stems` where they change (the trigger rebuilds `tf`, `fts` and
    `doc_len` from them)."""
    after = 0
    while True:
        cur = await conn.execute(
            "SELECT seq, title, content, tags::text, entities::text, stems FROM memories "
            "WHERE seq > %s ORDER BY seq LIMIT %s",
            (after, RESTEM_PAGE),
        )
        rows = await cur.fetchall()
        if not rows:
            return
        async with conn.cursor() as cur:
            await cur.executemany(
                "UPDATE memories SET stems = %s WHERE seq = %s",
                [
                    (new, seq)
                    for seq, title, content, tags, entities, old in rows
                    if (new := row_stems(title, content, json.loads(tags), json.loads(entities)))
                    != old
                ],
            )
        after = rows[-1][0]


#: version -> the DDL that brings a store from version - 1 to it (one transaction each).
MIGRATIONS: dict[int, str] = {
    1: _TEXT_SEARCH + _FUNCTIONS + _MEMORIES + _REST,
    2: _ACCESS_COUNTS,
    3: _FADED,
    4: _STEMS,
    5: _NOTIFY_AFTER,
    6: _RANKING_CHANGES,
    7: _FACTS,
    8: "SELECT 1",  # no DDL: the rows' stems, with CJK runs as bigrams (`restem`)
}

#: version -> what Python does after that version's DDL, in the same transaction.
AFTER: dict[int, Callable[[Any], Awaitable[None]]] = {4: restem, 8: restem}


# ---------------------------------------------------------------------------- opening


def short_error(exc: BaseException) -> str:
    """The first line of a driver error, without its trailing period."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text.rstrip(".")


async def ensure_schema(conn: Any, label: str) -> str:
    """The schema the store lives in: the connection's current one, created when the URL's
    search_path names one that does not exist yet."""
    schema = (await (await conn.execute("SELECT current_schema()")).fetchone())[0]
    if schema is not None:
        return schema
    wanted = (await (await conn.execute("SELECT current_setting('search_path')")).fetchone())[0]
    first = wanted.split(",")[0].strip().strip('"')
    if not first or first.startswith("$"):
        raise StoreUnavailable(
            label,
            f"the search_path ({wanted}) names no schema nooa-mcp can use.",
            "Set options=-csearch_path%3D<schema> in the URL.",
        )
    exists = await (
        await conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (first,))
    ).fetchone()
    if exists is not None:
        # Another server starting on the new schema may have just created it: then it is
        # this user's current schema now.
        schema = (await (await conn.execute("SELECT current_schema()")).fetchone())[0]
        if schema is not None:
            return schema
        # PostgreSQL leaves a schema the user may not use out of current_schema(): it is
        # there, and creating it again would change nothing.
        user = (await (await conn.execute("SELECT current_user")).fetchone())[0]
        raise StoreUnavailable(
            label,
            f"schema {first} exists but user {user} may not use it (no USAGE privilege on it).",
            f"Grant it (GRANT USAGE, CREATE ON SCHEMA {first} TO {user}) or use another schema.",
        )
    try:
        # IF NOT EXISTS alone races when several servers start on a new schema at once.
        async with conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{first}/schema",)
            )
            await conn.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(first))
            )
    except psycopg.Error as exc:
        raise StoreUnavailable(
            label,
            f"schema {first} does not exist and cannot be created ({short_error(exc)}).",
            f"Create it (CREATE SCHEMA {first}) or grant CREATE on the database.",
        ) from None
    return first


async def migrate_schema(conn: Any, label: str, schema: str) -> None:
    """Bring the schema to SCHEMA_VERSION in one transaction (DDL is transactional here);
    servers starting at once take turns on an advisory lock instead of racing."""
    try:
        async with conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{schema}/migrate",)
            )
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)"
            )
            cur = await conn.execute("SELECT coalesce(max(version), 0) FROM schema_version")
            found = (await cur.fetchone())[0]
            if found > SCHEMA_VERSION:
                raise StoreTooNew(label, found, SCHEMA_VERSION, what="database")
            for version in range(found + 1, SCHEMA_VERSION + 1):
                await conn.execute(MIGRATIONS[version])
                if version in AFTER and found > 0:
                    await AFTER[version](conn)
                await conn.execute("INSERT INTO schema_version VALUES (%s)", (version,))
    except psycopg.errors.InsufficientPrivilege as exc:
        raise StoreUnavailable(
            label,
            f"this user may not create nooa-mcp's tables in schema {schema} ({short_error(exc)}).",
            "Grant CREATE on the schema, or point --store at a schema this user owns.",
        ) from None
