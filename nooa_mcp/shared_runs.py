"""Work that concurrent calls share: one run in a worker thread for what arrives together.

A server answers several clients (or one client with calls in flight) on one event loop. When
each call ran the model, or a product over every stored vector, on its own, the calls queued
behind each other's runs; here a call starts a run at once while a lane is free, and calls
that arrive while every lane is busy are joined into the next run a lane takes.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import anyio.to_thread

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
            self._active.add(loop.create_task(self._lane(), name=self.name))
        return await future

    async def _lane(self) -> None:
        """Take what waits, a run at a time, until nothing does."""
        while self._waiting:
            calls: list[Waiting] = []
            size = 0
            while self._waiting and (not calls or size < self.batch):
                call = self._waiting.popleft()
                calls.append(call)
                size += len(call[0])
            await self._run(calls)

    async def _run(self, calls: list[Waiting]) -> None:
        joined = [item for items, _ in calls for item in items]
        try:
            results = await anyio.to_thread.run_sync(self.run, joined)
        except BaseException as exc:
            for _, future in calls:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        start = 0
        for items, future in calls:
            if not future.done():  # a caller cancelled meanwhile gets nothing
                future.set_result(results[start : start + len(items)])
            start += len(items)
