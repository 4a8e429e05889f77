"""Helpers for the shared-server tests: real processes, clients and the CLI.

Only the stable entry points are used: the `nooa-mcp` command (`nooa_mcp.cli.main`),
`build_server`, `Settings`, `Memory` and `HashEmbedder`. A server process announces the port
it listens on (the harness wraps uvicorn's startup), so no test waits on a timer for a socket.
"""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2
from anyio.abc import Process
from click.testing import CliRunner, Result
from mcp import Client, StdioServerParameters
from mcp_types import Implementation

from nooa_mcp import Settings
from nooa_mcp.cli import main
from nooa_mcp.embeddings import HashEmbedder

try:  # INTERFACES.md names nooa_mcp.server; the tiered layout (a48b3f9) moved it under mcp/.
    from nooa_mcp.mcp.server import build_server
except ImportError:  # pragma: no cover - the layout before a48b3f9
    from nooa_mcp.server import build_server  # type: ignore[no-redef]

#: What a server process may take to start listening; a guard against a hung job, not a speed
#: assertion (the interpreter and the MCP SDK import in ~1 s here).
START_GUARD = 60
#: How long a command that should refuse to start may run before the test gives up on it: a
#: guard against a hung job, not a speed assertion. A server that starts instead of refusing is
#: caught when it announces its port (`run_to_exit`), not by this running out.
REFUSE_GUARD = 60
#: A shared-safety property that holds must hold within this; it never measures speed.
HANG_GUARD = 10

OWNER_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,63}(@[A-Za-z0-9][A-Za-z0-9.-]{0,63})?")

_MARK = "nooa-test listening on port"

# `nooa-mcp` exactly as the console script runs it, plus one line on stderr once uvicorn has
# bound its socket (the product logs at WARNING, so it prints nothing a test could wait for).
_HTTP_BOOT = f"""
import sys
import uvicorn

_startup = uvicorn.Server.startup


async def _announce(self, sockets=None):
    await _startup(self, sockets=sockets)
    for server in getattr(self, "servers", []):
        for sock in server.sockets:
            print("{_MARK}", sock.getsockname()[1], file=sys.stderr, flush=True)


uvicorn.Server.startup = _announce
from nooa_mcp.cli import main

main(prog_name="nooa-mcp")
"""

# A stdio nooa-mcp on the given Settings with the fast deterministic embedder.
_STDIO_BOOT = """
import sys

import anyio

from nooa_mcp import Settings
from nooa_mcp.embeddings import HashEmbedder

try:
    from nooa_mcp.mcp.server import build_server
except ImportError:
    from nooa_mcp.server import build_server

settings = Settings.model_validate_json(sys.argv[1])
anyio.run(build_server(settings, embedder=HashEmbedder()).run_stdio_async)
"""

_NOOA_ENV = (
    "NOOA_STORE",
    "NOOA_OWNER",
    "NOOA_READ",
    "NOOA_REFERENCE_ROOT",
    "NOOA_MAX_SESSIONS_PER_CLIENT",
    "NOOA_REFLECT_TOOL",
)


