"""The sketch that bounds cosines from above (ingest at 100k memories): searches above a floor
multiply only the rows that can reach it, and answer exactly as the whole product does."""

from __future__ import annotations

import anyio
import numpy as np
import pytest
from vector_rows import info_rows

from nooa_mcp import Memory, Settings
from nooa_mcp.domain.scope import Scope
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.storage import sketch, vectors
from nooa_mcp.storage.base import VectorRow
from nooa_mcp.storage.vectors import VectorIndex

DIM = 48


def _clustered(n: int, seed: int = 3) -> np.ndarray:
    """Unit vectors around a common direction and a few topics, as sentence embeddings are:
    most of their energy in a few directions, with some near-duplicates among them."""
    rng = np.random.default_rng(seed)
    common = rng.standard_normal(DIM)
    topics = rng.standard_normal((8, DIM))
    v = 1.5 * common + 0.8 * topics[rng.integers(0, 8, n)] + 0.6 * rng.standard_normal((n, DIM))
    v[1::7] = v[::7][: len(v[1::7])] + 0.05 * rng.standard_normal((len(v[1::7]), DIM))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def _near(rows: np.ndarray, count: int, noise: float, seed: int = 9) -> np.ndarray:
    rng = np.random.default_rng(seed)
    q = rows[rng.integers(0, len(rows), count)] + noise * rng.standard_normal((count, DIM))
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


def _rows(vecs: np.ndarray, start: int = 0) -> list[VectorRow]:
    return [
        VectorRow(
            seq=start + i + 1,
            id=f"m{start + i}",
            role="r",
            owner="o" if i % 4 else "",
            type="info" if i % 3 else "episode",
            archived=i % 13 == 0,
            embedding=vecs[i],
        )
        for i in range(len(vecs))
    ]


def _sketched(vecs: np.ndarray, monkeypatch) -> VectorIndex:
    monkeypatch.setattr(vectors, "SKETCH_FROM", 100)
    index = VectorIndex(vecs.shape[1])
    index._apply(_rows(vecs))
    anyio.run(index.keep_sketch)
    assert index.basis is not None and index.sketched == index.size
    return index


def _whole(index: VectorIndex, query: np.ndarray, mask: np.ndarray, floor: float):
    sims = np.where(mask, index.matrix[: len(mask)] @ query, -np.inf)
    best = int(sims.argmax())
    return (best, float(sims[best])) if sims[best] >= floor else (-1, -np.inf)


@pytest.fixture(autouse=True, params=["float32", "half width"])
def width(request, monkeypatch) -> str:
    """Every test here twice: on float32 rows, and on rows held at half width from the first
    (`storage.half_width`), where every answer must still be the whole product's."""
    if request.param == "half width":
        monkeypatch.setattr(vectors, "HALF_WIDTH_FROM", 0)
    return request.param


def _counted_gathers(monkeypatch, index: VectorIndex) -> list[int]:
    """How many rows each search multiplies in full (the rows it takes from the matrix)."""
    sizes: list[int] = []
    if index.floats is None:  # at half width: the gathered products, a block at a time
        real = vectors.padded_product

        def counting(matrix, rows, query):
            sizes.append(int(rows.size))
            return real(matrix, rows, query)

        monkeypatch.setattr(vectors, "padded_product", counting)
        return sizes

    class Counting(np.ndarray):
        def __getitem__(self, key):
            if isinstance(key, np.ndarray):
                sizes.append(int(key.size))
            return np.ndarray.__getitem__(self.view(np.ndarray), key)

    monkeypatch.setattr(index, "floats", index.matrix.view(Counting))
    return sizes


def test_the_bound_is_never_under_a_true_cosine():
    rows = _clustered(3000)
    basis = sketch.fit(rows[:500], 6)
    assert np.allclose(basis @ basis.T, np.eye(6), atol=1e-5)
    inside, rest = sketch.project(basis, rows)
    queries = np.concatenate([_near(rows, 40, 0.02), _clustered(40, seed=11)])
    upper = sketch.bounds(inside, rest, basis, queries)
    exact = rows @ queries.T
    assert (upper >= exact).all()
    # Without the part outside the basis, the bound would be wrong for many pairs.
    assert ((inside @ (queries @ basis.T).T) < exact - 1e-3).any()
    assert np.allclose(sketch.bounds(inside, rest, basis, queries[0]), upper[:, 0])


