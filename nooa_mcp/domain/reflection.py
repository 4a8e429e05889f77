"""Reflection planning: merge, link, rescore and prune as plans of independent items (SPEC §8).

Pure: the caller reads the rows and their vectors, asks for a plan, and applies the items one by
one, each in its own transaction. Every item is checked again when it is applied (an item whose
rows changed or vanished is skipped), and every plan is a function of the store's current state
only, so a pass stopped between items and run again later reaches the same store as one that ran
through.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import numpy as np

from .forgetting import ForgettingPolicy, retention, should_prune
from .scope import owner_role

__all__ = [
    "LINK_HIGH",
    "LINK_LOW",
    "MAX_NEW_LINKS",
    "MERGE_SIMILARITY",
    "LinkItem",
    "MergeItem",
    "Node",
    "PruneItem",
    "RescoreItem",
    "merged_fields",
    "plan_links",
    "plan_merges",
    "plan_prune",
    "plan_rescore",
    "rescore",
    "similar_pairs",
]

MERGE_SIMILARITY = 0.95
LINK_LOW = 0.80
LINK_HIGH = 0.95
MAX_NEW_LINKS = 5
#: Types reflection never merges or links: scratch is never consolidated (SPEC §2); intents
#: carry triggers that must not be folded into each other.
UNMERGED_TYPES = frozenset({"scratch", "intent"})
UNLINKED_TYPES = frozenset({"scratch"})
#: Rescore weights: salience is centred on ROUTINE (0.3), usage saturates at 16 rehearsals.
SALIENCE_WEIGHT = 2.0
USAGE_WEIGHT = 2.0
USAGE_SATURATION = 16
AUTHOR_FLOOR = 8.0


@dataclass(frozen=True)
class Node:
    """What planning needs to know of one memory; `row` indexes the vector matrix."""

    id: str
    type: str
    owner: str
    created_at: datetime
    last_accessed_at: datetime
    importance: float
    authored_importance: float
    salience: float = 0.3
    confidence: float = 0.75
    strength: int = 1
    reinforcement_count: int = 0
    status: str | None = None
    archived: bool = False
    row: int = -1

    @property
    def role(self) -> str:
        return owner_role(self.owner)


@dataclass(frozen=True)
class MergeItem:
    """Fold `dup` into the older `anchor` (cosine ≥ 0.95, same type and role)."""

    anchor: str
    dup: str
    similarity: float
    op: Literal["merge"] = "merge"


@dataclass(frozen=True)
class LinkItem:
    """A `related` edge in both directions between `a` and `b`, weight = cosine."""

    a: str
    b: str
    weight: float
    op: Literal["link"] = "link"


@dataclass(frozen=True)
class RescoreItem:
    id: str
    old: float
    new: float
    op: Literal["rescore"] = "rescore"


@dataclass(frozen=True)
class PruneItem:
    id: str
    retention: float
    op: Literal["prune"] = "prune"


# --------------------------------------------------------------------------- similarity


def similar_pairs(
    vectors: np.ndarray,
    rows: Sequence[int],
    low: float,
    high: float = math.inf,
    block: int = 1024,
) -> list[tuple[int, int, float]]:
    """Pairs (i, j, cos) of positions into `rows`, i < j, with low ≤ cos < high.

    Computed block by block so memory stays O(block·n) for a large role.
    """
    if len(rows) < 2:
        return []
    mat = np.asarray(vectors[np.asarray(rows)], dtype=np.float32)
    out: list[tuple[int, int, float]] = []
    for start in range(0, len(rows), block):
        sims = mat[start : start + block] @ mat.T
        hits = np.argwhere((sims >= low) & (sims < high))
        for bi, j in hits:
            i = start + int(bi)
            if i < j:
                out.append((i, int(j), float(sims[bi, j])))
    return out


def _groups(nodes: Iterable[Node], key) -> dict[tuple, list[Node]]:
    groups: dict[tuple, list[Node]] = defaultdict(list)
    for node in nodes:
        groups[key(node)].append(node)
    return groups


# --------------------------------------------------------------------------- merge


def plan_merges(
    nodes: Sequence[Node],
    vectors: np.ndarray,
    threshold: float = MERGE_SIMILARITY,
    exclude: set[frozenset[str]] | None = None,
) -> list[MergeItem]:
    """Near-duplicates to merge, oldest anchor first (SPEC §8 step 1).

    Within a role, a type and (for todos) a status, memories are visited oldest first; each one
    not yet taken becomes an anchor and takes every later memory at cosine ≥ threshold that is not
    taken. A duplicate is never an anchor, so applying any subset of the plan and planning again
    yields the rest of the same plan. Pairs in `exclude` (a memory and what it refines,
    contradicts or was derived from) are versions, not duplicates, and are never merged.
    """
    exclude = exclude or set()
    live = [n for n in nodes if not n.archived and n.type not in UNMERGED_TYPES]
    items: list[MergeItem] = []
    for _, group in sorted(_groups(live, lambda n: (n.role, n.type, n.status or "")).items()):
        group.sort(key=lambda n: (n.created_at, n.id))
        near: dict[int, list[tuple[int, float]]] = defaultdict(list)
        for i, j, cos in similar_pairs(vectors, [n.row for n in group], threshold):
            near[i].append((j, cos))
        taken: set[int] = set()
        for i, anchor in enumerate(group):
            if i in taken:
                continue
            for j, cos in sorted(near.get(i, [])):
                if j not in taken and frozenset((anchor.id, group[j].id)) not in exclude:
                    taken.add(j)
                    items.append(MergeItem(anchor.id, group[j].id, cos))
    return items


def merged_fields(anchor: Node, dup: Node) -> dict[str, float | int]:
    """The anchor's new scores after absorbing `dup` (SPEC §8 step 1)."""
    return {
        "reinforcement_count": anchor.reinforcement_count + 1 + dup.reinforcement_count,
        "strength": anchor.strength + dup.strength,
        "importance": max(anchor.importance, dup.importance),
        "authored_importance": max(anchor.authored_importance, dup.authored_importance),
        "salience": max(anchor.salience, dup.salience),
        "confidence": max(anchor.confidence, dup.confidence),
    }


