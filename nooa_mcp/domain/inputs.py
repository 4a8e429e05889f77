"""Validation of what callers pass in: author requests, recall arguments, triggers (DESIGN.md §4.1).

Pure. Every rule a tool argument must pass lives here once, so the facade, the CLI and the MCP
tools refuse the same things with the same sentence: the field, what is wrong, and the fix.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import InvalidInput
from .cues import cue_keywords
from .references import parse_references
from .requests import AuthorRequest
from .schema import (
    CONFIDENCE,
    IMPORTANCE,
    MEMORY_TYPES,
    SALIENCE,
    TODO_STATUSES,
    Memory,
    MemoryType,
    TodoStatus,
    Trigger,
    as_utc,
    clean_labels,
    new_id,
    normalise_id,
    now as utc_now,
    refuse_unstorable,
)
from .text import a_or_an, choices

__all__ = [
    "MAX_CONTENT",
    "MAX_QUERY",
    "build_memory",
    "check_content",
    "check_short_text",
    "check_situation",
    "parse_memory_type",
    "parse_status",
    "parse_trigger",
    "parse_types",
    "recall_args",
    "refuse_foreign",
    "refuse_silent_cue",
]

MAX_CONTENT = 100_000
MAX_QUERY = 2_000
#: A title or a place/task is a label shown beside every hit, not a second content field.
MAX_SHORT_TEXT = 500


def parse_memory_type(value: Any, field: str = "type") -> MemoryType:
    try:
        return MemoryType(str(value).strip().lower())
    except ValueError:
        raise InvalidInput(
            field, f"{value!r} is not a memory type.", f"Use one of {', '.join(MEMORY_TYPES)}."
        ) from None


def parse_status(value: Any, field: str = "status", allowed: tuple[str, ...] = TODO_STATUSES):
    """A todo status (or a listing filter when `allowed` includes "all").

    Raises:
        InvalidInput: not one of `allowed`.
    """
    if value not in allowed:
        raise InvalidInput(field, f"{value!r} is not a status.", f"Use {choices(allowed)}.")
    return value


def refuse_foreign(action: str, given: dict[str, Any], belongs: dict[str, tuple[str, ...]]) -> None:
    """Refuse an argument given to an action it does not belong to (`belongs`: each argument
    with the actions that read it; None means not given). A model that passes memory_id to
    `todo add` believes the todo is tied to that memory; silently ignored, it never learns.

    Raises:
        InvalidInput: naming the first such argument and the actions that take it.
    """
    for name, value in given.items():
        if value is not None and action not in belongs[name]:
            raise InvalidInput(
                name,
                f"is not used by {action}.",
                f"Leave it out (it is for {choices(belongs[name])}).",
            )


#: Lines holding only spaces or tabs at the start of a text.
_LEADING_BLANK_LINES = re.compile(r"\A(?:[ \t]*\r?\n)+")


def check_content(content: Any, *, required_fix: str = "Pass the text to remember.") -> str:
    """Content as stored: non-empty text without NUL, at most MAX_CONTENT characters.

    Raises:
        InvalidInput: empty, too long or holding a NUL byte.
    """
    if not isinstance(content, str) or not content.strip():
        raise InvalidInput("content", "is empty.", required_fix)
    if len(content) > MAX_CONTENT:
        raise InvalidInput(
            "content",
            f"is {len(content)} characters; the limit is {MAX_CONTENT}.",
            "Split it, or store a file: reference instead.",
        )
    # Blank lines before the text and whitespace after it go (a file piped in ends with a
    # newline); the first line's indentation stays, or code loses its shape.
    return _LEADING_BLANK_LINES.sub("", refuse_unstorable(content, "content").rstrip())


def check_short_text(value: Any, field: str) -> str:
    """A title or place/task as stored: text of at most MAX_SHORT_TEXT characters, one line.

    Raises:
        InvalidInput: not text, too long or holding a NUL byte.
    """
    if not isinstance(value, str) or len(value) > MAX_SHORT_TEXT:
        raise InvalidInput(
            field, f"must be text of at most {MAX_SHORT_TEXT} characters.", "Shorten it."
        )
    return " ".join(refuse_unstorable(value, field).split())


def check_situation(text: Any, field: str = "text") -> str | None:
    """The text of an intent check (what is going on now): text without NUL, or None.

    Raises:
        InvalidInput: not text, or holding a NUL byte.
    """
    if text is None:
        return None
    if not isinstance(text, str):
        raise InvalidInput(field, "must be text.", "Pass what is happening now.")
    return refuse_unstorable(text, field) or None


#: How to give an intent its trigger, in the words of the tool arguments (fire_at, cue).
TRIGGER_FIX = (
    "Pass fire_at (an ISO 8601 time after which it fires), cue (words that fire it when they "
    "come up later) or both."
)


def parse_trigger(value: Any) -> Trigger:
    """An intent's trigger from `{fire_at?, cue?, every_hours?}`.

    Raises:
        InvalidInput: not an object, a bad time or cue, or neither fire_at nor cue.
    """
    if isinstance(value, Trigger):
        return value
    if not isinstance(value, dict):
        raise InvalidInput(
            "trigger",
            f"{value!r} is not a trigger.",
            f"{TRIGGER_FIX} every_hours re-arms it.",
        )
    fire_at = as_utc(value.get("fire_at"), "trigger.fire_at")
    cue = value.get("cue")
    if cue is not None and (not isinstance(cue, str) or len(cue) > 500):
        raise InvalidInput("trigger.cue", "must be text under 500 characters.", "Shorten it.")
    if cue is not None:
        refuse_unstorable(cue, "trigger.cue")
    every = value.get("every_hours")
    if every is not None and (
        isinstance(every, bool) or not isinstance(every, int | float) or not 0 < every <= 24 * 366
    ):
        raise InvalidInput(
            "trigger.every_hours",
            f"{every!r} is not a positive number of hours.",
            "Pass e.g. 24 for daily.",
        )
    if fire_at is None and not (cue or "").strip():
        raise InvalidInput("trigger", "an intent needs a time or a cue to fire.", TRIGGER_FIX)
    return Trigger(fire_at=fire_at, cue=cue, every_hours=every)


def refuse_silent_cue(cue: Any, field: str = "trigger.cue") -> None:
    """Refuse a cue of stop words alone: matching takes a cue's content words, so it never fires.

    Not part of `parse_trigger`: an import restores what an earlier release accepted, and one
    such line must not refuse the whole file; a new write (the author and intent tools) calls it.

    Raises:
        InvalidInput: the cue holds only stop words (`field` names it).
    """
    if isinstance(cue, str) and cue.strip() and not cue_keywords(cue):
        raise InvalidInput(
            field,
            f"{cue!r} holds only words every conversation says, so it would never fire.",
            "Give the two or three words that will surely be said when it is time.",
        )


def build_memory(request: AuthorRequest, owner: str) -> Memory:
    """Validate one author request into a record for `owner` (no I/O).

    Raises:
        InvalidInput: a field is malformed; the message names it and the fix.
    """
    content = check_content(request.content)
    kind = parse_memory_type(request.type or "info")
    status = request.status
    if status is not None and kind is not MemoryType.todo:
        raise InvalidInput(
            "status",
            f"only todos have a status; this is {a_or_an(kind.value)}.",
            "Leave status out, or use type=todo.",
        )
    todo_status: TodoStatus | None = None if status is None else parse_status(status)
    trigger = request.trigger
    if trigger is not None:
        if kind is not MemoryType.intent:
            raise InvalidInput(
                "trigger",
                f"only intents have a trigger; this is {a_or_an(kind.value)}.",
                "Use type=intent.",
            )
        trigger = parse_trigger(trigger)
    elif kind is MemoryType.intent:
        # An intent without a trigger can never fire and no listing shows it: refuse it.
        raise InvalidInput("trigger", "an intent needs a time or a cue to fire.", TRIGGER_FIX)
    title = check_short_text(request.title or "", "title")
    # `created_at` is when it happened (a date the user gives, as an import's); the store
    # learns it now, and decay counts from that (`last_accessed_at` and the created access).
    # A date in the future (a skewed clock) is taken as now.
    now = utc_now()
    created = min(as_utc(request.created_at, "created_at") or now, now)
    valid_from = as_utc(request.valid_from, "valid_from")
    valid_to = as_utc(request.valid_to, "valid_to")
    if valid_from and valid_to and valid_to < valid_from:
        raise InvalidInput("valid_to", "is before valid_from.", "Swap them or drop one.")
    salience = request.salience
    confidence = request.confidence
    place = check_short_text(request.place_or_task or "", "place_or_task")
    ident = request.id
    if ident is not None and (not isinstance(ident, str) or len(normalise_id(ident, "id")) != 32):
        raise InvalidInput(
            "id",
            f"{ident!r} is not a full id.",
            "Leave id out; it is only for imports of exported memories.",
        )
    importance = IMPORTANCE.parse("MEDIUM" if request.importance is None else request.importance)
    memory = Memory(
        id=ident.lower() if ident else new_id(),
        type=kind,
        title=title,
        content=content,
        owner=owner,
        importance=importance,
        authored_importance=importance,
        salience=SALIENCE.parse(salience) if salience is not None else 0.3,
        confidence=CONFIDENCE.parse(confidence) if confidence is not None else 0.75,
        tags=clean_labels(request.tags, "tags"),
        entities=clean_labels(request.entities, "entities"),
        place_or_task=place,
        created_at=created,
        last_accessed_at=now,
        valid_from=valid_from,
        valid_to=valid_to,
        references=parse_references(request.references),
        status=todo_status,
        trigger=trigger,
    )
    given = {"importance": request.importance, "salience": salience, "confidence": confidence}
    memory._unsaid = frozenset(name for name, value in given.items() if value is None)
    return memory


def parse_types(types: Any) -> set[str] | None:
    """A set of memory type names, or None for every type.

    Raises:
        InvalidInput: an unknown type (the types are listed).
    """
    if not types:
        return None
    return {parse_memory_type(t, "types").value for t in types}


def recall_args(query: Any, k: Any, types: Any, hops: Any) -> tuple[str, set[str] | None]:
    """Check a recall's arguments; returns the cleaned query and the type filter.

    Raises:
        InvalidInput: empty query, k outside 1–50, hops outside 0–3, unknown type.
    """
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("query", "is empty.", "Pass the words to look for.")
    refuse_unstorable(query, "query")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 50:
        raise InvalidInput("k", f"{k!r} is not between 1 and 50.", "Pass a small integer.")
    if hops is not None and (
        isinstance(hops, bool) or not isinstance(hops, int) or not 0 <= hops <= 3
    ):
        raise InvalidInput("hops", f"{hops!r} is not between 0 and 3.", "Pass 0, 1, 2 or 3.")
    return query.strip()[:MAX_QUERY], parse_types(types)
