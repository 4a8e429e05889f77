"""The edges of the roles a process holds, in memory for ranking's spreading and supersession
(DESIGN.md §5.6, §15).

Only an edge whose two ends are memories of roles the vector index holds is ever used
(`visible` asks the index about the other end, and ranking reads held edges only for scopes
whose roles are all held), so only those are held: a role's edges are read when the index
loads the role (`load`), dropped when it lets the role go (`drop`), and kept current by
`Store.ranking_changes` for the roles held (edges added or strengthened since a mark; no edge
is ever deleted). An index without a residency holds every role, and so every edge: read whole
on first use. Each edge is four numbers — its two ends
(rows of an `IdTable` of the ends seen), its weight and its relation — in arrays sorted by
source, with a permutation sorted by target: 21 bytes an edge (37 while the keys of both
orders are kept between inserts: `_keys`), where a Python `EdgeRow` took about 100. The weight
stays float64, as the store returns it, so scores from held edges equal scores from the
store's to the last bit.

What the store filters in SQL (a live end inside the reader's scope) is asked of the vector
index (`VectorIndex.visible`), which must hold every role the scope sees (`VectorIndex.ensure`)
and be synced at least as recently as these edges.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..domain.scope import Scope
from .base import EdgeRow, Store
from .ids import IdTable

if TYPE_CHECKING:
    from .vectors import VectorIndex

__all__ = ["HeldLinks"]

#: Edges are put in place while they are at most one in this many of the edges held; more are
#: merged and sorted whole.
INSERT_SHARE = 4
#: Up to this many new edges, the held edges' target-order positions are moved on by one
#: comparison per new edge; more take a search (`_insert`).
SHIFT_BY_COMPARING = 16
#: Edges a sync read and nobody has read since, held as rows before they are put in place:
#: each write brings a few, and each insert moves every array (~3 ms at 316k edges), so they
#: wait for the next read of the edges (a recall's spreading), or for this many.
PENDING_AT_MOST = 4096


class HeldLinks:
    """The store's edges as arrays, read once and then pulled as they change."""

    def __init__(self) -> None:
        self.ends = IdTable()
        self.src = np.zeros(0, dtype=np.int32)
        self.dst = np.zeros(0, dtype=np.int32)
        self.weight = np.zeros(0, dtype=np.float64)
        self.kind = np.zeros(0, dtype=np.uint8)
        #: Edge positions sorted by (dst, kind, src).
        self.by_dst = np.zeros(0, dtype=np.int32)
        self._targets_sorted: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        #: Each index row's end code (`_row_ends`), with the two id tables it was made from
        #: and how many ids each held then.
        self._ends_of_rows: tuple[IdTable, IdTable, int, int, np.ndarray] | None = None
        #: The edges' keys in the source order and, in `by_dst` order, their target keys
        #: (`_key`), kept by `_insert` while edges come a few at a time (None: not made
        #: since the arrays were last rebuilt). Making them took ~7 ms of the ~11 an insert
        #: of a write's few edges cost at 316k edges, on every write.
        self._source_keys: np.ndarray | None = None
        self._target_keys: np.ndarray | None = None
        #: Edges read by `sync` not put in place yet (`_settle`).
        self._pending: list[EdgeRow] = []
        self._kinds: dict[str, int] = {}
        self._kind_names: list[str] = []
        #: Where `sync` reads changes from (None: nothing read yet).
        self.mark: Any = None
        #: The store's `edge_writes` at the last sync, and whether a sync was skipped since.
        self._writes = 0
        self._skipped = False

    def __len__(self) -> int:
        self._settle()
        return int(self.src.shape[0])

    @property
    def nbytes(self) -> int:
        """The bytes of the edge arrays (the ends' id table besides)."""
        self._settle()
        arrays = (self.src, self.dst, self.weight, self.kind, self.by_dst)
        keys = (k for k in (self._source_keys, self._target_keys) if k is not None)
        return sum(a.nbytes for a in arrays) + sum(k.nbytes for k in keys)

    def due(self, store: Store) -> bool:
        """Whether a sync must read even if the store's change token stands still: nothing
        read yet, a sync skipped inside a transaction, or edges this process wrote since (its
        own commits may not move the token)."""
        return self.mark is None or self._skipped or store.edge_writes != self._writes

    async def sync(self, store: Store, roles: Sequence[str] | None = None) -> None:
        """Read the edges between memories of `roles` (None: every edge) the first time, then
        those added or strengthened since. `roles` are the roles held and being loaded: an
        edge between them may come before its ends' rows, and is used once they come.

        Never inside a transaction: its own edges, not committed yet, would be read and kept
        after a rollback (and, on SQLite, their numbers given again to later edges past the
        mark). The sync after it reads them (`due`)."""
        if store.in_transaction:
            self._skipped = True
            return
        self._skipped = False
        self._writes = store.edge_writes
        if self.mark is None:
            # The mark first: an edge written while the whole read runs comes again next time,
            # and applying an edge twice leaves it as it is.
            mark = await store.ranking_mark()
            if roles is None:
                self.apply(await store.edge_pairs(None, live_only=False))
            elif roles:
                self.apply(await store.role_edges(roles, roles))
            self.mark = mark
            return
        changes, self.mark = await store.ranking_changes(self.mark, roles)
        # Put in place when next read (`_settle`): the writes between two recalls cost one
        # insert, not one each.
        self._pending += changes
        if len(self._pending) > PENDING_AT_MOST:
            self._settle()

    def _settle(self) -> None:
        """Put in place the edges syncs read since the arrays were last read."""
        if self._pending:
            self.apply([])

    async def load(self, store: Store, roles: Sequence[str] | None, among: Sequence[str]) -> None:
        """Add the edges a role being loaded brings: those between `roles` (None: every role)
        and the roles `among` (held and being loaded, `roles` with them). A sync whose read
        began before the load may have passed over them (their roles were not asked), so the
        edges changed since the read's own mark are read again after it (its catch-up)."""
        mark = await store.ranking_mark()  # before the read: an edge it misses comes next
        if roles is None:
            self.apply(await store.edge_pairs(None, live_only=False))
        else:
            self.apply(await store.role_edges(roles, among))
        changes, _ = await store.ranking_changes(mark, None if roles is None else among)
        self.apply(changes)

    def drop(self, ids: Sequence[str]) -> int:
        """Let go of every edge with an end among `ids` (the rows of roles let go), and of the
        ends no edge left uses; how many edges went. An edge whose end is in no role held
        and not among `ids` (its row not pulled yet) stays."""
        self._settle()
        codes = self.ends.rows_of(list(ids))
        going = np.zeros(len(self.ends), dtype=bool)
        going[codes[codes >= 0]] = True
        keep = ~(going[self.src] | going[self.dst])
        gone = len(self) - int(keep.sum())
        if gone == 0:
            return 0
        src, dst = self.src[keep], self.dst[keep]
        # Renumber the ends still used in their order: the arrays stay sorted as they were.
        used = np.zeros(len(self.ends), dtype=bool)
        used[src] = True
        used[dst] = True
        new_code = np.cumsum(used, dtype=np.int64) - 1
        ends = IdTable()
        for code in np.flatnonzero(used).tolist():
            ends.append(self.ends[code])
        ends.settle()
        self.ends = ends
        self.src = new_code[src].astype(np.int32)
        self.dst = new_code[dst].astype(np.int32)
        self.kind, self.weight = self.kind[keep], self.weight[keep]
        self._source_keys = self._target_keys = None  # the ends are renumbered
        # Kept positions in their old order: the target order is the old one, renumbered.
        position = np.cumsum(keep, dtype=np.int64) - 1
        self.by_dst = position[self.by_dst[keep[self.by_dst]]].astype(np.int32)
        return gone

    def apply(self, edges: Sequence[EdgeRow]) -> None:
        """Add these edges, or set their weight where held (the last of a repeated edge wins).

        Edges fewer than a quarter of those held (what a sync or a role's load brings) go in
        place, in one pass over the arrays with no sort of them all (a sort of 300k edges took
        150–190 ms); a read of more is merged and sorted whole. The edges a sync left pending
        go first (a later weight of the same edge wins)."""
        if self._pending:
            edges, self._pending = [*self._pending, *edges], []
        if not edges:
            return
        src = self._codes([e.src for e in edges])
        dst = self._codes([e.dst for e in edges])
        kind = np.array([self._kind(e.type) for e in edges], dtype=np.uint8)
        weight = np.array([e.weight for e in edges], dtype=np.float64)
        if len(edges) * INSERT_SHARE <= len(self):
            self._insert(src, dst, kind, weight)
        else:
            self._merge(src, dst, kind, weight)
        self.ends.settle()

    def _merge(self, src: np.ndarray, dst: np.ndarray, kind: np.ndarray, w: np.ndarray) -> None:
        src = np.concatenate([self.src, src])
        dst = np.concatenate([self.dst, dst])
        kind = np.concatenate([self.kind, kind])
        weight = np.concatenate([self.weight, w])
        n = src.shape[0]
        order = np.lexsort((np.arange(n), kind, dst, src))
        src, dst, kind, weight = src[order], dst[order], kind[order], weight[order]
        last = np.ones(n, dtype=bool)
        last[:-1] = (src[1:] != src[:-1]) | (dst[1:] != dst[:-1]) | (kind[1:] != kind[:-1])
        self.src, self.dst, self.kind, self.weight = src[last], dst[last], kind[last], weight[last]
        self.by_dst = np.lexsort((self.src, self.kind, self.dst)).astype(np.int32)
        self._source_keys = self._target_keys = None

    def _keys(self) -> tuple[np.ndarray, np.ndarray]:
        """The source-order keys and the target keys in `by_dst` order (both ascending),
        made once after the arrays were rebuilt, then kept by `_insert`."""
        if self._source_keys is None or self._target_keys is None:
            self._source_keys = _key(self.src, self.dst, self.kind)
            by_dst = self.by_dst
            self._target_keys = _key(
                self.dst[by_dst], self.src[by_dst], self.kind[by_dst], target=True
            )
        return self._source_keys, self._target_keys

    def _insert(self, src: np.ndarray, dst: np.ndarray, kind: np.ndarray, w: np.ndarray) -> None:
        """Rewrite the weights of the edges held and insert the others where the two orders
        put them, all at once: a sort of the few new edges, searches and one copy of each
        array, where inserting one edge at a time copied every array per edge."""
        new = _key(src, dst, kind)
        order = np.argsort(new, kind="stable")
        new, src, dst, kind, w = new[order], src[order], dst[order], kind[order], w[order]
        last = np.ones(new.size, dtype=bool)  # the last of a repeated edge wins
        last[:-1] = new[1:] != new[:-1]
        new, src, dst, kind, w = new[last], src[last], dst[last], kind[last], w[last]
        key, into = self._keys()
        at = np.searchsorted(key, new)
        held = at < key.size
        held[held] = key[at[held]] == new[held]
        self.weight[at[held]] = w[held]
        fresh = ~held
        if not fresh.any():
            return
        at, new = at[fresh], new[fresh]
        src, dst, kind, w = src[fresh], dst[fresh], kind[fresh], w[fresh]
        # The i-th edge held moves on by the new edges put before it; the j-th new edge takes
        # place at[j] + j (`np.insert` with sorted places).
        by_dst = self.by_dst.copy()
        if at.size <= SHIFT_BY_COMPARING:
            # A write's few edges: one comparison of the positions per edge (0.6 ms at 316k
            # edges) beats a binary search of each position among them (2.9 ms).
            for place in at.tolist():
                by_dst += self.by_dst >= place
        else:
            by_dst += np.searchsorted(at, self.by_dst, side="right").astype(np.int32)
        self.src = np.insert(self.src, at, src)
        self.dst = np.insert(self.dst, at, dst)
        self.kind = np.insert(self.kind, at, kind)
        self.weight = np.insert(self.weight, at, w)
        self._source_keys = np.insert(key, at, new)
        placed = at + np.arange(at.size)
        # The held edges' target keys, in `by_dst` order, are what they were: only their
        # positions moved.
        targets = _key(dst, src, kind, target=True)
        order = np.argsort(targets, kind="stable")
        where = np.searchsorted(into, targets[order])
        self.by_dst = np.insert(by_dst, where, placed[order])
        self._target_keys = np.insert(into, where, targets[order])

    def out_edges(self, sources: Sequence[str], scope: Scope, index: VectorIndex) -> list[EdgeRow]:
        """`Store.out_edges`: the edges of `sources` whose targets are live inside `scope`."""
        self._settle()
        at = self._spans(self.src, self._known(sources), None)
        return self._visible(at, self.dst, scope, index)

    def out_edges_at(self, rows: np.ndarray, scope: Scope, index: VectorIndex) -> list[EdgeRow]:
        """`out_edges` of the memories at `rows` of `index` (distinct), found by row."""
        self._settle()
        at = self._spans(self.src, self._known_at(rows, index), None)
        return self._visible(at, self.dst, scope, index)

    def successors(
        self, targets: Sequence[str], relations: Sequence[str], scope: Scope, index: VectorIndex
    ) -> list[EdgeRow]:
        """`Store.successors`: edges with one of `relations` into `targets` from sources inside
        `scope` that are not forgotten (live or faded)."""
        self._settle()
        return self._successors(self._known(targets), relations, scope, index)

    def successors_at(
        self, rows: np.ndarray, relations: Sequence[str], scope: Scope, index: VectorIndex
    ) -> list[EdgeRow]:
        """`successors` of the memories at `rows` of `index` (distinct), found by row."""
        self._settle()
        return self._successors(self._known_at(rows, index), relations, scope, index)

    def _successors(
        self, codes: np.ndarray, relations: Sequence[str], scope: Scope, index: VectorIndex
    ) -> list[EdgeRow]:
        at = self._spans(self._by_target(), codes, self.by_dst)
        wanted = [self._kinds[r] for r in relations if r in self._kinds]
        at = at[np.isin(self.kind[at], wanted)]
        return self._visible(at, self.src, scope, index, faded=True)

    def sources_with(self, sources: Sequence[str], relations: Sequence[str]) -> set[str]:
        """Those of `sources` with an edge of one of `relations` to another memory, wherever
        it points (live, archived, out of any scope): a source's edges are held whole once its
        role is, so a source not named here has none."""
        self._settle()
        at = self._spans(self.src, self._known(sources), None)
        wanted = [self._kinds[r] for r in relations if r in self._kinds]
        at = at[np.isin(self.kind[at], wanted) & (self.src[at] != self.dst[at])]
        return set(self.ends.names(np.unique(self.src[at]).tolist()))

    def _by_target(self) -> np.ndarray:
        """The targets in `by_dst` order, kept while neither array is replaced (both are
        replaced, never changed in place): gathering them took ~1 ms a recall at 300k edges."""
        kept = self._targets_sorted
        if kept is None or kept[0] is not self.dst or kept[1] is not self.by_dst:
            kept = self._targets_sorted = (self.dst, self.by_dst, self.dst[self.by_dst])
        return kept[2]

    def _known(self, ids: Sequence[str]) -> np.ndarray:
        codes = self.ends.rows_of(list(dict.fromkeys(ids)))
        return np.sort(codes[codes >= 0])

    def _known_at(self, rows: np.ndarray, index: VectorIndex) -> np.ndarray:
        codes = self._row_ends(index)[rows]
        return np.sort(codes[codes >= 0])

    def _row_ends(self, index: VectorIndex) -> np.ndarray:
        """Each row of `index`'s end code here (-1: no edge held has it for an end). Made
        from the ends when either id table was replaced (a role let go renumbers both), then
        extended by the ids either table added since (both only grow in between): a recall
        asks for the edges of its ~100 candidates twice, and looking their ids up here cost
        ~0.15 ms of it."""
        ends, ids = self.ends, index.ids
        kept = self._ends_of_rows
        if kept is None or kept[0] is not ends or kept[1] is not ids:
            kept = (ends, ids, 0, len(ids), np.full(len(ids), -1, dtype=np.int64))
        _, _, n_ends, n_rows, codes = kept
        if len(ids) > n_rows:
            added = ends.rows_of(ids.names(list(range(n_rows, len(ids)))))
            codes = np.concatenate([codes, added])
        if len(ends) > n_ends:
            new = np.arange(n_ends, len(ends), dtype=np.int64)
            rows = ids.rows_of(ends.names(new.tolist()))
            codes[rows[rows >= 0]] = new[rows >= 0]
        self._ends_of_rows = (ends, ids, len(ends), len(ids), codes)
        return codes

    def _spans(self, keys: np.ndarray, codes: np.ndarray, order: np.ndarray | None) -> np.ndarray:
        """Positions of the edges whose end, as sorted in `keys` (by `order`), is one of
        `codes`."""
        # In the keys' own type: searching int32 keys for int64 codes copies every key first.
        codes = codes.astype(keys.dtype, copy=False)
        lo = np.searchsorted(keys, codes, "left")
        hi = np.searchsorted(keys, codes, "right")
        # Every position from each lo to its hi, in order, without a range per code.
        lengths = hi - lo
        starts = np.repeat(lo - (np.cumsum(lengths) - lengths), lengths)
        at = np.arange(int(lengths.sum()), dtype=np.int64) + starts
        return at if order is None else order[at]

    def _visible(
        self,
        at: np.ndarray,
        other: np.ndarray,
        scope: Scope,
        index: VectorIndex,
        *,
        faded: bool = False,
    ) -> list[EdgeRow]:
        """The edges at `at` whose `other` end is live (`faded`: or faded) inside `scope`, as
        rows."""
        if not at.size:
            return []
        # Each end's id decoded once (an end is on several of the edges, both sides asked).
        ends, inverse = np.unique(other[at], return_inverse=True)
        codes = ends.tolist()
        ids = self.ends.names(codes)
        kept = at[index.visible(index.ids.rows_of(ids), scope, faded=faded)[inverse]]
        src, dst = self.src[kept].tolist(), self.dst[kept].tolist()
        named = dict(zip(codes, ids, strict=True))
        rest = list(set(src + dst) - named.keys())
        named.update(zip(rest, self.ends.names(rest), strict=True))
        names = self._kind_names
        rows = [
            EdgeRow(named[s], named[d], names[k], w)
            for s, d, k, w in zip(
                src, dst, self.kind[kept].tolist(), self.weight[kept].tolist(), strict=True
            )
        ]
        # In the order SQLite's indexes give (by source: (src, dst, type); by target: (dst,
        # type, src)): spreading keeps the first of edges of equal strength, supersession the
        # first successor, as they did reading the store.
        if other is self.dst:
            rows.sort(key=lambda e: (e.src, e.dst, e.type))
        else:
            rows.sort(key=lambda e: (e.dst, e.type, e.src))
        return rows

    def _codes(self, ids: list[str]) -> np.ndarray:
        """Each id's code, appending the ids not seen yet (one batch lookup: a lookup one id
        at a time made a cold read of 300k edges take 50 s)."""
        distinct = list(dict.fromkeys(ids))
        codes = self.ends.rows_of(distinct)
        for k in np.flatnonzero(codes < 0).tolist():
            codes[k] = self.ends.append(distinct[k])
        if len(distinct) == len(ids):
            return codes.astype(np.int32)
        code_of = dict(zip(distinct, codes.tolist(), strict=True))
        return np.fromiter((code_of[i] for i in ids), dtype=np.int32, count=len(ids))

    def _kind(self, name: str) -> int:
        code = self._kinds.get(name)
        if code is None:
            code = self._kinds[name] = len(self._kind_names)
            self._kind_names.append(name)
        return code


def _key(a: Any, b: Any, kind: Any, *, target: bool = False) -> Any:
    """One int64 per edge in the order of the arrays: (src, dst, kind), or with `target`
    (dst, kind, src) given as (dst, src, kind). Ends are codes below 2^29 (29 + 29 + 5 bits)."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    kind = np.asarray(kind, dtype=np.int64)
    if target:
        return (a << 34) | (kind << 29) | b
    return (a << 34) | (b << 5) | kind