def process_env(**extra: str) -> dict[str, str]:
    """This process's environment without any NOOA_* setting, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in _NOOA_ENV}
    env["HF_HUB_OFFLINE"] = "1"
    env.update(extra)
    return env


# --------------------------------------------------------------------------- the CLI


def cli(args: Sequence[str], **env: str) -> Result:
    """Run `nooa-mcp ARGS` in this process with only the NOOA_* variables given in `env`."""
    cleared: dict[str, str | None] = dict.fromkeys(_NOOA_ENV)
    cleared.update(env)
    cleared["HF_HUB_OFFLINE"] = "1"
    return CliRunner().invoke(main, list(args), env=cleared)


async def acli(args: Sequence[str], **env: str) -> Result:
    """`cli` from inside an event loop (the command runs its own loop, so in a worker thread)."""
    return await anyio.to_thread.run_sync(functools.partial(cli, args, **env))


def exited_cleanly(result: Result) -> bool:
    """True when the command ended through click (a message), not an uncaught exception."""
    return result.exception is None or isinstance(result.exception, SystemExit)


def error_lines(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


# --------------------------------------------------------------------------- in-memory clients


def hash_server(settings: Settings) -> Any:
    return build_server(settings, embedder=HashEmbedder())


def named(server: Any, name: str, **kwargs: Any) -> Client:
    """An in-memory MCP client whose clientInfo.name is `name` (the owner without a config)."""
    return Client(server, client_info=Implementation(name=name, version="1"), cache=None, **kwargs)


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """Call a tool that must succeed; its structured content."""
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    return result.structured_content


async def read_json(client: Client, uri: str) -> Any:
    contents = (await client.read_resource(uri)).contents
    return json.loads(contents[0].text)


def reply_text(result: Any) -> str:
    """Everything a tool result shows: text content and structured content."""
    texts = [getattr(c, "text", "") for c in result.content]
    return "\n".join(texts) + "\n" + json.dumps(result.structured_content or {})


# --------------------------------------------------------------------------- processes


@dataclass
class ServerProcess:
    """A `nooa-mcp serve --transport http` process and what it printed on stderr."""

    process: Process
    host: str
    port: int
    stderr: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/mcp"

    @property
    def pid(self) -> int:
        return self.process.pid


async def _drain(stream: Any, sink: list[str], ready: anyio.Event, port: list[int]) -> None:
    pending = b""
    with suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
        async for chunk in stream:
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                line = raw.decode(errors="replace")
                sink.append(line)
                if line.startswith(_MARK) and not port:
                    port.append(int(line.split()[-1]))
                    ready.set()
    ready.set()  # the process ended: whoever waits must look at why


@asynccontextmanager
async def http_server(
    args: Sequence[str], *, host: str = "127.0.0.1", env: dict[str, str] | None = None
) -> AsyncIterator[ServerProcess]:
    """`nooa-mcp ARGS serve --transport http --host HOST --port 0 ...`; yields once it listens.

    `args` are the global options and any extra serve options, split by "serve".
    """
    argv = [sys.executable, "-c", _HTTP_BOOT, *args]
    process = await anyio.open_process(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env or process_env()
    )
    lines: list[str] = []
    port: list[int] = []
    ready = anyio.Event()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_drain, process.stderr, lines, ready, port)
            with anyio.fail_after(START_GUARD):
                await ready.wait()
            if not port:
                await process.wait()
                raise AssertionError(
                    f"nooa-mcp exited ({process.returncode}) instead of serving:\n"
                    + "\n".join(lines[-20:])
                )
            try:
                yield ServerProcess(process, host, port[0], lines)
            finally:
                tg.cancel_scope.cancel()
    finally:
        await stop(process)


#: Seconds a process stopped with SIGTERM gets to exit before SIGKILL: a hung job's guard.
STOP_GRACE = 10


async def stop(process: Process) -> None:
    """Stop a process this test started: SIGTERM, then SIGKILL if it is still there after
    STOP_GRACE seconds (its store's consistency is not under test). SIGTERM first so that a
    process measured by coverage (`sigterm = true` in pyproject.toml) writes its data: one
    killed outright leaves the paths only it ran (a 429, a refusal) shown as never run."""
    with anyio.CancelScope(shield=True):
        if process.returncode is None:
            with suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            with anyio.move_on_after(STOP_GRACE):
                await process.wait()
            if process.returncode is None:
                with suppress(ProcessLookupError):
                    process.send_signal(signal.SIGKILL)
                await process.wait()
        await process.aclose()


def created_store(path: Path) -> Path:
    """An empty store at `path`, as a first write leaves one: the console only reads, and it
    refuses a store that is not there."""

    async def create() -> None:
        from nooa_mcp.storage import open_store

        store = await open_store(path)
        await store.close()

    # A thread of its own: the tests that need one call this inside their event loop.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(anyio.run, create).result()
    return path


def serve_args(store: Path, *serve: str, host: str = "127.0.0.1", glob: Sequence[str] = ()) -> list:
    """Arguments for `nooa-mcp --store STORE GLOB... serve --transport http ... SERVE...`."""
    return [
        "--store",
        str(store),
        *glob,
        "serve",
        "--transport",
        "http",
        "--host",
        host,
        "--port",
        "0",
        *serve,
    ]


@dataclass
class Finished:
    returncode: int | None
    stderr: str
    still_running: bool


async def run_to_exit(argv: Sequence[str], env: dict[str, str], guard: float) -> Finished:
    """Run a command that is expected to end by itself; stop it after `guard` seconds.

    A command run through `nooa_argv` that starts serving instead announces its port: it is
    stopped then and reported `still_running`, without waiting for `guard` to run out.
    """
    process = await anyio.open_process(
        list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env
    )
    lines: list[str] = []
    port: list[int] = []
    exited = anyio.Event()
    still_running = False
    try:
        async with anyio.create_task_group() as tg:
            # `_drain` sets `output_done` at the mark or when the process closes stderr.
            output_done = anyio.Event()
            tg.start_soon(_drain, process.stderr, lines, output_done, port)

            async def wait_exit() -> None:
                await process.wait()
                exited.set()

            tg.start_soon(wait_exit)
            with anyio.move_on_after(guard) as scope:
                await output_done.wait()
                if not port:
                    await exited.wait()
            still_running = scope.cancelled_caught or bool(port)
            tg.cancel_scope.cancel()
    finally:
        await stop(process)
    return Finished(None if still_running else process.returncode, "\n".join(lines), still_running)


def nooa_argv(*args: str) -> list[str]:
    """`nooa-mcp ARGS` as a subprocess (the HTTP harness, so a started server is noticed)."""
    return [sys.executable, "-c", _HTTP_BOOT, *args]


def stdio_params(settings: Settings) -> StdioServerParameters:
    """A stdio nooa-mcp process on `settings`, with the hash embedder."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-c", _STDIO_BOOT, settings.model_dump_json()],
        env=process_env(),
    )


