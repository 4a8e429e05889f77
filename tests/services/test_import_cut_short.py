"""An import cut short keeps the edges between the memories it wrote (README, import).

Found by an audit: `kill -9` of an import of 6,000 lines with 1,199 edges after 35 s left
1,280 memories and no edge at all: memories were written 256 lines a transaction and every
edge after the last one, so a correction stored without its `refines` link let the old fact
rank first, and nothing said the import was incomplete. Each batch's edges whose ends are
written are now attached in the transaction that writes the batch; only edges to later
lines wait for them. Running the import again completes it.
"""

from __future__ import annotations

import uuid

import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.services import transfer

pytestmark = pytest.mark.anyio

LINES = transfer.BATCH + 40


def _lines() -> list[dict]:
    """Facts, each line after the first refining the one before it; the first line also
    points forward, at the last line (another batch)."""
    ids = [uuid.uuid4().hex for _ in range(LINES)]
    out = []
    for n, ident in enumerate(ids):
        edges = [{"target": ids[n - 1], "type": "refines"}] if n else []
        if n == 0:
            edges.append({"target": ids[-1], "type": "related"})
        out.append(
            {
                "id": ident,
                "content": " ".join(uuid.uuid4().hex[:8] for _ in range(6)),
                "edges": edges,
            }
        )
    return out


def _open(target) -> Memory:
    return Memory.open(settings=Settings(store=target, owner="coder"), embedder=HashEmbedder())


class _Killed(Exception):
    pass


async def test_an_import_cut_after_a_batch_keeps_that_batchs_edges(
    store_target, monkeypatch
) -> None:
    lines = list(enumerate(_lines(), 1))
    real = transfer.author_many
    calls = 0

    async def author_many(*args, **kwargs):
        nonlocal calls
        calls += 1
        if calls == 2:
            raise _Killed
        return await real(*args, **kwargs)

    monkeypatch.setattr(transfer, "author_many", author_many)
    async with _open(store_target) as mem:
        with pytest.raises(_Killed):
            await mem.import_records(lines)
        stats = await mem.stats()
    # The first batch's memories and the 255 links between them; the forward one waits.
    assert stats.total == transfer.BATCH
    assert stats.edges == transfer.BATCH - 1

    monkeypatch.setattr(transfer, "author_many", real)
    async with _open(store_target) as mem:
        again = await mem.import_records(lines)
        assert again.counts["edges"] == LINES - (transfer.BATCH - 1)
        assert (await mem.stats()).edges == LINES
        assert (await mem.import_records(lines)).counts["edges"] == 0
