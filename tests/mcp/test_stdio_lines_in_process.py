"""The stdio transport's line checks and in-flight bound, driven in this process.

test_stdio_answers_every_line runs the same rules through a real `nooa-mcp serve` process;
there, coverage and mutation testing cannot see them. Here the reader is fed from memory.
"""

from __future__ import annotations

import io
import json
import os
from contextlib import ExitStack

import anyio
import pytest
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, JSONRPCError, JSONRPCResponse

from nooa_mcp.mcp.stdio import (
    FileSink,
    FileSource,
    PipeSink,
    PipeSource,
    _InFlight,
    _Lines,
    _on_loop,
    _Replies,
)

pytestmark = pytest.mark.anyio


def request(ident: object, method: str = "tools/list") -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": ident, "method": method}).encode() + b"\n"


async def read_all(data: bytes, max_line: int = 200, limit: int = 32):
    lines = _Lines(FileSource(io.BytesIO(data)), _InFlight(limit), max_line)
    answered: list[tuple[object, int, str]] = []

    async def reply(error: JSONRPCError) -> None:
        answered.append((error.id, error.error.code, error.error.message))

    lines.reply = reply
    passed = [json.loads(text) async for text in lines]
    return passed, answered, lines.in_flight


async def test_messages_pass_and_every_other_line_is_answered_with_its_id() -> None:
    data = b"".join(
        [
            request(1),
            b"\n   \n",  # blank lines are not messages: no answer
            b"{not json\n",
            b'{"id": 7, "hello": "world"}\n',  # JSON, not JSON-RPC: answered with its id
            b'{"id": true, "x": 1}\n',  # an id a reply may not carry: null
            b"x" * 300 + b"\n",  # longer than the limit: skipped to its end
            request("two"),
            b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n',
        ]
    )
    passed, answered, in_flight = await read_all(data)
    assert [m.get("id", m["method"]) for m in passed] == [1, "two", "notifications/initialized"]
    assert [(i, code) for i, code, _ in answered] == [
        (None, PARSE_ERROR),
        (7, INVALID_REQUEST),
        (None, INVALID_REQUEST),
        (None, INVALID_REQUEST),
    ]
    assert answered[3][2] == "Invalid request: longer than 200 bytes"
    assert answered[1][2] == "Invalid request: not a JSON-RPC 2.0 message"
    assert answered[0][2].startswith("Parse error: ")
    # Requests are in flight until answered; notifications never are.
    assert dict(in_flight.ids) == {1: 1, "two": 1}


async def test_a_line_of_exactly_the_limit_is_read_and_one_byte_more_is_not() -> None:
    body = request(5)
    exact = len(body) - 1  # the newline is not counted in the limit
    passed, answered, _ = await read_all(body, max_line=exact)
    assert [m["id"] for m in passed] == [5] and answered == []
    passed, answered, _ = await read_all(body, max_line=exact - 1)
    assert passed == [] and [code for _, code, _ in answered] == [INVALID_REQUEST]


async def test_a_cancelled_request_frees_its_place() -> None:
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"requestId": 2}}
    # The client's answer to one of the server's own requests (sampling) is no request.
    answer = {"jsonrpc": "2.0", "id": "s1", "result": {}}
    lines = [request(1), request(2), *(json.dumps(m).encode() + b"\n" for m in (cancel, progress))]
    passed, _, in_flight = await read_all(b"".join([*lines, json.dumps(answer).encode() + b"\n"]))
    assert len(passed) == 5 and dict(in_flight.ids) == {2: 1}


