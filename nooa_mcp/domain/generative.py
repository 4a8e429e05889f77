"""Generative reflection: reconcile and abstract through a Sampler (DESIGN.md §8.3, §8.6).

The model is never ours: a `Sampler` asks the connected client's model (MCP
`sampling/createMessage`), so no API key is needed anywhere. Everything the model returns is
treated as untrusted text: it must parse as the JSON asked for, ids outside the cluster are
ignored, and a malformed reply makes the item fail alone (the pass goes on).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .reflection import Node
from .sampling import MalformedReply, SamplingUnavailable
from .similarity import sweep

__all__ = [
    "ABSTRACT_BATCH",
    "ABSTRACT_MAX",
    "CLUSTER_MAX",
    "CLUSTER_SIMILARITY",
    "MAX_CLUSTERS",
    "Abstraction",
    "MalformedReply",
    "Reconciliation",
    "SamplingUnavailable",
    "abstract_prompt",
    "cluster_reach",
    "clusters_from_neighbours",
    "parse_abstraction",
    "parse_reconciliation",
    "plan_abstract",
    "plan_clusters",
    "reconcile_prompt",
]

CLUSTER_SIMILARITY = 0.6
CLUSTER_MAX = 6
MAX_CLUSTERS = 10
ABSTRACT_BATCH = 50
ABSTRACT_MAX = 5
MAX_CONTENT = 4000
RECONCILED_TYPES = frozenset({"info", "skill", "reflection"})

SYSTEM = (
    "You curate an agent's long-term memory. Answer with one JSON object and nothing else. "
    "Use only the ids you are shown."
)


@dataclass(frozen=True)
class Reconciliation:
    """A consolidated memory and the cluster members it replaces."""

    content: str
    title: str
    supersedes: list[str]
    sources: list[str]
    ignored_ids: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Abstraction:
    """One insight distilled from episodes, with the episodes it rests on."""

    content: str
    title: str
    sources: list[str]


# --------------------------------------------------------------------------- planning


def plan_clusters(
    nodes: Sequence[Node],
    vectors: np.ndarray,
    consolidated: set[str] | None = None,
    threshold: float = CLUSTER_SIMILARITY,
    max_members: int = CLUSTER_MAX,
    max_clusters: int = MAX_CLUSTERS,
) -> list[list[Node]]:
    """Clusters of related facts for reconcile: cosine ≥ 0.6 to a seed, ≤ 6 members, ≤ 10 clusters.

    Seeds are taken in order of how many neighbours they have (then oldest); each member joins
    one cluster. A cluster needs two members and at least one not yet `consolidated` (a product
    or source of an earlier reconcile), so a settled cluster is not handed to the model again.
    """
    consolidated = consolidated or set()
    live = [n for n in nodes if not n.archived and n.type in RECONCILED_TYPES]
    if len(live) < 2:
        return []
    roles: dict[str, int] = {}
    groups = np.array([roles.setdefault(n.role, len(roles)) for n in live])
    found = sweep(
        vectors,
        np.array([n.row for n in live]),
        threshold,
        groups=groups,
        cap=0,
        neighbours=(threshold, cluster_reach(max_members, max_clusters), np.ones(len(live), bool)),
    ).neighbours
    assert found is not None
    keys = [(n.role, n.created_at.timestamp(), n.id) for n in live]
    settled = [n.id in consolidated for n in live]
    clusters = clusters_from_neighbours(
        keys, found.count, found.top, found.top_cos, settled, max_members, max_clusters
    )
    return [[live[p] for p in members] for members in clusters]


def cluster_reach(max_members: int = CLUSTER_MAX, max_clusters: int = MAX_CLUSTERS) -> int:
    """Strongest neighbours per row that planning needs: earlier clusters take at most
    (max_clusters − 1)·max_members rows, and a seed needs max_members − 1 more."""
    return (max_clusters - 1) * max_members + max_members - 1


def clusters_from_neighbours(
    keys: Sequence[tuple],
    count: np.ndarray,
    top: np.ndarray,
    top_cos: np.ndarray,
    settled: Sequence[bool],
    max_members: int = CLUSTER_MAX,
    max_clusters: int = MAX_CLUSTERS,
) -> list[list[int]]:
    """`plan_clusters` from a sweep's neighbour lists: clusters as lists of positions.

    Args:
        keys: (role, created_at, id) per position: seeds go role by role, most neighbours
            first, then oldest; members strongest first, then oldest.
        count, top, top_cos: each position's neighbour count and strongest neighbours (−1:
            none), as `similarity.sweep` gives them.
        settled: whether each position is already consolidated.
    """
    seeds = sorted(
        np.flatnonzero(count > 0).tolist(), key=lambda p: (keys[p][0], -count[p], keys[p])
    )
    taken: set[int] = set()
    clusters: list[list[int]] = []
    for seed in seeds:
        if seed in taken:
            continue
        near = [
            (-float(c), keys[q], q)
            for q, c in zip(top[seed].tolist(), top_cos[seed].tolist(), strict=True)
            if q >= 0
        ]
        members = [seed]
        for _, _, q in sorted(near):
            if q not in taken and q != seed and len(members) < max_members:
                members.append(q)
        if len(members) < 2 or all(settled[m] for m in members):
            continue
        taken.update(members)
        clusters.append(members)
        if len(clusters) >= max_clusters:
            break
    return clusters


def plan_abstract(
    episodes: Sequence[Node], abstracted: set[str] | None = None, batch: int = ABSTRACT_BATCH
) -> list[Node]:
    """Up to 50 live episodes not yet abstracted, oldest first (DESIGN.md §8.6)."""
    abstracted = abstracted or set()
    pool = [
        n for n in episodes if n.type == "episode" and not n.archived and n.id not in abstracted
    ]
    pool.sort(key=lambda n: (n.created_at, n.id))
    return pool[:batch]


# --------------------------------------------------------------------------- prompts


def _listing(members: Sequence[tuple[str, str]]) -> str:
    return "\n".join(f"[{ident[:8]}] {' '.join(text.split())[:800]}" for ident, text in members)


def reconcile_prompt(members: Sequence[tuple[str, str]]) -> str:
    """The reconcile request for a cluster of (id, content)."""
    return (
        "These memories are about the same subject. Write one memory that states what is true "
        "now, keeping every distinct fact and resolving contradictions in favour of the newer "
        "or better supported statement. Then list the ids it makes redundant.\n\n"
        f"{_listing(members)}\n\n"
        'Reply as JSON: {"title": "...", "content": "...", "supersedes": ["<id>", ...]}. '
        'If nothing should change, reply {"content": null}.'
    )


def abstract_prompt(episodes: Sequence[tuple[str, str]], limit: int = ABSTRACT_MAX) -> str:
    """The abstract request for a batch of (id, content) episodes."""
    return (
        f"These are episodes of an agent's work. Write at most {limit} insights that would help "
        "next time: patterns, causes of failure, what worked. Each insight cites the episodes it "
        "rests on.\n\n"
        f"{_listing(episodes)}\n\n"
        'Reply as JSON: {"reflections": [{"title": "...", "content": "...", '
        '"sources": ["<id>", ...]}]}. If there is nothing worth keeping, reply {"reflections": []}.'
    )


# --------------------------------------------------------------------------- replies


def _json_object(reply: str) -> dict:
    text = reply.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.DOTALL)
    if fenced:
        text = fenced.group(1).strip()
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise MalformedReply("the reply holds no JSON object")
    try:
        value = json.loads(text[start : end + 1])
    except json.JSONDecodeError as exc:
        raise MalformedReply(f"the reply is not valid JSON ({exc.msg})") from None
    if not isinstance(value, dict):
        raise MalformedReply("the reply is not a JSON object")
    return value


def _text(value: object, name: str, limit: int) -> str:
    # A NUL from the client's model would be refused from any author (no PostgreSQL text
    # column holds one): it is dropped, the rest of the reply kept.
    if isinstance(value, str):
        value = value.replace("\x00", "")
    if not isinstance(value, str) or not value.strip():
        raise MalformedReply(f"'{name}' is not a non-empty string")
    return value.strip()[:limit]


def _match_ids(raw: object, allowed: Sequence[str]) -> tuple[list[str], list[str]]:
    """Map the ids the model cited onto `allowed` (full ids or ≥ 6-char prefixes)."""
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        raise MalformedReply("an id list is not a list")
    matched: list[str] = []
    ignored: list[str] = []
    for item in raw:
        key = str(item).strip().lower().strip("[]")
        hits = [a for a in allowed if len(key) >= 6 and a.startswith(key)]
        if len(hits) == 1:
            if hits[0] not in matched:
                matched.append(hits[0])
        else:
            ignored.append(str(item)[:40])
    return matched, ignored


def parse_reconciliation(reply: str, cluster_ids: Sequence[str]) -> Reconciliation | None:
    """Validate a reconcile reply; None when the model says nothing should change.

    Ids that are not in the cluster (hallucinated or foreign) are ignored and reported.

    Raises:
        MalformedReply: the reply is not the JSON asked for.
    """
    data = _json_object(reply)
    if data.get("content") is None:
        return None
    content = _text(data.get("content"), "content", MAX_CONTENT)
    title = data.get("title")
    title = title.replace("\x00", "").strip()[:200] if isinstance(title, str) else ""
    supersedes, ignored = _match_ids(data.get("supersedes"), cluster_ids)
    return Reconciliation(content, title, supersedes, list(cluster_ids), ignored)


def parse_abstraction(
    reply: str, episode_ids: Sequence[str], limit: int = ABSTRACT_MAX
) -> list[Abstraction]:
    """Validate an abstract reply: at most `limit` insights, each citing episodes of the batch.

    An insight whose sources are all outside the batch is dropped (it rests on nothing shown).

    Raises:
        MalformedReply: the reply is not the JSON asked for.
    """
    data = _json_object(reply)
    items = data.get("reflections")
    if not isinstance(items, list):
        raise MalformedReply("'reflections' is not a list")
    out: list[Abstraction] = []
    for item in items:
        if len(out) >= limit:
            break
        if not isinstance(item, dict):
            continue
        try:
            content = _text(item.get("content"), "content", MAX_CONTENT)
            sources, _ = _match_ids(item.get("sources"), episode_ids)
        except MalformedReply:
            continue
        if not sources:
            continue
        title = item.get("title")
        out.append(
            Abstraction(
                content,
                title.replace("\x00", "").strip()[:200] if isinstance(title, str) else "",
                sources,
            )
        )
    return out
