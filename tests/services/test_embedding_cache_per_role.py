"""How fast a text is embedded says nothing of what another role asked or set.

A trust audit timed `memory_explain` of a guessed text from a role with no grant: the
embedder kept the last 512 single texts (queries and written content) for every role, so a
text another role had just asked or written came back ~5x faster (18.7 against 97.9 ms), and
one timing per guess sorted 60 trials without a miss. Queries and intent cues are now kept per
role, and written content not at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from nooa_mcp import Memory
from nooa_mcp.embeddings import HashEmbedder

pytestmark = pytest.mark.anyio


class CountingEmbedder(HashEmbedder):
    """The test embedder, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts += list(texts)
        return super().embed(texts)


GUESS = "the layoffs list for march"


async def test_a_query_one_role_asked_is_embedded_again_for_another(tmp_path: Path) -> None:
    model = CountingEmbedder()
    async with Memory.open(tmp_path / "s.sqlite", owner="alice", embedder=model) as alice:
        await alice.wait_ready()
        mallory = Memory(alice.engine, "mallory")
        await alice.recall(GUESS)
        await alice.recall(GUESS)
        assert model.texts.count(GUESS) == 1  # a role's own repeat is kept
        await mallory.recall(GUESS)
        assert model.texts.count(GUESS) == 2


async def test_content_one_role_wrote_is_embedded_again_as_another_roles_query(
    tmp_path: Path,
) -> None:
    model = CountingEmbedder()
    async with Memory.open(tmp_path / "s.sqlite", owner="alice", embedder=model) as alice:
        await alice.wait_ready()
        mallory = Memory(alice.engine, "mallory")
        await alice.author(GUESS)
        assert model.texts.count(GUESS) == 1
        await mallory.recall(GUESS)
        assert model.texts.count(GUESS) == 2


async def test_an_intent_cue_of_one_role_is_embedded_again_for_another(tmp_path: Path) -> None:
    model = CountingEmbedder()
    async with Memory.open(tmp_path / "s.sqlite", owner="alice", embedder=model) as alice:
        await alice.wait_ready()
        mallory = Memory(alice.engine, "mallory")
        await alice.intent("add", content="Ask about the layoffs", cue="layoffs")
        await mallory.intent("add", content="Ask about the layoffs", cue="layoffs")
        await alice.intent("check", text="we talked about layoffs today")
        await alice.intent("check", text="layoffs again")
        assert model.texts.count("layoffs") == 1
        await mallory.intent("check", text="we talked about layoffs today")
        assert model.texts.count("layoffs") == 2
