"""The per-client session cap holds under a burst and cannot be dodged: a real `nooa-mcp serve
--transport http` process on loopback, over an SQLite and a PostgreSQL store.

Before: one token sending 300 initializes at once held 309 sessions (cap 64), since every one
passed the check before any was answered; without tokens, made-up bearer headers each counted
as a client of their own, so 400 of 400 opened.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import anyio
import httpx2
import pytest
from shared_support import MCP_HEADERS, http_server, initialize_body, process_env, serve_args

pytestmark = [pytest.mark.anyio, pytest.mark.processes]

TOKEN_A = "token-a-0123456789abcdef"
TOKEN_B = "token-b-0123456789abcdef"


def _tokens(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.json"
    path.write_text(f'{{"{TOKEN_A}": "alpha", "{TOKEN_B}": "beta"}}')
    return path


async def _burst(url: str, headers: list[dict[str, str]]) -> list[int]:
    """One initialize per entry of `headers`, all at once; their HTTP statuses."""
    statuses: list[int] = [0] * len(headers)
    limits = httpx2.Limits(max_connections=len(headers), max_keepalive_connections=0)
    async with httpx2.AsyncClient(limits=limits, timeout=120) as http:

        async def one(i: int) -> None:
            response = await http.post(
                url, json=initialize_body(), headers={**MCP_HEADERS, **headers[i]}
            )
            statuses[i] = response.status_code

        async with anyio.create_task_group() as tg:
            for i in range(len(headers)):
                tg.start_soon(one, i)
    return statuses


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_300_parallel_initializes_of_one_token_hold_at_most_64_sessions(
    store_target, tmp_path: Path
) -> None:
    args = serve_args(Path(str(store_target)), "--tokens", str(_tokens(tmp_path)))
    if not isinstance(store_target, Path):
        args[1] = store_target  # a postgresql:// URL, as written
    async with http_server(args) as proc:
        statuses = await _burst(proc.url, [_bearer(TOKEN_A)] * 300)
        after = await _burst(proc.url, [_bearer(TOKEN_A), _bearer(TOKEN_B)])
    opened = statuses.count(200)
    print(f"{store_target!s:.40}: 300 parallel initializes, cap 64 -> {opened} sessions")
    assert (opened, statuses.count(429)) == (64, 236), sorted(set(statuses))
    assert after == [429, 200]


async def test_without_tokens_made_up_bearer_headers_share_their_addresss_cap(
    store_target, tmp_path: Path
) -> None:
    args = serve_args(Path(str(store_target)))
    if not isinstance(store_target, Path):
        args[1] = store_target
    env = process_env(NOOA_MAX_SESSIONS_PER_CLIENT="5")
    async with http_server(args, env=env) as proc:
        statuses = await _burst(proc.url, [_bearer(secrets.token_hex(16)) for _ in range(100)])
    opened = statuses.count(200)
    print(f"{store_target!s:.40}: 100 made-up bearer tokens, cap 5 -> {opened} sessions")
    assert (opened, statuses.count(429)) == (5, 95), sorted(set(statuses))


async def test_without_tokens_made_up_forwarded_for_headers_share_the_peers_cap(
    tmp_path: Path,
) -> None:
    # uvicorn believes X-Forwarded-For from loopback: the cap must count the socket's peer.
    env = process_env(NOOA_MAX_SESSIONS_PER_CLIENT="5")
    async with http_server(serve_args(tmp_path / "s.sqlite"), env=env) as proc:
        spoofed = [{"X-Forwarded-For": f"10.9.{i // 250}.{i % 250 + 1}"} for i in range(100)]
        statuses = await _burst(proc.url, spoofed)
    assert (statuses.count(200), statuses.count(429)) == (5, 95), sorted(set(statuses))
