"""Every threshold calibrated on MiniLM, checked on MiniLM at the cosines real text reaches.

The hash embedder puts unrelated texts as high as cosine 0.50 and ignores wording, so tests on
it prove lexical behaviour. Here the bundled int8 all-MiniLM-L6-v2 meets the weak line and
"nothing relevant" (recall settings: weak below rel 0.18, i.e. below cosine 0.36 on meaning
alone), value-level tombstones (DESIGN.md §4.4: cosine ≥ 0.95), near-duplicate writes (§4.3:
cosine ≥ 0.92, linked and named, never folded) and reflection's merge (§8.2: cosine ≥ 0.95
with the same values). Each test first asserts the cosine its texts really have, so a model
change that moves them says so here instead of silently testing something else.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nooa_mcp import Memory
from nooa_mcp.embeddings import MiniLMEmbedder

pytestmark = [pytest.mark.anyio, pytest.mark.real_model]

#: RecallSettings.weak_relevance, written out: what the reply calls weak.
WEAK_LINE = 0.18

#: (question, the memory that answers it in other words, its measured cosine).
PARAPHRASES = [
    (
        "where do we keep the credentials for prod servers?",
        "The production SSH keys are stored in the team vault",
        0.41,
    ),
    (
        "when does the staging database get restarted?",
        "The staging DB reboots every night at midnight",
        0.75,
    ),
    ("which cloud region hosts our servers?", "Our machines run in AWS eu-west-1", 0.52),
    ("what is the API rate limit?", "Clients may send at most 100 requests per minute", 0.54),
    ("which color is our logo?", "The company emblem is teal", 0.44),
    (
        "how long does the deploy take?",
        "Shipping a release to production usually needs about twenty minutes",
        0.59,
    ),
]
DISTRACTORS = [
    "Lunch orders are due by 11am on Fridays",
    "The office plants are watered on Mondays",
    "Quarterly planning happens in the first week of March",
    "The holiday party is at the bowling alley",
    "Marta prefers tea over coffee",
    "The CI pipeline caches pip downloads",
]
#: Questions nothing in that store answers (measured: best cosine 0.11–0.21).
UNRELATED = [
    "volcano eruption lava flow",
    "recipe for banana bread",
    "best hiking trails in Patagonia",
    "how do penguins stay warm?",
    "rules of cricket for beginners",
    "what rhymes with orange?",
]


def cos(model: MiniLMEmbedder, a: str, b: str) -> float:
    va, vb = model.embed([a, b])
    return float(va @ vb)


@pytest.fixture
async def answers(tmp_path: Path, minilm: MiniLMEmbedder):
    """A store holding the six answers and six distractors; yields (memory, answer ids)."""
    async with Memory.open(tmp_path / "m.sqlite", owner="a", embedder=minilm) as mem:
        ids = [(await mem.author(answer)).id for _, answer, _ in PARAPHRASES]
        for text in DISTRACTORS:
            await mem.author(text)
        yield mem, ids


# --------------------------------------------------------------------------- weak line


async def test_real_paraphrases_rank_first_and_are_not_weak(answers, minilm) -> None:
    """From above: an answer in other words (cosine 0.41–0.75, few or no shared words) is a
    relevant hit. The loosest, cosine 0.41, gives rel 0.20: a weak line above that would
    hide real answers."""
    mem, ids = answers
    for (question, answer, measured), wanted in zip(PARAPHRASES, ids, strict=True):
        assert cos(minilm, question, answer) == pytest.approx(measured, abs=0.03)
        result = await mem.recall(question, k=5)
        top = result.hits[0]
        assert top.id == wanted, question
        assert top.components.rel >= WEAK_LINE, (question, top.components.rel)
        assert not top.flags.weak and not result.nothing_relevant, question
    loosest = await mem.explain(PARAPHRASES[0][0], k=1)
    assert loosest.rows[0].rel == pytest.approx(0.5 * 0.41, abs=0.02)


async def test_real_unrelated_questions_are_weak_and_nothing_relevant(answers) -> None:
    """From below: questions the store cannot answer reach rel ≤ 0.11 (cosine ≤ 0.21); every
    hit is weak and the reply says nothing relevant. A weak line under 0.11 would pass
    noise off as an answer."""
    mem, _ = answers
    for question in UNRELATED:
        result = await mem.recall(question, k=5)
        assert len(result.hits) == 5
        assert all(h.flags.weak for h in result.hits), question
        assert result.nothing_relevant, question
        assert "Nothing relevant" in result.note
        best = max(h.components.rel for h in result.hits)
        assert best < 0.12, (question, best)


# --------------------------------------------------------------------------- tombstones

FORGOTTEN = "The staging database password rotates on the first Monday of each month"


async def test_a_real_rewording_of_a_forgotten_memory_is_blocked(tmp_path, minilm) -> None:
    """DESIGN.md §4.4 at real cosines: two rewordings (cosine 0.97–0.98, same values) are recognised
    as the forgotten value; the reply names the tombstone."""
    rewordings = [
        "On the first Monday of every month the staging database password is rotated",
        "The staging DB password gets rotated on each month's first Monday",
    ]
    for text in rewordings:
        assert 0.96 <= cos(minilm, FORGOTTEN, text) < 0.99
    async with Memory.open(tmp_path / "m.sqlite", owner="a", embedder=minilm) as mem:
        first = await mem.author(FORGOTTEN)
        await mem.forget(first.id, reason="rotation moved to the vault")
        for text in rewordings:
            again = await mem.author(text)
            assert again.status == "blocked-by-tombstone", text
            assert again.id == first.id and again.tombstone is not None
            assert again.tombstone.reason == "rotation moved to the vault"
            assert 0.95 <= again.tombstone.similarity < 0.99
        assert (await mem.stats()).active == 0


async def test_topical_and_unrelated_texts_are_not_blocked_by_a_tombstone(tmp_path, minilm) -> None:
    """Below the line: the same subject in another fact (cosine 0.42–0.56) and an unrelated
    text are stored as new memories."""
    topical = [
        "The staging database runs PostgreSQL 15",
        "The production database password is kept in the vault",
    ]
    unrelated = "Lunch orders are due by 11am on Fridays"
    for text in topical:
        assert 0.35 <= cos(minilm, FORGOTTEN, text) <= 0.65
    async with Memory.open(tmp_path / "m.sqlite", owner="a", embedder=minilm) as mem:
        first = await mem.author(FORGOTTEN)
        await mem.forget(first.id)
        results = [await mem.author(text) for text in [*topical, unrelated]]
    assert [r.status for r in results] == ["created"] * 3
    assert all(r.tombstone is None for r in results)


async def test_a_changed_value_after_forgetting_the_old_one_is_stored(tmp_path, minilm) -> None:
    """A forgotten "rate limit 100" must not block "rate limit 500" (cosine 0.96): a changed
    value is a different fact (DESIGN.md §4.4). Before the fix it was blocked, and revive=true
    restored the 100 instead of storing the 500."""
    old, new = (
        "The API rate limit is 100 requests per minute",
        "The API rate limit is 500 requests per minute",
    )
    assert cos(minilm, old, new) >= 0.95
    async with Memory.open(tmp_path / "m.sqlite", owner="a", embedder=minilm) as mem:
        first = await mem.author(old)
        await mem.forget(first.id, reason="raised")
        raised = await mem.author(new)
        assert raised.status == "created" and raised.id != first.id
        assert raised.tombstone is None
        assert (await mem.get(raised.id)).content == new
        assert (await mem.get(first.id)).archived
        hits = [h.id for h in (await mem.recall("API rate limit", k=3)).hits]
    assert hits == [raised.id]


# --------------------------------------------------------------------------- near-duplicates


async def test_a_real_rewording_is_stored_and_linked_and_a_value_change_named(
    tmp_path, minilm
) -> None:
    """DESIGN.md §4.2-4.3 at real cosines: an exact repeat (case and spacing aside) is `exists`; a
    rewording (cosine 0.975, ≥ 0.92) is stored, linked `related` and named with no value
    difference; a value change (cosine 0.96) is stored separately and named with `number`;
    a topical neighbour (cosine 0.34) is not named at all."""
    original = "The API rate limit is 100 requests per minute"
    reworded = "The rate limit of the API is 100 requests a minute"
    changed = "The API rate limit is 500 requests per minute"
    topical = "The API returns JSON errors with a code field"
    assert 0.96 <= cos(minilm, original, reworded) < 0.99
    assert 0.95 <= cos(minilm, original, changed) < 0.98
    assert cos(minilm, original, topical) < 0.5
    async with Memory.open(tmp_path / "m.sqlite", owner="a", embedder=minilm) as mem:
        first = await mem.author(original)
        repeat = await mem.author("  the API rate LIMIT is 100 requests per minute ")
        again = await mem.author(reworded)
        value = await mem.author(changed)
        other = await mem.author(topical)
        view = await mem.get(first.id)
        linked = {(e["target"], e["type"]) for e in (await mem.get(again.id)).edges}
        hits = {h.id for h in (await mem.recall("API rate limit", k=5)).hits}
    assert (repeat.status, repeat.id) == ("exists", first.id)
    assert view.channels["reinforced"] == 1
    assert again.status == "created" and again.id != first.id
    assert again.similar_to is not None and again.similar_to.id == first.id
    assert again.similar_to.differs_in == [] and again.similar_to.similarity >= 0.92
    assert (first.id, "related") in linked
    assert value.status == "created" and value.similar_to is not None
    assert value.similar_to.differs_in == ["number"]
    assert other.status == "created" and other.similar_to is None
    assert {first.id, again.id, value.id} <= hits


async def test_reflection_merges_a_real_rewording_but_never_a_value_change(
    tmp_path, minilm
) -> None:
    """DESIGN.md §8.2 merge at real cosines: the rewording (the same words in order, and values) is
    folded into the older memory and archived; the changed value (0.96) stays a live memory
    of its own."""
    original = "The API rate limit is 100 requests per minute"
    reworded = "The API's rate limit is 100 requests per minute"
    changed = "The API rate limit is 500 requests per minute"
    async with Memory.open(tmp_path / "m.sqlite", owner="a", embedder=minilm) as mem:
        first = (await mem.author(original)).id
        dup = (await mem.author(reworded)).id
        value = (await mem.author(changed)).id
        await mem.reflect(["merge"])
        anchor, merged, kept = [await mem.get(i) for i in (first, dup, value)]
    assert merged.archived and not anchor.archived and not kept.archived
    assert (dup, "refines") in {(e["target"], e["type"]) for e in anchor.edges}
    assert anchor.reinforcement_count >= 1
