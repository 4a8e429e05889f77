"""When a server loads the embedding model (and, over stdio, opens its store): once the client
has its tool list.

Loading MiniLM holds the interpreter lock for most of a second, and opening the engine imports
numpy and reads every stored vector. Done with the process, they made `initialize` and
`tools/list` markedly slower than on a bare MCP server; nothing in the handshake needs
them. So they start at whichever comes first:

- a message that may need the model (a tool call, a resource read, a prompt), before it runs;
- a short moment after `tools/list` is answered, so the reply is on its way first;
- `FALLBACK_SECONDS` after the server started, for clients that never list tools.

A tool call that needs the model while it loads waits for it (bounded; see
`Engine.query_vector`), as it did when the load began at start-up.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext

__all__ = ["Warmup"]

#: Messages that may need the model. The handshake (`initialize`, or `server/discover` in
#: newer protocols), pings and listings do not.
NEEDS_MODEL = frozenset({"tools/call", "resources/read", "prompts/get", "completion/complete"})
#: After `tools/list` is answered, the reply is written before the load begins.
AFTER_LISTING_SECONDS = 0.2
#: The load begins by then whatever the client does.
FALLBACK_SECONDS = 2.0


class Warmup:
    """Calls what was registered with `on_start` once, at the right moment."""

    def __init__(self) -> None:
        self._callbacks: list[Callable[[], object]] = []
        self._started = False
        self._listed = anyio.Event()

    def on_start(self, callback: Callable[[], object]) -> None:
        self._callbacks.append(callback)
        if self._started:
            callback()

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        for callback in self._callbacks:
            callback()

    async def run(self) -> None:
        """Start after the listing (or the fallback delay); run in the lifespan."""
        with anyio.move_on_after(FALLBACK_SECONDS):
            await self._listed.wait()
            await anyio.sleep(AFTER_LISTING_SECONDS)
        self.start()

    def middleware(self) -> ServerMiddleware[Any]:
        """Server middleware: start the load before a message that may need the model."""

        async def middleware(
            ctx: ServerRequestContext[Any, Any], call_next: CallNext
        ) -> HandlerResult:
            method = getattr(ctx, "method", "")
            if method in NEEDS_MODEL:
                self.start()
            try:
                return await call_next(ctx)
            finally:
                if method == "tools/list":
                    self._listed.set()

        return middleware
