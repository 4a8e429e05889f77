"""The MCP server: thin tools, resources and prompts over the Memory facade (SPEC §10, §12).

`build_server(settings)` returns an `MCPServer`; `run(settings, transport=...)` serves it over
stdio (the default) or streamable HTTP. The lifespan starts the embedding model loading in a
worker thread and returns at once, so `initialize` is answered before the model is ready.
"""

import functools
import importlib.metadata
import inspect
import ipaddress
import string
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal, ParamSpec, TypeVar

import anyio
from mcp.server.auth.settings import AuthSettings
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, CallToolResult, ToolAnnotations
from pydantic import AnyHttpUrl, BaseModel, Field

import nooa_mcp

from . import tracing
from .config import Settings
from .embeddings import Embedder, default_embedder
from .errors import InvalidInput, NooaError, NotFound, StoreTooNew
from .identity import Identity, TokenFileVerifier, load_tokens, resolve_identity
from .memory import Memory
from .notifications import Subscribers
from .rendering import (
    REPLY_TOKENS,
    approx_tokens,
    bound_explain,
    bound_items,
    bound_recall,
    bound_view,
    memory_uri,
    render_author,
    render_explain,
    render_recall,
    render_reminders,
    render_update,
    tool_result,
)
from .replies import AuthorResult, ExplainResult, MemoryView, RecallResult, Reminder, UpdateResult
from .schema import Link, MemoryType, head, now

__all__ = ["build_server", "run"]

P = ParamSpec("P")
R = TypeVar("R")

PAGE_SIZE = 50
TODO_LIST_LIMIT = 200

# --------------------------------------------------------------------------- owners


class Owners:
    """One open Memory per owner, all on the same store file and sharing one embedder.

    A stdio server usually has one owner; an HTTP server with a tokens file has one per token.
    Each Memory is opened on first use and closed with the server.
    """

    def __init__(self, settings: Settings, embedder: Embedder) -> None:
        self.settings = settings
        self.embedder = embedder
        self._stack = AsyncExitStack()
        self._open: dict[str, Memory] = {}
        self._lock = anyio.Lock()

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
            return memory

    async def aclose(self) -> None:
        await self._stack.aclose()
        self._open.clear()


@dataclass(frozen=True)
class _Bound:
    owners: Owners
    identity: Identity


_bound: ContextVar[_Bound | None] = ContextVar("nooa_bound", default=None)


async def _memory() -> Memory:
    """The Memory of the connection whose message is being handled."""
    bound = _bound.get()
    if bound is None:
        raise RuntimeError("no MCP request is being handled")
    return await bound.owners.get(bound.identity.owner)


def _bind(configured_owner: str) -> Callable[..., Awaitable[HandlerResult]]:
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


