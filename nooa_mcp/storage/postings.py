"""Keyword search held in memory: every row's stems as postings, ranked with FTS5's BM25
(DESIGN.md §5.13).

A recall's keyword search in SQLite ran FTS5 over every row matching any query word (at 1k
rows a LoCoMo question matches ~400, each scored with a lookup of its size), ~3 ms of CPU on
the two cores the query's embedding runs on. Held here, it is a few numpy operations over the
postings of the query's words.

What is held, for every row of the store (every owner, archived or not — BM25's statistics
are the table's, as FTS5's are):

- postings by stem: for each stem, the rows holding it and its weighted frequency there
  (title 2.0, content 1.0, tags and entities 1.5 per occurrence, as both backends weigh
  them; kept in half-units, so the sums are exact);
- each row's token count (`|D|`), the rows' count (N) and their tokens' total (for avgdl).

The score is `pg_search`'s formula (FTS5's `bm25()` in fts5_aux.c), computed in the same
order of floating-point operations, so it equals FTS5's bit for bit; the stems are
`storage.keywords`' on both sides.

Postings are kept in two parts: a compact base (one array of rows and one of weights, sorted
by stem) and the entries of rows written since it was built, appended as they come. A row
rewritten marks its base entries stale and appends its new ones; when the appended part
outgrows a quarter of the base, the two are merged into a new base. Memory: 6 bytes a
(row, stem) pair — LoCoMo turns hold ~26 distinct stems, 16 MB at 100k rows.
"""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Iterable, Sequence
from itertools import repeat
from typing import Any

import numpy as np

__all__ = ["K1", "WEIGHTS", "B", "HeldKeywords", "row_terms"]

#: BM25's parameters, as FTS5 fixes them.
K1 = 1.2
B = 0.75

#: Each searchable column's weight (title, content, tags, entities) in half-units: 2.0, 1.0,
#: 1.5, 1.5 — `sqlite_search.BM25` and `pg_schema`'s `tf`.
WEIGHTS = (4, 2, 3, 3)

#: Appended entries are merged into the base when they exceed this, or a quarter of the base.
MERGE_FLOOR = 1 << 16
#: Entries a merge places per step (`HeldKeywords.merge`): its temporaries are a few times
#: this many entries, not a few times every entry held.
MERGE_STEP = 1 << 16


def row_terms(stems: Any) -> tuple[dict[str, int], int]:
    """A row's stems (`storage.keywords.row_stems`, as JSON text or decoded) as each stem's
    weighted frequency in half-units, and its token count."""
    if stems is None:
        return {}, 0
    columns = json.loads(stems) if isinstance(stems, str | bytes) else stems
    counts: dict[str, int] = {}
    tokens = 0
    for text, weight in zip(columns, WEIGHTS, strict=False):
        words = (text or "").split()
        tokens += len(words)
        for word in words:
            counts[word] = counts.get(word, 0) + weight
    return counts, tokens


