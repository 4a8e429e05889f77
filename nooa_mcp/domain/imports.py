"""Validation of an import line beyond its author request: edges, tombstones, history, sizes.

Pure. An export line carries what an author request carries (checked by `inputs.build_memory`)
and more: its edges, the archive flag and, for an archived memory, its tombstones; the
importance its author set (rescore starts from it), an intent's firing state, and its use
history (`accesses.History`). Each of those is checked here for type and size, so a malformed
line is refused by number before the first write instead of being coerced, skipped without a
word or stored at any size. A key no export writes is refused by the service before any of
this (`services.transfer.LINE_FIELDS`), so a misspelt field is named, never dropped. A line
without a history (an older export, plain notes) is learned when it is imported.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from ..errors import InvalidInput
from .accesses import History
from .references import PREVIEW_CHARS, parse_reference
from .schema import (
    EDGE_WEIGHT,
    IMPORTANCE,
    AccessRecord,
    Channel,
    Components,
    EdgeType,
    Reference,
    as_utc,
    now as utc_now,
    refuse_unstorable,
)
from .scope import OTHER_READER

__all__ = [
    "MAX_HISTORY_TIMES",
    "MAX_LINE_BYTES",
    "MAX_LINE_EDGES",
    "MAX_LINE_TOMBSTONES",
    "MAX_REASON",
    "UNEXPLAINED",
    "Carried",
    "LineEdge",
    "Stone",
    "carried",
    "check_line",
    "fold_note",
    "line_edges",
    "older_accesses",
]

#: The longest line an import reads. A memory an export writes (100,000 characters of
#: content, every one escaped, with 50 labels and 20 references) is under 1 MiB before its
#: edges, and each edge takes about 120 bytes; a longer line is refused while it is read,
#: before it is held in memory.
MAX_LINE_BYTES = 4 * 1024 * 1024
#: Edges and tombstones one line may carry. An export writes every edge a memory has, so
#: the edge bound is what fits in the rest of a line, not what a reply shows (50).
MAX_LINE_EDGES = 20_000
MAX_LINE_TOMBSTONES = 1000
#: A tombstone's reason is a label ("forgotten", "superseded by 3f9a2c1d (reconcile)").
MAX_REASON = 500
#: Use times and accesses one line may carry (an export writes 16 use times a memory, and up to
#: this many of its accesses on its line and on each `accesses_of` line after it; the importing
#: store keeps as many use times and ring entries as its own settings do, and every access).
MAX_HISTORY_TIMES = 1000
#: Counters past this are no count an export writes.
MAX_COUNT = 10**9
#: An access's query, as a recall logs it.
MAX_QUERY = 200

_HEX_ID = re.compile(r"[0-9a-fA-F]{6,32}")
_RELATIONS = ", ".join(e.value for e in EdgeType)


def fold_note(line_id: str) -> str:
    """The note (`query`) on the `reinforced` access of an import line `line_id` folded into
    a memory stored under another id (or reviving a faded one): it travels with the memory's
    history (export, import, migrate) and stays on it through merges and prunes, so running
    the import again folds the line no second time (`services.authoring`)."""
    return f"folded {line_id}"


@dataclass(frozen=True)
class LineEdge:
    """One edge of an import line, checked: the target id as written (lower-cased)."""

    target: str
    relation: EdgeType
    weight: float
    #: When the edge was made in the exporting store; None: when it is imported.
    created_at: datetime | None = None


def _list(item: dict[str, Any], key: str, limit: int, field: str | None = None) -> list[Any]:
    value = item.get(key)
    field = field or key
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidInput(field, "must be a list.", f"Pass a list of at most {limit}.")
    if len(value) > limit:
        raise InvalidInput(field, f"holds {len(value)} items; at most {limit} are read.", "")
    return value


def line_edges(item: dict[str, Any]) -> list[LineEdge]:
    """The edges of a line: `[{target, type, weight?, created_at?}]`, each checked.

    Raises:
        InvalidInput: not a list, too many, or an edge that is not an object with a hex
            target id, a known relation and a weight from the ladder.
    """
    out = []
    for raw in _list(item, "edges", MAX_LINE_EDGES):
        if not isinstance(raw, dict):
            raise InvalidInput("edges", "an edge is not an object.", "Write {target, type}.")
        target = raw.get("target")
        if not isinstance(target, str) or not _HEX_ID.fullmatch(target.strip()):
            raise InvalidInput(
                "edges.target", "is not a memory id.", "Write the target's id (hex)."
            )
        relation = raw.get("type")
        if not isinstance(relation, str) or relation not in EdgeType._value2member_map_:
            raise InvalidInput(
                "edges.type", f"{relation!r} is not a relation.", f"Use one of {_RELATIONS}."
            )
        weight = raw.get("weight")
        out.append(
            LineEdge(
                target.strip().lower(),
                EdgeType(relation),
                1.0 if weight is None else EDGE_WEIGHT.parse(weight, "edges.weight"),
                as_utc(raw.get("created_at"), "edges.created_at"),
            )
        )
    return out


def _check_tombstones(item: dict[str, Any]) -> None:
    for stone in _list(item, "tombstones", MAX_LINE_TOMBSTONES):
        if not isinstance(stone, dict) or not isinstance(stone.get("reason"), str):
            raise InvalidInput(
                "tombstones", "a tombstone is not an object with a reason.", "Write {reason, ts}."
            )
        reason = refuse_unstorable(stone["reason"], "tombstones.reason")
        if len(reason) > MAX_REASON:
            raise InvalidInput(
                "tombstones.reason",
                f"is {len(reason)} characters; the limit is {MAX_REASON}.",
                "Shorten it.",
            )
        as_utc(stone.get("ts"), "tombstones.ts")
        as_utc(stone.get("lifted_at"), "tombstones.lifted_at")


@dataclass(frozen=True)
class Carried:
    """What a line restores on the memory it creates beyond its author request; `archive`
    is None for a live memory, else the tombstones it is archived with, oldest first."""

    history: History | None = None
    authored_importance: float | None = None
    fired_at: datetime | None = None
    fired_count: int = 0
    archive: tuple[Stone, ...] | None = None
    #: The ids the file holds live (as stored here): a duplicate reflection merged into an
    #: archived line's memory here is not forgotten with it when the file keeps it live.
    kept: frozenset[str] = frozenset()
    #: The references' previews as they were captured where the line was exported, by uri:
    #: kept as they are, never captured again here (a memory the reference names may be a
    #: later line of the file, or archived; a file may be under no root here).
    snapshots: tuple[Reference, ...] = ()
    #: Whether maintenance archived the line's memory (faded) or its user forgot it, as the
    #: line's `faded` says; None for a line that does not say (an export of an earlier
    #: version): its tombstones' reasons tell (`domain.archive.standing_fade`).
    faded: bool | None = None


@dataclass(frozen=True)
class Stone:
    """A tombstone an archived line carries: why, when, and when it was lifted (if it was)."""

    reason: str
    ts: datetime
    lifted_at: datetime | None = None
    #: Whether the line gave its time (one it left out is the import's: no later than a
    #: revive of the memory stored here, `tombstones.forget_as_exported`). Not a key of a line.
    dated: bool = True


#: The tombstone of an archived line that carries none: no reason says reflection archived
#: it, so it comes back forgotten (`domain.archive`).
UNEXPLAINED = "archived before export"


def _count(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise InvalidInput(field, f"{value!r} is not a count.", "Write a whole number ≥ 0.")
    return value


def _time(value: Any, field: str) -> datetime:
    when = as_utc(value, field)
    if when is None:
        raise InvalidInput(field, "is missing.", "Write an ISO 8601 time.")
    return when


def _access(raw: Any) -> AccessRecord:
    field = "history.accesses"
    if not isinstance(raw, dict):
        raise InvalidInput(field, "an access is not an object.", "Write {ts, channel}.")
    channel = raw.get("channel")
    if not isinstance(channel, str) or channel not in Channel._value2member_map_:
        names = ", ".join(c.value for c in Channel)
        raise InvalidInput(f"{field}.channel", f"{channel!r} is not a channel.", f"Use {names}.")
    query = raw.get("query")
    if query is not None and (not isinstance(query, str) or len(query) > MAX_QUERY):
        raise InvalidInput(
            f"{field}.query", f"is not text of at most {MAX_QUERY} characters.", "Shorten it."
        )
    score, rank = raw.get("score"), raw.get("rank")
    if score is not None and (isinstance(score, bool) or not isinstance(score, int | float)):
        raise InvalidInput(f"{field}.score", f"{score!r} is not a number.", "")
    if rank is not None:
        _count(rank, f"{field}.rank")
    other = raw.get("other_reader", False)
    if not isinstance(other, bool):
        raise InvalidInput(
            f"{field}.other_reader", f"{other!r} is not true or false.", "Export it again."
        )
    parts = raw.get("components")
    try:
        components = None if parts is None else Components.model_validate(parts)
    except ValidationError:
        raise InvalidInput(
            f"{field}.components", "are not the parts of a score.", "Export them again."
        ) from None
    return AccessRecord(
        ts=_time(raw.get("ts"), f"{field}.ts"),
        channel=Channel(channel),
        query=None if query is None else refuse_unstorable(query, f"{field}.query"),
        score=None if score is None or not math.isfinite(score) else float(score),
        rank=rank,
        components=components,
        # Another reader's in the store it came from: kept so, never read as the owner's.
        reader_owner=OTHER_READER if other else "",
    )


def _history(raw: Any) -> History:
    if not isinstance(raw, dict):
        raise InvalidInput("history", "is not an object.", "Leave it out, or export it again.")
    times = _list(raw, "use_times", MAX_HISTORY_TIMES, "history.use_times")
    channels = raw.get("channels") or {}
    if not isinstance(channels, dict) or any(k not in Channel._value2member_map_ for k in channels):
        raise InvalidInput("history.channels", "is not a count per channel.", "")
    accesses = _list(raw, "accesses", MAX_HISTORY_TIMES, "history.accesses")
    return History(
        learned_at=_time(raw.get("learned_at"), "history.learned_at"),
        last_used_at=_time(raw.get("last_used_at"), "history.last_used_at"),
        uses=_count(raw.get("uses"), "history.uses"),
        use_times=tuple(_time(t, "history.use_times").timestamp() for t in times),
        strength=_count(raw.get("strength"), "history.strength"),
        access_count=_count(raw.get("access_count", 0), "history.access_count"),
        reinforcements=_count(raw.get("reinforcements", 0), "history.reinforcements"),
        channels={k: _count(v, f"history.channels.{k}") for k, v in channels.items()},
        accesses=tuple(_access(a) for a in accesses),
    )


def older_accesses(item: dict[str, Any]) -> tuple[str, tuple[AccessRecord, ...]] | None:
    """For an `accesses_of` line (`{"accesses_of": id, "accesses": [...]}`: more of a memory's
    accesses than fit on its own line), the memory's id and those accesses; None for any
    other line.

    Raises:
        InvalidInput: the id is not a memory id, or an access is malformed.
    """
    if "accesses_of" not in item:
        return None
    target = item["accesses_of"]
    if not isinstance(target, str) or not _HEX_ID.fullmatch(target.strip()):
        raise InvalidInput("accesses_of", "is not a memory id.", "Write the memory's id (hex).")
    raw = _list(item, "accesses", MAX_HISTORY_TIMES, "history.accesses")
    return target.strip().lower(), tuple(_access(a) for a in raw)


def carried(item: dict[str, Any], now: datetime) -> Carried:
    """What a line restores beyond its author request: its use history, the importance its
    author set, and an intent's firing state. Absent keys restore nothing.

    Raises:
        InvalidInput: one of them is malformed (the field is named).
    """
    raw = item.get("history")
    authored = item.get("authored_importance")
    given = item.get("trigger")
    trigger = given if isinstance(given, dict) else {}
    fired = trigger.get("fired_count", 0)
    return Carried(
        history=None if raw is None else _history(raw),
        authored_importance=None
        if authored is None
        else IMPORTANCE.parse(authored, "authored_importance"),
        fired_at=as_utc(trigger.get("fired_at"), "trigger.fired_at"),
        fired_count=_count(fired or 0, "trigger.fired_count"),
        archive=_stones(item, now) if item.get("archived") else None,
        snapshots=_snapshots(item.get("references")),
        faded=item.get("faded") if item.get("archived") else None,
    )


def _snapshots(raw: Any) -> tuple[Reference, ...]:
    """The references a line carries with their previews (`{"uri", "preview",
    "captured_at", "root"}`, as `export` writes them); a plain uri carries none.

    Raises:
        InvalidInput: a snapshot's fields are malformed (the field is named).
    """
    if not isinstance(raw, list):
        return ()
    out = []
    for entry in raw:
        if not isinstance(entry, dict) or "preview" not in entry:
            continue
        ref = parse_reference(entry.get("uri"), "references.uri")
        preview, root = entry.get("preview"), entry.get("root")
        if not isinstance(preview, str) or len(preview) > PREVIEW_CHARS:
            raise InvalidInput(
                "references.preview",
                f"is not text of at most {PREVIEW_CHARS} characters.",
                "Leave it out to capture the reference again.",
            )
        if root is not None and (not isinstance(root, str) or len(root) > 4096):
            raise InvalidInput("references.root", "is not a path.", "Leave it out.")
        captured = as_utc(entry.get("captured_at"), "references.captured_at")
        out.append(
            ref.model_copy(
                update={
                    "preview": refuse_unstorable(preview, "references.preview"),
                    "captured_at": captured or ref.captured_at,
                    "root": root,
                }
            )
        )
    return tuple(out)


def _stones(item: dict[str, Any], now: datetime) -> tuple[Stone, ...]:
    """An archived line's tombstones (one `UNEXPLAINED` when it carries none); a stone
    without a time is dated `now`."""
    given = item.get("tombstones") or [{"reason": UNEXPLAINED}]
    out = []
    for stone in given:
        ts = as_utc(stone.get("ts"), "tombstones.ts")
        out.append(
            Stone(
                reason=stone["reason"],
                ts=ts or now,
                lifted_at=as_utc(stone.get("lifted_at"), "tombstones.lifted_at"),
                dated=ts is not None,
            )
        )
    return tuple(out)


def check_line(item: dict[str, Any]) -> None:
    """Check the fields of an import line that an author request does not carry.

    Raises:
        InvalidInput: `edges`, `tombstones`, `archived`, `faded`, `history`, `authored_importance`
            or an intent's firing state is malformed (the field is named).
    """
    line_edges(item)
    _check_tombstones(item)
    archived = item.get("archived")
    if archived is not None and not isinstance(archived, bool):
        raise InvalidInput("archived", "must be true or false.", "")
    faded = item.get("faded")
    if faded is not None and not isinstance(faded, bool):
        raise InvalidInput("faded", "must be true or false.", "")
    if faded and not archived:
        raise InvalidInput(
            "faded",
            "is true on a line that is not archived.",
            "Set archived to true as well, or leave faded out.",
        )
    carried(item, utc_now())
