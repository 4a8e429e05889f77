"""Row number ↔ memory id for the vector index, in ~50 bytes per row instead of ~160.

The index kept a list of id strings and a dict from id to row: at 100k rows that was 15 MiB of
str objects, dict slots and int objects, a good part of the memory budget. Here the
ids are one UTF-8 buffer with end offsets, and lookups go through their hashes, sorted, beside
a small dict of the rows added since the last sort. Ids are any text (imports keep theirs), so
nothing assumes a width.

Lookups are for batches (`rows_of`: one sorted search for all of them) or one at a time
(`get`); both check the id itself, so two ids with the same hash are told apart.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

__all__ = ["IdTable"]

#: Rows kept in the dict before they are merged into the sorted hashes (a sort of 100k int64
#: is ~5 ms; merging at every write would make each write pay it).
MERGE_AT = 4096
#: Ids found lately, kept by `rows_of` (emptied when full): one recall asks for the same ~100
#: candidates ten times over (their facts, cosines, edges, versions), and the sorted search
#: hashes and compares every id each time. A lookup of more ids than this keeps none of them:
#: kept, the ~100k ids a 100k store's links look up as they load held their strings alive
#: until the first recall emptied the cache, and with them ~106 MiB of Python's object
#: arenas, freed but for those strings (a server idle after its start: 536 MiB, 430 after
#: one recall).
FOUND_AT_MOST = 4096


class IdTable:
    """An append-only sequence of ids with their row numbers."""

    def __init__(self) -> None:
        self._data = bytearray()
        self._ends = np.zeros(0, dtype=np.int64)
        self._count = 0
        self._hashes = np.zeros(0, dtype=np.int64)
        self._rows = np.zeros(0, dtype=np.int64)
        self._recent: dict[str, int] = {}
        self._found: dict[str, int] = {}

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, row: int) -> str:
        if not 0 <= row < self._count:
            raise IndexError(row)
        return self._encoded(row).decode()

    def names(self, rows: Sequence[int]) -> list[str]:
        """The ids of `rows` (each a row here), decoded together: ranking names ~100 rows a
        step, and a numpy scalar per row for its bounds cost more than the decoding."""
        if not len(rows):
            return []
        at = np.asarray(rows, dtype=np.int64)
        if int(at.min()) < 0 or int(at.max()) >= self._count:
            raise IndexError(rows)
        data = self._data
        return [data[a:b].decode() for a, b in zip(*self._bounds(at), strict=True)]

    def _bounds(self, rows: np.ndarray) -> tuple[list[int], list[int]]:
        """Where each of `rows`' ids starts and ends in the buffer, as Python ints in one go:
        numpy scalar indexing per id cost more than the ids' decoding and comparing."""
        return np.where(rows > 0, self._ends[rows - 1], 0).tolist(), self._ends[rows].tolist()

    def _encoded(self, row: int) -> bytearray:
        """The UTF-8 bytes of row `row`'s id."""
        start = int(self._ends[row - 1]) if row else 0
        return self._data[start : int(self._ends[row])]

    def __iter__(self) -> Iterator[str]:
        return (self[row] for row in range(self._count))

    def __contains__(self, memory_id: object) -> bool:
        return isinstance(memory_id, str) and self.get(memory_id) is not None

    def append(self, memory_id: str) -> int:
        """Add an id (not already here) as the next row; its row number."""
        row = self._count
        if row == len(self._ends):
            self._ends.resize(max(1024, 2 * row), refcheck=False)
        self._data += memory_id.encode()
        self._ends[row] = len(self._data)
        self._count += 1
        self._recent[memory_id] = row
        if len(self._recent) >= MERGE_AT:
            self._merge()
        return row

    def get(self, memory_id: str, default: int | None = None) -> int | None:
        row = self._recent.get(memory_id)
        if row is not None:
            return row
        found = self._sorted_find([memory_id])[0]
        return default if found < 0 else int(found)

    def rows_of(self, ids: Sequence[str]) -> np.ndarray:
        """The row of each id, -1 where it is not here."""
        found = self._found
        known = [found.get(i, -1) for i in ids]
        asked = [k for k, row in enumerate(known) if row < 0]
        if asked:
            # Ids not found are never kept: one may be appended later.
            rest = [ids[k] for k in asked]
            rows = self._sorted_find(rest)
            if self._recent:
                for j, memory_id in enumerate(rest):
                    row = self._recent.get(memory_id)
                    if row is not None:
                        rows[j] = row
            keep = len(rest) <= FOUND_AT_MOST
            if keep and len(found) + len(rest) > FOUND_AT_MOST:
                found.clear()
            for k, memory_id, row in zip(asked, rest, rows.tolist(), strict=True):
                known[k] = row
                if keep and row >= 0:
                    found[memory_id] = row
        return np.array(known, dtype=np.int64)

    def _sorted_find(self, ids: Sequence[str]) -> np.ndarray:
        out = np.full(len(ids), -1, dtype=np.int64)
        n = len(self._hashes)
        if not n or not len(ids):
            return out
        wanted = np.fromiter((hash(i) for i in ids), dtype=np.int64, count=len(ids))
        at = np.searchsorted(self._hashes, wanted)
        hit = np.flatnonzero((at < n) & (self._hashes[np.minimum(at, n - 1)] == wanted))
        if not hit.size:
            return out
        # Each hit's first candidate row and its bytes' bounds, as Python ints in one go:
        # numpy scalar indexing per id made recall's lookups of ~700 ids 0.8 ms at 100k.
        rows = self._rows[at[hit]]
        data = self._data
        found, where = [], []
        starts, ends = self._bounds(rows)
        for k, row, start, end in zip(hit.tolist(), rows.tolist(), starts, ends, strict=True):
            encoded = ids[k].encode()
            if data[start:end] != encoded:
                row = self._collided(encoded, int(wanted[k]), int(at[k]))
                if row < 0:
                    continue
            found.append(k)
            where.append(row)
        out[found] = where
        return out

    def _collided(self, encoded: bytes, wanted: int, p: int) -> int:
        """The row of the id whose first candidate (at `p`) was another id with its hash."""
        n = len(self._hashes)
        while p < n and self._hashes[p] == wanted:
            row = int(self._rows[p])
            if self._encoded(row) == encoded:
                return row
            p += 1
        return -1

    def _merge(self) -> None:
        recent = self._recent
        hashes = np.fromiter((hash(i) for i in recent), dtype=np.int64, count=len(recent))
        rows = np.fromiter(recent.values(), dtype=np.int64, count=len(recent))
        hashes = np.concatenate([self._hashes, hashes])
        rows = np.concatenate([self._rows, rows])
        order = np.argsort(hashes, kind="stable")
        self._hashes, self._rows = hashes[order], rows[order]
        self._recent = {}

    def settle(self) -> None:
        """Merge what was added since the last sort (after a bulk load, so the dict is empty)."""
        if self._recent:
            self._merge()
