"""A shared HTTP server under a careless or hostile client: sessions and reminders (issue 10).

    HF_HUB_OFFLINE=1 python benchmarks/bench_shared.py [--part sessions|reminders|both]

Every part runs a real `nooa-mcp --store STORE serve --transport http` (default cap, default
model) on a fresh store.

sessions (item 10): with a tokens file of two tokens, token A opens sessions (a raw
`initialize` POST each, never closed, as a script looping on it would) until the server
refuses one; printed: how many it got, the refusal's status, how long it took, the server's
RSS / fds / threads with A at its cap; then token B opens a session with the SDK's `Client`
and makes a recall (it did the same once before the flood: the server's baseline). The same
without tokens, per client address: 127.0.0.1 until refused, then 127.0.0.2.

reminders (item 11): one owner authors 12 notes about deploying a release and 300 intents
cued by "deploy release" (each through the `intent` tool, over MCP), then a new session calls
`memory_recall` "deploy release checklist" with k=10 over raw JSON-RPC, so the reply's size
is what travels on the wire: the hits, the reminders shown, how many more are due, the note,
and the bytes (HTTP body, JSON-RPC result, text content, structured content). A second
recall shows whether the reminders left out come next.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

import anyio
from http_process import (
    call,
    http_client,
    http_server,
    load_average,
    mcp_client,
    stamp,
)

PROTOCOL = "2025-06-18"
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
#: A session flood stops here whatever happens (the global cap is 10,000).
FLOOD_GUARD = 12_000

TOKEN_A = "bench-shared-token-a-5f0c9e2d7b"
TOKEN_B = "bench-shared-token-b-81a4c3e6f0"


def initialize_body(name: str, request_id: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": name, "version": "1"},
        },
    }


async def flood(url: str, token: str | None = None, source: str | None = None) -> dict[str, Any]:
    """Open sessions until one is refused; nothing is closed."""
    statuses: list[int] = []
    started = time.perf_counter()
    async with http_client(token, source) as http:
        while len(statuses) < FLOOD_GUARD:
            response = await http.post(url, json=initialize_body("flood"), headers=MCP_HEADERS)
            statuses.append(response.status_code)
            if response.status_code != 200:
                break
    return {
        "opened": statuses.count(200),
        "refused_with": statuses[-1] if statuses and statuses[-1] != 200 else None,
        "seconds": time.perf_counter() - started,
    }


async def someone_else(url: str, token: str | None = None, source: str | None = None) -> str:
    """A whole session for another client: initialize, a recall; what it got."""
    try:
        async with mcp_client(url, "someone-else", token=token, source=source) as client:
            reply = await call(client, "memory_recall", {"query": "what did we decide", "k": 3})
        return f"session opened, recall answered ({len(reply['hits'])} hits)"
    except Exception as exc:  # what the client saw is the measurement
        return f"refused: {type(exc).__name__}: {exc}"


async def sessions() -> None:
    print(f"\n## sessions (issue 10 item 10) — {stamp()}, load average {load_average()}")
    with tempfile.TemporaryDirectory(prefix="nooa-shared-") as tmp:
        folder = Path(tmp)
        tokens = folder / "tokens.json"
        tokens.write_text(json.dumps({TOKEN_A: "alpha", TOKEN_B: "beta"}))
        with http_server(folder / "tokens.sqlite", "--tokens", str(tokens)) as server:
            warm = await someone_else(server.url, TOKEN_B)
            before = server.stats()
            a = await flood(server.url, TOKEN_A)
            held = server.stats()
            again = await flood(server.url, TOKEN_A)
            b = await someone_else(server.url, TOKEN_B)
            print(f"token B before the flood: {warm}")
            print(f"server before the flood: {before.row()}")
            print(
                f"token A: {a['opened']} sessions, then {a['refused_with']} "
                f"({a['seconds']:.1f} s); next attempt: {again['opened']} more, "
                f"{again['refused_with']}"
            )
            print(f"server with A at its cap: {held.row()}")
            print(f"token B afterwards: {b}")
        with http_server(folder / "addresses.sqlite") as server:
            a = await flood(server.url, source="127.0.0.1")
            b = await someone_else(server.url, source="127.0.0.2")
            print(
                f"no tokens, 127.0.0.1: {a['opened']} sessions, then {a['refused_with']} "
                f"({a['seconds']:.1f} s); 127.0.0.2 afterwards: {b}"
            )
            print(f"server: {server.stats().row()}")


CUE = "deploy release"
INTENTS = 300
WORDS = """harbor lantern quartz meadow copper violin glacier orchard falcon ember saddle prism
tundra walnut beacon cobalt marble canyon thistle plume anvil basalt cedar dune fjord garnet
hazel iris juniper kelp lagoon mosaic nectar onyx pebble quill raven sorrel tapestry umber
velvet willow yarrow zephyr almond bramble cinder drift estuary fennel""".split()  # noqa: SIM905


def sse_messages(body: str, content_type: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a response body (plain JSON or server-sent events)."""
    if "text/event-stream" not in content_type:
        return [json.loads(body)] if body.strip() else []
    out = []
    for event in body.split("\n\n"):
        data = "\n".join(
            line[5:].lstrip() for line in event.splitlines() if line.startswith("data:")
        )
        if data:
            out.append(json.loads(data))
    return out


