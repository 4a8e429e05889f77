"""What a token's owner sees in the console (`ui --tokens`): its own role's and shared
memories. A `read` list on the token's entry grants other roles to its MCP tools (recall's
scope, the memory resources), not to the console's pages; the README says so."""

from __future__ import annotations

import re

import httpx
import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.console import Console, TokenLogin
from nooa_mcp.engine import Engine

pytestmark = pytest.mark.anyio

ALICE_NOTE = "Alice keeps the spare office key in the top drawer"
SHARED_NOTE = "The office closes at six on Fridays"
BOB_NOTE = "Bob parks the blue bicycle behind the library"


async def test_a_token_with_a_read_grant_sees_its_own_and_shared_memories_only(tmp_path, embedder):
    store = tmp_path / "grants.sqlite"
    for owner, note in (("alice", ALICE_NOTE), ("", SHARED_NOTE), ("bob", BOB_NOTE)):
        async with Memory.open(store, owner=owner, embedder=embedder) as mem:
            await mem.author(note)
    token = "g" * 32
    async with Engine.open(Settings(store=store), embedder) as engine:
        console = Console.for_engine(
            engine, TokenLogin({token: {"owner": "alice", "read": ["bob"]}})
        )
        transport = httpx.ASGITransport(app=console.app(), client=("127.0.0.1", 50000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8766") as http:
            form = await http.get("/login")
            csrf = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)
            assert (
                await http.post("/login", data={"csrf": csrf, "token": token})
            ).status_code == 303
            listed = (await http.get("/memories")).text
            searched = (await http.get("/", params={"q": "office key bicycle library"})).text
    for body in (listed, searched):
        assert ALICE_NOTE in body and SHARED_NOTE in body
        assert BOB_NOTE not in body and "blue bicycle" not in body
