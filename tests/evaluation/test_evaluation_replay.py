"""Replay of recorded recalls under other weights, on streams built here."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from click.testing import CliRunner

from nooa_mcp.cli import main
from nooa_mcp.config import RecallSettings
from nooa_mcp.domain.schema import AccessRecord, Channel, Components
from nooa_mcp.evaluation.replay import group_events, replay, rerank, used_later

T = datetime(2026, 1, 1, tzinfo=UTC)


def hit(query: str, rank: int, rel: float, rec: float, imp: float = 0.5) -> AccessRecord:
    comps = Components(source="dense", rel=rel, rec=rec, imp=imp)
    return AccessRecord(ts=T, channel=Channel.recalled, query=query, rank=rank, components=comps)


def stream() -> list[tuple[int, str, AccessRecord]]:
    """Two recalls of two rows each; afterwards the agent updates 'b', the lower-ranked
    but more recently used row of the first recall."""
    return [
        (1, "a", hit("deploy", 1, rel=0.9, rec=0.0)),
        (2, "b", hit("deploy", 2, rel=0.8, rec=0.9)),
        (3, "c", hit("owner", 1, rel=0.7, rec=0.1)),
        (4, "a", hit("owner", 2, rel=0.6, rec=0.0)),
        (5, "b", AccessRecord(ts=T, channel=Channel.reinforced)),
    ]


def test_events_are_rebuilt_from_consecutive_ranks_of_one_query():
    events = group_events(stream())
    assert [(e.query, [m for m, _ in e.rows]) for e in events] == [
        ("deploy", ["a", "b"]),
        ("owner", ["c", "a"]),
    ]


def test_a_memory_counts_as_used_after_an_update_or_a_recall_by_another_query():
    events = group_events(stream())
    assert used_later(events, stream()) == [{"a", "b"}, set()]


def test_rerank_follows_the_weights_given():
    event = group_events(stream())[0]
    assert rerank(event, RecallSettings(a_rec=0.0)) == ["a", "b"]
    assert rerank(event, RecallSettings(a_rec=2.0)) == ["b", "a"]


def test_replay_reports_how_used_memories_move_per_weight_set():
    report = replay(stream(), RecallSettings(a_rec=0.0), {"recorded": {}, "rec": {"a_rec": 2.0}})
    assert report.events == 2 and report.events_with_use == 1 and report.used == 2
    assert report.results["shown"]["mean_rank"] == 1.5
    assert report.results["rec"]["up"] == 1 and report.results["rec"]["down"] == 1


def test_eval_replay_synthetic_plays_a_made_up_workload_on_a_fresh_machine():
    result = CliRunner().invoke(
        main, ["eval", "replay", "--synthetic", "--embedder", "hash", "--sessions", "4", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["events"] > 0
    assert {"shown", "recorded", "-rec", "rel only"} <= set(data["weights"])