def test_nearest_above_a_floor_is_the_whole_products_answer_from_few_rows(monkeypatch):
    index = _sketched(_clustered(4000), monkeypatch)
    mask = index.mask(Scope(owner="o"), types={"info"})
    queries = np.concatenate([_near(index.matrix[: index.size], 30, 0.03), _clustered(30, 5)])
    expected = [_whole(index, q, mask, 0.92) for q in queries]
    assert sum(row >= 0 for row, _ in expected) >= 15  # near-duplicates found, and misses
    gathered = _counted_gathers(monkeypatch, index)
    found = index.nearest(queries, [mask] * len(queries), 0.92)
    assert [row for row, _ in found] == [row for row, _ in expected]
    assert np.allclose([c for _, c in found], [c for _, c in expected], atol=1e-5)
    assert gathered and max(gathered) < index.size // 10


def test_one_query_above_a_floor_is_the_whole_products_answer_from_few_rows(monkeypatch):
    # A write asks alone: its check runs the sketch as one split matrix-vector product. The
    # vectors are wider than the basis, so part of each cosine is outside it.
    rng = np.random.default_rng(11)
    wide = np.concatenate([_clustered(4000), 0.35 * rng.standard_normal((4000, 96))], axis=1)
    wide = (wide / np.linalg.norm(wide, axis=1, keepdims=True)).astype(np.float32)
    index = _sketched(wide, monkeypatch)
    assert index.basis is not None and index.basis.shape[0] < wide.shape[1]
    mask = index.mask(Scope(owner="o"), types={"info"})
    # Rows at cosines just over the floor, the rest of each query off in a random direction.
    rows = index.matrix[rng.integers(0, index.size, 20)]
    off = rng.standard_normal(rows.shape).astype(np.float32)
    off -= np.sum(off * rows, axis=1, keepdims=True) * rows
    off /= np.linalg.norm(off, axis=1, keepdims=True)
    cos = rng.uniform(0.922, 0.935, (20, 1)).astype(np.float32)
    queries = np.concatenate(
        [cos * rows + np.sqrt(1 - cos**2) * off, rng.standard_normal((10, 144))]
    )
    queries = (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)
    gathered = _counted_gathers(monkeypatch, index)
    found = [index.nearest(q[None, :], [mask], 0.92)[0] for q in queries]
    expected = [_whole(index, q, mask, 0.92) for q in queries]
    assert sum(row >= 0 for row, _ in expected) >= 10
    assert [row for row, _ in found] == [row for row, _ in expected]
    assert np.allclose([c for _, c in found], [c for _, c in expected], atol=1e-5)
    assert gathered and max(gathered) < index.size // 10


def test_nearest_without_a_floor_still_names_the_best_row(monkeypatch):
    index = _sketched(_clustered(1000), monkeypatch)
    mask = index.has_vector[: index.size]
    q = _clustered(1, 21)[0]
    row, cos = index.nearest(q[None, :], [mask])[0]
    sims = index.matrix[: index.size] @ q
    assert row == int(np.argmax(sims)) and cos == pytest.approx(float(sims.max()), abs=1e-6)
    assert index.nearest(q[None, :], [mask], 0.999) == [(-1, -np.inf)]


def test_search_above_a_floor_keeps_the_order_and_drops_what_is_under(monkeypatch):
    index = _sketched(_clustered(4000), monkeypatch)
    mask = index.has_vector[: index.size].copy()
    mask[::5] = False  # some of the queries' sources among them
    for q in _near(index.matrix[: index.size], 20, 0.02, seed=4):
        sims = np.where(mask, index.matrix[: index.size] @ q, -np.inf)
        order = np.argsort(-sims, kind="stable")[:5]
        expected = [(index.ids[r], float(sims[r])) for r in order if sims[r] >= 0.9]
        found = index.search(q, mask, 5, floor=0.9)
        assert [i for i, _ in found] == [i for i, _ in expected]
        assert np.allclose([c for _, c in found], [c for _, c in expected], atol=1e-5)


def test_rows_written_after_the_sketch_are_sketched_and_found(monkeypatch):
    vecs = _clustered(2000)
    index = _sketched(vecs[:1500], monkeypatch)
    index._apply(_rows(vecs[1500:], start=1500))
    assert index.sketched == index.size == 2000
    # A row rewritten in place with another vector is found by its new one only.
    old = index.matrix[10].copy()
    fresh = _clustered(1, 77)[0]
    index._apply([VectorRow(11, "m10", "r", "o", "info", False, fresh)])
    mask = index.has_vector[: index.size].copy()
    assert index.nearest(fresh[None, :], [mask], 0.99)[0][0] == 10
    assert index.nearest(old[None, :], [mask], 0.999)[0][0] != 10
    last = index.matrix[1999].copy()
    assert index.nearest(last[None, :], [mask], 0.99)[0][0] in (1999, 1998)


