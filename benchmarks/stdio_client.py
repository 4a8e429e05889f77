"""A minimal MCP client over stdio, for benchmarks: raw JSON-RPC lines, nothing else.

A client library would add its own parsing and output-schema validation to every reply; the
benchmarks want the server's time, so this client only frames lines, matches replies to
requests by id (several may be in flight) and drops notifications. It speaks the same
protocol a client does: spawn, `initialize`, `notifications/initialized`, then requests.

It also reads the server's process tree from /proc (RSS, peak RSS, CPU seconds), because a
server started through a launcher (npx, uv run, a shell) does its work in a child process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROTOCOL = "2025-06-18"
_CLOCK = os.sysconf("SC_CLK_TCK")


class ServerError(RuntimeError):
    """The server answered with a JSON-RPC error, or a tool result with isError."""


@dataclass
class TreeStats:
    """Memory and CPU of a process and all its descendants."""

    rss_mib: float
    hwm_mib: float
    cpu_s: float
    processes: int


def _parents() -> dict[int, list[int]]:
    """Each live pid's children, from every process's ppid (kernels without
    /proc/<pid>/task/<tid>/children are common)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def tree_stats(pid: int) -> TreeStats:
    """VmRSS and VmHWM summed over the tree (HWM is per process, so the sum is an upper
    bound on the tree's peak), and user+system CPU seconds of every live process in it."""
    children = _parents()
    pending, seen = [pid], []
    while pending:
        p = pending.pop()
        seen.append(p)
        pending += children.get(p, [])
    rss = hwm = cpu = 0.0
    alive = 0
    for p in seen:
        try:
            status = Path(f"/proc/{p}/status").read_text()
            stat = Path(f"/proc/{p}/stat").read_text()
        except OSError:
            continue
        alive += 1
        for line in status.splitlines():
            key, _, value = line.partition(":")
            if key == "VmRSS":
                rss += int(value.split()[0]) / 1024
            elif key == "VmHWM":
                hwm += int(value.split()[0]) / 1024
        cpu += _cpu_of(stat)
    return TreeStats(rss, hwm, cpu, alive)


def _cpu_of(stat: str) -> float:
    """User+system CPU seconds from the text of a /proc `stat` file (utime, stime)."""
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK


def thread_cpu(pid: int) -> dict[int, float]:
    """User+system CPU seconds of each live thread of `pid`, by thread id (the main
    thread's id is `pid`: for a Python server, its event loop)."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out[int(task.name)] = _cpu_of((task / "stat").read_text())
        except OSError:
            continue
    return out


def cpu_per_call(
    before: dict[int, float], after: dict[int, float], pid: int, calls: int
) -> tuple[float, list[float]]:
    """Milliseconds of CPU a call between two `thread_cpu` reads of `pid`: the main
    thread's, and every other thread's that used any, largest first."""
    spent = {tid: (after[tid] - before.get(tid, 0.0)) * 1000 / calls for tid in after}
    main_thread = spent.pop(pid, 0.0)
    return main_thread, sorted((ms for ms in spent.values() if ms > 0), reverse=True)


def main_thread_cpu(pid: int) -> float:
    """`thread_cpu` of the main thread alone: the part of a call's CPU that no other thread
    can take over."""
    try:
        return _cpu_of(Path(f"/proc/{pid}/task/{pid}/stat").read_text())
    except OSError:
        return 0.0


class StdioServer:
    """One server process and the JSON-RPC session over its stdin/stdout."""

    def __init__(
        self, argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> None:
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self._next_id = 0
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None
        self.proc: asyncio.subprocess.Process | None = None
        self.spawned_at = 0.0
        self.stderr_path: Path | None = None

    async def start(self, stderr_path: Path | None = None) -> None:
        self.stderr_path = stderr_path
        stderr = stderr_path.open("wb") if stderr_path else subprocess.DEVNULL
        self.spawned_at = time.perf_counter()
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env={**os.environ, **(self.env or {})},
            cwd=self.cwd,
            limit=64 * 1024 * 1024,
        )
        if stderr_path:
            stderr.close()  # type: ignore[union-attr]
        self._reader = asyncio.create_task(self._read())

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                break
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                continue  # a server that logs to stdout: not a reply
            future = self._pending.pop(message.get("id"), None) if "id" in message else None
            if future is not None and not future.done():
                future.set_result(message)
            # server requests (sampling, roots) and notifications are not answered here
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ServerError(f"{self.argv[0]} closed its stdout"))
        self._pending.clear()

    async def _write(self, message: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
        await self.proc.stdin.drain()

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._next_id += 1
        ident = self._next_id
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[ident] = future
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
        if params is not None:
            message["params"] = params
        await self._write(message)
        reply = await future
        if "error" in reply:
            raise ServerError(f"{method}: {reply['error']}")
        return reply["result"]

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self._write(message)

    async def initialize(self) -> dict[str, Any]:
        result = await self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "bench-stdio", "version": "1"},
            },
        )
        await self.notify("notifications/initialized")
        return result

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """tools/call; a result with isError raises ServerError with its text."""
        result = await self.request("tools/call", {"name": tool, "arguments": arguments})
        if result.get("isError"):
            text = " ".join(c.get("text", "") for c in result.get("content", []))
            raise ServerError(f"{tool}: {text[:300]}")
        return result

    def stats(self) -> TreeStats:
        return tree_stats(self.pid)

    async def close(self) -> None:
        """Close stdin (how a client ends a stdio session), then wait; kill after 10 s."""
        if self.proc is None:
            return
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError, BrokenPipeError):
                self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 10)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        if self._reader is not None:
            with contextlib.suppress(Exception):
                await self._reader

    async def __aenter__(self) -> StdioServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