# --------------------------------------------------------------------------- link


def plan_links(
    nodes: Sequence[Node],
    vectors: np.ndarray,
    related: dict[str, set[str]] | None = None,
    linked: set[frozenset[str]] | None = None,
    low: float = LINK_LOW,
    high: float = LINK_HIGH,
    max_links: int = MAX_NEW_LINKS,
) -> list[LinkItem]:
    """`related` edges for neighbours with low ≤ cosine < high, strongest first (SPEC §8 step 3).

    Args:
        related: memory id → ids it already shares a `related` edge with (either direction).
        linked: pairs already joined by an edge of any type; they get no new edge.
        max_links: a node takes a new link only while it has fewer than this many `related`
            neighbours. Counting existing ones keeps each pass at ≤ 5 new edges per node and
            makes a resumed pass add exactly what an uninterrupted one would have.
    """
    related = related or {}
    linked = linked or set()
    live = [n for n in nodes if not n.archived and n.type not in UNLINKED_TYPES]
    candidates: list[tuple[float, str, str]] = []
    for _, group in sorted(_groups(live, lambda n: (n.role,)).items()):
        group.sort(key=lambda n: n.id)
        for i, j, cos in similar_pairs(vectors, [n.row for n in group], low, high):
            a, b = group[i].id, group[j].id
            if frozenset((a, b)) not in linked:
                candidates.append((cos, a, b))
    candidates.sort(key=lambda c: (-c[0], c[1], c[2]))
    degree = {n.id: len(related.get(n.id, ())) for n in live}
    items: list[LinkItem] = []
    for cos, a, b in candidates:
        if degree[a] >= max_links or degree[b] >= max_links:
            continue
        degree[a] += 1
        degree[b] += 1
        items.append(LinkItem(a, b, round(cos, 4)))
    return items


# --------------------------------------------------------------------------- rescore


def rescore(authored_importance: float, salience: float, strength: int) -> float:
    """Importance from what the author said, how surprising it was and how much it is used.

    imp = authored + 2·(salience − 0.3) + 2·min(ln(1 + u) / ln(1 + 16), 1),   u = strength − 1

    clipped to 0–10 and rounded to 0.1; an authored importance ≥ 8 never ends below 8. Usage
    counts rehearsals (the count part of base-level activation), not the clock, so the value
    is a pure function of stored fields: a second pass changes nothing (unlike NOOA, whose
    rescore halves importance below 8 every pass).
    """
    usage = max(strength - 1, 0)
    value = (
        authored_importance
        + SALIENCE_WEIGHT * (salience - 0.3)
        + USAGE_WEIGHT * min(math.log1p(usage) / math.log1p(USAGE_SATURATION), 1.0)
    )
    value = round(min(max(value, 0.0), 10.0), 1)
    if authored_importance >= AUTHOR_FLOOR:
        value = max(value, AUTHOR_FLOOR)
    return value


def plan_rescore(nodes: Sequence[Node]) -> list[RescoreItem]:
    """Memories whose importance differs from `rescore` of their stored fields (SPEC §8 step 4)."""
    items: list[RescoreItem] = []
    for node in nodes:
        if node.archived:
            continue
        new = rescore(node.authored_importance, node.salience, node.strength)
        if abs(new - node.importance) > 1e-9:
            items.append(RescoreItem(node.id, node.importance, new))
    return items


# --------------------------------------------------------------------------- prune


def plan_prune(
    nodes: Sequence[Node], now: datetime, policy: ForgettingPolicy | None = None
) -> list[PruneItem]:
    """Memories the prune rule archives now (SPEC §7), least retained first."""
    policy = policy or ForgettingPolicy()
    items = [
        PruneItem(n.id, retention(n.last_accessed_at, n.strength, now, policy.tau_hours))
        for n in nodes
        if should_prune(
            type=n.type,
            importance=n.importance,
            status=n.status,
            archived=n.archived,
            created_at=n.created_at,
            last_accessed_at=n.last_accessed_at,
            strength=n.strength,
            now=now,
            policy=policy,
        )
    ]
    items.sort(key=lambda p: (p.retention, p.id))
    return items
