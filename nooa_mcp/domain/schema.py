"""Types of the NOOA memory model: memories, edges, accesses, ladders, owners (DESIGN.md §2, §3).

Pure: no I/O, no async. Everything a tool argument turns into is validated here, so that the
store only ever sees well-formed values and every error names its field.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator
from pydantic_core import PydanticCustomError

from ..errors import InvalidInput
from .facts import normalised_hash
from .forgetting import fading_since, intent_status
from .kinds import (  # the names live in `kinds` (read at start-up without pydantic)
    ACTR_CHANNELS as ACTR_CHANNELS,
    EDGE_TYPES as EDGE_TYPES,
    INTENT_ACTIONS as INTENT_ACTIONS,
    MAINTENANCE_KINDS as MAINTENANCE_KINDS,
    MEMORY_TYPES as MEMORY_TYPES,
    REFLECTION_STEPS as REFLECTION_STEPS,
    SUPERSEDING as SUPERSEDING,
    TODO_ACTIONS as TODO_ACTIONS,
    TODO_STATUSES as TODO_STATUSES,
    TOUCH_CHANNELS as TOUCH_CHANNELS,
    TYPE_WEIGHT as TYPE_WEIGHT,
    Channel as Channel,
    EdgeType as EdgeType,
    MemoryType as MemoryType,
    TodoStatus as TodoStatus,
)
from .text import a_or_an, cut_cjk, sizes

# --------------------------------------------------------------------------- ladders


class Ladder:
    """A verbal scale shown to the model, stored as numbers (DESIGN.md §2.4).

    `parse` accepts a label (any case) or a number inside the range; `label` maps a number to the
    nearest band, ties going upward.
    """

    def __init__(self, field: str, levels: dict[str, float], low: float, high: float) -> None:
        self.field = field
        self.levels = levels
        self.low = low
        self.high = high

    @property
    def names(self) -> str:
        return ", ".join(self.levels)

    def parse(self, value: Any, field: str | None = None) -> float:
        field = field or self.field
        fix = f"Use {self.names} or a number from {self.low:g} to {self.high:g}."
        if isinstance(value, bool):
            raise InvalidInput(field, f"{value!r} is not a level.", fix)
        if isinstance(value, int | float):
            try:
                number = float(value)
            except OverflowError:  # an integer past any float (10**400)
                number = math.inf
        elif isinstance(value, str):
            key = value.strip().upper()
            if key in self.levels:
                return float(self.levels[key])
            try:
                number = float(key)
            except ValueError:
                raise InvalidInput(field, f"{_shown(value)} is not a level.", fix) from None
        else:
            raise InvalidInput(field, f"{value!r} is not a level.", fix)
        if not math.isfinite(number) or not self.low <= number <= self.high:
            raise InvalidInput(
                field, f"{_shown(value)} is outside {self.low:g}–{self.high:g}.", fix
            )
        return number

    def label(self, number: float) -> str:
        best, best_gap = "", math.inf
        for name, level in self.levels.items():
            gap = abs(number - level)
            # Ties go upward: a higher level wins an equal gap.
            if gap < best_gap or (gap == best_gap and level > self.levels[best]):
                best, best_gap = name, gap
        return best


IMPORTANCE = Ladder(
    "importance", {"CRITICAL": 10, "HIGH": 8, "MEDIUM": 5, "LOW": 3, "TRIVIAL": 1}, 0, 10
)
SALIENCE = Ladder("salience", {"PIVOTAL": 1.0, "NOTABLE": 0.5, "ROUTINE": 0.3, "NONE": 0.0}, 0, 1)
CONFIDENCE = Ladder(
    "confidence", {"CERTAIN": 1.0, "CONFIDENT": 0.75, "TENTATIVE": 0.5, "UNCERTAIN": 0.25}, 0, 1
)
EDGE_WEIGHT = Ladder("weight", {"STRONG": 1.0, "MODERATE": 0.6, "WEAK": 0.3}, 0, 1)

# --------------------------------------------------------------------------- ids, hashes, text


def new_id() -> str:
    return uuid.uuid4().hex


def normalise_id(value: str, field: str = "memory_id") -> str:
    """Lower-case an id or prefix and check it is hex."""
    ident = value.strip().lower()
    if not ident or not re.fullmatch(r"[0-9a-f]{1,32}", ident):
        raise InvalidInput(field, f"'{value}' is not a memory id.", "Ids are hex, e.g. '3f9a2c1d'.")
    return ident


def content_hash(content: str) -> str:
    """Hash of content after NFKC, case folding and whitespace collapsing: an exact repeat
    hashes the same (DESIGN.md §4.2)."""
    return normalised_hash(content)


def now() -> datetime:
    return datetime.now(UTC)


def iso_time(text: str) -> datetime | None:
    """`text` as an ISO 8601 date or datetime (a trailing Z for UTC), naive when it names no
    offset; None when it is no such time."""
    try:
        return datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None


def as_utc(value: datetime | str | None, field: str) -> datetime | None:
    """Parse an ISO-8601 date or datetime; naive values are taken as UTC."""
    if value is None or value == "":
        return None
    original = value
    if not isinstance(value, str | datetime):
        raise InvalidInput(
            field, f"{_shown(value)} is not a date.", "Use ISO 8601, e.g. 2026-05-01T09:00:00Z."
        )
    if isinstance(value, str):
        parsed = iso_time(value)
        if parsed is None:
            raise InvalidInput(
                field, f"{_shown(value)} is not a date.", "Use ISO 8601, e.g. 2026-05-01T09:00:00Z."
            )
        value = parsed
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    try:
        utc: datetime | None = value.astimezone(UTC)
    except (OverflowError, ValueError):
        utc = None  # 9999-12-31T23:59-05:00: a valid ISO time past the last day UTC holds
    if utc is None or not EARLIEST <= utc <= LATEST:
        # Stored as epoch seconds (a float): the last day rounds past year 9999, and a
        # store holding such a time could not read its rows back.
        shown = original if isinstance(original, str) else value.isoformat()
        raise InvalidInput(
            field,
            f"{_shown(shown)} falls outside 0001-01-02 to 9999-12-30 in UTC.",
            "Pass a date between them.",
        )
    return utc


#: The times a store keeps: a day inside the years datetime and epoch floats both hold.
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=UTC)


# --------------------------------------------------------------------------- records


class Edge(BaseModel):
    """A typed, weighted link from one memory to another."""

    target: str
    type: EdgeType
    weight: float = Field(1.0, ge=0.0, le=1.0)
    created_at: datetime = Field(default_factory=now)


class Reference(BaseModel):
    """A pointer to a file, another memory or a URL, with a preview captured at write time."""

    kind: Literal["file", "memory", "url"]
    target: str
    preview: str = ""
    captured_at: datetime = Field(default_factory=now)
    #: For a file: the real path of the reference root it was captured under. A path means
    #: nothing without its root: a server with another root must not show another project's
    #: file as this one.
    root: str | None = None

    @property
    def uri(self) -> str:
        return f"{self.kind}:{self.target}"


class Trigger(BaseModel):
    """When an intent fires: at a time, on a cue, or both; optionally again after `every`."""

    fire_at: datetime | None = None
    cue: str | None = None
    every_hours: float | None = Field(None, gt=0)
    fired_at: datetime | None = None
    fired_count: int = 0

    @model_validator(mode="after")
    def _needs_a_condition(self) -> Trigger:
        if self.fire_at is None and not (self.cue or "").strip():
            raise ValueError("a trigger needs fire_at, cue or both")
        return self


class Components(BaseModel):
    """Why a memory ranked where it did: the parts of its activation."""

    source: Literal["dense", "sparse", "both", "spread"]
    #: None when the cosine was never computed (keyword-only while the model loads, or a
    #: memory without a stored vector): never a made-up 1 or 0.
    cos: float | None = None
    rel: float = 0.0
    rec: float = 0.0
    imp: float = 0.0
    spread: float = 0.0


class AccessRecord(BaseModel):
    """One access to one memory (DESIGN.md §3); kept on the ring and in the stream."""

    ts: datetime
    channel: Channel
    reader_owner: str = ""
    session_ref: str | None = None
    trace_ref: str | None = None
    query: str | None = None
    score: float | None = None
    rank: int | None = None
    components: Components | None = None


class Memory(BaseModel):
    """A memory as stored (DESIGN.md §2.1)."""

    model_config = ConfigDict(validate_assignment=False)

    id: str = Field(default_factory=new_id)
    type: MemoryType = MemoryType.info
    title: str = ""
    content: str
    owner: str = ""
    importance: float = Field(5.0, ge=0, le=10)
    salience: float = Field(0.3, ge=0, le=1)
    confidence: float = Field(0.75, ge=0, le=1)
    strength: int = 1
    reinforcement_count: int = 0
    access_count: int = 0
    tags: list[str] = Field(default_factory=list)
    entities: list[str] = Field(default_factory=list)
    place_or_task: str = ""
    created_at: datetime = Field(default_factory=now)
    last_accessed_at: datetime = Field(default_factory=now)
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    references: list[Reference] = Field(default_factory=list)
    edges: list[Edge] = Field(default_factory=list)
    archived: bool = False
    # Archived by maintenance (prune, merge, reconcile) rather than forgotten by its user:
    # recall still reaches it (see domain.archive). False while live.
    faded: bool = False
    status: TodoStatus | None = None
    trigger: Trigger | None = None
    access_log: list[AccessRecord] = Field(default_factory=list)
    channels: dict[str, int] = Field(default_factory=dict)
    # Base-level bookkeeping (DESIGN.md §5.3): count and first time of ACT-R accesses, and the
    # newest few access times kept exactly.
    actr_count: int = 0
    first_access_at: datetime | None = None
    actr_times: list[float] = Field(default_factory=list)
    # What the author said, kept apart from `importance`, which rescore may change: rescore
    # recomputes from this, so running it twice changes nothing (DESIGN.md §8.5). None: =
    # importance.
    authored_importance: float | None = None
    # Insertion order in the store (a listing cursor); None until stored.
    seq: int | None = None
    # Of a write, not stored: the scores (importance, salience, confidence) its author left
    # out, held at their defaults. A repeat of a stored memory leaves those as they are
    # (`repeats.absorb`): the default MEDIUM of a write that said nothing raised a memory its
    # user rated TRIVIAL.
    _unsaid: frozenset[str] = PrivateAttr(default_factory=frozenset)

    @model_validator(mode="after")
    def _status_only_on_todos(self) -> Memory:
        if self.type is MemoryType.todo:
            if self.status is None:
                self.status = "open"
        elif self.status is not None:
            raise ValueError(
                f"status: only todos have a status, this memory is {a_or_an(self.type.value)}."
            )
        return self

    @property
    def content_hash(self) -> str:
        return content_hash(self.content)

    @property
    def fading_since(self) -> datetime:
        """Where forgetting's clock starts (`forgetting.fading_since`): the last touching
        access, or a later `valid_from`."""
        return fading_since(self.last_accessed_at, self.valid_from)

    @property
    def prune_status(self) -> str | None:
        """The status the prune rule reads (`forgetting.protection`): a todo's, or whether an
        intent is spent (fired once, never re-armed)."""
        if self.type is MemoryType.intent:
            return intent_status(self.trigger)
        return self.status

    @property
    def learned_at(self) -> datetime:
        """When this store learned the memory (its first access here): decay counts from it.
        `created_at` is when it happened, which an import may date years earlier."""
        return self.first_access_at or self.created_at

    @property
    def authored(self) -> float:
        """The importance the author set (what rescore starts from)."""
        return self.importance if self.authored_importance is None else self.authored_importance

    @property
    def sizes(self) -> dict[str, int]:
        return sizes(self.content)

    @property
    def cue_set(self) -> set[str]:
        return cue_set(self.tags, self.entities, self.place_or_task)


def cue_set(tags: list[str], entities: list[str], place_or_task: str) -> set[str]:
    """The lower-cased cue words of a memory: its tags, entities and place or task (a CJK
    run as its bigrams, as `text.tokens` cuts a query)."""
    words: set[str] = set()
    for item in [*tags, *entities, place_or_task]:
        words.update(w for w in cut_cjk(re.findall(r"[\w'-]+", item.lower()), item) if w)
    return words


def refuse_unstorable(value: str, field: str) -> str:
    """Text as every store can keep it and every export can write: PostgreSQL's text (and
    JSON) types hold no NUL character, and a lone surrogate (what Python makes of bytes that
    are not UTF-8 in a command line or a pipe) has no UTF-8 form, so the model cannot read it
    and no export can write it. Both are refused on both backends before anything is written.

    Raises:
        InvalidInput: the text holds a NUL character or a lone surrogate.
    """
    if "\x00" in value:
        raise InvalidInput(field, "contains a NUL byte.", "Remove control characters.")
    if not value.isascii() and (found := _SURROGATE.search(value)) is not None:
        raise InvalidInput(
            field,
            f"is not valid text: character {found.start() + 1} is a lone surrogate "
            "(bytes that are not UTF-8).",
            "Pass UTF-8 text.",
        )
    return value


#: At most this many tags on a memory, and as many entities (`clean_labels`).
MAX_LABELS = 50

#: UTF-16 halves: valid only in pairs inside UTF-16, never as characters of a str.
_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_labels(
    values: Sequence[str] | None, field: str, blank_fix: str = "Give it a word or leave it out."
) -> list[str]:
    """Strip, de-duplicate and bound a list of tags or entities.

    Args:
        values: the labels as given.
        field: the argument's name, for a refusal.
        blank_fix: what a refusal of a blank label tells to do.

    Raises:
        InvalidInput: not a list (a bare string would become one label per letter), a label
            that is not text, is blank, holds a NUL, is too long, or too many labels.
    """
    out: list[str] = []
    if values is not None and not isinstance(values, list | tuple):
        short = isinstance(values, str) and 0 < len(values) <= 30
        example = json.dumps([values] if short else ["build", "deploy"], ensure_ascii=False)
        raise InvalidInput(
            field,
            f"{_shown(values)} is not a list.",
            f"Pass a list of short strings, e.g. {example}.",
        )
    for at, value in enumerate(values or [], 1):
        if not isinstance(value, str):
            raise InvalidInput(
                field, f"{_shown(value)} (item {at}) is not text.", "Pass a list of short strings."
            )
        item = " ".join(refuse_unstorable(value, field).split())
        if not item:
            # A blank label was dropped without a word: a model believed it had tagged the
            # memory, and an update's tags of only blanks removed every tag.
            raise InvalidInput(field, f"{_shown(value)} (item {at}) is blank.", blank_fix)
        if len(item) > 100:
            raise InvalidInput(
                field,
                f"'{item[:20]}…' (item {at}) is longer than 100 characters.",
                "Keep each label short.",
            )
        if item not in out:
            out.append(item)
    if len(out) > MAX_LABELS:
        raise InvalidInput(
            field,
            f"{len(out)} labels given; a memory holds at most {MAX_LABELS}.",
            "Pass fewer labels.",
        )
    return out


def _shown(value: Any) -> str:
    """A value quoted in an error, cut short (an import line may hold megabytes)."""
    try:
        text = repr(value)
    except ValueError:  # an integer past the interpreter's digit limit for str()
        return "a number of thousands of digits"
    return text if len(text) <= 40 else text[:37] + "..."


def refuse_unknown_keys(model: type[BaseModel], data: Any) -> Any:
    """`data` as it is, for a before-validator of `model`, unless it is an object with a key
    `model` does not know: then an "unknown_key" error naming that key and `model`'s keys (a
    typo was dropped without a word). Not extra="forbid", which would spell
    additionalProperties in the tool listing the model reads every turn."""
    if isinstance(data, dict):
        unknown = [key for key in data if key not in model.model_fields]
        if unknown:
            *rest, last = model.model_fields
            raise PydanticCustomError(
                "unknown_key",
                "has no key {key}; its keys are {keys}",
                {"key": json.dumps(unknown[0]), "keys": f"{', '.join(rest)} and {last}"},
            )
    return data


class Link(BaseModel):
    """An edge to add, as the model gives it: target id or prefix, relation, optional weight."""

    target: str
    relation: EdgeType
    weight: float | str | None = None

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        """A key it does not know is refused, not dropped: `wieght: STRONG` (a typo) stored
        the default weight without a word. (Not extra="forbid", which would spell
        additionalProperties in the tool listing the model reads every turn.)"""
        return refuse_unknown_keys(cls, data)


def parse_link(raw: Any, field: str = "links") -> Link:
    """Validate one `{target, relation, weight?}` link.

    Raises:
        InvalidInput: not an object, a key it does not know (the keys are listed), no target,
            or an unknown relation (the relations are listed).
    """
    if isinstance(raw, Link):
        return raw
    if not isinstance(raw, dict) or not isinstance(raw.get("target"), str):
        raise InvalidInput(field, f"{raw!r} is not a link.", "Pass {target, relation, weight?}.")
    unknown = [key for key in raw if key not in Link.model_fields]
    if unknown:
        raise InvalidInput(
            field,
            f"a link has no key {_shown(unknown[0])}.",
            "Its keys are target, relation and weight.",
        )
    relation = raw.get("relation")
    names = {e.value for e in EdgeType}
    if not isinstance(relation, str) or relation.strip().lower() not in names:
        raise InvalidInput(
            f"{field}.relation",
            f"{relation!r} is not a relation.",
            f"Use one of {', '.join(e.value for e in EdgeType)}.",
        )
    weight = raw.get("weight")
    if weight is not None and not isinstance(weight, int | float | str):
        raise InvalidInput(
            f"{field}.weight", f"{weight!r} is not a weight.", "Use STRONG, MODERATE, WEAK or 0–1."
        )
    # Validated as a whole: pydantic names a bad relation as it names any bad field.
    return Link.model_validate(
        {"target": raw["target"], "relation": relation.strip().lower(), "weight": weight}
    )
