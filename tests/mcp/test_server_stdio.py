"""The installed `nooa-mcp` console script speaks MCP over stdio (DESIGN.md §13).

This runs the real command as a subprocess, with the real embedding model, the way Claude
Desktop, Claude Code and Codex start it. It needs `pip install -e .` (the console script).
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp_types import Implementation

pytestmark = [pytest.mark.anyio, pytest.mark.real_model]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def console_script() -> str:
    beside = Path(sys.executable).parent / "nooa-mcp"
    found = str(beside) if beside.exists() else shutil.which("nooa-mcp")
    if found is None:
        pytest.fail("the nooa-mcp console script is not installed: run `pip install -e .`")
    return found


async def test_console_script_serves_author_and_recall_over_stdio(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=console_script(),
        args=["--store", str(tmp_path / "memory.sqlite")],
        env={**os.environ, "HF_HUB_OFFLINE": "1", "NOOA_OWNER": ""},
    )
    info = Implementation(name="stdio-test", version="1")
    with anyio.fail_after(60):
        async with Client(params, client_info=info, cache=None) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            authored = await client.call_tool(
                "memory_author", {"content": "The staging database restarts at midnight."}
            )
            recalled = await client.call_tool(
                "memory_recall", {"query": "when does staging db restart?"}
            )
            record = await client.read_resource(
                f"memory://memories/{authored.structured_content['id']}"
            )
    assert "memory_recall" in tools
    assert recalled.structured_content["hits"][0]["id"] == authored.structured_content["id"]
    # No --owner: the owner is derived from the client's name (DESIGN.md §10).
    assert json.loads(record.contents[0].text)["owner"] == "stdio-test"


async def test_the_first_recall_after_initialize_answers_from_keywords_and_says_so(
    tmp_path: Path,
) -> None:
    """A client that spawns the server and recalls at once gets keyword results, flagged as
    such, while the model loads behind them; later recalls use the model."""
    from nooa_mcp import Memory

    store = tmp_path / "memory.sqlite"
    async with Memory.open(store, owner="me") as mem:
        await mem.wait_ready()
        vault = (await mem.author("The production SSH keys are in the team vault.")).id
        await mem.author("Lunch orders are due by 11am on Fridays.")
    params = StdioServerParameters(
        command=console_script(),
        args=["--store", str(store), "--owner", "me"],
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    with anyio.fail_after(120):
        async with Client(params, cache=None) as client:
            first = await client.call_tool("memory_recall", {"query": "production SSH keys"})
            later = first
            while later.structured_content["embeddings"] != "ready":
                await anyio.sleep(0.05)
                later = await client.call_tool("memory_recall", {"query": "production SSH keys"})
    reply = first.structured_content
    assert reply["embeddings"] == "warming"
    assert reply["hits"][0]["id"] == vault
    assert {h["components"]["source"] for h in reply["hits"]} == {"sparse"}
    assert all(h["components"]["cos"] is None for h in reply["hits"])
    assert "keyword matches only" in first.content[0].text
    assert later.structured_content["hits"][0]["components"]["source"] == "both"
    assert later.structured_content["hits"][0]["components"]["cos"] > 0.5


def _line_reply(proc: subprocess.Popen[bytes], ident: int) -> dict:
    """The JSON-RPC reply with `ident` (notifications and other replies skipped)."""
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        assert line, "the server closed its stdout"
        message = json.loads(line)
        if message.get("id") == ident:
            return message


def test_serve_answers_a_recall_sent_right_after_initialize_from_keywords(
    tmp_path: Path,
) -> None:
    """`nooa-mcp serve` spawned the way a client does, on a store of a few memories, and
    asked at once (no tools/list first): the answer comes from keywords, says so, and finds
    the memory; the model, held while that call ran, loads behind it and later recalls use it.
    Raw JSON-RPC lines, so nothing a client library does first (listing tools) hides it."""
    import anyio as _anyio

    from nooa_mcp import Memory

    store = tmp_path / "memory.sqlite"

    async def fill() -> str:
        async with Memory.open(store, owner="me") as mem:
            await mem.wait_ready()
            await mem.author("Lunch orders are due by 11am on Fridays.")
            found = (await mem.author("The billing service deploys from the blue cluster.")).id
            await mem.author("Office plants are watered on Mondays.")
            return found

    billing = _anyio.run(fill)
    proc = subprocess.Popen(
        [console_script(), "--store", str(store), "--owner", "me", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.stdin is not None

    def send(message: dict) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()

    def recall(ident: int) -> dict:
        send(
            {
                "jsonrpc": "2.0",
                "id": ident,
                "method": "tools/call",
                "params": {"name": "memory_recall", "arguments": {"query": "billing deploys"}},
            }
        )
        return _line_reply(proc, ident)["result"]

    try:
        send(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            }
        )
        assert _line_reply(proc, 0)["result"]["serverInfo"]["name"] == "nooa-mcp"
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        first = recall(1)
        later, ident = first, 1
        while later["structuredContent"]["embeddings"] != "ready" and ident < 2000:
            ident += 1
            later = recall(ident)
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
        assert proc.stdout is not None
        proc.stdout.close()
    reply = first["structuredContent"]
    assert not first.get("isError")
    assert reply["embeddings"] == "warming"
    assert reply["hits"][0]["id"] == billing
    assert {h["components"]["source"] for h in reply["hits"]} == {"sparse"}
    assert all(h["components"]["cos"] is None for h in reply["hits"])
    assert "keyword matches only" in first["content"][0]["text"]
    assert later["structuredContent"]["embeddings"] == "ready"
    assert later["structuredContent"]["hits"][0]["id"] == billing
    assert later["structuredContent"]["hits"][0]["components"]["cos"] > 0.3
    assert proc.returncode == 0
