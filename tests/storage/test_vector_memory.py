"""The vector index's memory (resident set ≤ 400 MB at 100k memories): growth without a second
copy of the matrix, answers identical to an index built in one go, and freed memory handed back."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import anyio
import numpy as np
import pytest
from machine import machine_lacks
from vector_rows import info_rows

from nooa_mcp.domain.scope import Scope
from nooa_mcp.malloc_tuning import release_free_memory, tune_malloc
from nooa_mcp.storage import vectors
from nooa_mcp.storage.base import VectorRow
from nooa_mcp.storage.vectors import GROW_STEP, VectorIndex

DIM = 32


def _rows(start: int, stop: int, vectors: np.ndarray) -> list[VectorRow]:
    return [
        VectorRow(
            seq=i + 1,
            id=f"m{i}",
            role="r" if i % 3 else "s",
            owner="",
            type="info" if i % 5 else "episode",
            archived=i % 11 == 0,
            embedding=vectors[i] if i % 17 else None,
        )
        for i in range(start, stop)
    ]


def _vectors(n: int) -> np.ndarray:
    v = np.random.default_rng(7).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _filled(n: int, page: int) -> VectorIndex:
    vectors = _vectors(n)
    index = VectorIndex(DIM)
    for lo in range(0, n, page):
        index._apply(_rows(lo, min(lo + page, n), vectors))
    return index


def test_growing_row_by_row_answers_exactly_as_an_index_filled_in_one_go():
    n = 3 * GROW_STEP + 123
    grown, once = _filled(n, 1), _filled(n, n)
    assert grown.size == once.size == n and list(grown.ids) == list(once.ids)
    for name in ("has_vector", "archived", "role_code", "owner_code", "type_code", "seqs"):
        assert np.array_equal(getattr(grown, name)[:n], getattr(once, name)[:n]), name
    assert np.array_equal(grown.matrix[:n], once.matrix[:n])
    scope = Scope(owner=None, roles={"r"})
    for q in _vectors(n)[:20]:
        assert np.array_equal(grown.similarities(q), once.similarities(q))
        mask = grown.mask(scope, types={"info"})
        assert np.array_equal(mask, once.mask(scope, types={"info"}))
        # Same ids, same order, same cosines: growth never changes a ranking.
        assert grown.search(q, mask, 25) == once.search(q, mask, 25)


def _counted_products(monkeypatch) -> list[int]:
    """Record the row count of every `vectors.product` call from now on."""
    from nooa_mcp.storage import vectors

    shapes: list[int] = []
    real = vectors.product

    def counting(rows, query, picked=None):
        shapes.append(rows.shape[0] if picked is None else picked.size)
        return real(rows, query, picked)

    monkeypatch.setattr(vectors, "product", counting)
    return shapes


def test_a_search_over_few_rows_reads_only_them_and_answers_as_over_all(monkeypatch):
    """The tombstone check searches the archived rows only: under 1 row in SPARSE_SHARE, the
    product runs over those rows alone, with the same answer as masking a whole product."""
    index = _filled(2000, 2000)
    shapes = _counted_products(monkeypatch)
    archived = index.archived[: index.size] & index.has_vector[: index.size]  # ~1 in 11
    everything = index.has_vector[: index.size]
    for q in _vectors(50)[:10]:
        shapes.clear()
        few = index.search(q, archived, 5)
        # Those rows alone, padded to a whole number of the kernel's lanes.
        assert len(shapes) == 1 and 0 <= shapes[0] - int(archived.sum()) < vectors.LANES
        sims = index.matrix[: index.size] @ q
        best = np.flatnonzero(archived)[np.argsort(-sims[archived], kind="stable")[:5]]
        assert [i for i, _ in few] == [index.ids[r] for r in best]
        assert np.allclose([c for _, c in few], sims[best], atol=1e-6)
        shapes.clear()
        assert len(index.search(q, everything, 5)) == 5 and shapes == [index.size]


def test_a_search_from_a_start_row_reads_only_the_rows_after_it(monkeypatch):
    """A write looks at the rows added after its shared product: a mask over those rows only
    (`start`), the same answer as a mask over every row that keeps none before it."""
    index = _filled(2000, 2000)
    shapes = _counted_products(monkeypatch)
    n = index.size
    for since, q in zip((1990, 1500, 0, n), _vectors(50)[:4], strict=True):
        tail = index.has_vector[since:n].copy()
        tail[::3] = False
        whole = np.zeros(n, dtype=bool)
        whole[since:] = tail
        shapes.clear()
        found = index.search(q, tail, 3, start=since)
        assert all(size <= n - since for size in shapes)
        assert found == index.search(q, whole, 3)
        if since < n:
            assert found and all(index.ids.get(i) >= since for i, _ in found)


def test_the_matrix_grows_keeping_its_rows_and_in_place_when_nobody_else_holds_it():
    index = _filled(GROW_STEP, GROW_STEP)
    capacity = index.matrix.shape[0]
    ident = id(index.matrix)  # not a reference: holding one would make the index copy
    index._apply(_rows(GROW_STEP, capacity + 1, _vectors(capacity + 1)))
    assert index.matrix.shape[0] >= capacity + GROW_STEP
    expected = _vectors(index.size) * _has(index.size)
    assert np.array_equal(index.matrix[: index.size], expected)
    assert not index.matrix[index.size :].any()
    # The same array resized (realloc, mremap for a large block), not a new matrix filled
    # beside the old one: both were resident at once (+150 MB at 100k). Under a tracer
    # (coverage, a debugger) the traced frames hold one more reference to the array, numpy's
    # resize refuses as it does for a reader's, and the index rightly copies (as the next
    # test checks), so only the rows are asserted there.
    if sys.gettrace() is None:
        assert id(index.matrix) == ident


def _has(n: int) -> np.ndarray:
    """1 for rows with a vector, 0 for the rows `_rows` leaves without one."""
    return np.array([[1.0 if i % 17 else 0.0] for i in range(n)], dtype=np.float32)


def test_growth_keeps_the_array_a_reader_holds_intact_and_copies_instead():
    index = _filled(GROW_STEP, GROW_STEP)
    held = index.matrix  # as a reflection sweep in a worker thread holds it
    snapshot = held.copy()
    index._apply(_rows(GROW_STEP, held.shape[0] + 10, _vectors(held.shape[0] + 10)))
    assert index.matrix is not held
    assert np.array_equal(held, snapshot)
    assert np.array_equal(index.matrix[: held.shape[0]], snapshot)


def test_a_cold_open_allocates_fresh_zeros_for_its_headroom():
    index = VectorIndex(DIM)
    index._grow(10_000)
    assert index.matrix.shape == (10_000, DIM) and not index.matrix.any()
    assert all(len(getattr(index, n)) == 10_000 for n in ("seqs", "has_vector", "type_code"))


GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


@pytest.fixture
def needs_glibc_fixture() -> None:
    if not GLIBC:
        machine_lacks("malloc arenas and malloc_trim are glibc's, and this C library is not glibc")


needs_glibc = pytest.mark.usefixtures("needs_glibc_fixture")

#: Four threads allocate at once, then glibc reports its arenas (malloc_info's <heap> entries).
ARENAS = """
import ctypes, sys, threading
from nooa_mcp import malloc_tuning
if sys.argv[1] == "capped":
    assert malloc_tuning.tune_malloc(2)
