"""Calls that arrive while the model is busy share its next batch, so a
burst of writes costs about one model run, not one each."""

from __future__ import annotations

import threading

import anyio
import numpy as np
import pytest

from nooa_mcp import Memory
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.engine import EMBED_LANES

pytestmark = pytest.mark.anyio


class SlowCountingEmbedder(HashEmbedder):
    """The hash embedder, slowed down, counting how many times the model runs."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[int] = []
        self.release = threading.Event()

    def embed(self, texts):
        self.runs.append(len(texts))
        self.release.wait(5)
        return super().embed(texts)


async def test_concurrent_writes_share_embedding_batches(settings) -> None:
    model = SlowCountingEmbedder()
    texts = [f"Server web-{i:02d} has the address 10.0.0.{i}." for i in range(12)]
    async with Memory.open(settings=settings, embedder=model) as mem:
        results: dict[str, str] = {}

        async def write(text: str) -> None:
            results[text] = (await mem.author(text)).id

        async with anyio.create_task_group() as tasks:
            for text in texts:
                tasks.start_soon(write, text)
            await anyio.sleep(0.2)
            model.release.set()
        # Twelve calls in flight: the first starts a run at once on each free lane, and the
        # rest share the next batch, not twelve runs.
        assert sum(model.runs) == 12 and len(model.runs) <= EMBED_LANES + 1
        for text, memory_id in results.items():
            stored = (await mem.engine.store.embeddings_of([memory_id]))[memory_id]
            assert np.allclose(stored, HashEmbedder().embed([text])[0])  # each its own vector


class GatedEmbedder(HashEmbedder):
    """The hash embedder, each run held until the test lets one finish."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[list[str]] = []
        self.gate = threading.Semaphore(0)

    def embed(self, texts):
        self.runs.append(list(texts))
        self.gate.acquire(timeout=30)
        return super().embed(texts)


async def _until(condition, what: str) -> None:
    for _ in range(200):
        if condition():
            return
        await anyio.sleep(0.01)
    raise AssertionError(f"2 s without {what}")


async def test_a_call_runs_beside_a_busy_lane_and_later_ones_share_the_next_free_one(
    settings,
) -> None:
    assert EMBED_LANES == 2
    model = GatedEmbedder()
    async with Memory.open(settings=settings, embedder=model) as mem:
        out: dict[str, np.ndarray] = {}

        async def embed(text: str) -> None:
            out[text] = (await mem.engine.embed([text]))[0]

        async with anyio.create_task_group() as tasks:
            try:
                tasks.start_soon(embed, "first")
                await _until(lambda: len(model.runs) == 1, "the first run")
                # The model is busy with "first": "second" starts beside it, not after it.
                tasks.start_soon(embed, "second")
                await _until(lambda: len(model.runs) == 2, "the second run")
                tasks.start_soon(embed, "third")
                tasks.start_soon(embed, "fourth")
                await anyio.sleep(0.1)
                assert model.runs == [["first"], ["second"]]  # both lanes busy: the rest wait
                model.gate.release()
                await _until(lambda: len(model.runs) == 3, "the third run")
                assert model.runs[2] == ["third", "fourth"]  # one batch on the freed lane
            finally:
                for _ in range(3):
                    model.gate.release()  # the rest finish (or, after a failure, do not hang)
        assert sorted(out) == ["first", "fourth", "second", "third"]
        for text, vector in out.items():
            assert np.allclose(vector, HashEmbedder().embed([text])[0])