# --------------------------------------------------------------------------- raw HTTP


def initialize_body(name: str = "raw-client") -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": name, "version": "1"},
        },
    }


MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def open_session(
    http: httpx2.AsyncClient, url: str, headers: dict[str, str] | None = None
) -> int:
    """POST an initialize (which opens a stateful session); the HTTP status."""
    response = await http.post(
        url, json=initialize_body(), headers={**MCP_HEADERS, **(headers or {})}
    )
    return response.status_code


# --------------------------------------------------------------------------- /proc


def proc_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def proc_status(pid: int, key: str) -> int:
    """A number from /proc/PID/status (Threads, VmRSS in kB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


# --------------------------------------------------------------------------- a reflection holder

# A process that takes the reflection lease of OWNER on STORE and keeps it: it authors three
# memories close enough to be linked (cosine 0.83–0.90 under HashEmbedder), starts a `link`
# pass, and blocks in the progress callback after the first item, with the lease held.
_HOLDER = """
import sys

import anyio

from nooa_mcp import Memory
from nooa_mcp.embeddings import HashEmbedder

TEXTS = [
    "the harbor crane lifts copper crates onto the night ferry before the tide turns",
    "the harbor crane lifts copper barrels onto the night barge before the tide turns",
    "the harbor crane lifts copper crates onto the night ferry after the storm passes",
]


async def main(store, owner):
    async with Memory.open(store, owner=owner, embedder=HashEmbedder()) as mem:
        for text in TEXTS:
            await mem.author(text)

        async def hold(done, total, message):
            print("holding the reflection lease", flush=True)
            await anyio.sleep_forever()

        await mem.reflect(["link"], progress=hold)


anyio.run(main, sys.argv[1], sys.argv[2])
"""


@asynccontextmanager
async def reflection_holder(store: Path, owner: str) -> AsyncIterator[Process]:
    """A live process in the middle of a reflection pass of `owner` on `store`."""
    process = await anyio.open_process(
        [sys.executable, "-c", _HOLDER, str(store), owner],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=process_env(),
    )
    try:
        assert process.stdout is not None
        seen = b""
        with anyio.fail_after(START_GUARD):
            async for chunk in process.stdout:
                seen += chunk
                if b"holding" in seen:
                    break
        assert b"holding" in seen, f"the holder exited ({process.returncode}) before the pass"
        yield process
    finally:
        await stop(process)


# --------------------------------------------------------------------------- mounts (root only)


def _mount(*args: str) -> str | None:
    """Run mount(8); None when it worked, else why not (then the caller skips)."""
    try:
        done = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    except OSError as exc:
        return f"mount(8) is not available ({exc.strerror})"
    return None if done.returncode == 0 else (done.stderr.strip() or f"exit {done.returncode}")


def umount(path: Path) -> None:
    # Lazy: a store connection a failed test left open must not keep the mount (and tmp) busy.
    subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def mount_tmpfs(path: Path, size: str) -> str | None:
    """A tmpfs of `size` on `path` (a full disk on demand); None when mounted."""
    path.mkdir(parents=True, exist_ok=True)
    return _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path))


def mount_read_only(source: Path, target: Path) -> str | None:
    """`source` again at `target`, read-only for everyone including root; None when mounted."""
    target.mkdir(parents=True, exist_ok=True)
    why = _mount("--bind", str(source), str(target))
    if why is not None:
        return why
    why = _mount("-o", "remount,bind,ro", str(target))
    if why is not None:
        umount(target)
    return why


def fill(folder: Path) -> None:
    """Write a filler file in `folder` until its file system has no space left."""
    chunk = b"\0" * 65536
    with suppress(OSError), (folder / "filler").open("wb", buffering=0) as fh:
        while True:
            fh.write(chunk)
    with suppress(OSError), (folder / "filler-tail").open("wb", buffering=0) as fh:
        while True:
            fh.write(b"\0" * 512)
