"""One open Memory per owner for a console that runs on its own (`nooa-mcp ui`).

Mounted beside `/mcp`, the console borrows the server's own per-owner memories instead (any
`async (owner) -> Memory` callable will do); this pool is that callable when nothing else
provides one.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
import anyio.to_thread

from .. import Memory, Settings
from ..embeddings import WarmingEmbedder


class MemoryPool:
    """Opens each owner's Memory on first use, on one store file and one shared embedder."""

    def __init__(self, settings: Settings, embedder: object) -> None:
        self.settings = settings
        self.embedder = embedder
        self._stack = AsyncExitStack()
        self._open: dict[str, Memory] = {}
        self._lock = anyio.Lock()

    @classmethod
    @asynccontextmanager
    async def running(cls, settings: Settings, embedder: object) -> AsyncIterator[MemoryPool]:
        pool = cls(settings, embedder)
        try:
            yield pool
        finally:
            with anyio.CancelScope(shield=True):
                await pool._stack.aclose()
                if isinstance(embedder, WarmingEmbedder):
                    # Exiting while ONNX Runtime still loads in its thread aborts the process.
                    with contextlib.suppress(RuntimeError):
                        await anyio.to_thread.run_sync(embedder.finish)

    async def __call__(self, owner: str) -> Memory:
        async with self._lock:
            memory = self._open.get(owner)
            if memory is None:
                memory = await self._stack.enter_async_context(
                    Memory.open(
                        self.settings.store,
                        owner=owner,
                        embedder=self.embedder,  # type: ignore[arg-type]
                        settings=self.settings,
                    )
                )
                self._open[owner] = memory
            return memory
