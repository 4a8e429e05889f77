"""Real `nooa-mcp` processes on one store file (DESIGN.md §15).

Claude Desktop, Claude Code and Codex each start their own server on the same file. These tests
start real server processes (the console script's entry point, the real embedding model) and
drive concurrent writes through MCP clients, then read the file itself: every acknowledged write
is present exactly once, the file is intact, each process's vector index holds the others'
memories, and a server killed with SIGKILL mid-burst loses nothing it acknowledged.
The short profile runs in CI; tests/stress runs the long one (NOOA_STRESS=1).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import anyio
import pytest
from mcp_types import TextResourceContents
from stress.mcp_load import (
    Ledger,
    ServerProcess,
    call,
    check_cross_visibility,
    crashes_in,
    fleet,
    run_workers,
    server_process,
    verify_store,
)

pytestmark = [pytest.mark.anyio, pytest.mark.real_model, pytest.mark.processes]

PROCESSES = 4
WRITES = 500
WORKERS = 4  # concurrent calls in flight on each connection
HANG_GUARD = 600  # seconds; a guard against a hung CI job, not a speed assertion


async def test_four_processes_lose_no_acknowledged_write(tmp_path: Path) -> None:
    store = tmp_path / "memory.sqlite"
    ledger = Ledger()
    same = {"content": "The nightly backup of the ledger database runs at 02:30 UTC."}
    retried: list[str] = []
    with anyio.fail_after(HANG_GUARD):
        async with fleet(store, PROCESSES, tmp_path) as procs:
            await run_workers(procs, WRITES, WORKERS, ledger, seed=6, reflect_on=procs[0])
            seen = await check_cross_visibility(procs, ledger, per_pair=2)

            # A retry after a timeout may land on any process, at the same moment.
            async def retry(proc: ServerProcess) -> None:
                assert proc.client is not None
                for _ in range(3):
                    retried.append((await call(proc.client, "memory_author", same))["id"])

            async with anyio.create_task_group() as tg:
                for proc in procs:
                    tg.start_soon(retry, proc)
                    tg.start_soon(retry, proc)
    counts = verify_store(store, ledger)
    assert ledger.errors == []
    assert ledger.acknowledged == ledger.attempted >= WRITES * 0.9
    assert ledger.reflect_passes >= 1
    assert seen == PROCESSES * (PROCESSES - 1) * 2
    assert counts["memories"] >= len(ledger.created)
    assert [c for p in procs for c in crashes_in(p)] == []
    conn = sqlite3.connect(store)
    copies = conn.execute(
        "SELECT count(*) FROM memories WHERE content = ?", (same["content"],)
    ).fetchone()[0]
    conn.close()
    assert copies == 1
    assert len(set(retried)) == 1 and len(retried) == PROCESSES * 2 * 3


async def test_a_server_killed_mid_burst_loses_no_acknowledged_write(tmp_path: Path) -> None:
    store = tmp_path / "memory.sqlite"
    ledger = Ledger()
    victim_acks = 0
    killed: list[int] = []
    with anyio.fail_after(HANG_GUARD):
        async with fleet(store, 3, tmp_path) as procs:
            victim = procs[0]

            def on_ack(process: str) -> None:
                # The kill follows an event (the victim's 40th acknowledgement), not a timer.
                nonlocal victim_acks
                if process == victim.name:
                    victim_acks += 1
                    if victim_acks == 40 and not killed:
                        killed.append(victim.pid)
                        victim.kill9()

            ledger.on_ack = on_ack
            await run_workers(procs, 300, WORKERS, ledger, seed=9)
        # Every write the victim acknowledged before dying, and all the others', is there.
        counts = verify_store(store, ledger)
        # The store opens cleanly in a new server, which sees every acknowledged memory.
        async with server_process(store, "agent@p9", tmp_path, "restart") as fresh:
            assert fresh.client is not None
            stats = json.loads(await _read(fresh, "memory://stats"))
            for ident in ledger.writer_of:
                view = json.loads(await _read(fresh, f"memory://memories/{ident}"))
                assert view["id"] == ident
            recalled = await call(fresh.client, "memory_recall", {"query": "harbor lantern"})
    assert killed, "the victim was never killed"
    assert ledger.lost_in_flight >= 1  # the victim's calls in flight failed, as they must
    assert all("connection lost" in e for e in ledger.errors)
    assert stats["total"] == counts["memories"]
    assert recalled["hits"]
    assert [c for p in procs[1:] for c in crashes_in(p)] == []


async def _read(proc: ServerProcess, uri: str) -> str:
    assert proc.client is not None
    content = (await proc.client.read_resource(uri)).contents[0]
    assert isinstance(content, TextResourceContents)
    return content.text
