"""An HTTP server on 0.0.0.0 answers clients that use the machine's address once the operator
names it (`--allow-host` or NOOA_ALLOWED_HOSTS), on /mcp and /ui, and still refuses any other
Host (a real `nooa-mcp serve --transport http` process, reached over the machine's address).

Before: `--host 0.0.0.0 --tokens` refused every request made by the machine's IP (421 on /mcp,
400 on /ui) and there was no way to allow it.
"""

from __future__ import annotations

import socket
from pathlib import Path

import httpx2
import pytest
from machine import machine_lacks
from shared_support import (
    MCP_HEADERS,
    REFUSE_GUARD,
    created_store,
    http_server,
    initialize_body,
    nooa_argv,
    process_env,
    run_to_exit,
    serve_args,
)

pytestmark = [pytest.mark.anyio, pytest.mark.processes]

TOKEN = "token-a-0123456789abcdef"


def _machine_address() -> str:
    """This machine's address on its default route (no packet is sent)."""
    address = "127.0.0.1"
    for target in ("10.255.255.255", "198.51.100.1"):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            try:
                probe.connect((target, 9))
                address = probe.getsockname()[0]
                break
            except OSError:
                continue
    if address.startswith("127."):
        machine_lacks("this machine has no address besides loopback")
    return address


def _tokens(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.json"
    path.write_text(f'{{"{TOKEN}": "alpha"}}')
    return path


async def _statuses(address: str, port: int, host_header: str | None = None) -> tuple[int, int]:
    """(POST /mcp initialize with the token, GET /ui/) to the machine's address."""
    base = f"http://{address}:{port}"
    headers = {"Host": host_header} if host_header else {}
    async with httpx2.AsyncClient(timeout=30) as http:
        mcp = await http.post(
            f"{base}/mcp",
            json=initialize_body(),
            headers={**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}", **headers},
        )
        ui = await http.get(f"{base}/ui/", headers=headers)
    return mcp.status_code, ui.status_code


async def test_the_machines_address_is_refused_unless_the_operator_allows_it(
    tmp_path: Path,
) -> None:
    address = _machine_address()
    args = serve_args(tmp_path / "s.sqlite", "--tokens", str(_tokens(tmp_path)), host="0.0.0.0")
    async with http_server(args, host=address) as proc:
        refused = await _statuses(address, proc.port)
    assert refused == (421, 400)  # the safe default stays


@pytest.mark.parametrize("how", ["flag", "env"])
async def test_an_allowed_address_is_answered_on_mcp_and_ui(tmp_path: Path, how: str) -> None:
    address = _machine_address()
    extra = ("--allow-host", address) if how == "flag" else ()
    env = process_env(NOOA_ALLOWED_HOSTS=f"memory.internal,{address}") if how == "env" else None
    args = serve_args(
        tmp_path / "s.sqlite", "--tokens", str(_tokens(tmp_path)), *extra, host="0.0.0.0"
    )
    async with http_server(args, host=address, env=env) as proc:
        allowed = await _statuses(address, proc.port)
        other = await _statuses(address, proc.port, host_header=f"evil.example:{proc.port}")
    assert allowed[0] == 200
    assert allowed[1] == 401, allowed  # the console: its sign-in page, past the Host check
    assert other == (421, 400)


async def test_a_wildcard_or_a_port_is_refused_with_one_sentence(tmp_path: Path) -> None:
    for bad in ("*", "memory.internal:8765"):
        argv = nooa_argv(
            *serve_args(
                tmp_path / "s.sqlite", "--tokens", str(_tokens(tmp_path)), "--allow-host", bad
            )
        )
        done = await run_to_exit(argv, process_env(), REFUSE_GUARD)
        assert not done.still_running and done.returncode == 1, done.stderr[-300:]
        assert f"allow-host: '{bad}' is not a host name or an IP address." in done.stderr
        assert "Traceback" not in done.stderr


async def test_the_console_on_its_own_answers_an_allowed_address(tmp_path: Path) -> None:
    address = _machine_address()
    tokens = str(_tokens(tmp_path))
    store = str(created_store(tmp_path / "s.sqlite"))
    common = ["--store", store, "ui", "--host", "0.0.0.0", "--port", "0"]
    plain_args = [*common, "--tokens", tokens]
    async with http_server(plain_args, host=address) as plain, httpx2.AsyncClient() as http:
        refused = (await http.get(f"http://{address}:{plain.port}/")).status_code
    allowing = [*common, "--tokens", tokens, "--allow-host", address]
    async with http_server(allowing, host=address) as proc, httpx2.AsyncClient() as http:
        answered = (await http.get(f"http://{address}:{proc.port}/")).status_code
    assert (refused, answered) == (400, 401)
