"""Reflection planning: merge, link, rescore and prune as plans of independent items (DESIGN.md §8).

Pure: the caller reads the rows and their vectors, asks for a plan, and applies the items one by
one, each in its own transaction. Every item is checked again when it is applied (an item whose
rows changed or vanished is skipped), and every plan is a function of the store's current state
only, so a pass stopped between items and run again later reaches the same store as one that ran
through.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal

import numpy as np

from .epoch import from_epoch
from .forgetting import SPENT, ForgettingPolicy, prunable, retention
from .scope import owner_role
from .similarity import sweep

__all__ = [
    "LINK_HIGH",
    "LINK_LOW",
    "MAX_NEW_LINKS",
    "MERGE_SIMILARITY",
    "SWEEP_SPILL",
    "LinkItem",
    "MergeItem",
    "Node",
    "PruneItem",
    "RescoreItem",
    "Rows",
    "among",
    "id_ranks",
    "link_item",
    "links_greedy",
    "merged_fields",
    "merges_from_pairs",
    "plan_links",
    "plan_merges",
    "plan_prune",
    "plan_rescore",
    "prune_rows",
    "rescore",
    "rescore_rows",
    "similar_pairs",
]

LINK_LOW = 0.80
LINK_HIGH = 0.95
#: Two memories are candidates for a merge from this cosine; what merges them is saying the
#: same thing in the same words (`facts.same_statement`, DESIGN.md §8.2), so the gate only
#: spares comparing texts far apart. A final period or "!" alone moves MiniLM's cosine of one
#: statement to 0.92 (1–1.5 % of 400 LoCoMo lines so varied fell under 0.95, the gate before,
#: and such a twin of a corrected fact outranked the correction).
MERGE_SIMILARITY = LINK_LOW
#: A sweep that caps the pairs it keeps per row never drops one at this cosine or above
#: (`similarity.sweep`'s spill): most duplicates sit here.
SWEEP_SPILL = 0.95
MAX_NEW_LINKS = 5
#: Types reflection never merges: scratch is a working note, never consolidated; intents carry
#: triggers that must not be folded into each other; two todos alike are two things to do (the
#: same errand on two days), and folding one into the other would lose one of them.
UNMERGED_TYPES = frozenset({"scratch", "intent", "todo"})
UNLINKED_TYPES = frozenset({"scratch"})
#: Rescore weights: salience is centred on ROUTINE (0.3), repeats saturate at 16.
SALIENCE_WEIGHT = 2.0
USAGE_WEIGHT = 2.0
USAGE_SATURATION = 16
#: What the author set at or above this (HIGH, CRITICAL) rescore never touches.
AUTHOR_FLOOR = 8.0
#: How far rescore may lift anything else: just below HIGH, so it never makes a label the
#: author did not give.
RESCORE_CEILING = 7.0


@dataclass(frozen=True, slots=True)
class Node:
    """What planning needs to know of one memory; `row` indexes the vector matrix."""

    id: str
    type: str
    owner: str
    created_at: datetime
    #: Where forgetting's clock starts: the last touching access, or a later valid_from
    #: (`forgetting.fading_since`).
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
    #: When this store learned it (its first access here); None: as `created_at`.
    learned: datetime | None = None

    @property
    def role(self) -> str:
        return owner_role(self.owner)

    @property
    def prune_status(self) -> str | None:
        """The status the prune rule reads: read with the row (`storage.dialect.
        reflection_columns`), an intent's spent or not."""
        return self.status

    @property
    def learned_at(self) -> datetime:
        return self.learned or self.created_at


@dataclass(frozen=True)
class MergeItem:
    """Fold `dup` into the older `anchor` (cosine ≥ `MERGE_SIMILARITY`, same type and role;
    the pass plans only pairs that say the same thing in the same words,
    `facts.same_statement`)."""

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


