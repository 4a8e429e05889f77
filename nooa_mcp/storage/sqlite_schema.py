"""The SQLite store's schema: its tables, keyword index and access counts, as SQL text.

Standard library only: the hook's fast path (`storage.quick`) reads the version it may open
from here, and `storage.sqlite` creates and migrates a file with it.
"""

from __future__ import annotations

__all__ = ["ACCESS_COUNTS", "EDGE_REVS", "KEYWORDS", "SCHEMA", "SCHEMA_VERSION", "split_sql"]

#: 1: the first release. 2: content_hash is taken after NFKC and case folding (exact repeats,
#: DESIGN.md §4.2); a version-1 file is rehashed in place when opened. 3: the access stream's
#: counts per memory, channel and reader (`access_counts`, kept by triggers) and a covering
#: index for scans by scope, so stats reads neither the stream nor the wide rows; an older
#: file's counts are taken from its stream when it is opened. 4: `faded`, which tells a memory
#: maintenance archived (recall still reaches it) from one its user forgot; an older file's
#: archived rows are told apart by their standing tombstone's reason (`domain.archive`).
#: 5: keyword search over the stems of `storage.keywords` (`stems`, `KEYWORDS`), as
#: PostgreSQL indexes them; an older file's rows are stemmed and indexed anew when opened.
#: 6: each edge's `rev`, moved by every write that adds it or changes its weight (`EDGE_REVS`),
#: so a process holding what ranking reads learns of another's links (`Store.ranking_changes`).
#: 7: a run of Chinese, Japanese or Korean is indexed as its character bigrams
#: (`storage.keywords.words`); an older file's rows are stemmed anew when opened (only rows
#: whose stems change are written: those holding such text).
SCHEMA_VERSION = 7

SCHEMA = """
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
    -- Moved by every write that adds an edge or changes its weight (`EDGE_REVS`).
    rev INTEGER NOT NULL DEFAULT 0,
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
KEYWORDS = """
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
ACCESS_COUNTS = """
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


#: Schema version 6. Every write that adds an edge or changes its weight numbers it above every
#: edge written before (writers hold the write lock, so the numbers follow commit order), and
#: `Store.ranking_changes` reads the edges numbered above a mark. Triggers, so no writer (the
#: hooks' connection, import, an older server on the file) can forget it; a weight written
#: unchanged (an upsert that keeps the larger weight) moves nothing.
EDGE_REVS = """
CREATE INDEX IF NOT EXISTS edges_rev ON edges(rev);
CREATE TRIGGER IF NOT EXISTS edges_rev_insert AFTER INSERT ON edges BEGIN
    UPDATE edges SET rev = (SELECT coalesce(max(rev), 0) + 1 FROM edges)
    WHERE src = new.src AND dst = new.dst AND type = new.type;
END;
CREATE TRIGGER IF NOT EXISTS edges_rev_update AFTER UPDATE OF weight ON edges
WHEN new.weight IS NOT old.weight BEGIN
    UPDATE edges SET rev = (SELECT coalesce(max(rev), 0) + 1 FROM edges)
    WHERE src = new.src AND dst = new.dst AND type = new.type;
END;
"""


def split_sql(script: str) -> list[str]:
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
