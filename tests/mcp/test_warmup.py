"""The stdio warm-up: a held model load begins only once the calls in flight are answered."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from nooa_mcp.mcp.warmup import Warmup

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_after_answers_waits_for_every_call_in_flight_then_runs_once() -> None:
    warmup = Warmup()
    middleware = warmup.middleware()
    ran: list[str] = []
    finish = [anyio.Event(), anyio.Event()]

    def call(i: int) -> Any:
        async def call_next(_: Any) -> str:
            await finish[i].wait()
            return "answered"

        return middleware(SimpleNamespace(method="tools/call"), call_next)  # type: ignore[arg-type]

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(warmup.run_after_answers)
        tasks.start_soon(call, 0)
        tasks.start_soon(call, 1)
        await anyio.sleep(0.05)
        warmup.after_answers(lambda: ran.append("load"))
        await anyio.sleep(0.1)
        assert ran == []  # two calls in flight
        finish[0].set()
        await anyio.sleep(0.1)
        assert ran == []  # one still in flight
        finish[1].set()
        with anyio.fail_after(5):
            while not ran:
                await anyio.sleep(0.01)
        await anyio.sleep(0.1)
        assert ran == ["load"]
        tasks.cancel_scope.cancel()


async def test_after_answers_with_nothing_in_flight_runs_at_once() -> None:
    warmup = Warmup()
    ran: list[str] = []
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(warmup.run_after_answers)
        warmup.after_answers(lambda: ran.append("load"))
        with anyio.fail_after(5):
            while not ran:
                await anyio.sleep(0.01)
        tasks.cancel_scope.cancel()
    assert ran == ["load"]
