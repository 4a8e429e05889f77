"""Serving MCP over streamable HTTP, safely shared: host checks on every bound host, sessions
capped per client.

- Host and Origin headers are checked whatever address the server binds, not only on
  127.0.0.1: a DNS-rebinding page must not reach a server on 127.0.0.2 either. Names the
  operator allows (`--allow-host`, e.g. the machine's address on 0.0.0.0) are added.
- Each client (its bearer token; without tokens, its address) may hold at most
  `max_sessions_per_client` open sessions; past it, that client gets 429 while every other
  client still gets in. The SDK's store-wide cap would otherwise let one token take every
  session and lock everyone else out for the idle timeout. The cap counts requests still
  being answered, so parallel initializes cannot overshoot it.
- Wrong bearer tokens at /mcp and /hooks count against the same limit as the console's
  sign-in (`WrongTokens`): one budget per address (and per proxy), wherever a token is tried.
- A missing or wrong token's 401 says what to send (`TokenHint`), the same either way.
"""

from __future__ import annotations

import hashlib
import json
import math
import socket
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, Protocol, cast

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import HTTPConnection
from starlette.routing import Mount

from ..hosts import forwarding, shown

__all__ = ["SessionCap", "WrongTokens", "http_app", "protection"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SESSION_HEADER = b"mcp-session-id"


def protection(host: str, allowed: Iterable[str] = ()) -> TransportSecuritySettings:
    """DNS-rebinding protection that names the bound host as well as the loopback names, and
    the host names or addresses the operator allowed (`parse_allowed_hosts`)."""
    names = {shown(host), "127.0.0.1", "localhost", "[::1]", *allowed}
    if host in ("0.0.0.0", "::"):
        names.add(socket.gethostname())
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=sorted({*names, *(f"{n}:*" for n in names)}),
        allowed_origins=sorted(
            {
                f"{scheme}://{n}{port}"
                for n in names
                for scheme in ("http", "https")
                for port in ("", ":*")
            }
        ),
    )


def _hostnames(allowed: list[str]) -> list[str]:
    """Host patterns as Starlette's TrustedHostMiddleware takes them (no ports, no brackets)."""
    return sorted({h.rsplit(":*", 1)[0].strip("[]") for h in allowed})