async def test_no_line_is_read_past_the_limit_until_a_reply_goes_out() -> None:
    lines = _Lines(FileSource(io.BytesIO(request(1) + request(2) + request(3))), _InFlight(2), 200)
    sent: list[SessionMessage] = []

    class Sink:
        async def send(self, item: SessionMessage) -> None:
            sent.append(item)

    replies = _Replies(Sink(), lines.in_flight)
    first = [json.loads(await lines.__anext__())["id"] for _ in range(2)]
    with anyio.move_on_after(0.2) as waited:
        await lines.__anext__()
    assert first == [1, 2] and waited.cancelled_caught  # the third waits for room
    await replies.send(SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=1, result={})))
    with anyio.fail_after(10):  # a hang guard, not a speed assertion
        third = json.loads(await lines.__anext__())["id"]
    assert third == 3 and dict(lines.in_flight.ids) == {2: 1, 3: 1}
    await replies.refuse(JSONRPCError(jsonrpc="2.0", id=None, error={"code": -1, "message": "x"}))
    assert isinstance(sent[1].message, JSONRPCError) and sent[1].message.error.message == "x"
    assert dict(lines.in_flight.ids) == {2: 1, 3: 1}  # a refusal frees none


async def _lines_of(source, limit: int) -> list[bytes]:
    out = []
    while line := await source.readline(limit):
        out.append(line)
    return out


@pytest.mark.parametrize("limit", [5, 100, 8 * 1024, 8 * 1024 + 1, 30_000])
async def test_a_pipe_gives_the_lines_a_file_gives(limit: int) -> None:
    """`PipeSource` (read on the loop) cuts lines as a file's readline does: at the newline
    or at the limit, across its 8 KiB reads, and the tail without a newline at the end."""
    data = b"".join(
        [request(1), b"\n", b"x" * 20_000 + b"\n", b"y" * 8191 + b"\n", request(2), b"tail"]
    )
    expected = await _lines_of(FileSource(io.BytesIO(data)), limit)
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)

    def feed() -> None:
        with os.fdopen(write_end, "wb") as out:
            for i in range(0, len(data), 777):  # in odd pieces, as a client's writes come
                out.write(data[i : i + 777])
                out.flush()

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(anyio.to_thread.run_sync, feed)
            got = await _lines_of(PipeSource(read_end), limit)
    finally:
        os.close(read_end)
    assert got == expected and b"".join(got) == data


async def test_a_reply_larger_than_the_pipe_arrives_whole_and_in_order() -> None:
    """`PipeSink` writes a reply the pipe cannot hold at once as the reader drains it."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    replies = [f"{i:06d}" * 40_000 + "\n" for i in range(3)]  # 240 KB each
    got = bytearray()

    def drain() -> None:
        with os.fdopen(read_end, "rb") as source:
            while chunk := source.read(4096):
                got.extend(chunk)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(anyio.to_thread.run_sync, drain)
        sink = PipeSink(write_end)
        for reply in replies:
            await sink.write(reply)
            await sink.flush()
        os.close(write_end)
    assert got.decode() == "".join(replies)


async def test_pipes_are_served_on_the_loop_and_files_in_threads(tmp_path) -> None:
    """A pipe (as a client spawns the server) is read and written on the event loop and
    left blocking again afterwards; a file keeps the threads."""
    read_end, write_end = os.pipe()
    stored = (tmp_path / "in.jsonl").open("w+b")
    try:
        with (
            os.fdopen(read_end, "rb", closefd=False) as pipe_in,
            os.fdopen(write_end, "wb", closefd=False) as pipe_out,
        ):
            with ExitStack() as stack:
                source, sink = _on_loop(stack, pipe_in, pipe_out)
                assert isinstance(source, PipeSource) and isinstance(sink, PipeSink)
                assert not os.get_blocking(read_end) and not os.get_blocking(write_end)
            assert os.get_blocking(read_end) and os.get_blocking(write_end)
            with ExitStack() as stack:
                source, sink = _on_loop(stack, stored, pipe_out)
                assert isinstance(source, FileSource) and isinstance(sink, PipeSink)
                source, sink = _on_loop(stack, pipe_in, stored)
                assert isinstance(source, PipeSource) and isinstance(sink, FileSink)
    finally:
        stored.close()
        os.close(read_end)
        os.close(write_end)
