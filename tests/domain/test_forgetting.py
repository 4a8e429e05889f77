"""Forgetting (DESIGN.md §7): retention, prune ETA, a prune rule that spares every protected
class."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from nooa_mcp.domain.forgetting import (
    ForgettingPolicy,
    protection,
    prune_eta,
    retention,
    should_prune,
    stability_hours,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DAY = timedelta(days=1)
LONG_AGO = T0 - 400 * DAY


def prunable(**kw) -> bool:
    values = {
        "type": "info",
        "importance": 5.0,
        "status": None,
        "archived": False,
        "learned_at": LONG_AGO,
        "last_accessed_at": LONG_AGO,
        "strength": 1,
        "now": T0,
    }
    values.update(kw)
    return should_prune(**values)


def test_retention_is_an_e_folding_curve_stretched_by_strength():
    assert retention(T0, 0, T0 + timedelta(hours=336)) == pytest.approx(math.exp(-1))
    assert stability_hours(1) == pytest.approx(336 * (1 + math.log(2)))
    assert retention(T0, 5, T0 + 30 * DAY) > retention(T0, 1, T0 + 30 * DAY)


def test_prune_eta_with_strength_one_is_about_93_days():
    """DESIGN.md §7.2: with strength 1 the prune threshold is reached after ≈ 93 idle days."""
    eta = prune_eta(T0, 1)
    assert (eta - T0).days == 92
    assert retention(T0, 1, eta) == pytest.approx(0.02)


def test_an_old_unused_ordinary_memory_is_pruned():
    assert prunable()


@pytest.mark.parametrize(
    ("case", "overrides"),
    [
        ("protected type skill", {"type": "skill"}),
        ("open todo", {"type": "todo", "status": "open"}),
        ("importance 8", {"importance": 8.0}),
        ("importance 10", {"importance": 10.0}),
        ("already archived", {"archived": True}),
        ("learned less than a day ago", {"learned_at": T0 - timedelta(hours=23)}),
        ("recently used", {"last_accessed_at": T0 - 30 * DAY}),
    ],
)
def test_prune_spares_each_protected_class(case, overrides):
    assert not prunable(**overrides), case


def test_a_done_todo_is_not_protected():
    assert prunable(type="todo", status="done")


def test_the_policy_is_configurable():
    policy = ForgettingPolicy(protected_types=frozenset({"skill", "reflection"}))
    assert protection("reflection", 5, None, policy) == "type reflection is protected"
    assert not prunable(type="reflection", policy=policy)
    lenient = ForgettingPolicy(tau_hours=24 * 365 * 10)
    assert not prunable(policy=lenient)
