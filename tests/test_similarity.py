"""The block-wise similarity sweep (domain/similarity.py) against brute force, no store."""

from __future__ import annotations

import numpy as np
import pytest

from nooa_mcp.domain.similarity import sweep


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
