"""Similar pairs over a matrix of unit vectors, block by block, in bounded memory (DESIGN.md §8.8).

A role of 100k memories holds 5·10⁹ pairs. Reflection never builds an n×n matrix: it computes
one block of cosines at a time (at most `BLOCK_CELLS` floats, 16 MB), keeps the pairs above a
threshold (at most `ROW_CAP` per row, the strongest), and drops the block. Three shapes:

- **full**: every pair once (the upper triangle only: half the products of a square sweep);
- **focused**: every pair with at least one end among a few `focus` rows against all rows
  (k×n): what a pass needs once an earlier one planned every pair among rows unchanged since.
  Its blocks run across the columns (the focus rows against a slice of the matrix at a
  time), so the matrix is read once per `FOCUS_ROWS` focus rows, not once per block of rows;
- **clustered** (`clustered_sweep`): the first sweep of a role of `CLUSTERED_FROM` rows or
  more, where n²/2 cosines cost minutes: each row against the rows of its nearest k-means
  clusters only. Approximate: on the benchmark's texts it found every pair at cosine ≥ 0.95
  (hash vectors at 10k, 20k and 100k; MiniLM at 10k) and 96.6–99.8 % of those at ≥ 0.80,
  with 5–10× fewer cosines (BENCHMARKS.md, "Reflection at scale").

`sweep` also gathers, when asked, each row's neighbour count and its strongest neighbours at a
lower threshold (reconcile's clusters), from the same products: one sweep per pass serves
merge, link and reconcile. Vectors are read from the caller's matrix (the process's vector
index) by row number; the role's rows are never copied when they fill most of it. A matrix
that dequantizes the rows it is asked for (an index at half width) is read a block at a
time, as any matrix is; a full sweep, which reads every later row for each block, reads
the role's rows out of it once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

__all__ = [
    "BLOCK_CELLS",
    "CLUSTERED_FROM",
    "ROW_CAP",
    "Neighbours",
    "Pairs",
    "Sweep",
    "VectorRows",
    "clustered_sweep",
    "sweep",
]

#: Cosines computed per block (float32): 16 MB, whatever the role's size.
BLOCK_CELLS = 1 << 22
#: A focused sweep's blocks: up to this many focus rows against as many matrix rows as make
#: `FOCUS_CELLS` cosines (4 MB). Row blocks of a full-width sweep would read the whole matrix
#: for a few rows each; column blocks read it once, whatever the block's size.
FOCUS_ROWS = 1024
FOCUS_CELLS = 1 << 20
#: Most pairs a row contributes to one sweep, strongest first. A row with more neighbours in
#: the band than this is a hub whose extra pairs no plan could use (link takes ≤ 5 per node).
ROW_CAP = 64


class VectorRows(Protocol):
    """Rows of float32 vectors by row number: an array, or anything that indexes as one (a
    row, a slice, an array of rows) into a new float32 array."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    def __getitem__(self, key: Any, /) -> np.ndarray: ...


@dataclass(frozen=True)
class Pairs:
    """Pairs (p, q, cos) of positions into the caller's rows, p < q, cos ≥ the threshold."""

    p: np.ndarray
    q: np.ndarray
    cos: np.ndarray

    def __len__(self) -> int:
        return int(self.p.shape[0])

    def __iter__(self):
        return zip(self.p.tolist(), self.q.tolist(), self.cos.tolist(), strict=True)


@dataclass(frozen=True)
class Neighbours:
    """Per position: how many rows are at cosine ≥ the threshold, and the strongest of them
    (`top` positions, −1 past the end, with their cosines), for every `wanted` position."""

    count: np.ndarray
    top: np.ndarray
    top_cos: np.ndarray


@dataclass(frozen=True)
class Sweep:
    """What one sweep found, and what it cost."""

    pairs: Pairs
    neighbours: Neighbours | None
    #: Pairs of rows compared: the sweep's work (k·n for a focused sweep, ~n²/2 for a full
    #: one). Rows of the matrix that are not the caller's may be computed too, not counted.
    compared: int
    #: Positions that had to drop a pair at cosine ≥ `spill` (more than `cap` of them): their
    #: pairs are not all here, so a later sweep must look at them again.
    spilled: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    #: Found through clusters (`clustered_sweep`): most pairs, not provably all.
    clustered: bool = False


