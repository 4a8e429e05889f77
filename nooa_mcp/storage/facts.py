"""What ranking scores a memory on, held as columns beside the vector matrix (DESIGN.md §5.12).

A recall used to read ~90 candidate rows (their text, labels and use history decoded into
Python objects) to score them and then show five. The index (`VectorIndex`) already holds a
row per memory for its vector; `HeldFacts` holds, at the same row numbers, the few numbers
scoring needs besides the vector — importance, when it was learned, until when it is valid,
its cue words (as a code into the distinct label sets, which memories share), and its use
history — so a recall scores its candidates from here and reads rows only for what it
returns.

They are kept current as the vectors are: a row rewritten (its revision moved) comes with its
facts from `Store.vector_changes`; a use moves no revision, so uses are applied apart
(`VectorIndex.note_uses`): those this process logs, as it commits them, and those of other
processes from `Store.use_changes`. Uses only add, so of two states of one memory's
history the one with more uses (then the newer newest use) wins, whichever arrives last.

Memory: 49 bytes a row (five float64, two int32, a flag). Most memories have one use time
(their creation), held in `newest_use`; the few with more keep theirs in a dict by id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .base import RankFacts, UseState

__all__ = ["FACT_ARRAYS", "HeldFacts", "HeldRow"]

#: The per-row arrays, grown and compacted with the index's own (`VectorIndex._grow`).
FACT_ARRAYS = (
    "known",
    "importance",
    "created",
    "valid_to",
    "valid_from",
    "uses",
    "first_use",
    "newest_use",
    "cue_code",
)


@dataclass(slots=True)
class HeldRow:
    """A candidate as ranking reads it from the held facts: the attributes of a `ScoringRow`
    that ranking's later steps use, without its text (read for the rows a reply shows).
    Its cue words and use history stay in the columns, at `at` (`HeldFacts.use_columns`):
    scoring reads them for every candidate at once."""

    id: str
    type: str
    archived: bool
    faded: bool
    importance: float
    created_at: float
    valid_to: float | None
    #: Its row in the index that holds it (the row of `HeldFacts`' columns).
    at: int
    bm25: float | None = None
    valid_from: float | None = None


class HeldFacts:
    """Ranking's columns, one entry per row of the index that owns them."""

    def __init__(self) -> None:
        self.known = np.zeros(0, dtype=bool)
        self.importance = np.zeros(0, dtype=np.float64)
        self.created = np.zeros(0, dtype=np.float64)
        self.valid_to = np.zeros(0, dtype=np.float64)
        self.valid_from = np.zeros(0, dtype=np.float64)
        self.uses = np.zeros(0, dtype=np.int32)
        self.first_use = np.zeros(0, dtype=np.float64)
        self.newest_use = np.zeros(0, dtype=np.float64)
        self.cue_code = np.zeros(0, dtype=np.int32)
        self._cue_sets: list[frozenset[str]] = [frozenset()]
        self._cue_codes: dict[frozenset[str], int] = {frozenset(): 0}
        #: The use times of memories with more than one, by id (`newest_use` holds a lone one).
        self.times: dict[str, list[float]] = {}

    def put(self, row: int, memory_id: str, facts: RankFacts | None) -> None:
        """Set a row's facts as the store has them now (None: not known; scored from its
        row, read from the store).

        Its use history only if it is as late as the one held (`UseState.key`): a row read
        before a use of this process committed can be applied after that use was noted
        (`put_uses`), and its older history put in place of the newer one was never read
        again (a use of this process moves no revision, and its own commit no change token):
        the memory ranked without that use until the engine closed."""
        if facts is None:
            self.known[row] = False
            self.times.pop(memory_id, None)
            return
        uses = facts.uses
        if self.known[row]:
            held = self.use_state(row, memory_id)
            if held.key > uses.key:
                uses = held
        self.known[row] = True
        self.importance[row] = facts.importance
        self.created[row] = facts.created_at
        self.valid_to[row] = np.nan if facts.valid_to is None else facts.valid_to
        self.valid_from[row] = np.nan if facts.valid_from is None else facts.valid_from
        code = self._cue_codes.get(facts.cues)
        if code is None:
            code = self._cue_codes[facts.cues] = len(self._cue_sets)
            self._cue_sets.append(facts.cues)
        self.cue_code[row] = code
        self._set_uses(row, memory_id, uses)

    def put_uses(self, row: int, memory_id: str, uses: UseState) -> None:
        """A row's use history, unless the one held is already as late (`UseState.key`)."""
        if not self.known[row]:
            return
        if uses.key > self.use_state(row, memory_id).key:
            self._set_uses(row, memory_id, uses)

    def _set_uses(self, row: int, memory_id: str, uses: UseState) -> None:
        # In the store's order (newest first, as `apply_access` keeps them): the base-level
        # sums them in this order, so a score from here equals one from the row to the bit.
        times = list(uses.actr_times)
        self.uses[row] = uses.actr_count
        self.first_use[row] = np.nan if uses.first_access_at is None else uses.first_access_at
        self.newest_use[row] = times[0] if len(times) == 1 else np.nan
        if len(times) > 1:
            self.times[memory_id] = times
        else:
            self.times.pop(memory_id, None)

    def use_state(self, row: int, memory_id: str) -> UseState:
        """A row's use history as held."""
        first = float(self.first_use[row])
        times = self.times.get(memory_id)
        if times is None:
            newest = float(self.newest_use[row])
            times = [] if np.isnan(newest) else [newest]
        return UseState(int(self.uses[row]), None if np.isnan(first) else first, list(times))

    def rows(
        self,
        rows: np.ndarray,
        ids: list[str],
        types: list[str],
        archived: list[bool],
        faded: list[bool],
    ) -> list[HeldRow]:
        """The candidates at `rows` (each `known`), with their ids, type names and flags:
        every column read for all of them at once (a numpy scalar per field per row cost more
        than scoring them)."""
        columns = zip(
            rows.tolist(),
            self.importance[rows].tolist(),
            self.created[rows].tolist(),
            self.valid_to[rows].tolist(),
            self.valid_from[rows].tolist(),
            strict=True,
        )
        return [
            # id, type, archived, faded, importance, created_at, valid_to (NaN: open), at;
            # valid_from (NaN: always)
            HeldRow(
                memory_id,
                type_,
                gone,
                gone and fade,
                imp,
                created,
                None if valid_to != valid_to else valid_to,
                at,
                valid_from=None if valid_from != valid_from else valid_from,
            )
            for memory_id, type_, gone, fade, (at, imp, created, valid_to, valid_from) in zip(
                ids, types, archived, faded, columns, strict=True
            )
        ]

    def use_columns(
        self, rows: np.ndarray, ids: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, list[float]]]:
        """What the base-level of the memories at `rows` (ids `ids`) reads, as columns:
        each one's use count, first use time and lone use time (NaN: none, or more than
        one), and the use times of those with more than one, by position (newest first)."""
        times_of = self.times
        more = {}
        if times_of:
            for position, memory_id in enumerate(ids):
                times = times_of.get(memory_id)
                if times is not None:
                    more[position] = times
        return self.uses[rows], self.first_use[rows], self.newest_use[rows], more

    def cue_sets(self, rows: np.ndarray) -> list[frozenset[str]]:
        """The cue words of the memories at `rows` (shared sets: equal labels, one set)."""
        sets = self._cue_sets
        return [sets[code] for code in self.cue_code[rows].tolist()]

    def keep_ids(self, held: set[str]) -> None:
        """Forget the use times of memories no longer held (their roles were let go)."""
        self.times = {i: t for i, t in self.times.items() if i in held}
