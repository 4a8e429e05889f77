"""A stdio nooa-mcp's memory under pipelined requests: RSS before and at peak, and the time.

    HF_HUB_OFFLINE=1 python benchmarks/bench_stdio_pipelined.py --requests 5000

The server is the console script as a client starts it (`python -m nooa_mcp --store S`, the
bundled model). The client initializes, writes 20 memories, recalls once (so the model and
the store are warm), reads the server's RSS, then writes N recall requests as fast as the
pipe takes them while a thread reads every reply; the server's VmHWM (peak RSS of its
process image) is read once all N are answered. A server that takes in every request at
once holds them all; one that bounds what it takes in leaves the rest in the pipe.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def _status(pid: int, key: str) -> float:
    """A /proc/PID/status value in MiB (VmRSS, VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(key)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000)
    args = parser.parse_args()
    store = Path(tempfile.mkdtemp(prefix="nooa-pipelined-")) / "m.sqlite"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "nooa_mcp", "--store", str(store), "--owner", "bench"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert server.stdin is not None and server.stdout is not None
    replies: list[bytes] = []
    reader = threading.Thread(target=lambda: replies.extend(server.stdout), daemon=True)
    reader.start()

    def send(message: dict) -> None:
        server.stdin.write((json.dumps(message) + "\n").encode())
        server.stdin.flush()

    def wait_for(count: int) -> None:
        while len(replies) < count:
            time.sleep(0.05)

    init = {"protocolVersion": "2025-06-18", "capabilities": {}}
    init["clientInfo"] = {"name": "bench", "version": "1"}
    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    for i in range(20):
        note = f"Fact {i} about the deploy pipeline and the staging cluster."
        call = {"name": "memory_author", "arguments": {"content": note}}
        send({"jsonrpc": "2.0", "id": f"a{i}", "method": "tools/call", "params": call})
    warm = {"name": "memory_recall", "arguments": {"query": "deploy pipeline"}}
    send({"jsonrpc": "2.0", "id": "warm", "method": "tools/call", "params": warm})
    wait_for(22)
    before = _status(server.pid, "VmRSS")
    started = time.perf_counter()
    lines = []
    for i in range(args.requests):
        call = {"name": "memory_recall", "arguments": {"query": f"deploy staging {i}"}}
        lines.append(
            json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": call})
        )
    server.stdin.write(("\n".join(lines) + "\n").encode())
    server.stdin.flush()
    written = time.perf_counter() - started
    wait_for(22 + args.requests)
    answered = time.perf_counter() - started
    peak = _status(server.pid, "VmHWM")
    server.kill()
    server.wait()
    print(
        f"{args.requests} pipelined recalls: RSS before {before:.0f} MiB, peak {peak:.0f} MiB; "
        f"the client's writes took {written:.1f} s, all answered after {answered:.1f} s; "
        f"load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