class HeldKeywords:
    """Every row's postings and token count, by seq; `search` ranks a query's rows."""

    def __init__(self) -> None:
        #: The store's change mark for these rows (`Store.keyword_changes`); None: not loaded.
        self.mark: Any = None
        self._stems: dict[str, int] = {}
        # The base: entries of stem s are at [_starts[s], _starts[s + 1]).
        self._starts = np.zeros(1, dtype=np.int64)
        self._rows = np.zeros(0, dtype=np.int32)
        self._weights = np.zeros(0, dtype=np.uint16)
        # Entries appended since the base was built (stem, seq, weight, the row's version).
        self._new_stem = array("i")
        self._new_row = array("i")
        self._new_weight = array("H")
        self._new_version = array("i")
        #: Per seq: its token count (-1: no such row), its version (moved by each rewrite),
        #: and whether its base entries are out of date.
        self.lengths = np.full(0, -1, dtype=np.int32)
        self._version = np.zeros(0, dtype=np.int32)
        self._stale = np.zeros(0, dtype=bool)
        #: N and the tokens of all N rows.
        self.count = 0
        self.tokens = 0

    @property
    def ready(self) -> bool:
        return self.mark is not None

    def nbytes(self) -> int:
        arrays = (self._starts, self._rows, self._weights, self.lengths, self._version)
        appended = (self._new_stem, self._new_row, self._new_weight, self._new_version)
        return (
            sum(a.nbytes for a in arrays)
            + self._stale.nbytes
            + sum(a.itemsize * len(a) for a in appended)
        )

    # ------------------------------------------------------------------ writing

    def apply(self, rows: Iterable[tuple[int, Any]], *, merge: bool = True) -> None:
        """Hold these rows (seq, stems) as they now are, replacing what was held of them.

        `merge=False` leaves every entry appended, for a caller that merges once at the end
        (the first read of a store: merging each time the appended part outgrew a quarter of
        the base sorted the growing whole ~16 times at 100k rows, up to 150 ms each)."""
        rows = list(rows)
        seqs = [seq for seq, _ in rows]
        if seqs and self._all_new(seqs):
            self._append_new(seqs, [stems for _, stems in rows])
        else:
            self._apply_each(rows)
        if merge and len(self._new_stem) > max(MERGE_FLOOR, self._rows.size // 4):
            self.merge()

    def _all_new(self, seqs: list[int]) -> bool:
        """Whether none of `seqs` is held and none repeats (a first read's pages)."""
        if len(set(seqs)) < len(seqs):
            return False
        known = np.asarray(seqs, dtype=np.int64)
        known = known[known < self.lengths.size]
        return not (self.lengths[known] >= 0).any()

    def _append_new(self, seqs: list[int], stems: list[Any]) -> None:
        """`_apply_each` for rows none of which is held, a page at a time: the words are
        gathered with list operations and counted per (row, stem) by numpy, ~4x faster than
        a dict a row (a 100k store's first read: 2.05 against 0.52 s). The entries come out
        in the same order, row by row, so the base a merge builds is the same."""
        words: list[str] = []
        counts: list[int] = []  # words per (row, column), rows in order, columns in order
        if all(isinstance(raw, str) for raw in stems):  # as stored: one parse for the page
            stems = json.loads("[" + ",".join(stems) + "]")
        for raw in stems:
            columns = (json.loads(raw) if isinstance(raw, str | bytes) else raw) or ()
            for k in range(len(WEIGHTS)):
                text = columns[k] if k < len(columns) else None
                split = (text or "").split()
                words.extend(split)
                counts.append(len(split))
        n_rows = len(seqs)
        per_cell = np.asarray(counts, dtype=np.int64)
        tokens = per_cell.reshape(n_rows, len(WEIGHTS)).sum(axis=1)
        codes = self._stems
        found = list(map(codes.get, words))
        if None in found:  # stems not seen before, coded in order of first appearance
            for k, word in enumerate(words):
                if found[k] is None:
                    found[k] = codes.setdefault(word, len(codes))
        code = np.array(found, dtype=np.int64)
        owner = np.repeat(np.arange(n_rows, dtype=np.int64), tokens)
        weight = np.repeat(np.tile(np.asarray(WEIGHTS, dtype=np.int64), n_rows), per_cell)
        pairs, where = np.unique(owner * len(codes) + code, return_inverse=True)
        summed = np.bincount(where, weights=weight).astype(np.int64)
        at = np.asarray(seqs, dtype=np.int64)
        self._grow(int(at.max()) + 1)
        self.lengths[at] = tokens
        self.count += n_rows
        self.tokens += int(tokens.sum())
        entry_rows = at[pairs // len(codes)]
        self._new_stem.frombytes((pairs % len(codes)).astype(np.int32).tobytes())
        self._new_row.frombytes(entry_rows.astype(np.int32).tobytes())
        self._new_weight.frombytes(np.minimum(summed, 0xFFFF).astype(np.uint16).tobytes())
        self._new_version.frombytes(self._version[entry_rows].astype(np.int32).tobytes())

    def _apply_each(self, rows: list[tuple[int, Any]]) -> None:
        for seq, stems in rows:
            counts, tokens = row_terms(stems)
            self._grow(seq + 1)
            old = int(self.lengths[seq])
            if old >= 0:
                self.tokens -= old
                self._stale[seq] = True
                self._version[seq] += 1
            else:
                self.count += 1
            self.lengths[seq] = tokens
            self.tokens += tokens
            codes = self._stems
            n = len(counts)
            self._new_stem.extend([codes.setdefault(stem, len(codes)) for stem in counts])
            self._new_row.extend(repeat(seq, n))
            self._new_weight.extend([min(weight, 0xFFFF) for weight in counts.values()])
            self._new_version.extend(repeat(int(self._version[seq]), n))

    def _grow(self, needed: int) -> None:
        size = self.lengths.size
        if needed <= size:
            return
        capacity = max(needed, size + size // 4 + 1024)
        self.lengths = np.concatenate([self.lengths, np.full(capacity - size, -1, np.int32)])
        self._version = np.concatenate([self._version, np.zeros(capacity - size, np.int32)])
        self._stale = np.concatenate([self._stale, np.zeros(capacity - size, bool)])

    def merge(self) -> None:
        """Fold the appended entries into the base (the stale ones dropped): the base's
        entries still current, then the appended ones, each in its stem's place in the order
        they were held (a stable sort by stem, as one `argsort` of them all would give).

        A counting sort, MERGE_STEP entries at a time: the new base's size per stem is
        counted first, then each step's entries are written to their places. One argsort of
        every entry held, with its concatenated copies, peaked ~80 MiB above what was held
        when a 100k store's first read merged (2.5M entries, the server's highest moment
        of memory); this needs the new base (6 bytes an entry) and a step's worth."""
        stems = np.frombuffer(self._new_stem, dtype=np.int32)
        rows = np.frombuffer(self._new_row, dtype=np.int32)
        weights = np.frombuffer(self._new_weight, dtype=np.uint16)
        versions = np.frombuffer(self._new_version, dtype=np.int32)
        n_stems = len(self._stems)
        starts = self._starts
        counts = np.zeros(n_stems, dtype=np.int64)
        for part in self._parts(starts, stems, rows, weights, versions):
            counts += np.bincount(part[0], minlength=n_stems)
        new_starts = np.zeros(n_stems + 1, dtype=np.int64)
        np.cumsum(counts, out=new_starts[1:])
        new_rows = np.empty(int(new_starts[-1]), dtype=np.int32)
        new_weights = np.empty(int(new_starts[-1]), dtype=np.uint16)
        filled = new_starts[:-1].copy()  # each stem's next free place
        for part_stems, part_rows, part_weights in self._parts(
            starts, stems, rows, weights, versions
        ):
            order = np.argsort(part_stems, kind="stable")
            ordered = part_stems[order]
            # Each entry's rank among the step's entries of its stem, in order.
            rank = np.arange(ordered.size) - np.searchsorted(ordered, ordered, "left")
            at = filled[ordered] + rank
            new_rows[at] = part_rows[order]
            new_weights[at] = part_weights[order]
            held, times = np.unique(ordered, return_counts=True)
            filled[held] += times
        self._rows, self._weights, self._starts = new_rows, new_weights, new_starts
        self._stale[:] = False
        del stems, rows, weights, versions  # the views on the arrays emptied below
        self._new_stem = array("i")
        self._new_row = array("i")
        self._new_weight = array("H")
        self._new_version = array("i")

    def _parts(
        self,
        starts: np.ndarray,
        stems: np.ndarray,
        rows: np.ndarray,
        weights: np.ndarray,
        versions: np.ndarray,
    ) -> Iterable[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The entries a merge keeps, as (stems, rows, weights) of at most MERGE_STEP
        entries each, in order: the base's whose rows are not stale, then the appended
        ones of each row's current version."""
        for lo in range(0, self._rows.size, MERGE_STEP):
            hi = min(lo + MERGE_STEP, self._rows.size)
            base_rows = self._rows[lo:hi]
            keep = ~self._stale[base_rows]
            # The base is sorted by stem: an entry's stem is the span of `starts` it is in.
            base_stems = np.searchsorted(starts, np.arange(lo, hi), "right") - 1
            yield base_stems[keep], base_rows[keep], self._weights[lo:hi][keep]
        for lo in range(0, stems.size, MERGE_STEP):
            hi = min(lo + MERGE_STEP, stems.size)
            current = self._version[rows[lo:hi]] == versions[lo:hi]
            yield stems[lo:hi][current], rows[lo:hi][current], weights[lo:hi][current]

    # ------------------------------------------------------------------ reading

    def postings(self, stem: str) -> tuple[np.ndarray, np.ndarray]:
        """The rows (seqs) holding `stem` and its weighted frequency in each (half-units)."""
        code = self._stems.get(stem)
        if code is None:
            return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.uint16)
        rows = np.zeros(0, dtype=np.int32)
        weights = np.zeros(0, dtype=np.uint16)
        if code < self._starts.size - 1:
            at = slice(int(self._starts[code]), int(self._starts[code + 1]))
            rows, weights = self._rows[at], self._weights[at]
            keep = ~self._stale[rows]
            if not keep.all():
                rows, weights = rows[keep], weights[keep]
        if self._new_stem:
            stems = np.frombuffer(self._new_stem, dtype=np.int32)
            hit = np.flatnonzero(stems == code)
            if hit.size:
                new_rows = np.frombuffer(self._new_row, dtype=np.int32)[hit]
                versions = np.frombuffer(self._new_version, dtype=np.int32)[hit]
                current = self._version[new_rows] == versions
                hit = hit[current]
                rows = np.concatenate([rows, new_rows[current]])
                weights = np.concatenate(
                    [weights, np.frombuffer(self._new_weight, dtype=np.uint16)[hit]]
                )
        return rows, weights

    def _found(self, stems: Sequence[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Each distinct stem's postings, looked up once for a search and its cut."""
        return {s: self.postings(s) for s in dict.fromkeys(stems)}

    def selective(
        self,
        stems: Sequence[str],
        floor: int,
        share: float,
        found: dict[str, tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> list[str]:
        """The stems worth ranking, as `sqlite_search.selective` keeps them: all while the
        store has fewer rows than the cut-off, else those in fewer rows than it (`found`:
        their postings, when the caller has them already)."""
        cap = max(floor, int(self.count * share))
        if self.count < cap:
            return list(stems)
        found = self._found(stems) if found is None else found
        return [s for s in stems if found[s][0].size < cap]

    def search(
        self,
        stems: Sequence[str],
        floor: int | None = None,
        share: float = 0.0,
        looked: dict[str, tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Every row matching any of `stems` (seqs) and its BM25 score (higher is better),
        FTS5's own number: a stem asked for twice counts twice, as two phrases do. With a
        `floor`, the stems too common to rank are cut first (`selective`). `looked` is given
        every stem's postings, cut or not, for a caller that asks more of them."""
        if not stems or self.count == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        found = self._found(stems)
        if looked is not None:
            looked.update(found)
        if floor is not None:
            stems = self.selective(stems, floor, share, found)
            if not stems:
                return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
            found = {s: found[s] for s in stems}
        matched = np.unique(np.concatenate([rows for rows, _ in found.values()]))
        score = np.zeros(matched.size, dtype=np.float64)
        if not matched.size:
            return matched.astype(np.int64), score
        n_rows = self.count
        avgdl = self.tokens / n_rows
        size = self.lengths[matched].astype(np.float64)
        # FTS5: k1 * (1 - b + b * D / avgdl), in that order.
        norm = K1 * ((1 - B) + B * size / avgdl)
        for stem in stems:
            rows, weights = found[stem]
            hits = rows.size
            idf = math.log((n_rows - hits + 0.5) / (hits + 0.5))
            if idf <= 0.0:
                idf = 1e-6
            if not hits:
                continue
            at = np.searchsorted(matched, rows)
            freq = weights.astype(np.float64) / 2.0
            score[at] += idf * ((freq * (K1 + 1.0)) / (freq + norm[at]))
        return matched.astype(np.int64), score
