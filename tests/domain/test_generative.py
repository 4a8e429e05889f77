"""Generative reflection (DESIGN.md §8.3 reconcile, §8.6 abstract): cluster planning and
untrusted-reply parsing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from nooa_mcp.domain.generative import (
    MalformedReply,
    abstract_prompt,
    parse_abstraction,
    parse_reconciliation,
    plan_abstract,
    plan_clusters,
    reconcile_prompt,
)
from nooa_mcp.domain.reflection import Node

T0 = datetime(2026, 1, 1, tzinfo=UTC)
A, B, C = "a" * 32, "b" * 32, "c" * 32


def node(ident: str, row: int, **kw) -> Node:
    values = {
        "id": ident,
        "type": "info",
        "owner": "dev",
        "created_at": T0 + timedelta(hours=row),
        "last_accessed_at": T0,
        "importance": 5.0,
        "authored_importance": 5.0,
        "row": row,
    }
    values.update(kw)
    return Node(**values)


def test_clusters_group_neighbours_at_06_and_cap_members():
    e = np.eye(8, dtype=np.float32)
    close = [(0.8 * e[0] + 0.6 * e[i]) for i in range(1, 8)]
    vecs = np.stack([e[0], *close])
    nodes = [node(f"{i:032x}", i) for i in range(8)]
    clusters = plan_clusters(nodes, vecs)
    assert [len(c) for c in clusters] == [6, 2]
    assert clusters[0][0].id == nodes[0].id  # the hub seeds the first cluster
    assert len({n.id for c in clusters for n in c}) == 8


def test_a_settled_cluster_is_not_handed_back():
    vecs = np.stack([np.eye(4, dtype=np.float32)[0]] * 2)
    nodes = [node(A, 0), node(B, 1)]
    assert plan_clusters(nodes, vecs, consolidated={A, B}) == []
    assert len(plan_clusters(nodes, vecs, consolidated={A})) == 1


def test_clusters_skip_episodes_todos_and_scratch():
    vecs = np.stack([np.eye(4, dtype=np.float32)[0]] * 3)
    nodes = [node(A, 0, type="episode"), node(B, 1, type="scratch"), node(C, 2)]
    assert plan_clusters(nodes, vecs) == []


def test_reconcile_reply_keeps_cluster_ids_and_ignores_hallucinated_ones():
    reply = (
        'Sure!\n```json\n{"title": "Deploy", "content": "Deploys run from CI.", '
        '"supersedes": ["aaaaaaaa", "deadbeef", "cccccccc", 7]}\n```'
    )
    rec = parse_reconciliation(reply, [A, B])
    assert rec is not None
    assert rec.supersedes == [A]
    assert rec.ignored_ids == ["deadbeef", "cccccccc", "7"]
    assert rec.content == "Deploys run from CI."


def test_reconcile_reply_with_null_content_means_nothing_changes():
    assert parse_reconciliation('{"content": null}', [A, B]) is None


@pytest.mark.parametrize(
    "reply",
    [
        "I think these are fine.",
        '{"content": ',
        '["a"]',
        '{"content": 42}',
        '{"content": "x", "supersedes": "aaaaaaaa"}',
    ],
)
def test_malformed_reconcile_replies_raise_malformed_reply(reply):
    with pytest.raises(MalformedReply):
        parse_reconciliation(reply, [A, B])


def test_abstraction_drops_insights_without_valid_sources_and_caps_the_count():
    items = [{"content": f"insight {i}", "sources": [A[:8]]} for i in range(7)]
    items.insert(0, {"content": "floating", "sources": ["ffffffff"]})
    items.insert(1, "not an object")
    import json

    out = parse_abstraction(json.dumps({"reflections": items}), [A, B])
    assert [a.content for a in out] == [f"insight {i}" for i in range(5)]
    assert all(a.sources == [A] for a in out)
    with pytest.raises(MalformedReply):
        parse_abstraction('{"reflections": "none"}', [A])


def test_plan_abstract_takes_unabstracted_episodes_oldest_first():
    eps = [node(f"{i:032x}", i, type="episode") for i in range(60)]
    batch = plan_abstract(eps, abstracted={eps[0].id})
    assert len(batch) == 50
    assert batch[0].id == eps[1].id


def test_prompts_show_short_ids_and_ask_for_json():
    assert "[aaaaaaaa] one" in reconcile_prompt([(A, "one")])
    assert '"reflections"' in abstract_prompt([(A, "did a thing")])