@dataclass
class Rows:
    """A role's live memories as columns, in seq order: what planning reads of every row.

    At 100k memories a list of `Node`s costs ~50 MB and seconds to build; these columns cost
    ~10 MB. A `Node` is built only for the few rows a plan names (`node`).
    """

    seq: np.ndarray
    ids: list[str]
    type_code: np.ndarray
    types: list[str]
    owner_code: np.ndarray
    owners: list[str]
    status_code: np.ndarray
    statuses: list[str | None]
    created_at: np.ndarray
    last_accessed_at: np.ndarray
    importance: np.ndarray
    authored_importance: np.ndarray
    salience: np.ndarray
    confidence: np.ndarray
    strength: np.ndarray
    reinforcement_count: np.ndarray
    #: When the store learned each row (its first access here): prune age counts from it.
    learned_at: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)

    def packed(self) -> PackedRows:
        """These rows as kept between passes (`PackedRows`)."""
        encoded = [ident.encode() for ident in self.ids]
        ends = np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)))
        return PackedRows(replace(self, ids=[]), b"".join(encoded), ends)

    @classmethod
    def from_records(cls, records: Iterable[Sequence]) -> Rows:
        """Columns from records (seq, id, type, owner, status, importance, authored
        importance or None, salience, confidence, strength, reinforcement count, created at,
        last accessed at, learned at), times as epoch seconds. Without the learned time (13
        columns) a row was learned when it was created."""
        columns = list(zip(*records, strict=True)) or [()] * 14

        def coded(values: Sequence) -> tuple[np.ndarray, list]:
            codes: dict = {}
            return np.array([codes.setdefault(v, len(codes)) for v in values], np.int32), list(
                codes
            )

        def floats(values: Sequence) -> np.ndarray:
            return np.array(values, dtype=np.float64)

        kinds, types = coded(columns[2])
        owners, owner_names = coded(columns[3])
        statuses, status_names = coded(columns[4])
        importance = floats(columns[5])
        authored = np.array(columns[6], dtype=object)
        unset = np.fromiter((a is None for a in columns[6]), dtype=bool, count=len(columns[6]))
        return cls(
            seq=np.array(columns[0], dtype=np.int64),
            ids=list(columns[1]),
            type_code=kinds,
            types=types,
            owner_code=owners,
            owners=owner_names,
            status_code=statuses,
            statuses=status_names,
            importance=importance,
            authored_importance=np.where(unset, importance, authored).astype(np.float64),
            salience=floats(columns[7]),
            confidence=floats(columns[8]),
            strength=np.array(columns[9], dtype=np.int64),
            reinforcement_count=np.array(columns[10], dtype=np.int64),
            created_at=floats(columns[11]),
            last_accessed_at=floats(columns[12]),
            learned_at=floats(columns[13] if len(columns) > 13 else columns[11]),
        )

    @classmethod
    def concat(cls, pages: Sequence[Rows]) -> Rows:
        """One set of columns from pages read one after another (codes re-mapped)."""
        if len(pages) == 1:
            return pages[0]
        out: dict = {"ids": [i for page in pages for i in page.ids]}
        for name, codes in (("type", "types"), ("owner", "owners"), ("status", "statuses")):
            merged: dict = {}
            parts = []
            for page in pages:
                remap = np.array(
                    [merged.setdefault(v, len(merged)) for v in getattr(page, codes)],
                    dtype=np.int32,
                )
                part = getattr(page, f"{name}_code")
                parts.append(remap[part] if part.size else part)
            out[codes] = list(merged)
            out[f"{name}_code"] = np.concatenate(parts) if parts else np.zeros(0, np.int32)
        for name in (
            "seq",
            "created_at",
            "last_accessed_at",
            "learned_at",
            "importance",
            "authored_importance",
            "salience",
            "confidence",
            "strength",
            "reinforcement_count",
        ):
            out[name] = np.concatenate([getattr(page, name) for page in pages])
        return cls(**out)

    def take(self, positions: np.ndarray) -> Rows:
        """These rows only, in this order."""
        picked = positions.tolist()
        return Rows(
            seq=self.seq[positions],
            ids=[self.ids[p] for p in picked],
            type_code=self.type_code[positions],
            types=self.types,
            owner_code=self.owner_code[positions],
            owners=self.owners,
            status_code=self.status_code[positions],
            statuses=self.statuses,
            created_at=self.created_at[positions],
            last_accessed_at=self.last_accessed_at[positions],
            learned_at=self.learned_at[positions],
            importance=self.importance[positions],
            authored_importance=self.authored_importance[positions],
            salience=self.salience[positions],
            confidence=self.confidence[positions],
            strength=self.strength[positions],
            reinforcement_count=self.reinforcement_count[positions],
        )

    def in_seq_order(self) -> Rows:
        if len(self.ids) < 2 or bool(np.all(self.seq[1:] > self.seq[:-1])):
            return self
        return self.take(np.argsort(self.seq, kind="stable"))

    def type_of(self, p: int) -> str:
        return self.types[self.type_code[p]]

    def status_of(self, p: int) -> str | None:
        return self.statuses[self.status_code[p]]

    def owner_of(self, p: int) -> str:
        return self.owners[self.owner_code[p]]

    def mask_types(self, names: Iterable[str], keep: bool = True) -> np.ndarray:
        """Rows whose type is among `names` (or, with keep=False, is not)."""
        table = np.array([t in set(names) for t in self.types] + [False], dtype=bool)
        hit = table[self.type_code] if len(self.ids) else np.zeros(0, dtype=bool)
        return hit if keep else ~hit

    def role_codes(self) -> np.ndarray:
        """A code per row for its owner's role (pairs never cross roles)."""
        roles: dict[str, int] = {}
        table = np.array(
            [roles.setdefault(owner_role(o), len(roles)) for o in self.owners] + [0],
            dtype=np.int32,
        )
        return table[self.owner_code] if len(self.ids) else np.zeros(0, dtype=np.int32)

    def node(self, p: int, row: int = -1) -> Node:
        return Node(
            id=self.ids[p],
            type=self.type_of(p),
            owner=self.owner_of(p),
            created_at=from_epoch(float(self.created_at[p])),
            last_accessed_at=from_epoch(float(self.last_accessed_at[p])),
            importance=float(self.importance[p]),
            authored_importance=float(self.authored_importance[p]),
            salience=float(self.salience[p]),
            confidence=float(self.confidence[p]),
            strength=int(self.strength[p]),
            reinforcement_count=int(self.reinforcement_count[p]),
            status=self.status_of(p),
            row=row,
            learned=from_epoch(float(self.learned_at[p])),
        )


