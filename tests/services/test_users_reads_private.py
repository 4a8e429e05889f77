"""What the user asked of a shared memory is the user's (DESIGN.md §10).

Shared memories are every role's to read, and so the visibility rule let every role see the
shared owner's reads of them as its own: a recall run without --owner (the CLI) showed its
query, score and rank to every role, token holders over HTTP included, in explain by id,
the memory's access log and the recent access log. A role now
sees the user's reads by time and channel only, as it sees another role's; the user, and a
reader granted every role, still see them whole.
"""

from __future__ import annotations

import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder

pytestmark = pytest.mark.anyio

FACT = "The office wifi network is called guestnet"
ASKED = "office wifi before my private lawyer meeting"


def _open(target, owner: str, **grants) -> Memory:
    return Memory.open(
        settings=Settings(store=target, owner=owner, **grants), embedder=HashEmbedder()
    )


async def _users_reads(memory: Memory, memory_id: str) -> list[tuple[str, str | None]]:
    """(reader, query) of each recalled access, by every way a memory's history is read."""
    explained = (await memory.explain(memory_id=memory_id)).accesses
    logged = [a for _, a in await memory.access_log(memory_id)]
    recent = [a for _, mid, a in await memory.recent_accesses() if mid == memory_id]
    seen = []
    for accesses in (explained, logged, recent):
        seen += [(a.reader_owner, a.query) for a in accesses if a.channel.value == "recalled"]
    return seen


async def test_a_role_sees_the_users_reads_of_a_shared_memory_by_time_only(store_target) -> None:
    async with _open(store_target, "") as user:
        memory_id = (await user.author(FACT)).id
        assert [h.id for h in (await user.recall(ASKED, k=1)).hits] == [memory_id]
        assert await _users_reads(user, memory_id) == [("", ASKED)] * 3
    async with _open(store_target, "bob@b") as bob:
        seen = await _users_reads(bob, memory_id)
        assert seen == [("", None)] * 3
        shown = (await bob.explain(memory_id=memory_id)).accesses
        recalled = [a for a in shown if a.channel.value == "recalled"]
        assert (recalled[0].score, recalled[0].rank, recalled[0].session_ref) == (None, None, None)
    async with _open(store_target, "admin", read=["*"]) as everyone:
        assert await _users_reads(everyone, memory_id) == [("", ASKED)] * 3