async def raw_recall(url: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """initialize, notifications/initialized, tools/call memory_recall, over raw HTTP."""
    async with http_client() as http:
        init = await http.post(url, json=initialize_body(name), headers=MCP_HEADERS)
        init.raise_for_status()
        headers = {
            **MCP_HEADERS,
            "mcp-session-id": init.headers["mcp-session-id"],
            "mcp-protocol-version": PROTOCOL,
        }
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        (await http.post(url, json=note, headers=headers)).raise_for_status()
        body = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "memory_recall", "arguments": args},
        }
        response = await http.post(url, json=body, headers=headers)
        response.raise_for_status()
        wire = len(response.content)
        messages = sse_messages(response.text, response.headers.get("content-type", ""))
        await http.delete(url, headers=headers)
    (reply,) = [m for m in messages if m.get("id") == 2]
    result = reply["result"]
    return {
        "wire_bytes": wire,
        "result_bytes": len(json.dumps(result, separators=(",", ":")).encode()),
        "text_bytes": sum(len(c.get("text", "").encode()) for c in result["content"]),
        "structured_bytes": len(
            json.dumps(result.get("structuredContent"), separators=(",", ":")).encode()
        ),
        "structured": result.get("structuredContent") or {},
        "is_error": result.get("isError", False),
    }


async def reminders() -> None:
    print(f"\n## reminders (issue 10 item 11) — {stamp()}, load average {load_average()}")
    rng = random.Random(11)
    with (
        tempfile.TemporaryDirectory(prefix="nooa-shared-") as tmp,
        http_server(Path(tmp) / "intents.sqlite") as server,
    ):
        statuses: dict[str, int] = {}
        ids: set[str | None] = set()
        started = time.perf_counter()
        async with mcp_client(server.url, "alice") as client:
            for i in range(12):
                words = " ".join(rng.sample(WORDS, 4))
                reply = await call(
                    client,
                    "memory_author",
                    {"content": f"Deploy release step {i}: {words} checked."},
                )
                statuses[f"note {reply['status']}"] = statuses.get(f"note {reply['status']}", 0) + 1
            for i in range(INTENTS):
                words = " ".join(rng.sample(WORDS, 5))
                reply = await call(
                    client,
                    "intent",
                    {"action": "add", "content": f"Reminder {i}: bring the {words}.", "cue": CUE},
                )
                key = f"intent {reply.get('outcome') or 'added'}"
                statuses[key] = statuses.get(key, 0) + 1
                ids.add(reply.get("id"))
        print(
            f"authored through MCP in {time.perf_counter() - started:.0f} s: "
            + ", ".join(f"{v} {k}" for k, v in sorted(statuses.items()))
            + f"; {len(ids)} distinct intent ids"
        )
        first = await raw_recall(
            server.url, "alice", {"query": "deploy release checklist", "k": 10}
        )
        second = await raw_recall(
            server.url, "alice", {"query": "deploy release checklist", "k": 10}
        )
        for label, r in (("first recall", first), ("second recall", second)):
            s = r["structured"]
            note = s.get("note", "")
            sentences = [x.strip() for x in note.replace("\n", " ").split(". ") if x.strip()]
            print(
                f"{label}: error={r['is_error']} hits {len(s.get('hits', []))}, reminders "
                f"{len(s.get('reminders', []))}, reminders_more {s.get('reminders_more')}; "
                f"bytes: HTTP body {r['wire_bytes']:,} ({r['wire_bytes'] / 1024:.1f} KiB), "
                f"result {r['result_bytes']:,}, text {r['text_bytes']:,}, structured "
                f"{r['structured_bytes']:,}; note sentences {len(sentences)} "
                f"(distinct {len(set(sentences))})"
            )
            print(f"  note: {note!r}")
        shown = [
            {x["intent_id"] for x in r["structured"].get("reminders", [])} for r in (first, second)
        ]
        print(f"reminders shown by both recalls: {len(shown[0] & shown[1])}")
        print(f"server: {server.stats().row()}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=["sessions", "reminders", "both"], default="both")
    args = parser.parse_args()
    if args.part in ("sessions", "both"):
        await sessions()
    if args.part in ("reminders", "both"):
        await reminders()
    print(f"\n{stamp()}; load average {load_average()}")


if __name__ == "__main__":
    anyio.run(main)
