"""What every MCP handler shares: the Memory of the connection it serves, and error translation.

`bind_owner` is server middleware: for each inbound message it resolves the owner (SPEC §10)
and binds the lifespan's `Owners` to it, so `current_memory()` in a tool, resource or prompt
returns that owner's Memory. `tool_errors` and `resource_errors` let a `NooaError` reach the
client with its message, which names the field and the fix (STYLE §4).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS
from pydantic import BaseModel

from . import tracing
from .config import Settings
from .embeddings import Embedder, WarmingEmbedder
from .errors import InvalidInput, NooaError, StoreTooNew
from .identity import Identity, resolve_identity
from .memory import Memory

__all__ = [
    "Owners",
    "bind_owner",
    "check_unicode",
    "current_memory",
    "resource_errors",
    "tool_errors",
]

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

# --------------------------------------------------------------------------- owners


class Owners:
    """One open Memory per owner, all on the same store file and sharing one embedder.

    A stdio server usually has one owner; an HTTP server with a tokens file has one per token.
    Each Memory is opened on first use, runs its background maintenance (reflection after N
    writes and when idle, SPEC §8) while the server runs, and is closed with the server.
    """

    def __init__(self, settings: Settings, embedder: Embedder) -> None:
        self.settings = settings
        self.embedder = embedder
        self._stack = AsyncExitStack()
        self._open: dict[str, Memory] = {}
        self._lock = anyio.Lock()
        self._tasks: TaskGroup | None = None

    @classmethod
    @asynccontextmanager
    async def running(cls, settings: Settings, embedder: Embedder) -> AsyncIterator[Owners]:
        """Owners for the lifetime of a server: maintenance stops before the stores close."""
        owners = cls(settings, embedder)
        try:
            async with anyio.create_task_group() as tasks:
                owners._tasks = tasks
                try:
                    yield owners
                finally:
                    tasks.cancel_scope.cancel()
        finally:
            owners._tasks = None
            await owners.aclose()

    async def get(self, owner: str) -> Memory:
        async with self._lock:
            memory = self._open.get(owner)
            if memory is None:
                memory = await self._stack.enter_async_context(
                    Memory.open(
                        self.settings.store,
                        owner=owner,
                        embedder=self.embedder,
                        settings=self.settings,
                    )
                )
                self._open[owner] = memory
                if self._tasks is not None:
                    self._tasks.start_soon(_maintain, memory, name=f"nooa maintenance {owner}")
            return memory

    async def aclose(self) -> None:
        await self._stack.aclose()
        self._open.clear()
        if isinstance(self.embedder, WarmingEmbedder):
            # A process that exits while ONNX Runtime is still loading the model in its thread
            # can abort ("terminate called without an active exception"): let the load finish.
            with anyio.CancelScope(shield=True), anyio.move_on_after(15):
                await anyio.to_thread.run_sync(self._settle, abandon_on_cancel=True)

    def _settle(self) -> None:
        # A failed load was already reported to the calls that needed the model.
        with contextlib.suppress(RuntimeError):
            self.embedder.wait(15)


async def _maintain(memory: Memory) -> None:
    """Background reflection for one owner; a failure is logged and never stops the server."""
    try:
        await memory.maintain()
    except Exception:
        logger.exception("background reflection for %r stopped", memory.owner)


@dataclass(frozen=True)
class _Bound:
    owners: Owners
    identity: Identity


_bound: ContextVar[_Bound | None] = ContextVar("nooa_bound", default=None)


async def current_memory() -> Memory:
    """The Memory of the connection whose message is being handled."""
    bound = _bound.get()
    if bound is None:
        raise RuntimeError("no MCP request is being handled")
    return await bound.owners.get(bound.identity.owner)


def bind_owner(configured_owner: str) -> Callable[..., Awaitable[HandlerResult]]:
    """Server middleware: resolve this message's owner once; handlers read it from `_bound`."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        owners = ctx.lifespan_context
        if not isinstance(owners, Owners):
            return await call_next(ctx)
        identity = resolve_identity(configured_owner, ctx)
        token = _bound.set(_Bound(owners, identity))
        try:
            with tracing.session(identity.session_ref):
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