@dataclass(frozen=True)
class PackedRows:
    """A role's rows as a process keeps them for its next pass (`RoleState.rows`): the
    columns as they are, the ids as one UTF-8 buffer with end offsets. A list of 100k id
    strings took 96 bytes a row (9.2 MiB, half of what was kept); this takes the id's bytes
    and 8. `rows` gives them back as `Rows`, equal to the ones packed."""

    columns: Rows
    ids: bytes
    ends: np.ndarray

    def __len__(self) -> int:
        return int(self.ends.size)

    def rows(self) -> Rows:
        data, ends = self.ids, self.ends.tolist()
        ids = [data[a:b].decode() for a, b in zip([0, *ends][:-1], ends, strict=True)]
        return replace(self.columns, ids=ids)


# --------------------------------------------------------------------------- similarity


def similar_pairs(
    vectors: np.ndarray,
    rows: Sequence[int],
    low: float,
    high: float = math.inf,
    block: int = 1024,
) -> list[tuple[int, int, float]]:
    """Pairs (i, j, cos) of positions into `rows`, i < j, with low ≤ cos < high.

    Computed block by block (`block` rows at a time) so memory stays O(block·n).
    """
    if len(rows) < 2:
        return []
    found = sweep(
        vectors, np.asarray(rows), low, cap=len(rows), cells=max(block, 1) * len(rows)
    ).pairs
    keep = found.cos < high
    return sorted(
        zip(found.p[keep].tolist(), found.q[keep].tolist(), found.cos[keep].tolist(), strict=True)
    )


