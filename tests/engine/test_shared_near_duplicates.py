"""Near-duplicate checks of concurrent writes: one product, off the event loop.

Each write's product over every cached vector ran on the event loop inside its transaction
(~8 ms a write at 100k rows). It now runs before the transaction, in a worker thread, shared
by the writes that wait at the same time; what it found is checked again in the transaction.
"""

from __future__ import annotations

import threading

import anyio
import numpy as np
import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder

pytestmark = pytest.mark.anyio

WORDS = [
    "amber",
    "basil",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "garnet",
    "harbor",
    "indigo",
    "juniper",
    "kelp",
    "lantern",
    "meadow",
    "nectar",
    "opal",
    "pepper",
    "quartz",
    "raven",
    "saffron",
    "thistle",
    "umber",
    "velvet",
    "willow",
    "yarrow",
    "zephyr",
    "anchor",
    "bramble",
    "cobalt",
    "dune",
    "elm",
    "flint",
    "grove",
]


def pairs(n: int) -> list[tuple[str, str]]:
    """n (stored, new) texts: the new one differs from its own stored one in one word of five
    and shares nothing with the others."""
    out = []
    for i in range(n):
        words = WORDS[5 * i : 5 * i + 5]
        out.append((" ".join(words), " ".join([*words[:4], f"{words[4]}s"])))
    return out


@pytest.fixture
def near_settings(store_path) -> Settings:
    return Settings(store=store_path, owner="coder@laptop", dedup_similarity=0.7)


def test_the_pairs_are_near_duplicates_of_their_own_stored_text_only():
    texts = pairs(6)
    model = HashEmbedder()
    stored = model.embed([a for a, _ in texts])
    new = model.embed([b for _, b in texts])
    sims = new @ stored.T
    assert all(sims[i, i] >= 0.7 for i in range(6))
    assert all(sims[i, j] < 0.5 for i in range(6) for j in range(6) if i != j)


async def test_writes_waiting_together_share_one_product_and_each_finds_its_own_twin(
    near_settings,
) -> None:
    texts = pairs(6)
    async with Memory.open(settings=near_settings, embedder=HashEmbedder()) as mem:
        twins = [(await mem.author(stored)).id for stored, _ in texts]
        index = mem.engine.index
        real = index.nearest
        runs: list[int] = []
        first_may_finish = threading.Event()

        def counted(queries, masks, floor=None):
            runs.append(len(masks))
            if len(runs) == 1:
                first_may_finish.wait(10)
            return real(queries, masks, floor)

        index.nearest = counted
        results = {}

        async def write(i: int) -> None:
            results[i] = await mem.author(texts[i][1])

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(write, 0)
            with anyio.fail_after(5):
                while not runs:
                    await anyio.sleep(0.01)
            for i in range(1, 6):
                tasks.start_soon(write, i)
            # The other five wait behind the first product (private, but it is what is shared).
            for _ in range(200):
                if len(mem.engine._nearest._waiting) == 5:
                    break
                await anyio.sleep(0.01)
            first_may_finish.set()
    assert runs == [1, 5]
    assert [results[i].status for i in range(6)] == ["created"] * 6
    assert [results[i].similar_to.id for i in range(6)] == twins


async def test_a_twin_forgotten_between_the_product_and_the_write_is_not_named(
    near_settings,
) -> None:
    (stored, new), (other, other_new) = pairs(2)
    async with Memory.open(settings=near_settings, embedder=HashEmbedder()) as mem:
        twin = (await mem.author(stored)).id
        kept = (await mem.author(other)).id
        nearest = mem.engine.nearest

        async def then_forget(vectors: np.ndarray, masks, floor=None):
            found = await nearest(vectors, masks, floor)
            await mem.forget(twin)  # another caller, between this write's product and its write
            return found

        mem.engine.nearest = then_forget
        result = await mem.author(new)
        assert result.status == "created" and result.similar_to is None
        assert (await mem.author(other_new)).similar_to.id == kept  # the path still finds twins
