"""Similar pairs over a matrix of unit vectors, block by block, in bounded memory (SPEC §8).

A role of 100k memories holds 5·10⁹ pairs. Reflection never builds an n×n matrix: it computes
one block of cosines at a time (at most `BLOCK_CELLS` floats, 16 MB), keeps the pairs above a
threshold (at most `ROW_CAP` per row, the strongest), and drops the block. Two shapes:

- **full**: every pair once (the upper triangle only: half the products of a square sweep);
- **focused**: every pair with at least one end among a few `focus` rows against all rows
  (k×n): what a pass needs once an earlier one planned every pair among rows unchanged since.

`sweep` also gathers, when asked, each row's neighbour count and its strongest neighbours at a
lower threshold (reconcile's clusters), from the same products: one sweep per pass serves
merge, link and reconcile. Vectors are read from the caller's matrix (the process's vector
index) by row number; the role's rows are never copied when they fill most of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["BLOCK_CELLS", "ROW_CAP", "Neighbours", "Pairs", "Sweep", "sweep"]

#: Cosines computed per block (float32): 16 MB, whatever the role's size.
BLOCK_CELLS = 1 << 22
#: Most pairs a row contributes to one sweep, strongest first. A row with more neighbours in
#: the band than this is a hub whose extra pairs no plan could use (link takes ≤ 5 per node).
ROW_CAP = 64


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


def sweep(
    matrix: np.ndarray,
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
    # Work in matrix-row order, so the columns of "every later row" are one slice (a view).
    order = np.argsort(rows, kind="stable")
    srows = rows[order]
    base, span = int(srows[0]), int(srows[-1]) - int(srows[0]) + 1
    if m * 2 < span:
        # The rows are a sparse part of the matrix: gather them once (≤ half its size).
        matrix, srows, base, span = matrix[srows], np.arange(m, dtype=np.int64), 0, m
    inv = np.full(span, -1, dtype=np.int64)
    inv[srows - base] = np.arange(m)
    sgroups = None if groups is None else np.asarray(groups)[order]
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
        if neighbours is not None:
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
