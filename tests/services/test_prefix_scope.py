"""An id prefix resolves among the caller's memories only: another owner's ids neither make it
ambiguous nor appear in the error (on both backends, through the MCP tools).

Before: a prefix was resolved across every owner first, so alice's prefix was "ambiguous"
because of bob's memories, and the error listed bob's id prefixes.
"""

from __future__ import annotations

import pytest
from mcp import Client

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp.server import build_server

pytestmark = pytest.mark.anyio

BOB_IDS = [
    "abcdef01" + "0" * 24,
    "abcdef02" + "0" * 24,
    "123456aa" + "0" * 24,
    "123456bb" + "0" * 24,
]
ALICE_ID = "abcdef03" + "0" * 24


async def _seed(store) -> None:
    async with Memory.open(store, owner="bob", embedder=HashEmbedder()) as mem:
        await mem.author_many(
            [{"id": ident, "content": f"Bob's note number {n}."} for n, ident in enumerate(BOB_IDS)]
        )
    async with Memory.open(store, owner="alice", embedder=HashEmbedder()) as mem:
        await mem.author_many([{"id": ALICE_ID, "content": "Alice's note."}])


async def test_a_prefix_shared_with_another_owners_ids_names_your_own_memory(store_target) -> None:
    await _seed(store_target)
    settings = Settings(store=store_target, owner="alice")
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as client:
        result = await client.call_tool(
            "memory_update", {"memory_id": "abcdef", "importance": "HIGH"}
        )
    assert not result.is_error, result.content[0].text
    assert result.structured_content["id"] == ALICE_ID


async def test_a_prefix_only_another_owner_holds_is_not_found_and_lists_no_id(store_target) -> None:
    await _seed(store_target)
    settings = Settings(store=store_target, owner="alice")
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as client:
        result = await client.call_tool("memory_explain", {"memory_id": "123456"})
    text = result.content[0].text
    assert result.is_error
    assert "no memory with id '123456'" in text, text
    assert "123456aa" not in text and "123456bb" not in text and "matches" not in text
