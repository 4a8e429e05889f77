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


async def test_a_link_or_reference_to_what_another_role_forgot_shows_nothing_of_it(
    store_target,
):
    kept, gone = await _linked_pair(store_target, "bob")
    shared_kept, shared_gone = await _linked_pair(store_target, "")
    hidden = [("memory:(hidden)", "HIDDEN", "")]
    async with _open(store_target, "carol", read=["bob"]) as carol:
        for center, scope in ((kept, "*"), (shared_kept, "mine")):
            seen = await carol.get(center, scope=scope)
            assert seen.edges == []
            assert [(r.uri, r.state, r.value) for r in seen.references] == hidden
        hit = [h for h in (await carol.recall(KEPT, scope="*", k=10)).hits if h.id == kept]
        assert [(r.uri, r.state, r.value) for r in hit[0].references] == hidden
    async with _open(store_target, "bob") as bob:
        own = await bob.get(kept)
        assert [e["target"] for e in own.edges] == [gone]
        assert [r.value for r in own.references] == [FORGOTTEN]
        # Bob's own link and reference to a shared memory the user then forgot are bob's:
        # its view and its export keep them (an export | import must not lose them).
        mine = await bob.author(
            "Bob's note on the lawyer",
            references=[f"memory:{shared_kept}"],
            links=[{"target": shared_kept, "relation": "related"}],
        )
    async with _open(store_target, "") as user:
        await user.forget(shared_kept, reason="should never have been shared")
        line = [r async for r in user.export_records() if r["id"] == shared_kept]
        assert line == []
        line = [r async for r in user.export_records(include_archived=True)]
        line = [r for r in line if r["id"] == shared_kept]
        assert [e["target"] for e in line[0]["edges"]] == [shared_gone]
        assert [r["preview"] for r in line[0]["references"]] == [FORGOTTEN]
    async with _open(store_target, "bob") as bob:
        own = await bob.get(mine.id)
        assert [e["target"] for e in own.edges] == [shared_kept]
        assert [r.value for r in own.references] == [KEPT]
        lines = {r["id"]: r async for r in bob.export_records(include_archived=True)}
        assert shared_kept not in lines
        assert [e["target"] for e in lines[mine.id]["edges"]] == [shared_kept]
        assert [r["preview"] for r in lines[mine.id]["references"]] == [KEPT]


async def test_a_roles_export_leaves_out_a_shared_memorys_reference_to_a_forgotten_one(
    store_target,
):
    shared_kept, _ = await _linked_pair(store_target, "")
    async with _open(store_target, "bob") as bob:
        lines = {r["id"]: r async for r in bob.export_records(include_archived=True)}
        assert lines[shared_kept]["edges"] == [] and lines[shared_kept]["references"] == []
        assert FORGOTTEN not in str(lines)
