"""Four real `nooa-mcp` processes on one store file (issue 6 §1, §2, §8; SPEC §3, §14).

Claude Desktop, Claude Code and Codex each start their own server on the same file. These tests
start real server processes (the console script's entry point, the real embedding model) and
drive concurrent writes through MCP clients, then read the file itself: every acknowledged write
is present exactly once, the file is intact, and each process's vector index holds the others'
memories. The short profile runs in CI; tests/stress runs the long one.
"""

from __future__ import annotations

import sqlite3
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import pytest

from stress.mcp_load import (
    Ledger,
    ServerProcess,
    call,
    check_cross_visibility,
    crashes_in,
    run_workers,
    server_process,
    verify_store,
)

pytestmark = [pytest.mark.anyio, pytest.mark.real_model, pytest.mark.processes]

PROCESSES = 4
WRITES = 500
WORKERS = 4  # concurrent calls in flight on each connection


async def test_four_processes_lose_no_acknowledged_write(tmp_path: Path) -> None:
    store = tmp_path / "memory.sqlite"
    ledger = Ledger()
    with anyio.fail_after(600):  # a hang guard, not a speed assertion
        async with AsyncExitStack() as stack:
            procs: list[ServerProcess] = [
                await stack.enter_async_context(
                    server_process(store, f"agent@p{i}", tmp_path, f"p{i}")
                )
                for i in range(PROCESSES)
            ]
            await run_workers(procs, WRITES, WORKERS, ledger, seed=6, reflect_on=procs[0])
            seen = await check_cross_visibility(procs, ledger, per_pair=3)
    counts = verify_store(store, ledger)
    assert ledger.errors == []
    assert ledger.acknowledged == ledger.attempted >= WRITES * 0.9
    assert ledger.reflect_passes >= 1
    assert seen == PROCESSES * (PROCESSES - 1) * 3
    assert counts["memories"] >= len(ledger.created)
    assert [c for p in procs for c in crashes_in(p)] == []


async def test_the_same_author_call_from_every_process_makes_one_memory(tmp_path: Path) -> None:
    # Issue 6 §8: a retry after a timeout may land on any process, at the same moment.
    store = tmp_path / "memory.sqlite"
    args = {"content": "The nightly backup of the ledger database runs at 02:30 UTC."}
    ids: list[str] = []
    with anyio.fail_after(300):
        async with AsyncExitStack() as stack:
            procs = [
                await stack.enter_async_context(
                    server_process(store, f"agent@p{i}", tmp_path, f"p{i}")
                )
                for i in range(PROCESSES)
            ]

            async def author(proc: ServerProcess) -> None:
                assert proc.client is not None
                for _ in range(3):
                    ids.append((await call(proc.client, "memory_author", args))["id"])

            async with anyio.create_task_group() as tg:
                for proc in procs:
                    for _ in range(2):
                        tg.start_soon(author, proc)
    conn = sqlite3.connect(store)
    rows = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
    conn.close()
    assert rows == 1
    assert len(set(ids)) == 1 and len(ids) == PROCESSES * 2 * 3
