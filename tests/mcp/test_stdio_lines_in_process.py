"""The stdio transport's line checks and in-flight bound, driven in this process.

test_stdio_answers_every_line runs the same rules through a real `nooa-mcp serve` process;
there, coverage and mutation testing cannot see them. Here the reader is fed from memory.
"""

from __future__ import annotations

import io
import json

import anyio
import pytest
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, JSONRPCError, JSONRPCResponse

from nooa_mcp.mcp.stdio import _InFlight, _Lines, _Replies

pytestmark = pytest.mark.anyio


def request(ident: object, method: str = "tools/list") -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": ident, "method": method}).encode() + b"\n"


async def read_all(data: bytes, max_line: int = 200, limit: int = 32):
    lines = _Lines(io.BytesIO(data), _InFlight(limit), max_line)
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
    lines = _Lines(io.BytesIO(request(1) + request(2) + request(3)), _InFlight(2), 200)
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
