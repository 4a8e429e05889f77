"""SharedRuns: calls that wait together are computed in one run."""

from __future__ import annotations

import asyncio
import threading

import anyio
import pytest

from nooa_mcp.shared_runs import SharedRuns

pytestmark = pytest.mark.anyio


class Held:
    """A run that records its items and waits until the test lets it go."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.go = threading.Event()

    def __call__(self, items: list[str]) -> list[str]:
        self.calls.append(list(items))
        self.go.wait(10)
        if "bad" in items:
            raise ValueError("the run failed")
        return [item.upper() for item in items]


async def _queued(runs: SharedRuns, calls: int) -> None:
    with anyio.fail_after(5):
        while len(runs._waiting) < calls:
            await anyio.sleep(0.01)


async def test_a_failed_run_fails_each_call_in_it_and_the_next_call_runs_again() -> None:
    run = Held()
    runs = SharedRuns(run, lanes=1, batch=8, name="test")
    out: dict[str, object] = {}

    async def call(*items: str) -> None:
        try:
            out[items[0]] = await runs(items)
        except ValueError as exc:
            out[items[0]] = exc

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(call, "a")
        with anyio.fail_after(5):
            while not run.calls:
                await anyio.sleep(0.01)
        tasks.start_soon(call, "bad")
        tasks.start_soon(call, "c", "d")
        await _queued(runs, 2)
        run.go.set()
    assert out["a"] == ["A"]
    assert isinstance(out["bad"], ValueError) and out["c"] is out["bad"]
    assert await runs(["e"]) == ["E"]
    assert run.calls == [["a"], ["bad", "c", "d"], ["e"]]


async def test_a_run_takes_whole_calls_until_it_holds_a_batch() -> None:
    run = Held()
    runs = SharedRuns(run, lanes=1, batch=2, name="test")
    out: dict[str, object] = {}

    async def call(*items: str) -> None:
        out[items[0]] = await runs(items)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(call, "first")
        with anyio.fail_after(5):
            while not run.calls:
                await anyio.sleep(0.01)
        for items in (("x",), ("y", "z"), ("w",)):
            tasks.start_soon(call, *items)
            await _queued(runs, len(runs._waiting) + 1)
        run.go.set()
    assert run.calls == [["first"], ["x", "y", "z"], ["w"]]
    assert out == {"first": ["FIRST"], "x": ["X"], "y": ["Y", "Z"], "w": ["W"]}


async def test_a_run_starts_in_its_thread_before_the_call_waits() -> None:
    """Recall queues its keyword search (which holds the event loop's thread while SQLite
    runs it) just before it embeds the query: the model must start then, beside the search,
    not once the tasks queued ahead of a lane have run."""
    started = threading.Event()

    def run(items: list[str]) -> list[str]:
        started.set()
        return items

    runs = SharedRuns(run, lanes=1, batch=8, name="test")
    seen: dict[str, bool] = {}

    async def ahead() -> None:
        seen["beside"] = started.wait(2)  # holds the loop's thread, as a search does

    queued = asyncio.get_running_loop().create_task(ahead())
    assert await runs(["a"]) == ["a"]
    await queued
    assert seen == {"beside": True}