def _tool_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Let a NooaError reach the model as an is_error result with its own message.

    The SDK hides the text of unexpected exceptions; a ToolError keeps it, and every
    NooaError message already names the field and the fix.
    """

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except NooaError as exc:
            raise ToolError(str(exc)) from exc

    # The docstring is the tool description the model reads: no source indentation in it.
    wrapper.__doc__ = inspect.cleandoc(fn.__doc__ or "")
    return wrapper


def _resource_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Turn a NooaError from a resource read into an MCP error that keeps its message."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except StoreTooNew as exc:
            raise MCPError(code=INTERNAL_ERROR, message=str(exc)) from exc
        except NooaError as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from exc

    return wrapper


# --------------------------------------------------------------------------- tool argument types

Importance = Annotated[
    str | float,
    Field(description="CRITICAL, HIGH, MEDIUM, LOW, TRIVIAL, or a number 0–10."),
]
MemoryId = Annotated[str, Field(description="A memory id; the first 8 hex characters are enough.")]


class TriggerArg(BaseModel):
    """When an intent fires: a time, a cue, or both."""

    fire_at: datetime | None = Field(None, description="ISO 8601 time after which it fires.")
    cue: str | None = Field(
        None, description="Words that fire it when they show up in a later query or memory."
    )
    every_hours: float | None = Field(
        None, gt=0, description="Re-arm this many hours after firing (recurring)."
    )


class TodoItem(BaseModel):
    id: str
    id8: str
    status: str
    title: str
    content: str
    importance: float
    importance_label: str
    created_at: datetime


class TodoReply(BaseModel):
    """What the todo tool did, and the todo list as it is now."""

    action: str
    id: str | None = None
    outcome: str = ""
    todos: list[TodoItem] = Field(default_factory=list)
    open_count: int = 0
    omitted: int = Field(
        0, description="Todos left out to keep the reply small: see memory://todos."
    )
    reminders: list[Reminder] = Field(default_factory=list)


class IntentItem(BaseModel):
    id: str
    id8: str
    content: str
    trigger: dict[str, Any] | None
    due: bool


class IntentReply(BaseModel):
    """What the intent tool did, and the intents that are armed (or due) now."""

    action: str
    id: str | None = None
    outcome: str = ""
    intents: list[IntentItem] = Field(default_factory=list)
    omitted: int = 0
    note: str = ""
    reminders: list[Reminder] = Field(default_factory=list)


class Page(BaseModel):
    """One page of a listing resource; pass `next_cursor` (or read `next_uri`) for the next."""

    items: list[dict[str, Any]]
    next_cursor: str | None = None
    next_uri: str | None = None


# --------------------------------------------------------------------------- helpers


def _todo_item(view: MemoryView) -> TodoItem:
    return TodoItem(
        id=view.id,
        id8=view.id[:8],
        status=view.status or "open",
        title=view.title,
        content=head(view.content, 300),
        importance=view.importance,
        importance_label=view.importance_label,
        created_at=view.created_at,
    )


_STATUS_ORDER = {"open": 0, "done": 1, "dropped": 2}


async def _todos(memory: Memory, include_closed: bool) -> list[TodoItem]:
    rows = await memory.list_memories(limit=TODO_LIST_LIMIT, type="todo")
    items = [_todo_item(v) for _, v in rows if include_closed or (v.status or "open") == "open"]
    # SPEC §9: open first, then importance, then age (oldest commitment first).
    items.sort(key=lambda t: (_STATUS_ORDER.get(t.status, 3), -t.importance, t.created_at))
    return items


def _intent_item(view: MemoryView, at: datetime) -> IntentItem:
    trigger = view.trigger or {}
    fire_at = trigger.get("fire_at")
    if isinstance(fire_at, str):
        fire_at = datetime.fromisoformat(fire_at)
    due = bool(fire_at and fire_at <= at and not trigger.get("fired_at"))
    return IntentItem(
        id=view.id, id8=view.id[:8], content=head(view.content, 300), trigger=view.trigger, due=due
    )


def _summary(view: MemoryView) -> dict[str, Any]:
    """A listing row: enough to choose, with the URI that has the whole memory."""
    return {
        "id": view.id,
        "type": view.type.value,
        "title": view.title,
        "head": head(view.content),
        "status": view.status,
        "importance": view.importance_label,
        "created_at": view.created_at.isoformat(),
        "archived": view.archived,
        "uri": memory_uri(view.id),
    }


def _page(items: list[dict[str, Any]], next_cursor: str | None, base_uri: str) -> str:
    next_uri = f"{base_uri}?cursor={next_cursor}" if next_cursor else None
    return Page(items=items, next_cursor=next_cursor, next_uri=next_uri).model_dump_json(indent=1)


def _cursor(cursor: str) -> int | None:
    """Cursors are opaque to clients; here they are the stream or insertion sequence number."""
    if not cursor:
        return None
    if not cursor.isdigit():
        raise InvalidInput(
            "cursor",
            f"'{cursor}' is not a cursor from this server.",
            "Pass next_cursor from the previous page, or leave it out for the first page.",
        )
    return int(cursor)


def _offset(offset: str, length: int) -> int:
    if not offset:
        return 0
    if not offset.isdigit() or int(offset) > length:
        raise InvalidInput(
            "offset",
            f"'{offset}' is not a character offset inside the content.",
            f"Pass 0 to {length}, as given in the clip marker.",
        )
    return int(offset)


def _limit(limit: str | int | None) -> int:
    if limit in (None, ""):
        return PAGE_SIZE
    try:
        value = int(limit)
    except (TypeError, ValueError):
        raise InvalidInput("limit", f"'{limit}' is not a number.", "Pass 1 to 200.") from None
    if not 1 <= value <= 200:
        raise InvalidInput("limit", f"{value} is outside 1–200.", "Pass 1 to 200.")
    return value


def prompts_dir() -> Path:
    """The prompts folder: inside the installed package first, then the source checkout's."""
    packaged = Path(nooa_mcp.__file__).parent / "prompts"
    if packaged.is_dir():
        return packaged
    source = Path(nooa_mcp.__file__).parent.parent / "prompts"
    if source.is_dir():
        return source
    raise FileNotFoundError(f"no prompts folder at {packaged} or {source}; reinstall nooa-mcp")


