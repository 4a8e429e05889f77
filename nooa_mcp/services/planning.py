"""What a reflection pass plans over: a role's rows, their vectors, and the pairs worth a look.

A pass reads the role's live rows once, as columns and page by page (other calls run between
pages), takes their vectors from the process's vector index (no second copy: 150 MB at 100k),
and runs one similarity sweep whose pairs serve merge, link and reconcile alike. On SQLite the
process keeps the rows for the role's next pass, which reads only the rows rewritten since
(`Planner._read`).

**Incremental planning.** A completed pass leaves in the store's meta table, per role, what its
pair steps planned over: each row's seq and a fingerprint of everything pair planning reads of
the row (type, status, owner, created_at and the vector's bytes). A pair whose two ends kept
their fingerprints since was planned then: it was merged or linked, or it never will be on
its own account (the merge rule is fixed — the same words — and a node's link budget only
fills up). So the
next pass compares only the rows that changed or are new against all rows (k×n) and, with
nothing changed, computes nothing. Rows a plan could not settle — an item skipped because an
end vanished meanwhile, a row with more near-duplicates than one sweep keeps — are carried
over as unsettled and compared again. A full sweep (every pair once) runs when there is no
record, when the model or a planning threshold changed, when the record does not cover the
pair steps asked for, and when reconcile runs (its clusters need every row's neighbours).

**A large role's first sweep is approximate.** From `similarity.CLUSTERED_FROM` (20k) rows
on, a full sweep without reconcile compares each row only with the rows of its nearest k-means
clusters (`similarity.clustered_sweep`, seeded: the same store gives the same plan) instead of
all n²/2 pairs: at 100k that is minutes of cosines saved, for 0.2–3.4 % of the pairs in the
link band (none at the merge threshold in what we measured; BENCHMARKS.md, "Reflection at
scale"). The report says `sweep: clustered`. The record treats those rows as planned like any
other, so a pair the clusters missed waits until one of its ends changes (or a pass with
reconcile sweeps every pair): a link or merge not made, never a wrong one.
Fingerprints ignore what reflection itself rewrites (scores, counters, edges), so a pass's own
work does not make the next one look at the rows it touched.
"""

from __future__ import annotations

import base64
import functools
import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import anyio.to_thread
import numpy as np

from ..domain.generative import CLUSTER_SIMILARITY, RECONCILED_TYPES, cluster_reach
from ..domain.reflection import (
    LINK_HIGH,
    LINK_LOW,
    MERGE_SIMILARITY,
    SWEEP_SPILL,
    PackedRows,
    Rows,
    among,
)
from ..domain.similarity import (
    CLUSTERED_FROM,
    ROW_CAP,
    Sweep,
    VectorRows,
    clustered_sweep,
    sweep,
)
from ..storage.base import RowChanges
from .caller import Caller

__all__ = [
    "PAGE",
    "PAIR_STEPS",
    "Neighbourhood",
    "Planner",
    "Record",
    "edges_around",
    "fingerprints",
]

#: Rows read per query: the connection serves other calls between pages.
PAGE = 5000
#: Ids per edge query while planning (the edges of a large plan are read a chunk at a time).
EDGE_CHUNK = 2000
#: The steps whose plans come from pairs and whose coverage a record keeps.
PAIR_STEPS = ("merge", "link")
#: 2: merge takes only pairs that say the same thing in the same words, and link takes the
#: pairs above the merge threshold that merge kept.
RECORD_VERSION = 2
#: Types that never pair (scratch is never consolidated): not swept, not recorded.
UNPAIRED_TYPES = frozenset({"scratch"})


def record_key(role: str | None) -> str:
    return f"reflection_plan:{'*' if role is None else role}"


def basis(model: str) -> str:
    """What a record's plans depend on besides the rows: a change means a full sweep."""
    return (
        f"v{RECORD_VERSION}|{model}|merge {MERGE_SIMILARITY:g}|link {LINK_LOW:g}-{LINK_HIGH:g}"
        f"|cap {ROW_CAP}"
    )


