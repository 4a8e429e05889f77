"""Trigger matching, recurrence and todo ordering (DESIGN.md §9); pure functions, no store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from nooa_mcp.domain.prospective import (
    cue_keywords,
    cue_matches,
    evaluate,
    fire,
    is_armed,
    next_fire_at,
    time_due,
    todo_order,
)
from nooa_mcp.domain.schema import Trigger

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
H = timedelta(hours=1)


def unit(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_cue_keywords_drop_stop_words():
    assert cue_keywords("When the user mentions the Deploy script") == {
        "user",
        "mentions",
        "deploy",
        "script",
    }


def test_a_cue_matches_when_every_keyword_is_present_even_inflected():
    assert cue_matches("deploy staging", "we are deploying to staging now")[0]
    assert not cue_matches("deploy staging", "we are deploying to production")[0]
    # An inflection is a word with the cue word's stem: a final "e" dropped counts, a longer
    # word that only begins with the cue word does not.
    assert cue_matches("kubernetes upgrade", "we are upgrading kubernetes today")[0]
    assert cue_matches("release", "the releases went out")[0]
    assert not cue_matches("plan test", "testament of the planet")[0]


def test_a_cue_matches_on_cosine_at_or_above_055():
    """DESIGN.md §9.2: cosine ≥ 0.55 fires even when the words differ."""
    cue, close, far = unit(1, 0), unit(0.55, (1 - 0.55**2) ** 0.5), unit(0.5, 0.866)
    assert cue_matches("release", "shipping the build", cue, close) == (True, pytest.approx(0.55))
    assert cue_matches("release", "shipping the build", cue, far)[0] is False


def test_a_one_shot_time_trigger_fires_once_due_and_then_never_again():
    trig = Trigger(fire_at=T0)
    assert not time_due(trig, T0 - H)
    assert time_due(trig, T0)
    after, rearmed = fire(trig, T0 + H)
    assert not rearmed and after.fired_count == 1 and after.fired_at == T0 + H
    assert not time_due(after, T0 + 100 * H)
    assert not is_armed(after, T0 + 100 * H)


def test_a_recurring_time_trigger_is_rearmed_at_its_next_occurrence():
    trig = Trigger(fire_at=T0, every_hours=24)
    after, rearmed = fire(trig, T0 + 50 * H)  # two occurrences missed collapse into one firing
    assert rearmed and after.fire_at == T0 + 72 * H
    assert not time_due(after, T0 + 71 * H)
    assert time_due(after, T0 + 72 * H)


def test_next_fire_at_is_strictly_after_now():
    assert next_fire_at(T0, 24, T0) == T0 + 24 * H
    assert next_fire_at(T0 + H, 24, T0) == T0 + H


def test_evaluate_fires_a_due_time_intent_and_a_cued_one_and_leaves_the_rest():
    intents = [
        ("due", Trigger(fire_at=T0)),
        ("later", Trigger(fire_at=T0 + 5 * H)),
        ("cued", Trigger(cue="quarterly report")),
        ("quiet", Trigger(cue="kubernetes upgrade")),
    ]
    firings = evaluate(intents, T0 + H, text="draft the quarterly report for finance")
    assert [(f.intent_id, f.reason) for f in firings] == [("due", "time"), ("cued", "cue")]


def test_evaluate_without_text_checks_only_time():
    firings = evaluate([("c", Trigger(cue="anything"))], T0, text=None)
    assert firings == []


def test_evaluate_uses_cue_vectors_when_given():
    intents = [("c", Trigger(cue="completely different words"))]
    firings = evaluate(
        intents, T0, text="unrelated text", text_vec=unit(1, 0.1), cue_vecs={"c": unit(1, 0)}
    )
    assert [f.intent_id for f in firings] == ["c"]
    assert firings[0].similarity == pytest.approx(0.995, abs=1e-3)


def test_a_one_shot_cue_intent_fires_once():
    (firing,) = evaluate([("c", Trigger(cue="release"))], T0, text="the release")
    assert evaluate([("c", firing.trigger)], T0 + H, text="the release again") == []


def test_a_recurring_cue_intent_waits_its_cooldown():
    (firing,) = evaluate([("c", Trigger(cue="release", every_hours=2))], T0, text="release")
    assert firing.rearmed
    assert evaluate([("c", firing.trigger)], T0 + H, text="release") == []
    assert len(evaluate([("c", firing.trigger)], T0 + 2 * H, text="release")) == 1


def test_a_time_and_cue_trigger_fires_on_whichever_comes_first():
    trig = Trigger(fire_at=T0 + 24 * H, cue="invoice")
    (early,) = evaluate([("b", trig)], T0, text="the invoice arrived")
    assert early.reason == "cue"
    assert evaluate([("b", early.trigger)], T0 + 48 * H) == []


def test_todos_sort_open_first_then_importance_then_oldest():
    rows = [
        ("done-high", "done", 10, T0),
        ("open-low-old", "open", 3, T0),
        ("open-high-new", "open", 8, T0 + H),
        ("open-high-old", "open", 8, T0),
        ("dropped", "dropped", 10, T0),
    ]
    ordered = sorted(rows, key=lambda r: todo_order(r[1], r[2], r[3]))
    assert [r[0] for r in ordered] == [
        "open-high-old",
        "open-high-new",
        "open-low-old",
        "done-high",
        "dropped",
    ]


def test_every_hours_of_at_most_a_year_is_taken_and_a_minute_more_is_refused() -> None:
    """DESIGN §9.2: `every_hours` more than 0, at most a year (366 days: 8,784 hours)."""
    from nooa_mcp.domain.inputs import parse_trigger
    from nooa_mcp.errors import InvalidInput

    assert parse_trigger({"cue": "quarterly review", "every_hours": 8_784}).every_hours == 8_784
    for bad in (8_784 + 1 / 60, 0, -1):
        with pytest.raises(InvalidInput) as refused:
            parse_trigger({"cue": "quarterly review", "every_hours": bad})
        assert str(refused.value).startswith("trigger.every_hours: ")
