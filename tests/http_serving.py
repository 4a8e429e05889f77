"""A real streamable-HTTP nooa-mcp on a loopback socket, and clients for it (tests only).

The socket is bound before uvicorn starts, so a test never waits on a timer for the port.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from nooa_mcp.config import Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.hosts import server_config
from nooa_mcp.mcp.http import http_app
from nooa_mcp.mcp.server import build_server


@asynccontextmanager
async def serving(
    settings: Settings, tokens: dict[str, str] | None, max_sessions: int = 64
) -> AsyncIterator[str]:
    """Serve `settings` over HTTP on 127.0.0.1 with `tokens`, at most `max_sessions` open
    sessions per client; yields the /mcp URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    host, port = sock.getsockname()
    server = build_server(settings, embedder=HashEmbedder(), tokens=tokens)
    app = http_app(server, host="127.0.0.1", max_sessions_per_client=max_sessions)
    config = server_config(app, log_level="warning", lifespan="on")
    userver = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(userver.serve, [sock])
        try:
            yield f"http://{host}:{port}/mcp"
        finally:
            userver.should_exit = True


@asynccontextmanager
async def connect(url: str, token: str) -> AsyncIterator[Client]:
    """An MCP client on `url` that sends `token` as its bearer token."""
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, Client(streamable_http_client(url, http_client=http), cache=None) as client:
        yield client
