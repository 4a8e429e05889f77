"""What a query asks keyword search for: its content words, never the letters of a clitic.

Newcomer trial: "what's the plan for tomorrow?" asked for "s", which every possessive stored
holds, so "The user's cat is called Tom" came first, not weak (cosine 0.04, rel 0.52), and
"What's still on my plate…" returned a note about the dog first."""

from __future__ import annotations

import pytest

from nooa_mcp.domain.text import fts_terms
from nooa_mcp.storage.keywords import query_stems


@pytest.mark.parametrize(
    ("query", "terms"),
    [
        ("what's the plan for tomorrow?", ["plan", "tomorrow"]),
        ("What’s the user’s cat called?", ["user", "cat", "called"]),
        ("what‘s `the´ user＇s plan`s", ["user", "plan"]),
        (
            "I'm sure they'd say we'll ship; you've seen it, they're late",
            ["sure", "say", "ship", "seen", "late"],
        ),
        ("don't auto-format files I didn't touch", ["auto", "format", "files", "touch"]),
        ("can't deploy, won't start", ["can", "deploy", "start"]),
        ("o'clock rock'n'roll s3 bucket", ["o", "clock", "rock", "n", "roll", "s3", "bucket"]),
    ],
)
def test_a_clitic_is_no_query_word(query: str, terms: list[str]) -> None:
    assert fts_terms(query) == terms


def test_a_possessive_still_asks_for_its_noun() -> None:
    assert query_stems("Caroline's identity") == ["carolin", "ident"]
