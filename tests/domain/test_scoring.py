"""The ACT-R maths of recall (DESIGN.md §5.3-5.7), on plain numbers."""

import math

import numpy as np
import pytest

from nooa_mcp.domain import scoring
from nooa_mcp.domain.scoring import OutEdge
from nooa_mcp.domain.text import tokens


def test_base_level_of_one_access_one_second_old_is_zero():
    assert scoring.base_level([1.0], 1, 1.0) == pytest.approx(0.0)


def test_no_accesses_give_the_floor_of_minus_ten():
    assert scoring.base_level([], 0, None) == -10.0
    assert scoring.base_level_exact([]) == -10.0


def test_ages_under_one_second_count_as_one_second():
    assert scoring.base_level([0.0], 1, 0.0) == pytest.approx(0.0)


@pytest.mark.parametrize("pattern", ["random", "evenly-spaced", "daily-for-three-years"])
def test_petrov_tail_stays_within_a_few_percent_of_the_exact_sum_over_1000_accesses(pattern):
    """DESIGN.md §16.1: 16 exact terms plus the closed-form tail for the other 984.

    Petrov's tail assumes the older accesses are spread evenly between the k-th newest and
    the first; these are the usage patterns where that holds (a burst of old accesses is
    where it would not, and the exact k newest terms carry recent bursts).
    """
    rng = np.random.default_rng(7)
    year = 365 * 86400.0
    if pattern == "random":
        ages = rng.uniform(60, year, 1000)
    elif pattern == "evenly-spaced":
        ages = np.linspace(3600, 30 * 86400, 1000)
    else:
        ages = np.arange(1, 1001) * 86400.0 + rng.uniform(0, 3600, 1000)
    ages = np.sort(ages)
    exact = scoring.base_level_exact(ages)
    approx = scoring.base_level(ages[:16], 1000, float(ages[-1]))
    # Compare the activations the sums stand for (e^B), not the logs.
    assert math.exp(approx) == pytest.approx(math.exp(exact), rel=0.05)


def test_the_tail_is_what_makes_old_accesses_count():
    """Dropping the older 984 accesses (NOOA's 64-entry ring does this) underestimates B."""
    ages = np.linspace(3600, 30 * 86400, 1000)
    ring_only = scoring.base_level(ages[:16], 16, float(ages[15]))
    full = scoring.base_level(ages[:16], 1000, float(ages[-1]))
    assert full > ring_only + 1.0
    assert full == pytest.approx(scoring.base_level_exact(ages), abs=0.05)


def test_recency_orders_a_much_used_old_memory_and_a_fresh_single_use_differently():
    week = 7 * 86400.0
    twenty_a_week_ago = scoring.base_level([week + i for i in range(20)], 20, week + 19)
    once_an_hour_ago = scoring.base_level([3600.0], 1, 3600.0)
    assert twenty_a_week_ago == pytest.approx(math.log(20 * week**-0.5), abs=1e-3)
    assert once_an_hour_ago == pytest.approx(math.log(3600**-0.5))
    assert twenty_a_week_ago != pytest.approx(once_an_hour_ago, abs=0.1)


def test_minmax_spreads_values_over_zero_to_one():
    assert scoring.minmax(np.array([0.2, 0.4, 0.6])).tolist() == pytest.approx([0, 0.5, 1])


def test_minmax_of_identical_values_keeps_the_raw_values():
    """DESIGN.md §16.5: one candidate, or all equal, must not all collapse to 0."""
    assert scoring.minmax(np.array([0.7])).tolist() == [0.7]
    assert scoring.minmax(np.array([0.3, 0.3])).tolist() == [0.3, 0.3]


def test_relevance_mixes_cosine_and_overlap_with_lambda():
    rel = scoring.relevance(np.array([0.5, -0.2]), np.array([1.0, 0.0]), lam=0.7)
    assert rel.tolist() == pytest.approx([0.7 * 0.5 + 0.3, 0.0])


def test_tokens_drop_stopwords_and_jaccard_measures_overlap():
    assert tokens("Where is the Deploy key?") == {"deploy", "key"}
    assert scoring.jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)
    assert scoring.jaccard(set(), {"a"}) == 0.0


def test_spread_multiplies_by_delta_once_per_hop():
    """DESIGN.md §16.2: two hops give act·δ²·w·tw products, not δ applied to δ²."""
    edges = {
        "a": [OutEdge("b", 1.0, 1.0, "causes")],
        "b": [OutEdge("c", 1.0, 1.0, "causes")],
    }
    hop1 = scoring.spread_hop({"a": 1.0}, edges, decay=0.6, floor=0.0)
    assert hop1["b"][0] == pytest.approx(0.6)
    hop2 = scoring.spread_hop({"b": hop1["b"][0]}, edges, decay=0.6, floor=0.0)
    assert hop2["c"][0] == pytest.approx(0.36)


def test_spread_keeps_the_strongest_fanout_edges_and_drops_passes_below_the_floor():
    edges = {
        "a": [
            OutEdge(f"t{i}", w, 0.6, "related") for i, w in enumerate([1, 0.9, 0.8, 0.7, 0.6, 0.5])
        ]
    }
    reached = scoring.spread_hop({"a": 1.0}, edges, decay=0.6, fanout=5, floor=0.0)
    assert set(reached) == {"t0", "t1", "t2", "t3", "t4"}
    weak = scoring.spread_hop({"a": 0.1}, edges, decay=0.6, fanout=5, floor=0.05)
    assert weak == {}


def test_spread_sums_contributions_and_remembers_the_strongest_parent():
    edges = {"a": [OutEdge("c", 1.0, 1.0, "causes")], "b": [OutEdge("c", 0.5, 0.6, "related")]}
    reached = scoring.spread_hop({"a": 1.0, "b": 1.0}, edges, decay=0.5, floor=0.0)
    total, parent, relation = reached["c"]
    assert total == pytest.approx(0.5 + 0.15)
    assert (parent, relation) == ("a", "causes")
