"""Times at the edge of what a datetime holds: refused on the way in, readable on the way out.

Re-tester: `--valid-to 9999-12-31T23:59:59.999999Z` was accepted, stored as epoch seconds
(253402300800.0, which is year 10000), and then every recall, list and export of the store
ended in "year 10000 is out of range", on both backends.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from nooa_mcp import InvalidInput, Memory, Settings
from nooa_mcp.domain.schema import Memory as Record
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.services.transfer import export_records
from nooa_mcp.storage import open_store

pytestmark = pytest.mark.anyio

LAST = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


@pytest.mark.parametrize(
    ("field", "when"),
    [
        ("valid_to", "9999-12-31T23:59:59.999999Z"),
        ("valid_to", "9999-12-31T00:00:00Z"),
        ("valid_from", "0001-01-01T12:00:00Z"),
    ],
)
async def test_a_time_past_the_last_stored_day_is_refused(store_target, field, when) -> None:
    settings = Settings(store=store_target, owner="alice")
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        with pytest.raises(InvalidInput, match="falls outside 0001-01-02 to 9999-12-30 in UTC"):
            await mem.author("An edge case.", **{field: when})
        kept = await mem.author("The last day kept.", valid_to="9999-12-30T23:59:59Z")
        assert (await mem.get(kept.id)).valid_to == datetime(9999, 12, 30, 23, 59, 59, tzinfo=UTC)
        assert (await mem.recall("edge case last day")).hits[0].id == kept.id


async def test_a_store_already_holding_one_reads_it_as_the_last_time(store_target) -> None:
    store = await open_store(store_target)
    try:
        vector = HashEmbedder().embed(["x"])[0]
        record = Record(content="Written by an earlier release.", owner="alice", valid_to=LAST)
        await store.insert(record, vector)
    finally:
        await store.close()
    settings = Settings(store=store_target, owner="alice")
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        hit = (await mem.recall("earlier release")).hits[0]
        assert hit.id == record.id and hit.valid_to.year == 9999
        assert [m.id for _, m in await mem.list_memories()] == [record.id]
        assert [line["id"] async for line in export_records(mem._caller)] == [record.id]
