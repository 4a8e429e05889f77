"""Bi-temporal validity (DESIGN.md §16.7): `update(valid_to=...)` closes a fact, which is then
flagged stale and ranked below the fact that holds now."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.anyio


async def test_closing_a_fact_with_update_valid_to_flags_it_stale_and_lowers_it(mem):
    for text in ["the kitchen has a kettle", "floor plans are in the wiki", "visitors sign in"]:
        await mem.author(text)
    old = await mem.author("the team standup is at nine", importance="HIGH")
    before = {h.id: h for h in (await mem.explain("when is the team standup")).rows}
    assert not before[old.id].flags.stale
    updated = await mem.update(old.id, valid_to="2026-01-01T00:00:00Z")
    assert updated.changed == ["valid_to"]
    after = {h.id: h for h in (await mem.explain("when is the team standup")).rows}
    assert after[old.id].flags.stale
    assert after[old.id].score < before[old.id].score
    view = await mem.get(old.id)
    assert view.flags.stale and view.valid_to is not None
    # The fact that replaces it, linked as a refinement, ranks above it.
    new = await mem.author(
        "the team standup moved to ten", links=[{"target": old.id, "relation": "refines"}]
    )
    hits = {h.id: h for h in (await mem.recall("when is the team standup")).hits}
    assert hits[new.id].rank < hits[old.id].rank
    assert hits[old.id].flags.superseded_by == new.id


async def test_a_superseded_fact_that_is_merged_away_leaves_its_successor_clean(mem):
    """Supersession flags live only on the replaced memory; the successor carries none."""
    old = await mem.author("the build server is jenkins-01")
    new = await mem.author(
        "the build server moved to jenkins-02", links=[{"target": old.id, "relation": "refines"}]
    )
    hits = {h.id: h for h in (await mem.recall("which build server", k=5)).hits}
    assert hits[old.id].flags.superseded_by == new.id
    assert hits[new.id].flags.superseded_by is None
