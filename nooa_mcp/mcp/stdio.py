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
- When stdin and stdout are pipes or sockets (as a client spawns a server), both are read
  and written on the event loop (`PipeSource`, `PipeSink`: non-blocking reads and writes
  when the loop says the descriptor is ready; DESIGN.md §13.6). The SDK reads and writes
  them in worker threads: three hops a call (a line read, a reply written, a flush), each a
  thread woken and a handoff of the GIL, on a machine whose cores the embedding model is
  using. A file or a terminal keeps the threads (`FileSource`, `FileSink`).
"""

from __future__ import annotations

import io
import os
import stat
import sys
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import ExitStack, asynccontextmanager, suppress
from types import TracebackType
from typing import Any, BinaryIO, Protocol

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

__all__ = ["MAX_IN_FLIGHT", "MAX_LINE", "FileSource", "PipeSink", "PipeSource", "bounded_stdio"]

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


class LineSource(Protocol):
    """Where `_Lines` reads: `readline(limit)` as a binary file's, awaited."""

    async def readline(self, limit: int) -> bytes: ...


class FileSource:
    """A binary file read in a worker thread, as the SDK reads stdin (any file, a terminal)."""

    def __init__(self, file: BinaryIO) -> None:
        self.file = file

    async def readline(self, limit: int) -> bytes:
        # Abandoned on cancel, as the SDK's own read may be (its descriptor is never closed
        # under it).
        return await anyio.to_thread.run_sync(self.file.readline, limit, abandon_on_cancel=True)


class PipeSource:
    """A pipe read on the event loop: `readline(limit)` with a file's meaning (up to and with
    the newline, at most `limit` bytes, b"" at the end), from non-blocking reads of its
    descriptor made when the loop says it is readable."""

    #: Bytes read at a time: what the server holds of the client's writes beyond the lines
    #: it has taken in, as a file's buffer holds (pipelined requests wait in the pipe).
    CHUNK = 8 * 1024

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = bytearray()

    async def readline(self, limit: int) -> bytes:
        searched = 0
        while True:
            end = self.buffer.find(b"\n", searched, limit)
            if end >= 0:
                return self._take(end + 1)
            if len(self.buffer) >= limit:
                return self._take(limit)
            searched = len(self.buffer)
            chunk = await self._read()
            if not chunk:
                return self._take(len(self.buffer))
            self.buffer += chunk

    async def _read(self) -> bytes:
        while True:
            try:
                return os.read(self.fd, self.CHUNK)
            except BlockingIOError:
                await anyio.wait_readable(self.fd)

    def _take(self, size: int) -> bytes:
        out = bytes(self.buffer[:size])
        del self.buffer[:size]
        return out


class _Lines:
    """The stdin the SDK's reader iterates: valid messages only, a bounded number at a time."""

    def __init__(self, source: LineSource, in_flight: _InFlight, max_line: int) -> None:
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
        return await self.source.readline(limit)

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


class Sink(Protocol):
    """Where the SDK's writer writes each reply (a line) and then flushes."""

    async def write(self, text: str) -> None: ...

    async def flush(self) -> None: ...


class FileSink:
    """stdout written in worker threads, as the SDK writes it: for a file or a terminal."""

    def __init__(self, file: BinaryIO) -> None:
        self.file = file

    async def write(self, text: str) -> None:
        await anyio.to_thread.run_sync(self.file.write, text.encode("utf-8"))

    async def flush(self) -> None:
        await anyio.to_thread.run_sync(self.file.flush)


class PipeSink:
    """A pipe written on the event loop: each reply is written whole before `write` returns,
    waiting (as a blocking write waits) while the pipe is full because the client is not
    reading."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    async def write(self, text: str) -> None:
        rest = memoryview(text.encode("utf-8"))
        while rest:
            try:
                rest = rest[os.write(self.fd, rest) :]
            except BlockingIOError:
                await anyio.wait_writable(self.fd)

    async def flush(self) -> None:
        """Nothing is held: `write` has written it all."""


def _on_loop(stack: ExitStack, source: BinaryIO, sink: BinaryIO) -> tuple[LineSource, Sink]:
    """`source` and `sink` read and written on the event loop when they are pipes or sockets
    (as a client that spawns the server makes them), else in worker threads (a file, a
    terminal, Windows); each side decides alone."""
    fd = _pipe(source)
    lines: LineSource = FileSource(source) if fd is None else PipeSource(fd)
    if fd is not None:
        stack.callback(_blocking_again, fd)
    fd = _pipe(sink)
    out: Sink = FileSink(sink) if fd is None else PipeSink(fd)
    if fd is not None:
        stack.callback(_blocking_again, fd)
    return lines, out


def _pipe(file: BinaryIO) -> int | None:
    """`file`'s descriptor, made non-blocking, when it is a pipe or a socket."""
    if sys.platform == "win32":  # pragma: no cover - the loop watches only sockets there
        return None
    try:
        fd = file.fileno()
        mode = os.fstat(fd).st_mode
    except (OSError, ValueError, io.UnsupportedOperation):
        return None
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return None
    os.set_blocking(fd, False)
    return fd


def _blocking_again(fd: int) -> None:
    """Leave the wire's descriptor blocking, as it was found (the claim's release then
    restores it to fd 0 or 1)."""
    with suppress(OSError):
        os.set_blocking(fd, True)


def _claim(fd: int) -> tuple[BinaryIO, Callable[[], None] | None]:
    """fd 0 or 1 as the SDK claims it (handlers and children then read EOF from fd 0 and
    write to stderr through fd 1, never to the wire), or the plain buffer when this SDK has
    no such claim."""
    stream = sys.stdin if fd == 0 else sys.stdout
    try:
        from mcp.server.stdio import _claim_fd, _open_stdin_diversion, _open_stdout_diversion
    except ImportError:  # pragma: no cover - an SDK without the claim
        return stream.buffer, None
    if fd == 0:
        return _claim_fd(0, stream, "rb", _open_stdin_diversion)
    return _claim_fd(1, stream, "wb", _open_stdout_diversion)


@asynccontextmanager
async def bounded_stdio(
    max_line: int = MAX_LINE, max_in_flight: int = MAX_IN_FLIGHT
) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's stdio transport over checked, bounded stdin lines (see the module)."""
    in_flight = _InFlight(max_in_flight)
    with ExitStack() as stack:
        binary, release_in = _claim(0)
        if release_in is not None:
            stack.callback(release_in)
        out_binary, release_out = _claim(1)
        if release_out is not None:
            stack.callback(release_out)
        source, sink = _on_loop(stack, binary, out_binary)
        lines = _Lines(source, in_flight, max_line)
        async with stdio_server(stdin=lines, stdout=sink) as (read_stream, write_stream):  # type: ignore[arg-type]
            replies = _Replies(write_stream, in_flight)
            lines.reply = replies.refuse
            yield read_stream, replies
