"""Value-level tombstones (DESIGN.md §2.6, §4.4): archiving leaves one; authoring the value
again is blocked unless `revive=True`, which restores the original with its history."""

from __future__ import annotations

import pytest

from nooa_mcp import Memory

pytestmark = pytest.mark.anyio

FACT = "The staging database password rotates on the first Monday of each month"


async def test_forget_then_author_the_same_content_is_blocked_with_when_and_why(mem):
    first = await mem.author(FACT)
    await mem.forget(first.id, reason="rotated away")
    again = await mem.author(FACT)
    assert again.status == "blocked-by-tombstone"
    assert again.id == first.id
    assert again.tombstone is not None
    assert again.tombstone.reason == "rotated away"
    assert again.tombstone.similarity == 1.0
    assert (await mem.get(first.id)).archived


async def test_a_near_identical_rewording_is_blocked_by_cosine(mem):
    first = await mem.author(FACT)
    await mem.forget(first.id)
    again = await mem.author(FACT + ".")
    assert again.status == "blocked-by-tombstone"
    assert again.tombstone.similarity >= 0.95


async def test_different_content_is_not_blocked(mem):
    first = await mem.author(FACT)
    await mem.forget(first.id)
    other = await mem.author("Deploys go out on Thursdays after the standup")
    assert other.status == "created"


async def test_revive_restores_the_original_with_its_history(mem):
    first = await mem.author(FACT, importance="HIGH", tags=["ops"])
    await mem.recall("staging database password")
    await mem.forget(first.id)
    revived = await mem.author(FACT, revive=True)
    assert revived.status == "revived"
    assert revived.id == first.id
    view = await mem.get(first.id)
    assert not view.archived
    assert view.tags == ["ops"]
    assert view.channels["recalled"] == 1
    assert view.channels["reinforced"] == 1
    # The tombstone is lifted: the value is live again and authoring it is an exact repeat.
    assert (await mem.author(FACT)).status == "exists"


async def test_revive_without_a_tombstone_just_creates(mem):
    assert (await mem.author(FACT, revive=True)).status == "created"


async def test_update_forget_also_tombstones(mem):
    first = await mem.author(FACT)
    await mem.update(first.id, forget=True)
    assert (await mem.author(FACT)).status == "blocked-by-tombstone"


async def test_tombstones_are_per_role(settings, embedder, store_path):
    """Another role never stumbles on my tombstones: dedup and tombstones run at role scope."""
    async with Memory.open(settings=settings, embedder=embedder) as mine:
        first = await mine.author(FACT)
        await mine.forget(first.id)
    async with Memory.open(store_path, owner="reviewer@desk", embedder=embedder) as theirs:
        assert (await theirs.author(FACT)).status == "created"
    async with Memory.open(store_path, owner="coder@other", embedder=embedder) as sibling:
        assert (await sibling.author(FACT)).status == "blocked-by-tombstone"


async def test_stats_count_standing_tombstones(mem):
    first = await mem.author(FACT)
    await mem.forget(first.id)
    assert (await mem.stats()).extra["tombstones"] == 1
    await mem.author(FACT, revive=True)
    assert (await mem.stats()).extra["tombstones"] == 0


async def test_a_forgotten_memory_blocks_its_words_behind_many_closer_forgotten_ones(mem):
    """The cosine check read the 5 archived rows nearest a write: six forgotten notes of other
    places, word for word the write, hid the forgotten one of its own place (a rewording,
    at cosine 0.97), and the memory its user forgot was written again."""
    forgotten = "The side gate code for the warehouse loading dock behind building seven is 4411"
    again = forgotten.removeprefix("The ")  # the same statement, another hash
    first = await mem.author(forgotten, place_or_task="dock")
    await mem.forget(first.id)
    for yard in range(6):
        other = await mem.author(again, place_or_task=f"yard {yard}")
        assert other.status == "created"
        await mem.forget(other.id)
    result = await mem.author(again, place_or_task="dock")
    assert result.status == "blocked-by-tombstone"
    assert result.id == first.id
