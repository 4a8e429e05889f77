"""A write aimed at a duplicate reflection merged away reaches the memory that answers for it.

Auditor, on both backends: `memory_update` on the merged duplicate changed that hidden copy
(the survivor kept its old tags and importance; a content edit ranked below the text it
replaced) and its reply said "It is forgotten now", though it was faded; and a link to the
duplicate written while a merge committed (parsed before it, stored after) stayed on the
duplicate, so the correction did not correct what recall shows.
"""

from __future__ import annotations

import pytest
from mcp import Client

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp.server import build_server

pytestmark = pytest.mark.anyio

OWNER = "alice"
OLD = "The deploy key for the billing cluster rotates every month."
AGAIN = "The deploy key for the billing cluster rotates every month!"


def _settings(target) -> Settings:
    return Settings(store=target, owner=OWNER)


async def _merged(mem: Memory) -> tuple[str, str]:
    anchor = (await mem.author(OLD)).id
    dup = (await mem.author(AGAIN)).id
    merge = (await mem.reflect(["merge"])).steps[0]
    assert merge.details == [f"{dup[:8]} → {anchor[:8]}"]
    return anchor, dup


async def test_an_update_of_a_merged_duplicate_changes_its_anchor(store_target) -> None:
    server = build_server(_settings(store_target), embedder=HashEmbedder())
    async with Memory.open(settings=_settings(store_target), embedder=HashEmbedder()) as mem:
        anchor, dup = await _merged(mem)
    async with Client(server, cache=None) as client:
        reply = await client.call_tool(
            "memory_update", {"memory_id": dup, "importance": "HIGH", "tags": ["keys"]}
        )
        assert not reply.is_error, reply.content[0].text
        text = reply.content[0].text
        assert text.startswith(f"{dup[:8]} was merged into {anchor[:8]} by reflection"), text
        assert "forgotten" not in text
        assert reply.structured_content["id"] == anchor
        assert reply.structured_content["merged_from"] == dup
        new = "The deploy key for the billing cluster rotates every week."
        edit = await client.call_tool("memory_update", {"memory_id": dup, "content": new})
        assert edit.structured_content["id"] == anchor, edit.content[0].text
    async with Memory.open(settings=_settings(store_target), embedder=HashEmbedder()) as mem:
        kept, hidden = await mem.get(anchor), await mem.get(dup)
        assert (kept.importance, kept.tags, kept.content) == (8.0, ["keys"], new)
        assert not kept.archived
        assert (hidden.tags, hidden.content, hidden.archived) == ([], AGAIN, True)
        hits = (await mem.recall("how often does the billing deploy key rotate")).hits
        assert hits[0].id == anchor and hits[0].content == new


async def test_a_link_parsed_before_a_merge_lands_on_the_anchor(store_target, monkeypatch):
    """The merge commits while the correction's text is embedded (after its links were read,
    before its transaction): the link goes to the anchor, which recall then marks replaced."""
    async with (
        Memory.open(settings=_settings(store_target), embedder=HashEmbedder()) as mem,
        Memory.open(settings=_settings(store_target), embedder=HashEmbedder()) as other,
    ):
        anchor = (await mem.author(OLD)).id
        dup = (await mem.author(AGAIN)).id
        engine = mem._caller.engine
        embed = engine.embed

        async def merge_while_embedding(texts):
            vectors = await embed(texts)
            if any("weekly" in t for t in texts):
                merge = (await other.reflect(["merge"])).steps[0]
                assert merge.details == [f"{dup[:8]} → {anchor[:8]}"]
            return vectors

        monkeypatch.setattr(engine, "embed", merge_while_embedding)
        fix = await mem.author(
            "The billing cluster's deploy key now rotates weekly.",
            links=[{"target": dup, "relation": "refines"}],
        )
        edges = {(e.src, e.dst, e.type) for e in await mem._caller.store.edges_touching([fix.id])}
        assert (fix.id, anchor, "refines") in edges
        assert (fix.id, dup, "refines") not in edges


async def test_forgetting_a_merged_duplicate_forgets_that_copy_and_not_its_anchor(store_target):
    """The anchor may have been edited since the merge: a forget of the old copy must not
    drop what the anchor says now (re-tester: forget on the duplicate forgot the anchor)."""
    async with Memory.open(settings=_settings(store_target), embedder=HashEmbedder()) as mem:
        anchor, dup = await _merged(mem)
        edited = "The deploy key for the billing cluster rotates every quarter."
        await mem.update(anchor, content=edited)
        result = await mem.update(dup, forget=True)
        assert (result.id, result.merged_from, result.archived) == (dup, None, True)
        kept, gone = await mem.get(anchor), await mem.get(dup)
        assert (kept.archived, kept.content) == (False, edited)
        assert gone.archived and not gone.flags.faded  # forgotten by its user now


async def test_a_memory_said_to_stop_holding_takes_its_merged_duplicate_with_it(store_target):
    """The user ends the anchor's validity (`valid_to` in the past): the duplicate merged into
    it, in the same words and until then the same window, kept none, so recall showed it
    beside the stale anchor, unflagged, as a fact that still held. Now it stops holding with
    its anchor and stays behind it: recall answers with the anchor alone, flagged stale."""
    async with Memory.open(settings=_settings(store_target), embedder=HashEmbedder()) as mem:
        anchor, dup = await _merged(mem)
    ended = "2020-01-01T00:00:00Z"
    async with Client(build_server(_settings(store_target), embedder=HashEmbedder())) as client:
        reply = await client.call_tool("memory_update", {"memory_id": anchor, "valid_to": ended})
        assert not reply.is_error, reply.content[0].text
        hits = await client.call_tool(
            "memory_recall", {"query": "deploy key for the billing cluster rotates every month"}
        )
        shown = [(h["id"], h["flags"]["stale"]) for h in hits.structured_content["hits"]]
        assert shown == [(anchor, True)]
    async with Memory.open(settings=_settings(store_target), embedder=HashEmbedder()) as mem:
        kept, hidden = await mem.get(anchor), await mem.get(dup)
        assert kept.valid_to == hidden.valid_to is not None
        assert (hidden.archived, hidden.content) == (True, AGAIN)