def test_rows_the_sketch_has_not_reached_are_multiplied_in_full(monkeypatch):
    vecs = _clustered(2000)
    index = _sketched(vecs[:1800], monkeypatch)
    index.sketched = 1790  # as while `keep_sketch` catches up: the last rows are not sketched
    index._apply(_rows(vecs[1800:], start=1800))
    assert index.sketched == 1790
    mask = index.has_vector[: index.size].copy()
    for row in (1795, 1850, 1999):
        q = index.matrix[row].copy()
        assert index.nearest(q[None, :], [mask], 0.999)[0][0] == row
        assert index.search(q, mask, 1, floor=0.999)[0][0] == f"m{row}"
    # Too little sketched for it to pay: the whole product (no rows gathered), the same answers.
    index.sketched = 100
    q = index.matrix[1850].copy()
    gathered = _counted_gathers(monkeypatch, index)
    assert index.nearest(q[None, :], [mask], 0.999)[0][0] == 1850
    assert gathered == []


def test_a_small_index_has_no_sketch():
    index = VectorIndex(DIM)
    index._apply(_rows(_clustered(300)))
    anyio.run(index.keep_sketch)
    assert index.basis is None and index.sketched == 0


@pytest.mark.anyio
async def test_writes_through_the_sketch_keep_near_duplicates_and_tombstones(
    store_path, monkeypatch
):
    """A store past SKETCH_FROM: a rewording names its twin, and a forgotten text written
    again is blocked, as without the sketch."""
    monkeypatch.setattr(vectors, "SKETCH_FROM", 64)
    settings = Settings(store=store_path, owner="coder@laptop", dedup_similarity=0.8)
    words = [f"w{i}" for i in range(400)]
    texts = [" ".join(words[5 * i : 5 * i + 5]) for i in range(80)]
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        ids = [r.id for r in await mem.author_many([{"content": t} for t in texts])]
        first = await mem.author(texts[3] + " w3")
        assert mem.engine.index.basis is not None
        assert mem.engine.index.sketched == mem.engine.index.size
        assert first.status == "created" and first.similar_to.id == ids[3]
        await mem.forget(ids[7])
        assert mem.engine.index.sketched == mem.engine.index.size
        again = await mem.author(texts[7] + ".")  # not the same text: found by its cosine
        assert again.status == "blocked-by-tombstone" and again.id == ids[7]
        assert again.tombstone.similarity >= 0.95


def test_a_floor_is_compared_as_python_compares_it_not_rounded_to_float32():
    # A cosine of exactly float32(0.9) against a floor a hair above it: float32 rounds that
    # floor down to the cosine, so a float32 comparison would let the row through.
    cos = float(np.float32(0.9))
    floor = cos + 1e-9
    assert np.float32(floor) == np.float32(cos) and cos < floor
    rows = np.zeros((2, DIM), dtype=np.float32)
    rows[0, 0], rows[0, 1] = cos, np.sqrt(1 - cos * cos)
    rows[1, 0] = 1.0
    index = VectorIndex(DIM)
    index._apply(_rows(rows))
    query = np.zeros(DIM, dtype=np.float32)
    query[0] = 1.0
    mask = np.ones(2, dtype=bool)
    assert [i for i, _ in index.search(query, mask, 2, floor=floor)] == ["m1"]
    assert [i for i, _ in index.search(query, mask, 2, floor=cos)] == ["m1", "m0"]


def _large(monkeypatch, n: int = 6000, directions: int = 12) -> VectorIndex:
    """An index past RECALL_SKETCH_FROM (lowered), sketched on fewer directions than its
    width, so the bounds leave some rows and cut the rest."""
    monkeypatch.setattr(vectors, "RECALL_SKETCH_FROM", 1000)
    monkeypatch.setattr(sketch, "DIM", directions)
    return _sketched(_clustered(n), monkeypatch)


def _whole_search(index: VectorIndex, query, mask, n):
    saved, vectors.RECALL_SKETCH_FROM = vectors.RECALL_SKETCH_FROM, 10**9
    try:
        return index.search(query, mask, n)
    finally:
        vectors.RECALL_SKETCH_FROM = saved


def test_a_large_search_reads_few_rows_and_answers_exactly_as_the_whole_product(monkeypatch, width):
    index = _large(monkeypatch)
    # At half width a gathered row costs a row of the whole product, and up to two thirds of
    # the rows are gathered (`HALF_WIDTH_PLACING_SHARE`) besides the probes: fewer rows than
    # every row. In float32 a gathered row costs more, and a quarter at most are gathered.
    most = index.size // 3 if width == "float32" else index.size
    scope_masks = [
        index.mask(Scope(owner="o")),
        index.mask(Scope(owner="o"), types={"info"}),
        index.has_vector[: index.size].copy(),
    ]
    queries = np.concatenate([_near(index.matrix[: index.size], 15, 0.2), _clustered(15, 5)])
    gathered = _counted_gathers(monkeypatch, index)
    for mask in scope_masks:
        for q in queries:
            expected = _whole_search(index, q, mask, 20)
            del gathered[:]
            found = index.search(q, mask, 20)
            # The same ids in the same order, and the same cosines to the bit.
            assert found == expected
            assert gathered and sum(gathered) < most