def _empty_pairs() -> Pairs:
    return Pairs(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32))


def _capped(
    bi: np.ndarray, cos: np.ndarray, cap: int, spill: float
) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the hits to keep (at most `cap` per block row `bi`, the strongest), and the
    block rows that had to drop a hit at cosine ≥ `spill`."""
    counts = np.bincount(bi)
    if counts.size == 0 or counts.max() <= cap:
        return np.arange(bi.shape[0]), np.zeros(0, np.int64)
    keep = np.ones(bi.shape[0], dtype=bool)
    spilled = []
    for row in np.flatnonzero(counts > cap).tolist():
        hits = np.flatnonzero(bi == row)
        weakest = hits[np.argpartition(-cos[hits], cap)[cap:]] if cap > 0 else hits
        keep[weakest] = False
        if (cos[weakest] >= spill).any():
            spilled.append(row)
    return np.flatnonzero(keep), np.array(spilled, dtype=np.int64)


def _capped_by_rank(
    key: np.ndarray, cos: np.ndarray, cap: int, spill: float
) -> tuple[np.ndarray, np.ndarray]:
    """`_capped` over any number of hits at once (sorted, not a loop per capped row): the
    indices of the hits to keep, strongest `cap` per `key`, and the keys that dropped a hit
    at cosine ≥ `spill`."""
    if key.size == 0:
        return np.arange(0), np.zeros(0, np.int64)
    order = np.lexsort((-cos, key))
    sorted_key = key[order]
    starts = np.flatnonzero(np.concatenate(([True], sorted_key[1:] != sorted_key[:-1])))
    lengths = np.diff(np.concatenate((starts, [key.size])))
    rank = np.arange(key.size) - np.repeat(starts, lengths)
    dropped = order[rank >= cap]
    over = np.unique(key[dropped[cos[dropped] >= spill]])
    return np.sort(order[rank < cap]), over.astype(np.int64)


def sweep(
    matrix: VectorRows,
    rows: np.ndarray,
    low: float,
    *,
    focus: np.ndarray | None = None,
    groups: np.ndarray | None = None,
    cap: int = ROW_CAP,
    neighbours: tuple[float, int, np.ndarray] | None = None,
    spill: float = np.inf,
    cells: int = BLOCK_CELLS,
) -> Sweep:
    """Pairs of positions whose vectors are at cosine ≥ `low`.

    Args:
        matrix: unit vectors, one per row (zeros for a row without one: cosine 0).
        rows: the matrix row of each position 0…m−1 (distinct).
        focus: positions to compare against all; None compares every pair (full sweep).
        groups: a code per position; only pairs inside one group count (roles).
        cap: pairs kept per row and block row, strongest first.
        spill: report the rows that dropped a pair at cosine ≥ this (`Sweep.spilled`).
        neighbours: (threshold, k, wanted) — also count each wanted position's neighbours at
            cosine ≥ threshold among wanted positions (same group) and keep its k strongest.
            Needs a full sweep (each row is compared with every other, not only later ones).
        cells: cosines computed per block.
    """
    rows = np.asarray(rows, dtype=np.int64)
    m = rows.shape[0]
    n_low = None if neighbours is None else neighbours[0]
    k_top = 0 if neighbours is None else neighbours[1]
    wanted = None if neighbours is None else np.asarray(neighbours[2], dtype=bool)
    count = np.zeros(m, dtype=np.int64)
    top = np.full((m, k_top), -1, dtype=np.int64)
    top_cos = np.full((m, k_top), -np.inf, dtype=np.float32)
    empty = Sweep(
        _empty_pairs(), None if neighbours is None else Neighbours(count, top, top_cos), 0
    )
    if m < 2 or (focus is not None and len(focus) == 0):
        return empty
    if focus is not None and neighbours is None:
        return _focused(matrix, rows, low, focus, groups, cap, spill, min(cells, FOCUS_CELLS))
    # Work in matrix-row order, so the columns of "every later row" are one slice (a view).
    matrix, order, srows, base, span, inv, sgroups = _in_matrix_order(matrix, rows, groups)
    if not isinstance(matrix, np.ndarray):
        # Each block reads every later row: dequantize them once, not once a block.
        matrix, srows, base = matrix[base : base + span], srows - base, 0
    swanted = None if wanted is None else wanted[order]
    if focus is None:
        heads = np.arange(m)
    else:
        pos_of = np.empty(m, dtype=np.int64)
        pos_of[order] = np.arange(m)
        heads = np.sort(pos_of[np.asarray(focus, dtype=np.int64)])
        in_focus = np.zeros(m, dtype=bool)
        in_focus[heads] = True
    full_width = neighbours is not None or focus is not None
    out_p, out_q, out_c, spilled = [], [], [], []
    compared = 0
    start = 0
    while start < len(heads):
        first = int(heads[start])
        lo = base if full_width else int(srows[first])
        width = base + span - lo
        size = max(1, min(1024, cells // max(width, 1)))
        block = heads[start : start + size]
        start += size
        a = matrix[srows[block]]
        sims = a @ matrix[lo : base + span].T
        compared += block.shape[0] * (m if full_width else m - first)
        cols = inv[lo - base :]
        hit_b, hit_c = np.nonzero(sims >= min(low, n_low if n_low is not None else low))
        q = cols[hit_c]
        p = block[hit_b]
        keep = q >= 0
        keep &= q != p
        if sgroups is not None:
            keep &= sgroups[np.where(q >= 0, q, 0)] == sgroups[p]
        hit_b, p, q = hit_b[keep], p[keep], q[keep]
        cos = sims[hit_b, hit_c[keep]]
        # Let the block go now, not when the next one replaces it: otherwise the two are
        # alive at once, twice the bound.
        del sims
        if n_low is not None and swanted is not None:  # both set exactly with `neighbours`
            _gather_neighbours(block, hit_b, q, cos, n_low, k_top, swanted, count, top, top_cos)
        sel = cos >= low
        if focus is None:
            sel &= q > p
        else:
            sel &= ~in_focus[q] | (q > p)
        hit_b, p, q, cos = hit_b[sel], p[sel], q[sel], cos[sel]
        kept, over = _capped(hit_b, cos, cap, spill)
        spilled.append(block[over])
        out_p.append(p[kept])
        out_q.append(q[kept])
        out_c.append(cos[kept])
    p = order[np.concatenate(out_p)] if out_p else np.zeros(0, np.int64)
    q = order[np.concatenate(out_q)] if out_q else np.zeros(0, np.int64)
    cos = np.concatenate(out_c).astype(np.float32) if out_c else np.zeros(0, np.float32)
    lo_pos, hi_pos = np.minimum(p, q), np.maximum(p, q)
    found = None
    if neighbours is not None:
        # Back from matrix-row order to the caller's positions.
        back = np.empty(m, dtype=np.int64)
        back[order] = np.arange(m)
        mapped = np.where(top >= 0, order[np.where(top >= 0, top, 0)], -1)
        found = Neighbours(count[back], mapped[back], top_cos[back])
    over = order[np.concatenate(spilled)] if spilled else np.zeros(0, np.int64)
    return Sweep(Pairs(lo_pos, hi_pos, cos), found, compared, over)


def _in_matrix_order(
    matrix: VectorRows, rows: np.ndarray, groups: np.ndarray | None
) -> tuple[VectorRows, np.ndarray, np.ndarray, int, int, np.ndarray, np.ndarray | None]:
    """The positions sorted by matrix row: (matrix, order, sorted rows, base, span, inv,
    sorted groups), where matrix rows base…base+span−1 hold every position and `inv` maps
    each of them back to its sorted position (−1: not one of `rows`). When the rows are a
    sparse part of the matrix (under half of their span) they are gathered once instead."""
    m = rows.shape[0]
    order = np.argsort(rows, kind="stable")
    srows = rows[order]
    base, span = int(srows[0]), int(srows[-1]) - int(srows[0]) + 1
    if m * 2 < span:
        matrix, srows, base, span = matrix[srows], np.arange(m, dtype=np.int64), 0, m
    inv = np.full(span, -1, dtype=np.int64)
    inv[srows - base] = np.arange(m)
    sgroups = None if groups is None else np.asarray(groups)[order]
    return matrix, order, srows, base, span, inv, sgroups


def _focused(
    matrix: VectorRows,
    rows: np.ndarray,
    low: float,
    focus: np.ndarray,
    groups: np.ndarray | None,
    cap: int,
    spill: float,
    cells: int,
) -> Sweep:
    """`sweep` with `focus` and no neighbour lists: the same pairs, blocked by columns.

    Each group of up to `FOCUS_ROWS` focus rows meets the role's matrix rows a slice at a
    time (at most `cells` cosines alive); a focus row's hits from every slice are capped
    together, as one row block of the full-width sweep caps them.
    """
    m = rows.shape[0]
    matrix, order, srows, base, span, inv, sgroups = _in_matrix_order(matrix, rows, groups)
    pos_of = np.empty(m, dtype=np.int64)
    pos_of[order] = np.arange(m)
    heads = np.unique(pos_of[np.asarray(focus, dtype=np.int64)])
    in_focus = np.zeros(m, dtype=bool)
    in_focus[heads] = True
    out_p, out_q, out_c, spilled = [], [], [], []
    for start in range(0, heads.shape[0], FOCUS_ROWS):
        block = heads[start : start + FOCUS_ROWS]
        a = matrix[srows[block]]
        width = max(1, cells // block.shape[0])
        parts_b, parts_q, parts_c = [], [], []
        for lo in range(base, base + span, width):
            hi = min(lo + width, base + span)
            sims = a @ matrix[lo:hi].T
            hit_b, hit_c = np.nonzero(sims >= low)
            cos = sims[hit_b, hit_c]
            del sims
            q = inv[lo - base + hit_c]
            p = block[hit_b]
            keep = (q >= 0) & (q != p)
            if sgroups is not None:
                keep &= sgroups[np.where(q >= 0, q, 0)] == sgroups[p]
            keep &= ~in_focus[np.where(q >= 0, q, 0)] | (q > p)
            parts_b.append(hit_b[keep])
            parts_q.append(q[keep])
            parts_c.append(cos[keep])
        hit_b, q, cos = np.concatenate(parts_b), np.concatenate(parts_q), np.concatenate(parts_c)
        kept, over = _capped_by_rank(hit_b, cos, cap, spill)
        spilled.append(block[over])
        out_p.append(block[hit_b[kept]])
        out_q.append(q[kept])
        out_c.append(cos[kept])
    p, q = order[np.concatenate(out_p)], order[np.concatenate(out_q)]
    cos = np.concatenate(out_c).astype(np.float32)
    pairs = Pairs(np.minimum(p, q), np.maximum(p, q), cos)
    return Sweep(pairs, None, heads.shape[0] * m, order[np.concatenate(spilled)])


def _gather_neighbours(
    block: np.ndarray,
    hit_b: np.ndarray,
    q: np.ndarray,
    cos: np.ndarray,
    low: float,
    k: int,
    wanted: np.ndarray,
    count: np.ndarray,
    top: np.ndarray,
    top_cos: np.ndarray,
) -> None:
    """Fold one block's hits into per-row neighbour counts and strongest-k lists."""
    sel = (cos >= low) & wanted[block[hit_b]] & wanted[q]
    hit_b, q, cos = hit_b[sel], q[sel], cos[sel]
    if hit_b.size == 0:
        return
    counts = np.bincount(hit_b, minlength=block.shape[0])
    count[block] += counts
    if k == 0:
        return
    # Strongest first, then the lower position: the order reconcile takes members in.
    order = np.lexsort((q, -cos, hit_b))
    hit_b, q, cos = hit_b[order], q[order], cos[order]
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    rank = np.arange(hit_b.shape[0]) - starts[hit_b]
    sel = rank < k
    rows = block[hit_b[sel]]
    top[rows, rank[sel]] = q[sel]
    top_cos[rows, rank[sel]] = cos[sel]


