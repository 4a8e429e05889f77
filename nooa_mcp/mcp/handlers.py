"""What every MCP handler shares: the Memory of the connection it serves, and error translation.

`bind_owner` is server middleware: for each inbound message it resolves the owner (SPEC §10)
and binds the lifespan's `Owners` to it, so `current_memory()` in a tool, resource or prompt
returns that owner's Memory. `tool_errors` and `resource_errors` let a `NooaError` reach the
client with its message, which names the field and the fix (STYLE §4).
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS
from pydantic import BaseModel

from ..config import Settings
from ..embeddings import Embedder
from ..engine import Engine
from ..errors import InvalidInput, NooaError, StoreTooNew
from ..memory import Memory, maintain
from ..services import provenance
from .identity import Identity, resolve_identity

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

# --------------------------------------------------------------------------- the engine


class Owners:
    """The server's one engine, and a `Memory` for whoever sends the message being handled.

    Every owner shares the engine (one store connection or pool, one vector index, one
    embedder); a Memory is a cheap view of it for one owner and its read grants. Background
    maintenance (reflection after N writes and when idle, SPEC §8) runs once for every role.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @classmethod
    @asynccontextmanager
    async def running(cls, settings: Settings, embedder: Embedder) -> AsyncIterator[Owners]:
        """The engine for the lifetime of a server: maintenance stops before the store closes."""
        async with Engine.open(settings, embedder) as engine:
            try:
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(_maintain, engine, name="nooa maintenance")
                    try:
                        yield cls(engine)
                    finally:
                        tasks.cancel_scope.cancel()
            finally:
                await engine.settle()

    def memory(self, identity: Identity) -> Memory:
        return Memory(self.engine, identity.owner, identity.grants)


async def _maintain(engine: Engine) -> None:
    """Background reflection; a failure is logged and never stops the server."""
    try:
        await maintain(engine)
    except Exception:
        logger.exception("background reflection stopped")


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
    return bound.owners.memory(bound.identity)


def bind_owner(
    configured_owner: str, grants: frozenset[str] = frozenset()
) -> Callable[..., Awaitable[HandlerResult]]:
    """Server middleware: resolve this message's owner once; handlers read it from `_bound`."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        owners = ctx.lifespan_context
        if not isinstance(owners, Owners):
            return await call_next(ctx)
        identity = resolve_identity(configured_owner, ctx, grants)
        token = _bound.set(_Bound(owners, identity))
        try:
            with provenance.session(identity.session_ref):
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
