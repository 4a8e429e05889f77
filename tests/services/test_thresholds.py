"""The recall and tombstone thresholds, pinned from both sides at their documented values.

A table embedder gives exact cosines (no shared words, so relevance is λ·cos alone): the weak
flag sits at rel 0.18 (a hit at cos 0.34 is weak, one at 0.38 is not), one relevant hit among
weak ones is not "nothing relevant", and a forgotten value blocks a rewording at cosine 0.97
but not at 0.93.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from nooa_mcp import Memory

pytestmark = pytest.mark.anyio


#: The weak line the recall reply draws (RecallSettings.weak_relevance: rel 0.18 = λ·0.36).
WEAK_LINE = 0.18


LAMBDA = 0.5


class TableEmbedder:
    """Exact cosines for named texts: a text containing a key gets that key's vector.

    The query key sits on axis 0; a memory key with cosine c gets c·e0 + √(1−c²)·e_i on an
    axis of its own, so every memory meets the query at exactly c and the others at 0 (or
    at c·c' between two of them). Texts without a key get a vector orthogonal to all.
    """

    name = "table-32"
    dim = 32

    def __init__(self, query: str, cosines: dict[str, float]) -> None:
        self.table: dict[str, np.ndarray] = {query: self._axis(0)}
        for i, (key, cos) in enumerate(cosines.items(), start=1):
            self.table[key] = cos * self._axis(0) + np.sqrt(1 - cos * cos) * self._axis(i)

    def _axis(self, i: int) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float32)
        vec[i] = 1.0
        return vec

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = []
        for text in texts:
            key = next((k for k in sorted(self.table, key=len, reverse=True) if k in text), None)
            rows.append(self.table[key] if key is not None else self._axis(self.dim - 1))
        return np.stack(rows).astype(np.float32)


# --------------------------------------------------------------------------- weak relevance


async def test_the_weak_flag_sits_at_the_documented_line_from_both_sides(tmp_path: Path) -> None:
    """Catches: weak-relevance threshold halved (or doubled) in RecallSettings.

    rel = λ·cos with no shared word: cos 0.34 gives rel 0.17 (weak), cos 0.38 gives 0.19 (not).
    """
    query = "whereabouts of quokka fodder"
    embedder = TableEmbedder(query, {"Marmalade": 0.34, "Trombone": 0.38})
    async with Memory.open(tmp_path / "m.sqlite", owner="a", embedder=embedder) as mem:
        below = (await mem.author("Marmalade jars stay cold.")).id
        above = (await mem.author("Trombone lessons resume Tuesday.")).id
        result = await mem.recall(query, k=5)
    by_id = {h.id: h for h in result.hits}
    assert by_id[below].components.rel == pytest.approx(LAMBDA * 0.34, abs=1e-3)
    assert by_id[above].components.rel == pytest.approx(LAMBDA * 0.38, abs=1e-3)
    assert LAMBDA * 0.34 < WEAK_LINE < LAMBDA * 0.38
    assert (by_id[below].flags.weak, by_id[above].flags.weak) == (True, False)
    assert [h.id for h in result.hits] == [above, below]


async def test_one_relevant_hit_among_weak_ones_is_not_nothing_relevant(tmp_path: Path) -> None:
    """Catches: `nothing_relevant` computed with any() instead of all() over the weak flags."""
    query = "whereabouts of quokka fodder"
    embedder = TableEmbedder(query, {"Marmalade": 0.1, "Trombone": 0.8})
    async with Memory.open(tmp_path / "m.sqlite", owner="a", embedder=embedder) as mem:
        await mem.author("Marmalade jars stay cold.")
        await mem.author("Trombone lessons resume Tuesday.")
        mixed = await mem.recall(query, k=5)
        only_weak = await mem.recall("zebra harness", k=5)
    assert [h.flags.weak for h in mixed.hits] == [False, True]
    assert mixed.nothing_relevant is False
    assert "Nothing relevant" not in mixed.note
    # The other side: every hit weak is nothing relevant (the existing meaning of the flag).
    assert [h.flags.weak for h in only_weak.hits] == [True, True]
    assert only_weak.nothing_relevant is True


# --------------------------------------------------------------------------- tombstones


async def test_a_forgotten_value_is_blocked_in_its_words_from_cosine_080(tmp_path: Path) -> None:
    """Catches: tombstone cosine threshold 0.95 → 0.9999, the same words' floor 0.80 → 0.95
    (a final period alone puts one statement at 0.948), and a block of a different statement
    however close.

    DESIGN.md §4.4: writing again a forgotten memory's statement (same words, another hash:
    case and punctuation) at cosine ≥ 0.80 is blocked; a text at 0.97 with another value (a
    month) is a new memory.
    """
    query = "never asked"
    # Keys told apart by case alone (the embedder matches them case-sensitively), so the
    # texts are one statement with their own hashes and exact cosines.
    cosines = {
        "The vault": 1.0,
        "the vault": 0.97,
        "THE VAULT": 0.93,
        "ThE VaUlT": 0.78,
        "caretaker keeps": 0.97,
    }
    embedder = TableEmbedder(query, cosines)
    # The first key = e0, the others c·e0 + √(1−c²)·e_i, so cos(first, X) = c exactly.
    async with Memory.open(tmp_path / "m.sqlite", owner="a", embedder=embedder) as mem:
        first = await mem.author("The vault code is kept by the caretaker.")
        await mem.forget(first.id, reason="moved to the new vault")
        close = await mem.author("the vault code is kept by the caretaker!")
        near = await mem.author("THE VAULT code is kept by the caretaker")
        apart = await mem.author("ThE VaUlT code is kept by the caretaker")
        other = await mem.author("Since May the caretaker keeps the code of the vault.")
    assert close.status == "blocked-by-tombstone"
    assert close.tombstone is not None and close.tombstone.similarity == pytest.approx(0.97, 1e-3)
    assert close.tombstone.reason == "moved to the new vault"
    assert near.status == "blocked-by-tombstone"
    assert near.tombstone is not None and near.tombstone.similarity == pytest.approx(0.93, 1e-3)
    assert apart.status == "created"
    assert other.status == "created" and other.tombstone is None
