"""What a caller asks of the memory: one typed request per verb, from a front end to a service.

Pure. A front end (an MCP tool, the CLI, the console) builds a request once from its own
arguments; the `Memory` facade hands it on unchanged and the service reads its fields, so the
path of every argument can be followed by a reader and by the type checker. The fields keep
what the caller gave (a label or a number, text or a datetime): `domain.inputs` checks them
and its refusal names the field and the fix (DESIGN.md §4.1).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from ..errors import InvalidInput
from .schema import Link, Trigger

__all__ = [
    "AuthorRequest",
    "ExplainRequest",
    "IntentRequest",
    "RecallRequest",
    "TodoRequest",
    "UpdateRequest",
    "request_of",
]

#: A rating as a caller gives it: a label (HIGH, PIVOTAL, …) or a number.
Rating = str | float
#: A time as a caller gives it: a datetime, or ISO 8601 text.
When = datetime | str
#: A link as a caller gives it: a `Link`, or a `{target, relation, weight?}` object.
LinkSpec = Link | Mapping[str, Any]


@dataclass(frozen=True, kw_only=True)
class AuthorRequest:
    """Remember one memory (DESIGN.md §4). `id`, `created_at` and `status` are an import's."""

    content: str = ""
    type: str = "info"
    title: str = ""
    importance: Rating | None = None  # MEDIUM for a new memory
    salience: Rating | None = None
    confidence: Rating | None = None
    tags: Sequence[str] | None = None
    entities: Sequence[str] | None = None
    place_or_task: str = ""
    references: Sequence[str] | None = None
    links: Sequence[LinkSpec] | None = None
    valid_from: When | None = None
    valid_to: When | None = None
    trigger: Trigger | Mapping[str, Any] | None = None
    revive: bool = False
    id: str | None = None
    created_at: When | None = None
    status: str | None = None


@dataclass(frozen=True, kw_only=True)
class UpdateRequest:
    """Change, link or archive one memory; a field left None is left as it is."""

    memory_id: str
    content: str | None = None
    title: str | None = None
    importance: Rating | None = None
    tags: Sequence[str] | None = None
    status: str | None = None
    links: Sequence[LinkSpec] | None = None
    valid_to: When | None = None
    forget: bool = False


@dataclass(frozen=True, kw_only=True)
class RecallRequest:
    """Rank memories for a query (DESIGN.md §5); `hops=0` searches without spreading."""

    query: str = ""
    k: int = 5
    scope: str = "mine"
    types: Sequence[str] | None = None
    hops: int | None = None
    include_archived: bool = False


@dataclass(frozen=True, kw_only=True)
class ExplainRequest:
    """A dry run for `query`, the access history of `memory_id`, or with both: why (not)."""

    query: str | None = None
    memory_id: str | None = None
    k: int = 10
    hops: int | None = None
    scope: str = "mine"


@dataclass(frozen=True, kw_only=True)
class TodoRequest:
    """Add, list, close (done / drop) or reopen a todo; `status` filters a listing."""

    action: str = "list"
    content: str | None = None
    memory_id: str | None = None
    title: str = ""
    importance: Rating | None = None  # MEDIUM for a new memory
    tags: Sequence[str] | None = None
    status: str = "open"
    limit: int = 50


@dataclass(frozen=True, kw_only=True)
class IntentRequest:
    """Add, list, check or cancel an intent (DESIGN.md §9); `text` is what a check cues on."""

    action: str = "list"
    content: str | None = None
    memory_id: str | None = None
    fire_at: When | None = None
    cue: str | None = None
    every_hours: float | None = None
    text: str | None = None
    importance: Rating | None = None  # MEDIUM for a new memory


R = TypeVar("R")


def request_of(kind: type[R], given: object = None, /, **fields: Any) -> R:
    """A request of `kind` from `given` (a request of that kind, or a mapping: a JSON object, an
    export line) with `fields` laid over it.

    Raises:
        InvalidInput: a field the request does not have (the message lists those it has).
    """
    names = [f.name for f in dataclasses.fields(kind)]  # type: ignore[arg-type]
    if isinstance(given, kind):
        values = {name: getattr(given, name) for name in names}
    elif isinstance(given, Mapping):
        values = dict(given)
    elif given is None:
        values = {}
    else:
        raise InvalidInput(
            "request", f"{given!r} is not an object.", f"Pass an object with {', '.join(names)}."
        )
    values.update(fields)
    unknown = sorted(set(values) - set(names))
    if unknown:
        verb = kind.__name__.removesuffix("Request").lower()
        raise InvalidInput(unknown[0], f"is not a field of {verb}.", f"Use {', '.join(names)}.")
    return kind(**values)
