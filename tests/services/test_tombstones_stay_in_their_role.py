"""A tombstone blocks a write only in its own role: another role's forgotten memory, or a
forgotten shared one, never blocks this role's write, by exact text or by a rewording that
reaches the tombstone by cosine (both backends, through memory_author).
"""

from __future__ import annotations

import pytest
from mcp import Client

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp.server import build_server

pytestmark = pytest.mark.anyio

GONE = "The old deploy key lives in the blue binder."
# Another hash, cosine 1.0 under the hash embedder and no value that differs: it reaches a
# tombstone through the vector search, not the hash.
REWORDED = "The old deploy key lives in the blue binder!"


async def _forgotten_by(store, owner: str) -> None:
    async with Memory.open(store, owner=owner, embedder=HashEmbedder()) as mem:
        made = await mem.author(GONE)
        await mem.forget(made.id, reason="rotated")
        assert (await mem.author(GONE)).status == "blocked-by-tombstone"  # in its own role


async def _alice_writes(store, text: str) -> str:
    settings = Settings(store=store, owner="alice")
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as client:
        result = await client.call_tool("memory_author", {"content": text})
    assert not result.is_error, result.content[0].text
    return result.structured_content["status"]


@pytest.mark.parametrize("forgetter", ["bob", ""], ids=["another role", "shared"])
@pytest.mark.parametrize("text", [GONE, REWORDED], ids=["exact", "reworded"])
async def test_a_tombstone_of_another_owner_does_not_block_this_roles_write(
    store_target, forgetter: str, text: str
) -> None:
    await _forgotten_by(store_target, forgetter)
    assert await _alice_writes(store_target, text) == "created"


async def test_the_roles_own_tombstone_still_blocks_a_rewording(store_target) -> None:
    # Guard: the rule above must not switch tombstones off.
    await _forgotten_by(store_target, "alice@desk")
    assert await _alice_writes(store_target, REWORDED) == "blocked-by-tombstone"
