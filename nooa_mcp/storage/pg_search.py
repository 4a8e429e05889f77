"""Keyword search and change tracking in PostgreSQL SQL: FTS5's BM25, and the xid8 snapshots.

**BM25, as SQLite's FTS5 computes it** (fts5_aux.c), so both backends rank alike:

- per query word i, `f_i` = Σ over its hits in a row of the hit column's weight (title 2.0,
  tags and entities 1.5, content 1.0 — the row's `tf`, see `pg_schema`);
- `|D|` = every token of the row, unweighted (`doc_len`); `avgdl` = tokens / rows over the
  whole table, archived rows and every owner included;
- `idf_i = max(ln((N − n_i + 0.5) / (n_i + 0.5)), 1e-6)`, `n_i` = rows holding word i;
- `score = Σ idf_i · f_i · (k1 + 1) / (f_i + k1 · (1 − b + b · |D| / avgdl))`, k1 = 1.2, b = 0.75.

N and avgdl come in as parameters (`DocStats` keeps them, synced like the vector cache), so a
search needs no count over the table. Each word's `n_i` is counted through the GIN index and
stopped at the "too common" cap (`storage.base.COMMON_FLOOR`/`COMMON_SHARE`): the same number
is the exact `n_i` of a selective word and the cut-off test of a common one. Words found too
common are remembered per process (`CommonTerms`) and not counted again: a count costs about
one heap visit per matching row. Both backends index the stems of `storage.keywords`, so the
tokens are the same and the scores equal FTS5's to about 1e-14.

**Change tracking.** A row's `rev` is the id of the transaction that last changed it. A reader
takes, in the same statement as its rows, the snapshot it read under (xmax, and the xids still
running). Every transaction below xmax and not running had finished: its rows were read, or it
rolled back. So the next read needs exactly the rows with `rev >= xmax` or `rev` among those
running — however late they commit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .base import COMMON_SHARE

__all__ = [
    "SNAPSHOT",
    "CommonTerms",
    "DocStats",
    "Mark",
    "bm25_sql",
    "changes_sql",
    "tsquery_text",
]

#: The running transactions of the statement's snapshot, plus this transaction's own xid when it
#: has one (a snapshot never lists its own transaction, whose later writes must be pulled too).
SNAPSHOT = """
snap AS MATERIALIZED (
    SELECT pg_snapshot_xmax(s)::text AS xmax,
           ARRAY(SELECT x::text FROM pg_snapshot_xip(s) AS x
                 UNION SELECT pg_current_xact_id_if_assigned()::text
                 WHERE pg_current_xact_id_if_assigned() IS NOT NULL) AS xip
    FROM pg_current_snapshot() AS s
)"""


@dataclass(frozen=True, slots=True)
class Mark:
    """Where a reader of changes stands: the snapshot of its last complete read.

    While a read is paged, `after` is the last seq returned and `pending` the snapshot of the
    first page; the mark moves to `pending` only once the last page is read, so rows changed
    by transactions that finished between pages are read again next time, never skipped.
    """

    xmax: int = 0
    xip: tuple[int, ...] = ()
    after: int | None = None
    pending: tuple[int, tuple[int, ...]] | None = None


def changes_sql(columns: str, cold: bool) -> str:
    """Rows changed since a mark (`%(xmax)s`, `%(xip)s`, `%(after)s`, `%(limit)s`), in seq
    order, each with the statement's snapshot; one row of NULLs when nothing changed.

    A `cold` read (no mark yet: every row) walks the primary key a page at a time. A warm one
    first collects the few changed seqs through the `rev` index: left to itself, the planner
    walks the primary key for the ORDER BY … LIMIT and filters every row (20 ms at 10k rows
    where the index takes 0.3).
    """
    if cold:
        changed = f"""
changed AS (
    SELECT {columns} FROM memories m WHERE m.seq > %(after)s ORDER BY m.seq LIMIT %(limit)s
)"""
    else:
        changed = f"""
touched AS MATERIALIZED (
    SELECT seq FROM memories
    WHERE (rev >= %(xmax)s::xid8 OR rev = ANY(%(xip)s::xid8[])) AND seq > %(after)s
),
changed AS (
    SELECT {columns} FROM memories m
    WHERE m.seq IN (SELECT seq FROM touched ORDER BY seq LIMIT %(limit)s)
)"""
    return f"""
