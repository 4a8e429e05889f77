"""The in-process vector matrix: a cache of the store's embeddings (DESIGN.md §15).

Rebuilt on open, then refreshed incrementally: every write moves a store-wide revision, and when
the store's change token says another connection committed (or this process wrote), the rows
changed since the last mark are pulled in. Search is one matrix–vector product over float32
rows. One index serves every owner of a process; scopes become boolean masks.

Which roles' rows it holds is `residency`'s business (`storage.residency`): a server that
serves a few roles of a shared database loads each role's rows the first time a scope that
sees it is searched (`ensure`), pulls changes for those roles only, and lets idle roles go
(`release_idle`, at a moment no caller holds row numbers: `held`). Without a residency the
index holds every role, as a whole-store cache. The per-role code is the section "Roles held"
below; every array of `_PER_ROW` follows it without knowing.
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import anyio
import numpy as np

from ..domain.scope import Scope
from ..malloc_tuning import release_free_memory, release_zeroed_pages
from . import sketch
from .base import COMMON_SHARE, Store, UseState, VectorRow
from .facts import FACT_ARRAYS, HeldFacts, HeldRow
from .half_width import HalfWidth, quantize
from .ids import IdTable
from .links import HeldLinks
from .postings import HeldKeywords
from .residency import Residency

#: Rows read per query while the cache catches up with the store or loads a role. A page (its
#: rows as objects, their vectors as blobs: ~1.6 MB at 384-d) is freed once applied, but the
#: heap it took stays, and later allocations make it resident again: pages of 5,000 rows left
#: a 100k server ~15 MiB larger after its first writes (BENCHMARKS.md, "Resident memory
#: (RSS)"). The price is more reads: a 100k role loads in ~4.6 s against ~4.1 s; pages of
#: 1,000 rows took 2 MiB more off and 5.2 s, and a server's first answers wait for that load.
SYNC_PAGE = 2000
#: Rows of stems read into the keyword postings between two turns of the event loop: under a
#: millisecond of Python on average, which a call arriving meanwhile waits for (pages of 500
#: rows, counted a row at a time and merged as they grew, held the loop up to 150 ms: the
#: first recalls after a 100k server's start took ~200 ms against ~20).
LOAD_PAGE = 128
#: Rows added when the matrix grows in place (6 MB of float32 at 384-d).
GROW_STEP = 4096
#: From this many rows on, the index holds its vectors at half width (`storage.half_width`):
#: int16 codes and a scale per row, 73 MiB at 100k rows instead of 147. A product then
#: dequantizes each block of rows before multiplying it, which costs more than it reads below
#: ~32k rows (a 10k product ~1.5x the float32 one) and less from there on, where a recall
#: multiplies only the rows its sketch leaves (RECALL_SKETCH_FROM). Smaller indexes keep
#: float32, so their cosines are the written vectors' to the bit.
HALF_WIDTH_FROM = 32768
#: Rows quantized at a time when an index turns to half width (`_narrow`).
NARROW_STEP = 4096
#: The arrays with one entry per row, grown together (and the vectors: `_vector_arrays`).
_PER_ROW = (
    "has_vector",
    "archived",
    "faded",
    "role_code",
    "owner_code",
    "type_code",
    "seqs",
    "sketch",
    "rest",
    "hashes",
    "hashed",
)
#: One query's product over at least twice this many rows is split across the cores: it reads
#: the whole matrix (15 MiB at 10k x 384, 147 MiB at 100k), straight from memory after the
#: model has run, and one core does not saturate the memory bus (BENCHMARKS.md has the
#: figures). Smaller matrices are not worth a hand-off to another thread.
SPLIT_ROWS = 4096
#: The same for a product of gathered rows (`product(..., picked)`), where each part copies
#: its rows before multiplying them: the copy costs more per row than the product, so the
#: hand-off pays from fewer rows (6,000 rows of 100k: 1.14 ms in one thread, 0.76 in two).
SPLIT_PICKED = 2048
#: Rows BLAS's matrix-vector kernel takes together. The rows left over at the end of a
#: product go through another loop, whose float32 sums can differ in the last bit; so a
#: product's parts are cut at multiples of this, a search over the whole index multiplies
#: up to the next multiple (the matrix's headroom is zeros), and a gather is padded to one
#: (`padded_product`): a row's cosine is the same bits whichever rows it was read with.
LANES = 16
#: A search whose mask keeps under 1 row in this many gathers those rows and multiplies only
#: them: gathering costs a copy of each kept row, so it pays below a third or so.
SPARSE_SHARE = 4
#: The same for the rows a recall's sketch leaves (`_placing_cosines`) when the rows are held
#: at half width: a gathered row and a row of the whole product are converted alike, so the
#: gather pays up to ~2/3 of the rows (60 % of 100k: 6.3 ms against 7.6 for every row).
HALF_WIDTH_PLACING_SHARE = 1.5
#: One odd 64-bit multiplier per vector component: a row's hash is the wrapping sum of its
#: float32 words times these (`row_hashes`), the same in every process on every machine.
_MIX = np.random.default_rng(0x9E3779B9).integers(1, 2**63, 4096, dtype=np.uint64) | np.uint64(1)
#: Rows hashed per step of `row_hashes`, the event loop free between steps. Each step copies
#: its rows and widens their words to uint64 (3 KB a row): 8,192 rows held the event loop 13 ms
#: and a pass's first hashing at 100k peaked 37 MiB above the matrix; 1,024 rows hold it
#: 0.7 ms, peak 5 MiB, and hash 100k rows in 53 ms instead of 80 (the same hashes).
HASH_STEP = 1024
#: Queries whose cosines one product holds at most (64 columns: 25 MB of scores at 100k rows).
NEAREST_BLOCK = 64
#: From this many rows on, searches above a cosine (`floor`) go through the sketch (see
#: `storage.sketch`); below it, the whole product costs under half a millisecond.
SKETCH_FROM = 4096
#: A search above a floor whose mask keeps under 1 row in this many gathers those rows
#: instead: the sketch reads a little of every row of the index, a gather copies each kept
#: row whole, so gathering pays only when the mask keeps very few (the tombstone check over
#: the archived rows).
SKETCH_SHARE = 128
#: Rows sketched per step while the sketch catches up, the event loop free between steps
#: (~2 ms a step at 64 directions).
SKETCH_STEP = 2048
#: From this many rows on, a recall's search reads the sketch first and multiplies in full
#: only the rows that can place (`_placing_cosines`): at 100k, ~5k rows of 100k are left
#: for a query's top 50, and the search takes ~4 ms where the whole product took ~8.
#: Below it, the whole product costs a millisecond or two and the sketch would not pay.
RECALL_SKETCH_FROM = 32768
#: Rows multiplied first per place a search fills, those whose cosine the sketch estimates
#: highest: their n-th best cosine is the line a row's bound must reach to be multiplied.
PROBES_PER_PLACE = 4

Kernel = Callable[[np.ndarray, np.ndarray, np.ndarray], Any]
#: The vectors as an index holds them: float32 rows, or rows at half width.
Matrix = np.ndarray | HalfWidth


def _blas_product(rows: np.ndarray, query: np.ndarray, out: np.ndarray) -> None:
    np.matmul(rows, query, out=out)


def _einsum_product(rows: np.ndarray, query: np.ndarray, out: np.ndarray) -> None:
    np.einsum("ij,j->i", rows, query, out=out)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@functools.cache
def _kernel() -> Kernel:
    """`rows @ query` into `out`, without waking BLAS worker threads.

    numpy's BLAS is the faster kernel (11.4 against 17.2 ms at 100k), but only when it runs
    one thread, as a server's does (`single_threaded_blas`): otherwise every product wakes
    BLAS's worker threads, which spin on after it against the event loop, SQLite and the
    model (a 10k product went from 2.5 to 36 ms on 2 loaded cores). einsum runs in the
    calling thread whatever BLAS is configured to do.
    """
    from threadpoolctl import threadpool_info

    threads = [i.get("num_threads", 0) for i in threadpool_info() if i.get("user_api") == "blas"]
    return _blas_product if threads and max(threads) == 1 else _einsum_product


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _helpers() -> ThreadPoolExecutor:
    """The threads that take the other parts of a split product (created on first use)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max(_cores() - 1, 1), thread_name_prefix="nooa-product")
        return _pool