def _groups(nodes: Iterable[Node], key) -> dict[tuple, list[Node]]:
    groups: dict[tuple, list[Node]] = defaultdict(list)
    for node in nodes:
        groups[key(node)].append(node)
    return groups


def _mergeable(n: Node) -> bool:
    return not n.archived and n.type not in UNMERGED_TYPES


def _linkable(n: Node) -> bool:
    return not n.archived and n.type not in UNLINKED_TYPES


def _merge_group(n: Node) -> tuple[str, str]:
    return (n.role, n.type)


def _pairs_within(
    nodes: Sequence[Node], vectors: np.ndarray, keep, group, low: float
) -> list[tuple[int, int, float]]:
    """Pairs (i, j, cos) of indexes into `nodes` among those `keep` accepts, inside a group."""
    chosen = [i for i, n in enumerate(nodes) if keep(n)]
    if len(chosen) < 2:
        return []
    codes: dict = {}
    groups = np.array([codes.setdefault(group(nodes[i]), len(codes)) for i in chosen])
    found = sweep(
        vectors, np.array([nodes[i].row for i in chosen]), low, groups=groups, cap=len(chosen)
    ).pairs
    return [(chosen[p], chosen[q], cos) for p, q, cos in found]


# --------------------------------------------------------------------------- merge


def plan_merges(
    nodes: Sequence[Node],
    vectors: np.ndarray,
    threshold: float = MERGE_SIMILARITY,
    exclude: set[frozenset[str]] | None = None,
) -> list[MergeItem]:
    """Near-duplicates to merge, oldest anchor first (DESIGN.md §8.2).

    Within a role and a type, memories are visited oldest first; each one
    not yet taken becomes an anchor and takes every later memory at cosine ≥ threshold that is not
    taken. A duplicate is never an anchor, so applying any subset of the plan and planning again
    yields the rest of the same plan. Pairs in `exclude` (a memory and what it refines,
    contradicts or was derived from) are versions, not duplicates, and are never merged.
    """
    pairs = _pairs_within(nodes, vectors, _mergeable, _merge_group, threshold)
    return merges_from_pairs(nodes, pairs, threshold, exclude)


def merges_from_pairs(
    nodes: Sequence[Node],
    pairs: Iterable[tuple[int, int, float]],
    threshold: float = MERGE_SIMILARITY,
    exclude: set[frozenset[str]] | None = None,
) -> list[MergeItem]:
    """`plan_merges` over pairs already found: (i, j, cos) index `nodes` (either order).

    A pair outside one merge group, below the threshold or with an unmergeable end is
    ignored, so any superset of the relevant pairs gives the same plan.
    """
    exclude = exclude or set()
    near: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for i, j, cos in pairs:
        a, b = nodes[i], nodes[j]
        if cos < threshold or not (_mergeable(a) and _mergeable(b)):
            continue
        if _merge_group(a) != _merge_group(b):
            continue
        if (b.created_at, b.id) < (a.created_at, a.id):
            i, j = j, i
        near[i].append((j, cos))
    involved = set(near) | {j for hits in near.values() for j, _ in hits}
    age = {i: (_merge_group(nodes[i]), nodes[i].created_at, nodes[i].id) for i in involved}
    taken: set[int] = set()
    items: list[MergeItem] = []
    for i in sorted(near, key=age.__getitem__):
        if i in taken:
            continue
        anchor = nodes[i]
        for j, cos in sorted(near[i], key=lambda h: (age[h[0]], h[1])):
            if j not in taken and frozenset((anchor.id, nodes[j].id)) not in exclude:
                taken.add(j)
                items.append(MergeItem(anchor.id, nodes[j].id, cos))
    return items


