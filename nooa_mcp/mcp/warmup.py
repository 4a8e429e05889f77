"""When a server starts loading the embedding model: once the client has its tool list.

Loading MiniLM holds the interpreter lock for most of a second. Started with the process, it
made `initialize` and `tools/list` ~1.5x slower than on a bare MCP server (issue 12); nothing
in the handshake needs the model. So the load starts at whichever comes first:

- a message that may need the model (a tool call, a resource read, a prompt), before it runs;
- a short moment after `tools/list` is answered, so the reply is on its way first;
- `FALLBACK_SECONDS` after the server started, for clients that never list tools.

A tool call that needs the model while it loads waits for it (bounded; see
`Engine.query_vector`), as it did when the load began at start-up.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from ..embeddings import Embedder, WarmingEmbedder

__all__ = ["Warmup"]

#: Messages that may need the model. The handshake (`initialize`, or `server/discover` in
#: newer protocols), pings and listings do not.
NEEDS_MODEL = frozenset({"tools/call", "resources/read", "prompts/get", "completion/complete"})
#: After `tools/list` is answered, the reply is written before the load begins.
AFTER_LISTING_SECONDS = 0.2
#: The load begins by then whatever the client does.
FALLBACK_SECONDS = 2.0


class Warmup:
    """Starts a `WarmingEmbedder` created with `start=False` at the right moment."""

    def __init__(self) -> None:
        self.embedder: Embedder | None = None
        self._listed = anyio.Event()

    def start(self) -> None:
        if isinstance(self.embedder, WarmingEmbedder):
            self.embedder.start()

    async def run(self, embedder: Embedder) -> None:
        """Start `embedder` after the listing (or the fallback delay); run in the lifespan."""
        self.embedder = embedder
        with anyio.move_on_after(FALLBACK_SECONDS):
            await self._listed.wait()
            await anyio.sleep(AFTER_LISTING_SECONDS)
        self.start()

    def middleware(self) -> Callable[..., Awaitable[Any]]:
        """Server middleware: start the load before a message that may need the model."""

        async def middleware(ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
            method = getattr(ctx, "method", "")
            if method in NEEDS_MODEL:
                self.start()
            try:
                return await call_next(ctx)
            finally:
                if method == "tools/list":
                    self._listed.set()

        return middleware