@dataclass(frozen=True)
class PromptFile:
    name: str
    description: str
    body: string.Template


def load_prompt(name: str) -> PromptFile:
    """Read `<name>.md`; an opening `<!-- description: ... -->` line becomes the description."""
    text = (prompts_dir() / f"{name}.md").read_text(encoding="utf-8")
    description = ""
    first, _, rest = text.partition("\n")
    if first.startswith("<!--") and first.rstrip().endswith("-->"):
        description = first.strip()[4:-3].strip().removeprefix("description:").strip()
        text = rest
    return PromptFile(name, description, string.Template(text.strip() + "\n"))


def _bullets(lines: list[str], empty: str) -> str:
    return "\n".join(lines) if lines else empty


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
    tokens: dict[str, str] | None = None,
    http_url: str = "http://127.0.0.1:8765",
) -> MCPServer:
    """Build the nooa-mcp server for `settings`.

    Args:
        settings: store path, configured owner and model constants.
        embedder: the embedding model; None loads the bundled MiniLM in a worker thread.
        tokens: bearer token → owner; when given, HTTP requests without a valid token are refused.
        http_url: the server's own base URL (only used to describe it to OAuth-aware clients).

    Returns:
        An MCPServer whose lifespan opens the store and closes it on shutdown.
    """

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[Owners]:
        # The model loads beside the server: initialize is answered before it is ready (SPEC §4).
        owners = Owners(settings, embedder or default_embedder(settings.model_cache_dir))
        try:
            yield owners
        finally:
            await owners.aclose()

    auth = None
    verifier = None
    if tokens:
        verifier = TokenFileVerifier(tokens)
        auth = AuthSettings(issuer_url=AnyHttpUrl(http_url), resource_server_url=None)

    server = MCPServer(
        "nooa-mcp",
        title="NOOA long-term memory",
        version=_version(),
        instructions=_INSTRUCTIONS,
        lifespan=lifespan,
        log_level="WARNING",
        token_verifier=verifier,
        auth=auth,
    )
    server.middleware.append(_bind(settings.owner))
    budget = REPLY_TOKENS
    subscribers = Subscribers()
    subscribers.install(server)
    _register_tools(server, budget, subscribers)
    _register_resources(server, budget)
    _register_prompts(server)
    return server


def _version() -> str:
    try:
        return importlib.metadata.version("nooa-mcp")
    except importlib.metadata.PackageNotFoundError:
        return "0"


