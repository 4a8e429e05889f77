"""The MCP resources: memories, access logs, archive, todos, stats and context (DESIGN.md §13.2).

Listings are JSON pages: read the base URI for the first page, then `next_uri` (the base with
`?cursor=`) for the next; `limit` sets the page size. A long memory is read in parts with
`?offset=`, as its clip marker says.
"""

from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

from ..cursors import CURSORS
from ..domain.replies import MemoryView
from ..domain.schema import TODO_STATUSES
from ..domain.text import head
from ..errors import InvalidInput, NotFound
from .handlers import current_memory, resource_errors
from .rendering import (
    bound_view,
    memory_uri,
)

__all__ = ["Page", "register_resources"]

PAGE_SIZE = 50


class Page(BaseModel):
    """One page of a listing resource; pass `next_cursor` (or read `next_uri`) for the next."""

    items: list[dict[str, Any]]
    next_cursor: str | None = None
    next_uri: str | None = None


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


#: The todo listing's base URI (its cursors are `<status>.<seq>` behind the token).
TODOS = "memory://todos"


def _page(items: list[dict[str, Any]], position: str | None, base_uri: str, owner: str) -> str:
    """One page; `position` (where the next page starts) goes out as an opaque cursor, good
    for `owner` only: the store's sequence numbers count every role's rows
    (`nooa_mcp.cursors`)."""
    next_cursor = None if position is None else CURSORS.issue(owner, base_uri, position)
    next_uri = f"{base_uri}?cursor={next_cursor}" if next_cursor else None
    return Page(items=items, next_cursor=next_cursor, next_uri=next_uri).model_dump_json(indent=1)


def _position(cursor: str, listing: str, owner: str) -> str | None:
    """The position a cursor this server gave `owner` for `listing` (its base URI) stands
    for; None for no cursor (the first page)."""
    return CURSORS.resume(
        owner,
        listing,
        cursor,
        "cursor",
        "Pass next_cursor from the previous page, or leave it out for the first page.",
    )


def _cursor(cursor: str, listing: str, owner: str) -> int | None:
    """The stream or insertion sequence number a listing's cursor stands for."""
    position = _position(cursor, listing, owner)
    return None if position is None else int(position)


def _todo_cursor(cursor: str, owner: str) -> tuple[str, int | None]:
    """A todo listing's cursor: the status it was listing and the last sequence number seen."""
    position = _position(cursor, TODOS, owner)
    if position is None:
        return "open", None
    status, _, seq = position.partition(".")
    return status, int(seq)


def _offset(offset: str, length: int) -> int:
    if not offset:
        return 0
    if not (offset.isascii() and offset.isdigit()) or int(offset) > length:
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


# --------------------------------------------------------------------------- resources

_JSON = "application/json"


