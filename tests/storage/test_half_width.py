"""The matrix at half width (RSS ≤ 400 MB at 100k memories): int16 codes and a scale per row
from HALF_WIDTH_FROM rows on, every cosine within ~1e-5 of float32's, the index consistent
with itself; smaller indexes keep float32 to the bit."""

from __future__ import annotations

import sys

import anyio
import numpy as np
import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.domain.similarity import clustered_sweep, sweep
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.storage import sketch, vectors
from nooa_mcp.storage.base import VectorRow
from nooa_mcp.storage.half_width import CODE_MAX, HalfWidth, dequantize, quantize
from nooa_mcp.storage.vectors import GROW_STEP, VectorIndex

DIM = 64


def _unit(n: int, seed: int = 3) -> np.ndarray:
    """Unit vectors around a few shared directions (as sentence embeddings are), with a
    near-duplicate for every seventh."""
    rng = np.random.default_rng(seed)
    topics = rng.standard_normal((6, DIM))
    v = topics[rng.integers(0, 6, n)] + 0.7 * rng.standard_normal((n, DIM))
    v[1::7] = v[::7][: len(v[1::7])] + 0.03 * rng.standard_normal((len(v[1::7]), DIM))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def _rows(vecs: np.ndarray, start: int = 0) -> list[VectorRow]:
    return [
        VectorRow(start + i + 1, f"m{start + i}", "r", "", "info", False, vec)
        for i, vec in enumerate(vecs)
    ]


def test_codes_hold_each_component_within_half_a_step_of_its_scale():
    v = _unit(400)
    v[0] = 0.0  # no vector: zeros
    v[1] = 0.0
    v[1, 5] = -1.0  # one component: it alone is ±CODE_MAX
    codes, scale = quantize(v)
    assert codes.dtype == np.int16 and scale.dtype == np.float32 and codes.shape == v.shape
    assert scale[0] == 0.0 and not codes[0].any()
    assert codes[1, 5] == -CODE_MAX and np.count_nonzero(codes[1]) == 1
    # Each row's largest component maps to the largest code: the whole range is used.
    assert (np.abs(codes[1:]).max(axis=1) == CODE_MAX).all()
    back = dequantize(codes, scale)
    assert back.dtype == np.float32
    err = np.abs(back - v)
    # Half a step, and float32's rounding of the product (~6e-8 of a component ≤ 1).
    assert (err <= scale[:, None] / 2 + 1e-7).all() and (err.max(axis=1)[2:] > scale[2:] / 4).all()
    q = _unit(30, seed=8)
    assert np.abs(back @ q.T - v @ q.T).max() < 2e-5
    # One vector on its own quantizes as it does among others.
    one_codes, one_scale = quantize(v[7])
    assert np.array_equal(one_codes, codes[7]) and one_scale == scale[7]


def test_rows_read_one_at_a_time_by_slice_list_or_block_are_the_same_floats():
    codes, scale = quantize(_unit(300))
    rows = HalfWidth(codes, scale)
    every = dequantize(codes, scale)
    assert rows.shape == (300, DIM) and len(rows) == 300 and rows.dtype == np.float32
    assert np.array_equal(rows[4], every[4])
    assert np.array_equal(rows[10:20], every[10:20])
    assert np.array_equal(rows[[5, 1, 5]], every[[5, 1, 5]])
    assert np.array_equal(rows[np.array([7, 0])], every[[7, 0]])
    assert rows[4, 9] == every[4, 9] and np.array_equal(rows[2:5, 3], every[2:5, 3])
    block = rows.unscaled(np.array([8, 2]))
    assert np.array_equal(block, codes[[8, 2]].astype(np.float32))
    again = rows.unscaled(slice(30, 33))  # the same buffer, rewritten
    assert np.array_equal(again, codes[30:33]) and np.shares_memory(block, again)


