"""Start-up of `nooa-mcp` over stdio, the way MCP clients launch it, beside the bare SDK server.

Over several fresh processes against a store of N memories (servers interleaved, so a change
in load touches both alike), from the moment the process is spawned:
  1. `initialize` answered (Codex gives a server 10 s by default);
  2. `tools/list` answered;
  3. the first search answered: nooa's first `memory_recall` (whatever the model state; the
     state it answered in is counted), the bare server's first `echo` call — the floor;
  4. nooa's first recall that used the model (`embeddings: ready`), re-sending the recall as
     soon as a reply says the model is still warming.
It prints the medians, and nooa's first search over the bare server's. `--before CMD` adds
another nooa-mcp command to the same interleaved runs (an older checkout, say
`PYTHONPATH=old python -m nooa_mcp` in a script) to compare two versions at the same load.
The client is raw JSON-RPC lines (stdio_client.py), so no client-library time is counted; the
load average is printed at the start and at the end.

    HF_HUB_OFFLINE=1 python benchmarks/bench_startup.py [--runs 10] [--memories 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

from stdio_client import StdioServer

QUERY = "how do we deploy billing?"


async def build_store(path: Path, n: int) -> None:
    """A store of n short memories, authored with the real model."""
    from nooa_mcp import Memory

    topics = ["deploy", "billing", "staging", "database", "oncall", "release", "cache", "auth"]
    async with Memory.open(path, owner="bench") as mem:
        await mem.wait_ready()
        specs = [
            {"content": f"Note {i} about the {topics[i % len(topics)]} system: detail {i * 7}."}
            for i in range(n)
        ]
        for start in range(0, n, 100):
            await mem.author_many(specs[start : start + 100])


async def nooa_run(command: str, store: Path) -> dict[str, float | str]:
    server = StdioServer([command, "--store", str(store), "--owner", "bench"])
    await server.start()
    try:
        await server.initialize()
        initialized = time.perf_counter() - server.spawned_at
        await server.request("tools/list")
        listed = time.perf_counter() - server.spawned_at
        first = await server.call("memory_recall", {"query": QUERY})
        searched = time.perf_counter() - server.spawned_at
        state = first["structuredContent"]["embeddings"]
        reply = first
        while reply["structuredContent"]["embeddings"] != "ready":
            await asyncio.sleep(0.02)
            reply = await server.call("memory_recall", {"query": QUERY})
        ready = time.perf_counter() - server.spawned_at
    finally:
        await server.close()
    return {
        "initialize": initialized,
        "tools_list": listed,
        "first_search": searched,
        "state": state,
        "dense": ready,
    }


async def bare_run() -> dict[str, float | str]:
    server = StdioServer([sys.executable, str(Path(__file__).parent / "bare_server.py")])
    await server.start()
    try:
        await server.initialize()
        initialized = time.perf_counter() - server.spawned_at
        await server.request("tools/list")
        listed = time.perf_counter() - server.spawned_at
        await server.call("echo", {"text": QUERY})
        searched = time.perf_counter() - server.spawned_at
    finally:
        await server.close()
    return {"initialize": initialized, "tools_list": listed, "first_search": searched}


def median_ms(runs: list[dict[str, float | str]], key: str) -> float:
    return statistics.median(float(r[key]) for r in runs) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--command", default=None, help="nooa-mcp executable")
    parser.add_argument("--before", default=None, help="another nooa-mcp command to compare")
    args = parser.parse_args()
    command = args.command or str(Path(sys.executable).parent / "nooa-mcp")
    if not Path(command).exists():
        command = shutil.which("nooa-mcp") or "nooa-mcp"

    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        seed = Path(tmp) / "seed.sqlite"
        asyncio.run(build_store(seed, args.memories))
        store = Path(tmp) / "store.sqlite"
        shutil.copy(seed, store)
        # One uncounted spawn of each: a client starts a server on a store that exists, with
        # the package's files in the page cache.
        commands = {"nooa-mcp": command}
        if args.before:
            commands = {"before": args.before, "nooa-mcp": command}
        for each in commands.values():
            asyncio.run(nooa_run(each, store))
        asyncio.run(bare_run())
        runs: dict[str, list[dict[str, float | str]]] = {name: [] for name in commands}
        bare: list[dict[str, float | str]] = []
        for i in range(args.runs):
            print(f"  run {i + 1}/{args.runs}", file=sys.stderr)
            for name, each in commands.items():
                shutil.copy(seed, store)
                runs[name].append(asyncio.run(nooa_run(each, store)))
            bare.append(asyncio.run(bare_run()))
    print(
        f"start-up over stdio: {args.runs} spawns each, interleaved; "
        f"nooa-mcp on a store of {args.memories} memories"
    )
    names = list(commands)
    print("  median from spawn (ms)          " + "".join(f"{n:>12}" for n in [*names, "bare SDK"]))
    for key, label in (
        ("initialize", "initialize answered"),
        ("tools_list", "tools/list answered"),
        ("first_search", "first search answered"),
    ):
        cells = [median_ms(runs[n], key) for n in names] + [median_ms(bare, key)]
        ratios = "  ".join(f"{n} {c / cells[-1]:.2f}x" for n, c in zip(names, cells, strict=False))
        print(f"  {label:<30}" + "".join(f"{c:12.1f}" for c in cells) + f"   ({ratios})")
    dense = "".join(f"{median_ms(runs[n], 'dense'):12.1f}" for n in names)
    print(f"  {'first recall with the model':<30}{dense}")
    for name in names:
        states: dict[str, int] = {}
        for r in runs[name]:
            states[str(r["state"])] = states.get(str(r["state"]), 0) + 1
        shown = ", ".join(f"{k} x{v}" for k, v in states.items())
        print(f"  {name}: the first recall answered as {shown}")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
