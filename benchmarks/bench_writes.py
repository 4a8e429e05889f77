"""Writes one at a time over stdio, build against build: what a write costs at a store's size.

`bench_stdio` reports the write rate once per size, after its recalls, on the store it keeps;
two builds run one after another there differ by the machine's drift as much as by their code
(BENCHMARKS.md, "Ingest"). Here each build in turn is spawned on a fresh copy of STORE, warmed
as `bench_side_by_side` warms, and sent N `memory_author` calls back to back with the texts
that follow the store's prefill (`stdio_workload.items`, as `bench_stdio` writes them); the
builds alternate for R rounds (A B, then B A, ...). Each run prints the write p50 and mean,
the rate, and each thread's CPU a write (the main thread's first).

    python benchmarks/bench_writes.py STORE --command nooa-mcp \\
        --command "env PYTHONPATH=/path/to/old/checkout nooa-mcp" [--writes 199 --rounds 4]

STORE is a store file `bench_stdio.py --prefill ... --store-dir DIR` left; its
`prefilled.json` says how many texts it holds (else pass --skip).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_side_by_side import WARM_IDLE, WARM_QUERIES, block, spawn
from stdio_client import cpu_per_call, thread_cpu
from stdio_workload import items, questions


def texts_held(store: Path, skip: int | None) -> int:
    """How many of the workload's texts the store holds already (the next ones are new)."""
    if skip is not None:
        return skip
    marker = store.parent / "prefilled.json"
    if not marker.exists():
        raise SystemExit(f"{marker} does not exist; pass --skip N (texts the store holds).")
    return int(json.loads(marker.read_text(encoding="utf-8"))["texts"])


async def one_run(command: str, store: Path, skip: int, writes: int) -> str:
    workdir = Path(tempfile.mkdtemp(prefix="nooa-writes-"))
    server = await spawn(command, store, workdir / "server")
    texts = list(itertools.islice(items(), skip, skip + writes))
    try:
        await block(server, "recall", questions()[:WARM_QUERIES])
        await asyncio.sleep(WARM_IDLE)
        before = thread_cpu(server.pid)
        took = []
        for item in texts:
            started = time.perf_counter()
            await server.call(
                "memory_author", {"content": item.content, "entities": [item.speaker]}
            )
            took.append((time.perf_counter() - started) * 1000)
        after = thread_cpu(server.pid)
    finally:
        await server.close()
        shutil.rmtree(workdir, ignore_errors=True)
    main_thread, others = cpu_per_call(before, after, server.pid, writes)
    return (
        f"p50 {statistics.median(took):.2f} ms, mean {statistics.mean(took):.2f}, "
        f"{1000 * writes / sum(took):.1f} writes/s; CPU a write: main thread {main_thread:.2f} ms, "
        "others " + ", ".join(f"{ms:.2f}" for ms in others if ms >= 0.05)
    )


async def main(args: argparse.Namespace) -> None:
    skip = texts_held(args.store, args.skip)
    names = "ABCDEFGH"
    for number, command in enumerate(args.command):
        print(f"{names[number]}: {command}")
    print(f"{args.writes} writes a run, store {args.store} ({skip} texts held)")
    order = list(enumerate(args.command))
    for round_ in range(args.rounds):
        for number, command in order if round_ % 2 == 0 else order[::-1]:
            result = await one_run(command, args.store, skip, args.writes)
            print(f"  round {round_ + 1} {names[number]}: {result}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", type=Path, help="a store file, copied for each run")
    parser.add_argument("--command", action="append", help="a server's command (repeat)")
    parser.add_argument("--writes", type=int, default=199)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--skip", type=int, help="texts the store holds (else prefilled.json)")
    args = parser.parse_args()
    args.command = args.command or ["nooa-mcp"]
    if len(args.command) > 8:
        parser.error("at most 8 commands")
    asyncio.run(main(args))
