"""Two imports of one file into one store at once count each edge once between them and
leave each edge once, at the file's weight.

Before: each import read the edges its sources had before either committed, and each counted
every edge as added, so the two reports said twice the edges the store got.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder

pytestmark = pytest.mark.anyio

IDS = [f"{n:02d}" + "3f9a2c1d5e6f47a8b9c0d1e2f3a4b5" for n in range(6)]


def _open(store: Path | str) -> Memory:
    return Memory.open(settings=Settings(store=store, owner="alice"), embedder=HashEmbedder())


def _file() -> list[tuple[int, dict]]:
    lines = []
    for n, ident in enumerate(IDS):
        edges = [{"target": IDS[m], "type": "related", "weight": 0.6} for m in range(n)]
        lines.append({"id": ident, "content": f"Shelf {n} holds box {n * 7}", "edges": edges})
    return list(enumerate(lines, 1))


async def test_two_imports_at_once_count_each_edge_once(store_target) -> None:
    wanted = sum(range(len(IDS)))
    reports = []
    async with _open(store_target) as one, _open(store_target) as two:
        await one.wait_ready()
        await two.wait_ready()

        async def run(mem: Memory) -> None:
            reports.append(await mem.import_records(_file()))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, one)
            tg.start_soon(run, two)
        created = sum(r.counts.get("created", 0) for r in reports)
        assert created == len(IDS), [r.counts for r in reports]
        assert sum(r.counts.get("edges", 0) for r in reports) == wanted, [r.counts for r in reports]
        assert (await one.stats()).edges == wanted
        weights = {e["weight"] for i in IDS for e in (await one.get(i)).edges}
        assert weights == {0.6}


async def test_an_edge_imported_again_keeps_the_larger_weight_and_counts_nothing(
    store_target,
) -> None:
    async with _open(store_target) as mem:
        assert (await mem.import_records(_file()[:2])).counts["edges"] == 1
        stronger = [
            (n, {**item, "edges": [{**e, "weight": 0.9} for e in item["edges"]]})
            for n, item in _file()[:2]
        ]
        weaker = [
            (n, {**item, "edges": [{**e, "weight": 0.1} for e in item["edges"]]})
            for n, item in _file()[:2]
        ]
        for lines in (stronger, weaker):
            assert (await mem.import_records(lines)).counts["edges"] == 0
            assert [e["weight"] for e in (await mem.get(IDS[1])).edges] == [0.9]
