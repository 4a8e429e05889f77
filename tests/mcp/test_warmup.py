"""The stdio warm-up: a held model load begins only once the calls in flight are answered,
and its end reads no role of its own."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import numpy as np
import pytest
from mcp import Client

from nooa_mcp import Memory, Settings, startup_gc
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.engine import Engine
from nooa_mcp.mcp.server import build_server
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


async def test_the_warm_up_reads_no_role_the_configured_owner_does_not_see(
    tmp_path: Path, collector_restored: None
) -> None:
    """The end of the warm-up (the collector paused for start-up comes back) waits for the
    first read of the vectors, and reads nothing itself: a server configured for alice holds
    her role and the shared one, as it read them first, not bob's, and read none twice."""
    target = tmp_path / "m.sqlite"
    async with Engine.open(Settings(store=target), HashEmbedder()) as engine:
        for role, text in (("alice", "alpine meadow orchids"), ("bob", "quarterly invoices")):
            await Memory(engine, role).author(text)
        await Memory(engine, "").author("shared handbook of team rituals")
    startup_gc.pause()
    assert startup_gc.paused()
    loads: list[object] = []
    server = build_server(
        Settings(store=target, owner="alice"), embedder=HashEmbedder(), open_when_needed=True
    )
    async with Client(server, cache=None) as client:
        reply = await client.call_tool("memory_recall", {"query": "alpine meadow orchids"})
        assert not reply.is_error
        engine = server.engine_now()
        assert engine is not None
        load = engine.index._load

        async def counted(store: Any, roles: Any) -> None:
            loads.append(roles)
            await load(store, roles)

        engine.index._load = counted  # type: ignore[method-assign]
        with anyio.fail_after(10):
            while startup_gc.paused():  # the warm-up is over
                await anyio.sleep(0.01)
        index = engine.index
        names = {code: role for role, code in index._roles.items()}
        held = {names[c] for c in np.unique(index.role_code[: index.size]).tolist()}
        assert held == {"alice", ""}
        assert loads == []
