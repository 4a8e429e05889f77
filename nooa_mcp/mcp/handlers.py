"""What every MCP handler shares: the Memory of the connection it serves, and error translation.

`bind_owner` is server middleware: for each inbound message it resolves the owner (DESIGN.md §10)
and binds the lifespan's `Owners` to it, so `current_memory()` in a tool, resource or prompt
returns that owner's Memory. `tool_errors` and `resource_errors` let a `NooaError` reach the
client with its message, which names the field and the fix.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import anyio
import anyio.to_thread
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS
from pydantic import BaseModel

from ..config import Settings
from ..errors import InvalidInput, NooaError, StoreTooNew, StoreUnavailable
from ..services import provenance
from .identity import Identity, resolve_identity

if TYPE_CHECKING:  # the engine (numpy, the store, the services) loads when first needed
    from ..embeddings import Embedder
    from ..engine import Engine
    from ..memory import Memory

__all__ = [
    "Owners",
    "bind_owner",
    "check_unicode",
    "current_identity",
    "current_memory",
    "resource_errors",
    "tool_errors",
]

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

# --------------------------------------------------------------------------- the engine


class Owners:
    """The server's one engine, and a `Memory` for whoever sends the message being handled.

    Every owner shares the engine (one store connection or pool, one vector index, one
    embedder); a Memory is a cheap view of it for one owner and its read grants. Background
    maintenance (reflection after N writes and when idle, DESIGN.md §8.9) runs once for every
    role.
    """

    def __init__(self, engine: Engine | None, broken: NooaError | None = None) -> None:
        self.engine = engine
        self.broken = broken
        self._ready = anyio.Event()
        self._open = anyio.Event()
        if engine is not None or broken is not None:
            self._ready.set()

    @classmethod
    @asynccontextmanager
    async def running(
        cls,
        settings: Settings,
        embedder: Embedder,
        engine: Engine | None = None,
        *,
        vectors_later: bool = False,
        every_role_first: bool = False,
    ) -> AsyncIterator[Owners]:
        """The engine for the lifetime of a server: maintenance stops before the store closes.

        With `engine`, the server runs on an engine its caller opened (and will close). When
        the store cannot be opened (damaged, not a store, too new), the server still starts
        and every call answers with that one sentence: a client sees why, not a dead server.
        """
        if engine is not None:
            async with cls._maintained(engine) as owners:
                yield owners
            return
        from ..engine import Engine

        async with AsyncExitStack() as stack:
            try:
                opened = await stack.enter_async_context(
                    Engine.open(
                        settings,
                        embedder,
                        vectors_later=vectors_later,
                        every_role_first=every_role_first,
                    )
                )
            except (StoreUnavailable, StoreTooNew) as exc:
                logger.error("%s", exc)
                try:
                    yield cls(None, exc)
                finally:
                    await _settle(embedder)
                return
            try:
                async with cls._maintained(opened) as owners:
                    yield owners
            finally:
                await opened.settle()

    @classmethod
    @asynccontextmanager
    async def when_needed(
        cls, settings: Settings, embedder: Callable[[], Embedder]
    ) -> AsyncIterator[Owners]:
        """Like `running`, but the store opens on `open_now()` (or on the first `memory()`):
        a stdio server answers the handshake without importing numpy, opening the store or
        reading its vectors (a 100k store holds 150 MB of them). Calls are served as soon as
        the store is open; the model loads behind them, then the vectors are read
        (`Engine.open(vectors_later=True)`), and until then recall ranks by keywords."""
        owners = cls(None)
        stop = anyio.Event()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(owners._hold, settings, embedder, stop, name="nooa engine")
            try:
                yield owners
            finally:
                stop.set()
                owners._open.set()

    async def _hold(
        self, settings: Settings, embedder: Callable[[], Embedder], stop: anyio.Event
    ) -> None:
        await self._open.wait()
        if stop.is_set():
            return
        # One client, whose owner (its name) is known only once it calls: without a
        # configured owner, the whole store is read behind the first calls, as always.
        async with Owners.running(
            settings, embedder(), vectors_later=True, every_role_first=True
        ) as opened:
            self.engine, self.broken = opened.engine, opened.broken
            self._ready.set()
            await stop.wait()

    def open_now(self) -> None:
        """Open the engine now if it opens when needed (see `when_needed`)."""
        self._open.set()

    async def opened(self) -> Engine | None:
        """The engine once it is open, or None when the store could not be opened. Waiting
        here does not open it (`open_now` does)."""
        await self._ready.wait()
        return self.engine

    @classmethod
    @asynccontextmanager
    async def _maintained(cls, engine: Engine) -> AsyncIterator[Owners]:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_maintain, engine, name="nooa maintenance")
            try:
                yield cls(engine)
            finally:
                tasks.cancel_scope.cancel()

    async def memory(self, identity: Identity) -> Memory:
        """The Memory of `identity` (opening the engine first if it opens when needed).

        Raises:
            StoreUnavailable / StoreTooNew: the store could not be opened.
        """
        from ..memory import Memory

        self.open_now()
        await self._ready.wait()
        if self.engine is None:
            raise self.broken or RuntimeError("no engine")
        return Memory(self.engine, identity.owner, identity.grants)


async def _settle(embedder: Embedder) -> None:
    """Let a loading model finish before the process goes on to exit (ONNX aborts otherwise)."""
    from ..embeddings import WarmingEmbedder

    if isinstance(embedder, WarmingEmbedder):
        with anyio.CancelScope(shield=True), anyio.move_on_after(15):
            await anyio.to_thread.run_sync(embedder.finish, abandon_on_cancel=True)


async def _maintain(engine: Engine) -> None:
    """Background reflection; a failure is logged and never stops the server."""
    from ..memory import maintain

    try:
        await maintain(engine)
    except Exception:
        logger.exception("background reflection stopped")


@dataclass(frozen=True)
class _Bound:
    owners: Owners
    identity: Identity


_bound: ContextVar[_Bound | None] = ContextVar("nooa_bound", default=None)


def current_identity() -> Identity | None:
    """The identity of the message being handled, if any (for subscriptions)."""
    bound = _bound.get()
    return None if bound is None else bound.identity


async def current_memory() -> Memory:
    """The Memory of the connection whose message is being handled."""
    bound = _bound.get()
    if bound is None:
        raise RuntimeError("no MCP request is being handled")
    return await bound.owners.memory(bound.identity)


def bind_owner(
    configured_owner: str, grants: frozenset[str] = frozenset()
) -> ServerMiddleware[Any]:
    """Server middleware: resolve this message's owner once; handlers read it from `_bound`."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        owners = ctx.lifespan_context
        if not isinstance(owners, Owners):
            return await call_next(ctx)
        identity = resolve_identity(configured_owner, ctx, grants)
        token = _bound.set(_Bound(owners, identity))
        # The engine's background work waits for a moment between calls (`Engine.serving`).
        engine = owners.engine
        try:
            with (
                provenance.session(identity.session_ref),
                engine.serving() if engine is not None else nullcontext(),
            ):
                return await call_next(ctx)
        finally:
            _bound.reset(token)

    return middleware


