"""Writes running side by side never fail on each other's rows that are not committed yet.

On PostgreSQL a process runs its writes' transactions side by side, and each notes its new
rows in the process's vector index before it commits: another write can find such a row as
its near-duplicate while it is still invisible to that write's own transaction.
"""

from __future__ import annotations

import asyncio

import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder

pytestmark = pytest.mark.anyio

ROUNDS = 10
AT_ONCE = 24


async def test_near_duplicates_written_at_once_are_all_stored(store_target):
    settings = Settings(store=store_target, owner="ops@one", reflect_every_writes=0)
    attempted: list[str] = []
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        for r in range(ROUNDS):
            texts = [
                f"The staging cluster {r} deploy uses a blue green rollout, step {i}"
                for i in range(AT_ONCE)
            ]
            attempted += texts
            results = await asyncio.gather(*(mem.author(t) for t in texts), return_exceptions=True)
            assert [r for r in results if isinstance(r, BaseException)] == []
            assert {r.status for r in results} == {"created"}
        stored = [v.content for _, v in await mem.list_memories(limit=ROUNDS * AT_ONCE + 1)]
    assert sorted(stored) == sorted(attempted)
