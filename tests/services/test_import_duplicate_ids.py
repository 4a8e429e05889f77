"""Two lines of one import file with one id: refused before anything is written when they
differ, counted once when they are the same line twice.

Before: they were applied in order without a word, so the later line silently overwrote what
the earlier one said (its tags, its state) or, with other words, was refused only after the
file's checks, by a different path.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.errors import InvalidInput
from nooa_mcp.services.transfer import BATCH

pytestmark = pytest.mark.anyio

ID = "3f9a2c1d5e6f47a8b9c0d1e2f3a4b5c6"
GATE = {"id": ID, "content": "The gate code is 4411", "type": "info", "tags": ["home"]}
OTHER = {"content": "The fuse box is in the cellar"}


def _open(store: Path | str) -> Memory:
    return Memory.open(settings=Settings(store=store, owner="alice"), embedder=HashEmbedder())


@pytest.mark.parametrize(
    "second",
    [
        {**GATE, "tags": ["work"]},
        {**GATE, "archived": True},
        {**GATE, "id": ID.upper(), "content": "The gate code is 9999"},
    ],
)
async def test_two_lines_with_one_id_that_differ_are_refused_naming_both(
    store_target, second
) -> None:
    lines = [(1, OTHER), (2, GATE), (3, OTHER | {"content": "Bins go out on Tuesday"}), (4, second)]
    async with _open(store_target) as mem:
        with pytest.raises(InvalidInput) as refused:
            await mem.import_records(lines)
        said = str(refused.value)
        assert said.startswith("line 4:") and "line 2" in said and ID in said, said
        assert "Nothing was imported" in said
        assert (await mem.stats()).total == 0


async def test_the_same_line_twice_is_imported_once(store_target) -> None:
    async with _open(store_target) as mem:
        report = await mem.import_records([(1, GATE), (2, OTHER), (3, dict(GATE))])
        assert report.counts.get("created") == 2 and report.counts.get("repeated_lines") == 1
        assert (await mem.stats()).total == 2
        assert (await mem.get(ID)).tags == ["home"]


async def test_a_line_that_repeats_a_memory_past_its_bounds_is_refused_naming_the_line(
    store_target,
) -> None:
    """A line whose words a stored memory says already, adding tags past the 50 it may hold,
    is refused as authoring refuses it, naming the line (the refusal came from the write,
    after the lines were read, and said no line), and nothing is imported."""
    async with _open(store_target) as mem:
        held = await mem.author(OTHER["content"], tags=[f"t{i}" for i in range(50)])
        lines = [(1, {"content": "Bins go out on Tuesday"}), (2, OTHER | {"tags": ["new"]})]
        with pytest.raises(InvalidInput) as refused:
            await mem.import_records(lines)
        said = str(refused.value)
        assert said.startswith(f"line 2: tags: memory {held.id[:8]} says this already"), said
        assert said.endswith("Pass no new tags. Nothing was imported."), said
        assert [v.content for _, v in await mem.list_memories()] == [OTHER["content"]]


async def test_a_line_refused_past_its_bounds_in_a_later_batch_says_what_was_imported(
    store_target,
) -> None:
    """Each batch of an import is its own transaction: a line refused where it meets what is
    stored, in the second batch, said "Nothing was imported." with the first batch's lines
    written. It says which lines were, and that the same import run again adds the rest."""
    async with _open(store_target) as mem:
        await mem.author(OTHER["content"], tags=[f"t{i}" for i in range(50)])
        lines = [(n, {"content": f"Widget {n} weighs {n * 7} grams"}) for n in range(1, BATCH + 5)]
        lines.append((BATCH + 5, OTHER | {"tags": ["new"]}))
        with pytest.raises(InvalidInput) as refused:
            await mem.import_records(lines)
        said = str(refused.value)
        assert said.startswith(f"line {BATCH + 5}: tags: memory "), said
        assert "Nothing was imported" not in said, said
        assert said.endswith(
            f"Pass no new tags. The lines before line {BATCH + 1} were imported, none from it "
            f"on: run the same import again once line {BATCH + 5} is fixed to add the rest."
        ), said
        assert (await mem.stats()).total == BATCH + 1
        lines[-1] = (BATCH + 5, OTHER)
        report = await mem.import_records(lines)
        assert report.counts.get("created") == 4, report.counts
        assert (await mem.stats()).total == BATCH + 5


async def test_a_line_whose_memory_reference_cannot_be_captured_is_refused_naming_the_line(
    store_target,
) -> None:
    """A `memory:` reference to no memory, or to a memory of a role the importer may only
    read, was refused without a line ("references: no memory with id 'deadbeef'. ...",
    "owner: that memory is of role 'bob' ..."): which of the file's lines said it was left
    to guess. It names the line, and nothing is imported."""
    async with Memory.open(
        settings=Settings(store=store_target, owner="bob"), embedder=HashEmbedder()
    ) as bob:
        bobs = (await bob.author("Bob parks the blue bicycle behind the library")).id
    settings = Settings(store=store_target, owner="alice", read=["bob"])
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        for target, said in (
            ("deadbeef", "references: no memory with id 'deadbeef'."),
            (
                bobs[:8],
                "references: that memory is of role 'bob', which this server lets you read",
            ),
        ):
            lines = [
                (1, OTHER),
                (2, {"content": "See that note", "references": [f"memory:{target}"]}),
            ]
            with pytest.raises(InvalidInput) as refused:
                await mem.import_records(lines)
            text = str(refused.value)
            assert text.startswith(f"line 2: {said}"), text
            assert text.endswith("Nothing was imported."), text
            assert await mem.list_memories() == []