def _register_tools(server: MCPServer, budget: int, subscribers: Subscribers) -> None:
    writes = ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
    )

    @server.tool(title="Write a memory", annotations=writes)
    @_tool_errors
    async def memory_author(
        ctx: Context,
        content: Annotated[str, Field(description="One self-contained idea, fact or procedure.")],
        type: Annotated[MemoryType, Field(description="What kind of memory this is.")] = (
            MemoryType.info
        ),
        title: str = "",
        importance: Importance = "MEDIUM",
        salience: Annotated[
            str | float | None,
            Field(description="PIVOTAL, NOTABLE, ROUTINE, NONE or 0–1: how surprising."),
        ] = None,
        confidence: Annotated[
            str | float | None,
            Field(description="CERTAIN, CONFIDENT, TENTATIVE, UNCERTAIN or 0–1."),
        ] = None,
        tags: list[str] | None = None,
        entities: Annotated[
            list[str] | None, Field(description="People, systems, places it is about.")
        ] = None,
        place_or_task: str = "",
        references: Annotated[
            list[str] | None,
            Field(
                description="Pointers instead of copies: file:<relative path>, memory:<id>, "
                "url:<address>."
            ),
        ] = None,
        links: Annotated[
            list[Link] | None,
            Field(description="Edges to existing memories, e.g. {target, relation: refines}."),
        ] = None,
        valid_from: datetime | None = None,
        valid_to: Annotated[
            datetime | None, Field(description="When this stops being true, if known.")
        ] = None,
        trigger: Annotated[
            TriggerArg | None, Field(description="Only for type=intent: when it fires.")
        ] = None,
        revive: Annotated[
            bool, Field(description="Restore a memory that was forgotten before.")
        ] = False,
    ) -> Annotated[CallToolResult, AuthorResult]:
        """Store something worth remembering next time: a fact, procedure, episode or lesson.

        Importance CRITICAL/HIGH/MEDIUM/LOW/TRIVIAL. A near-duplicate reinforces the existing
        memory; content that was forgotten is not recreated unless revive=true.
        """
        memory = await _memory()
        result = await memory.author(
            content,
            type=type.value,
            title=title,
            importance=importance,
            salience=salience,
            confidence=confidence,
            tags=tags,
            entities=entities,
            place_or_task=place_or_task,
            references=references,
            links=[link.model_dump(exclude_none=True) for link in links] if links else None,
            valid_from=valid_from,
            valid_to=valid_to,
            trigger=trigger.model_dump(exclude_none=True) if trigger else None,
            revive=revive,
        )
        await subscribers.publish(ctx, memory_uri(result.id), "memory://stats")
        return tool_result(result, render_author(result), budget)

    @server.tool(title="Recall memories", annotations=writes)
    @_tool_errors
    async def memory_recall(
        query: Annotated[str, Field(description="A short natural-language query.")],
        k: Annotated[int, Field(ge=1, le=50, description="How many results.")] = 5,
        scope: Annotated[
            str,
            Field(
                description="mine (your role + shared, default), instance (only you), "
                "* (everyone, read-only) or an owner role[@instance]."
            ),
        ] = "mine",
        types: list[MemoryType] | None = None,
        hops: Annotated[
            int | None, Field(ge=0, le=3, description="Spreading hops over links; 0 = none.")
        ] = None,
        include_archived: bool = False,
    ) -> Annotated[CallToolResult, RecallResult]:
        """Find what you remember about something, ranked by relevance, recency and importance.

        Use it before acting on a subject you may have met before. Results marked weak are
        loosely related; long content is clipped with the resource URI that has the rest.
        """
        memory = await _memory()
        result = await memory.recall(
            query,
            k=k,
            scope=scope,
            types=[t.value for t in types] if types else None,
            hops=hops,
            include_archived=include_archived,
        )
        bounded = bound_recall(result, budget)
        return tool_result(bounded, render_recall(bounded), budget)

    @server.tool(
        title="Explain a recall",
        annotations=ToolAnnotations(
            read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
    )
    @_tool_errors
    async def memory_explain(
        query: Annotated[
            str | None,
            Field(description="Dry-run this query: every candidate and its score parts."),
        ] = None,
        memory_id: Annotated[
            str | None,
            Field(
                description="Replay this memory's access history; with query: why (not) recalled."
            ),
        ] = None,
        k: Annotated[int, Field(ge=1, le=50)] = 10,
        scope: str = "mine",
        hops: Annotated[int | None, Field(ge=0, le=3)] = None,
    ) -> Annotated[CallToolResult, ExplainResult]:
        """See why memories rank where they do, without logging anything.

        Pass query for a dry run, memory_id for its access history, or both to learn why that
        memory was or was not in the top k.
        """
        memory = await _memory()
        result = await memory.explain(query=query, memory_id=memory_id, k=k, hops=hops, scope=scope)
        bounded = bound_explain(result, budget)
        return tool_result(bounded, render_explain(bounded), budget)

    @server.tool(
        title="Update, link or forget a memory",
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=True,
            idempotent_hint=False,
            open_world_hint=False,
        ),
    )
    @_tool_errors
    async def memory_update(
        ctx: Context,
        memory_id: MemoryId,
        content: str | None = None,
        title: str | None = None,
        importance: Annotated[
            str | float | None, Field(description="CRITICAL, HIGH, MEDIUM, LOW, TRIVIAL or 0–10.")
        ] = None,
        tags: list[str] | None = None,
        status: Annotated[
            Literal["open", "done", "dropped"] | None, Field(description="Todos only.")
        ] = None,
        links: list[Link] | None = None,
        valid_to: Annotated[
            datetime | None, Field(description="Mark the fact as no longer true from then.")
        ] = None,
        forget: Annotated[
            bool, Field(description="Archive it: kept, but no longer recalled.")
        ] = False,
    ) -> Annotated[CallToolResult, UpdateResult]:
        """Correct, re-rate, link or archive one of your memories (8-char id prefixes work).

        Use forget=true for something wrong or obsolete; prefer a new memory linked with
        refines when a fact changed and the old one is history.
        """
        memory = await _memory()
        result = await memory.update(
            memory_id,
            content=content,
            title=title,
            importance=importance,
            tags=tags,
            status=status,
            links=[link.model_dump(exclude_none=True) for link in links] if links else None,
            valid_to=valid_to,
            forget=forget,
        )
        uris = [memory_uri(result.id), "memory://stats"]
        if result.archived:
            uris.append("memory://archived")
        if status is not None:
            uris.append("memory://todos")
        await subscribers.publish(ctx, *uris)
        return tool_result(result, render_update(result), budget)

    @server.tool(
        title="Todos",
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=False,
        ),
    )
    @_tool_errors
    async def todo(
        ctx: Context,
        action: Annotated[
            Literal["add", "list", "done", "drop", "reopen"],
            Field(description="add a todo, list them, or close/reopen one by id."),
        ],
        content: Annotated[str | None, Field(description="For add: what you committed to.")] = None,
        todo_id: Annotated[
            str | None, Field(description="For done/drop/reopen: the todo's id (8 chars).")
        ] = None,
        title: str = "",
        importance: Importance = "MEDIUM",
        include_closed: Annotated[
            bool, Field(description="For list: show done and dropped todos too.")
        ] = False,
    ) -> Annotated[CallToolResult, TodoReply]:
        """Keep track of commitments: add, list (open first), done, drop, reopen.

        Open todos are never pruned and are shown at session start.
        """
        memory = await _memory()
        reply = TodoReply(action=action)
        if action == "add":
            if not content:
                raise InvalidInput("content", "is required to add a todo.", "Say what to do.")
            added = await memory.author(content, type="todo", title=title, importance=importance)
            reply.id, reply.outcome, reply.reminders = added.id, added.status, added.reminders
        elif action != "list":
            if not todo_id:
                raise InvalidInput("todo_id", f"is required to {action} a todo.", "Pass its id.")
            target = {"done": "done", "drop": "dropped", "reopen": "open"}[action]
            view = await memory.get(todo_id)
            if view.type is not MemoryType.todo:
                raise InvalidInput(
                    "todo_id",
                    f"{view.id[:8]} is a {view.type.value}, not a todo.",
                    "Pass the id of a todo (todo action=list shows them).",
                )
            changed = await memory.update(view.id, status=target)
            reply.id, reply.outcome, reply.reminders = changed.id, target, changed.reminders
        todos = await _todos(memory, include_closed)
        reply.open_count = sum(1 for t in todos if t.status == "open")
        shown = bound_items(todos, approx_tokens(reply.model_dump_json()), budget)
        reply.todos, reply.omitted = todos[:shown], len(todos) - shown
        if action != "list":
            await subscribers.publish(
                ctx, "memory://todos", "memory://stats", memory_uri(reply.id or "")
            )
        return tool_result(reply, _render_todos(reply), budget)

    @server.tool(
        title="Intents (prospective memory)",
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=True,
            idempotent_hint=False,
            open_world_hint=False,
        ),
    )
    @_tool_errors
    async def intent(
        ctx: Context,
        action: Annotated[
            Literal["add", "list", "check", "cancel"],
            Field(description="add an intent, list armed ones, check which are due, cancel one."),
        ],
        content: Annotated[
            str | None, Field(description="For add: what to do when it fires.")
        ] = None,
        fire_at: Annotated[
            datetime | None, Field(description="For add: fire once this time has passed.")
        ] = None,
        cue: Annotated[
            str | None, Field(description="For add: fire when these words come up later.")
        ] = None,
        every_hours: Annotated[
            float | None, Field(gt=0, description="Re-arm after firing.")
        ] = None,
        intent_id: Annotated[str | None, Field(description="For cancel: the intent's id.")] = None,
        importance: Importance = "MEDIUM",
    ) -> Annotated[CallToolResult, IntentReply]:
        """Remember to do something later: when a time passes or when a cue comes up.

        Fired intents come back in the reminders field of later results.
        """
        memory = await _memory()
        reply = IntentReply(action=action)
        if action == "add":
            if not content:
                raise InvalidInput("content", "is required to add an intent.", "Say what to do.")
            trigger = TriggerArg(fire_at=fire_at, cue=cue, every_hours=every_hours)
            if trigger.fire_at is None and not (trigger.cue or "").strip():
                raise InvalidInput(
                    "fire_at",
                    "an intent needs fire_at, cue or both.",
                    "Pass fire_at (ISO 8601) and/or cue (words to watch for).",
                )
            added = await memory.author(
                content,
                type="intent",
                importance=importance,
                trigger=trigger.model_dump(exclude_none=True),
            )
            reply.id, reply.outcome, reply.reminders = added.id, added.status, added.reminders
        elif action == "cancel":
            if not intent_id:
                raise InvalidInput("intent_id", "is required to cancel an intent.", "Pass its id.")
            view = await memory.get(intent_id)
            if view.type is not MemoryType.intent:
                raise InvalidInput(
                    "intent_id",
                    f"{view.id[:8]} is a {view.type.value}, not an intent.",
                    "Pass the id of an intent (intent action=list shows them).",
                )
            cancelled = await memory.forget(view.id, reason="cancelled")
            reply.id, reply.outcome, reply.reminders = (
                cancelled.id,
                "cancelled",
                cancelled.reminders,
            )
        at = now()
        rows = await memory.list_memories(limit=TODO_LIST_LIMIT, type="intent")
        items = [_intent_item(v, at) for _, v in rows]
        if action == "check":
            items = [i for i in items if i.due]
            reply.note = (
                "Time-triggered intents whose time has passed. Cue triggers fire from recall "
                "and author results, in their reminders field."
            )
        shown = bound_items(items, approx_tokens(reply.model_dump_json()), budget)
        reply.intents, reply.omitted = items[:shown], len(items) - shown
        if action in ("add", "cancel"):
            await subscribers.publish(ctx, memory_uri(reply.id or ""), "memory://stats")
        return tool_result(reply, _render_intents(reply), budget)

    register_reflect_tool(server, budget)


