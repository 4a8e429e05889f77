"""Serving MCP over stdio: every line gets an answer, and what is taken in is bounded.

The SDK's stdio transport (`mcp.server.stdio.stdio_server`) reads stdin line by line and
hands a line that is not a JSON-RPC message to the server as an exception, which answers
nothing: a client that sent a lone surrogate, a nesting too deep or a 5,000-digit number
waited forever for a reply that HTTP gives at once (-32700). It also reads as fast as the
client writes, so a client pipelining thousands of recalls had them all taken in at once.

This wraps that transport instead of replacing it: its reader iterates the lines this module
gives it, and its writer carries every reply.

- A line is read at most `MAX_LINE` bytes at a time (the SDK's limit for an HTTP body); a
  longer one is skipped to its end and answered with an error.
- A line that is not JSON is answered with a parse error (-32700, id null); JSON that is
  not a JSON-RPC message with an invalid-request error (-32600, with its id when it has
  one). Blank lines are not messages and get nothing.
- At most `MAX_IN_FLIGHT` requests are taken in before their replies are written: past
  that, stdin is not read (the client's writes wait in the pipe) until a reply goes out.
  Responses the client sends to the server's own requests (sampling) are never the ones
  waiting: only requests the server answers without the client count, so room frees.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, BinaryIO

import anyio
import anyio.to_thread
import pydantic_core
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

__all__ = ["MAX_IN_FLIGHT", "MAX_LINE", "bounded_stdio"]

#: The longest line read (the SDK's default limit on an HTTP request body).
MAX_LINE = 4 * 1024 * 1024
#: Requests taken in whose replies have not been written yet.
MAX_IN_FLIGHT = 32

Reply = Callable[[JSONRPCError], Awaitable[None]]


class _InFlight:
    """The ids of requests taken in and not yet answered; waits while there are too many."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.ids: Counter[Any] = Counter()
        self._room = anyio.Event()

    async def wait_for_room(self) -> None:
        while sum(self.ids.values()) >= self.limit:
            await self._room.wait()

    def taken(self, ident: Any) -> None:
        self.ids[ident] += 1

    def done(self, ident: Any) -> None:
        if self.ids.get(ident):
            self.ids[ident] -= 1
            if not self.ids[ident]:
                del self.ids[ident]
            self._room.set()
            self._room = anyio.Event()


def _request_id(raw: Any) -> int | str | None:
    """The id of a decoded message, when it has one a reply may carry."""
    ident = raw.get("id") if isinstance(raw, dict) else None
    if isinstance(ident, bool) or not isinstance(ident, int | str):
        return None
    return ident


def _error(code: int, message: str, ident: int | str | None = None) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=ident, error=ErrorData(code=code, message=message))


class _Lines:
    """The stdin the SDK's reader iterates: valid messages only, a bounded number at a time."""

    def __init__(self, source: BinaryIO, in_flight: _InFlight, max_line: int) -> None:
        self.source = source
        self.in_flight = in_flight
        self.max_line = max_line
        self.reply: Reply | None = None

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        while True:
            await self.in_flight.wait_for_room()
            raw = await self._readline(self.max_line + 1)
            if not raw:
                raise StopAsyncIteration
            if len(raw) > self.max_line and not raw.endswith(b"\n"):
                await self._skip_rest()
                await self._answer(
                    _error(INVALID_REQUEST, f"Invalid request: longer than {self.max_line} bytes")
                )
                continue
            text = raw.decode("utf-8", errors="replace")
            if not text.strip():
                continue
            refusal = self._check(text)
            if refusal is None:
                return text
            await self._answer(refusal)

    async def _readline(self, limit: int) -> bytes:
        # In a worker thread, as the SDK reads; abandoned on cancel, as the SDK's own read
        # may be (its descriptor is never closed under it).
        return await anyio.to_thread.run_sync(self.source.readline, limit, abandon_on_cancel=True)

    async def _skip_rest(self) -> None:
        while True:
            rest = await self._readline(self.max_line)
            if not rest or rest.endswith(b"\n"):
                return

    def _check(self, text: str) -> JSONRPCError | None:
        """None for a JSON-RPC message (a request is counted in flight), else the error."""
        try:
            raw = pydantic_core.from_json(text.strip())
        except ValueError as exc:
            return _error(PARSE_ERROR, f"Parse error: {exc}")
        try:
            message = jsonrpc_message_adapter.validate_python(raw, by_name=False)
        except ValidationError:
            return _error(
                INVALID_REQUEST, "Invalid request: not a JSON-RPC 2.0 message", _request_id(raw)
            )
        if isinstance(message, JSONRPCRequest):
            self.in_flight.taken(message.id)
        elif isinstance(message, JSONRPCNotification) and message.method.endswith("/cancelled"):
            # A cancelled request gets no reply: it no longer waits for one.
            self.in_flight.done((message.params or {}).get("requestId"))
        return None

    async def _answer(self, error: JSONRPCError) -> None:
        if self.reply is not None:
            await self.reply(error)


class _Replies:
    """The server's write stream, noting each reply to a request taken in."""

    def __init__(self, inner: Any, in_flight: _InFlight) -> None:
        self.inner = inner
        self.in_flight = in_flight

    async def send(self, item: SessionMessage, /) -> None:
        await self.inner.send(item)
        message = item.message
        if isinstance(message, JSONRPCResponse | JSONRPCError):
            self.in_flight.done(message.id)

    async def refuse(self, error: JSONRPCError) -> None:
        await self.inner.send(SessionMessage(error))

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> _Replies:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None


def _claim_stdin() -> tuple[BinaryIO, Callable[[], None] | None]:
    """fd 0 as the SDK claims it (handlers and children then read EOF, not the wire), or the
    plain buffer when this SDK has no such claim."""
    try:
        from mcp.server.stdio import _claim_fd, _open_stdin_diversion
    except ImportError:  # pragma: no cover - an SDK without the claim
        return sys.stdin.buffer, None
    return _claim_fd(0, sys.stdin, "rb", _open_stdin_diversion)


@asynccontextmanager
async def bounded_stdio(
    max_line: int = MAX_LINE, max_in_flight: int = MAX_IN_FLIGHT
) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's stdio transport over checked, bounded stdin lines (see the module)."""
    in_flight = _InFlight(max_in_flight)
    binary, release = _claim_stdin()
    lines = _Lines(binary, in_flight, max_line)
    try:
        async with stdio_server(stdin=lines) as (read_stream, write_stream):  # type: ignore[arg-type]
            replies = _Replies(write_stream, in_flight)
            lines.reply = replies.refuse
            yield read_stream, replies
    finally:
        if release is not None:
            release()
