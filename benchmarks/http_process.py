"""A real `nooa-mcp serve --transport http` process and MCP clients for it, for benchmarks.

The server is the installed console script, started exactly as a user starts it (with
`--port 0`); the port is read from the one line it prints on start, which it prints after
binding its socket, so a client that connects right away waits in the listen backlog rather
than being refused. Its resident memory, open files and threads are read from /proc.

Clients are the MCP SDK's `Client` over streamable HTTP: each one initializes a session,
makes its calls and closes the session (DELETE) when it leaves.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import Implementation

#: How long the server may take to print its start line (a guard against a hung start).
START_GUARD = 120
_STARTED = re.compile(r"nooa-mcp serving (http://\S+?)/mcp ")


def nooa_command() -> list[str]:
    """The `nooa-mcp` console script of this interpreter's environment."""
    script = Path(sys.executable).parent / "nooa-mcp"
    if script.exists():
        return [str(script)]
    found = shutil.which("nooa-mcp")
    if found is None:
        raise SystemExit("nooa-mcp is not installed in this environment (pip install -e .)")
    return [found]


def server_env(**extra: str) -> dict[str, str]:
    """This environment without NOOA_* settings (the command line says everything)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOOA_")}
    env["HF_HUB_OFFLINE"] = "1"
    env.update(extra)
    return env


@dataclass
class ProcStats:
    """What /proc says about one process at one moment."""

    rss_mib: float
    hwm_mib: float
    fds: int
    threads: int

    def row(self) -> str:
        return (
            f"RSS {self.rss_mib:7.1f} MiB (peak {self.hwm_mib:7.1f}) fds {self.fds:4d} "
            f"threads {self.threads:3d}"
        )


def proc_stats(pid: int) -> ProcStats:
    status: dict[str, str] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        status[key] = value.strip()
    return ProcStats(
        rss_mib=int(status["VmRSS"].split()[0]) / 1024,
        hwm_mib=int(status["VmHWM"].split()[0]) / 1024,
        fds=len(os.listdir(f"/proc/{pid}/fd")),
        threads=int(status["Threads"]),
    )


@dataclass
class ServerProcess:
    """A running `nooa-mcp … serve --transport http` and the lines it printed on stderr."""

    process: subprocess.Popen[bytes]
    base: str
    stderr: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    @property
    def pid(self) -> int:
        return self.process.pid

    def stats(self) -> ProcStats:
        return proc_stats(self.pid)


@contextmanager
def http_server(
    store: Path | str, *serve: str, env: dict[str, str] | None = None
) -> Iterator[ServerProcess]:
    """`nooa-mcp --store STORE serve --transport http --port 0 SERVE...`, until the block ends.

    Stopped with SIGTERM (uvicorn's clean shutdown), then SIGKILL if it lingers.
    """
    argv = [*nooa_command(), "--store", str(store), "serve", "--transport", "http"]
    argv += ["--port", "0", *serve]
    process = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env or server_env(),
    )
    lines: list[str] = []
    found: list[str] = []
    ready = threading.Event()

    def drain() -> None:
        assert process.stderr is not None
        for raw in process.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            lines.append(line)
            match = _STARTED.search(line)
            if match and not found:
                found.append(match.group(1))
                ready.set()
        ready.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        ready.wait(START_GUARD)
        if not found:
            raise SystemExit("nooa-mcp did not start:\n" + "\n".join(lines[-20:]))
        yield ServerProcess(process, found[0], lines)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        reader.join(5)


def http_client(
    token: str | None = None, source: str | None = None, timeout: float = 300.0
) -> httpx2.AsyncClient:
    """An HTTP client for MCP: bearer `token` if given, from local address `source` if given."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = httpx2.AsyncHTTPTransport(local_address=source) if source else None
    return httpx2.AsyncClient(
        headers=headers,
        transport=transport,
        timeout=httpx2.Timeout(30.0, read=timeout),
        follow_redirects=True,
    )


@asynccontextmanager
async def mcp_client(
    url: str, name: str, token: str | None = None, source: str | None = None
) -> AsyncIterator[Client]:
    """An initialized MCP session on `url` as client `name` (its clientInfo.name)."""
    http = http_client(token, source)
    info = Implementation(name=name, version="1")
    transport = streamable_http_client(url, http_client=http)
    async with http, Client(transport, client_info=info, cache=None) as client:
        yield client


async def call(client: Client, tool: str, args: dict[str, Any]) -> Any:
    """A tool call that must succeed; its structured content."""
    result = await client.call_tool(tool, args)
    if result.is_error:
        text = " ".join(getattr(c, "text", "") for c in result.content)
        raise RuntimeError(f"{tool} failed: {text}")
    return result.structured_content


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def stamp() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