def merged_fields(anchor: Node, dup: Node) -> dict[str, float | int]:
    """The anchor's new scores after absorbing `dup` (DESIGN.md §8.2)."""
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
    """`related` edges for neighbours with low ≤ cosine < high, strongest first (DESIGN.md §8.4).

    Args:
        related: memory id → ids it already shares a `related` edge with (either direction).
        linked: pairs already joined by an edge of any type; they get no new edge.
        max_links: a node takes a new link only while it has fewer than this many `related`
            neighbours. Counting existing ones keeps each pass at ≤ 5 new edges per node and
            makes a resumed pass add exactly what an uninterrupted one would have.
    """
    related = related or {}
    linked = linked or set()
    pairs = [
        (i, j, cos)
        for i, j, cos in _pairs_within(nodes, vectors, _linkable, lambda n: n.role, low)
        if cos < high and frozenset((nodes[i].id, nodes[j].id)) not in linked
    ]
    if not pairs:
        return []
    a, b, cos = (np.array(col) for col in zip(*pairs, strict=True))
    rank = id_ranks([n.id for n in nodes])
    degree = np.array([len(related.get(n.id, ())) for n in nodes], dtype=np.int64)
    chosen = links_greedy(a, b, cos.astype(np.float32), rank, degree, max_links)
    return [link_item(nodes[a[k]].id, nodes[b[k]].id, float(cos[k])) for k in chosen.tolist()]


def id_ranks(ids: Sequence[str]) -> np.ndarray:
    """Each id's rank in sorted order (the tie-break of equal cosines)."""
    order = np.argsort(np.array(ids, dtype=object), kind="stable")
    rank = np.empty(len(ids), dtype=np.int64)
    rank[order] = np.arange(len(ids))
    return rank


def among(ids: Iterable[str], wanted: Collection[str]) -> np.ndarray:
    """A mask of which `ids` are in `wanted`, by set lookups.

    numpy's `isin` on strings held as objects sorts both sides with Python comparisons,
    seconds for a large role against a set's milliseconds.
    """
    wanted = wanted if isinstance(wanted, set | frozenset | dict) else set(wanted)
    return np.fromiter((i in wanted for i in ids), dtype=bool)


def link_item(x: str, y: str, cos: float) -> LinkItem:
    a, b = sorted((x, y))
    return LinkItem(a, b, round(cos, 4))


def links_greedy(
    a: np.ndarray,
    b: np.ndarray,
    cos: np.ndarray,
    rank: np.ndarray,
    degree: np.ndarray,
    max_links: int = MAX_NEW_LINKS,
) -> np.ndarray:
    """Which candidate pairs (a[k], b[k]) get a link: strongest first (equal cosines by the two
    ids, smaller first), each while both ends have fewer than `max_links` related neighbours
    (`degree` per node: the existing ones, then the planned ones). Returns indexes into the
    candidates, in that order. Arrays, not objects: a full pass over 100k memories has
    hundreds of thousands of candidates."""
    if a.size == 0:
        return np.zeros(0, dtype=np.int64)
    lo, hi = np.minimum(rank[a], rank[b]), np.maximum(rank[a], rank[b])
    order = np.lexsort((hi, lo, -cos.astype(np.float64)))
    deg = degree.tolist()
    ends_a, ends_b = a.tolist(), b.tolist()
    chosen = []
    for k in order.tolist():
        x, y = ends_a[k], ends_b[k]
        if deg[x] >= max_links or deg[y] >= max_links:
            continue
        deg[x] += 1
        deg[y] += 1
        chosen.append(k)
    return np.array(chosen, dtype=np.int64)


# --------------------------------------------------------------------------- rescore


