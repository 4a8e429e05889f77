"""The benchmarks' store fills still run against the package as it is now.

The benchmarks build records the way the package does (`build_memory`, `Store.insert`) to fill
large stores fast; when a signature there changed, five of them failed before measuring
anything and no test noticed. Each fill here writes a handful of memories and is read back.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import bench_hooks  # noqa: E402
import bench_recall  # noqa: E402
import bench_reflect  # noqa: E402
import bench_stats  # noqa: E402
import floor_server  # noqa: E402
import rank_dump  # noqa: E402

from nooa_mcp.embeddings import HashEmbedder  # noqa: E402
from nooa_mcp.memory import Memory  # noqa: E402

pytestmark = pytest.mark.anyio


def count(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT count(*) FROM memories").fetchone()[0]


async def test_bench_recall_fills_a_store(tmp_path: Path) -> None:
    await bench_recall.fill(tmp_path / "r.sqlite", 30, HashEmbedder(384), batch=10)
    assert count(tmp_path / "r.sqlite") == 30


async def test_bench_hooks_fills_a_store(tmp_path: Path) -> None:
    await bench_hooks.fill(tmp_path / "h.sqlite", 25)
    assert count(tmp_path / "h.sqlite") == 25


async def test_bench_stats_fills_a_store(tmp_path: Path) -> None:
    await bench_stats.fill(tmp_path / "s.sqlite", 40, 0.5)
    assert count(tmp_path / "s.sqlite") == 40


async def test_the_floor_server_reads_the_live_vectors_the_index_holds(tmp_path: Path) -> None:
    """`floor_server` multiplies the vectors of a nooa store as the package writes them: the
    live memories' (an archived one left out), each equal to the index's row."""
    path = tmp_path / "floor.sqlite"
    async with Memory.open(path, owner="bench", embedder=HashEmbedder(384)) as mem:
        made = [(await mem.author(f"fact {i} about harbour crane {i}")).id for i in range(4)]
        await mem.update(made[2], forget=True)
        index = mem.engine.index
        await index.sync(mem.engine.store)
        want = {i: index.vector(i).copy() for i in made if i != made[2]}
    ids, matrix = floor_server.stored_vectors(path)
    assert sorted(ids) == sorted(want)
    assert matrix.dtype == np.float32 and matrix.shape == (3, 384)
    for memory_id, row in zip(ids, matrix, strict=True):
        assert np.array_equal(row, want[memory_id])


async def test_rank_dump_prints_each_ranking_the_same_twice(tmp_path: Path) -> None:
    """`rank_dump` compares builds: its lines must not move between two runs of one build
    (the clock is held), and every question's three rankings are there with their rows."""
    async with Memory.open(tmp_path / "d.sqlite", owner="bench", embedder=HashEmbedder(384)) as mem:
        for i in range(6):
            await mem.author(f"harbour crane {i} moved cargo on day {i}")
        asked = ["harbour crane", "cargo moved on day 3"]
        first = await rank_dump.dump(mem, asked)
        await asyncio.sleep(0.05)
        second = await rank_dump.dump(mem, asked)
    assert first == second
    heads = [line for line in first if line.startswith("Q ")]
    assert len(heads) == len(asked) * len(rank_dump.VARIANTS)
    assert sum(" rec " in line for line in first) >= 6 * len(heads)


async def test_bench_reflect_inserts_turns(tmp_path: Path) -> None:
    vectors = bench_reflect.Vectors("hash", None)
    texts = bench_reflect.texts(12)
    async with Memory.open(
        tmp_path / "f.sqlite", owner=bench_reflect.OWNER, embedder=vectors.embedder
    ) as mem:
        await bench_reflect.insert(mem, texts, vectors, 0, 12)
    assert count(tmp_path / "f.sqlite") == 12


def test_bench_reflect_reembeds_a_chunk_cached_short_by_a_smaller_workload(tmp_path: Path) -> None:
    """A run over 2,760 turns caches chunk 2000 with 760 rows; a later run over more turns
    needs that chunk's 1,000 rows, not a zip that runs short."""

    class Cached(bench_reflect.Vectors):
        @property
        def embedder(self):
            return HashEmbedder(8)

    texts = [f"turn {i} about topic {i % 13}" for i in range(2500)]
    vectors = Cached("minilm", tmp_path / "cache")
    assert vectors.of(texts[:2300], 2000, 2300).shape == (300, 8)
    assert vectors.of(texts, 1500, 2500).shape == (1000, 8)
    assert len(np.load(tmp_path / "cache" / "002000.npy")) == 500
