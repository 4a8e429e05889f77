"""The HTTP transport serves the web console at /ui beside /mcp, behind the same
Host check and, with a tokens file, the same tokens: a token sees only its owner's memories."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest
from shared_support import http_server, serve_args

from nooa_mcp import Memory
from nooa_mcp.embeddings import HashEmbedder

pytestmark = [pytest.mark.anyio, pytest.mark.processes]

ALICE = "alice-console-token-0123456789"
BOB = "bob-console-token-0123456789ab"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_the_console_answers_at_ui_and_refuses_a_foreign_host(tmp_path: Path) -> None:
    async with http_server(serve_args(tmp_path / "s.sqlite", glob=["--owner", "me"])) as proc:
        base = proc.url.removesuffix("/mcp")
        async with httpx2.AsyncClient() as http:
            page = await http.get(f"{base}/ui/")
            foreign = await http.get(f"{base}/ui/", headers={"Host": "evil.example"})
    assert page.status_code == 200 and "nooa-mcp console" in page.text
    assert foreign.status_code == 400


async def test_with_tokens_each_token_sees_only_its_owners_memories_at_ui(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    async with Memory.open(store, owner="alice", embedder=HashEmbedder()) as mem:
        await mem.author("Alice keeps the lighthouse keys under the mat.")
    async with Memory.open(store, owner="bob", embedder=HashEmbedder()) as mem:
        await mem.author("Bob keeps the harbour ledger in the blue box.")
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({ALICE: "alice", BOB: "bob"}))
    async with http_server(serve_args(store, "--tokens", str(tokens))) as proc:
        base = proc.url.removesuffix("/mcp")
        pages = {}
        async with httpx2.AsyncClient() as http:
            anonymous = await http.get(f"{base}/ui/memories", follow_redirects=False)
            for name, token in (("alice", ALICE), ("bob", BOB)):
                headers = {"Authorization": f"Bearer {token}"}
                pages[name] = (await http.get(f"{base}/ui/memories", headers=headers)).text
    assert anonymous.status_code in (302, 303, 401)
    assert "lighthouse keys" in pages["alice"] and "harbour ledger" not in pages["alice"]
    assert "harbour ledger" in pages["bob"] and "lighthouse keys" not in pages["bob"]
