"""Two nooa-mcp builds side by side over stdio: which recalls faster on this machine, now.

On a shared two-core machine one build, spawned four times among alternated spawns, gave a
1k recall p50 from 12.3 to 16.8 ms (BENCHMARKS.md, "Recall latency": S5 on a seventh
machine): runs one after another cannot tell apart two builds a millisecond apart. Here both
servers run at once, each on its own copy of one store, warmed, then idle 3 s; then blocks of
back-to-back calls alternate between them (A then B, B then A, ...), so a block of each sees
the machine as it is in the same few seconds. It prints each server's p50 / p90 / p99 and CPU
per call (all threads, and the main thread's alone: the event loop's share, which the model's
threads do not blur), and the median of the block-by-block differences (B - A) of the block
medians and of the main thread's CPU a call, with the number of blocks in which B was lower.
Run the same build as both first: that spread (here +0.05 ms, 10 blocks of 20 lower) is what a
difference must stand out of.

While one server answers its block the other is idle: what it does between calls (the log
behind its replies) runs then, not beside the other's calls.

    python benchmarks/bench_side_by_side.py STORE --b "nooa-mcp" \\
        --a "env PYTHONPATH=/path/to/old/checkout python -m nooa_mcp" [--blocks 20 --size 25]

STORE is a store file (`bench_stdio.py --prefill ... --store-dir DIR` leaves them in DIR).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

from stdio_client import StdioServer, main_thread_cpu, tree_stats
from stdio_workload import questions

#: Questions sent to warm each server before the blocks (as `bench_stdio` warms).
WARM_QUERIES = 30
#: Seconds both servers idle once warm (`bench_stdio.WARM_IDLE`).
WARM_IDLE = 3.0
#: Seconds between two blocks, so one server's reply has left before the other's block.
BETWEEN_BLOCKS = 0.2


def copy_store(store: Path, workdir: Path) -> Path:
    """A copy of the SQLite store `store` and its WAL files in `workdir` (existing): its path."""
    for part in store.parent.glob(store.name + "*"):
        shutil.copy(part, workdir / part.name)
    return workdir / store.name


async def spawn(command: str, store: Path, workdir: Path) -> StdioServer:
    """`command` serving a copy of `store` (and its WAL files) in `workdir`, model ready."""
    workdir.mkdir()
    copy = copy_store(store, workdir)
    server = StdioServer([*shlex.split(command), "--store", str(copy), "--owner", "bench"])
    await server.start(stderr_path=workdir / "stderr.log")
    await server.initialize()
    deadline = time.perf_counter() + 120
    while time.perf_counter() < deadline:
        reply = await server.call("memory_recall", {"query": "warm-up", "k": 1})
        if reply["structuredContent"].get("embeddings") == "ready":
            return server
    raise SystemExit(f"{command}: the embedding model was not ready after 120 s.")


async def block(server: StdioServer, tool: str, queries: list[str]) -> list[float]:
    """Milliseconds of each call, back to back."""
    out = []
    for query in queries:
        started = time.perf_counter()
        if tool == "recall":
            await server.call("memory_recall", {"query": query, "k": 5})
        else:
            await server.request("tools/list")
        out.append((time.perf_counter() - started) * 1000)
    return out


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))]


async def main(args: argparse.Namespace) -> None:
    asked = questions()
    workdir = Path(tempfile.mkdtemp(prefix="nooa-side-by-side-"))
    servers: dict[str, StdioServer] = {}
    try:
        for name, command in (("A", args.a), ("B", args.b)):
            servers[name] = await spawn(command, args.store, workdir / name)
        for server in servers.values():
            await block(server, "recall", asked[:WARM_QUERIES])
        await asyncio.sleep(WARM_IDLE)
        times: dict[str, list[float]] = {"A": [], "B": []}
        cpu = {"A": 0.0, "B": 0.0}
        loop = {"A": 0.0, "B": 0.0}
        differences, loop_differences = [], []
        at = WARM_QUERIES
        for number in range(args.blocks):
            queries = [asked[(at + k) % len(asked)] for k in range(args.size)]
            at += args.size
            medians, main = {}, {}
            for name in ("A", "B") if number % 2 == 0 else ("B", "A"):
                pid = servers[name].pid
                before, before_main = tree_stats(pid).cpu_s, main_thread_cpu(pid)
                took = await block(servers[name], args.tool, queries)
                cpu[name] += tree_stats(pid).cpu_s - before
                main[name] = main_thread_cpu(pid) - before_main
                loop[name] += main[name]
                times[name] += took
                medians[name] = statistics.median(took)
                await asyncio.sleep(BETWEEN_BLOCKS)
            differences.append(medians["B"] - medians["A"])
            loop_differences.append((main["B"] - main["A"]) * 1000 / args.size)
        calls = args.blocks * args.size
        print(f"{args.tool}: {args.blocks} blocks of {args.size} calls each, store {args.store}")
        for name, command in (("A", args.a), ("B", args.b)):
            t = times[name]
            print(
                f"  {name} p50 {statistics.median(t):6.2f}  p90 {quantile(t, 0.9):6.2f}  "
                f"p99 {quantile(t, 0.99):6.2f} ms  CPU {cpu[name] * 1000 / calls:6.2f} ms a call, "
                f"{loop[name] * 1000 / calls:5.2f} on the main thread"
                f"  ({command})"
            )
        lower = sum(d < 0 for d in differences)
        print(
            f"  B - A, block by block: median {statistics.median(differences):+.2f} ms; "
            f"B lower in {lower} of {len(differences)} blocks"
        )
        print(
            f"  B - A, main thread's CPU a call, block by block: median "
            f"{statistics.median(loop_differences):+.2f} ms; B lower in "
            f"{sum(d < 0 for d in loop_differences)} of {len(loop_differences)} blocks"
        )
    finally:
        for server in servers.values():
            await server.close()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", type=Path, help="a store file, copied for each server")
    parser.add_argument("--a", required=True, help="the first build's command (e.g. the old one)")
    parser.add_argument("--b", default="nooa-mcp", help="the second build's command")
    parser.add_argument("--blocks", type=int, default=20)
    parser.add_argument("--size", type=int, default=25, help="calls in a block")
    parser.add_argument("--tool", choices=["recall", "list"], default="recall")
    asyncio.run(main(parser.parse_args()))
