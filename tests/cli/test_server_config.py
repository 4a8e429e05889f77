"""Every HTTP app reaches uvicorn through `hosts.server_config` (README "Development": mutation).

uvicorn calls what it is given with no arguments to see whether it is a factory, and guesses
ASGI 2 or 3 from its `__call__`. An app whose `__call__` takes any arguments (as mutation
testing wraps every method) passed for a factory: the server failed at start-up with "coroutine
object is not callable", so no HTTP test could run under mutation testing.
"""

from __future__ import annotations

import socket
from typing import Any

import anyio
import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from nooa_mcp.hosts import server_config

pytestmark = pytest.mark.anyio


class Wrapped:
    """An ASGI 3 app behind a `__call__` that takes any arguments, the shape a mutation wrapper
    gives it: called bare, it returns a coroutine instead of refusing."""

    def __init__(self) -> None:
        async def hello(request: Any) -> PlainTextResponse:
            return PlainTextResponse("hello")

        self.inner = Starlette(routes=[Route("/", hello)])
        self.lifespans = 0

    async def __call__(self, *args: Any, **kwargs: Any) -> None:
        await self._call(*args, **kwargs)

    async def _call(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            self.lifespans += 1
        await self.inner(scope, receive, send)


async def test_an_app_with_a_wrapped_call_is_served_with_its_lifespan() -> None:
    app = Wrapped()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    port = sock.getsockname()[1]
    server = uvicorn.Server(server_config(app, log_level="warning", lifespan="on"))
    with anyio.fail_after(30):  # a hang guard, not a speed assertion
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            while not server.started:
                await anyio.sleep(0.01)
            async with httpx.AsyncClient() as http:
                reply = await http.get(f"http://127.0.0.1:{port}/")
            server.should_exit = True
    assert (reply.status_code, reply.text) == (200, "hello")
    assert app.lifespans == 1