def rescore(authored_importance: float, salience: float, repeats: int) -> float:
    """Importance from what the author said, how surprising it was, and how often the author
    said it again.

    imp = authored + 2·(salience − 0.3) + 2·min(ln(1 + r) / ln(1 + 16), 1),   r = repeats

    clipped to 0 … max(authored, 7) and rounded to 0.1. What the author set HIGH or CRITICAL
    (≥ 8) is never changed, and nothing is lifted past 7: rescore never promotes what the author
    set. Repeats are deliberate writes of the same value (reinforcements), not recalls: how
    often recall showed a memory is base-level's business, and counting it here as well made
    what was shown once rank higher next time (DESIGN.md §16.9). The value is a pure function
    of stored fields, so a second pass changes nothing (NOOA's halves importance every pass).
    """
    if authored_importance >= AUTHOR_FLOOR:
        return authored_importance
    value = (
        authored_importance
        + SALIENCE_WEIGHT * (salience - 0.3)
        + USAGE_WEIGHT * min(math.log1p(max(repeats, 0)) / math.log1p(USAGE_SATURATION), 1.0)
    )
    ceiling = max(authored_importance, RESCORE_CEILING)
    return round(min(max(value, 0.0), ceiling), 1)


def plan_rescore(nodes: Sequence[Node]) -> list[RescoreItem]:
    """Memories whose importance differs from `rescore` of their stored fields (DESIGN.md §8.5)."""
    items: list[RescoreItem] = []
    for node in nodes:
        if node.archived:
            continue
        new = rescore(node.authored_importance, node.salience, node.reinforcement_count)
        if abs(new - node.importance) > 1e-9:
            items.append(RescoreItem(node.id, node.importance, new))
    return items


# --------------------------------------------------------------------------- prune


def plan_prune(
    nodes: Sequence[Node], now: datetime, policy: ForgettingPolicy | None = None
) -> list[PruneItem]:
    """Memories the prune rule archives now (DESIGN.md §7.2), least retained first."""
    policy = policy or ForgettingPolicy()
    items = [
        PruneItem(n.id, retention(n.last_accessed_at, n.strength, now, policy.tau_hours))
        for n in nodes
        if prunable(n, now, policy)
    ]
    items.sort(key=lambda p: (p.retention, p.id))
    return items


def rescore_rows(rows: Rows) -> list[RescoreItem]:
    """`plan_rescore` over columns: `rescore` runs once per distinct (authored, salience,
    repeats), not once per row."""
    if not len(rows):
        return []
    # One integer key per row from the codes of its three inputs (each has few values).
    key = np.zeros(len(rows), dtype=np.int64)
    for column in (rows.authored_importance, rows.salience, rows.reinforcement_count):
        values, codes = np.unique(column, return_inverse=True)
        key = key * len(values) + codes.reshape(-1)
    _, first, back = np.unique(key, return_index=True, return_inverse=True)
    values = np.array(
        [
            rescore(
                float(rows.authored_importance[p]),
                float(rows.salience[p]),
                int(rows.reinforcement_count[p]),
            )
            for p in first.tolist()
        ]
    )
    new = values[back.reshape(-1)]
    return [
        RescoreItem(rows.ids[p], float(rows.importance[p]), float(new[p]))
        for p in np.flatnonzero(np.abs(new - rows.importance) > 1e-9).tolist()
    ]


def prune_rows(
    rows: Rows, now: datetime, policy: ForgettingPolicy | None = None
) -> list[PruneItem]:
    """`plan_prune` over columns: numpy finds the few rows that may qualify (with a margin),
    and the prune rule itself decides on each of them."""
    policy = policy or ForgettingPolicy()
    if not len(rows):
        return []
    at = now.timestamp()
    stability = policy.tau_hours * (1.0 + np.log1p(np.maximum(rows.strength, 0)))
    idle_hours = np.maximum(at - rows.last_accessed_at, 0.0) / 3600.0
    suspects = (idle_hours / stability) > (math.log(1.0 / policy.prune_below) * (1 - 1e-9))
    suspects &= (at - rows.learned_at) >= policy.min_age_hours * 3600 - 1.0
    suspects &= rows.importance < policy.protected_importance + 1e-9
    # A protected type, unless a spent intent (`forgetting.protection` decides each one).
    spent = np.array([name == SPENT for name in rows.statuses], dtype=bool)[rows.status_code]
    suspects &= rows.mask_types(policy.protected_types, keep=False) | spent
    candidates = [rows.node(p) for p in np.flatnonzero(suspects).tolist()]
    return plan_prune(candidates, now, policy)