class SessionCap:
    """ASGI middleware: at most `limit` open MCP sessions per client.

    A client is its bearer token (hashed; never kept in the clear) when the server has a
    tokens file, and its address otherwise: without tokens a bearer header proves nothing,
    and one caller rotating made-up ones must not count as many clients. Sessions are
    learned from the `mcp-session-id` the SDK answers an `initialize` with, and forgotten
    once the SDK no longer holds them (closed, or reaped when idle).

    The cap is atomic: a request that may open a session takes its place before it is
    served (between the check and the reservation there is no await), so a burst of
    parallel initializes cannot all pass the check before any of them is answered.
    """

    def __init__(
        self, app: ASGIApp, live: Callable[[], set[str]], limit: int, tokens: bool = True
    ) -> None:
        self.app = app
        self.live = live
        self.limit = limit
        self.tokens = tokens
        self._sessions: dict[str, set[str]] = {}
        #: Requests per client that may still open a session (answer not yet started).
        self._opening: dict[str, int] = {}

    def _client(self, scope: Scope) -> str:
        auth = authorization(scope)
        if self.tokens and auth.lower().startswith(b"bearer "):
            return "token:" + hashlib.sha256(auth[7:].strip()).hexdigest()[:24]
        client = scope.get("client") or ("?", 0)
        return f"address:{client[0]}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        if SESSION_HEADER in headers:
            await self.app(scope, receive, send)
            return
        client = self._client(scope)
        live = self.live()
        held = self._sessions.setdefault(client, set())
        held &= live
        if len(held) + self._opening.get(client, 0) >= self.limit:
            await _too_many(send, self.limit)
            return
        self._opening[client] = self._opening.get(client, 0) + 1
        opening = True

        def settle() -> None:
            nonlocal opening
            if opening:
                opening = False
                left = self._opening[client] - 1
                if left:
                    self._opening[client] = left
                else:
                    del self._opening[client]
                    if not held:
                        self._sessions.pop(client, None)

        async def remember(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                for name, value in message.get("headers") or []:
                    if name.lower() == SESSION_HEADER:
                        held.add(value.decode())
                        self._sessions[client] = held
                settle()
            await send(message)

        try:
            await self.app(scope, receive, remember)
        finally:
            settle()


def authorization(scope: Scope) -> bytes:
    """The request's first Authorization header, the one the SDK's bearer check reads (and
    Starlette's `headers.get`); b"" without one. A dict of the headers keeps the last: a
    request sending a guess first and anything second had its guess checked by the SDK
    while the wrong-token limit and the session cap read the second."""
    for name, value in scope.get("headers") or []:
        if name.lower() == b"authorization":
            return bytes(value)
    return b""


class Limit(Protocol):
    """What counts wrong tokens (`console.auth.TokenLogin`)."""

    def wait_seconds(self, request: HTTPConnection) -> float: ...

    def failed(self, request: HTTPConnection, token: str | None = None) -> None: ...


class WrongTokens:
    """ASGI middleware: a request with a bearer token, outside the console (which counts its
    own), is refused with 429 while its address (or the proxy that forwarded it) must wait,
    and a 401 answer to one counts as a wrong token. Without it /mcp checked every guess,
    however many, while the console stopped at 5 a minute."""

    def __init__(self, app: ASGIApp, limit: Limit) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path == "/ui" or path.startswith("/ui/"):
            await self.app(scope, receive, send)
            return
        header = authorization(scope)
        if not header.lower().startswith(b"bearer "):
            await self.app(scope, receive, send)
            return
        token = header[7:].strip().decode("latin-1")
        request = HTTPConnection(scope)
        wait = self.limit.wait_seconds(request)
        if wait:
            await _wait(send, wait)
            return

        async def counted(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start" and message.get("status") == 401:
                self.limit.failed(request, token)
            await send(message)

        await self.app(scope, receive, counted)


#: What the SDK's bearer check (and the hooks route, alike) answers a missing or wrong token.
SDK_401 = "Authentication required"
#: The one sentence said instead: the fix, the same for a missing and a wrong token, so that
#: it tells nothing of which tokens exist.
TOKEN_HINT = (
    "Send the header `Authorization: Bearer <token>` with a token from this server's tokens "
    "file (its operator has them): none was sent, or the one sent is not one of them."
)


class TokenHint:
    """ASGI middleware: a 401 saying only "Authentication required" (the SDK's, whose wording
    it fixes) says instead how to get in, in its body and its WWW-Authenticate header. A
    client left with a wrong token read no hint of what to send."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        held: list[MutableMapping[str, Any]] = []

        async def hinted(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start" and message.get("status") == 401:
                held.append(message)  # sent with the body, which says whether to rewrite
                return
            if held and message["type"] == "http.response.body":
                start = held.pop()
                body = message.get("body", b"")
                if not message.get("more_body") and _is_sdk_401(body):
                    body = json.dumps(
                        {"error": "invalid_token", "error_description": TOKEN_HINT}
                    ).encode()
                    start = {**start, "headers": _hinted_headers(start.get("headers", []), body)}
                    message = {**message, "body": body}
                await send(start)
            await send(message)

        await self.app(scope, receive, hinted)


def _is_sdk_401(body: bytes) -> bool:
    try:
        found = json.loads(body)
    except ValueError:
        return False
    return isinstance(found, dict) and found.get("error_description") == SDK_401


def _hinted_headers(headers: Iterable[tuple[bytes, bytes]], body: bytes) -> list[Any]:
    kept: list[Any] = []
    for name, value in headers:
        if name.lower() == b"content-length":
            value = str(len(body)).encode()
        elif name.lower() == b"www-authenticate":
            value = value.replace(SDK_401.encode(), TOKEN_HINT.replace('"', "'").encode())
            if b"error_description" not in value:
                value += b', error_description="' + TOKEN_HINT.encode() + b'"'
        kept.append((name, value))
    return kept


async def _wait(send: Send, wait: float) -> None:
    seconds = max(1, math.ceil(wait))
    body = json.dumps(
        {
            "error": "too_many_requests",
            "error_description": f"Too many wrong tokens from this address; try again in "
            f"{seconds} s.",
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 429,
            "headers": [
                (b"content-type", b"application/json"),
                (b"retry-after", str(seconds).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _too_many(send: Send, limit: int) -> None:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -32000,
                "message": f"This client already holds {limit} open sessions, the most one "
                "client may hold. Close one (HTTP DELETE with its mcp-session-id) or reuse it.",
            },
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 429,
            "headers": [(b"content-type", b"application/json"), (b"retry-after", b"60")],
        }
    )
    await send({"type": "http.response.body", "body": body})


def http_app(
    server: MCPServer,
    *,
    host: str,
    max_sessions_per_client: int,
    ui: ASGIApp | None = None,
    tokens: bool | None = None,
    allowed_hosts: Iterable[str] = (),
    wrong_tokens: Limit | None = None,
) -> ASGIApp:
    """The streamable-HTTP app of `server`, host-checked and session-capped per client, with
    the web console mounted at /ui when given (behind the same Host check). `tokens` says
    whether the server checks bearer tokens (None: whether it was built with a verifier);
    without them, sessions are capped per address. `allowed_hosts` are Host names the
    operator allows besides the bound host and loopback. `wrong_tokens` (the console's
    `TokenLogin`) limits wrong bearer tokens at /mcp and /hooks with the console's budget."""
    if tokens is None:
        tokens = getattr(server, "_token_verifier", None) is not None
    security = protection(host, allowed_hosts)
    app = server.streamable_http_app(host=host, transport_security=security)
    if ui is not None:
        hosts = TrustedHostMiddleware(ui, allowed_hosts=_hostnames(security.allowed_hosts))
        app.router.routes.append(Mount("/ui", app=hosts))
    manager = server._lowlevel_server._session_manager
    assert manager is not None  # streamable_http_app has just made it

    def live() -> set[str]:
        return set(manager._server_instances)

    # The cap is keyed on the peer the socket reports: uvicorn would otherwise have rewritten
    # it from X-Forwarded-For (trusted from loopback), letting one local caller claim a new
    # address per request. Inside the cap, the app sees the forwarded client and scheme as
    # uvicorn would show them (a TLS proxy on this machine), so serve with proxy_headers off;
    # the peer stays in the scope for the console's wrong-token limit (`hosts.forwarding`).
    limited: ASGIApp = TokenHint(cast(ASGIApp, app))
    if wrong_tokens is not None:
        limited = WrongTokens(limited, wrong_tokens)
    forwarded = forwarding(limited)
    return SessionCap(cast(ASGIApp, forwarded), live, max_sessions_per_client, tokens=tokens)
