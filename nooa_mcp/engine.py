"""The engine: one per process, shared by every owner it serves.

It holds what is expensive and must not be copied per caller — the store (one connection or
one pool), the vector index, the embedding model — and the small per-role state background
maintenance needs (write counters, reflection locks, the cue-vector cache). An owner is a
parameter of a service call, never a reason to open another store: an HTTP server with 300
client names has one engine, not 300.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import numpy as np

from .config import Settings
from .domain.reflection import PackedRows
from .domain.replies import ReflectReport
from .domain.schema import Memory
from .domain.scope import Actor, parse_roles
from .embeddings import Embedder, WarmingEmbedder, default_embedder
from .errors import NooaError
from .shared_runs import SharedRuns
from .storage import Store, open_store
from .storage.residency import Residency
from .storage.vectors import VectorIndex

__all__ = ["Engine", "RoleState", "text_of"]

T = TypeVar("T")


async def _run_first(works: list[Callable[[], Awaitable[None]]]) -> None:
    """`Engine.after_reply`'s run: the one work of its batch."""
    await works[0]()


#: Cue embeddings kept per process (intents are few; a bound keeps a hostile store finite).
CUE_CACHE = 4096
QUERY_CACHE = 512
#: Roles whose intents are kept between calls (`Engine.intents`).
INTENT_ROLES = 256
#: Texts embedded together at most when calls arrive while the model is busy.
EMBED_BATCH = 32
#: Embedding calls that run side by side on the one model (its session is thread-safe): one
#: run of a single text leaves part of two cores idle (figures in BENCHMARKS.md, ingest). A
#: call that arrives while every lane is busy joins the next batch.
EMBED_LANES = 2
#: Vectors whose nearest rows one product computes at most (scores: 25 MB at 100k rows).
NEAREST_BATCH = 64
#: Logging work queued behind replies; a caller that finds this many waiting waits for them.
WRITE_BEHIND_LIMIT = 32
#: Seconds logging queued by `after_reply` waits before it starts, so that the reply leaves
#: first: it is queued while the reply is still being rendered, and the transport writes and
#: flushes it through worker threads, which would otherwise wait for the event loop and the
#: interpreter lock while the log's transaction parses rows on them. `flush` never waits for
#: it.
AFTER_REPLY_DELAY = 0.003
#: Seconds recall's access log waits at most for a moment when no call is being served
#: (`Engine._until_no_call`).
BETWEEN_CALLS_AT_MOST = 0.05
#: Seconds a page of a read that recall is waiting for (the keyword postings' first read, the
#: sketch catching up) waits at most for such a moment. A server that is never idle runs a
#: page each time this runs out: at 50 ms, a 100k store's postings (782 pages of ~1 ms) took
#: 40–45 s to read under back-to-back recalls (15–20 s at 10 ms), each recall meanwhile
#: ~3.7 ms slower on the store's keyword search (BENCHMARKS.md, "Start-up and first search").
CATCH_UP_AT_MOST = 0.01

logger = logging.getLogger(__name__)


def text_of(title: str, content: str) -> str:
    """What gets embedded: the title (if any) leads the content."""
    return f"{title}. {content}" if title else content


@dataclass
class RoleState:
    """Background-maintenance state of one role in this process."""

    reflect_lock: anyio.Lock = field(default_factory=anyio.Lock)
    writes: int = 0
    last_activity: float = 0.0
    last_owner: str = ""
    last_report: ReflectReport | None = None
    pass_done: anyio.Event = field(default_factory=anyio.Event)
    #: When (anyio clock) a pass of this role last logged its KPI snapshot; None: never.
    kpis_at: float | None = None
    #: The role's rows as the last pass read them and the store revision they are current
    #: to (`planning.Planner.rows`), packed; None until a pass read them on a store that can
    #: say, and again once a background pass ends with no memory authored in this process
    #: since it was due (`consolidation.maintain`).
    rows: tuple[int, PackedRows] | None = None


