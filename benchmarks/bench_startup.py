"""Start-up latency of `nooa-mcp` over stdio, the way MCP clients launch it (SPEC §4, §14).

Measures, over several fresh processes against a store of N memories:
  1. process start → `initialize` answered (Codex gives a server 10 s by default);
  2. `initialize` answered → first `memory_recall` reply (whatever the model state);
  3. `initialize` answered → first recall that used the real model (`embeddings: ready`),
     re-sending the recall as soon as a reply says the model is still warming.
and prints the medians. It speaks raw JSON-RPC lines so no client library time is counted.

    python benchmarks/bench_startup.py [--runs 10] [--memories 500] [--command nooa-mcp]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

PROTOCOL = "2025-06-18"


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


class Server:
    def __init__(self, command: str, store: Path) -> None:
        self.command = command
        self.store = store
        self.next_id = 0

    async def __aenter__(self) -> Server:
        self.started = time.perf_counter()
        self.proc = await asyncio.create_subprocess_exec(
            self.command,
            "--store",
            str(self.store),
            "--owner",
            "bench",
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            limit=16 * 1024 * 1024,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 10)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()

    async def send(self, method: str, params: dict | None = None, notify: bool = False) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        message: dict = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        if not notify:
            self.next_id += 1
            message["id"] = self.next_id
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        await self.proc.stdin.drain()
        if notify:
            return {}
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the server closed its stdout")
            reply = json.loads(line)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(reply["error"])
                return reply["result"]


async def one_run(command: str, store: Path) -> tuple[float, float, float]:
    async with Server(command, store) as server:
        await server.send(
            "initialize",
            {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        )
        initialized = time.perf_counter()
        await server.send("notifications/initialized", notify=True)
        first = None
        while True:
            result = await server.send(
                "tools/call",
                {"name": "memory_recall", "arguments": {"query": "how do we deploy billing?"}},
            )
            if first is None:
                first = time.perf_counter()
            if result["structuredContent"]["embeddings"] == "ready":
                ready = time.perf_counter()
                break
        return initialized - server.started, first - initialized, ready - initialized


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--memories", type=int, default=500)
    parser.add_argument("--command", default=None, help="nooa-mcp executable")
    args = parser.parse_args()
    command = args.command or str(Path(sys.executable).parent / "nooa-mcp")
    if not Path(command).exists():
        command = shutil.which("nooa-mcp") or "nooa-mcp"

    with tempfile.TemporaryDirectory() as tmp:
        seed = Path(tmp) / "seed.sqlite"
        asyncio.run(build_store(seed, args.memories))
        rows = []
        for i in range(args.runs):
            store = Path(tmp) / f"run{i}.sqlite"
            shutil.copy(seed, store)
            rows.append(asyncio.run(one_run(command, store)))
        init, first, ready = (statistics.median(col) * 1000 for col in zip(*rows, strict=True))
        print(f"nooa-mcp start-up over stdio: {args.runs} runs, store of {args.memories} memories")
        print(f"  process start → initialize answered      median {init:8.1f} ms")
        print(f"  initialize → first recall reply           median {first:8.1f} ms")
        print(f"  initialize → first recall with the model  median {ready:8.1f} ms")


if __name__ == "__main__":
    main()