def register_reflect_tool(server: MCPServer, budget: int) -> None:
    """Hook for `memory_reflect` (SPEC §8, §12): registered once the facade can reflect.

    Reflection (nooa_mcp/reflection.py, `Memory.reflect`) is built in its own issue; until the
    facade has it there is no tool, rather than one that pretends.
    """
    if not hasattr(Memory, "reflect"):
        return
    raise NotImplementedError("Memory.reflect exists now: wire memory_reflect here")


def _render_todos(reply: TodoReply) -> str:
    lines = []
    if reply.id:
        lines.append(f"{reply.action}: {reply.id[:8]} → {reply.outcome}.")
    lines.append(
        _listing(
            f"{reply.open_count} open todo(s):",
            [
                f"- [{t.id8}] [{t.status}] {t.importance_label} {t.title or t.content}"
                for t in reply.todos
            ],
            "No todos.",
        )
    )
    if reply.omitted:
        lines.append(f"{reply.omitted} more not shown; read memory://todos for all of them.")
    lines += render_reminders(reply.reminders)
    return "\n".join(lines)


def _render_intents(reply: IntentReply) -> str:
    lines = []
    if reply.id:
        lines.append(f"{reply.action}: {reply.id[:8]} → {reply.outcome}.")
    rows = []
    for i in reply.intents:
        trig = i.trigger or {}
        when = ", ".join(f"{k} {v}" for k, v in trig.items() if k in ("fire_at", "cue") and v)
        rows.append(f"- [{i.id8}]{' DUE' if i.due else ''} {i.content} ({when})")
    title = "Due intents:" if reply.action == "check" else "Armed intents:"
    lines.append(_listing(title, rows, "None."))
    if reply.omitted:
        lines.append(f"{reply.omitted} more not shown.")
    if reply.note:
        lines.append(reply.note)
    lines += render_reminders(reply.reminders)
    return "\n".join(lines)


