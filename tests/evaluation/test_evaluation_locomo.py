"""LoCoMo parsing, metrics and the grep baseline on tiny synthetic conversations."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from nooa_mcp.errors import InvalidInput
from nooa_mcp.evaluation.grep import GrepIndex, keywords, write_markdown
from nooa_mcp.evaluation.locomo import (
    load_locomo,
    normalise_evidence,
    parse_conversation,
    parse_session_date,
)
from nooa_mcp.evaluation.metrics import score_question, summarise


def sample() -> dict:
    """Two sessions, one shared image, four questions of which one is adversarial."""
    return {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat named Miso."},
                {
                    "speaker": "Bo",
                    "dia_id": "D1:2",
                    "text": "Look at my garden!",
                    "blip_caption": "a photo of red tulips",
                },
            ],
            "session_2_date_time": "9:05 am on 12 June, 2023",
            "session_2": [
                {"speaker": "Ann", "dia_id": "D2:1", "text": "Miso learned to open doors."},
                {"speaker": "Bo", "dia_id": "D2:2", "text": "Tulips are done for the year."},
            ],
        },
        "qa": [
            {
                "question": "What is the cat called?",
                "answer": "Miso",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "Which flowers grow?",
                "answer": "tulips",
                "evidence": ["D1:2; D2:2"],
                "category": 1,
            },
            {
                "question": "What did Bo's dog do?",
                "evidence": ["D2:1"],
                "category": 5,
                "adversarial_answer": "open doors",
            },
            {"question": "Unknown evidence?", "answer": "?", "evidence": ["D9:9"], "category": 2},
        ],
    }


def test_session_dates_parse_as_utc_with_twelve_hour_clock():
    """LoCoMo stamps are `h:mm am|pm on D Month, YYYY`; 12 pm is noon, 12 am midnight."""
    assert parse_session_date("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert parse_session_date("12:05 am on 1 January, 2022").hour == 0
    assert parse_session_date("12:30 pm on 3 Sept, 2022") == datetime(
        2022, 9, 3, 12, 30, tzinfo=UTC
    )


def test_a_malformed_session_date_names_the_field():
    with pytest.raises(InvalidInput) as exc:
        parse_session_date("yesterday")
    assert exc.value.field == "session date"


def test_malformed_evidence_ids_are_split_and_repaired():
    """The published file has 'D8:6; D9:17' and 'D:11:26'; a bare 'D' names nothing."""
    assert normalise_evidence(["D8:6; D9:17", "D:11:26", "D", "D8:6"]) == (
        "D8:6",
        "D9:17",
        "D11:26",
    )


def test_each_turn_becomes_a_dated_memory_with_speaker_and_caption():
    conv = parse_conversation(sample())
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D2:1", "D2:2"]
    spec = conv.turns[1].memory_spec()
    assert spec["content"] == "Bo: Look at my garden! [shares an image: a photo of red tulips]"
    assert spec["created_at"] == spec["valid_from"] == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert spec["entities"] == ["Bo"]
    assert conv.turns[2].date == datetime(2023, 6, 12, 9, 5, tzinfo=UTC)


def test_adversarial_and_unanswerable_questions_are_excluded_and_counted():
    conv = parse_conversation(sample())
    assert [q.category for q in conv.questions] == [4, 1]
    assert conv.questions[1].evidence == ("D1:2", "D2:2")
    assert conv.skipped_questions == 2


def test_load_reads_a_list_of_samples_and_rejects_other_files(tmp_path):
    path = tmp_path / "mini.json"
    path.write_text(json.dumps([sample()]))
    assert [c.sample_id for c in load_locomo(path)] == ["conv-x"]
    path.write_text(json.dumps({"not": "a list"}))
    with pytest.raises(InvalidInput) as refused:
        load_locomo(path)
    assert str(refused.value) == f"FILE: {path} is not a list of conversations. Pass a LoCoMo file."
    path.write_text("{not json")
    with pytest.raises(InvalidInput) as refused:
        load_locomo(path)
    assert str(refused.value).startswith(f"FILE: {path} is not JSON (")
    assert str(refused.value).endswith(". Pass a LoCoMo file.")
    with pytest.raises(InvalidInput) as refused:
        load_locomo(tmp_path / "missing.json")
    missing = tmp_path / "missing.json"
    assert str(refused.value) == f"FILE: {missing} does not exist. Pass the path of locomo10.json."


def test_a_month_that_is_not_english_is_refused_with_the_fix():
    with pytest.raises(InvalidInput) as exc:
        parse_session_date("1:56 pm on 8 Mai, 2023")
    assert str(exc.value) == "session date: 'Mai' is not a month. Use an English name."


def test_a_conversation_without_a_speaker_name_has_an_empty_one():
    data = sample()
    del data["conversation"]["speaker_a"]
    assert parse_conversation(data).speakers == ("", "Bo")


def test_a_question_hits_when_any_evidence_turn_is_in_the_top_k():
    """Multi-evidence: R@k counts a hit on any evidence turn; MRR uses the first one found."""
    s = score_question(["a", "b", "c", "d", "e", "f", "g"], ["g", "c"], category=1)
    assert s.hits == {5: 1.0, 10: 1.0}
    assert s.rr == pytest.approx(1 / 3)
    assert s.evidence_recall == {5: 0.5, 10: 1.0}


def test_a_miss_beyond_the_ranking_scores_zero_and_repeats_do_not_count_twice():
    s = score_question(["a", "a", "a", "b", "c", "d", "e", "z"], ["z"])
    assert s.first_rank == 6
    assert s.hits == {5: 0.0, 10: 1.0}
    assert score_question(["a"], ["z"]).rr == 0.0


def test_summary_averages_overall_and_per_category():
    scores = [
        score_question(["x"], ["x"], category=1),
        score_question(["y", "x"], ["x"], category=1),
        score_question(["y"], ["x"], category=2),
    ]
    s = summarise(scores)
    assert s.n == 3
    assert s.recall[5] == pytest.approx(2 / 3)
    assert s.mrr == pytest.approx((1 + 0.5 + 0) / 3)
    assert s.by_category[1].mrr == pytest.approx(0.75)
    assert s.by_category[2].recall[10] == 0.0
    assert s.as_dict()["by_category"]["1"]["n"] == 2


def test_grep_keywords_drop_function_words_and_possessives():
    assert keywords("What did Caroline's cat do in the garden?") == ["caroline", "cat", "garden"]


def test_grep_ranks_lines_by_distinct_keyword_hits_then_occurrences(tmp_path):
    conv = parse_conversation(sample())
    sessions = [
        (f"Session {n}", [(t.dia_id, t.content) for t in conv.turns if t.session == n])
        for n in conv.session_dates
    ]
    index = GrepIndex.from_markdown(write_markdown(tmp_path / "notes.md", sessions))
    assert index.ids == ["D1:1", "D1:2", "D2:1", "D2:2"]
    assert index.search("Where are Bo's tulips in the garden?") == ["D1:2", "D2:2"]
    assert index.search("Miso doors") == ["D2:1", "D1:1"]
    assert index.search("nothing matches this") == []
