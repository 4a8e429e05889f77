"""A model still loading until the test says it is done: what a server sees in its first
seconds. The load ends at the latest when the block is left, so no test exits mid-load (a
shutdown waits for a loading model)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from nooa_mcp.embeddings import Embedder, WarmingEmbedder


@contextmanager
def loading(model: Embedder, wait: float = 30) -> Iterator[tuple[WarmingEmbedder, threading.Event]]:
    """A `WarmingEmbedder` of `model` whose load finishes when the event is set (or after
    `wait` seconds), and that event."""
    done = threading.Event()

    def load() -> Embedder:
        done.wait(wait)
        return model

    try:
        yield WarmingEmbedder(load, model.name, model.dim), done
    finally:
        done.set()
