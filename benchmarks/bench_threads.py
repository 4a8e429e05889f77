"""One nooa-mcp server over stdio: its recall's CPU a call, thread by thread.

Wall-clock p50s on a shared two-core machine move by more than a change to ranking; the main
thread's CPU (the event loop: parsing, ranking, the reply) is the part no other thread can
take over, and the other threads' (the model's two, the split product's helper, SQLite's) say
what runs beside it. Spawns the server on a copy of STORE, warms it as `bench_side_by_side`
does, then sends N recalls back to back and reads each thread's CPU from /proc.

    python benchmarks/bench_threads.py STORE [--queries 400] [--command nooa-mcp]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_side_by_side import WARM_IDLE, WARM_QUERIES, block, spawn
from stdio_client import cpu_per_call, thread_cpu
from stdio_workload import questions


async def main(args: argparse.Namespace) -> None:
    asked = questions()
    workdir = Path(tempfile.mkdtemp(prefix="nooa-threads-"))
    server = await spawn(args.command, args.store, workdir / "server")
    try:
        await block(server, "recall", asked[:WARM_QUERIES])
        await asyncio.sleep(WARM_IDLE)
        before = thread_cpu(server.pid)
        queries = [asked[(WARM_QUERIES + k) % len(asked)] for k in range(args.queries)]
        took = await block(server, "recall", queries)
        after = thread_cpu(server.pid)
    finally:
        await server.close()
        shutil.rmtree(workdir, ignore_errors=True)
    main_thread, others = cpu_per_call(before, after, server.pid, args.queries)
    print(f"{args.queries} recalls, store {args.store}: p50 {statistics.median(took):.2f} ms")
    print(
        f"  CPU a call: main thread {main_thread:.2f} ms; other threads, largest first: "
        + ", ".join(f"{ms:.2f}" for ms in others)
        + " ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", type=Path, help="a store file, copied for the server")
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--command", default="nooa-mcp", help="the server's command")
    asyncio.run(main(parser.parse_args()))
