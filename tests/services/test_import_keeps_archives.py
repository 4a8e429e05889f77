"""An import brings archived memories back archived at once, each line its own memory.

Found by an audit of export and import: a forgotten line was written live and archived only
after the whole file (an import stopped halfway left it live, and a second run answered
`exists` and never archived it); an export line whose words a forgotten memory had was
blocked by that tombstone and lost; an import that gave a merged duplicate's anchor a new id
left the duplicate's reason naming the old one, so forgetting the anchor left the duplicate
answering.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.services import transfer

pytestmark = pytest.mark.anyio

GATE = "The gate code is 4411"
PHONE = "Alice's old phone number is 555-0100"


def _open(target: Path, owner: str = "alice") -> Memory:
    return Memory.open(settings=Settings(store=target, owner=owner), embedder=HashEmbedder())


async def _export(target: Path, owner: str = "alice") -> list[dict]:
    async with _open(target, owner) as mem:
        return [
            r async for r in mem.export_records(include_archived=True) if "maintenance" not in r
        ]


async def test_an_import_stopped_after_a_batch_leaves_its_forgotten_lines_forgotten(
    tmp_path, monkeypatch
) -> None:
    source = tmp_path / "source.sqlite"
    async with _open(source) as mem:
        gone = (await mem.author(PHONE)).id
        await mem.forget(gone)
        await mem.author("The printer is on the third floor")
    lines = await _export(source)
    monkeypatch.setattr(transfer, "BATCH", 1)
    real = transfer.author_many
    calls = 0

    async def second_batch_fails(*args, **kwargs):
        nonlocal calls
        calls += 1
        if calls == 2:
            raise RuntimeError("killed")
        return await real(*args, **kwargs)

    monkeypatch.setattr(transfer, "author_many", second_batch_fails)
    target = tmp_path / "target.sqlite"
    async with _open(target) as mem:
        with pytest.raises(RuntimeError):
            await mem.import_records(list(enumerate(lines, 1)))
        view = await mem.get(gone)
        assert view.archived and not view.flags.faded
        assert gone not in [h.id for h in (await mem.recall("alice old phone number")).hits]


async def test_an_export_line_is_never_blocked_by_a_tombstone_of_its_words(tmp_path) -> None:
    """X forgotten and exported; later Y edited to X's words and exported: importing the two
    files one after the other keeps Y, live, beside the forgotten X."""
    source = tmp_path / "source.sqlite"
    async with _open(source) as mem:
        x = (await mem.author(GATE)).id
        await mem.forget(x)
    first = await _export(source)
    async with _open(source) as mem:
        y = (await mem.author("The side gate code is unknown", tags=["gate"])).id
        await mem.update(y, content=GATE)
    second = [r for r in await _export(source) if r["id"] == y]
    target = tmp_path / "target.sqlite"
    async with _open(target) as mem:
        assert (await mem.import_records(list(enumerate(first, 1)))).counts["archived"] == 1
        counts = (await mem.import_records(list(enumerate(second, 1)))).counts
        assert counts == {"created": 1, "edges": 0}
        view = await mem.get(y)
        assert (view.archived, view.content, view.tags) == (False, GATE, ["gate"])
        assert (await mem.get(x)).archived


async def test_a_renamed_anchor_still_takes_its_merged_duplicate_with_it(tmp_path) -> None:
    """Bob imports alice's export into the same store (every id is alice's, so each line gets
    a new one): the duplicate's reason names the anchor's new id, and bob's forget of the
    anchor forgets the duplicate too, as alice's does hers."""
    store = tmp_path / "m.sqlite"
    async with _open(store) as mem:
        anchor = (await mem.author("The ferry leaves pier nine at noon.")).id
        await mem.author("the ferry leaves pier nine at noon")
        (merge,) = (await mem.reflect(["merge"])).steps
        assert merge.applied == 1
    lines = await _export(store)
    async with _open(store, "bob") as mem:
        report = await mem.import_records(list(enumerate(lines, 1)))
        assert report.counts["new_ids"] == 2
        ids = dict(zip([line["id"] for line in lines], report.ids, strict=True))
        stones = await mem.engine.store.tombstones_of([i for i in report.ids if i != ids[anchor]])
        assert [s.reason for s in stones.values()] == [f"merged into {ids[anchor][:8]}"]
        await mem.forget(ids[anchor])
        hits = (await mem.recall("when does the ferry leave pier nine", k=5)).hits
        assert [h.id for h in hits if h.id in report.ids] == []


