"""Work that concurrent calls share: one run in a worker thread for what arrives together.

A server answers several clients (or one client with calls in flight) on one event loop. When
each call ran the model, or a product over every stored vector, on its own, the calls queued
behind each other's runs; here a call starts a run at once while a lane is free, and calls
that arrive while every lane is busy are joined into the next run a lane takes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

__all__ = ["SharedRuns"]

T = TypeVar("T")

Waiting = tuple[list[Any], "asyncio.Future[Any]"]


class SharedRuns(Generic[T]):
    """`await runs(items)` is `run(items)`, computed in a worker thread, shared with calls
    that wait at the same time.

    `run` takes a list of items and returns one result per item, in order (a list, or an
    array whose rows are the results): each caller gets the slice for its own items. At
    most `lanes` runs go on at once; a run takes whole calls until it holds `batch` items
    (a single larger call is never split).
    """

    def __init__(
        self, run: Callable[[list[T]], Any], *, lanes: int = 1, batch: int = 32, name: str
    ) -> None:
        self.run = run
        self.lanes = lanes
        self.batch = batch
        self.name = name
        self._waiting: deque[Waiting] = deque()
        self._active: set[asyncio.Task[None]] = set()

    async def __call__(self, items: Sequence[T]) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._waiting.append((list(items), future))
        # A lane whose loop has ended is done at once, though its done-callbacks run later.
        self._active = {lane for lane in self._active if not lane.done()}
        if len(self._active) < self.lanes:
            # The run is handed to its thread here, before this call waits: a lane task
            # would only start once the tasks already queued had run, and recall queues its
            # keyword search (~2.5 ms at 10k on this thread, ~8 at 100k) just before it
            # embeds the query, so the model waited for the search instead of running
            # beside it (BENCHMARKS.md, "Recall latency").
            calls, started = self._start(loop)
            self._active.add(loop.create_task(self._lane(calls, started), name=self.name))
        return await future

    def _start(self, loop: asyncio.AbstractEventLoop) -> tuple[list[Waiting], asyncio.Future[Any]]:
        """Take whole waiting calls up to a batch and hand their run to a worker thread."""
        calls: list[Waiting] = []
        size = 0
        while self._waiting and (not calls or size < self.batch):
            call = self._waiting.popleft()
            calls.append(call)
            size += len(call[0])
        joined = [item for items, _ in calls for item in items]
        return calls, loop.run_in_executor(None, self.run, joined)

    async def _lane(self, calls: list[Waiting], started: asyncio.Future[Any]) -> None:
        """Finish the run started for `calls`, then take what waits, a run at a time, until
        nothing does."""
        loop = asyncio.get_running_loop()
        while True:
            await self._finish(calls, started)
            if not self._waiting:
                return
            calls, started = self._start(loop)

    async def _finish(self, calls: list[Waiting], started: asyncio.Future[Any]) -> None:
        try:
            # A thread cannot be stopped: cancelled meanwhile, the lane still waits for its
            # run (the model must not be torn down under it) and hands out the results.
            await asyncio.shield(started)
        except asyncio.CancelledError:
            with contextlib.suppress(BaseException):
                await asyncio.wait([started])
            self._hand_out(calls, started)
            raise
        except Exception:
            pass  # the run's error goes to each of its calls
        self._hand_out(calls, started)

    @staticmethod
    def _hand_out(calls: list[Waiting], started: asyncio.Future[Any]) -> None:
        """Each call's slice of the run's results, or the run's error (a caller cancelled
        meanwhile gets nothing)."""
        if not started.done() or started.cancelled():
            for _, future in calls:
                if not future.done():
                    future.cancel()
            return
        exc = started.exception()
        start = 0
        for items, future in calls:
            if not future.done():
                if exc is not None:
                    future.set_exception(exc)
                else:
                    future.set_result(started.result()[start : start + len(items)])
            start += len(items)
