"""Keyword search in SQLite's FTS5, as SQL text: what the store and the hooks both run.

Standard library only (and `storage.keywords`): the hook's fast path (`storage.quick`) builds
its keyword reads from these, beside `storage.sqlite`, so both rank with the same BM25 column
weights, the same quoting and the same common-word cut-off (`dialect.COMMON_FLOOR`).
Parameters are named, SQLite's way (`:name`).
"""

from __future__ import annotations

from .dialect import COMMON_FLOOR, COMMON_SHARE
from .keywords import query_stems

FOR_TYPE_CHECKERS = False
if FOR_TYPE_CHECKERS:
    from collections.abc import Sequence

__all__ = ["BM25", "KEYWORD_POOL", "TermCounts", "fts_query", "selective", "selective_sql"]

#: FTS5's BM25 with the column weights of both backends (title, content, tags, entities):
#: lower is better, as FTS5 ranks.
BM25 = "bm25(memories_fts, 2.0, 1.0, 1.5, 1.5)"

#: The best `:pool` keyword matches of the FTS5 query `:query` (seq, score), ranked inside
#: FTS5: joining every match to `memories` before the LIMIT cost 3-5x the ranking itself on
#: common words (10k rows: 14 ms -> 4 ms).
KEYWORD_POOL = (
    f"SELECT rowid AS seq, {BM25} AS score FROM memories_fts "
    "WHERE memories_fts MATCH :query ORDER BY score LIMIT :pool"
)


def fts_query(text: str | list[str], max_terms: int = 32) -> str | None:
    """Turn user text (or its stems) into a safe FTS5 query: each stem quoted, OR-ed together.

    Quoting every term means FTS5 operators (AND, NEAR, *, ^, :, column filters) and stray
    quotes in the text are matched as words and can never raise a syntax error.
    """
    terms = query_stems(text, max_terms) if isinstance(text, str) else text
    if not terms:
        return None
    return " OR ".join(f'"{w}"' for w in terms)


def selective_sql(terms: Sequence[str], floor: int = COMMON_FLOOR) -> tuple[str, dict[str, object]]:
    """One statement (one round trip) with the store's size, the common-word cap and each
    term's row count stopped at the cap, so checking costs the same at any store size: its
    row goes to `selective`."""
    cap = "max(:floor, CAST((SELECT coalesce(max(seq), 0) FROM memories) * :share AS INTEGER))"
    probe = ", ".join(
        "(SELECT count(*) FROM (SELECT rowid FROM memories_fts "
        f"WHERE memories_fts MATCH :t{i} LIMIT {cap}))"
        for i in range(len(terms))
    )
    params: dict[str, object] = {"floor": floor, "share": COMMON_SHARE}
    params.update({f"t{i}": f'"{term}"' for i, term in enumerate(terms)})
    return f"SELECT (SELECT coalesce(max(seq), 0) FROM memories), {cap}, {probe}", params


def selective(terms: list[str], row: Sequence[int]) -> list[str]:
    """The terms worth ranking, from the row of `selective_sql`: all of them while the store
    is smaller than the cap, else those in fewer rows than the cap. When every term is common
    the keyword search is skipped and dense candidates stand alone."""
    rows, limit, *counts = row
    if rows < limit:
        return terms
    return [term for term, n in zip(terms, counts, strict=True) if n < limit]


class TermCounts:
    """The counts `selective_sql` found, kept while no row of the store changes.

    Counting a common word stops at the cap, but that is still up to ~1% of the store's
    rows walked per word on every recall. A row whose words change (written, edited, its
    stems rewritten) moves `memories.rev`, and rows are never deleted, so while the store's
    highest `rev` is the same the counts are too: they are kept for one `rev` (and one
    floor) and forgotten as soon as either differs. Only counts read outside a transaction
    may be kept: a transaction's rows can still be rolled back, and the revisions they took
    be taken again by other rows.
    """

    #: Words kept at most for one revision (a recall asks for up to 32).
    LIMIT = 4096

    def __init__(self) -> None:
        self.key: tuple[int, int] | None = None
        self.size: tuple[int, int] = (0, 0)
        self.counts: dict[str, int] = {}

    def missing(self, rev: int, floor: int, terms: Sequence[str]) -> list[str]:
        """The terms not counted at `rev` (all of them when another revision or floor was
        counted last)."""
        if self.key != (rev, floor) or len(self.counts) > self.LIMIT:
            self.key, self.counts = (rev, floor), {}
        return list(dict.fromkeys(t for t in terms if t not in self.counts))

    def learn(self, terms: Sequence[str], row: Sequence[int]) -> None:
        """Keep the row `selective_sql(terms)` returned: the store's size, the cap, and
        each term's count."""
        rows, limit, *counts = row
        self.size = (rows, limit)
        self.counts.update(zip(terms, counts, strict=True))

    def row(self, terms: Sequence[str]) -> list[int]:
        """The row `selective_sql(terms)` would return at the kept revision."""
        return [*self.size, *(self.counts[t] for t in terms)]
