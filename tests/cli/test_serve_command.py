"""`nooa-mcp serve` as a person starts it (the installed console script, a real process): the
HTTP transport prints one line with its URL, the store and whether tokens are required; a busy
port is one sentence naming the port; tokens with the stdio transport are refused in one
sentence naming `--tokens` and `http`.
"""

from __future__ import annotations

import json
import os
import re
import select
import socket
import subprocess
import time
from pathlib import Path

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from writes_support import console_script


def env_without_nooa(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOOA_")}
    env.update(HF_HUB_OFFLINE="1", **extra)
    return env


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.anyio
@pytest.mark.processes
async def test_http_serve_prints_one_line_with_the_url_the_store_and_the_token_state(
    tmp_path: Path,
) -> None:
    store = tmp_path / "served.sqlite"
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    command = [console_script(), "--store", str(store), "serve", "--transport", "http"]
    process = await anyio.open_process(
        [*command, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        # Unbuffered: the line must reach the pipe when printed, as it reaches a terminal.
        env=env_without_nooa(PYTHONUNBUFFERED="1"),
    )
    lines: list[str] = []
    try:
        reader = BufferedByteReceiveStream(process.stdout)
        with anyio.fail_after(30):  # a guard against a hang, not a timing assertion
            while not any(url in line for line in lines):
                try:
                    lines.append((await reader.receive_until(b"\n", 65536)).decode())
                except (anyio.EndOfStream, anyio.IncompleteRead):
                    break
    finally:
        process.terminate()
        with anyio.CancelScope(shield=True):
            await process.wait()
            await process.aclose()
    started = [line for line in lines if url in line]
    assert len(started) == 1, lines
    assert store.name in started[0]
    assert re.search(r"token", started[0], re.I), started[0]


@pytest.mark.processes
def test_a_busy_port_is_one_sentence_naming_the_port(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        out = subprocess.run(
            [
                console_script(),
                "--store",
                str(tmp_path / "served.sqlite"),
                "serve",
                "--transport",
                "http",
                "--port",
                str(port),
            ],
            capture_output=True,
            text=True,
            env=env_without_nooa(),
            timeout=120,
        )
    text = out.stdout + out.stderr
    assert out.returncode != 0
    assert "Errno" not in text and "Traceback" not in text and "ERROR:" not in text, text
    said = [line for line in text.splitlines() if str(port) in line]
    assert any(re.search(r"in use|busy|taken", line) for line in said), text


@pytest.mark.processes
def test_tokens_with_the_stdio_transport_are_refused_in_one_sentence(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"a-long-random-token": "alice"}))
    out = subprocess.run(
        [console_script(), "--store", str(tmp_path / "s.sqlite"), "serve", "--tokens", str(tokens)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env_without_nooa(),
        timeout=120,
    )
    assert out.returncode != 0
    assert "--tokens" in out.stderr and "http" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.processes
@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "pipe"])
def test_stdio_serve_says_what_it_waits_for_only_to_a_terminal(
    tmp_path: Path, terminal: bool
) -> None:
    """`nooa-mcp` typed in a shell waits for a client's JSON-RPC: it says so on stderr. A
    client starts it on pipes and gets not a byte on stderr before its first request."""
    import pty

    store = tmp_path / "m.sqlite"
    leader, follower = pty.openpty() if terminal else (None, subprocess.PIPE)
    proc = subprocess.Popen(
        [console_script(), "--store", str(store)],
        stdin=follower,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env_without_nooa(),
    )
    said = b""
    try:
        assert proc.stderr is not None
        # The line comes before serving starts; on pipes, by the same moment, nothing.
        deadline = time.monotonic() + (30 if terminal else 4)
        while b"\n" not in said and time.monotonic() < deadline:
            if select.select([proc.stderr], [], [], 0.2)[0]:
                said += os.read(proc.stderr.fileno(), 4096)
        assert proc.poll() is None  # still waiting for a client
    finally:
        proc.terminate()
        said += proc.communicate(timeout=30)[1]
        if leader is not None:
            os.close(leader)
            os.close(follower)
    text = said.decode()
    if terminal:
        assert "serving MCP over stdio for an MCP client" in text and str(store) in text
        assert "Ctrl-C to stop" in text
    else:
        assert "serving MCP" not in text


def test_a_served_stores_line_never_shows_a_password() -> None:
    from nooa_mcp.serving import shown_store

    assert shown_store("postgresql://ann:s3cret@db.local:5432/mem") == (
        "postgresql://ann@db.local:5432/mem"
    )
    assert shown_store("postgres://:s3cret@db.local/mem?sslmode=require") == (
        "postgres://db.local/mem?sslmode=require"
    )
    assert shown_store("postgresql://ann@db.local/mem") == "postgresql://ann@db.local/mem"
    assert shown_store(Path("/data/memory.sqlite")) == "/data/memory.sqlite"