def _listing(title: str, rows: list[str], empty: str) -> str:
    return "\n".join([title, *(rows or [empty])])


# --------------------------------------------------------------------------- resources

_JSON = "application/json"


def _register_resources(server: MCPServer, budget: int) -> None:
    @server.resource("memory://memories/{memory_id}{?offset}", name="memory", mime_type=_JSON)
    @_resource_errors
    async def memory_record(memory_id: str, offset: str = "") -> str:
        """One memory with every field, its edges and retention; long content comes in parts."""
        view = await (await _memory()).get(memory_id)
        return bound_view(view, budget, _offset(offset, len(view.content))).model_dump_json(
            indent=1
        )

    @server.resource(
        "memory://memories/{memory_id}/access-log{?cursor,limit}",
        name="memory-access-log",
        mime_type=_JSON,
    )
    @_resource_errors
    async def memory_access_log(memory_id: str, cursor: str = "", limit: str = "") -> str:
        """Every access to one memory from the stream, newest first, a page at a time."""
        memory = await _memory()
        view = await memory.get(memory_id)
        size = _limit(limit)
        rows = await memory.access_log(view.id, limit=size, before=_cursor(cursor))
        items = [r.model_dump(mode="json") for _, r in rows]
        nxt = str(rows[-1][0]) if len(rows) == size else None
        return _page(items, nxt, f"{memory_uri(view.id)}/access-log")

    async def archived_page(cursor: str = "", limit: str = "") -> str:
        """Archived (forgotten, merged or cancelled) memories, a page at a time."""
        size = _limit(limit)
        rows = await (await _memory()).list_memories(
            archived=True, limit=size, after=_cursor(cursor)
        )
        nxt = str(rows[-1][0]) if len(rows) == size else None
        return _page([_summary(v) for _, v in rows], nxt, "memory://archived")

    _paged(server, "memory://archived", "archived", archived_page)

    @server.resource("memory://archived/{memory_id}", name="archived-memory", mime_type=_JSON)
    @_resource_errors
    async def archived_record(memory_id: str) -> str:
        """One archived memory, with the reason and date it was archived in its history."""
        view = await (await _memory()).get(memory_id)
        if not view.archived:
            raise NotFound(memory_id, field="memory_id", what="archived memory")
        return bound_view(view, budget).model_dump_json(indent=1)

    async def recent_page(cursor: str = "", limit: str = "") -> str:
        """The newest accesses across the store (the stream), a page at a time."""
        size = _limit(limit)
        rows = await (await _memory()).recent_accesses(limit=size, before=_cursor(cursor))
        items = [{"memory_id": mid, **r.model_dump(mode="json")} for _, mid, r in rows]
        nxt = str(rows[-1][0]) if len(rows) == size else None
        return _page(items, nxt, "memory://access-log")

    _paged(server, "memory://access-log", "access-log", recent_page)

    async def todos_page(cursor: str = "", limit: str = "") -> str:
        """Your todos with their status, a page at a time."""
        size = _limit(limit)
        rows = await (await _memory()).list_memories(limit=size, after=_cursor(cursor), type="todo")
        nxt = str(rows[-1][0]) if len(rows) == size else None
        return _page([_summary(v) for _, v in rows], nxt, "memory://todos")

    _paged(server, "memory://todos", "todos", todos_page)

    @server.resource("memory://stats", name="stats", mime_type=_JSON)
    @_resource_errors
    async def stats() -> str:
        """Counts by type and owner, edges, accesses and KPIs of the store."""
        return (await (await _memory()).stats()).model_dump_json(indent=1)

    @server.resource("memory://context", name="context", mime_type="text/markdown")
    @_resource_errors
    async def context_block() -> str:
        """The block a harness injects at session start. Reading it is logged as `injected`."""
        return await (await _memory()).context(limit=10)