def _pack(a: np.ndarray) -> str:
    return base64.b64encode(zlib.compress(a.tobytes(), 6)).decode("ascii")


def _unpack(text: str, dtype: type) -> np.ndarray:
    return np.frombuffer(zlib.decompress(base64.b64decode(text)), dtype=dtype).copy()


@dataclass(frozen=True)
class Record:
    """What a completed pass planned over: rows (seq) with their fingerprints, the pair steps
    that ran, and the rows it left unsettled."""

    basis: str
    steps: frozenset[str]
    seqs: np.ndarray
    prints: np.ndarray
    unsettled: frozenset[str] = frozenset()

    def encode(self) -> str:
        order = np.argsort(self.seqs, kind="stable")
        seqs = self.seqs[order].astype(np.int64)
        return json.dumps(
            {
                "basis": self.basis,
                "steps": sorted(self.steps),
                # Deltas of sorted seqs compress to almost nothing.
                "seqs": _pack(np.diff(seqs, prepend=0)),
                "prints": _pack(self.prints[order].astype(np.uint32)),
                "unsettled": sorted(self.unsettled),
            }
        )

    @classmethod
    def decode(cls, text: str | None) -> Record | None:
        """The record in `text`, or None when there is none or it cannot be read (a full
        sweep then rebuilds it)."""
        if not text:
            return None
        try:
            raw = json.loads(text)
            seqs = np.cumsum(_unpack(raw["seqs"], np.int64))
            prints = _unpack(raw["prints"], np.uint32)
            if seqs.shape != prints.shape:
                return None
            return cls(
                str(raw["basis"]),
                frozenset(raw["steps"]),
                seqs,
                prints,
                frozenset(raw.get("unsettled", ())),
            )
        except (ValueError, KeyError, TypeError, zlib.error):
            return None

    def changed(self, seqs: np.ndarray, prints: np.ndarray) -> np.ndarray:
        """Which of these rows are new or differ from what the record planned over."""
        if self.seqs.size == 0:
            return np.ones(seqs.shape[0], dtype=bool)
        at = np.clip(np.searchsorted(self.seqs, seqs), 0, self.seqs.size - 1)
        return (self.seqs[at] != seqs) | (self.prints[at] != prints)


def _name_hashes(names: Sequence[str | None]) -> np.ndarray:
    return np.array(
        [zlib.crc32(b"\0none" if n is None else n.encode()) for n in names] + [0],
        dtype=np.uint64,
    )


