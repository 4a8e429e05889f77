"""The block-wise similarity sweep (domain/similarity.py) against brute force, no store."""

from __future__ import annotations

import numpy as np
import pytest

from nooa_mcp.domain import similarity
from nooa_mcp.domain.similarity import clustered_sweep, sweep


def clustered(n: int = 400, dim: int = 16, seed: int = 0) -> np.ndarray:
    """Unit vectors around five centres: plenty of pairs above 0.8, plenty below."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(5, dim))
    m = centres[rng.integers(0, 5, n)] + 0.5 * rng.normal(size=(n, dim))
    return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)


def brute(m: np.ndarray, rows: np.ndarray, low: float, groups=None) -> set[tuple[int, int]]:
    sims = m[rows] @ m[rows].T
    n = len(rows)
    return {
        (i, j)
        for i in range(n)
        for j in range(i + 1, n)
        if sims[i, j] >= low and (groups is None or groups[i] == groups[j])
    }


# Rows in shuffled order, a sparse part of the matrix (gathered), and all of it (views).
ROWS = {
    "shuffled": np.random.default_rng(1).permutation(400)[:300],
    "sparse": np.random.default_rng(2).permutation(400)[:90],
    "all": np.arange(400),
}


@pytest.mark.parametrize("which", sorted(ROWS))
def test_a_full_sweep_finds_every_pair_once_across_blocks(which):
    m, rows = clustered(), ROWS[which]
    found = sweep(m, rows, 0.8, cap=len(rows), cells=3000)
    pairs = list(zip(found.pairs.p.tolist(), found.pairs.q.tolist(), strict=True))
    assert len(pairs) == len(set(pairs)) > 100
    assert set(pairs) == brute(m, rows, 0.8)
    sims = m[rows] @ m[rows].T
    assert np.allclose(found.pairs.cos, sims[found.pairs.p, found.pairs.q], atol=1e-5)
    if which == "all":
        # The upper triangle only: about half of the n² a square sweep computes.
        assert found.compared < 0.7 * len(rows) ** 2


@pytest.mark.parametrize("which", sorted(ROWS))
def test_a_focused_sweep_finds_exactly_the_pairs_touching_the_focus_at_k_times_n(which):
    m, rows = clustered(), ROWS[which]
    focus = np.random.default_rng(3).permutation(len(rows))[:25]
    found = sweep(m, rows, 0.8, focus=focus, cap=len(rows), cells=2000)
    pairs = list(zip(found.pairs.p.tolist(), found.pairs.q.tolist(), strict=True))
    touching = {(i, j) for i, j in brute(m, rows, 0.8) if i in set(focus) or j in set(focus)}
    assert len(pairs) == len(set(pairs)) == len(touching) > 0
    assert set(pairs) == touching
    if which == "all":
        assert found.compared == 25 * len(rows)
    assert sweep(m, rows, 0.8, focus=np.zeros(0, np.int64)).compared == 0


def as_dict(pairs) -> dict[tuple[int, int], float]:
    return {(p, q): cos for p, q, cos in pairs}


@pytest.mark.parametrize("which", sorted(ROWS))
@pytest.mark.parametrize("cells", [7, 300, 1 << 20])
def test_a_focused_sweep_by_column_slices_equals_one_by_row_blocks(which, cells, monkeypatch):
    """Focus rows meet the matrix a slice of columns at a time (read once, not once per row
    block); the pairs, their cap and the spilled rows are those of the row-block sweep."""
    monkeypatch.setattr(similarity, "FOCUS_ROWS", 16)
    m, rows = clustered(), ROWS[which]
    focus = np.random.default_rng(7).permutation(len(rows))[:40]
    groups = np.arange(len(rows)) % 2
    # Neighbour lists (none wanted) keep a sweep on row blocks: the reference.
    none_wanted = (1.0, 0, np.zeros(len(rows), dtype=bool))
    for cap in (3, len(rows)):
        args = dict(focus=focus, groups=groups, cap=cap, spill=0.9, cells=cells)
        by_columns = sweep(m, rows, 0.8, **args)
        by_rows = sweep(m, rows, 0.8, neighbours=none_wanted, **args)
        assert by_columns.neighbours is None
        got, want = as_dict(by_columns.pairs), as_dict(by_rows.pairs)
        assert len(got) == len(by_columns.pairs) and set(got) == set(want) and len(want) > 40
        assert np.allclose([got[k] for k in want], list(want.values()), atol=1e-6)
        assert sorted(by_columns.spilled.tolist()) == sorted(by_rows.spilled.tolist())
        if which == "all":
            assert (by_columns.spilled.size > 0) == (cap == 3)
        assert by_columns.compared == by_rows.compared == 40 * len(rows)


def test_pairs_never_cross_groups():
    m, rows = clustered(), ROWS["all"]
    groups = np.arange(400) % 3
    found = sweep(m, rows, 0.8, groups=groups, cap=400, cells=5000)
    assert set(zip(found.pairs.p.tolist(), found.pairs.q.tolist(), strict=True)) == brute(
        m, rows, 0.8, groups
    )


def test_the_cap_keeps_each_rows_strongest_pairs_and_reports_a_spill():
    """A hub with more near-duplicates than the cap keeps its strongest and is reported, so
    the caller can look at it again."""
    e = np.eye(8, dtype=np.float32)
    spokes = [0.99 - i / 1000 for i in range(6)]
    m = np.stack([e[0]] + [c * e[0] + np.sqrt(1 - c * c) * e[i + 1] for i, c in enumerate(spokes)])
    found = sweep(m, np.arange(7), 0.9, focus=np.array([0]), cap=3, spill=0.95)
    assert sorted(found.pairs.q.tolist()) == [1, 2, 3]
    assert found.spilled.tolist() == [0]
    assert sweep(m, np.arange(7), 0.9, focus=np.array([0]), cap=3, spill=0.999).spilled.size == 0
    # The hub's pairs come from many column slices: capped together, the same three.
    sliced = sweep(m, np.arange(7), 0.9, focus=np.array([0]), cap=3, spill=0.95, cells=2)
    assert sorted(sliced.pairs.q.tolist()) == [1, 2, 3] and sliced.spilled.tolist() == [0]


def test_neighbour_counts_and_strongest_lists_match_brute_force():
    m, rows = clustered(300, seed=4), np.arange(300)
    wanted = np.random.default_rng(5).random(300) < 0.7
    found = sweep(m, rows, 0.9, neighbours=(0.6, 5, wanted), cap=300, cells=4000)
    nb = found.neighbours
    sims = m @ m.T
    for i in range(300):
        near = [j for j in range(300) if j != i and wanted[i] and wanted[j] and sims[i, j] >= 0.6]
        assert nb.count[i] == len(near)
        best = sorted(near, key=lambda j: -sims[i, j])[:5]
        assert set(nb.top[i][nb.top[i] >= 0].tolist()) == set(best)
    # The pairs at the higher threshold come out of the same sweep.
    assert set(zip(found.pairs.p.tolist(), found.pairs.q.tolist(), strict=True)) == brute(
        m, rows, 0.9
    )


def planted(n: int = 3000, dim: int = 48, seed: int = 3) -> tuple[np.ndarray, set, set]:
    """Random unit vectors (pairwise cosines near 0) with pairs planted at 0.96–0.999 (merge)
    and at 0.82–0.9 (link); returns the matrix and the two sets of planted pairs."""
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(n, dim))
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    ends = rng.permutation(n)
    near, far = set(), set()
    for k, (i, j) in enumerate(zip(ends[0:600:2], ends[1:600:2], strict=True)):
        cos = rng.uniform(0.96, 0.999) if k % 2 else rng.uniform(0.82, 0.9)
        ortho = m[j] - (m[j] @ m[i]) * m[i]
        ortho /= np.linalg.norm(ortho)
        m[j] = cos * m[i] + np.sqrt(1 - cos**2) * ortho
        (near if cos >= 0.95 else far).add((min(i, j), max(i, j)))
    return m.astype(np.float32), near, far


def test_the_clustered_sweep_finds_every_planted_near_duplicate_and_no_pair_below_low():
    m, near, far = planted()
    rows = np.arange(m.shape[0])
    found = clustered_sweep(m, rows, 0.8, cells=1 << 14)
    pairs = {(p, q) for p, q, _ in found.pairs}
    assert near <= pairs
    assert len(far & pairs) >= 0.9 * len(far)
    assert pairs <= brute(m, rows, 0.8)
    assert all(p < q for p, q in pairs) and len(pairs) == len(found.pairs)
    assert found.clustered
    # Each row against 8 of √n clusters of ~√n rows: 2·8/√n of the n²/2 pairs (not n²/2).
    assert found.compared < 0.35 * m.shape[0] ** 2 / 2


def test_the_clustered_sweep_is_deterministic_and_keeps_to_rows_and_groups():
    m, near, _ = planted()
    rows = np.random.default_rng(4).permutation(m.shape[0])
    groups = np.zeros(rows.size, dtype=np.int64)
    groups[::2] = 1
    one = clustered_sweep(m, rows, 0.8, groups=groups)
    two = clustered_sweep(m, rows, 0.8, groups=groups)
    assert np.array_equal(one.pairs.p, two.pairs.p) and np.array_equal(one.pairs.q, two.pairs.q)
    assert one.compared == two.compared
    # Positions into `rows`, within one group, each pair a planted or real one.
    assert {(p, q) for p, q, _ in one.pairs} <= brute(m, rows, 0.8, groups)
    at = {int(r): k for k, r in enumerate(rows)}
    same_group = {
        (min(at[i], at[j]), max(at[i], at[j])) for i, j in near if groups[at[i]] == groups[at[j]]
    }
    assert same_group <= {(p, q) for p, q, _ in one.pairs}


def test_the_clustered_sweep_caps_each_row_and_reports_the_spill():
    m, _, _ = planted()
    m[:60] = m[0]  # 60 copies: each has 59 neighbours at cosine 1
    found = clustered_sweep(m, np.arange(m.shape[0]), 0.8, cap=5, spill=0.95)
    assert found.clustered
    assert np.bincount(found.pairs.p).max() <= 5
    assert set(found.spilled.tolist()) >= set(range(50))


def test_clusters_that_would_save_little_give_way_to_the_exact_sweep():
    same = np.zeros((80, 8), dtype=np.float32)
    same[:, 0] = 1.0  # one cluster holds every row: no cheaper than every pair
    found = clustered_sweep(same, np.arange(80), 0.8, cap=100)
    assert not found.clustered
    assert len(found.pairs) == 80 * 79 // 2


def test_a_sweep_holds_one_block_of_cosines_at_a_time():
    """`cells` bounds the cosines in memory: the previous block is let go before the next is
    computed (both alive at once doubled an incremental pass's peak at 100k)."""
    import tracemalloc

    rng = np.random.default_rng(3)
    matrix = rng.standard_normal((8192, 16)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    cells = 1 << 20  # blocks of 128 rows x 8192 columns: 4 MiB of float32
    tracemalloc.start()
    try:
        sweep(matrix, np.arange(8192), 0.99, cells=cells, neighbours=(0.99, 2, np.ones(8192, bool)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    block = cells * 4
    assert block < peak < 1.6 * block