def register_resources(server: MCPServer, budget: int) -> None:
    @server.resource("memory://memories/{memory_id}{?offset}", name="memory", mime_type=_JSON)
    @resource_errors
    async def memory_record(memory_id: str, offset: str = "") -> str:
        """One memory with every field, its edges and retention; long content comes in parts."""
        # Everything the connection may read ("*" is its server-side grants, never wider): a
        # recall with a granted role's scope lists ids that must open here too.
        view = await (await current_memory()).get(memory_id, scope="*")
        return bound_view(view, budget, _offset(offset, len(view.content))).model_dump_json(
            indent=1
        )

    @server.resource(
        "memory://memories/{memory_id}/access-log{?cursor,limit}",
        name="memory-access-log",
        mime_type=_JSON,
    )
    @resource_errors
    async def memory_access_log(memory_id: str, cursor: str = "", limit: str = "") -> str:
        """Every access to one memory from the stream, newest first, a page at a time."""
        memory = await current_memory()
        view = await memory.get(memory_id, scope="*")  # as the record itself, above
        size = _limit(limit)
        log = f"{memory_uri(view.id)}/access-log"
        before = _cursor(cursor, log, memory.owner)
        rows = await memory.access_log(view.id, limit=size, before=before, scope="*")
        items = [r.model_dump(mode="json") for _, r in rows]
        nxt = str(rows[-1][0]) if len(rows) == size else None
        return _page(items, nxt, log, memory.owner)

    async def archived_page(cursor: str = "", limit: str = "") -> str:
        """Archived (forgotten, merged or cancelled) memories, a page at a time."""
        size = _limit(limit)
        memory = await current_memory()
        rows = await memory.list_memories(
            archived=True, limit=size, after=_cursor(cursor, "memory://archived", memory.owner)
        )
        nxt = str(rows[-1][0]) if len(rows) == size else None
        return _page([_summary(v) for _, v in rows], nxt, "memory://archived", memory.owner)

    _paged(server, "memory://archived", "archived", archived_page)

    @server.resource("memory://archived/{memory_id}", name="archived-memory", mime_type=_JSON)
    @resource_errors
    async def archived_record(memory_id: str) -> str:
        """One archived memory, with the reason and date it was archived in its history."""
        view = await (await current_memory()).get(memory_id)
        if not view.archived:
            raise NotFound(memory_id, field="memory_id", what="archived memory")
        return bound_view(view, budget).model_dump_json(indent=1)

    async def recent_page(cursor: str = "", limit: str = "") -> str:
        """The newest accesses across the store (the stream), a page at a time."""
        size = _limit(limit)
        memory = await current_memory()
        before = _cursor(cursor, "memory://access-log", memory.owner)
        rows = await memory.recent_accesses(limit=size, before=before)
        items = [{"memory_id": mid, **r.model_dump(mode="json")} for _, mid, r in rows]
        nxt = str(rows[-1][0]) if len(rows) == size else None
        return _page(items, nxt, "memory://access-log", memory.owner)

    _paged(server, "memory://access-log", "access-log", recent_page)

    async def todos_page(cursor: str = "", limit: str = "") -> str:
        """Your todos with their status, open ones first, a page at a time."""
        size = _limit(limit)
        memory = await current_memory()
        phase, after = _todo_cursor(cursor, memory.owner)
        items: list[dict[str, Any]] = []
        nxt = None
        # Open todos first, then done, then dropped: one status after the other, each in
        # insertion order, so the cursor is the status and the last sequence number seen.
        for status in TODO_STATUSES[TODO_STATUSES.index(phase) :]:
            rows = await memory.list_memories(
                limit=size - len(items), after=after, type="todo", status=status
            )
            items += [_summary(v) for _, v in rows]
            after = None
            if len(items) == size:
                nxt = f"{status}.{rows[-1][0]}"
                break
        return _page(items, nxt, TODOS, memory.owner)

    _paged(server, "memory://todos", "todos", todos_page)

    @server.resource("memory://stats", name="stats", mime_type=_JSON)
    @resource_errors
    async def stats() -> str:
        """Counts by type and owner, edges, accesses and KPIs of the store."""
        return (await (await current_memory()).stats()).model_dump_json(indent=1)

    @server.resource(
        "memory://context",
        name="context",
        mime_type="text/markdown",
        # Given, not the docstring: a docstring's lines keep their indentation, and the
        # client showed the description with it.
        description=(
            "The block a harness injects at session start, without firing intents (a client "
            "may read this on its own; the session_start prompt delivers them). Reading it is "
            "logged as `injected`."
        ),
    )
    @resource_errors
    async def context_block() -> str:
        """The block a harness injects at session start (the description above)."""
        return await (await current_memory()).context()


def _paged(
    server: MCPServer, base: str, name: str, page: Callable[[str, str], Awaitable[str]]
) -> None:
    """Register a listing twice: `base` (first page, listed) and `base{?cursor,limit}`."""

    async def first_page() -> str:
        return await page("", "")

    description = page.__doc__ or ""
    server.resource(base, name=name, mime_type=_JSON, description=description)(
        resource_errors(first_page)
    )
    server.resource(
        base + "{?cursor,limit}", name=f"{name}-page", mime_type=_JSON, description=description
    )(resource_errors(page))
