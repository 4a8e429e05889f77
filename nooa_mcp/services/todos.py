"""Todos: commitments with a lifecycle, open ones protected from pruning (DESIGN.md §9.1)."""

from __future__ import annotations

from ..domain.inputs import parse_status, refuse_foreign
from ..domain.replies import Reminder, TodoItem, TodoResult
from ..domain.requests import AuthorRequest, TodoRequest, UpdateRequest
from ..domain.schema import IMPORTANCE, TODO_ACTIONS, TODO_STATUSES, now as utc_now
from ..domain.text import a_or_an, choices, head
from ..errors import InvalidInput
from . import reminders
from .authoring import author_many
from .caller import Caller
from .editing import update
from .views import get

__all__ = ["todo"]

_CLOSE = {"done": "done", "drop": "dropped", "reopen": "open"}
#: What each closing action does, as a refusal tells it ("Pass the id of the todo to done."
#: read as a typo).
_DOES = {"done": "mark done", "drop": "drop", "reopen": "reopen"}


async def todo(caller: Caller, request: TodoRequest, *, remind: bool = True) -> TodoResult:
    """Add, list, close (done / drop) or reopen a todo; open todos are protected from pruning.

    `list` shows open todos first, then by importance, then oldest first; `status` filters
    it (open, done, dropped or all). Every action returns the open todos and any reminders.
    `remind=False` fires no intent (a person browsing must not consume the reminders an agent
    is waiting for); an added todo's content still cues intents, as any authored content does.

    Raises:
        InvalidInput: unknown action, missing content or id, or the id is not a todo.
        NotFound: the id does not name a visible memory.
    """
    action, content, memory_id = request.action, request.content, request.memory_id
    status, limit = request.status, request.limit
    if action not in TODO_ACTIONS:
        raise InvalidInput(
            "action", f"{action!r} is not a todo action.", f"Use {choices(TODO_ACTIONS)}."
        )
    refuse_foreign(
        action,
        {"content": content, "memory_id": memory_id},
        {"content": ("add",), "memory_id": tuple(_CLOSE)},
    )
    fired: list[Reminder] = []
    result = TodoResult(action=action)  # type: ignore[arg-type]
    if action == "add":
        if not isinstance(content, str) or not content.strip():
            raise InvalidInput("content", "is empty.", "Say what needs doing.")
        todo = AuthorRequest(
            content=content,
            type="todo",
            title=request.title,
            importance=request.importance,
            tags=request.tags,
        )
        written = (await author_many(caller, [todo]))[0]
        result.id, result.outcome, result.status = written.id, written.status, "open"
        fired += written.reminders
        result.reminders_more = written.reminders_more
    elif action in _CLOSE:
        if not memory_id:
            raise InvalidInput(
                "memory_id",
                "is missing.",
                f"Pass the id of the todo to {_DOES[action]} (action=list shows the ids).",
            )
        # A granted role's todo is read-only, said as such (recall shows it); an unreadable
        # id stays plainly not found.
        target = await caller.resolve_writable(memory_id, action=_DOES[action])
        found = await get(caller, target)
        if found.type.value != "todo":
            raise InvalidInput(
                "memory_id",
                f"{found.id[:8]} is {a_or_an(found.type.value)}, not a todo.",
                "List todos to find the id.",
            )
        if found.archived and not found.flags.faded:
            # Its status would change while it stays out of every list: say so instead.
            raise InvalidInput(
                "memory_id",
                f"{found.id[:8]} was forgotten, so it is not changed.",
                "Restore it with memory_author (type todo, the same content, revive=true), "
                "or add a new todo.",
            )
        new = _CLOSE[action]
        updated = await update(caller, UpdateRequest(memory_id=found.id, status=new))
        result.id, result.status = found.id, new
        result.outcome = new if "status" in updated.changed else f"already {new}"
    else:
        parse_status(status, allowed=(*TODO_STATUSES, "all"))
    if action != "add" and remind:
        due = (await reminders.fire(caller))[0]
        fired += due.reminders
        result.reminders_more = due.more
    wanted = status if action == "list" else "open"
    if action == "list":
        result.status = wanted
    result.todos = await _items(caller, None if wanted == "all" else wanted, limit)
    result.open_count = await caller.store.count_memories(
        caller.actor.own, type="todo", status="open"
    )
    result.reminders = fired
    return result


async def _items(caller: Caller, status: str | None, limit: int) -> list[TodoItem]:
    memories = await caller.store.todo_rows(caller.actor.own, status, max(1, min(limit, 500)))
    now = utc_now()
    return [
        TodoItem(
            id=m.id,
            id8=m.id[:8],
            title=m.title,
            content=head(m.content, 300),
            status=m.status or "open",
            importance=m.importance,
            importance_label=IMPORTANCE.label(m.importance),
            created_at=m.created_at,
            age_hours=round(max((now - m.created_at).total_seconds(), 0.0) / 3600, 1),
            shared=not caller.may_write(m.owner),
        )
        for m in memories
    ]
