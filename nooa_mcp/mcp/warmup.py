"""When a server loads the embedding model (and, over stdio, opens its store): once the client
has its tool list.

Loading MiniLM holds the interpreter lock for most of a second, and opening the engine imports
numpy and reads every stored vector. Done with the process, they made `initialize` and
`tools/list` markedly slower than on a bare MCP server; nothing in the handshake needs
them. So they start at whichever comes first:

- a message that may need the model (a tool call, a resource read, a prompt), before it runs;
- a short moment after `tools/list` is answered, so the reply is on its way first;
- `FALLBACK_SECONDS` after the server started, for clients that never list tools.

A recall that arrives while the model loads does not wait for it: it ranks by keywords and
its reply says so (`Engine.query_vector`). Over stdio the store opens for the call that woke
the warm-up, but the model's own load waits until the calls in flight are answered
(`after_answers`, `WarmingEmbedder.hold`): importing onnxruntime and loading the model beside the
first recall took the interpreter lock from it, and that first answer came later than it
needs to. A call that needs the model (a write) releases the load at once.

`nooa-mcp` also pauses Python's garbage collector for its start-up (`startup_gc`); the
server restarts it once the warm-up is over (`resume_collection_when`), so the imports
behind the first call run without it too.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from .. import startup_gc

if TYPE_CHECKING:
    from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext

__all__ = ["Warmup", "resume_collection_when"]

logger = logging.getLogger(__name__)

#: Messages that may need the model. The handshake (`initialize`, or `server/discover` in
#: newer protocols), pings and listings do not.
NEEDS_MODEL = frozenset({"tools/call", "resources/read", "prompts/get", "completion/complete"})
#: After `tools/list` is answered, the reply is written before the load begins.
AFTER_LISTING_SECONDS = 0.2
#: The load begins by then whatever the client does.
FALLBACK_SECONDS = 2.0
#: After the last call in flight is answered, its reply is written before a held model
#: load begins (`after_answers`).
AFTER_REPLY_SECONDS = 0.02
#: The garbage collector paused for start-up runs again by then, however the warm-up went.
COLLECTION_PAUSED_AT_MOST = 30.0


class Warmup:
    """Calls what was registered with `on_start` once, at the right moment."""

    def __init__(self) -> None:
        self._callbacks: list[Callable[[], object]] = []
        self._started = False
        self._listed = anyio.Event()
        #: Messages that may need the model, being handled now.
        self._in_flight = 0
        self._after_answers: list[Callable[[], object]] = []
        self._answered = anyio.Event()

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

    def after_answers(self, callback: Callable[[], object]) -> None:
        """Call `callback` once no message that may need the model is being handled (a
        moment after the last reply): what a stdio server does with the model load, so
        the calls that woke it are answered from keywords first (`WarmingEmbedder.hold`).
        Needs `run_after_answers` running."""
        self._after_answers.append(callback)
        self._answered.set()

    async def run_after_answers(self) -> None:
        """Run the `after_answers` callbacks whenever calls are answered; in the lifespan."""
        while True:
            await self._answered.wait()
            self._answered = anyio.Event()
            if self._in_flight or not self._after_answers:
                continue
            await anyio.sleep(AFTER_REPLY_SECONDS)
            if self._in_flight:
                continue  # another call came in meanwhile: its end sets the event again
            callbacks, self._after_answers = self._after_answers, []
            for callback in callbacks:
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
            needs_model = method in NEEDS_MODEL
            if needs_model:
                self._in_flight += 1
                self.start()
            try:
                return await call_next(ctx)
            finally:
                if method == "tools/list":
                    self._listed.set()
                if needs_model:
                    self._in_flight -= 1
                    if not self._in_flight:
                        self._answered.set()

        return middleware


async def resume_collection_when(warm: Callable[[], Awaitable[object]]) -> None:
    """Restart the garbage collector paused for start-up once `warm` returns (the model
    loaded, the stored vectors read), fails, or `COLLECTION_PAUSED_AT_MOST` has passed;
    at once if it was not paused (`startup_gc`)."""
    if not startup_gc.paused():
        return
    try:
        with anyio.move_on_after(COLLECTION_PAUSED_AT_MOST):
            await warm()
    except Exception as exc:  # a failed load is reported by the calls that need the model
        logger.debug("warm-up ended early: %s", exc)
    finally:
        startup_gc.resume()