class Engine:
    """The store, vector index and embedder of one process, and their lifecycle."""

    def __init__(
        self, store: Store, index: VectorIndex, embedder: Embedder, settings: Settings
    ) -> None:
        self.store = store
        self.index = index
        self.embedder = embedder
        self.settings = settings
        #: Identifies this process as a reflection-lease holder: host, pid, and a nonce.
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.roles: dict[str, RoleState] = {}
        self.wake = anyio.Event()
        #: Embeddings of intent cues and of queries, by the asking role and the text: kept
        #: per role, so that how fast a text is embedded says nothing of what another role
        #: asked or set (a shared cache answered another role's exact query ~5x faster).
        self.cue_vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._query_vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._model_checked = False
        self._behind: deque[Callable[[], Awaitable[None]]] = deque()
        #: Logs ever queued behind replies, and ever finished (committed, or failed).
        self._behind_queued = 0
        self._behind_done = 0
        #: The most that callers waiting in `flush` need finished: until then the writer
        #: starts without its delay.
        self._behind_wanted = 0
        #: Set when a log is queued; the writer replaces it by a fresh one once woken.
        self._behind_wake = anyio.Event()
        #: Set, and replaced by a fresh one, each time a log finishes.
        self._behind_step = anyio.Event()
        #: Set when a caller starts waiting in `flush`: cuts the writer's delay short.
        self._behind_hurry = anyio.Event()
        #: Items of `after_reply_batched` whose run has not started, by key, and those not
        #: yet written (started or not).
        self._batches: dict[str, list[Any]] = {}
        self._unwritten = 0
        self._writer: asyncio.Task[None] | None = None
        #: Calls a front end is serving now (`serving`); background work waits for none.
        self._serving = 0
        self._served = asyncio.Event()
        self._served.set()
        #: The background read of the keyword postings (`_start_keywords`).
        self._keywords: asyncio.Task[None] | None = None
        #: The background sketching of the index's rows (`_sketch_later`).
        self._sketcher: asyncio.Task[None] | None = None
        #: The first read of the stored vectors when it waits for the model (`vectors_later`).
        self._first_vectors: asyncio.Task[None] | None = None
        #: Without a configured owner, hold every role from the start (`open`).
        self._every_role_first = False
        #: Per role, its intents with a trigger and the index generation they were read at.
        self._intents: OrderedDict[str, tuple[int, list[Memory]]] = OrderedDict()
        self._embeddings: SharedRuns[str] = SharedRuns(
            lambda texts: self.embedder.embed(texts),
            lanes=EMBED_LANES,
            batch=EMBED_BATCH,
            name="nooa embedding",
        )
        self._nearest = SharedRuns(
            self._nearest_rows,
            batch=NEAREST_BATCH,
            name="nooa nearest rows",
        )

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        settings: Settings,
        embedder: Embedder | None = None,
        *,
        vectors_later: bool = False,
        every_role_first: bool = False,
    ) -> AsyncIterator[Engine]:
        """Open the configured store and start the embedding model loading beside it.

        With `vectors_later`, the engine is handed over as soon as the store is open: the
        model loads in the background and the stored vectors are read only once it has
        loaded (`_load_model_then_vectors`), so the first call of a server that was just
        spawned answers from keywords instead of waiting for both.

        The vectors read first are the configured owner's roles (`_first_roles`); with
        `every_role_first` and no configured owner, every role's, as a stdio server that
        learns its owner only from its one client does (roles no call uses go when idle).

        Raises:
            StoreTooNew / StoreUnavailable: the store cannot be used (the message says why).
        """
        store = await open_store(settings.store)
        owned: Embedder | None = None
        try:
            if embedder is None:
                embedder = owned = default_embedder(settings.model_cache_dir)
            residency = Residency(settings.vector_idle_seconds, settings.vector_max_roles)
            index = VectorIndex(embedder.dim, residency)
            engine = cls(store, index, embedder, settings)
            engine._every_role_first = every_role_first
            if not vectors_later:
                await engine._first_roles()
                engine._start_keywords()
                engine._sketch_later()
            # Tasks of their own, not a task group around the caller's block: an error
            # raised in that block must reach the caller as itself, not in an ExceptionGroup.
            loop = asyncio.get_running_loop()
            writer = loop.create_task(engine._write_behind(), name="nooa write-behind")
            engine._writer = writer
            if vectors_later:
                engine._first_vectors = loop.create_task(
                    engine._load_model_then_vectors(), name="nooa model and vectors"
                )
            releaser = None
            if settings.vector_idle_seconds > 0:
                releaser = loop.create_task(engine._release_idle_roles(), name="nooa idle roles")
            try:
                yield engine
            finally:
                # What was acknowledged is written before the store closes.
                with anyio.CancelScope(shield=True), anyio.move_on_after(30):
                    await engine.flush()
                engine._writer = None
                if releaser is not None:
                    releaser.cancel()
                writer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await writer
                for task in (engine._first_vectors, engine._keywords, engine._sketcher):
                    if task is not None:
                        task.cancel()
                        with contextlib.suppress(asyncio.CancelledError, Exception):
                            await task
        finally:
            with anyio.CancelScope(shield=True):
                await store.close()
                if isinstance(owned, WarmingEmbedder):
                    # A process that exits while onnxruntime is still loading in the worker
                    # thread aborts (exit 134): let the load finish first.
                    await anyio.to_thread.run_sync(owned.finish)

    # ------------------------------------------------------------------ embeddings

    @property
    def embeddings_state(self) -> str:
        return "ready" if getattr(self.embedder, "ready", True) else "warming"

    async def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until the embedding model has loaded (re-raises a load failure)."""
        if isinstance(self.embedder, WarmingEmbedder):
            return await anyio.to_thread.run_sync(self.embedder.wait, timeout)
        return True

    async def _load_model_then_vectors(self) -> None:
        """Load the model, then read the stored vectors into the index.

        In that order: building the onnxruntime session parses the protobuf and folds the
        int8 weights into float32 ones, ~50 MB that are freed once it is built; loaded after
        the vectors, that came on top of the matrix (a server on a 100k store peaked at 418
        MiB against 390-393 with the model first). A load that fails is reported by the
        calls that need the model; the vectors are read all the same.
        """
        if isinstance(self.embedder, WarmingEmbedder):
            self.embedder.start()
            await anyio.to_thread.run_sync(self.embedder.finish)
        await self._first_roles()
        self._start_keywords()
        self._sketch_later()

    def _start_keywords(self) -> None:
        """Read the keyword postings in the background (`VectorIndex.load_keywords`): recall
        searches the store until they are loaded, and the vectors are not held up for them."""
        self._keywords = asyncio.get_running_loop().create_task(
            self._load_keywords(), name="nooa keyword postings"
        )

    async def _load_keywords(self) -> None:
        try:
            await self.index.load_keywords(self.store, between=self._between_calls)
        except NooaError as exc:  # the store went away: searches stay on the store
            logger.warning("reading the keyword postings failed: %s", exc)

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """Mark a call being served (the MCP server wraps every message in this): the
        engine's background work (`_until_no_call`) goes on between calls, not inside them."""
        self._serving += 1
        self._served.clear()
        try:
            yield
        finally:
            self._serving -= 1
            if not self._serving:
                self._served.set()

    async def _until_no_call(
        self, hurry: anyio.Event | None = None, at_most: float | None = None
    ) -> None:
        """Wait for a moment between calls: none served for `AFTER_REPLY_DELAY` (the last
        reply on its way out), or `at_most` seconds (`BETWEEN_CALLS_AT_MOST`) at most, so a
        server that is never idle still gets there; or until `hurry` is set (looked at every
        2 ms while a call is served). What runs in the background (the log behind replies,
        the postings' first read) ran beside the next call's query embedding and ranking,
        and slowed them."""
        at_most = BETWEEN_CALLS_AT_MOST if at_most is None else at_most
        poll = 0.002 if hurry is not None else at_most
        hurry = hurry or anyio.Event()  # None: nobody hurries it
        deadline = anyio.current_time() + at_most
        while self._serving and not hurry.is_set():
            left = deadline - anyio.current_time()
            if left <= 0:
                return
            with anyio.move_on_after(min(left, poll)):
                await self._served.wait()
            if not self._serving:
                with anyio.move_on_after(AFTER_REPLY_DELAY):
                    await hurry.wait()

    async def _between_calls(self) -> None:
        """Before a page of a background read that recall is waiting for (`_until_no_call`,
        `CATCH_UP_AT_MOST`), then one turn of the loop. A page read inside a call made each
        of the call's awaits wait for one (a 100k server's first recalls: ~200 ms, then
        ~60); a server that is never idle still gets a page in every `CATCH_UP_AT_MOST`."""
        await self._until_no_call(at_most=CATCH_UP_AT_MOST)
        await anyio.sleep(0)

    async def keywords_loaded(self) -> None:
        """Wait until the keyword postings are read (tests, benchmarks)."""
        if self._keywords is not None:
            await asyncio.shield(self._keywords)

    async def _first_roles(self) -> None:
        """Hold the configured owner's roles (its own, its grants, the shared one) from the
        start: a server with one owner loads what it serves once, as it always did; other
        roles are loaded when a caller's scope first reaches them (DESIGN.md §15)."""
        if self._every_role_first and not self.settings.owner:
            await self.index.ensure(self.store, None)
            return
        actor = Actor(self.settings.owner, parse_roles(self.settings.read))
        await self.index.ensure(self.store, actor.readable_roles())

    async def _release_idle_roles(self) -> None:
        """Let idle roles' vectors go while no call comes (a call lets them go as it ends)."""
        period = max(self.settings.vector_idle_seconds / 4, 1.0)
        while True:
            await anyio.sleep(period)
            self.index.release_idle()

    async def sync_vectors(
        self, roles: frozenset[str] | None = None, *, for_keywords: bool = False
    ) -> None:
        """Bring the vector index up to date with the store, holding every role in `roles`
        (a scope's `visible_roles`; None: every role) and the shared one.

        While the first read waits for the model (`vectors_later`), a ranking on keywords
        alone (`for_keywords`) goes on without the vectors; any other caller waits for that
        read, so two reads never fill the index at once.
        """
        first = self._first_vectors
        if first is not None and not first.done():
            if for_keywords and self.embeddings_state != "ready":
                return
            await self.vectors_read()  # a failed read is retried just below
        await self.index.ensure(self.store, roles)

    async def vectors_read(self) -> None:
        """Until the first read of the stored vectors (after the model: `vectors_later`) is
        over, whatever its outcome (a failed read is the calls' to report). It reads nothing
        itself: `sync_vectors()` would hold every role, and a server with a configured
        owner, which reads that owner's roles first, read the whole store a second time once
        its warm-up ended (a 100k store: every vector and edge again, ~5 s of the event loop)
        and kept roles no caller asked for."""
        first = self._first_vectors
        if first is not None and not first.done():
            with contextlib.suppress(Exception):
                await asyncio.shield(first)

    @asynccontextmanager
    async def vectors(
        self, roles: frozenset[str] | None, *, for_keywords: bool = False
    ) -> AsyncIterator[VectorIndex]:
        """The vector index, up to date and holding `roles` (see `sync_vectors`), with its
        row numbers kept for the block: no role is let go before it ends."""
        with self.index.held():
            await self.sync_vectors(roles, for_keywords=for_keywords)
            self._sketch_later()
            yield self.index

    def _sketch_later(self) -> None:
        """Sketch the rows not sketched yet in the background, between calls (once the
        first roles are read, and after a sync that brought rows): a large index's searches
        read the sketch before the matrix (`VectorIndex.search`), and rows were otherwise
        sketched only as a write first needed them."""
        task = self._sketcher
        if (task is None or task.done()) and self.index.wants_sketch():
            self._sketcher = asyncio.get_running_loop().create_task(
                self.index.keep_sketch(between=self._between_calls), name="nooa sketch"
            )

    async def intents(self, role: str) -> list[Memory]:
        """`store.intents(role)`, kept while no memory changed: every recall checks them for
        a cue (DESIGN §9.2), and an intent is a memory, so any change to one moves the vector
        index's generation (a write here, or a row another connection committed, which the
        sync just below pulls in)."""
        first = self._first_vectors
        if first is not None and not first.done():
            return await self.store.intents(role)
        await self.index.sync(self.store)
        generation = self.index.generation
        kept = self._intents.get(role)
        if kept is not None and kept[0] == generation:
            self._intents.move_to_end(role)
            return list(kept[1])
        found = await self.store.intents(role)
        if self.index.generation == generation:  # nothing written while it was read
            self._intents[role] = (generation, found)
            self._intents.move_to_end(role)
            while len(self._intents) > INTENT_ROLES:
                self._intents.popitem(last=False)
        return list(found)

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed `texts` in a worker thread.

        A call starts at once while one of `EMBED_LANES` is free; calls that arrive while
        every lane is busy share the next free lane's batch, so one write per MCP call from
        several clients (or one client with calls in flight) neither waits for each other
        call's run nor leaves a core idle.
        """
        vectors = await self._embeddings(list(texts))
        await self._ensure_model_matches()
        return vectors

    async def nearest(
        self, vectors: np.ndarray, masks: Sequence[np.ndarray], floor: float | None = None
    ) -> list[tuple[int, float]]:
        """Per vector, the most similar row its mask keeps and the cosine, or (-1, -inf)
        when none is at `floor` or above (`VectorIndex.nearest`).

        In a worker thread, and one run for the writes that wait together: a whole product
        reads every stored vector, which would hold the event loop for every write. With a
        floor, the index's sketch spares most of it (`storage.sketch`).
        """
        await self.index.keep_sketch()
        return await self._nearest([(v, m, floor) for v, m in zip(vectors, masks, strict=True)])

    def _nearest_rows(
        self, items: list[tuple[np.ndarray, np.ndarray, float | None]]
    ) -> list[tuple[int, float]]:
        """One run for the calls that wait together, at the lowest floor among them (exact
        for the higher ones, which are applied to their own items after)."""
        floors = [floor for _, _, floor in items]
        lowest = None if None in floors else min(f for f in floors if f is not None)
        found = self.index.nearest(
            np.stack([vector for vector, _, _ in items]), [mask for _, mask, _ in items], lowest
        )
        return [
            (row, cos) if floor is None or cos >= floor else (-1, -np.inf)
            for (row, cos), floor in zip(found, floors, strict=True)
        ]

    async def query_vector(self, query: str, role: str) -> np.ndarray | None:
        """The query's embedding, or None while the model loads: the ranking then runs on
        keywords alone, and the reply says so.

        A recall waits for a loading model up to `model_wait_seconds` (none by default: a
        client that spawned the server gets its first answer at once). A front end that
        wants the model's ranking for a one-shot call (the CLI, the console) waits for the
        model itself (`wait_ready`).
        """
        if not self.settings.recall.use_dense:
            return None
        if self.embeddings_state != "ready":
            with contextlib.suppress(RuntimeError):
                await self.wait_ready(self.settings.model_wait_seconds)
            if self.embeddings_state != "ready":
                return None
        key = (role, query)
        vector = self._query_vectors.get(key)
        if vector is None:
            # Queries repeat (a recall, then explain of it): the last QUERY_CACHE are kept.
            vector = self._query_vectors[key] = (await self.embed([query]))[0]
            while len(self._query_vectors) > QUERY_CACHE:
                self._query_vectors.popitem(last=False)
        else:
            self._query_vectors.move_to_end(key)
        return vector

    async def _ensure_model_matches(self) -> None:
        """Re-embed the store once if its vectors came from another model.

        Vectors of two models are not comparable, so a store written with one model and
        opened with another would silently lose its dense search; the stored text is
        re-embedded instead, in batches, each committed on its own.
        """
        if self._model_checked:
            return
        self._model_checked = True
        if not self.store.writable:
            return  # a read-only store keeps its vectors; dense search uses what is there
        name = f"{self.embedder.name}:{self.embedder.dim}"
        if await self.store.get_meta("embedder") == name:
            return
        while rows := await self.store.unembedded(self.embedder.dim, 256):
            texts = [text_of(title, content) for _, title, content in rows]
            vectors = await anyio.to_thread.run_sync(self.embedder.embed, texts)
            async with self.store.transaction():
                for (memory_id, _, _), vector in zip(rows, vectors, strict=True):
                    await self.store.set_embedding(memory_id, vector)
        async with self.store.transaction():
            await self.store.set_meta("embedder", name)
        self.index.mark_dirty()

    async def cue_vectors_for(self, cues: Sequence[str], role: str) -> dict[str, np.ndarray]:
        """Embeddings of the intent cues `role` sees, cached per role (bounded)."""
        if self.embeddings_state != "ready":
            return {}
        missing = sorted({c for c in cues if (role, c) not in self.cue_vectors})
        if missing:
            for cue, vec in zip(missing, await self.embed(missing), strict=True):
                self.cue_vectors[(role, cue)] = vec
        out = {}
        for cue in cues:
            vec = self.cue_vectors.get((role, cue))
            if vec is not None:
                self.cue_vectors.move_to_end((role, cue))
                out[cue] = vec
        while len(self.cue_vectors) > CUE_CACHE:
            self.cue_vectors.popitem(last=False)
        return out

    # ------------------------------------------------------------------ write-behind

    async def after_reply(self, work: Callable[[], Awaitable[None]]) -> None:
        """Run `work` after the caller's reply, in order, on its own (`after_reply_batched`
        without a key)."""
        await self.after_reply_batched(None, work, _run_first)

    async def after_reply_batched(
        self, key: str | None, item: T, run: Callable[[list[T]], Awaitable[None]]
    ) -> None:
        """Run `run` on `item` after the caller's reply, in order; every item queued under
        the same `key` before that run starts is handed to it too (recall's access logs: the
        recalls of the last moment in one transaction, not one each; no key: a run of its
        own).

        The client waits for the ranking, not for the log of what it was shown: the log is
        committed a moment later (`AFTER_REPLY_DELAY`). Reads that show accesses call `flush`
        first, which waits for an item as for the run queued with its batch's first, so a
        caller always sees its own earlier recalls; `WRITE_BEHIND_LIMIT` items not yet
        written make the next caller wait, so logging never falls far behind.
        """
        if self._writer is None or self._writer.done():  # no writer (closing): log now
            await run([item])
            return
        if self._unwritten >= WRITE_BEHIND_LIMIT:
            await self.flush()
        # From here on nothing awaits: the item joins a batch whose run is queued already.
        self._unwritten += 1
        batch = None if key is None else self._batches.get(key)
        if batch is not None:  # its run has not started: it takes this item too
            batch.append(item)
            return
        items = [item]
        if key is not None:
            self._batches[key] = items

        async def work() -> None:
            if key is not None:
                del self._batches[key]  # started: later items make a batch of their own
            try:
                await run(items)
            finally:
                self._unwritten -= len(items)

        self._behind.append(work)
        self._behind_queued += 1
        self._behind_wake.set()

    async def flush(self) -> None:
        """Wait until the logging queued by `after_reply` before this call is committed.

        Logs queued after it do not hold it up: a write waiting for the queue to be empty
        would wait for every log queued meanwhile by a client recalling back to back.
        """
        target = self._behind_queued
        if self._behind_done >= target:
            return
        self._behind_wanted = max(self._behind_wanted, target)
        self._behind_hurry.set()
        while self._behind_done < target:
            await self._behind_step.wait()

    async def _write_behind(self) -> None:
        while True:
            await self._behind_wake.wait()
            self._behind_wake = anyio.Event()
            if self._behind_done >= self._behind_wanted:  # nobody waits for these yet
                self._behind_hurry = anyio.Event()
                with anyio.move_on_after(AFTER_REPLY_DELAY):
                    await self._behind_hurry.wait()
                # Nor beside a call (`_until_no_call`): at 1k a log beside the next query's
                # embedding took ~1 ms off a recall's p50 (~8.9 against ~8.0 ms).
                await self._until_no_call(self._behind_hurry)
            while self._behind:
                work = self._behind.popleft()
                try:
                    await work()
                except NooaError as exc:
                    # A store that became unavailable (deleted, read-only, down) loses this
                    # log, never the reply that was already sent; the next call reports the
                    # store's state itself. One line says so: it is no bug to trace.
                    logger.warning("logging accesses after a reply failed: %s", exc)
                except Exception:
                    logger.exception("logging accesses after a reply failed")
                finally:
                    self._behind_done += 1
                    step, self._behind_step = self._behind_step, anyio.Event()
                    step.set()

    # ------------------------------------------------------------------ activity

    def role_state(self, role: str) -> RoleState:
        state = self.roles.get(role)
        if state is None:
            state = self.roles[role] = RoleState(last_activity=anyio.current_time())
        return state

    def note_activity(self, role: str, owner: str, writes: int = 0) -> None:
        """Count writes toward the role's next automatic pass and mark it busy."""
        state = self.role_state(role)
        state.last_activity = anyio.current_time()
        state.last_owner = owner
        if writes:
            first = not state.writes
            state.writes += writes
            every = self.settings.reflect_every_writes
            if every and state.writes >= every:
                self.wake.set()
            elif first and self.settings.reflect_idle_seconds:
                # With no writes pending anywhere the loop sleeps until woken: told of the
                # first, it times the idle pass (else that pass waited for `every` writes).
                self.wake.set()

    async def settle(self) -> None:
        """Let a loading model finish before the process exits (ONNX aborts otherwise)."""
        if isinstance(self.embedder, WarmingEmbedder):
            with anyio.CancelScope(shield=True), anyio.move_on_after(15):
                await anyio.to_thread.run_sync(self._settle, abandon_on_cancel=True)

    def _settle(self) -> None:
        # A failed load was already reported to the calls that needed the model.
        self.embedder.finish(15)  # type: ignore[attr-defined]
