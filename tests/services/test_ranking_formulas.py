"""The scoring maths and the ranking built on it, on numbers worked out by hand.

The formulas of DESIGN.md §5 are checked on numbers worked out by hand here, and the vectorised
base-level against the scalar one it must equal row for row, on rows of every shape (no
accesses, fewer accesses than logged, a first access at the newest one, ages under the grain).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
import time_machine

from nooa_mcp import Memory, Settings
from nooa_mcp.config import RecallSettings
from nooa_mcp.domain import scoring
from nooa_mcp.domain.scoring import OutEdge, Weights
from nooa_mcp.embeddings import HashEmbedder

#: B of a memory never accessed (DESIGN §17.1 `NO_ACCESS_B`), stated here, not imported.
NO_ACCESS_B = -10

# --------------------------------------------------------------------------- overlaps


def test_jaccard_and_overlap_are_zero_when_either_set_is_empty():
    for fn in (scoring.jaccard, scoring.overlap_coefficient):
        assert fn(set(), set()) == 0.0
        assert fn({"a"}, set()) == 0.0
        assert fn(set(), {"a"}) == 0.0


def test_overlap_divides_by_the_smaller_set():
    assert scoring.overlap_coefficient({"a", "b"}, {"b", "c", "d", "e"}) == 0.5
    assert scoring.overlap_coefficient({"b", "c", "d", "e"}, {"a", "b"}) == 0.5
    assert scoring.jaccard({"a", "b"}, {"b", "c", "d", "e"}) == 0.2


# --------------------------------------------------------------------------- relevance


def test_relevance_without_lex_is_lambda_cosine_plus_the_rest_overlap():
    rel = scoring.relevance(np.array([0.5, 1.5, -0.3]), np.array([1.0, 0.0, 0.5]))
    assert rel.tolist() == pytest.approx([0.7 * 0.5 + 0.3, 0.7, 0.3 * 0.5])


def test_relevance_with_lex_gives_lex_the_rest_and_overlap_its_own_weight():
    rel = scoring.relevance(
        np.array([0.5, 2.0]), np.array([1.0, 0.5]), 0.5, lex=np.array([0.2, 1.0]), mu=0.3
    )
    assert rel.tolist() == pytest.approx([0.25 + 0.1 + 0.3, 0.5 + 0.5 + 0.15])
    no_mu = scoring.relevance(np.array([0.5]), np.array([1.0]), 0.5, lex=np.array([0.2]))
    assert no_mu.tolist() == pytest.approx([0.35])


# --------------------------------------------------------------------------- base level


def test_the_exact_base_level_sums_ages_floored_at_the_grain():
    assert scoring.base_level_exact([4.0, 16.0]) == pytest.approx(math.log(0.5 + 0.25))
    assert scoring.base_level_exact([0.5], grain=2.0) == pytest.approx(math.log(2**-0.5))
    assert scoring.base_level_exact([100.0], d=1.0) == pytest.approx(math.log(0.01))


def test_the_base_level_of_the_newest_ages_alone_is_their_exact_sum():
    assert scoring.base_level([16.0, 4.0], 2, 16.0) == pytest.approx(math.log(0.75))
    assert scoring.base_level([0.25], 1, None, grain=4.0) == pytest.approx(math.log(0.5))
    assert scoring.base_level([9.0], 1, 9.0, d=1.0) == pytest.approx(math.log(1 / 9))
    assert scoring.base_level([4.0], 0, 4.0) == NO_ACCESS_B
    assert scoring.base_level([4.0], -1, 4.0) == NO_ACCESS_B


def test_the_older_accesses_are_spread_evenly_between_the_kth_and_the_first():
    # k = 1 newest at 4 s, n = 3, first at 16 s: 2·(16^0.5 − 4^0.5) / (0.5·12) = 2/3.
    assert scoring.base_level([4.0], 3, 16.0) == pytest.approx(math.log(0.5 + 2 / 3))
    # The ages need not come sorted: the k-th newest is the oldest of them.
    assert scoring.base_level([4.0, 1.0], 4, 16.0) == pytest.approx(math.log(1 + 0.5 + 2 * 2 / 6))
    # No first age, or one at the k-th: the older ones count as old as the k-th.
    assert scoring.base_level([4.0], 3, None) == pytest.approx(math.log(3 * 0.5))
    assert scoring.base_level([4.0], 3, 4.0) == pytest.approx(math.log(3 * 0.5))
    assert scoring.base_level([4.0], 3, 2.0) == pytest.approx(math.log(3 * 0.5))


CASES = [
    ([], 0, None),
    ([], 5, 100.0),
    ([3600.0], 1, 3600.0),
    ([0.2], 1, None),
    ([7200.0, 10.0], 2, 7200.0),
    ([10.0, 100.0, 1000.0], 40, 86400.0),
    ([50.0], 9, None),
    ([50.0], 9, 50.0),
    ([50.0], 9, 20.0),
    ([5.0, 5.0], 3, 5.0 + 1e-9),
    ([1e6], 0, 1e6),
]


@pytest.mark.parametrize("d", [0.5, 0.3])
@pytest.mark.parametrize("grain", [1.0, 60.0])
def test_the_vectorised_base_level_equals_the_scalar_one_row_for_row(d, grain):
    ages = [a for a, _, _ in CASES]
    counts = [n for _, n, _ in CASES]
    firsts = [f for _, _, f in CASES]
    got = scoring.base_levels(ages, counts, firsts, d, grain)
    want = [scoring.base_level(a, n, f, d, grain) for a, n, f in CASES]
    assert got.tolist() == pytest.approx(want)


def test_the_vectorised_base_level_of_no_rows_or_no_ages_is_the_floor():
    assert scoring.base_levels([], [], []).tolist() == []
    assert scoring.base_levels([[], []], [3, 0], [None, 5.0]).tolist() == [NO_ACCESS_B] * 2


def test_the_vectorised_base_level_uses_its_defaults():
    got = scoring.base_levels([[0.25, 16.0]], [2], [16.0])
    assert got.tolist() == pytest.approx([math.log(1 + 0.25)])


def test_sigmoid_is_the_logistic_function():
    assert scoring.sigmoid(0.0) == pytest.approx(0.5)
    assert scoring.sigmoid(np.array([math.log(3), -math.log(3)])).tolist() == pytest.approx(
        [0.75, 0.25]
    )


# --------------------------------------------------------------------------- normalisation


def test_minmax_over_a_given_range_clips_rows_outside_it():
    got = scoring.minmax(np.array([0.0, 0.5, 1.5]), lo=0.25, hi=1.25)
    assert got.tolist() == pytest.approx([0.0, 0.25, 1.0])
    assert scoring.minmax(np.array([])).tolist() == []


def test_minmax_divides_by_at_least_the_minimum_span():
    got = scoring.minmax(np.array([0.5, 0.6]), min_span=0.5)
    assert got.tolist() == pytest.approx([0.0, 0.2])
    assert scoring.minmax(np.array([0.0, 2.0]), min_span=0.5).tolist() == pytest.approx([0, 1])


def test_minmax_of_one_value_keeps_it_clipped_to_zero_one():
    assert scoring.minmax(np.array([1.7, 1.7])).tolist() == [1.0, 1.0]
    assert scoring.minmax(np.array([-0.5])).tolist() == [0.0]
    assert scoring.minmax(np.array([0.4]), lo=0.4, hi=0.4).tolist() == [0.4]


def test_the_relevance_gate_is_relevance_over_the_best():
    assert scoring.relevance_gate(np.array([0.2, 0.8, 0.4])).tolist() == pytest.approx(
        [0.25, 1.0, 0.5]
    )
    assert scoring.relevance_gate(np.array([0.2, 0.8]), best=0.4).tolist() == [0.5, 1.0]
    assert scoring.relevance_gate(np.array([0.0, 0.0])).tolist() == [0.0, 0.0]
    assert scoring.relevance_gate(np.array([0.3]), best=0.0).tolist() == [0.0]
    assert scoring.relevance_gate(np.array([0.3]), best=-1.0).tolist() == [0.0]
    assert scoring.relevance_gate(np.array([])).tolist() == []


def test_base_scores_gate_usage_by_relevance():
    w = Weights(a_rel=1.0, a_rec=0.5, a_imp=0.25)
    rel, rec, imp = np.array([1.0, 0.2]), np.array([0.4, 1.0]), np.array([0.8, 1.0])
    ungated = scoring.base_scores(rel, rec, imp, w)
    assert ungated.tolist() == pytest.approx([1.0 + 0.2 + 0.2, 0.2 + 0.5 + 0.25])
    gated = scoring.base_scores(rel, rec, imp, w, np.array([1.0, 0.5]))
    assert gated.tolist() == pytest.approx([1.4, 0.2 + 0.5 * 0.75])


def test_the_default_weights_are_those_of_the_spec():
    assert Weights() == Weights(a_rel=1.0, a_rec=0.5, a_imp=0.5, gamma=0.5)


# --------------------------------------------------------------------------- spreading


def test_spreading_uses_its_defaults_decay_fanout_and_floor():
    edges = {"a": [OutEdge(f"t{i}", 1.0 - i / 10, 1.0, "causes") for i in range(7)]}
    reached = scoring.spread_hop({"a": 1.0}, edges)
    assert sorted(reached) == ["t0", "t1", "t2", "t3", "t4"]
    assert reached["t0"] == (pytest.approx(0.6), "a", "causes")
    low = scoring.spread_hop({"a": 0.1}, {"a": [OutEdge("b", 0.9, 1.0, "causes")]})
    assert low == {"b": (pytest.approx(0.054), "a", "causes")}
    below = scoring.spread_hop({"a": 0.08}, {"a": [OutEdge("b", 1.0, 1.0, "causes")]})
    assert below == {}


def test_a_pass_exactly_at_the_floor_is_kept():
    reached = scoring.spread_hop({"a": 0.5}, {"a": [OutEdge("b", 1.0, 1.0, "r")]}, floor=0.3)
    assert reached == {"b": (pytest.approx(0.3), "a", "r")}


def test_spreading_ranks_edges_by_weight_times_type_weight():
    edges = {"a": [OutEdge("low", 0.9, 0.6, "related"), OutEdge("high", 0.6, 1.0, "causes")]}
    reached = scoring.spread_hop({"a": 1.0}, edges, fanout=1, floor=0.0)
    assert list(reached) == ["high"]


def test_nodes_without_activation_and_edges_to_themselves_pass_nothing():
    edges = {
        "a": [OutEdge("a", 1.0, 1.0, "r"), OutEdge("b", 1.0, 1.0, "r")],
        "z": [OutEdge("c", 1.0, 1.0, "r")],
    }
    reached = scoring.spread_hop({"a": 1.0, "z": 0.0}, edges, floor=0.0)
    assert reached == {"b": (pytest.approx(0.6), "a", "r")}
    assert scoring.spread_hop({"z": -1.0}, edges, floor=0.0) == {}


def test_equally_strong_edges_keep_their_given_order_for_the_fanout():
    # The store's order (by target id) decides which of equally strong edges pass.
    edges = {"a": [OutEdge(f"t{i}", 1.0, 1.0, "r") for i in (5, 3, 9, 1, 7, 2)]}
    edges["a"].insert(2, OutEdge("strong", 2.0, 1.0, "causes"))
    reached = scoring.spread_hop({"a": 1.0}, edges, fanout=3, floor=0.0)
    assert list(reached) == ["strong", "t5", "t3"]


def test_the_first_of_two_equally_strong_parents_is_kept():
    edges = {"a": [OutEdge("c", 1.0, 1.0, "causes")], "b": [OutEdge("c", 1.0, 1.0, "refines")]}
    reached = scoring.spread_hop({"a": 1.0, "b": 1.0}, edges, decay=0.5, floor=0.0)
    assert reached == {"c": (pytest.approx(1.0), "a", "causes")}
    later_stronger = scoring.spread_hop({"a": 0.5, "b": 1.0}, edges, decay=0.5, floor=0.0)
    assert later_stronger == {"c": (pytest.approx(0.75), "b", "refines")}


# --------------------------------------------------------------------------- ranking, end to end
#
# The oracle below is DESIGN.md §5 written out again: min-max over the candidates (rec and imp
# over a span of at least 0.1), the relevance gate, the weights 1 / 0.5 / 0.5, γ·spread, and
# the stale and superseded drops of 1. It is fed the components explain reports (rounded to
# 4 places), so it checks how the ranking combines them, whatever produced them.

HOUR = 3600.0
DAY = 86400.0


def rec_of(age_seconds: float, uses: int = 1) -> float:
    """sigmoid(B) for `uses` accesses all `age_seconds` old (floored at the one-hour grain)."""
    b = math.log(uses * max(age_seconds, HOUR) ** -0.5)
    return 1 / (1 + math.exp(-b))


def scaled(value: float, pool: list[float], min_span: float) -> float:
    lo, hi = min(pool), max(pool)
    if hi - lo < 1e-12:
        return min(max(value, 0.0), 1.0)
    return min(max((value - lo) / max(hi - lo, min_span), 0.0), 1.0)


def expected_bases(rows) -> dict[str, float]:
    """S_base of every row, scaled over the candidates the query found (not spread ones)."""
    pool = [r for r in rows if r.source != "spread"]
    best = max(p.rel for p in pool)
    out = {}
    for r in rows:
        gate = min(max(r.rel / best, 0.0), 1.0) if best > 0 else 0.0
        out[r.id] = scaled(r.rel, [p.rel for p in pool], 0.0) + gate * (
            0.5 * scaled(r.rec, [p.rec for p in pool], 0.1)
            + 0.5 * scaled(r.imp, [p.imp for p in pool], 0.1)
        )
    return out


@pytest.fixture
async def ranked_store(tmp_path):
    settings = Settings(store=tmp_path / "rank.sqlite", owner="coder")
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        with time_machine.travel(datetime.now(UTC) - timedelta(days=4)):
            docker = await mem.author("deploy pipeline uses docker images", importance=2)
        ids = {
            "nightly": await mem.author("deploy pipeline runs nightly builds", importance=9),
            "docker": docker,
            "soup": await mem.author("the cafeteria serves soup on mondays"),
            "keys": await mem.author("deploy keys rotate monthly", tags=["pipeline"]),
            "old": await mem.author(
                "deploy pipeline ran on jenkins", importance=8, valid_to="2020-01-01"
            ),
            "first": await mem.author("deploy pipeline region is west", importance=10),
        }
        ids = {name: result.id for name, result in ids.items()}
        fixed = await mem.author(
            "deploy pipeline region moved east",
            importance=1,
            links=[{"target": ids["first"], "relation": "refines"}],
        )
        ids["fixed"] = fixed.id
        yield mem, ids


@pytest.mark.anyio
async def test_every_score_is_the_spec_formula_of_its_components(ranked_store):
    mem, ids = ranked_store
    result = await mem.explain("deploy pipeline", hops=0, k=20)
    rows = {r.id: r for r in result.rows}
    assert set(rows) == set(ids.values())
    base = expected_bases(result.rows)
    for r in result.rows:
        want = base[r.id] - (1.0 if r.flags.stale else 0.0)
        if r.flags.superseded_by:
            want = min(want - 1.0, rows[r.flags.superseded_by].score - 1e-6)
        assert r.score == pytest.approx(want, abs=2e-3), r.head
        assert r.spread == 0.0
    assert [n for n, i in ids.items() if rows[i].flags.stale] == ["old"]
    assert [n for n, i in ids.items() if rows[i].flags.superseded_by] == ["first"]
    assert rows[ids["first"]].flags.superseded_by == ids["fixed"]
    assert [n for n, i in ids.items() if rows[i].flags.weak] == ["soup"]
    order = [(r.flags.weak, -r.score) for r in result.rows]
    assert order == sorted(order)  # weak hits last, the rest by score
    assert [r.rank for r in result.rows] == list(range(1, len(ids) + 1))


@pytest.mark.anyio
async def test_importance_and_recency_are_read_from_the_memory(ranked_store):
    mem, ids = ranked_store
    rows = {r.id: r for r in (await mem.explain("deploy pipeline", hops=0, k=20)).rows}
    assert (rows[ids["nightly"]].imp, rows[ids["docker"]].imp) == (0.9, 0.2)
    assert rows[ids["nightly"]].rec == pytest.approx(rec_of(0), abs=1e-4)
    assert rows[ids["docker"]].rec == pytest.approx(rec_of(4 * DAY), abs=1e-4)


@pytest.mark.anyio
async def test_relevance_is_lambda_cosine_plus_the_rest_keywords_plus_mu_cues(ranked_store):
    mem, ids = ranked_store
    rows = {r.id: r for r in (await mem.explain("deploy pipeline", hops=0, k=20)).rows}
    soup = rows[ids["soup"]]  # no keyword, no cue: cosine alone
    assert soup.source == "dense"
    assert soup.rel == pytest.approx(0.5 * soup.cos, abs=1e-3)
    keyword = [r for i, r in rows.items() if i != ids["soup"]]
    assert {r.source for r in keyword} == {"both"}
    # The tag "pipeline" is the whole cue set of "keys": overlap 1, so μ·1 = 0.3 on top.
    cue = {i: 0.3 if i == ids["keys"] else 0.0 for i in rows}
    # lex is BM25 over the best one: the best keyword hit gets the full (1 − λ) = 0.5.
    lex = [(r.rel - 0.5 * r.cos - cue[r.id]) / 0.5 for r in keyword]
    assert max(lex) == pytest.approx(1.0, abs=2e-3)
    assert all(0 < x <= 1 + 2e-3 for x in lex)


@pytest.mark.anyio
async def test_keyword_only_ranking_uses_bm25_in_place_of_the_cosine(tmp_path):
    settings = Settings(
        store=tmp_path / "kw.sqlite", owner="coder", recall=RecallSettings(use_dense=False)
    )
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        for text in ["deploy deploy pipeline", "deploy notes", "lunch menu"]:
            await mem.author(text)
        result = await mem.explain("deploy", hops=0, k=10)
    assert [r.head for r in result.rows] == ["deploy deploy pipeline", "deploy notes"]
    assert {(r.source, r.cos) for r in result.rows} == {("sparse", None)}
    # semantic = lex, so rel = λ·lex + (1 − λ)·lex = lex: 1 for the best keyword hit.
    assert result.rows[0].rel == 1.0
    assert 0 < result.rows[1].rel < 1.0


@pytest.mark.anyio
async def test_dense_only_ranking_keeps_cosines_above_the_floor(tmp_path):
    settings = Settings(
        store=tmp_path / "dn.sqlite",
        owner="coder",
        recall=RecallSettings(use_sparse=False, min_similarity=0.3),
    )
    texts = ["deploy pipeline nightly", "deploy pipeline docker", "lunch menu on fridays"]
    query = "deploy pipeline"
    vectors = HashEmbedder().embed([query, *texts])
    cosines = {t: float(vectors[0] @ v) for t, v in zip(texts, vectors[1:], strict=True)}
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        for text in texts:
            await mem.author(text)
        rows = (await mem.explain(query, hops=0, k=10)).rows
    assert sorted(r.head for r in rows) == sorted(t for t, c in cosines.items() if c >= 0.3)
    for r in rows:
        assert (r.source, r.cos) == ("dense", pytest.approx(cosines[r.head], abs=1e-4))
        assert r.rel == pytest.approx(0.5 * r.cos, abs=1e-3)


@pytest.mark.anyio
async def test_spreading_passes_base_times_delta_times_novelty_to_a_linked_memory(tmp_path):
    settings = Settings(
        store=tmp_path / "sp.sqlite", owner="coder", recall=RecallSettings(min_similarity=0.5)
    )
    query = "deploy pipeline nightly"
    budget_text = "quarterly budget review with finance"
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        # Its place is a cue the query names, but not a keyword of its text.
        budget = await mem.author(budget_text, place_or_task="nightly")
        other = await mem.author("deploy pipeline uses docker images")
        nightly = await mem.author(
            "deploy pipeline runs nightly builds",
            links=[{"target": budget.id, "relation": "causes", "weight": 0.5}],
        )
        result = await mem.explain(query, hops=1, k=10)
    rows = {r.id: r for r in result.rows}
    assert set(rows) == {budget.id, other.id, nightly.id}
    spread = rows[budget.id]
    assert (spread.source, spread.path) == (
        "spread",
        [nightly.id[:8], "-causes->", budget.id[:8]],
    )
    q, a, b = HashEmbedder().embed([query, "deploy pipeline runs nightly builds", budget_text])
    assert spread.cos == pytest.approx(float(q @ b), abs=1e-4)
    # Scored like a candidate: λ·cos (no keyword) + μ·overlap, the cue covering all its cues.
    assert spread.rel == pytest.approx(0.5 * max(float(q @ b), 0.0) + 0.3, abs=1e-3)
    novelty = min(max((0.9 - float(a @ b)) / 0.4, 0.0), 1.0)
    base = expected_bases(result.rows)
    # act · δ · weight · type weight · novelty; the score adds γ · spread (its term)
    assert spread.spread == pytest.approx(base[nightly.id] * 0.6 * 0.5 * 1.0 * novelty, abs=1e-3)
    assert spread.terms is not None
    assert spread.terms.spread == pytest.approx(0.5 * spread.spread, abs=1e-4)
    assert spread.score == pytest.approx(base[budget.id] + spread.terms.spread, abs=2e-3)
    assert rows[nightly.id].spread == 0.0


@pytest.mark.anyio
async def test_spreading_brings_in_only_memories_of_the_asked_types(tmp_path):
    settings = Settings(
        store=tmp_path / "ty.sqlite", owner="coder", recall=RecallSettings(min_similarity=0.5)
    )
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        todos = [await mem.author(f"call the plumber {w}", type="todo") for w in ("soon", "today")]
        note = await mem.author("quarterly budget review with finance")
        source = await mem.author(
            "deploy pipeline runs nightly builds",
            links=[
                *({"target": t.id, "relation": "causes"} for t in todos),
                {"target": note.id, "relation": "causes"},
            ],
        )
        result = await mem.recall("deploy pipeline nightly", types=["info"], k=10)
    assert {h.id for h in result.hits} == {source.id, note.id}


def keyword_settings(path, **recall) -> Settings:
    return Settings(store=path, owner="coder", recall=RecallSettings(use_dense=False, **recall))


@pytest.mark.anyio
async def test_keyword_candidates_are_the_best_n_sparse_of_the_asked_types(tmp_path):
    settings = keyword_settings(tmp_path / "ns.sqlite", n_sparse=1)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        best = await mem.author("deploy deploy deploy pipeline")
        await mem.author("deploy notes and many other words about lunch and weather")
        rows = (await mem.explain("deploy", hops=0, k=10)).rows
        assert [r.id for r in rows] == [best.id]
    settings = keyword_settings(tmp_path / "ty.sqlite", n_sparse=2)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        for _ in range(2):  # the strongest keyword hits are not todos
            await mem.author(f"deploy deploy deploy pipeline {_}")
        todos = {
            (await mem.author(f"deploy later with {w} and a long tail", type="todo")).id
            for w in ("ansible", "terraform")
        }
        result = await mem.recall("deploy", types=["todo"], k=10)
        assert {h.id for h in result.hits} == todos


@pytest.mark.anyio
async def test_a_hit_exactly_at_the_weak_line_is_not_weak(tmp_path):
    settings = keyword_settings(tmp_path / "wk.sqlite", weak_relevance=1.0)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        await mem.author("deploy deploy pipeline")
        await mem.author("deploy notes")
        rows = (await mem.explain("deploy", hops=0, k=10)).rows
    assert [(r.rel == 1.0, r.flags.weak) for r in rows] == [(True, False), (False, True)]


@pytest.mark.anyio
async def test_why_not_scores_a_memory_the_query_does_not_reach(tmp_path):
    settings = Settings(
        store=tmp_path / "wn.sqlite", owner="coder", recall=RecallSettings(min_similarity=0.6)
    )
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        await mem.author("deploy pipeline runs nightly builds")
        far = await mem.author("the cafeteria serves soup on mondays")
        result = await mem.explain("deploy pipeline", memory_id=far.id, k=1)
    assert far.id not in {r.id for r in result.rows}
    assert (result.why_not.rank, result.why_not.in_top_k) == (2, False)
    assert result.why_not.components.source == "sparse"


@pytest.mark.anyio
async def test_why_not_of_a_forgotten_memory_ranks_it_as_the_query_finds_it(mem):
    kept = await mem.author("deploy pipeline uses docker images")
    gone = await mem.author("deploy pipeline runs nightly builds")
    await mem.forget(gone.id)
    result = await mem.explain("deploy pipeline nightly", memory_id=gone.id, k=5)
    assert result.why_not.archived and not result.why_not.in_top_k
    assert result.why_not.components.source == "both"  # found by meaning and by keyword
    assert {r.id for r in result.rows} == {kept.id, gone.id}


# --------------------------------------------------------------------------- candidates


@pytest.mark.anyio
async def test_a_keyword_only_candidate_is_scored_with_its_real_cosine(tmp_path):
    """A memory BM25 finds but the dense top-n missed still gets cos = q·v, not None or 1."""
    settings = Settings(
        store=tmp_path / "ko.sqlite", owner="coder", recall=RecallSettings(n_dense=1)
    )
    embedder = HashEmbedder()
    async with Memory.open(settings=settings, embedder=embedder) as mem:
        near = await mem.author("orbit relay harbour crane orbit relay")
        far = await mem.author("relay notes about lunch, weather and the parking lot")
        rows = {r.id: r for r in (await mem.explain("orbit relay", hops=0, k=10)).rows}
    assert rows[near.id].source == "both"
    assert rows[far.id].source == "sparse"
    q, v = embedder.embed(["orbit relay", "relay notes about lunch, weather and the parking lot"])
    assert rows[far.id].cos == pytest.approx(float(q @ v), abs=1e-3)
    assert 0 < rows[far.id].cos < 0.9


@pytest.mark.anyio
async def test_a_replaced_memory_sits_just_below_its_successor_whatever_the_penalty(tmp_path):
    """DESIGN.md §16.7 with no penalty: the old memory, more relevant than its successor, is
    placed just under it (by a millionth), not a whole point lower among unrelated hits."""
    settings = Settings(
        store=tmp_path / "sp.sqlite",
        owner="coder",
        recall=RecallSettings(superseded_penalty=0.0),
    )
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        old = await mem.author("The API rate limit is 100 requests per minute for the API")
        new = await mem.author(
            "Rate limit raised", links=[{"target": old.id, "relation": "refines"}]
        )
        other = await mem.author("The API gateway logs every request for a week")
        hits = (await mem.recall("API rate limit requests per minute", k=5)).hits
    order = [h.id for h in hits]
    assert order.index(old.id) == order.index(new.id) + 1
    by_id = {h.id: h for h in hits}
    assert 0 <= by_id[new.id].score - by_id[old.id].score < 1e-3  # scores shown to 4 places
    assert by_id[old.id].flags.superseded_by == new.id
    assert other.id in by_id


@pytest.mark.anyio
async def test_with_gamma_zero_nothing_spreads_and_with_gamma_it_does(tmp_path):
    for gamma, spreads in ((0.0, False), (0.5, True)):
        settings = Settings(
            store=tmp_path / f"g{gamma}.sqlite", owner="coder", recall=RecallSettings(gamma=gamma)
        )
        async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
            seed = await mem.author("omega deployment checklist")
            linked = await mem.author(
                "rollback runbook kept in the wiki",
                links=[{"target": seed.id, "relation": "causes"}],
            )
            await mem.link(seed.id, linked.id, "causes")
            rows = {r.id: r for r in (await mem.explain("omega deployment checklist")).rows}
        assert (linked.id in rows and rows[linked.id].source == "spread") is spreads