barrier = threading.Barrier(4)
def work():
    held = [bytearray(60_000) for _ in range(20)]
    barrier.wait()
threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
libc = ctypes.CDLL("libc.so.6")
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
out = sys.argv[2].encode()
fp = libc.fopen(out, b"w")
libc.malloc_info(0, fp)
libc.fclose(fp)
"""


def _resident(array: np.ndarray, start: int) -> tuple[int, int]:
    """Of the whole pages of `array`'s bytes from byte `start` on: how many are resident, and
    how many there are (`mincore`)."""
    import ctypes
    import mmap

    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    page = mmap.PAGESIZE
    first = -(-(array.ctypes.data + start) // page) * page
    last = (array.ctypes.data + array.nbytes) // page * page
    pages = (last - first) // page
    vec = (ctypes.c_ubyte * pages)()
    assert libc.mincore(first, last - first, vec) == 0, ctypes.get_errno()
    return sum(b & 1 for b in vec), pages


@needs_glibc
def test_rows_a_matrix_grows_by_ahead_of_its_writes_are_not_resident():
    """Growth in place zero-fills the rows it adds ahead (numpy's resize), which made a
    GROW_STEP of 384-d rows resident (6 MiB) for the one row written: those pages are handed
    back, and read as zeros until written."""
    dim = 384
    n = GROW_STEP + 10
    vectors = np.random.default_rng(5).standard_normal((n + 1, dim)).astype(np.float32)
    rows = info_rows(vectors[: n + 1])
    index = VectorIndex(dim)
    index._apply(rows[:GROW_STEP])
    index._apply(rows[GROW_STEP:n])  # grows in place, 10 rows written
    capacity = index.matrix.shape[0]
    assert capacity >= n + GROW_STEP - 10
    row_bytes = dim * 4
    resident, pages = _resident(index.matrix, n * row_bytes)
    assert pages >= (capacity - n) * row_bytes // 4096 - 1 > 1000
    assert resident == 0
    assert not index.matrix[n:].any()
    assert np.array_equal(index.matrix[:n], vectors[:n])
    index._apply(rows[n:])  # a row written there is resident, and kept
    assert _resident(index.matrix, n * row_bytes)[0] >= 1
    assert np.array_equal(index.matrix[: n + 1], vectors)
    assert index.search(vectors[n], index.mask(Scope(owner=None, roles={"r"})), 1)[0][0] == f"m{n}"


@needs_glibc
def test_release_free_memory_trims_on_glibc():
    garbage = [bytes(2000) for _ in range(5000)]
    del garbage
    assert release_free_memory() is True


@needs_glibc
@pytest.mark.parametrize(("mode", "most"), [("capped", 2), ("default", 5)])
def test_a_server_process_keeps_at_most_two_malloc_arenas(tmp_path, mode, most):
    report = tmp_path / "malloc.xml"
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    subprocess.run(
        [sys.executable, "-c", ARENAS, mode, str(report)], check=True, env=env, timeout=60
    )
    heaps = report.read_text().count("<heap nr=")
    # Uncapped, every thread that allocates gets an arena of its own: the main one and four.
    assert heaps == most


@needs_glibc
@pytest.mark.parametrize("variable", ["MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_"])
def test_what_the_user_set_for_malloc_is_left_alone(monkeypatch, variable):
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    assert tune_malloc() is True
    monkeypatch.setenv(variable, "4")
    assert tune_malloc() is False


@pytest.mark.real_model
def test_minilm_runs_without_the_onnxruntime_arena_and_embeds_identically(minilm, monkeypatch):
    import onnxruntime as ort

    assert minilm._session.get_session_options().enable_cpu_mem_arena is False
    texts = ["where is the deploy key", "the cat sat on the mat", "quarterly tax forms due"]
    ours = np.stack([minilm._run([t])[0] for t in texts])
    # The same file in a session with onnxruntime's defaults (arena on) embeds the same.
    monkeypatch.setattr(
        minilm, "_session", ort.InferenceSession(str(minilm.model_path), ort.SessionOptions())
    )
    assert minilm._session.get_session_options().enable_cpu_mem_arena is True
    theirs = np.stack([minilm._run([t])[0] for t in texts])
    assert np.array_equal(ours, theirs)


def test_an_id_repeated_within_one_batch_keeps_one_row_with_its_latest_values():
    vectors = np.random.default_rng(3).standard_normal((3, DIM)).astype(np.float32)
    first = _rows(0, 1, vectors)[0]
    later = VectorRow(
        seq=first.seq,
        id=first.id,
        role="r",
        owner="",
        type="episode",
        archived=True,
        embedding=vectors[2],
    )
    index = VectorIndex(DIM)
    index._apply([first, *_rows(1, 2, vectors), later])
    assert index.size == 2 and list(index.ids) == ["m0", "m1"]
    assert index.archived[0] and np.array_equal(index.vector("m0"), vectors[2])


@pytest.mark.parametrize(("rows", "handed_off"), [(5, 0), (250, 1), (1001, 2)])
def test_a_split_product_equals_the_whole_one(monkeypatch, rows, handed_off):
    """Large matrices are cut into one part per core (the caller computes one, helper threads
    the others); every row's cosine is the same as one product over the whole matrix."""
    from concurrent.futures import ThreadPoolExecutor

    from nooa_mcp.storage import vectors

    class Counting(ThreadPoolExecutor):
        submitted = 0

        def submit(self, *args, **kwargs):
            Counting.submitted += 1
            return super().submit(*args, **kwargs)

    pool = Counting(2)
    monkeypatch.setattr(vectors, "SPLIT_ROWS", 100)
    monkeypatch.setattr(vectors, "_cores", lambda: 3)
    monkeypatch.setattr(vectors, "_helpers", lambda: pool)
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((rows, 16)).astype(np.float32)
    query = rng.standard_normal(16)  # float64: converted, never refused
    got = vectors.product(matrix, query)
    pool.shutdown()
    assert got.dtype == np.float32 and got.shape == (rows,)
    assert np.allclose(got, matrix.astype(np.float64) @ query, atol=1e-4)
    assert Counting.submitted == handed_off


@pytest.mark.parametrize(
    ("blas_threads", "kernel"), [("1", "_blas_product"), ("2", "_einsum_product")]
)
def test_the_product_uses_blas_only_when_it_runs_one_thread(blas_threads, kernel):
    """BLAS with worker threads would wake them for every query (they spin on after it);
    with one thread, as in a server process, it is the faster kernel."""
    if int(blas_threads) > (os.cpu_count() or 1):
        machine_lacks("OpenBLAS runs at most one thread per core, and this machine has one")
    code = "from nooa_mcp.storage import vectors\nprint(vectors._kernel().__name__)\n"
    env = {**os.environ, "OPENBLAS_NUM_THREADS": blas_threads}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == kernel


def test_row_hashes_are_kept_until_the_row_is_written_again(monkeypatch):
    """A reflection pass fingerprints every row of its role: the vector's part is hashed once
    and kept, and a row written since is hashed again from its new vector."""
    index = _filled(3000, 3000)
    rows = np.arange(index.size)
    hashed: list[int] = []
    real = vectors.vector_hashes

    def counted(block: np.ndarray) -> np.ndarray:
        hashed.append(len(block))
        return real(block)

    monkeypatch.setattr(vectors, "vector_hashes", counted)
    first = anyio.run(index.row_hashes, rows)
    assert np.array_equal(first, real(index.matrix[: index.size]))
    assert sum(hashed) == index.size and max(hashed) <= vectors.HASH_STEP
    hashed.clear()
    fresh = _vectors(3001)[3000]
    index._apply([VectorRow(8, "m7", "r", "", "info", False, fresh)])
    again = anyio.run(index.row_hashes, rows)
    assert hashed == [1]
    assert again[7] == real(fresh[None, :])[0] != first[7]
    assert np.array_equal(np.delete(again, 7), np.delete(first, 7))