async def test_a_store_moved_by_a_plain_export_keeps_its_faded_memories(tmp_path) -> None:
    """A faded memory still answers recall; `export` without flags left it out, so a store
    moved by `export | import` lost it. Forgotten ones still need --include-archived."""
    from datetime import timedelta

    import time_machine

    from nooa_mcp.domain.schema import now as utc_now

    source = tmp_path / "source.sqlite"
    start = utc_now()
    with time_machine.travel(start, tick=False):
        async with _open(source) as mem:
            code = (await mem.author("The garage door code is 7781")).id
            gone = (await mem.author(PHONE)).id
            await mem.forget(gone)
    with time_machine.travel(start + timedelta(days=120), tick=False):
        async with _open(source) as mem:
            await mem.reflect(["prune"])
            assert (await mem.get(code)).flags.faded
            plain = [r async for r in mem.export_records() if "maintenance" not in r]
        assert [r["id"] for r in plain] == [code]
        target = tmp_path / "target.sqlite"
        async with _open(target) as mem:
            await mem.import_records(list(enumerate(plain, 1)))
            assert (await mem.get(code)).flags.faded
            hits = (await mem.recall("what is the garage door code")).hits
            assert code in [h.id for h in hits]


async def test_a_memory_reference_follows_the_memory_it_names_to_its_new_id(tmp_path) -> None:
    """Bob imports alice's export into the same store: every line gets a new id, and a
    `memory:` reference to another line names that line's new id, with its preview as
    captured (the memory it names is written in the same batch, after or before it)."""
    store = tmp_path / "m.sqlite"
    async with _open(store) as mem:
        ferry = (await mem.author("The ferry leaves pier nine at noon.")).id
        citing = (
            await mem.author("Timetables are in the harbour office", references=[f"memory:{ferry}"])
        ).id
    lines = await _export(store)
    async with _open(store, "bob") as mem:
        report = await mem.import_records(list(enumerate(lines, 1)))
        ids = dict(zip([line["id"] for line in lines], report.ids, strict=True))
        assert ids[ferry] != ferry and ids[citing] != citing
        (ref,) = (await mem.get(ids[citing])).references
    assert ref.uri == f"memory:{ids[ferry]}"
    assert ref.value == "The ferry leaves pier nine at noon." and ref.state == "LIVE"


async def test_a_forget_stamped_before_the_pass_that_faded_it_still_forgets_after_import(
    tmp_path,
) -> None:
    """Two machines on one store, clocks a day apart: a pass on the one ahead fades a memory,
    then its user forgets it from the one behind, so the forget's tombstone is the older. The
    store says forgotten; an import read the newest standing tombstone (the pass's) and
    brought the memory back faded, recallable and revived by the next recall."""
    from datetime import timedelta

    import time_machine

    from nooa_mcp.domain.schema import now as utc_now

    source = tmp_path / "source.sqlite"
    start = utc_now()
    with time_machine.travel(start, tick=False):
        async with _open(source) as mem:
            pin = (await mem.author("My old bank PIN was 4321")).id
    with time_machine.travel(start + timedelta(days=121), tick=False):
        async with _open(source) as mem:
            await mem.reflect(["prune"])
            assert (await mem.get(pin)).flags.faded
    with time_machine.travel(start + timedelta(days=120), tick=False):
        async with _open(source) as mem:
            await mem.forget(pin)
    with time_machine.travel(start + timedelta(days=122), tick=False):
        lines = await _export(source)
        stones = lines[0]["tombstones"]
        assert [s["reason"][:6] for s in stones] == ["forgot", "pruned"]  # the forget is older
        target = tmp_path / "target.sqlite"
        async with _open(target) as mem:
            await mem.import_records(list(enumerate(lines, 1)))
            view = await mem.get(pin)
            assert view.archived and not view.flags.faded
            hits = (await mem.recall("what was my bank PIN", include_archived=True)).hits
            assert pin not in [h.id for h in hits]