WITH {SNAPSHOT},{changed}
SELECT snap.xmax, snap.xip, c.* FROM snap LEFT JOIN changed c ON true ORDER BY c.seq
"""


def next_mark(mark: Mark, xmax: str, xip: list[str], last_seq: int | None, full: bool) -> Mark:
    """The mark after a page: `full` means more rows may follow (`last_seq` is the last read)."""
    pending = mark.pending or (int(xmax), tuple(int(x) for x in xip))
    if full and last_seq is not None:
        return Mark(mark.xmax, mark.xip, last_seq, pending)
    return Mark(pending[0], pending[1])


@dataclass
class DocStats:
    """N (rows) and the total token count of the store, for BM25's idf and avgdl.

    Kept per process from each row's `doc_len`, pulled with the same change tracking as the
    vector cache, so it is exact up to the last sync and costs no count over the table.
    """

    mark: Mark = field(default_factory=Mark)
    lengths: np.ndarray = field(default_factory=lambda: np.full(0, -1, dtype=np.int32))
    rows: int = 0
    tokens: int = 0

    def apply(self, pairs: list[tuple[int, int]]) -> int:
        """Take each (seq, doc_len) read; returns how many of them rewrote a row already
        counted (an edit, a rescore: its words may have changed)."""
        if not pairs:
            return 0
        rewritten = 0
        top = max(seq for seq, _ in pairs)
        if top >= self.lengths.shape[0]:
            grown = np.full(max(top + 1, self.lengths.shape[0] * 5 // 4, 1024), -1, np.int32)
            grown[: self.lengths.shape[0]] = self.lengths
            self.lengths = grown
        for seq, length in pairs:
            old = int(self.lengths[seq])
            if old < 0:
                self.rows += 1
            else:
                self.tokens -= old
                rewritten += 1
            self.tokens += length
            self.lengths[seq] = length
        return rewritten

    @property
    def avgdl(self) -> float:
        return self.tokens / self.rows if self.rows else 1.0


class CommonTerms:
    """Lexemes this process found too common to rank: counting them again would cost about
    `cap` heap visits each. A new row cannot lower a lexeme's count (rows are archived, not
    deleted) and the cap only grows with the store, so the memory is forgotten whenever N
    grows by a tenth, and whenever a row already counted is rewritten (`forget`): an edit
    can take the lexeme out of it."""

    def __init__(self) -> None:
        self.lexemes: set[str] = set()
        self.at_rows = 0

    def known(self, rows: int) -> list[str]:
        if rows > self.at_rows * 1.1:
            self.lexemes.clear()
            self.at_rows = rows
        return sorted(self.lexemes)

    def learn(self, lexemes: list[str] | None) -> None:
        self.lexemes.update(lexemes or [])

    def forget(self) -> None:
        self.lexemes.clear()


def common_cap(rows: int, floor: int) -> int:
    return max(floor, int(rows * COMMON_SHARE))


def tsquery_text(lexemes: list[str]) -> str:
    """An OR of lexemes as tsquery input, each quoted so it is matched as it is (no parsing,
    no stemming again)."""
    quoted = ("'" + lex.replace("\\", "\\\\").replace("'", "''") + "'" for lex in lexemes)
    return " | ".join(quoted)


def idf(rows: int, n: int) -> float:
    """FTS5's idf: ln((N − n + 0.5) / (n + 0.5)), floored at 1e-6. N is at least n: this
    process's row count may lag another server's newest commit while n is counted now."""
    rows = max(rows, n)
    return max(math.log((rows - n + 0.5) / (n + 0.5)), 1e-6)


def bm25_sql(
    columns: str, scope: str, faded: bool, lexemes: int, include_archived: bool = False
) -> str:
    """One statement: the keyword top `%(limit)s` of live rows in scope (and, with `faded`, the
    top `%(faded)s` of faded rows beside them; a row its user forgot never), with `columns` of
    each row and its `bm25`, and the rows `%(ids)s` (bm25 NULL unless also a keyword hit); a
    last row with NULL seq carries each lexeme's row count (`counts`, for the common-word
    memory). With `include_archived`, every row is in one tier (archived or not).

    Lexeme i arrives as its own tsquery `%(q<i>)s`. Being parameters of a one-shot statement,
    the planner sees them: the GIN index serves a rare word, a short scan a common one. Its row
    count stops at `%(cap)s`; a lexeme at the cap is too common (unless the store is smaller
    than the cap) and its hit scan is skipped altogether (a one-time filter). `%(words)s` maps
    each query word to its lexeme's index: a lexeme two words share counts twice, as in FTS5.
    """
    archived = "AND (NOT m.archived OR m.faded)" if faded else "AND NOT m.archived"
    if include_archived:
        archived, faded = "", False
    counts = ",\n        ".join(
        f"({i}, (SELECT count(*) FROM (SELECT 1 FROM memories WHERE fts @@ %(q{i})s::tsquery "
        f"LIMIT %(cap)s) s))"
        for i in range(lexemes)
    )
    scans = "\n        UNION ALL\n        ".join(
        f"SELECT m.seq, m.doc_len, m.archived, m.tf FROM memories m "
        f"WHERE m.fts @@ %(q{i})s::tsquery "
        f"AND {scope} {archived} AND (SELECT keep FROM df WHERE i = {i})"
        for i in range(lexemes)
    )
    bm25 = "sum(s.idf * t.f * 2.2 / (t.f + 1.2 * (0.25 + 0.75 * t.doc_len / %(avgdl)s)))"
    sparse = f"""sparse AS (
    SELECT t.seq, {bm25} AS bm25
    FROM tfs t JOIN sel s ON s.lex = t.lexeme
    GROUP BY t.seq ORDER BY bm25 DESC, t.seq LIMIT %(limit)s
)"""
    if faded:
        # Each tier keeps its own best rows: faded rows never take a live row's place.
        sparse = f"""scored AS (
    SELECT t.seq, t.archived, {bm25} AS bm25,
           row_number() OVER (PARTITION BY t.archived ORDER BY {bm25} DESC, t.seq) AS r
    FROM tfs t JOIN sel s ON s.lex = t.lexeme
    GROUP BY t.seq, t.archived
),
sparse AS (
    SELECT seq, bm25 FROM scored
    WHERE r <= CASE WHEN archived THEN %(faded)s ELSE %(limit)s END
)"""
    return f"""