def test_an_index_turns_to_half_width_once_it_grows_past_the_threshold(monkeypatch):
    monkeypatch.setattr(vectors, "HALF_WIDTH_FROM", 2 * GROW_STEP)
    monkeypatch.setattr(vectors, "SKETCH_FROM", 100)
    n = 3 * GROW_STEP
    v = _unit(n)
    grown = VectorIndex(DIM)
    grown._apply(_rows(v[:GROW_STEP]))
    assert grown.floats is not None and grown.codes is None
    assert np.array_equal(grown.matrix[:GROW_STEP], v[:GROW_STEP])  # float32 to the bit
    anyio.run(grown.keep_sketch)
    early = anyio.run(grown.row_hashes, np.arange(GROW_STEP))
    assert grown.sketched == GROW_STEP and grown.hashed[:GROW_STEP].all()
    for lo in range(GROW_STEP, n, 1000):
        grown._apply(_rows(v[lo : lo + 1000], lo))
    assert grown.floats is None and grown.codes is not None and grown.scale is not None
    assert grown.codes.dtype == np.int16 and grown.size == n
    # Every row reads differently now: hashed and sketched again.
    assert not grown.hashed[:n].any() and grown.sketched == 0
    hashes = anyio.run(grown.row_hashes, np.arange(GROW_STEP))
    assert np.array_equal(hashes, vectors.vector_hashes(grown.matrix[:GROW_STEP]))
    assert not np.array_equal(hashes, early)
    # An index filled in one go is at half width from its first row, with the same codes.
    once = VectorIndex(DIM)
    once._apply(_rows(v))
    assert once.floats is None
    assert np.array_equal(grown.matrix[:n], once.matrix[:n])
    assert np.abs(grown.matrix[:n] - v).max() < 1e-4
    capacity = grown.codes.shape[0]
    assert grown.codes.nbytes + grown.scale.nbytes == capacity * (2 * DIM + 4)
    # Searches answer as the dequantized rows do: the same order, cosines close to float32's.
    mask = grown.has_vector[:n].copy()
    for q in _unit(10, seed=5):
        found = grown.search(q, mask, 10)
        sims = grown.matrix[:n] @ q
        order = np.argsort(-sims, kind="stable")[:10]
        assert [i for i, _ in found] == [f"m{r}" for r in order.tolist()]
        assert np.allclose([c for _, c in found], (v @ q)[order], atol=2e-5)


def test_the_sketch_bounds_every_cosine_of_rows_at_half_width(monkeypatch):
    monkeypatch.setattr(vectors, "HALF_WIDTH_FROM", 0)
    monkeypatch.setattr(vectors, "SKETCH_FROM", 100)
    monkeypatch.setattr(sketch, "DIM", 12)
    index = VectorIndex(DIM)
    index._apply(_rows(_unit(3000)))
    anyio.run(index.keep_sketch)
    assert index.floats is None and index.sketched == index.size
    for q in _unit(20, seed=11):
        _, bound = sketch.estimates(index.sketch[:3000], index.rest[:3000], index.basis, q)
        assert (bound >= index.similarities(q)).all()
    # Near-duplicate checks above a floor: the whole product's answer from few rows.
    mask = index.has_vector[: index.size].copy()
    queries = index.matrix[:200:7] + 0.01
    for q, (row, cos) in zip(
        queries, index.nearest(queries, [mask] * len(queries), 0.9), strict=True
    ):
        sims = index.similarities(q)
        assert row == int(sims.argmax()) and cos == sims[row]


def test_block_products_of_many_queries_at_half_width_are_each_querys_product(monkeypatch):
    monkeypatch.setattr(vectors, "HALF_WIDTH_FROM", 0)
    index = VectorIndex(DIM)
    index._apply(_rows(_unit(1500)))
    queries = _unit(5, seed=2)
    block = index.similarities(queries)
    assert block.shape == (1500, 5)
    every = index.matrix[:1500]
    assert np.allclose(block, every @ queries.T, atol=1e-6)
    for j, q in enumerate(queries):
        assert np.allclose(block[:, j], index.similarities(q), atol=1e-6)


@pytest.mark.parametrize("shape", ["full", "focused", "neighbours", "clustered"])
def test_reflections_sweeps_find_the_same_pairs_in_rows_at_half_width(shape):
    codes, scale = quantize(_unit(900))
    held = HalfWidth(codes, scale)
    every = dequantize(codes, scale)
    rng = np.random.default_rng(4)
    rows = np.sort(rng.choice(np.arange(150, 900), 500, replace=False))  # not from row 0
    rng.shuffle(rows)
    groups = (rows % 2).astype(np.int64)
    if shape == "clustered":

        def run(matrix):
            return clustered_sweep(matrix, rows, 0.8, groups=groups, cells=1 << 14)
    else:
        kwargs: dict = {"groups": groups, "cells": 1 << 14}
        if shape == "focused":
            kwargs["focus"] = np.arange(0, 500, 9)
        if shape == "neighbours":
            kwargs["neighbours"] = (0.6, 4, np.ones(500, dtype=bool))

        def run(matrix):
            return sweep(matrix, rows, 0.8, **kwargs)

    a, b = run(held), run(every)
    assert len(a.pairs) > 20
    assert list(a.pairs) == list(b.pairs) and a.compared == b.compared
    assert np.array_equal(a.spilled, b.spilled)
    if shape == "neighbours":
        assert a.neighbours is not None and b.neighbours is not None
        assert np.array_equal(a.neighbours.count, b.neighbours.count)
        assert np.array_equal(a.neighbours.top, b.neighbours.top)


