"""Reflection planning (SPEC §8): merge, link, rescore and prune plans over vectors, no store."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from nooa_mcp.reflection import (
    Node,
    merged_fields,
    plan_links,
    plan_merges,
    plan_prune,
    plan_rescore,
    rescore,
    similar_pairs,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
H = timedelta(hours=1)


def at_cos(base: np.ndarray, other: np.ndarray, cos: float) -> np.ndarray:
    """A unit vector at exactly `cos` from `base`, in the plane of base and other."""
    ortho = other - np.dot(other, base) * base
    ortho /= np.linalg.norm(ortho)
    return (cos * base + np.sqrt(1 - cos**2) * ortho).astype(np.float32)


def basis(dim: int = 16) -> np.ndarray:
    return np.eye(dim, dtype=np.float32)


def node(ident: str, row: int, *, hours: float = 0, **kw) -> Node:
    values = {
        "id": ident,
        "type": "info",
        "owner": "dev@a",
        "created_at": T0 + hours * H,
        "last_accessed_at": T0 + hours * H,
        "importance": 5.0,
        "authored_importance": 5.0,
        "row": row,
    }
    values.update(kw)
    return Node(**values)


def test_similar_pairs_respects_both_bounds_across_blocks():
    e = basis()
    vecs = np.stack([e[0], at_cos(e[0], e[1], 0.9), at_cos(e[0], e[2], 0.97), e[3]])
    pairs = similar_pairs(vecs, [0, 1, 2, 3], 0.8, 0.95, block=1)
    assert {(i, j) for i, j, _ in pairs} == {(0, 1), (1, 2)}


def test_merge_takes_the_oldest_as_anchor_and_all_its_near_duplicates():
    e = basis()
    vecs = np.stack([e[0], at_cos(e[0], e[1], 0.98), at_cos(e[0], e[1], 0.99), e[3]])
    nodes = [node("new", 0, hours=5), node("old", 1, hours=1), node("mid", 2, hours=3)]
    nodes.append(node("other", 3))
    items = plan_merges(nodes, vecs)
    assert {(m.anchor, m.dup) for m in items} == {("old", "new"), ("old", "mid")}


def test_merge_never_crosses_type_role_todo_status_and_skips_scratch_and_intents():
    e = basis()
    vecs = np.stack([e[0]] * 8)
    nodes = [
        node("a", 0),
        node("b", 1, type="skill"),
        node("c", 2, owner="ops@a"),
        node("d", 3, type="todo", status="open"),
        node("e", 4, type="todo", status="done"),
        node("f", 5, type="scratch"),
        node("g", 6, type="scratch", hours=1),
        node("h", 7, owner="dev@b", hours=1),  # same role, another instance: merged
    ]
    assert [(m.anchor, m.dup) for m in plan_merges(nodes, vecs)] == [("a", "h")]


def test_a_duplicate_never_becomes_an_anchor_so_chains_stay_stable():
    """A ~ B and B ~ C but not A ~ C: B joins A, C stays; replanning after the merge agrees."""
    e = basis()
    a = e[0]
    b = at_cos(a, e[1], 0.97)
    c = at_cos(b, e[2], 0.97)
    assert float(a @ c) < 0.95
    vecs = np.stack([a, b, c])
    nodes = [node("A", 0), node("B", 1, hours=1), node("C", 2, hours=2)]
    assert [(m.anchor, m.dup) for m in plan_merges(nodes, vecs)] == [("A", "B")]
    after = [nodes[0], dataclasses.replace(nodes[1], archived=True), nodes[2]]
    assert plan_merges(after, vecs) == []


def test_merged_fields_follow_the_spec():
    anchor = node("a", 0, strength=2, reinforcement_count=1, salience=0.3, confidence=0.5)
    dup = node("d", 1, strength=3, reinforcement_count=2, importance=8, salience=1.0)
    assert merged_fields(anchor, dup) == {
        "reinforcement_count": 4,
        "strength": 5,
        "importance": 8,
        "authored_importance": 5.0,
        "salience": 1.0,
        "confidence": 0.75,
    }


def test_links_use_the_band_weight_cosine_and_skip_linked_pairs():
    e = basis()
    vecs = np.stack([e[0], at_cos(e[0], e[1], 0.85), at_cos(e[0], e[2], 0.82), e[3]])
    nodes = [node(x, i) for i, x in enumerate("abcd")]
    items = plan_links(nodes, vecs, linked={frozenset(("a", "c"))})
    assert [(i.a, i.b, i.weight) for i in items] == [("a", "b", pytest.approx(0.85, abs=1e-4))]


def test_links_cap_new_related_edges_per_node_counting_existing_ones():
    """SPEC §8: ≤ 5 new edges per node per pass; the hub takes its 5 strongest neighbours."""
    e = basis()
    hub = e[0]
    spokes = [at_cos(hub, e[i + 1], 0.80 + i / 100) for i in range(8)]
    # Spoke–spoke cosines are products (≤ 0.87² < 0.80): only hub–spoke pairs are in the band.
    vecs = np.stack([hub, *spokes])
    nodes = [node("hub", 0)] + [node(f"s{i}", i + 1) for i in range(8)]
    items = plan_links(nodes, vecs)
    assert sorted(i.b for i in items) == ["s3", "s4", "s5", "s6", "s7"]
    resumed = plan_links(nodes, vecs, related={"hub": {"s7", "s6"}})
    assert len(resumed) == 3


def test_a_resumed_link_plan_adds_exactly_the_rest():
    rng = np.random.default_rng(1)
    base = rng.normal(size=(1, 32)).astype(np.float32)
    vecs = base + 0.35 * rng.normal(size=(30, 32)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    nodes = [node(f"n{i:02d}", i) for i in range(30)]
    full = plan_links(nodes, vecs)
    assert full, "the fixture must produce links"
    for cut in (1, len(full) // 2, len(full) - 1):
        related: dict[str, set[str]] = {}
        linked: set[frozenset[str]] = set()
        for item in full[:cut]:
            related.setdefault(item.a, set()).add(item.b)
            related.setdefault(item.b, set()).add(item.a)
            linked.add(frozenset((item.a, item.b)))
        assert plan_links(nodes, vecs, related, linked) == full[cut:]


def test_rescore_is_idempotent_and_keeps_authored_high_importance_at_eight_or_more():
    assert rescore(5, 0.3, 1) == 5.0
    assert rescore(5, 1.0, 1) == 6.4
    assert rescore(5, 0.3, 17) == 7.0
    assert rescore(8, 0.0, 1) == 8.0
    assert rescore(10, 1.0, 100) == 10.0
    nodes = [
        node("a", 0, authored_importance=5, importance=9, salience=0.0, strength=4),
        node("b", 1, authored_importance=9, importance=3, salience=0.0),
        node("c", 2, authored_importance=3, importance=3),
    ]
    items = plan_rescore(nodes)
    assert [(i.id, i.new) for i in items] == [("a", 5.4), ("b", 8.4)]
    applied = [
        dataclasses.replace(n, importance=rescore(n.authored_importance, n.salience, n.strength))
        for n in nodes
    ]
    assert plan_rescore(applied) == []


def test_prune_plan_orders_by_retention_and_skips_archived():
    now = T0 + 200 * 24 * H
    nodes = [
        node("older", 0),
        node("newer", 1, hours=24),
        node("gone", 2, archived=True),
        node("fresh", 3, hours=200 * 24 - 1),
    ]
    assert [p.id for p in plan_prune(nodes, now)] == ["older", "newer"]
