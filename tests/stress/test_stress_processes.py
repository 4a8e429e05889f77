"""The long profile of the multi-process tests: NOOA_STRESS=1 to run.

NOOA_STRESS_WRITES (default 4000) writes through 4 real server processes with reflection
running, then the same checks as tests/mcp/test_concurrency_processes.py; and a kill -9 of one
process mid-burst. The figures are printed for the report.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from stress.mcp_load import Ledger, check_cross_visibility, fleet, run_workers, verify_store

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.real_model,
    pytest.mark.processes,
    pytest.mark.skipif(os.environ.get("NOOA_STRESS") != "1", reason="long profile: NOOA_STRESS=1"),
]

WRITES = int(os.environ.get("NOOA_STRESS_WRITES", "4000"))


async def test_long_burst_through_four_processes(tmp_path: Path) -> None:
    store = tmp_path / "memory.sqlite"
    ledger = Ledger()
    with anyio.fail_after(3600):
        async with fleet(store, 4, tmp_path) as procs:
            await run_workers(procs, WRITES, 6, ledger, seed=61, reflect_on=procs[0])
            seen = await check_cross_visibility(procs, ledger, per_pair=5)
    counts = verify_store(store, ledger)
    print(
        f"\nstress burst: attempted {ledger.attempted}, acknowledged {ledger.acknowledged}, "
        f"errors {len(ledger.errors)}, created {len(ledger.created)}, retries "
        f"{len(ledger.retries)}, links {len(ledger.links)}, todos {len(ledger.todos)}, "
        f"reflect passes {ledger.reflect_passes}, cross-process lookups {seen}, store {counts}"
    )
    assert ledger.errors == [] and ledger.acknowledged == ledger.attempted


async def test_long_burst_with_a_kill(tmp_path: Path) -> None:
    store = tmp_path / "memory.sqlite"
    ledger = Ledger()
    with anyio.fail_after(3600):
        async with fleet(store, 4, tmp_path) as procs:
            victim = procs[1]
            acks = 0

            def on_ack(name: str) -> None:
                nonlocal acks
                if name == victim.name:
                    acks += 1
                    if acks == WRITES // 10:
                        victim.kill9()

            ledger.on_ack = on_ack
            await run_workers(procs, WRITES, 6, ledger, seed=62)
    counts = verify_store(store, ledger)
    print(
        f"\nstress kill: attempted {ledger.attempted}, acknowledged {ledger.acknowledged}, "
        f"lost in flight {ledger.lost_in_flight}, all acknowledged present, store {counts}"
    )
    assert ledger.lost_in_flight >= 1
