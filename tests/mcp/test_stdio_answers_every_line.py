"""Over stdio every malformed line gets its JSON-RPC error, and a client that pipelines more
requests than the server answers is held back by the pipe instead of being read into memory
(a real stdio server process, driven line by line).

Before: ten malformed requests (a lone surrogate, nesting 5,000 deep, a 5,000-digit number,
text that is not JSON, a JSON array...) got no reply at all while HTTP answered -32700, and
pipelined recalls were all read in at once (5,000 took a server from 212 to 429 MiB).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import subprocess
import time
from pathlib import Path

import pytest
from shared_support import HANG_GUARD, stdio_params

from nooa_mcp import Settings

pytestmark = pytest.mark.processes

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "line-client", "version": "1"},
    },
}


class Line:
    """A stdio server process and its stdout, read a line at a time with a ceiling."""

    def __init__(self, store: Path, stderr: Path | None = None) -> None:
        params = stdio_params(Settings(store=store, owner="alice"))
        with contextlib.ExitStack() as files:
            sink = files.enter_context(stderr.open("wb")) if stderr else subprocess.DEVNULL
            self.proc = subprocess.Popen(
                [params.command, *params.args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=sink,
                env=params.env,
            )
        self.pending = b""

    def send(self, line: bytes | dict) -> None:
        raw = line if isinstance(line, bytes) else json.dumps(line).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw + b"\n")
        self.proc.stdin.flush()

    def reply(self, ceiling: float = HANG_GUARD * 3) -> dict:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + ceiling
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(left, 0))
            assert ready, "no reply within the ceiling"
            chunk = os.read(fd, 1 << 16)
            assert chunk, "the server closed stdout"
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return json.loads(line)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


@pytest.fixture
def server(tmp_path: Path):
    line = Line(tmp_path / "m.sqlite")
    line.send(INIT)
    assert line.reply()["id"] == 0
    line.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    yield line
    line.close()


def _call(ident: int, query: str) -> bytes:
    params = {"name": "memory_recall", "arguments": {"query": query}}
    return b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}' % (
        ident,
        json.dumps(params).encode(),
    )


MALFORMED = [
    # (line, the code and id its reply must carry)
    (_call(1, "x")[:-3] + b'"\\ud800"}}}', -32700, None),  # a lone surrogate escape, cut
    (
        b'{"jsonrpc":"2.0","id":2,"method":"ping","params":' + b"[" * 5000 + b"]" * 5000 + b"}",
        -32700,
        None,
    ),
    (_call(3, "x").replace(b'"query": "x"', b'"query": "x", "k": ' + b"9" * 5000), -32700, None),
    (b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}', -32700, None),
    (b"not json at all", -32700, None),
    (b'{"jsonrpc":"2.0","id":6,"method":', -32700, None),
    (b"[1,2,3]", -32600, None),
    (b'{"jsonrpc":"1.0","id":8,"method":"ping"}', -32600, 8),
    (b'{"id":"nine"}', -32600, "nine"),
    (b'\xff\xfe{"jsonrpc":"2.0","id":10,"method":"ping"}', -32700, None),
]


def test_every_malformed_line_is_answered_with_its_json_rpc_error(server: Line) -> None:
    for line, _, _ in MALFORMED:
        server.send(line)
    server.send({"jsonrpc": "2.0", "id": 99, "method": "ping"})
    replies = [server.reply() for _ in range(len(MALFORMED) + 1)]
    assert [(r.get("error", {}).get("code"), r["id"]) for r in replies] == [
        *((code, ident) for _, code, ident in MALFORMED),
        (None, 99),  # and the server still answers
    ]


def test_a_line_over_4_mib_is_skipped_to_its_end_and_answered(server: Line) -> None:
    big = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + b"x" * (5 << 20) + b'"}}'
    server.send(big)
    server.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
    first, second = server.reply(), server.reply()
    assert (first["error"]["code"], first["id"]) == (-32600, None)
    assert second == {"jsonrpc": "2.0", "id": 2, "result": {}}


def test_pipelined_requests_wait_in_the_pipe_not_in_the_server(server: Line) -> None:
    """With stdout unread, the server stops taking requests in once its replies wait: the
    client's writes then stay blocked. Each request carries a 1 KB query, so a 64 KiB stdin
    pipe holds about 60 of them; the server may hold 32 in flight and a read buffer's worth."""
    total = 600
    lines = [_call(100 + i, f"deploy {i} " + "w" * 1000) + b"\n" for i in range(total)]
    assert server.proc.stdin is not None
    fd = server.proc.stdin.fileno()
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
    payload, sent = b"".join(lines), 0
    quiet_for = 5.0  # how long no byte may go in before the client counts itself held back
    deadline = time.monotonic() + 120
    while sent < len(payload) and time.monotonic() < deadline:
        _, ready, _ = select.select([], [fd], [], quiet_for)
        if not ready:
            break
        try:
            sent += os.write(fd, payload[sent : sent + 65536])
        except BlockingIOError:
            continue
    taken = payload[:sent].count(b"\n")
    print(f"{taken} of {total} pipelined requests went in while no reply was read")
    assert taken < 250, taken
    # Nothing is dropped: once replies are read, the rest goes in and everything is answered.
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    answered: set[int] = set()
    while len(answered) < total:
        while sent < len(payload):
            _, ready, _ = select.select([], [fd], [], 0)
            if not ready:
                break
            sent += os.write(fd, payload[sent : sent + 4096])
        reply = server.reply()
        assert "result" in reply, reply
        answered.add(reply["id"])
    assert answered == set(range(100, 100 + total))


def test_a_client_that_closes_stdout_ends_the_session_without_a_traceback(
    tmp_path: Path,
) -> None:
    """A client that quits closes its end of the server's stdout, often before stdin: the
    server's next reply meets a broken pipe. It stops with status 0 and nothing boxed on
    stderr (that went into the client's log as a traceback, exit status 1)."""
    line = Line(tmp_path / "m.sqlite", stderr=tmp_path / "stderr.log")
    line.send(INIT)
    assert line.reply()["id"] == 0
    proc = line.proc
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdout.close()
    with contextlib.suppress(BrokenPipeError):
        for ident in range(1, 20):
            proc.stdin.write(b'{"jsonrpc":"2.0","id":%d,"method":"tools/list"}\n' % ident)
            proc.stdin.flush()
    try:
        assert proc.wait(timeout=HANG_GUARD * 3) == 0
    finally:
        proc.kill()
        with contextlib.suppress(OSError):
            proc.stdin.close()
    assert "Traceback" not in (tmp_path / "stderr.log").read_text()
