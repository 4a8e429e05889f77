"""A memory's view lists only the links into memories its reader may see: another role's ids
never appear in `memory://memories/{id}`, in `memory_update`'s reply or in an export (both
backends).

The tools refuse a link into another role, but a store can hold one (an import of an earlier
release attached edges across roles): the view must still not show where it points.
"""

from __future__ import annotations

import json

import pytest
from mcp import Client
from shared_support import acli, read_json

from nooa_mcp import Memory, Settings
from nooa_mcp.domain.schema import EdgeType
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp.server import build_server

pytestmark = pytest.mark.anyio


async def _seed(store) -> dict[str, str]:
    """Alice's private memory; bob's memory and a shared one, each linked to alice's and to a
    memory bob may see."""
    ids = {}
    async with Memory.open(store, owner="alice", embedder=HashEmbedder()) as mem:
        ids["alice"] = (await mem.author("Alice's salary review is in March.")).id
    async with Memory.open(store, owner="", embedder=HashEmbedder()) as mem:
        ids["shared"] = (await mem.author("The office closes at six.")).id
    async with Memory.open(store, owner="bob", embedder=HashEmbedder()) as mem:
        ids["bob"] = (await mem.author("Bob's team meets on Tuesdays.")).id
        ids["bob2"] = (await mem.author("Bob's team retro is on Fridays.")).id
        store_ = mem.engine.store
        async with store_.transaction():
            for src in (ids["bob"], ids["shared"]):
                await store_.add_edge(src, ids["alice"], EdgeType.refines, 1.0)
            await store_.add_edge(ids["bob"], ids["bob2"], EdgeType.related, 0.5)
            await store_.add_edge(ids["shared"], ids["bob2"], EdgeType.related, 0.5)
    return ids


async def test_bobs_views_list_only_the_links_bob_may_see(store_target) -> None:
    ids = await _seed(store_target)
    settings = Settings(store=store_target, owner="bob")
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as client:
        views = [await read_json(client, f"memory://memories/{ids[k]}") for k in ("bob", "shared")]
        updated = await client.call_tool("memory_update", {"memory_id": ids["bob"], "tags": ["x"]})
    for view in views:
        assert [e["target"] for e in view["edges"]] == [ids["bob2"]]
        assert view["edges_total"] == 1
        assert ids["alice"] not in json.dumps(view)
    assert ids["alice"] not in json.dumps(updated.structured_content) + updated.content[0].text


async def test_bobs_export_carries_no_link_into_alices_memories(store_target) -> None:
    ids = await _seed(store_target)
    result = await acli(["--store", str(store_target), "--owner", "bob", "export"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(x) for x in result.stdout.splitlines() if x.strip()]
    assert {line["id"] for line in lines} == {ids["bob"], ids["bob2"], ids["shared"]}
    assert ids["alice"] not in result.stdout
