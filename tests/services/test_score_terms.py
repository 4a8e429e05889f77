"""A score can be checked from what explain prints: its terms add up to it.

The parts a row reports (rel, rec, imp) are raw; the score takes each min-max scaled over the
query's candidates and weighted, recency and importance times the relevance gate, then adds
spreading and takes penalties off (DESIGN.md §5.5). `terms` are those summands, so a reader (or
a model) can see what made one memory outrank another: a stale memory's penalty, a replaced
memory's drop below what replaced it, spreading over a link.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from mcp import Client

from nooa_mcp import Memory
from nooa_mcp.config import Settings
from nooa_mcp.domain.replies import ExplainRow, ScoreTerms
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp.server import build_server

pytestmark = pytest.mark.anyio
QUERY = "staging cluster worker nodes"


def total(t: ScoreTerms) -> float:
    return round(t.rel + t.rec + t.imp + t.spread + t.penalty + t.order, 4)


async def fill(mem: Memory) -> dict[str, str]:
    past = datetime.now(UTC) - timedelta(days=3)
    ids = {
        "old": (await mem.author("The staging cluster has three worker nodes")).id,
        "ended": (await mem.author("Staging cluster worker nodes run Debian 11", valid_to=past)).id,
        "vital": (
            await mem.author("Staging cluster worker nodes page the on-call", importance="HIGH")
        ).id,
        "aside": (await mem.author("Lunch orders are due by eleven on Fridays")).id,
    }
    ids["new"] = (
        await mem.author(
            "The staging cluster has five worker nodes since the upgrade",
            links=[{"target": ids["old"], "relation": "refines"}],
        )
    ).id
    ids["linked"] = (
        await mem.author(
            "The upgrade runbook lives in the ops wiki",
            links=[{"target": ids["new"], "relation": "causes"}],
        )
    ).id
    return ids


async def test_every_rows_terms_add_up_to_its_score_and_name_its_penalties(tmp_path) -> None:
    async with Memory.open(tmp_path / "m.sqlite", owner="me", embedder=HashEmbedder()) as mem:
        ids = await fill(mem)
        result = await mem.explain(QUERY, k=10)
        # Spreading: the runbook "causes" the upgraded cluster's note, which it brings in.
        spreading = await mem.explain("upgrade runbook ops wiki", k=10)
        s = mem.settings.recall
    rows: dict[str, ExplainRow] = {r.id: r for r in result.rows}
    assert {ids["old"], ids["ended"], ids["vital"], ids["new"]} <= rows.keys()
    reached = {r.id: r for r in spreading.rows}[ids["new"]]
    assert reached.terms is not None and reached.terms.spread > 0.1
    for row in [*result.rows, *spreading.rows]:
        assert row.terms is not None
        assert total(row.terms) == pytest.approx(row.score, abs=1e-9), row
        # Each base term is at most its weight (a part scaled to [0, 1], gated by ≤ 1).
        assert 0 <= row.terms.rel <= s.a_rel and 0 <= row.terms.rec <= s.a_rec
        assert 0 <= row.terms.imp <= s.a_imp
        assert row.terms.spread == pytest.approx(s.gamma * row.spread, abs=1e-4)  # raw part
        if row.id != ids["old"]:  # only a replaced memory is moved below another
            assert abs(row.terms.order) <= 1e-4, row  # the rest is the rounding
    assert rows[ids["ended"]].terms.penalty == -s.stale_penalty
    assert rows[ids["old"]].terms.penalty == -s.superseded_penalty
    assert rows[ids["vital"]].terms.penalty == 0 and rows[ids["new"]].terms.penalty == 0
    # The best relevance scales to 1: its rel term is the whole weight.
    best = max(result.rows, key=lambda r: r.rel)
    assert best.terms.rel == pytest.approx(s.a_rel, abs=1e-4)
    # Importance shows where the raw part could not: HIGH against MEDIUM, relevance alike.
    assert rows[ids["vital"]].terms.imp > rows[ids["new"]].terms.imp


async def test_why_not_gives_both_scores_terms(tmp_path) -> None:
    async with Memory.open(tmp_path / "m.sqlite", owner="me", embedder=HashEmbedder()) as mem:
        ids = await fill(mem)
        answer = (await mem.explain(QUERY, memory_id=ids["ended"], k=1)).why_not
    assert answer is not None and not answer.in_top_k
    assert answer.terms is not None and answer.kth_terms is not None
    assert total(answer.terms) == pytest.approx(answer.score, abs=1e-9)
    assert total(answer.kth_terms) == pytest.approx(answer.kth_score, abs=1e-9)
    assert answer.terms.penalty < 0 == answer.kth_terms.penalty


async def test_the_models_text_says_what_each_score_adds_up_to(tmp_path) -> None:
    settings = Settings(store=tmp_path / "m.sqlite", owner="me")
    server = build_server(settings, embedder=HashEmbedder())
    async with Client(server) as client:
        for text in (
            "The staging cluster has three worker nodes",
            "Staging cluster worker nodes page the on-call",
        ):
            await client.call_tool("memory_author", {"content": text})
        result = await client.call_tool("memory_explain", {"query": QUERY})
    lines = [x for x in result.content[0].text.splitlines() if x[:1].isdigit()]
    rows = result.structured_content["rows"]
    assert len(lines) == len(rows) >= 2
    for line, row in zip(lines, rows, strict=True):
        said = re.search(r"score ([\d.]+) \(= ([\d.]+) rel \+ ([\d.]+) rec \+ ([\d.]+) imp", line)
        assert said is not None, line
        t = row["terms"]
        printed = [float(x) for x in said.groups()]
        assert printed == pytest.approx([row["score"], t["rel"], t["rec"], t["imp"]], abs=0.005)


async def test_why_not_names_what_a_penalty_stands_for_inside_the_top_k_too(tmp_path) -> None:
    """A superseded or ended memory in the top k: the reason says which penalty, and by which
    memory, not only "- 1 penalty" in the terms."""
    async with Memory.open(tmp_path / "m.sqlite", owner="me", embedder=HashEmbedder()) as mem:
        ids = await fill(mem)
        old = (await mem.explain(QUERY, memory_id=ids["old"], k=10)).why_not
        ended = (await mem.explain(QUERY, memory_id=ids["ended"], k=10)).why_not
        new = (await mem.explain(QUERY, memory_id=ids["new"], k=10)).why_not
    assert old is not None and old.in_top_k and old.terms.penalty < 0
    # The penalty leads: it is why the memory ranks where it does.
    assert old.reason.startswith(f"It is superseded by {ids['new'][:8]} (a newer memory refines")
    assert ended is not None and ended.in_top_k
    assert ended.reason.startswith("Its validity ended (valid_to is past): a penalty. It ranks")
    assert new is not None and "superseded" not in new.reason and "penalty" not in new.reason
