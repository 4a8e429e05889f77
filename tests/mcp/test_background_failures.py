"""What goes wrong in the background is said in one log record, and a dead lease holder is
dead even before its parent reaps it (real stdio server processes and a killed child).

Before: an access log written after a reply, on a store deleted meanwhile, printed a
68-line traceback on the server's stderr; a reflection holder killed by SIGKILL but not yet
reaped (a zombie) still answered signal 0, so its role's lease stayed held until reaped.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client
from shared_support import (
    _HOLDER,
    HANG_GUARD,
    START_GUARD,
    call,
    hash_server,
    process_env,
    stdio_params,
)

from nooa_mcp import Settings

pytestmark = pytest.mark.processes


def _rpc(proc: subprocess.Popen, message: dict) -> dict | None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()
    if "id" not in message:
        return None
    ready, _, _ = select.select([proc.stdout], [], [], START_GUARD)
    assert ready, f"no reply to {message['method']}"
    return json.loads(proc.stdout.readline())


def test_an_access_log_lost_to_a_deleted_store_is_one_log_record(tmp_path: Path) -> None:
    store = tmp_path / "gone.sqlite"
    params = stdio_params(Settings(store=store, owner="alice"))
    errors = tmp_path / "stderr.txt"
    with errors.open("wb") as sink:
        proc = subprocess.Popen(
            [params.command, *params.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=sink,
            env=params.env,
        )
        try:
            init = {"protocolVersion": "2025-06-18", "capabilities": {}}
            init["clientInfo"] = {"name": "t", "version": "1"}
            _rpc(proc, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
            _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            author = {"name": "memory_author", "arguments": {"content": "The key is in the vault."}}
            _rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": author})
            for path in tmp_path.glob("gone.sqlite*"):
                path.unlink()
            recall = {"name": "memory_recall", "arguments": {"query": "vault key"}}
            reply = _rpc(
                proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": recall}
            )
            assert reply is not None and not reply["result"]["isError"]  # the reply is sent
            # The log is written after the reply; stdin's end makes the server flush it first.
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=START_GUARD)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None and not pipe.closed:
                    pipe.close()
    text = errors.read_text(errors="replace")
    assert "Traceback" not in text, text[:2000]
    (line,) = [x for x in text.splitlines() if "logging accesses after a reply failed" in x]
    assert "gone.sqlite" in line and "deleted or replaced" in line, text[:2000]
    print(line)


def _zombie_holder(store: Path, owner: str) -> subprocess.Popen:
    """A process in the middle of `owner`'s reflection pass, then SIGKILLed and not reaped."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(store), owner],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=process_env(),
    )
    assert holder.stdout is not None
    ready, _, _ = select.select([holder.stdout], [], [], START_GUARD)
    assert ready and b"holding" in holder.stdout.readline()
    os.kill(holder.pid, signal.SIGKILL)
    deadline = time.monotonic() + HANG_GUARD
    while Path(f"/proc/{holder.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
        assert time.monotonic() < deadline, "the killed holder never became a zombie"
        time.sleep(0.01)
    return holder


def test_a_killed_holder_not_yet_reaped_no_longer_holds_its_roles_lease(tmp_path: Path) -> None:
    store = tmp_path / "lease.sqlite"
    holder = _zombie_holder(store, "alice")
    try:

        async def reflect() -> str:
            settings = Settings(store=store, owner="alice")
            async with Client(hash_server(settings), cache=None) as client:
                with anyio.fail_after(HANG_GUARD):
                    report = await call(client, "memory_reflect", {"steps": ["link"]})
            return report["status"]

        status = anyio.run(reflect)
    finally:
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    assert status == "completed"