def product(rows: Matrix, query: np.ndarray, picked: np.ndarray | None = None) -> np.ndarray:
    """`rows @ query` (or `rows[picked] @ query`) as float32, split across the cores for a
    large matrix (SPLIT_ROWS; SPLIT_PICKED for gathered rows).

    The calling thread computes the first part itself and waits for the others; numpy
    releases the interpreter lock inside each, so the parts run side by side. With
    `picked`, each part gathers its own rows too: the copy is most of such a product.
    Rows at half width are multiplied by `HalfWidth.multiply`, `half_width.BLOCK_ROWS` at a
    time from each part's start (a multiple of LANES, so every row is multiplied in the same
    company whichever rows are read with it) as unscaled codes, each result then times its
    row's scale: twice as fast as scaling every component first (10 against 21 ms for 100k
    rows on one core), within a rounding of the dequantized row's product.
    """
    query = np.asarray(query, dtype=np.float32)
    n = rows.shape[0] if picked is None else picked.size
    out = np.empty(n, dtype=np.float32)
    kernel = _kernel()

    def part(a: int, b: int) -> None:
        if isinstance(rows, HalfWidth):
            rows.multiply(slice(a, b) if picked is None else picked[a:b], query, out[a:b], kernel)
        else:
            kernel(rows[a:b] if picked is None else rows[picked[a:b]], query, out[a:b])

    parts = min(_cores(), n // (SPLIT_ROWS if picked is None else SPLIT_PICKED))
    if parts <= 1:
        part(0, n)
        return out
    bounds = [(n * i // parts) // LANES * LANES for i in range(parts)] + [n]
    spans = list(itertools.pairwise(bounds))
    pool = _helpers()
    others = [pool.submit(part, a, b) for a, b in spans[1:]]
    try:
        part(*spans[0])
    finally:
        for future in others:
            future.result()
    return out


def _no_rows(dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """An empty search result: no rows (int64) and no scores (`dtype`)."""
    return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=dtype)


def padded_product(matrix: Matrix, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """`product` of the gathered `rows` of `matrix`, padded to a multiple of `LANES` rows
    so that none is left to the kernel's leftover loop: each cosine the same bits as the
    whole matrix's product gives it."""
    short = -rows.size % LANES
    if short and rows.size:
        rows = np.concatenate([rows, np.full(short, rows[-1], dtype=rows.dtype)])
    return product(matrix, query, rows)[: rows.size - short]


def best(sims: np.ndarray, n: int) -> np.ndarray:
    """Positions of the `n` largest of `sims`, largest first, equal ones in position order.

    A full selection over 100k cosines (`np.argpartition`) took ~0.8 ms of the event loop a
    recall. Here the cosines are cut into at least 16·n blocks; the n-th largest of the
    blocks' maxima is at most the n-th largest cosine (n blocks each hold one at least as
    large), so every cosine that can place is at or above it, and only those few hundred
    are sorted. The order is fixed by the values and positions alone, never by how a
    selection algorithm happened to move ties.
    """
    size = sims.shape[0]
    n = min(n, size)
    if n <= 0:
        return np.empty(0, dtype=np.intp)
    width = size // (16 * n)
    if width >= 2:
        blocks = size // width
        maxima = sims[: blocks * width].reshape(blocks, width).max(axis=1)
        at = np.flatnonzero(sims >= np.partition(maxima, blocks - n)[blocks - n])
    else:
        at = np.arange(size)
    return at[np.argsort(-sims[at], kind="stable")[:n]]


def vector_hashes(rows: np.ndarray) -> np.ndarray:
    """Per row of float32 vectors, the wrapping sum of its words times `_MIX` (uint64)."""
    dim = rows.shape[1]
    mix = _MIX[:dim] if dim <= _MIX.size else np.resize(_MIX, dim)
    return rows.view(np.uint32).astype(np.uint64) @ mix


class VectorIndex:
    """Embeddings of every memory, with owner, type and archived flags for masking."""

    def __init__(self, dim: int, residency: Residency | None = None) -> None:
        self.dim = dim
        #: The roles held (None: every role, the whole store; see `storage.residency`).
        self.residency = residency
        #: Callers holding row numbers now (`held`): no role is let go meanwhile.
        self._holders = 0
        self._lock: anyio.Lock | None = None
        self.size = 0
        self.mark: Any = None
        self._token: Any = None
        self._dirty = True
        #: The vectors: float32 rows (`floats`) until the index reaches HALF_WIDTH_FROM rows,
        #: then int16 `codes` and a `scale` per row (`storage.half_width`); read through
        #: `matrix`, which is either kind.
        self.floats: np.ndarray | None = np.zeros((0, dim), dtype=np.float32)
        self.codes: np.ndarray | None = None
        self.scale: np.ndarray | None = None
        self.has_vector = np.zeros(0, dtype=bool)
        self.archived = np.zeros(0, dtype=bool)
        #: Archived by maintenance, not by its user: recall's faded tier (`domain.archive`).
        self.faded = np.zeros(0, dtype=bool)
        self.role_code = np.zeros(0, dtype=np.int32)
        self.owner_code = np.zeros(0, dtype=np.int32)
        self.type_code = np.zeros(0, dtype=np.int8)
        #: Row → id and id → row (`ids.get`, `ids.rows_of`), compactly (see `storage.ids`).
        self.ids = IdTable()
        self.seqs = np.zeros(0, dtype=np.int64)
        #: Each row's sketch and the norm it misses (`storage.sketch`), valid for the rows
        #: before `sketched` under `basis` (None until the index first reaches SKETCH_FROM
        #: rows; fitted once per process, so a row's sketch never changes meaning).
        self.sketch = np.zeros((0, min(sketch.DIM, dim)), dtype=np.float32)
        self.rest = np.zeros(0, dtype=np.float32)
        self.basis: np.ndarray | None = None
        self.sketched = 0
        #: Each row's vector hash (`row_hashes`), valid where `hashed` (cleared by a write).
        self.hashes = np.zeros(0, dtype=np.uint64)
        self.hashed = np.zeros(0, dtype=bool)
        self._sketching = False
        #: Moves whenever an intent may have changed (a row applied that is or was one, a
        #: write of this process that says so, a withdrawal) or rows moved (`release_idle`):
        #: what is derived from those rows (`Engine.intents`) stays valid while it stands
        #: still, once `sync` has run. A write of any other memory leaves it where it is,
        #: when it is noted and when the sync reads the row back.
        self.generation = 0
        #: The edges between memories of the roles held, loaded, pulled and let go with their
        #: rows (`storage.links`): ranking reads its spreading and supersession links here,
        #: asking `visible` which ends it may use.
        self.links = HeldLinks()
        #: What ranking scores each row on besides its vector (`storage.facts`), and where
        #: the uses of other processes are read from (`Store.use_changes`).
        self.facts = HeldFacts()
        #: Every row's keyword postings, by seq, whatever roles are held (`storage.postings`):
        #: recall's keyword search runs here once they are loaded (`keyword_hits`).
        self.keywords = HeldKeywords()
        self._seq_rows: tuple[tuple[int, int, int], np.ndarray] | None = None
        self._keywords_due: tuple[Any, int, int] | None = None
        #: Rows this process noted as it wrote them (`note`).
        self._noted = 0
        self.use_mark: Any = None
        self._use_token: Any = None
        self._row_writes = 0
        self._roles: dict[str, int] = {"": 0}
        self._owners: dict[str, int] = {"": 0}
        self._types: dict[str, int] = {}

    @property
    def matrix(self) -> Matrix:
        """Every row's vector as float32 (a `HalfWidth` dequantizes the rows it is asked for);
        rows past `size` are zeros."""
        floats = self.floats  # once: a worker thread reads this while the loop may narrow
        if floats is not None:
            return floats
        codes, scale = self.codes, self.scale  # set before `floats` is cleared (`_narrow`)
        assert codes is not None and scale is not None
        return HalfWidth(codes, scale)

    def _span(self, start: int, stop: int) -> Matrix:
        """Rows `start`…`stop` of `matrix`, without a copy."""
        floats = self.floats  # as in `matrix`
        if floats is not None:
            return floats[start:stop]
        codes, scale = self.codes, self.scale
        assert codes is not None and scale is not None
        return HalfWidth(codes[start:stop], scale[start:stop])

    def _put_vectors(self, vectors: dict[int, np.ndarray | None]) -> None:
        """Write these rows' vectors (None: no vector, a row of zeros)."""
        if not vectors:
            return
        rows = np.fromiter(vectors, dtype=np.int64, count=len(vectors))
        block = np.zeros((rows.size, self.dim), dtype=np.float32)
        for i, vec in enumerate(vectors.values()):
            if vec is not None:
                block[i] = vec
        if self.floats is not None:
            self.floats[rows] = block
            return
        assert self.codes is not None and self.scale is not None
        self.codes[rows], self.scale[rows] = quantize(block)

    def _narrow(self) -> None:
        """Turn float32 rows into half-width ones (`HALF_WIDTH_FROM`), a step at a time so
        no float64 copy of the matrix is made. Every row now reads a little differently:
        their hashes and sketches are taken again (`row_hashes`, `keep_sketch`)."""
        floats = self.floats
        assert floats is not None
        codes = np.zeros(floats.shape, dtype=np.int16)
        scale = np.zeros(floats.shape[0], dtype=np.float32)
        for lo in range(0, self.size, NARROW_STEP):
            hi = min(lo + NARROW_STEP, self.size)
            codes[lo:hi], scale[lo:hi] = quantize(floats[lo:hi])
        self.codes, self.scale, self.floats = codes, scale, None
        self.hashed[:] = False
        self.sketched = 0

    def mark_dirty(self) -> None:
        """This process wrote: pull on the next sync even if the change token did not move."""
        self._dirty = True
        self.generation += 1

    async def sync(self, store: Store) -> None:
        """Bring the cache up to date with the store."""
        token = await store.change_token()
        rewrote = store.row_writes != self._row_writes
        if rewrote:
            # This process rewrote rows: whatever services noted or not, ranking's columns
            # (`storage.facts`) must see them (and the uses such a write logged).
            self._row_writes = store.row_writes
            self._dirty = True
        # Edges are read when another connection committed or this store wrote edges, not
        # for this process's other writes (every recall's access log marks the index dirty;
        # on PostgreSQL a read of the edges is a round trip of its own).
        links_due = token != self._token or self.links.due(store)
        if not self._dirty and not links_due:
            return
        self._dirty = False
        self._token = token
        if links_due:
            # The links first: an edge pulled before its end's row is not used until the row
            # is (`visible`), so no edge of a row pulled below is missing when ranking asks.
            roles = None if self.residency is None else self.residency.filter()
            await self.links.sync(store, roles)
        if token != self._use_token or rewrote or self.use_mark is None:
            await self._pull_uses(store)
            self._use_token = token
        if self.residency is not None:
            with self.held():  # no role is let go while the pull reads
                await self._pull(store, self.residency.filter())
            return
        if self.size == 0:
            # Size the matrix once on a cold open: growing by doubling while 100k rows stream
            # in held two copies and an oversized one (peak RSS 620 MB at 100k, steady 300).
            # A quarter more for the writes to come: rows not written yet are zero pages the
            # kernel maps only when touched, so they cost nothing, while growing right after
            # opening copied the whole matrix (old and new resident at once: +150 MB at 100k,
            # a server's peak RSS 641 MB against 491 MB once open).
            stored = await store.row_count()
            self._grow(stored + stored // 4)
        await self._pull(store, None)

    async def _pull(self, store: Store, roles: list[str] | None) -> None:
        """Apply the rows changed since `mark`, with their vectors for `roles` (None: all)."""
        if roles is not None:
            if self.mark is None:
                # Nothing is read on open: each role is read when first searched (`ensure`),
                # and changes are pulled from here on.
                self.mark = await store.vector_mark()
                return
            if not roles:
                return  # no role held: nothing to pull (a role loaded later is read whole)
        pages = 0
        while True:
            # Paged, so the float32 blobs of a large store are never all in memory at once.
            rows, self.mark = await store.vector_changes(self.mark, SYNC_PAGE, roles)
            kept = rows if roles is None else self._held_rows(rows, roles)
            if len(kept) < len(rows) and any(r.type == "intent" for r in rows):
                self.generation += 1  # an intent of a role not held changed
            if kept:
                self._apply(kept)
            pages += 1
            if len(rows) < SYNC_PAGE:
                break
        if pages > 1:
            self.ids.settle()
            # Pages of row objects and blobs, freed into the heap and kept there.
            release_free_memory()

    async def _pull_uses(self, store: Store) -> None:
        """Apply the uses other connections logged since `use_mark` (this process's own are
        noted as they commit: `note_uses`). The first time, only the mark: every row read
        after it comes with its uses."""
        if store.in_transaction:
            return  # as for the links: a transaction's own uses may yet roll back
        if self.use_mark is None:
            self.use_mark = await store.ranking_mark()
            return
        uses, self.use_mark = await store.use_changes(self.use_mark)
        self.note_uses(uses)

    async def load_keywords(
        self, store: Store, between: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        """Read every row's stems into the keyword postings, `LOAD_PAGE` rows at a time,
        awaiting `between` (default: one turn of the event loop) before each next page
        (~7 µs of Python a row: 0.7 s at 100k, run in the background once the vectors are
        loaded, `Engine`); `keywords.ready` once done. Searches go to the store until then."""
        if self.keywords.ready:
            return
        token = await store.change_token()
        due = (token, store.row_writes, self._noted)
        keywords = HeldKeywords()
        mark = await _read_stems(store, keywords, None, LOAD_PAGE, between=between or _turn)
        # One merge of every entry (~2.5M at 100k, ~0.25 s), in a worker thread: numpy sorts
        # without the interpreter lock, and nothing else holds these postings yet.
        await anyio.to_thread.run_sync(keywords.merge)
        keywords.mark = mark
        self.keywords, self._keywords_due = keywords, due
        # The pages of stems read and parsed on the way are freed into the heap, where they
        # stayed resident: 12 MiB at 100k rows (a server 429 -> 417 MiB once it is loaded).
        release_free_memory()

    async def pull_keywords(self, store: Store) -> None:
        """Bring the keyword postings up to date, before a search of them (writes do not:
        a write's checks search no keyword, and on PostgreSQL a pull is a round trip)."""
        if self.keywords.ready:
            await self._pull_keywords(store, await store.change_token())

    async def _pull_keywords(self, store: Store, token: Any) -> None:
        """Apply the stems of every row changed since the postings' mark, of every role (BM25
        counts over the whole table), when another connection committed (`token`) or this
        process wrote or rewrote rows since the last pull: its own writes are noted in the
        index without a pull (`note`). Not inside a transaction: its rows may yet roll back,
        and their revisions be taken again by other rows; a search inside one goes to the
        store (`ranking.held_keywords`)."""
        if store.in_transaction:
            return
        due = (token, store.row_writes, self._noted)
        if due == self._keywords_due:
            return
        keywords = self.keywords
        keywords.mark = await _read_stems(store, keywords, keywords.mark, SYNC_PAGE)
        self._keywords_due = due

    def note_uses(self, uses: dict[str, UseState]) -> None:
        """Hold these memories' use histories, committed by this process or read from the
        store, unless the one held is already as late (`HeldFacts.put_uses`)."""
        ids = list(uses)
        for memory_id, row in zip(ids, self.ids.rows_of(ids).tolist(), strict=True):
            if row >= 0:
                self.facts.put_uses(row, memory_id, uses[memory_id])

    def held_rows(self, ids: Sequence[str]) -> dict[str, HeldRow]:
        """The candidates among `ids` whose facts are held (`storage.facts`), by id; the
        others are read from the store."""
        rows = self.ids.rows_of(list(ids))
        held = (rows >= 0) & (rows < self.size)
        held[held] = self.facts.known[rows[held]]
        at = rows[held]
        if not at.size:
            return {}
        found = [i for i, keep in zip(ids, held.tolist(), strict=True) if keep]
        return dict(zip(found, self.held_rows_at(at, found), strict=True))

    def held_rows_at(self, rows: np.ndarray, ids: list[str]) -> list[HeldRow]:
        """The candidates at `rows` (ids `ids`), each with its facts held: their types and
        flags, and the facts' columns, read for all of them at once."""
        names = self._type_names()
        return self.facts.rows(
            rows,
            ids,
            [names[t] for t in self.type_code[rows].tolist()],
            self.archived[rows].tolist(),
            self.faded[rows].tolist(),
        )

    def type_allowed(self, types: set[str]) -> np.ndarray:
        """A lookup table by type code: whether a row of that type is one of `types`."""
        allowed = np.zeros(len(self._types) + 1, dtype=bool)
        allowed[[self._types[t] for t in types if t in self._types]] = True
        return allowed

    def _type_names(self) -> list[str]:
        names = [""] * len(self._types)
        for name, code in self._types.items():
            names[code] = name
        return names

    def _apply(self, rows: list[VectorRow]) -> None:
        found = self.ids.rows_of([r.id for r in rows])
        if self._intent_among(rows, found):
            self.generation += 1
        self._grow(self.size + int((found < 0).sum()))
        before = self.size
        touched = []
        vectors: dict[int, np.ndarray | None] = {}  # the last of a row's, if it repeats
        added: dict[str, int] = {}  # rows this call appends (an id may repeat within `rows`)
        for r, known in zip(rows, found.tolist(), strict=True):
            row = known if known >= 0 else added.get(r.id)
            if row is None:
                row = added[r.id] = self.ids.append(r.id)
                self.size += 1
                self.seqs[row] = r.seq
            touched.append(row)
            self.hashed[row] = False
            vec = r.embedding
            usable = vec is not None and vec.shape[0] == self.dim
            vectors[row] = vec if usable else None
            self.has_vector[row] = usable
            self.archived[row] = r.archived
            self.faded[row] = r.archived and r.faded
            self.role_code[row] = self._roles.setdefault(r.role, len(self._roles))
            self.owner_code[row] = self._owners.setdefault(r.owner, len(self._owners))
            self.type_code[row] = self._types.setdefault(r.type, len(self._types))
            self.facts.put(row, r.id, r.facts)
        self._put_vectors(vectors)
        if self.basis is not None:
            # Rows rewritten keep their sketch true; rows appended to a complete sketch are
            # sketched here (the sketch first, then `sketched`, for readers in other threads).
            complete = self.sketched == before
            limit = self.size if complete else self.sketched
            redo = np.unique(np.array(touched, dtype=np.int64))
            redo = redo[redo < limit]
            if redo.size:
                self._sketch_rows(redo)
            if complete:
                self.sketched = self.size

    def _intent_among(self, rows: list[VectorRow], found: np.ndarray) -> bool:
        """Whether any of `rows` is an intent, or rewrites a held row (`found`) that was one."""
        if any(r.type == "intent" for r in rows):
            return True
        intent = self._types.get("intent")
        if intent is None:
            return False
        known = found[found >= 0]
        return bool((self.type_code[known] == intent).any())

    def _sketch_rows(self, rows: np.ndarray | slice) -> None:
        assert self.basis is not None
        self.sketch[rows], self.rest[rows] = sketch.project(self.basis, self.matrix[rows])

    async def row_hashes(self, rows: np.ndarray) -> np.ndarray:
        """A 64-bit hash of the bytes of each of these rows' vectors (what a reflection pass's
        fingerprints need of a vector), kept until the row is written again.

        A pass hashed every row of the role each time, a copy of the whole matrix for a
        pass that runs every 200 writes; now only the rows written since. Computed here, on
        the event loop that is the only writer of rows, a step at a time, so no hash outlives
        the vector it was taken from.
        """
        while True:
            missing = rows[~self.hashed[rows]]
            if missing.size == 0:
                return self.hashes[rows]
            part = np.unique(missing[:HASH_STEP])
            self.hashes[part] = vector_hashes(self.matrix[part])
            self.hashed[part] = True
            await anyio.sleep(0)

    def wants_sketch(self) -> bool:
        """Whether `keep_sketch` has rows to sketch and is not sketching them already."""
        return not self._sketching and self.size >= SKETCH_FROM and self.sketched < self.size

    async def keep_sketch(self, between: Callable[[], Awaitable[None]] | None = None) -> None:
        """Fit the sketch's basis once the index holds SKETCH_FROM rows, and sketch the rows
        not sketched yet, SKETCH_STEP at a time (a few ms each on the event loop, which is
        the only writer of rows), awaiting `between` (a moment between calls) before each
        step, or one turn of the loop. Searches meanwhile multiply unsketched rows in full."""
        if not self.wants_sketch():
            return
        self._sketching = True
        try:
            if self.basis is None:
                usable = np.flatnonzero(self.has_vector[: self.size])
                if usable.size == 0:
                    return
                picked = np.random.default_rng(0).choice(
                    usable, min(sketch.FIT_ROWS, usable.size), replace=False
                )
                sample = self.matrix[np.sort(picked)]
                # 4096 rows' 384 x 384 moment: tens of ms, off the event loop.
                self.basis = await anyio.to_thread.run_sync(
                    sketch.fit, sample, self.sketch.shape[1]
                )
            while self.sketched < self.size:
                await (between() if between is not None else anyio.sleep(0))
                stop = min(self.sketched + SKETCH_STEP, self.size)
                self._sketch_rows(slice(self.sketched, stop))  # a view: no copy of the rows
                self.sketched = stop
        finally:
            self._sketching = False

    def _reachable(self, queries: np.ndarray, floor: float, upto: int) -> list[np.ndarray] | None:
        """Per query, the rows before `upto` whose cosine may reach `floor` (sorted); None
        when too few rows are sketched for the sketch to pay."""
        done = min(self.sketched, upto)  # read before the arrays: rows before it are valid
        basis, sketched, rest = self.basis, self.sketch, self.rest
        if basis is None or done * 4 < upto * 3:
            return None
        out = []
        tail = np.arange(done, upto)
        if queries.shape[0] == 1:
            # One query (a write's near-duplicate check, a tombstone's): a matrix-vector
            # product over the sketch, split across the cores. The block's matrix product
            # below runs on one core: at 100k it took 2.9 ms of a write, this 1.8.
            _, bound = sketch.estimates(sketched[:done], rest[:done], basis, queries[0], product)
            rows = np.flatnonzero(bound >= floor)
            return [np.concatenate([rows, tail]) if tail.size else rows]
        for lo in range(0, queries.shape[0], NEAREST_BLOCK):
            near = sketch.bounds(
                sketched[:done], rest[:done], basis, queries[lo : lo + NEAREST_BLOCK]
            )
            for j in range(near.shape[1]):
                rows = np.flatnonzero(near[:, j] >= floor)
                out.append(np.concatenate([rows, tail]) if tail.size else rows)
        return out

    def _above(
        self, query: np.ndarray, near: np.ndarray, mask: np.ndarray, floor: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Of the rows `_reachable` found (`near`), those `mask` keeps whose cosine is at
        `floor` or above, and those cosines, in row order."""
        rows = near[near < len(mask)]
        rows = rows[mask[rows]]
        sims = padded_product(self.matrix, rows, query)
        above = sims >= floor
        return rows[above], sims[above]

    def _grow(self, needed: int) -> None:
        capacity = self.matrix.shape[0]
        if needed <= capacity:
            return
        # In place where possible: `ndarray.resize` reallocs, and glibc grows a large
        # (mmapped) block with mremap, which moves no data and never holds two copies.
        # Copying held the old and the new matrix at once (+150 MB at 100k while it ran).
        # numpy zero-fills the new rows, which makes them resident: the rows past `needed`
        # are handed back at once (`release_zeroed_pages`), resident only once written.
        # A whole number of LANES, so a search over every row never has leftover ones.
        capacity = -(-max(needed, capacity + GROW_STEP) // LANES) * LANES
        if self.floats is not None and capacity >= HALF_WIDTH_FROM:
            if self.size == 0:
                # A cold open of a large store: half width from the first row.
                self.floats = None
                self.codes = np.zeros((0, self.dim), dtype=np.int16)
                self.scale = np.zeros(0, dtype=np.float32)
            else:
                self._narrow()
        if self.size == 0:
            # Nothing to keep (a cold open sizes the matrix here): fresh zeros, whose
            # untouched rows cost nothing, where resize would zero-fill (touch) them all.
            for owner, name in self._per_row():
                old = getattr(owner, name)
                setattr(owner, name, np.zeros((capacity, *old.shape[1:]), dtype=old.dtype))
            return
        for owner, name in self._per_row():
            if _resize_in_place(owner, name, capacity):
                grown = getattr(owner, name)
                release_zeroed_pages(grown, needed * (grown.nbytes // capacity))
            else:
                # Someone holds the array (a reflection sweep in a worker thread, a view):
                # resizing would leave them with freed memory, so copy this one (into fresh
                # zeros: the rows past the old ones are untouched pages).
                old = getattr(owner, name)
                out = np.zeros((capacity, *old.shape[1:]), dtype=old.dtype)
                out[: old.shape[0]] = old
                setattr(owner, name, out)

    def _per_row(self) -> list[tuple[Any, str]]:
        """Every per-row array, as (the object holding it, its name): the index's own
        (`_PER_ROW`) and the ranking facts' (`storage.facts`)."""
        held = [(self, n) for n in _PER_ROW] + [(self.facts, n) for n in FACT_ARRAYS]
        return held + [(self, n) for n in self._vector_arrays()]

    def _vector_arrays(self) -> tuple[str, ...]:
        return ("floats",) if self.floats is not None else ("codes", "scale")

    def mask(
        self,
        scope: Scope,
        include_archived: bool = False,
        types: set[str] | None = None,
        start: int = 0,
        stop: int | None = None,
        *,
        faded: bool = False,
    ) -> np.ndarray:
        """Rows `start`…`stop` a reader in `scope` may see (owner gate, archived, types): live
        rows, and also every archived one (`include_archived`) or the faded ones (`faded`)."""
        rows = slice(start, self.size if stop is None else stop)
        keep = self.has_vector[rows].copy()
        if faded and not include_archived:
            keep &= ~self.archived[rows] | self.faded[rows]
        elif not include_archived:
            keep &= ~self.archived[rows]
        keep &= self._in_scope(rows, scope)
        if types is not None:
            # A lookup table over the few type codes: O(n), where np.isin sorts.
            keep &= self.type_allowed(types)[self.type_code[rows]]
        return keep

    def holds(self, roles: frozenset[str] | None) -> bool:
        """Whether the rows of every role in `roles` (None: every role) are loaded, and so
        its edges' ends can be checked (`visible`) and the held edges read (`links`)."""
        if self.links.mark is None:
            return False
        if self.residency is None:
            return self.mark is not None
        return self.residency.missing(roles) == []

    def visible(self, rows: np.ndarray, scope: Scope, *, faded: bool = False) -> np.ndarray:
        """Whether each of `rows` (-1: not held) is live (`faded`: or faded, not forgotten)
        and inside `scope`, vector or not: the store's condition on an edge's other end
        (`storage.links`). A role the scope sees must be held (`ensure`) first: a row of a
        role not held reads as not visible."""
        held, at = self._held_at(rows)
        gone = self.archived[at] & ~self.faded[at] if faded else self.archived[at]
        return held & ~gone & self._in_scope(at, scope)

    def _held_at(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Which of `rows` (-1: not held) are rows of the index, and the rows to read their
        columns at (0 for the others, to be masked out)."""
        rows = np.asarray(rows, dtype=np.int64)
        held = (rows >= 0) & (rows < self.size)
        return held, np.where(held, rows, 0)

    def _in_scope(self, at: np.ndarray | slice, scope: Scope) -> np.ndarray:
        """Whether a reader in `scope` may see each of the rows `at` (row numbers, or a slice
        of them), whatever their state (`dialect.scope_where`: the shared owner's, and the
        scope's owner or roles)."""
        shared = self.owner_code[at] == 0
        if scope.owner is not None:
            return (self.owner_code[at] == self._owners.get(scope.owner, -1)) | shared
        if scope.roles is not None:
            codes = [self._roles[r] for r in scope.roles if r in self._roles]
            if len(codes) > 1:
                return np.isin(self.role_code[at], codes) | shared
            return (self.role_code[at] == (codes[0] if codes else -1)) | shared
        return np.ones_like(shared)

    def rows_of_seqs(self, seqs: np.ndarray) -> np.ndarray:
        """The row of each seq (-1: not held), from a map kept while no row moves."""
        key = (self.generation, self.size, id(self.seqs))
        if self._seq_rows is None or self._seq_rows[0] != key:
            held = self.seqs[: self.size]
            rows = np.full(int(held.max(initial=0)) + 1, -1, dtype=np.int32)
            rows[held] = np.arange(self.size, dtype=np.int32)
            self._seq_rows = (key, rows)
        rows = self._seq_rows[1]
        seqs = np.asarray(seqs, dtype=np.int64)
        inside = seqs < rows.size
        return np.where(inside, rows[np.where(inside, seqs, 0)], -1)

    def stems_held(
        self,
        ids: Sequence[str],
        stems: frozenset[str],
        looked: dict[str, tuple[np.ndarray, np.ndarray]] | None = None,
        rows: Sequence[int] | None = None,
    ) -> dict[str, frozenset[str]]:
        """Which of `stems` each of `ids` holds among its indexed words (title, content, tags
        and entities: `storage.keywords.indexed_stems`), from the held postings, without
        reading its text (`looked`: postings a search just looked up, by stem; `rows`: the
        ids' rows, when the caller has them). A memory the postings do not hold (not loaded
        yet, or written by another process since their last pull) has no entry."""
        keywords = self.keywords
        if not keywords.ready or not ids:
            return {}
        asked_rows = self.ids.rows_of(list(ids)) if rows is None else np.asarray(rows, np.int64)
        held, at = self._held_at(asked_rows)
        seqs = np.where(held, self.seqs[at], 0)
        held &= seqs < keywords.lengths.size
        held[held] = keywords.lengths[seqs[held]] >= 0
        asked = sorted(stems)
        holding = np.zeros((len(ids), len(asked)), dtype=bool)
        for k, stem in enumerate(asked):
            found = (looked or {}).get(stem) or keywords.postings(stem)
            # Marked by row (one pass over the postings): a sort of them (`np.isin`) cost
            # ~0.3 ms a stem at 100k rows.
            mark = np.zeros(keywords.lengths.size, dtype=bool)
            mark[found[0]] = True
            holding[:, k] = mark[seqs]
        return {
            ids[i]: frozenset(asked[k] for k in np.flatnonzero(holding[i]).tolist())
            for i in np.flatnonzero(held).tolist()
        }

    def keyword_hit_rows(
        self,
        stems: Sequence[str],
        scope: Scope,
        *,
        limit: int,
        faded: int,
        wide: bool,
        floor: int,
        looked: dict[str, tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """`Store.keyword_hits` from the held postings (None until they are loaded), as rows
        of this index and their BM25 scores: the top `limit` of live rows in `scope` and the
        top `faded` of faded rows (`wide`: every row in one tier), best first, ties by seq —
        as the store's statement ranks them, the faded among the best `max(4·limit, 200)`
        matches unless too few live rows were among those. The scope's roles must be held
        (`holds`). `looked`: as for `HeldKeywords.search`."""
        keywords = self.keywords
        if not keywords.ready:
            return None
        none = _no_rows(np.float64)
        if limit <= 0 or not stems:
            return none
        seqs, scores = keywords.search(stems, floor, COMMON_SHARE, looked)
        if not seqs.size or not self.size:
            return none  # no match, or no row of the scope's roles (all held) in the store
        order = np.lexsort((seqs, -scores))
        scores, rows = scores[order], self.rows_of_seqs(seqs[order])
        pool = max(limit * 4, 200)
        picked, live = self._keyword_tiers(rows[:pool], scope, limit, faded, wide)
        if live < limit and rows.size >= pool:
            picked, live = self._keyword_tiers(rows, scope, limit, faded, wide)
        return rows[picked].astype(np.int64), scores[picked]

    def _keyword_tiers(
        self, rows: np.ndarray, scope: Scope, limit: int, faded: int, wide: bool
    ) -> tuple[np.ndarray, int]:
        """Positions in `rows` (best first) of the first `limit` live rows in scope and the
        first `faded` faded ones (`wide`: the first `limit` of any state), in order, and how
        many live rows were taken."""
        held, at = self._held_at(rows)
        keep = held & self._in_scope(at, scope)
        if wide:
            live = np.flatnonzero(keep)[:limit]
            return live, int(live.size)
        live = np.flatnonzero(keep & ~self.archived[at])[:limit]
        if faded <= 0:
            return live, int(live.size)
        tier = np.flatnonzero(keep & self.faded[at])[:faded]
        return np.sort(np.concatenate([live, tier])), int(live.size)

    def similarities(self, queries: np.ndarray, upto: int | None = None) -> np.ndarray:
        """Cosines of every row (up to `upto`) with each query: shape (size,) for one vector,
        (size, k) for a (k, dim) block.

        One query is `product` (no BLAS worker threads; split across the cores when the
        matrix is large). A block of several is a matrix product, where BLAS pays off.
        """
        stop = self.size if upto is None else upto
        if queries.ndim == 1:
            # Up to a whole number of LANES where the headroom allows (see LANES).
            whole = min(-(-stop // LANES) * LANES, self.matrix.shape[0])
            return product(self._span(0, whole), queries)[:stop]
        rows = self._span(0, stop)
        if queries.shape[0] == 1:
            return product(rows, queries[0])[:, None]
        if not isinstance(rows, HalfWidth):
            return rows @ queries.T
        out = np.empty((stop, queries.shape[0]), dtype=np.float32)
        rows.multiply(slice(0, stop), queries.T, out)
        return out

    def nearest(
        self, queries: np.ndarray, masks: Sequence[np.ndarray], floor: float | None = None
    ) -> list[tuple[int, float]]:
        """Per query (a row of `queries`), the row its mask keeps with the highest cosine,
        and that cosine; (-1, -inf) when the mask keeps none, or none at `floor` or above. A
        mask covers rows [0, len(mask)): rows added after it was made are not looked at.

        With a `floor` (a near-duplicate threshold), only the rows whose sketch says they may
        reach it are multiplied (`storage.sketch`): the same answer as the whole product.

        Run in a worker thread while the event loop goes on writing rows: a row is appended
        past `len(mask)`, or rewritten in place by an update (this product may then read it
        half old, half new: one cosine of a near-duplicate hint), and a matrix that grows
        while this reads it is copied, not freed (`_grow`).
        """
        n = max((len(mask) for mask in masks), default=0)
        queries = np.asarray(queries, dtype=np.float32)
        reach = self._reachable(queries, floor, n) if floor is not None and n else None
        if reach is not None and floor is not None:
            out = []
            for query, mask, near in zip(queries, masks, reach, strict=True):
                rows, sims = self._above(query, near, mask, floor)
                if rows.size:
                    best = int(sims.argmax())
                    out.append((int(rows[best]), float(sims[best])))
                else:
                    out.append((-1, -np.inf))
            return out
        out = []
        lowest = -np.inf if floor is None else floor
        for lo in range(0, len(masks), NEAREST_BLOCK):
            block = queries[lo : lo + NEAREST_BLOCK]
            sims = self.similarities(block, upto=n) if n else np.zeros((0, len(block)))
            for j, mask in enumerate(masks[lo : lo + NEAREST_BLOCK]):
                column = np.where(mask, sims[: len(mask), j], -np.inf)
                best = int(column.argmax()) if column.size else -1
                if best < 0 or column[best] == -np.inf or column[best] < lowest:
                    out.append((-1, -np.inf))
                else:
                    out.append((best, float(column[best])))
        return out

    def search(
        self,
        query: np.ndarray,
        mask: np.ndarray,
        n: int,
        start: int = 0,
        floor: float | None = None,
    ) -> list[tuple[str, float]]:
        """`search_rows` as (id, cosine) pairs."""
        at, sims = self.search_rows(query, mask, n, start, floor)
        return list(zip(self.ids.names(at.tolist()), sims.tolist(), strict=True))

    def search_rows(
        self,
        query: np.ndarray,
        mask: np.ndarray,
        n: int,
        start: int = 0,
        floor: float | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top `n` rows and their cosines among the masked rows, best first; `mask` covers rows
        `start`…`start + len(mask)` (a write looks only at the rows added after its shared
        near-duplicate product, without a mask over every row). With a `floor`, only rows
        at that cosine or above, found through the sketch (`storage.sketch`).

        A mask that keeps few rows (under 1 in `SPARSE_SHARE`) reads only those: a write's
        tombstone check looks at the archived rows alone instead of holding the event loop
        for a product over every row on each write.
        """
        none = _no_rows(np.float32)
        if self.size == 0 or n <= 0:
            return none
        query = np.asarray(query, np.float32)
        kept = int(np.count_nonzero(mask))
        n = min(n, kept)
        if n <= 0:
            return none
        reach = None
        if floor is not None and start == 0 and kept * SKETCH_SHARE >= mask.shape[0]:
            reach = self._reachable(query[None, :], floor, mask.shape[0])
        if reach is not None:
            assert floor is not None
            rows, sims = self._above(query, reach[0], mask, floor)
            top = best(sims, n)
            return rows[top], sims[top]
        picked: np.ndarray | None = None
        if kept * SPARSE_SHARE < mask.shape[0]:
            picked = np.flatnonzero(mask) + start
            sims = padded_product(self.matrix, picked, query)
        elif start == 0 and mask.shape[0] == self.size:
            placed = self._placing_cosines(query, [(mask, n)], self.size)
            if placed is None:
                sims = np.where(mask, self.similarities(query), -np.inf)
            else:  # only the rows that can place were multiplied: the top n among them
                picked, cosines = placed
                sims = np.where(mask[picked], cosines, -np.inf)
        else:
            part = self._span(start, start + mask.shape[0])
            sims = np.where(mask, product(part, query), -np.inf)
        top = best(sims, n)
        at = top + start if picked is None else picked[top]
        if floor is not None:
            # In float64, as Python compares: numpy would round `floor` to float32 first.
            above = sims[top].astype(np.float64) >= floor
            at, top = at[above], top[above]
        return at, sims[top]

    def search_tier_rows(
        self, query: np.ndarray, mask: np.ndarray, n: int, n_faded: int
    ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        """`search_rows` of the live rows `mask` keeps (top `n`) and of the faded ones (top
        `n_faded`), from one product: each tier has its own places, so a large archive never
        takes a live row's place, and the matrix is read once for both."""
        n_rows = mask.shape[0]
        faded = mask & self.faded[:n_rows]
        live = mask & ~self.archived[:n_rows]
        if n_faded <= 0 or not faded.any():
            return self.search_rows(query, live, n), _no_rows(np.float32)
        query = np.asarray(query, np.float32)
        both = live | faded
        kept = int(np.count_nonzero(both))
        # Each tier's `_top` masks the cosines with its own rows, so rows of neither tier
        # are left as the product made them.
        rows: np.ndarray | None = None  # None: `sims` are every row's cosines
        if kept * SPARSE_SHARE < n_rows:
            rows = np.flatnonzero(both)
            sims = padded_product(self.matrix, rows, query)
        elif n_rows == self.size:
            placed = self._placing_cosines(query, [(live, n), (faded, n_faded)], n_rows)
            if placed is None:
                sims = self.similarities(query)
            else:  # only the rows that can place in a tier were multiplied
                rows, sims = placed
        else:
            sims = product(self._span(0, n_rows), query)
        return self._top(sims, live, n, rows), self._top(sims, faded, n_faded, rows)

    def _placing_cosines(
        self, query: np.ndarray, tiers: Sequence[tuple[np.ndarray, int]], n_rows: int
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The rows among the first `n_rows` that can place among the top n of a tier (a
        mask and its n), ascending, and their cosines as the whole product gives them; None
        when the sketch would not spare enough of the product (too few rows, or rows not
        sketched yet, or a query whose bounds leave a quarter of the rows or more; two
        thirds at half width: `HALF_WIDTH_PLACING_SHARE`). Every other row's cosine is
        below each tier's n-th best, so a tier's top n among these rows is its top n.

        Per tier: the rows whose cosines the sketch estimates highest (`sketch.estimates`)
        are multiplied first, and their n-th best cosine is a line no row under it can place
        above; only the rows whose bound reaches that line (and the rows not sketched) are
        multiplied besides. (The rows with the best bounds are those with most energy
        outside the basis, not the most similar: their line left half the rows.)
        A row left out has a cosine at most its bound, under the n-th best already found,
        so the top n of every tier is the whole product's, ties included.
        """
        done = min(self.sketched, n_rows)
        basis = self.basis
        if basis is None or n_rows < RECALL_SKETCH_FROM or done * 4 < n_rows * 3:
            return None
        estimate, bound = sketch.estimates(
            self.sketch[:done], self.rest[:done], basis, query, product
        )
        wanted = np.zeros(n_rows, dtype=bool)
        wanted[done:] = True
        for mask, n in tiers:
            if n <= 0:
                continue
            kept = mask[:done]
            if int(np.count_nonzero(kept)) <= n * PROBES_PER_PLACE:
                wanted[:done] |= kept  # a small tier (the faded one, often): every row
                continue
            # The probes in any order: the n-th best cosine of any n rows of the tier is a
            # line no row under it can place above; the best estimates give a high one.
            estimated = np.where(kept, estimate, -np.inf)
            many = n * PROBES_PER_PLACE
            probes = np.argpartition(estimated, estimated.size - many)[estimated.size - many :]
            rows = np.concatenate([probes, np.flatnonzero(mask[done:n_rows]) + done])
            found = padded_product(self.matrix, rows, query)
            line = np.partition(found, found.size - n)[found.size - n]
            wanted[:done] |= kept & (bound >= line)
        rows = np.flatnonzero(wanted)
        share = SPARSE_SHARE if self.floats is not None else HALF_WIDTH_PLACING_SHARE
        if rows.size * share >= n_rows:
            return None
        return rows, padded_product(self.matrix, rows, query)

    def _top(
        self, sims: np.ndarray, keep: np.ndarray, n: int, rows: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The `n` best rows and cosines among the rows `keep` marks, best first: `sims` are the
        cosines of every row, or of `rows` alone (ascending: equal cosines stay in row
        order, as over every row)."""
        kept = keep if rows is None else keep[rows]
        n = min(n, int(np.count_nonzero(kept)))
        if n <= 0:
            return _no_rows(sims.dtype)
        tier = np.where(kept, sims, -np.inf)
        top = best(tier, n)
        at = top if rows is None else rows[top]
        return at, tier[top]

    def vector(self, memory_id: str) -> np.ndarray | None:
        row = self.ids.get(memory_id)
        if row is None or not self.has_vector[row]:
            return None
        return self.matrix[row]

    def cosines(self, ids: list[str], query: np.ndarray) -> list[float | None]:
        """`vector(i) @ query` for each id (None without a stored vector), with one lookup
        for all of them: a lookup one id at a time costs ~8 µs, and recall asks for ~50."""
        return self.cosines_at(self.ids.rows_of(ids), query)

    def cosines_at(self, rows: np.ndarray, query: np.ndarray) -> list[float | None]:
        """`cosines` of rows of this index (-1: none, so None)."""
        out: list[float | None] = []
        for row in rows.tolist():
            has = row >= 0 and self.has_vector[row]
            out.append(float(self.matrix[row] @ query) if has else None)
        return out

    def note(self, row: VectorRow) -> None:
        """Record a row this process just wrote, so search sees it before the next sync (a
        row of a role not held is left for that role's load: held alone, it would go stale).

        The noted row is what the write commits, so no sync is asked for to read it back
        (a rollback withdraws it). A row that neither is nor was an intent leaves
        `generation` where it was: the intents derived from rows (`Engine.intents`) stay
        valid across writes of other memories. The writer marks the index dirty once an
        intent's write has committed.
        """
        # The keyword postings hold every role's rows and read them from the store, once
        # committed: the next search pulls them (`pull_keywords`).
        self._noted += 1
        if self.residency is not None and not self.residency.holds(row.role):
            return
        self._apply([row])

    def withdraw(self, ids: Sequence[str]) -> None:
        """Rows noted by a write that then rolled back: out of every search. A sync puts a
        row back if the store ever commits one with that id."""
        self.generation += 1
        for row in self.ids.rows_of(list(ids)).tolist():
            if row >= 0:
                self.has_vector[row] = False
                self.archived[row] = True
                self.faded[row] = False
                self.facts.known[row] = False

    # ------------------------------------------------------------------ roles held

    async def ensure(self, store: Store, roles: frozenset[str] | None) -> None:
        """Bring the cache up to date and hold every role a scope sees (`roles`; None: every
        role), loading those not held yet: one read of their rows, a page at a time.

        Without a residency every role is held already, and this is `sync`.
        """
        with self.held():
            await self.sync(store)
            residency = self.residency
            if residency is None:
                return
            if residency.missing(roles) != []:
                async with self._reads():
                    need = residency.missing(roles)  # another caller may have loaded them
                    if need != []:
                        await self._load(store, need)
            residency.touch(roles)

    async def _load(self, store: Store, roles: list[str] | None) -> None:
        """Read these roles' rows (None: every role's) into the index. Their changes are
        pulled from the moment the load starts (`Residency.loading`), so a change committed
        while it reads is not missed; rows read twice are applied twice, to the same end."""
        residency = self.residency
        assert residency is not None
        residency.loading = None if roles is None else set(roles)
        try:
            # Changes committed from here on are read again after the load (its catch-up): a
            # pull that began before the load asked no vector of these roles.
            since = await store.vector_mark()
            # The roles' edges too (`storage.links`), between them and the roles held.
            await self.links.load(store, roles, residency.filter() or [])
            pages = 0
            if roles is None:
                mark: Any = None
                while True:
                    rows, mark = await store.vector_changes(mark, SYNC_PAGE)
                    self._apply(rows)
                    pages += 1
                    if len(rows) < SYNC_PAGE:
                        break
            else:
                after = 0
                while True:
                    rows = await store.vector_rows(roles, after, SYNC_PAGE)
                    if rows:
                        self._apply(rows)
                        after = rows[-1].seq
                    pages += 1
                    if len(rows) < SYNC_PAGE:
                        break
            wanted = None if roles is None else set(roles)
            while True:
                rows, since = await store.vector_changes(since, SYNC_PAGE, roles)
                mine = [r for r in rows if wanted is None or r.role in wanted]
                if mine:
                    self._apply(mine)
                if len(rows) < SYNC_PAGE:
                    break
            residency.add(roles)
        finally:
            residency.loading = set()
        self.ids.settle()
        if pages > 1:
            release_free_memory()

    def _reads(self) -> anyio.Lock:
        """The lock a load of roles holds: two callers never read the same role at once.
        Pulls of changes take none (a caller in a transaction may pull; a load never runs
        in one, its caller's roles being held before its transaction begins)."""
        if self._lock is None:
            self._lock = anyio.Lock()
        return self._lock

    def _held_rows(self, rows: list[VectorRow], roles: list[str]) -> list[VectorRow]:
        """Of the changed rows a sync pulled, those of the roles held (with their vectors),
        and those of other roles that the index has (without: a row that left a role held
        leaves every search of it)."""
        held = set(roles)
        # A role whose load started while this pull read came without its vectors: its
        # load reads those rows (or its catch-up does, `_load`), so they are left to it.
        now = None if self.residency is None else self.residency.filter()
        loaded_since = None if now is None else set(now) - held
        others = [r for r in rows if r.role not in held]
        known = iter(self.ids.rows_of([r.id for r in others]).tolist())
        out = []
        for r in rows:
            if r.role in held or (
                next(known) >= 0 and loaded_since is not None and r.role not in loaded_since
            ):
                out.append(r)
        return out

    @contextmanager
    def held(self) -> Iterator[VectorIndex]:
        """While held, row numbers stay what they are: a caller that keeps row numbers,
        masks or the matrix across an await (a write's near-duplicate check, a ranking, a
        reflection pass) holds the index. Idle roles are let go when the last holder leaves."""
        self._holders += 1
        try:
            yield self
        finally:
            self._holders -= 1
            if self._holders == 0:
                self.release_idle()

    def release_idle(self) -> int:
        """Let go of the roles `residency` says are due (idle, or beyond its bound), unless
        a caller holds the index; how many rows went. The kept rows are copied into fresh
        arrays in their order, so the old ones (and their memory) go at once."""
        if self.residency is None or self._holders:
            return 0
        kept = self.residency.keep()
        if kept is None:
            return 0
        codes = [self._roles[r] for r in kept if r in self._roles]
        rows = np.flatnonzero(np.isin(self.role_code[: self.size], codes))
        gone = self.size - int(rows.size)
        self.residency.keep_only(kept)
        if gone == 0:
            return 0
        going = np.ones(self.size, dtype=bool)
        going[rows] = False
        self.links.drop([self.ids[row] for row in np.flatnonzero(going).tolist()])
        self.generation += 1
        n = int(rows.size)
        capacity = n + n // 4
        for owner, name in self._per_row():
            old = getattr(owner, name)
            new = np.zeros((capacity, *old.shape[1:]), dtype=old.dtype)
            new[:n] = old[rows]
            setattr(owner, name, new)
        ids = IdTable()
        for row in rows.tolist():
            ids.append(self.ids[row])
        ids.settle()
        self.ids = ids
        if self.facts.times:
            self.facts.keep_ids({i for i in self.facts.times if ids.get(i) is not None})
        # Sketched rows are a prefix, and an ordered subset of a prefix is one again.
        self.sketched = int(np.searchsorted(rows, self.sketched))
        self.size = n
        release_free_memory()
        return gone

    @property
    def nbytes(self) -> int:
        """The bytes of the rows held in the per-row arrays (the matrix most of it); rows
        allocated ahead for growth are zero pages, resident only once written."""
        return sum(getattr(owner, name)[: self.size].nbytes for owner, name in self._per_row())


async def _read_stems(
    store: Store,
    keywords: HeldKeywords,
    mark: Any,
    page: int,
    *,
    between: Callable[[], Awaitable[None]] | None = None,
) -> Any:
    """Apply to `keywords` the stems of every row changed since `mark`, `page` rows a read;
    the mark reached. With `between` (the first read, in the background beside calls), it
    is awaited before each next read, and the merge is left to the caller."""
    while True:
        rows, mark = await store.keyword_changes(mark, page)
        keywords.apply(rows, merge=between is None)
        if len(rows) < page:
            return mark
        if between is not None:
            await between()


async def _turn() -> None:
    await anyio.sleep(0)


def _resize_in_place(owner: Any, name: str, capacity: int) -> bool:
    """Grow one per-row array to `capacity` rows without copying; False if it is referenced
    from elsewhere (numpy's refcheck refuses, and nothing changed)."""
    shape = (capacity, *owner.__dict__[name].shape[1:])
    try:
        # No local name for the array: numpy's refcheck would count it as another holder.
        owner.__dict__[name].resize(shape, refcheck=True)
    except ValueError:
        return False
    return True
