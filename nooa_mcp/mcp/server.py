"""The MCP server: thin tools, resources and prompts over the Memory facade (DESIGN.md §13).

`build_server(settings)` returns an `MCPServer`; `nooa_mcp.serving.run` serves it over stdio
(the default) or streamable HTTP, with the console and the hooks' route beside it. The
lifespan starts the embedding model loading in a worker thread and returns at once, so
`initialize` is answered before the model is ready.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol

import anyio
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from pydantic import AnyHttpUrl

from ..config import Settings
from ..domain.scope import parse_roles
from . import catalog
from .handlers import Owners, bind_owner
from .identity import TokenEntry, TokenFileVerifier
from .memory_server import MemoryServer
from .notifications import ScopedBus, Subscribers
from .warmup import Warmup, resume_collection_when

if TYPE_CHECKING:
    from ..embeddings import Embedder
    from ..engine import Engine
    from ..memory import Memory

__all__ = ["BesideMcp", "build_server", "single_threaded_blas"]


class BesideMcp(Protocol):
    """An app served beside /mcp on the server's engine (the web console at /ui): the lifespan
    gives it a Memory per viewer and runs it while the server runs."""

    memory_for: Callable[[Any], Memory | Awaitable[Memory]]

    def running(self) -> AbstractAsyncContextManager[object]: ...


# --------------------------------------------------------------------------- the server

_INSTRUCTIONS = (
    "Long-term memory for this agent. Recall (memory_recall) before acting on a subject you may "
    "have met before; author (memory_author) what you would want next time; keep commitments "
    "with todo and future reminders with intent. Read the memory_guide prompt for the details."
)


def build_server(
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    tokens: dict[str, TokenEntry] | dict[str, str] | None = None,
    engine: Engine | None = None,
    http_url: str = "http://127.0.0.1:8765",
    console: BesideMcp | None = None,
    open_when_needed: bool = False,
) -> MemoryServer:
    """Build the nooa-mcp server for `settings`.

    Args:
        settings: store path, configured owner and model constants.
        embedder: the embedding model; None loads the bundled MiniLM in a worker thread.
        tokens: bearer token → owner (or TokenEntry with read grants); when given, HTTP
            requests without a valid token are refused.
        http_url: the server's own base URL (only used to describe it to OAuth-aware clients).
        engine: an engine the caller opened and will close (in-process front ends such as
            the evaluation); None opens one for the server's lifetime.
        console: the web console served at /ui beside /mcp (HTTP only); the lifespan gives it
            the server's engine and runs its reflection passes.
        open_when_needed: open the store and load the model once the client has its tool
            list (see `warmup`), not before the handshake; what `nooa-mcp serve` does over
            stdio, where a client spawns the server and waits for it.

    Returns:
        An MCPServer whose lifespan opens the store and closes it on shutdown.
    """

    # The engine once the lifespan has opened it: the HTTP routes beside /mcp use it too.
    running: dict[str, Owners] = {}
    warmup = Warmup()
    # Before the model, the store and reflection start their threads (and after the
    # handshake: ctypes is not needed to answer it).
    warmup.on_start(_tune_malloc)

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[Owners]:
        def model() -> Embedder:
            # Imported here, not above: numpy comes with it, and a stdio server answers the
            # handshake before it needs either (see `warmup`).
            from ..embeddings import default_embedder

            if engine is not None:
                return engine.embedder
            return embedder or default_embedder(settings.model_cache_dir, start=False)

        def held_model() -> Embedder:
            # Loaded once the calls that opened the store are answered (from keywords), so
            # the model's imports do not hold the interpreter lock while they run.
            from ..embeddings import WarmingEmbedder

            chosen = model()
            if isinstance(chosen, WarmingEmbedder):
                chosen.hold()
                warmup.after_answers(chosen.release)
            return chosen

        async with anyio.create_task_group() as tasks:
            if open_when_needed and engine is None:
                tasks.start_soon(warmup.run_after_answers, name="nooa model after answers")
                owners_cm = Owners.when_needed(settings, held_model)
            else:
                from ..embeddings import WarmingEmbedder

                chosen = model()
                if isinstance(chosen, WarmingEmbedder):
                    warmup.on_start(chosen.start)
                owners_cm = Owners.running(settings, chosen, engine)
            async with owners_cm as owners:
                warmup.on_start(owners.open_now)
                tasks.start_soon(warmup.run, name="nooa warm-up")
                tasks.start_soon(
                    resume_collection_when,
                    functools.partial(_warm, owners),
                    name="nooa collector after warm-up",
                )
                running["owners"] = owners
                try:
                    if console is None or owners.engine is None:
                        yield owners
                    else:
                        from ..memory import Memory

                        opened = owners.engine
                        console.memory_for = lambda v: Memory(opened, v.owner, v.read)
                        async with console.running():
                            yield owners
                finally:
                    running.pop("owners", None)
                    tasks.cancel_scope.cancel()

    auth = None
    verifier = None
    if tokens:
        verifier = TokenFileVerifier(tokens)
        auth = AuthSettings(issuer_url=AnyHttpUrl(http_url), resource_server_url=None)

    bus = ScopedBus()
    server = MemoryServer(
        "nooa-mcp",
        title="NOOA long-term memory",
        version=_version(),
        instructions=_INSTRUCTIONS,
        lifespan=lifespan,
        log_level="WARNING",
        token_verifier=verifier,
        auth=auth,
        subscriptions=bus,
    )
    server.middleware.append(warmup.middleware())
    server.middleware.append(bind_owner(settings.owner, parse_roles(settings.read)))
    subscribers = Subscribers(bus)
    subscribers.install(server)
    server.register_later(
        functools.partial(_register_handlers, server, subscribers, settings.reflect_tool),
        catalog.load(settings.reflect_tool),
    )
    # The warm-up (after the listing, or before the first call) builds them for real.
    warmup.on_start(server.register_handlers)
    # Routes served beside /mcp (the hooks' POST /hooks) use the engine the lifespan opened.
    server.engine_now = lambda: getattr(running.get("owners"), "engine", None)
    return server


async def _warm(owners: Owners) -> None:
    """Until the engine is open, its model loaded and the roles it reads first read (the
    configured owner's, or every role: `Engine._first_roles`); other roles are read when a
    caller's scope first reaches them."""
    engine = await owners.opened()
    if engine is not None:
        await engine.wait_ready()
        await engine.vectors_read()


def _tune_malloc() -> None:
    from ..malloc_tuning import tune_malloc

    tune_malloc()


def _register_handlers(server: MCPServer, subscribers: Subscribers, reflect: bool) -> None:
    """Tools, resources and prompts: imported and built here, after the handshake (`catalog`)."""
    from .prompting import register_prompts
    from .rendering import REPLY_TOKENS
    from .resources import register_resources
    from .schemas import lean_tools
    from .tools import register_tools

    register_tools(server, REPLY_TOKENS, subscribers, reflect=reflect)
    lean_tools(server)
    register_resources(server, REPLY_TOKENS)
    register_prompts(server)


def _version() -> str:
    try:
        return importlib.metadata.version("nooa-mcp")
    except importlib.metadata.PackageNotFoundError:
        return "0"


# --------------------------------------------------------------------------- running


def single_threaded_blas() -> None:
    """One BLAS thread for a server process, unless OPENBLAS_NUM_THREADS says otherwise.

    A server's matrix products are small (one query, one new memory) or in the background
    (reflection). BLAS worker threads spinning beside the event loop, the SQLite thread and
    the model made recall and author several times slower on a 2-core machine under load.
    It takes effect only before numpy is imported: `nooa-mcp serve` calls it first, and the
    engine (numpy) opens after the handshake.
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