def _paged(
    server: MCPServer, base: str, name: str, page: Callable[[str, str], Awaitable[str]]
) -> None:
    """Register a listing twice: `base` (first page, listed) and `base{?cursor,limit}`."""

    async def first_page() -> str:
        return await page("", "")

    description = page.__doc__ or ""
    server.resource(base, name=name, mime_type=_JSON, description=description)(
        _resource_errors(first_page)
    )
    server.resource(
        base + "{?cursor,limit}", name=f"{name}-page", mime_type=_JSON, description=description
    )(_resource_errors(page))


# --------------------------------------------------------------------------- prompts


def _register_prompts(server: MCPServer) -> None:
    guide = load_prompt("memory_guide")
    start = load_prompt("session_start")
    reflect = load_prompt("reflect")

    @server.prompt(
        name="memory_guide", title="How to use your memory", description=guide.description
    )
    def memory_guide() -> str:
        return guide.body.safe_substitute()

    @server.prompt(
        name="session_start", title="Start a session with memory", description=start.description
    )
    @_resource_errors
    async def session_start() -> str:
        memory = await _memory()
        context = await memory.context(limit=10)
        todos = await _todos(memory, include_closed=False)
        at = now()
        intents = [
            _intent_item(v, at)
            for _, v in await memory.list_memories(limit=TODO_LIST_LIMIT, type="intent")
        ]
        return start.body.safe_substitute(
            context=context.strip() or "Nothing stored yet.",
            todos=_bullets(
                [f"- [{t.id8}] {t.importance_label} {t.title or t.content}" for t in todos],
                "No open todos.",
            ),
            intents=_bullets(
                [f"- [{i.id8}] {i.content}" for i in intents if i.due], "No intents are due."
            ),
        )

    @server.prompt(name="reflect", title="Reflect on recent work", description=reflect.description)
    @_resource_errors
    async def reflect_prompt() -> str:
        memory = await _memory()
        stats = await memory.stats()
        episodes = await memory.list_memories(limit=20, type="episode")
        return reflect.body.safe_substitute(
            total=stats.total,
            active=stats.active,
            archived=stats.archived,
            episodes=_bullets(
                [
                    f"- [{e.id[:8]}] {e.created_at:%Y-%m-%d} {head(e.content, 300)}"
                    for _, e in episodes
                ],
                "No episodes are stored yet: author one after each task (type=episode).",
            ),
            reflect_hint="",
        )


# --------------------------------------------------------------------------- running


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(
    settings: Settings,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    tokens_file: Path | None = None,
) -> None:
    """Serve nooa-mcp until the client disconnects (stdio) or the process is stopped (http).

    Raises:
        InvalidInput: unknown transport, a bad tokens file, or a non-loopback host without tokens.
    """
    if transport == "stdio":
        anyio.run(build_server(settings).run_stdio_async)
        return
    if transport != "http":
        raise InvalidInput("transport", f"'{transport}' is not a transport.", "Use stdio or http.")
    tokens = load_tokens(tokens_file) if tokens_file is not None else None
    if tokens is None and not _is_loopback(host):
        raise InvalidInput(
            "host",
            f"{host} is reachable from other machines and no tokens file is configured.",
            "Pass --tokens FILE (token → owner), or serve on 127.0.0.1.",
        )
    shown = f"[{host}]" if ":" in host else host
    server = build_server(settings, tokens=tokens, http_url=f"http://{shown}:{port}")
    anyio.run(functools.partial(server.run_streamable_http_async, host=host, port=port))