#: Roles at least this large get `clustered_sweep` instead of the exact full sweep: below it an
#: exact sweep costs seconds (2·10⁸ cosines at 20k), above it grows as n² (5·10⁹ at 100k).
CLUSTERED_FROM = 20_000
#: Clusters each row is compared through: its home cluster and its nearest others.
PROBES = 8
#: Rows of the k-means sample per centroid, and the k-means rounds over it.
SAMPLE_PER_CENTROID = 32
KMEANS_ROUNDS = 8
#: When the clusters would cost at least this share of the exact sweep's n²/2 cosines (very
#: uneven clusters: a role of near-copies), the exact sweep runs instead.
FALLBACK_SHARE = 0.5


def _kmeans(vectors: np.ndarray, k: int, rng: np.random.Generator, cells: int) -> np.ndarray:
    """Spherical k-means (cosine) over `vectors`: k unit centroids, seeded by `rng`."""
    n = vectors.shape[0]
    centroids = vectors[np.sort(rng.choice(n, size=k, replace=False))].astype(np.float32)
    for _ in range(KMEANS_ROUNDS):
        near = _nearest(vectors, centroids, 1, cells)[:, 0]
        order = np.argsort(near, kind="stable")
        sizes = np.bincount(near, minlength=k)
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        used = np.flatnonzero(sizes)
        sums = centroids.copy()  # an empty cluster keeps its centroid
        sums[used] = np.add.reduceat(vectors[order], starts[used], axis=0)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        centroids = np.where(norms > 0, sums / np.maximum(norms, 1e-12), centroids).astype(
            np.float32
        )
    return centroids