# --------------------------------------------------------------------------- errors


def tool_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Let a NooaError reach the model as an is_error result with its own message.

    The SDK hides the text of unexpected exceptions; a ToolError keeps it, and every
    NooaError message already names the field and the fix.
    """

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            for name, value in kwargs.items():
                if name != "ctx":
                    check_unicode(value, name)
            return await fn(*args, **kwargs)
        except NooaError as exc:
            raise ToolError(str(exc)) from exc

    # The docstring is the tool description the model reads: no source indentation in it.
    wrapper.__doc__ = inspect.cleandoc(fn.__doc__ or "")
    return wrapper


def check_unicode(value: Any, field: str) -> None:
    """Refuse text SQLite cannot store: JSON may carry lone surrogates (`"\\ud800"`).

    Raises:
        InvalidInput: some string inside `value` is not encodable as UTF-8; names the field.
    """
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput(
                field, "holds a lone surrogate, which is not text.", "Send valid UTF-8 text."
            ) from None
    elif isinstance(value, list | tuple | set):
        for item in value:
            check_unicode(item, field)
    elif isinstance(value, dict):
        for key, item in value.items():
            check_unicode(key, field)
            check_unicode(item, f"{field}.{key}" if isinstance(key, str) else field)
    elif isinstance(value, BaseModel):
        check_unicode(value.model_dump(), field)


def resource_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Turn a NooaError from a resource read into an MCP error that keeps its message."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            for name, value in kwargs.items():
                check_unicode(value, name)
            return await fn(*args, **kwargs)
        except StoreTooNew as exc:
            raise MCPError(code=INTERNAL_ERROR, message=str(exc)) from exc
        except NooaError as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from exc

    return wrapper
