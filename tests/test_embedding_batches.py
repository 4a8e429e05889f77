"""Calls that arrive while the model is busy share its next batch (issue 12)."""

from __future__ import annotations

import threading

import anyio
import numpy as np
import pytest

from nooa_mcp import Memory
from nooa_mcp.embeddings import HashEmbedder

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
        # Twelve calls in flight: the model runs on shared batches, not twelve times.
        assert sum(model.runs) == 12 and len(model.runs) <= 2
        for text, memory_id in results.items():
            stored = (await mem.engine.store.embeddings_of([memory_id]))[memory_id]
            assert np.allclose(stored, HashEmbedder().embed([text])[0])  # each its own vector