def _nearest(vectors: np.ndarray, centroids: np.ndarray, probes: int, cells: int) -> np.ndarray:
    """Each row's `probes` nearest centroids, nearest first (ties: the lower centroid)."""
    k = centroids.shape[0]
    probes = min(probes, k)
    out = np.empty((vectors.shape[0], probes), dtype=np.int64)
    size = max(1, cells // max(k, 1))
    for start in range(0, vectors.shape[0], size):
        sims = vectors[start : start + size] @ centroids.T
        if probes == 1:
            out[start : start + size, 0] = np.argmax(sims, axis=1)  # ties: the lower one
        else:
            # The strongest `probes` (a partition), then in order of cosine.
            top = np.argpartition(-sims, probes - 1, axis=1)[:, :probes]
            order = np.argsort(-np.take_along_axis(sims, top, axis=1), axis=1, kind="stable")
            out[start : start + size] = np.take_along_axis(top, order, axis=1)
        del sims  # one block of cosines alive at a time, as in `sweep`
    return out


def clustered_sweep(
    matrix: VectorRows,
    rows: np.ndarray,
    low: float,
    *,
    groups: np.ndarray | None = None,
    cap: int = ROW_CAP,
    spill: float = np.inf,
    probes: int = PROBES,
    seed: int = 0,
    cells: int = BLOCK_CELLS,
) -> Sweep:
    """Pairs at cosine ≥ `low` found through a coarse clustering, without comparing every
    pair: the first sweep of a large role, where the exact one costs n²/2 cosines.

    Spherical k-means on a seeded sample gives ~√m centroids; each row's home is its nearest
    centroid, and each row is compared with the rows homed in its `probes` nearest centroids
    (matrix products, one cluster at a time, at most `cells` cosines at once): ~m·probes·√m
    cosines when clusters are even. Two rows at high cosine are close to the same centroids,
    so a pair is found when either end's home is among the other's nearest: with 8 probes,
    recall was 1.0 at cosine ≥ 0.95 and 0.966–0.98 at ≥ 0.80 on hash vectors (10k–100k),
    0.998 at ≥ 0.80 on MiniLM vectors (10k); a 100k pass made as many merges as the exact
    one and 1.3 % fewer links, from a tenth of the cosines (BENCHMARKS.md, "Reflection at
    scale"). What it misses stays
    missed by the incremental passes that follow (they compare only changed rows), until a
    row changes or an exact full sweep runs again.

    When the clusters come out so uneven that they would cost half the exact sweep or more
    (a role of near-copies), the exact sweep runs instead (`Sweep.clustered` says which).

    Deterministic: the sample and the first centroids come from `seed`, ties break by
    index, so two runs over the same vectors find the same pairs. Memory: the sample, the
    centroids, m×probes cluster numbers and the pairs found; no m×m matrix. Same arguments
    and result as `sweep` without `focus` and `neighbours`; the cap applies per lower
    position over all the pairs found.
    """
    rows = np.asarray(rows, dtype=np.int64)
    m = rows.shape[0]
    if m < 2:
        return Sweep(_empty_pairs(), None, 0, clustered=True)
    rng = np.random.default_rng(seed)
    k = max(1, round(m**0.5))
    sample = np.sort(rng.choice(m, size=min(m, SAMPLE_PER_CENTROID * k), replace=False))
    centroids = _kmeans(matrix[rows[sample]], k, rng, cells)
    near = np.empty((m, min(probes, k)), dtype=np.int64)
    chunk = max(1, cells // max(k, 1))
    for start in range(0, m, chunk):
        near[start : start + chunk] = _nearest(
            matrix[rows[start : start + chunk]], centroids, probes, cells
        )
    home = near[:, 0]
    by_home = np.argsort(home, kind="stable")
    home_sizes = np.bincount(home, minlength=k)
    home_starts = np.concatenate(([0], np.cumsum(home_sizes)))
    # (cluster, row) for every probe of every row, grouped by cluster.
    probe_cluster = near.ravel()
    probe_row = np.repeat(np.arange(m), near.shape[1])
    by_probe = np.argsort(probe_cluster, kind="stable")
    probe_row = probe_row[by_probe]
    probe_starts = np.concatenate(([0], np.cumsum(np.bincount(probe_cluster, minlength=k))))
    cost = int(np.diff(probe_starts) @ home_sizes)
    if cost >= FALLBACK_SHARE * m * (m - 1) / 2:
        # Clusters too uneven to save much (a role of near-copies): the exact sweep.
        return sweep(matrix, rows, low, groups=groups, cap=cap, spill=spill, cells=cells)
    # Vectors gathered at a time: at most `cells` floats on either side of a product.
    width = max(1, cells // max(matrix.shape[1], 1))
    out_p, out_q, out_c, spilled = [], [], [], []
    compared = 0
    for cluster in range(k):
        homed = by_home[home_starts[cluster] : home_starts[cluster + 1]]
        queries = probe_row[probe_starts[cluster] : probe_starts[cluster + 1]]
        for left in range(0, homed.size if queries.size else 0, width):
            members = homed[left : left + width]
            right = matrix[rows[members]].T
            size = max(1, min(cells // members.size, width))
            for start in range(0, queries.size, size):
                block = queries[start : start + size]
                sims = matrix[rows[block]] @ right
                compared += block.size * members.size
                hit_b, hit_c = np.nonzero(sims >= low)
                p, q = block[hit_b], members[hit_c]
                keep = p != q
                if groups is not None:
                    keep &= groups[p] == groups[q]
                hit_b, hit_c, p, q = hit_b[keep], hit_c[keep], p[keep], q[keep]
                cos = sims[hit_b, hit_c]
                del sims  # one block of cosines alive at a time, as in `sweep`
                kept, over = _capped(hit_b, cos, cap, spill)
                spilled.append(block[over])
                out_p.append(np.minimum(p, q)[kept])
                out_q.append(np.maximum(p, q)[kept])
                out_c.append(cos[kept])
    if not out_p:
        return Sweep(_empty_pairs(), None, compared, clustered=True)
    lo = np.concatenate(out_p)
    hi = np.concatenate(out_q)
    cos = np.concatenate(out_c).astype(np.float32)
    # A pair found from both ends once; the cap per lower position, as the full sweep's.
    _, first = np.unique(lo * m + hi, return_index=True)
    lo, hi, cos = lo[first], hi[first], cos[first]
    kept, over = _capped_by_rank(lo, cos, cap, spill)
    spilled.append(over)
    over_all = np.unique(np.concatenate(spilled)) if spilled else np.zeros(0, np.int64)
    return Sweep(Pairs(lo[kept], hi[kept], cos[kept]), None, compared, over_all, clustered=True)
