"""A pass over every role (the shared owner's: `nooa-mcp reflect` without --owner) is each
role's pass too: a role's stats count it and date their last pass by it.

Counted by the log's role alone, a role whose memories such a pass pruned showed
`reflection_passes` and `last_reflection_at` of months before (an auditor's find), and
nothing at all when its own server never ran a pass.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import time_machine

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder

pytestmark = pytest.mark.anyio


async def test_a_role_counts_the_shared_owners_passes_over_every_role(store_target):
    role = Settings(store=store_target, owner="me@desk")
    shared = Settings(store=store_target, owner="")
    other = Settings(store=store_target, owner="bob@desk")
    with time_machine.travel(datetime(2027, 1, 5, 9, tzinfo=UTC), tick=False):
        async with Memory.open(settings=role, embedder=HashEmbedder()) as mem:
            await mem.author("The staging host is db-stage-3")
            await mem.reflect(["rescore"])
    with time_machine.travel(datetime(2027, 6, 5, 9, tzinfo=UTC), tick=False):
        async with Memory.open(settings=other, embedder=HashEmbedder()) as mem:
            await mem.reflect(["rescore"])  # another role's own pass: not mine
        async with Memory.open(settings=shared, embedder=HashEmbedder()) as mem:
            await mem.reflect(["rescore"])
    async with Memory.open(settings=role, embedder=HashEmbedder()) as mem:
        extra = (await mem.stats()).extra
    assert extra["reflection_passes"] == 2
    assert extra["last_reflection_at"].startswith("2027-06-05T09:00")
    async with Memory.open(settings=shared, embedder=HashEmbedder()) as mem:
        assert (await mem.stats()).extra["reflection_passes"] == 1
