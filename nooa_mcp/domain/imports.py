"""Validation of an import line beyond its author request: edges, tombstones, sizes.

Pure. An export line carries what an author request carries (checked by `inputs.build_memory`)
and more: its edges, the archive flag and, for an archived memory, its tombstones. Each of
those is checked here for type and size, so a malformed line is refused by number before the
first write instead of being coerced, skipped without a word or stored at any size. Keys this
module does not know are left to whoever reads them: a newer export may carry more.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInput
from .schema import EDGE_WEIGHT, EdgeType, as_utc, refuse_nul

__all__ = [
    "MAX_LINE_BYTES",
    "MAX_LINE_EDGES",
    "MAX_LINE_TOMBSTONES",
    "MAX_REASON",
    "LineEdge",
    "check_line",
    "line_edges",
]

#: The longest line an import reads. The largest memory an export writes (100,000 characters
#: of content, every one escaped, with 50 labels, 20 references and 50 edges) is under 1 MiB;
#: a longer line is refused while it is read, before it is held in memory.
MAX_LINE_BYTES = 4 * 1024 * 1024
#: Edges and tombstones one line may carry (an export writes at most 50 edges a memory).
MAX_LINE_EDGES = 1000
MAX_LINE_TOMBSTONES = 1000
#: A tombstone's reason is a label ("forgotten", "superseded by 3f9a2c1d (reconcile)").
MAX_REASON = 500

_HEX_ID = re.compile(r"[0-9a-fA-F]{6,32}")
_RELATIONS = ", ".join(e.value for e in EdgeType)


@dataclass(frozen=True)
class LineEdge:
    """One edge of an import line, checked: the target id as written (lower-cased)."""

    target: str
    relation: EdgeType
    weight: float


def _list(item: dict[str, Any], key: str, limit: int) -> list[Any]:
    value = item.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidInput(key, "must be a list.", f"Pass a list of at most {limit}.")
    if len(value) > limit:
        raise InvalidInput(key, f"holds {len(value)} items; at most {limit} are read.", "")
    return value


def line_edges(item: dict[str, Any]) -> list[LineEdge]:
    """The edges of a line: `[{target, type, weight?}]`, each checked.

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
            raise InvalidInput("edges.type", "is not a relation.", f"Use one of {_RELATIONS}.")
        weight = raw.get("weight")
        out.append(
            LineEdge(
                target.strip().lower(),
                EdgeType(relation),
                1.0 if weight is None else EDGE_WEIGHT.parse(weight, "edges.weight"),
            )
        )
    return out


def _check_tombstones(item: dict[str, Any]) -> None:
    for stone in _list(item, "tombstones", MAX_LINE_TOMBSTONES):
        if not isinstance(stone, dict) or not isinstance(stone.get("reason"), str):
            raise InvalidInput(
                "tombstones", "a tombstone is not an object with a reason.", "Write {reason, ts}."
            )
        reason = refuse_nul(stone["reason"], "tombstones.reason")
        if len(reason) > MAX_REASON:
            raise InvalidInput(
                "tombstones.reason",
                f"is {len(reason)} characters; the limit is {MAX_REASON}.",
                "Shorten it.",
            )
        as_utc(stone.get("ts"), "tombstones.ts")
        as_utc(stone.get("lifted_at"), "tombstones.lifted_at")


def check_line(item: dict[str, Any]) -> None:
    """Check the fields of an import line that an author request does not carry.

    Raises:
        InvalidInput: `edges`, `tombstones` or `archived` is malformed (the field is named).
    """
    line_edges(item)
    _check_tombstones(item)
    archived = item.get("archived")
    if archived is not None and not isinstance(archived, bool):
        raise InvalidInput("archived", "must be true or false.", "")
