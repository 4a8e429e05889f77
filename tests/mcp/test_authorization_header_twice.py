"""A request sending Authorization twice is judged by the header the SDK's bearer check reads
(the first): the wrong-token limit and the per-token session cap read the last (a dict of the
headers), so a guess sent first with anything second was checked without being counted
(12 guesses at /mcp, 12 answered 401, none 429), and a token sent first with a new made-up
one second opened sessions past its cap."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend
from starlette.requests import HTTPConnection

from nooa_mcp.mcp.http import SessionCap, WrongTokens

pytestmark = pytest.mark.anyio

GUESS = [(b"authorization", b"Bearer guess-0123456789"), (b"authorization", b"Basic zzz")]


class Counted:
    def __init__(self) -> None:
        self.failed_count = 0

    def wait_seconds(self, request: HTTPConnection) -> float:
        return 0.0

    def failed(self, request: HTTPConnection, token: str | None = None) -> None:
        self.failed_count += 1
        self.token = token


class Verifier:
    async def verify_token(self, token: str) -> None:
        return None  # every token is wrong


async def _sdk_like(scope: Any, receive: Any, send: Any) -> None:
    """401 unless the SDK's bearer backend finds a user (it never does: no token is valid)."""
    found = await BearerAuthBackend(Verifier()).authenticate(HTTPConnection(scope))  # type: ignore[arg-type]
    status = 200 if found else 401
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def _scope(headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": headers,
        "client": ("127.0.0.1", 5000),
    }


async def test_a_guess_sent_before_another_authorization_header_is_counted() -> None:
    limit = Counted()
    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def receive() -> Any:
        return {"type": "http.request", "body": b""}

    await WrongTokens(_sdk_like, limit)(_scope(GUESS), receive, send)
    assert sent[0]["status"] == 401
    assert limit.failed_count == 1
    assert limit.token == "guess-0123456789"  # the first header's, the one checked


def test_the_session_cap_keys_on_the_token_the_sdk_checks() -> None:
    cap = SessionCap(_sdk_like, lambda: set(), 64, tokens=True)
    first = [(b"authorization", b"Bearer token-a"), (b"authorization", b"Bearer made-up-1")]
    again = [(b"authorization", b"Bearer token-a"), (b"authorization", b"Bearer made-up-2")]
    alone = [(b"authorization", b"Bearer token-a")]
    assert cap._client(_scope(first)) == cap._client(_scope(again)) == cap._client(_scope(alone))