WITH df AS MATERIALIZED (
    SELECT i, n, n > 0 AND (n < %(cap)s OR %(rows)s < %(cap)s) AS keep
    FROM (VALUES
        {counts}) AS d(i, n)
),
sel AS (
    -- FTS5's idf; N is at least n (this process's row count may lag another server's commit).
    SELECT w.lex, greatest(ln((greatest(%(rows)s, d.n) - d.n + 0.5) / (d.n + 0.5)), 1e-6) AS idf
    FROM unnest(%(words)s::int[], %(lexes)s::text[]) AS w(i, lex) JOIN df d ON d.i = w.i
    WHERE d.keep
),
hit AS (
    SELECT DISTINCT ON (seq) seq, doc_len, archived, tf FROM (
        {scans}
    ) AS x ORDER BY seq
),
tfs AS (
    -- Each stem's frequency in the row, weighted by column as FTS5 weighs it (pg_schema).
    SELECT h.seq, h.doc_len, h.archived, l.lex AS lexeme, (h.tf ->> l.lex)::float8 AS f
    FROM hit h CROSS JOIN (SELECT DISTINCT lex FROM sel) l
    WHERE h.tf ->> l.lex IS NOT NULL
),
{sparse},
picked AS (
    SELECT seq FROM sparse
    UNION
    SELECT m.seq FROM memories m WHERE m.id = ANY(%(ids)s::text[])
)
(SELECT {columns}, s.bm25, NULL::bigint[] AS counts
 FROM picked p JOIN memories m ON m.seq = p.seq LEFT JOIN sparse s ON s.seq = p.seq)
UNION ALL
SELECT {", ".join(["NULL"] * (columns.count(",") + 1))}, NULL, ARRAY(SELECT n FROM df ORDER BY i)
"""