def test_a_large_search_finds_rows_the_sketch_has_not_reached(monkeypatch):
    index = _large(monkeypatch)
    index.sketched = index.size - 40  # as while the sketch catches up
    mask = index.has_vector[: index.size].copy()
    gathered = _counted_gathers(monkeypatch, index)
    for row in (index.size - 30, index.size - 1, 17):
        q = index.matrix[row].copy()
        del gathered[:]
        found = index.search(q, mask, 5)
        assert gathered  # through the sketch (the whole product gathers nothing)
        assert found == _whole_search(index, q, mask, 5)
        assert index.ids[row] in [memory_id for memory_id, _ in found]
    # Rows not sketched are multiplied whatever the mask says; the mask still decides.
    mask[index.size - 30 :] = False
    q = index.matrix[index.size - 30].copy()
    del gathered[:]
    found = index.search(q, mask, 5)
    assert gathered and found == _whole_search(index, q, mask, 5)
    assert index.ids[index.size - 30] not in [memory_id for memory_id, _ in found]


def test_equal_cosines_at_the_last_place_come_back_as_the_whole_product_has_them(monkeypatch):
    vecs = _clustered(6000)
    twin = vecs[100]
    vecs[[2500, 4000, 5999]] = twin  # three rows with the very same vector as row 100
    monkeypatch.setattr(vectors, "RECALL_SKETCH_FROM", 1000)
    monkeypatch.setattr(sketch, "DIM", 12)
    index = _sketched(vecs, monkeypatch)
    mask = index.has_vector[: index.size].copy()
    q = _near(twin[None, :], 1, 0.05)[0]
    gathered = _counted_gathers(monkeypatch, index)
    for n in (1, 2, 3, 4, 5, 30):
        del gathered[:]
        found = index.search(q, mask, n)
        assert gathered and found == _whole_search(index, q, mask, n)


def test_each_tier_of_a_large_search_keeps_its_own_places(monkeypatch):
    # 36 directions: bounds tight enough that every search here answers from the rows left
    # (with 12, each fell back to the whole product after its probes).
    index = _large(monkeypatch, directions=36)
    index.archived[: index.size : 3] = True
    index.faded[: index.size : 3] = True  # a large faded tier
    mask = index.mask(Scope(owner="o"), faded=True)
    gathered = _counted_gathers(monkeypatch, index)
    for q in _near(index.matrix[: index.size], 10, 0.2, seed=12):
        del gathered[:]
        found = index.search_tier_rows(q, mask, 20, 10)
        # Each tier's probes, then the rows that can place: gathered, not the whole product.
        assert len(gathered) == 3 and sum(gathered) < index.size // 4
        saved, vectors.RECALL_SKETCH_FROM = vectors.RECALL_SKETCH_FROM, 10**9
        expected = index.search_tier_rows(q, mask, 20, 10)
        vectors.RECALL_SKETCH_FROM = saved
        # Each tier's rows and cosines, as the whole product gives them.
        assert all(
            np.array_equal(got, want)
            for tier, whole in zip(found, expected, strict=True)
            for got, want in zip(tier, whole, strict=True)
        )
        assert found[1][0].size == 10


def test_a_gathered_product_gives_each_row_the_bits_the_whole_product_gives_it():
    rng = np.random.default_rng(5)
    for size in (9000, 9001, 12345):
        index = VectorIndex(384)
        v = rng.standard_normal((size, 384)).astype(np.float32)
        index._apply(info_rows(v))
        q = rng.standard_normal(384).astype(np.float32)
        whole = index.similarities(q)
        for count in (1, 15, 17, 333, 8200, 8999):
            rows = np.sort(rng.choice(size, count, replace=False))
            assert np.array_equal(vectors.padded_product(index.matrix, rows, q), whole[rows])


@pytest.mark.anyio
async def test_a_server_sketches_its_rows_between_calls_once_recall_needs_them(
    store_path, monkeypatch
):
    monkeypatch.setattr(vectors, "SKETCH_FROM", 64)
    settings = Settings(store=store_path, owner="coder@laptop")
    words = [f"w{i}" for i in range(400)]
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        await mem.author_many([{"content": " ".join(words[i : i + 5])} for i in range(120)])
        index = mem.engine.index
        index.basis, index.sketched = None, 0  # as a process that only reads finds it
        await mem.recall("w7 w8")
        with anyio.fail_after(10):
            while index.sketched < index.size:
                await anyio.sleep(0.01)
        assert index.basis is not None and not index.wants_sketch()
