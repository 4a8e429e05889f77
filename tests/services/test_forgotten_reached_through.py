"""What another role forgot (or the user, a shared one) is not reached through what the reader
may see (DESIGN.md §10, `Caller.withdrawn`): a neighbourhood showed it whole as a linked node,
the store-wide access log listed its id with its role's queries, and a visible memory's view
listed its id among the edges and its words as a reference's snapshot (a role's export too).
Its own role (the user, for a shared one) still sees all of it.
"""

from __future__ import annotations

import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder

pytestmark = pytest.mark.anyio

KEPT = "Bob's desk is by the north window"
FORGOTTEN = "Bob's therapist appointment is on Thursdays at four"


def _open(target, owner: str, **grants) -> Memory:
    return Memory.open(
        settings=Settings(store=target, owner=owner, **grants), embedder=HashEmbedder()
    )


async def _linked_pair(target, owner: str) -> tuple[str, str]:
    """A kept memory linked to, and referring to, one its owner then forgot."""
    async with _open(target, owner) as mem:
        gone = (await mem.author(FORGOTTEN)).id
        await mem.recall("therapist appointment")
        kept = await mem.author(
            KEPT, references=[f"memory:{gone}"], links=[{"target": gone, "relation": "related"}]
        )
        await mem.forget(gone, reason="private, never meant to be stored")
    return kept.id, gone


async def test_a_neighbourhood_leaves_out_what_another_role_forgot(store_target):
    kept, gone = await _linked_pair(store_target, "bob")
    shared_kept, shared_gone = await _linked_pair(store_target, "")
    async with _open(store_target, "carol", read=["bob"]) as carol:
        for center, scope in ((kept, "*"), (shared_kept, "mine")):
            around = await carol.neighbourhood(center, scope=scope)
            assert list(around.nodes) == [center]
            assert around.edges == [] and around.rings == [[]]
    async with _open(store_target, "bob") as bob:
        assert set((await bob.neighbourhood(kept)).nodes) == {kept, gone}
        assert list((await bob.neighbourhood(shared_kept)).nodes) == [shared_kept]
    async with _open(store_target, "") as user:
        assert set((await user.neighbourhood(shared_kept)).nodes) == {shared_kept, shared_gone}


async def test_the_access_log_leaves_out_what_another_role_forgot(store_target):
    _, gone = await _linked_pair(store_target, "bob")
    _, shared_gone = await _linked_pair(store_target, "")
    async with _open(store_target, "carol", read=["bob"]) as carol:
        await carol.recall("north window", scope="*")
        seen = {mid for _, mid, _ in await carol.recent_accesses(scope="*", limit=500)}
        assert seen and gone not in seen and shared_gone not in seen
    async with _open(store_target, "bob") as bob:
        mine = [a for _, mid, a in await bob.recent_accesses(limit=500) if mid == gone]
        assert "therapist appointment" in [a.query for a in mine]
        assert shared_gone not in {mid for _, mid, _ in await bob.recent_accesses(limit=500)}
    async with _open(store_target, "") as user:
        assert shared_gone in {mid for _, mid, _ in await user.recent_accesses(limit=500)}
