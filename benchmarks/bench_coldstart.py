"""Cold start to first recall result, in a fresh Python process each time.

    HF_HUB_OFFLINE=1 python benchmarks/bench_coldstart.py STORE [--runs 5]

Each run starts `python -c ...` that imports nooa_mcp, opens STORE with the product's
background-loading embedder and recalls once at once (keyword results while the model warms),
then waits for the model and recalls again (dense results). Prints the medians of: process
start to first result, and process start to first dense result, with the resident memory of
the child at the end.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

CHILD = r"""
import time, json, sys
t0 = float(sys.argv[2])
import anyio
from nooa_mcp.memory import Memory
from nooa_mcp.config import Settings
async def main():
    s = Settings(store=sys.argv[1], owner="bench")
    async with Memory.open(sys.argv[1], owner="bench", settings=s) as mem:
        first = await mem.recall("postgres deploy timeout", k=5)
        t1 = time.time()
        await mem.wait_ready()
        dense = await mem.recall("who owns the billing service", k=5)
        t2 = time.time()
    rss = 0
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            rss = int(line.split()[1]) / 1024
    print(json.dumps({"first": t1 - t0, "first_state": first.embeddings,
                      "dense": t2 - t0, "dense_state": dense.embeddings, "peak_mb": rss}))
anyio.run(main)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("store")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    runs = []
    for _ in range(args.runs):
        out = subprocess.run(
            [sys.executable, "-c", CHILD, args.store, repr(time.time())],
            capture_output=True,
            text=True,
            check=True,
        )
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    first = statistics.median(r["first"] for r in runs) * 1000
    dense = statistics.median(r["dense"] for r in runs) * 1000
    states = {r["first_state"] for r in runs}
    peak = statistics.median(r["peak_mb"] for r in runs)
    print("| store | first result ms (state) | first dense result ms | child peak RSS MB |")
    print("|---|---:|---:|---:|")
    print(f"| {args.store} | {first:.0f} ({'/'.join(sorted(states))}) | {dense:.0f} | {peak:.0f} |")


if __name__ == "__main__":
    main()
