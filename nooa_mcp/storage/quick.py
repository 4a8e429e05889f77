"""A quick, synchronous look into a SQLite store for the Claude Code hook (DESIGN.md §12).

A prompt hook is a fresh process before every prompt with a budget of ~150 ms, and importing
the async store (aiosqlite, numpy, pydantic) costs more than that. This module uses only the
standard library's sqlite3 and reads and writes the same tables, with the same rules, as
`storage/sqlite.py`: the keyword search (FTS5, BM25 with the same column weights, the same
common-word cut-off), owner visibility, and for what it shows an `injected` access (ring,
channel counter and stream; never base-level, DESIGN.md §3.1) in one `BEGIN IMMEDIATE` transaction.
Its reads are built by the same light modules the stores build theirs from (`dialect`,
`sqlite_search`, `sqlite_schema`: standard library only), not written again here.

It never creates a store: a missing file is simply nothing to show.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from datetime import datetime

from ..domain.epoch import from_epoch
from .dialect import COMMON_FLOOR, COMMON_SHARE, NEXT_REV, SQLITE, intents_sql, role_where
from .keywords import stemmed
from .sqlite_schema import SCHEMA_VERSION
from .sqlite_search import BM25, KEYWORD_POOL, fts_query, selective, selective_sql

__all__ = [
    "BM25",
    "COMMON_FLOOR",
    "COMMON_SHARE",
    "NEXT_REV",
    "SCHEMA_VERSION",
    "QuickStore",
    "QuickUnavailable",
]

RING_SIZE = 64

_ROW = (
    "m.seq, m.id, m.type, m.owner, m.title, m.content, m.tags, m.entities, m.place_or_task, "
    "m.importance, m.status, m.valid_from, m.valid_to, m.created_at"
)


class QuickUnavailable(Exception):
    """The quick path cannot read this file: not a nooa-mcp store, or another schema version.

    `older` is True for a store of an earlier schema, which the full store code migrates.
    """

    def __init__(self, message: str, older: bool = False) -> None:
        super().__init__(message)
        self.older = older


def iso(ts: float) -> str:
    """An epoch time as pydantic writes a UTC datetime into JSON ("...Z")."""
    return from_epoch(ts).isoformat().replace("+00:00", "Z")


class QuickStore:
    """An open store file; `None` from `open` when there is no file."""

    def __init__(self, conn: sqlite3.Connection, path: str) -> None:
        self.conn = conn
        self.path = path

    @classmethod
    def open(cls, path: str, deadline: float, busy_ms: int = 1000) -> QuickStore | None:
        """Open an existing store read-write; queries past `deadline` (time.monotonic) abort.

        Raises:
            QuickUnavailable: the file is not a store of this schema.
        """
        if not os.path.isfile(path):
            return None
        try:
            conn = sqlite3.connect(path, timeout=busy_ms / 1000, isolation_level=None)
        except sqlite3.Error as exc:
            raise QuickUnavailable(f"{path} cannot be opened ({exc}).") from None
        try:
            conn.row_factory = sqlite3.Row
            # As the store's own connections: durable across process crashes, and no fsync
            # of the write-ahead log on every commit (a loaded disk made that the p99).
            conn.execute("PRAGMA synchronous = NORMAL")
            # Interrupt any statement still running at the deadline: a hook must never hang.
            conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise QuickUnavailable(f"{path} is not a nooa-mcp store ({exc}).") from None
        if version != SCHEMA_VERSION or "memories" not in tables:
            conn.close()
            if version == 0 or "memories" not in tables:
                raise QuickUnavailable(
                    f"{path} is not a nooa-mcp store (another application's file?); it was "
                    "not changed."
                )
            if version > SCHEMA_VERSION:
                raise QuickUnavailable(
                    f"{path} has schema version {version}, newer than this nooa-mcp reads "
                    f"({SCHEMA_VERSION}); upgrade nooa-mcp."
                )
            raise QuickUnavailable(f"{path} has schema version {version}.", older=True)
        return cls(conn, path)

    def close(self) -> None:
        self.conn.close()

    # ------------------------------------------------------------------ reads

    def _rows(self, sql: str, params: Sequence[object] | dict = ()) -> list[sqlite3.Row]:
        return self.conn.execute(sql, params).fetchall()

    def selective_terms(self, terms: list[str]) -> list[str]:
        """Terms below the common-word cut-off, as the store drops them (`sqlite_search`)."""
        if not terms:
            return terms
        return selective(terms, self._rows(*selective_sql(terms))[0])

    def keyword_candidates(self, terms: list[str], role: str, limit: int) -> list[dict]:
        """BM25 top `limit` over the memories of the caller's role (and shared ones), with
        what the injection rule needs; intents, scratch notes and closed todos left out.
        Live memories come first; faded ones (archived by maintenance, `faded` set) fill the
        places left after them; memories a user forgot never come."""
        query = fts_query(self.selective_terms(terms))
        if query is None:
            return []
        where, params = role_where(role, SQLITE)
        rows = self._rows(
            f"SELECT {_ROW}, m.archived AS faded, f.score FROM ({KEYWORD_POOL}) f "
            f"JOIN memories m ON m.seq = f.seq WHERE {where} "
            "AND (m.archived = 0 OR m.faded = 1) AND m.type NOT IN ('intent', 'scratch') "
            "AND NOT (m.type = 'todo' AND m.status != 'open') "
            "ORDER BY m.archived, f.score LIMIT :limit",
            {**params, "query": query, "pool": max(limit * 4, 200), "limit": limit},
        )
        return [{**_decoded(r), "bm25": -r["score"]} for r in rows]

    def superseded(self, ids: Sequence[str], role: str) -> set[str]:
        """Ids that a newer memory the caller sees, live or faded (not forgotten), refines or
        contradicts."""
        if not ids:
            return set()
        where, params = role_where(role, SQLITE, "n")
        rows = self._rows(
            "SELECT e.dst FROM edges e JOIN memories n ON n.id = e.src "
            "JOIN memories o ON o.id = e.dst "
            f"WHERE {SQLITE.one_of('e.dst', 'ids')} AND e.type IN ('refines', 'contradicts') "
            f"AND (n.archived = 0 OR n.faded = 1) AND n.created_at >= o.created_at AND {where}",
            {**params, "ids": SQLITE.values(ids)},
        )
        return {r[0] for r in rows}

    def merged_duplicates(self, ids: Sequence[str]) -> set[str]:
        """The faded memories among `ids` that reflection merged into a memory not forgotten
        (`services.tombstones.merged_anchors`' rule, in one statement): the anchor speaks for
        such a duplicate, which recall leaves out beside it (DESIGN.md §5.8). The reason's
        wording is `domain.archive.merged_reason`'s, not imported: the fast path stays light."""
        if not ids:
            return set()
        rows = self._rows(
            "SELECT DISTINCT t.memory_id FROM tombstones t JOIN memories d ON d.id = t.memory_id "
            "JOIN edges e ON e.dst = t.memory_id AND e.type = 'refines' "
            "JOIN memories a ON a.id = e.src "
            f"WHERE {SQLITE.one_of('t.memory_id', 'ids')} AND t.lifted_at IS NULL "
            "AND d.archived = 1 AND t.reason = 'merged into ' || substr(e.src, 1, 8) "
            "AND (a.archived = 0 OR a.faded = 1)",
            {"ids": SQLITE.values(ids)},
        )
        return {r[0] for r in rows}

    def open_todos(self, role: str, limit: int) -> tuple[list[dict], int]:
        """Open todos, most important first, then oldest first; and how many are open."""
        where, params = role_where(role, SQLITE)
        base = f"FROM memories m WHERE {where} AND m.archived = 0 AND m.type = 'todo' "
        base += "AND m.status = 'open'"
        rows = self._rows(
            f"SELECT {_ROW} {base} ORDER BY m.importance DESC, m.created_at ASC LIMIT :limit",
            {**params, "limit": limit},
        )
        count = self._rows(f"SELECT count(*) {base}", params)[0][0]
        return [_decoded(r) for r in rows], count

    def important(
        self, role: str, project: str, limit: int, now: float, floor: float
    ) -> list[dict]:
        """Live, current memories for session start: those labelled with the project first
        (tag, entity or place), then those of importance `floor` or more, by importance and
        last use."""
        where, params = role_where(role, SQLITE)
        params.update(now=now, floor=floor, limit=limit * 3)
        live = (
            f"{where} AND m.archived = 0 AND m.type NOT IN ('todo', 'intent', 'scratch') "
            "AND (m.valid_to IS NULL OR m.valid_to > :now)"
        )
        out: list[dict] = []
        # The index holds stems (storage.keywords): the label is asked for as its stems.
        label = '"' + stemmed(project) + '"'
        if label != '""':
            rows = self._rows(
                f"SELECT {_ROW} FROM memories_fts f JOIN memories m ON m.seq = f.rowid "
                f"WHERE memories_fts MATCH :label AND {live} "
                "ORDER BY m.importance DESC, m.last_accessed_at DESC LIMIT 200",
                {**params, "label": f"{{tags entities}}: {label}"},
            )
            wanted = project.lower()
            for r in rows:
                item = _decoded(r)
                labels = [*item["tags"], *item["entities"], item["place_or_task"]]
                if any(str(x).lower() == wanted for x in labels):
                    out.append({**item, "labelled": True})
        rows = self._rows(
            f"SELECT {_ROW} FROM memories m WHERE {live} AND m.importance >= :floor "
            "ORDER BY m.importance DESC, m.last_accessed_at DESC LIMIT :limit",
            params,
        )
        seen = {m["id"] for m in out}
        out += [d for d in map(_decoded, rows) if d["id"] not in seen]
        return out

    def intents(self, role: str) -> list[dict]:
        """Live intents of the role with their trigger JSON, oldest first (store.intents)."""
        rows = self._rows(intents_sql(SQLITE, "id, content, importance, trigger"), {"role": role})
        return [dict(r) for r in rows]

    # ------------------------------------------------------------------ the one write

    def log_injected(
        self,
        shown: Sequence[tuple[str, dict]],
        fired: Sequence[tuple[str, Callable[[str], tuple[str, dict] | None], dict]] = (),
    ) -> list[str]:
        """Log `injected` accesses and fire intents in one transaction.

        `shown` is (memory id, access record) per memory shown. `fired` is (intent id,
        decide, access record): `decide` sees the intent's trigger JSON as it is now, under
        the write lock, and returns the new trigger JSON and the maintenance-log report, or
        None when it no longer fires (another process fired it first). Returns the intent ids
        that fired.

        Raises:
            sqlite3.Error: the write failed (locked past the busy timeout, read-only, full).
        """
        now = time.time()
        done: list[str] = []
        if not shown and not fired:
            return done
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            for memory_id, decide, record in fired:
                row = self._ring_row(memory_id)
                if row is None or row["archived"] or not row["trigger"]:
                    continue
                decided = decide(row["trigger"])
                if decided is None:
                    continue
                trigger, report = decided
                self._touch(memory_id, row, record, trigger)
                self.conn.execute(
                    "INSERT INTO maintenance_log(ts, kind, report) VALUES (?, 'intent', ?)",
                    (now, json.dumps(report)),
                )
                done.append(memory_id)
            for memory_id, record in shown:
                row = self._ring_row(memory_id)
                if row is not None:
                    self._touch(memory_id, row, record, None)
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
        return done

    def _ring_row(self, memory_id: str) -> sqlite3.Row | None:
        rows = self._rows(
            "SELECT ring, channels, trigger, archived FROM memories WHERE id = ?", (memory_id,)
        )
        return rows[0] if rows else None

    def _touch(self, memory_id: str, row: sqlite3.Row, record: dict, trigger: str | None) -> None:
        """Put the access on the ring and the stream; `injected` touches nothing else."""
        ring = [record, *json.loads(row["ring"])][:RING_SIZE]
        channels = json.loads(row["channels"])
        channels[record["channel"]] = channels.get(record["channel"], 0) + 1
        sets = "ring = ?, channels = ?"
        values: list[object] = [json.dumps(ring), json.dumps(channels)]
        if trigger is not None:
            sets += ", trigger = ?"
            values.append(trigger)
        self.conn.execute(
            f"UPDATE memories SET {sets}, rev = {NEXT_REV} WHERE id = ?", [*values, memory_id]
        )
        self.conn.execute(
            "INSERT INTO accesses(memory_id, ts, channel, reader_owner, session_ref, trace_ref, "
            "query, score, rank, components) VALUES (?, ?, ?, ?, ?, NULL, ?, NULL, ?, NULL)",
            (
                memory_id,
                datetime.fromisoformat(record["ts"]).timestamp(),
                record["channel"],
                record["reader_owner"],
                record.get("session_ref"),
                record.get("query"),
                record.get("rank"),
            ),
        )


def _decoded(row: sqlite3.Row) -> dict:
    item = dict(row)
    item["tags"] = json.loads(item["tags"])
    item["entities"] = json.loads(item["entities"])
    return item