def fingerprints(rows: Rows, positions: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """A 32-bit fingerprint per position of what pair planning reads of the row: type,
    status, owner, created_at and the bytes of its vector (`hashes`: the vector index's
    `row_hashes` of the position's row).

    Integer arithmetic only (wrapping sums and products), so the same row gives the same
    print in any process on any machine.
    """
    if positions.size == 0:
        return np.zeros(0, dtype=np.uint32)
    out = np.array(hashes, dtype=np.uint64)
    with np.errstate(over="ignore"):
        h = out
        h ^= _name_hashes(rows.types)[rows.type_code[positions]] * np.uint64(0x9E3779B97F4A7C15)
        h ^= _name_hashes(rows.owners)[rows.owner_code[positions]] * np.uint64(0xC2B2AE3D27D4EB4F)
        h ^= _name_hashes(rows.statuses)[rows.status_code[positions]] * np.uint64(
            0x165667B19E3779F9
        )
        h ^= rows.created_at[positions].view(np.uint64) * np.uint64(0x27D4EB2F165667C5)
        h ^= h >> np.uint64(29)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(32)
    return (h & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def _joined(pages: list[Rows]) -> Rows:
    """Pages read in (owner, seq) order as one set of columns in seq order."""
    return (Rows.concat(pages) if pages else Rows.from_records([])).in_seq_order()


def _patched(rows: Rows, gone: set[str], revised: dict[str, dict[str, float]]) -> Rows:
    """`rows` without the rows archived since, with the columns rewritten since (a copy:
    the rows read may be kept for the next pass)."""
    if gone:
        rows = rows.take(np.flatnonzero(~among(rows.ids, gone)))
    elif revised:
        rows = rows.take(np.arange(len(rows)))
    if revised:
        where = {ident: p for p, ident in enumerate(rows.ids) if ident in revised}
        for ident, p in where.items():
            for column, value in revised[ident].items():
                getattr(rows, column)[p] = value
    return rows


def _caught_up(kept: PackedRows, pages: list[RowChanges], role: str) -> Rows:
    """The rows kept from the last pass with the rows rewritten since: each rewritten row's
    latest version replaces its old one, or removes it when archived or now another role's."""
    rows = kept.rows()
    changed = Rows.concat([page.rows for page in pages])
    if not len(changed):
        return rows
    live = np.concatenate([~page.archived for page in pages])
    live &= np.array([r == role for page in pages for r in page.roles], dtype=bool)
    # A row rewritten again while the changes were read in pages comes twice: the later wins.
    latest = len(changed) - 1 - np.unique(changed.seq[::-1], return_index=True)[1]
    fresh = changed.take(np.sort(latest[live[latest]]))
    unchanged = rows.take(np.flatnonzero(~np.isin(rows.seq, changed.seq)))
    return _joined([unchanged, fresh])


@dataclass
class EdgeFacts:
    """What pair planning needs of the edges around some rows (positions into `Rows`)."""

    #: Per position asked about: how many distinct memories it shares a `related` edge with
    #: (either direction, archived ones too: pruning frees no link budget).
    related: np.ndarray
    #: Pairs of positions joined by an edge of a wanted type, as lo·n + hi, sorted.
    joined: np.ndarray

    def joins(self, a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
        """Whether each pair (a[k], b[k]) is joined."""
        keys = np.minimum(a, b) * n + np.maximum(a, b)
        return np.isin(keys, self.joined)


async def edges_around(
    caller: Caller, rows: Rows, positions: np.ndarray, types: frozenset[str] | None = None
) -> EdgeFacts:
    """The edges around the rows at `positions`: related-neighbour counts, and which pairs
    among them an edge (of one of `types`; None: any) joins already.

    Read a chunk of rows at a time and kept as integers, so a plan over a whole role never
    holds its edges as objects.
    """
    n = len(rows)
    related = np.zeros(n, dtype=np.int64)
    ids = [rows.ids[p] for p in positions.tolist()]
    pos_of = dict(zip(ids, positions.tolist(), strict=True))
    joined: list[np.ndarray] = []
    for start in range(0, len(ids), EDGE_CHUNK):
        chunk = ids[start : start + EDGE_CHUNK]
        neighbours: dict[int, set[str]] = {}
        keys = []
        for e in await caller.store.edges_touching(chunk):
            src, dst = pos_of.get(e.src), pos_of.get(e.dst)
            if e.type == "related":
                if src is not None:
                    neighbours.setdefault(src, set()).add(e.dst)
                if dst is not None:
                    neighbours.setdefault(dst, set()).add(e.src)
            if src is not None and dst is not None and (types is None or e.type in types):
                keys.append(min(src, dst) * n + max(src, dst))
        for p, others in neighbours.items():
            related[p] = len(others)
        joined.append(np.array(keys, dtype=np.int64))
    return EdgeFacts(
        related, np.unique(np.concatenate(joined)) if joined else np.zeros(0, np.int64)
    )


@dataclass(frozen=True)
class Neighbourhood:
    """Reconcile's view of the sweep, in the sweep's positions: `where` maps each to its
    position in the current rows; `count`, `top` and `top_cos` as `similarity.Neighbours`."""

    where: np.ndarray
    count: np.ndarray
    top: np.ndarray
    top_cos: np.ndarray


class Planner:
    """The rows, vectors and similar pairs of one pass over one role (None: every role)."""

    def __init__(
        self, caller: Caller, role: str | None, pair_steps: Sequence[str], reconcile: bool
    ) -> None:
        self.caller = caller
        self.role = role
        self.pair_steps = [s for s in PAIR_STEPS if s in pair_steps]
        self.reconcile = reconcile
        self.stale = True
        self._rows: Rows | None = None
        self._gone: set[str] = set()
        self._revised: dict[str, dict[str, float]] = {}
        self._by_seq: np.ndarray | None = None
        self.kind = ""
        self.changed = 0
        self.compared = 0
        self.unsettled: set[str] = set()
        self._model = f"{caller.engine.embedder.name}:{caller.engine.embedder.dim}"
        # Pairs by seq (stable while rows are re-read), and what the sweeps covered.
        self._a = np.zeros(0, np.int64)
        self._b = np.zeros(0, np.int64)
        self._cos = np.zeros(0, np.float32)
        self._covered = np.zeros(0, np.int64)
        self._prints = np.zeros(0, np.uint32)
        self._neighbours: tuple[np.ndarray, np.ndarray, np.ndarray | None, Sweep] | None = None

    # ------------------------------------------------------------------ rows and vectors

    def archived(self, ids: Sequence[str]) -> None:
        """This pass archived these rows: later steps plan without them."""
        self._gone.update(ids)

    def revised(self, ident: str, **columns: float) -> None:
        """This pass rewrote these columns of a row (a merge's anchor, a rescore)."""
        self._revised.setdefault(ident, {}).update(columns)

    async def rows(self) -> Rows:
        """The role's live rows, with what this pass changed since it read them; read again
        only after a step inserted rows (reconcile, abstract): 100k rows take seconds."""
        if not self.stale and self._rows is not None and (self._gone or self._revised):
            rows = await anyio.to_thread.run_sync(_patched, self._rows, self._gone, self._revised)
            self._rows, self._gone, self._revised = rows, set(), {}
        if self.stale or self._rows is None:
            self._rows = await self._read()
            self.stale, self._gone, self._revised = False, set(), {}
        return self._rows

    async def _read(self) -> Rows:
        """The role's live rows: those the last pass read in this process, brought up to
        date with the rows rewritten since (`Store.reflection_changes`), or every row read
        again where the store cannot say which were.

        A whole read of a large role costs most of a pass that runs every 200 writes, and
        most of its rows have not changed. Access times are not kept current (an
        access log does not move the revision): only pruning reads them, and an older
        access time only makes a row a suspect that `_prune` then judges on the row itself.
        """
        store = self.caller.store
        state = self.caller.engine.role_state(self.role) if self.role is not None else None
        if state is not None and state.rows is not None and self.role is not None:
            since, kept = state.rows
            pages: list[RowChanges] = []
            while (page := await store.reflection_changes(since, PAGE)) is not None:
                pages.append(page)
                since = page.upto
                if len(page.rows) < PAGE:
                    rows = await anyio.to_thread.run_sync(_caught_up, kept, pages, self.role)
                    state.rows = (since, await anyio.to_thread.run_sync(rows.packed))
                    return rows
        mark = await store.reflection_changes(None, 0) if state is not None else None
        parts: list[Rows] = []
        after: tuple[str, int] | None = None
        while True:
            part = await store.reflection_rows(self.role, after, PAGE)
            if len(part):
                parts.append(part)
                after = (part.owner_of(len(part) - 1), int(part.seq[-1]))
            if len(part) < PAGE:
                break
        rows = await anyio.to_thread.run_sync(_joined, parts)
        if state is not None and mark is not None:
            state.rows = (mark.upto, await anyio.to_thread.run_sync(rows.packed))
        return rows

    async def _vectors(self, rows: Rows) -> tuple[VectorRows, np.ndarray]:
        """The index matrix and each row's row in it (−1: none yet), after a sync, so every
        row read so far is there."""
        index = self.caller.index
        index.mark_dirty()
        # The pass's role (every role for a pass over all of them), held by `reflect`.
        await self.caller.engine.sync_vectors(None if self.role is None else frozenset({self.role}))
        seqs = index.seqs[: index.size]
        if self._by_seq is None or self._by_seq.size != seqs.size:
            self._by_seq = np.argsort(seqs, kind="stable")
        order = self._by_seq
        at = np.searchsorted(seqs[order], rows.seq)
        at = np.clip(at, 0, max(seqs.size - 1, 0))
        found = (seqs[order][at] == rows.seq) if seqs.size else np.zeros(len(rows), bool)
        rows_at = np.where(found, order[at] if seqs.size else 0, -1)
        return index.matrix, rows_at

    def _sweepable(self, rows: Rows, at: np.ndarray) -> np.ndarray:
        return np.flatnonzero((at >= 0) & rows.mask_types(UNPAIRED_TYPES, keep=False))

    # ------------------------------------------------------------------ the sweep

    async def start(self) -> None:
        """Read the rows, decide full or changed-only, and run the pass's one sweep."""
        if not self.pair_steps and not self.reconcile:
            return
        store = self.caller.store
        text = await store.get_meta(record_key(self.role))
        record = await anyio.to_thread.run_sync(Record.decode, text)
        if record is not None and record.basis != basis(self._model):
            record = None
        rows = await self.rows()
        matrix, at = await self._vectors(rows)
        positions = self._sweepable(rows, at)
        hashes = await self.caller.index.row_hashes(at[positions])
        prints = await anyio.to_thread.run_sync(fingerprints, rows, positions, hashes)
        full = record is None or self.reconcile or not set(self.pair_steps) <= record.steps
        focus = None
        if not full:
            assert record is not None
            changed = record.changed(rows.seq[positions], prints)
            if record.unsettled:
                changed |= among((rows.ids[p] for p in positions.tolist()), record.unsettled)
            focus = np.flatnonzero(changed)
        self.kind = "full" if full else "changed"
        self.changed = positions.size if focus is None else int(focus.size)
        found = await self._sweep(rows, positions, matrix, at, focus)
        if found.clustered:
            self.kind = "clustered"
        self._covered, self._prints = rows.seq[positions], prints
        if found.neighbours is not None:
            groups = rows.role_codes()[positions] if self.role is None else None
            self._neighbours = (rows.seq[positions], at[positions], groups, found)

    async def _sweep(
        self,
        rows: Rows,
        positions: np.ndarray,
        matrix: VectorRows,
        at: np.ndarray,
        focus: np.ndarray | None,
        neighbours: bool = True,
    ) -> Sweep:
        low = np.inf
        if "merge" in self.pair_steps:
            low = MERGE_SIMILARITY
        if "link" in self.pair_steps:
            low = LINK_LOW
        wanted = None
        if self.reconcile and neighbours and focus is None:
            eligible = rows.mask_types(RECONCILED_TYPES)[positions]
            wanted = (CLUSTER_SIMILARITY, cluster_reach(), eligible)
        groups = rows.role_codes()[positions] if self.role is None else None
        spill = SWEEP_SPILL if "merge" in self.pair_steps else np.inf
        if focus is None and wanted is None and positions.size >= CLUSTERED_FROM:
            # A first sweep of a large role: through clusters, not every pair (see the
            # module docstring); reconcile's neighbour counts still need the exact one.
            run = functools.partial(
                clustered_sweep, matrix, at[positions], low, groups=groups, spill=spill
            )
        else:
            run = functools.partial(
                sweep,
                matrix,
                at[positions],
                low,
                focus=focus,
                groups=groups,
                neighbours=wanted,
                spill=spill,
            )
        found = await anyio.to_thread.run_sync(run)
        self.compared += found.compared
        seqs = rows.seq[positions]
        self._a = np.concatenate([self._a, seqs[found.pairs.p]])
        self._b = np.concatenate([self._b, seqs[found.pairs.q]])
        self._cos = np.concatenate([self._cos, found.pairs.cos])
        self.unsettled.update(rows.ids[p] for p in positions[found.spilled].tolist())
        return found

    async def extend(self, rows: Rows) -> None:
        """Sweep rows that appeared since the pass's sweep (a reconcile's product, another
        writer's memory) against all rows, so every pair step covers every live row."""
        if not self.pair_steps:
            return
        matrix, at = await self._vectors(rows)
        positions = self._sweepable(rows, at)
        new = ~np.isin(rows.seq[positions], self._covered)
        if not new.any():
            return
        focus = np.flatnonzero(new)
        self.changed += int(focus.size)
        await self._sweep(rows, positions, matrix, at, focus, neighbours=False)
        hashes = await self.caller.index.row_hashes(at[positions[focus]])
        prints = fingerprints(rows, positions[focus], hashes)
        self._covered = np.concatenate([self._covered, rows.seq[positions[focus]]])
        self._prints = np.concatenate([self._prints, prints])

    def pairs(
        self, rows: Rows, low: float, high: float = np.inf
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Found pairs with low ≤ cos < high whose ends are both among `rows`: positions
        (a, b) into `rows` and the cosines."""
        keep = (self._cos >= low) & (self._cos < high)
        a, b, cos = self._a[keep], self._b[keep], self._cos[keep]
        if not len(rows) or not a.size:
            empty = np.zeros(0, np.int64)
            return empty, empty, np.zeros(0, np.float32)
        ia = np.clip(np.searchsorted(rows.seq, a), 0, len(rows) - 1)
        ib = np.clip(np.searchsorted(rows.seq, b), 0, len(rows) - 1)
        both = (rows.seq[ia] == a) & (rows.seq[ib] == b)
        return ia[both], ib[both], cos[both]

    async def neighbours(self, rows: Rows) -> Neighbourhood | None:
        """Reconcile's neighbour lists, as of now: rows gone since the sweep (merged away)
        are taken out of every count and list."""
        if self._neighbours is None:
            return None
        seqs, rows_at, groups, found = self._neighbours
        nb = found.neighbours
        assert nb is not None
        count = nb.count.copy()
        where = np.clip(np.searchsorted(rows.seq, seqs), 0, max(len(rows) - 1, 0))
        alive = (rows.seq[where] == seqs) if len(rows) else np.zeros(seqs.size, bool)
        gone = np.flatnonzero(~alive & (count > 0))
        if gone.size:
            # Uncount the rows gone since: all their pairs at ≥ 0.6 in one focused sweep.
            extra = await anyio.to_thread.run_sync(
                functools.partial(
                    sweep,
                    self.caller.index.matrix,
                    rows_at,
                    CLUSTER_SIMILARITY,
                    focus=gone,
                    groups=groups,
                    cap=seqs.size,
                )
            )
            self.compared += extra.compared
            counted = count > 0
            for p, q in zip(extra.pairs.p.tolist(), extra.pairs.q.tolist(), strict=True):
                if counted[p] and counted[q] and alive[p] != alive[q]:
                    count[p if alive[p] else q] -= 1
        count[~alive] = 0
        safe = np.where(nb.top >= 0, nb.top, 0)
        top = np.where((nb.top >= 0) & alive[safe], nb.top, -1)
        return Neighbourhood(where, count, top, nb.top_cos)

    # ------------------------------------------------------------------ the record

    async def commit(self, unsettled: set[str]) -> None:
        """Record what this completed pass planned over (encoded before the write lock is
        taken: at 100k rows that takes a while)."""
        if not self.pair_steps or self.kind == "":
            return
        record = Record(
            basis(self._model),
            frozenset(self.pair_steps),
            self._covered,
            self._prints,
            frozenset(self.unsettled | unsettled),
        )
        text = await anyio.to_thread.run_sync(record.encode)
        async with self.caller.store.transaction():
            await self.caller.store.set_meta(record_key(self.role), text)