@pytest.mark.anyio
async def test_a_store_at_half_width_keeps_finding_what_it_was_told(store_path, monkeypatch):
    """Through the facade: a store opened past the threshold holds no float32 row, recalls
    each memory by its words first, and a pass plans over it."""
    monkeypatch.setattr(vectors, "HALF_WIDTH_FROM", 40)
    words = [f"w{i}" for i in range(600)]
    texts = [" ".join(words[6 * i : 6 * i + 6]) for i in range(90)]
    settings = Settings(store=store_path, owner="coder@laptop")
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        ids = [r.id for r in await mem.author_many([{"content": t} for t in texts])]
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        for i in (0, 17, 89):
            hits = (await mem.recall(texts[i])).hits
            assert hits[0].id == ids[i]
        index = mem.engine.index
        assert index.floats is None and index.size == 90
        twin = await mem.author(texts[5] + " w5")
        assert twin.similar_to is not None and twin.similar_to.id == ids[5]


def test_codes_grow_in_place_and_a_reader_holding_them_keeps_its_rows(monkeypatch):
    monkeypatch.setattr(vectors, "HALF_WIDTH_FROM", 0)
    v = _unit(3 * GROW_STEP)
    index = VectorIndex(DIM)
    index._apply(_rows(v[:GROW_STEP]))
    assert index.codes is not None
    capacity, ident = index.codes.shape[0], id(index.codes)
    index._apply(_rows(v[GROW_STEP : capacity + 1], GROW_STEP))
    assert index.codes.shape[0] >= capacity + GROW_STEP
    if sys.gettrace() is None:  # a tracer holds a reference, and the index rightly copies
        assert id(index.codes) == ident
    assert not index.codes[index.size :].any() and not index.scale[index.size :].any()
    # A reader in a worker thread holds the rows (a sweep): growth copies, never frees them.
    held = index.matrix
    before = held[: index.size]
    index._apply(_rows(v[index.size : index.codes.shape[0] + 5], index.size))
    assert index.codes is not held.codes
    assert np.array_equal(held[: before.shape[0]], before)
    assert np.array_equal(index.matrix[: before.shape[0]], before)
    assert np.abs(index.matrix[: index.size] - v[: index.size]).max() < 1e-4


def test_at_half_width_a_recall_gathers_up_to_two_thirds_of_the_rows(monkeypatch):
    """A gathered row costs what a row of the whole product costs once both are converted,
    so a recall's sketch that leaves a third or half of the rows still gathers them: the
    answer is the whole product's, read from fewer rows."""
    monkeypatch.setattr(vectors, "HALF_WIDTH_FROM", 0)
    monkeypatch.setattr(vectors, "SKETCH_FROM", 100)
    monkeypatch.setattr(vectors, "RECALL_SKETCH_FROM", 1000)
    monkeypatch.setattr(sketch, "DIM", 40)  # bounds that leave a quarter to half of the rows
    index = VectorIndex(DIM)
    index._apply(_rows(_unit(6000)))
    anyio.run(index.keep_sketch)
    mask = index.has_vector[: index.size].copy()
    sizes: list[int] = []
    real = vectors.padded_product

    def counting(matrix, rows, query):
        sizes.append(int(rows.size))
        return real(matrix, rows, query)

    monkeypatch.setattr(vectors, "padded_product", counting)
    between = 0
    for q in _unit(30, seed=21):
        del sizes[:]
        found = index.search(q, mask, 20)
        vectors.RECALL_SKETCH_FROM = 10**9
        assert found == index.search(q, mask, 20)  # the whole product's answer, bit for bit
        vectors.RECALL_SKETCH_FROM = 1000
        if sizes and index.size / 4 <= sizes[-1] < index.size * 2 / 3:
            between += 1
    assert between >= 3
