"""The HTTP front end's guards, served in this process (uvicorn on a loopback socket, or the
ASGI app called directly), so coverage and mutation testing see them. The same guards are
also tested against a real `nooa-mcp serve` process (test_session_cap, test_server_console_mount).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import httpx
import pytest
from http_serving import serving
from shared_support import MCP_HEADERS, initialize_body
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from nooa_mcp.config import Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp.http import http_app
from nooa_mcp.mcp.server import build_server

pytestmark = pytest.mark.anyio

TOKENS = {"alpha-token-0123456789abcdef": "alice", "beta-token-0123456789abcdefg": "bob"}


async def test_a_token_opens_at_most_the_cap_of_sessions_and_another_token_is_apart(
    tmp_path: Path,
) -> None:
    settings = Settings(store=tmp_path / "s.sqlite")
    alpha, beta = list(TOKENS)
    async with serving(settings, TOKENS, max_sessions=2) as url, httpx.AsyncClient() as http:

        async def initialize(token: str) -> int:
            headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
            reply = await http.post(url, json=initialize_body(), headers=headers)
            return reply.status_code

        statuses = [await initialize(alpha) for _ in range(3)]
        other = await initialize(beta)
    assert statuses == [200, 200, 429]
    assert other == 200


async def test_the_console_mount_answers_its_host_and_refuses_a_foreign_one(
    tmp_path: Path,
) -> None:
    async def page(request: Request) -> PlainTextResponse:
        return PlainTextResponse("console page")

    ui = Starlette(routes=[Route("/", page)])
    server = build_server(
        Settings(store=tmp_path / "s.sqlite", owner="me"), embedder=HashEmbedder()
    )
    app = http_app(server, host="127.0.0.1", max_sessions_per_client=4, ui=ui)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        own = await http.get("/ui/")
        foreign = await http.get("/ui/", headers={"Host": "evil.example"})
    assert (own.status_code, own.text) == (200, "console page")
    assert foreign.status_code == 400


async def test_a_use_over_http_is_logged_with_the_session_the_client_sent(tmp_path: Path) -> None:
    # A client of a protocol version with sessions (the Inspector, the TypeScript SDK) sends
    # back the mcp-session-id its initialize was answered with; its uses are logged with it.
    settings = Settings(store=tmp_path / "s.sqlite")
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {next(iter(TOKENS))}"}
    async with serving(settings, TOKENS) as url, httpx.AsyncClient() as http:
        opened = await http.post(url, json=initialize_body(), headers=headers)
        session = opened.headers["mcp-session-id"]
        headers = {**headers, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await http.post(url, json=initialized, headers=headers)
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "memory_author", "arguments": {"content": "The VPN is vpn-2."}},
        }
        answered = await http.post(url, json=call, headers=headers)
    assert answered.status_code == 200 and '"created"' in answered.text
    with sqlite3.connect(settings.store) as conn:
        logged = conn.execute("SELECT channel, session_ref FROM accesses").fetchall()
    assert logged == [("created", session)]
