"""A re-imported export carries its user's forgets: a memory this store holds already (the
same id and words) that the file says its user forgot since is forgotten here too.

Before: the line was answered `exists` and nothing else happened, so syncing two machines by
export and import left a memory forgotten on one recalled forever on the other. A forget older
than the memory's revival here is not applied (this store's user brought it back since), and a
file that says a memory is live leaves one forgotten here forgotten: only revive restores it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import time_machine

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 12, 1, 9, tzinfo=UTC)
KEY = "The boiler key hangs behind the pantry door"


def _open(store: Path | str) -> Memory:
    return Memory.open(settings=Settings(store=store, owner="alice@a"), embedder=HashEmbedder())


async def _export(store: Path | str) -> list[tuple[int, dict]]:
    async with _open(store) as mem:
        return list(enumerate([r async for r in mem.export_records(include_archived=True)], 1))


async def _copied(source: Path, target: Path | str) -> tuple[str, list[tuple[int, dict]]]:
    """KEY written at T0 in `source`, exported and imported into `target`: its id, the file."""
    with time_machine.travel(T0, tick=False):
        async with _open(source) as mem:
            key = (await mem.author(KEY)).id
        live = await _export(source)
        async with _open(target) as mem:
            assert (await mem.import_records(live)).counts.get("created") == 1
    return key, live


async def _forgotten_then_exported(source: Path, key: str, days: int) -> list[tuple[int, dict]]:
    """`key` forgotten in `source` (reason "moved the key") `days` after T0, then exported."""
    with time_machine.travel(T0 + timedelta(days=days), tick=False):
        async with _open(source) as mem:
            await mem.forget(key, "moved the key")
        return await _export(source)


async def test_a_forget_in_the_file_is_applied_to_the_copy_held_here(
    tmp_path, store_target
) -> None:
    source = tmp_path / "source.sqlite"
    with time_machine.travel(T0, tick=False):
        async with _open(source) as mem:
            key = (await mem.author(KEY)).id
            other = (await mem.author("The fuse box is in the cellar")).id
        live = await _export(source)
        async with _open(store_target) as mem:
            assert (await mem.import_records(live)).counts.get("created") == 2
    forgot = await _forgotten_then_exported(source, key, days=30)
    with time_machine.travel(T0 + timedelta(days=60), tick=False):
        async with _open(store_target) as mem:
            report = await mem.import_records(forgot)
            assert report.counts.get("exists") == 2
            assert report.counts.get("forgotten") == 1
            assert (await mem.get(key)).archived
            hits = (await mem.recall("boiler key pantry door", k=5, include_archived=True)).hits
            assert key not in [h.id for h in hits]
            assert not (await mem.get(other)).archived  # what the file keeps live stays live
            # Kept, not dropped: shown by id, with the file's reason and time.
            stones = [r async for r in mem.export_records(include_archived=True)]
            [line] = [r for r in stones if r.get("id") == key]
            assert [t["reason"] for t in line["tombstones"]] == ["moved the key"]
            # Again: nothing more to do.
            again = await mem.import_records(forgot)
            assert "forgotten" not in again.counts
            # The user here brings it back; the same (older) file does not forget it again.
        with time_machine.travel(T0 + timedelta(days=61), tick=False):
            async with _open(store_target) as mem:
                await mem.revive(key)
                assert "forgotten" not in (await mem.import_records(forgot)).counts
                assert not (await mem.get(key)).archived


async def test_a_file_that_says_live_leaves_a_memory_forgotten_here_forgotten(
    tmp_path, store_target
) -> None:
    key, live = await _copied(tmp_path / "source.sqlite", store_target)
    with time_machine.travel(T0 + timedelta(days=30), tick=False):
        async with _open(store_target) as mem:
            await mem.forget(key)
            assert "forgotten" not in (await mem.import_records(live)).counts
            assert (await mem.get(key)).archived


def _forgotten_line(lines: list[tuple[int, dict]], key: str, stones: list[dict] | None) -> list:
    """`lines` with the line of `key` archived, carrying `stones` (None: no tombstones at all,
    as a file of an earlier release or one written by hand)."""
    out = []
    for at, line in lines:
        if line.get("id") == key:
            line = {**line, "archived": True}
            line.pop("tombstones", None)
            if stones is not None:
                line["tombstones"] = stones
        out.append((at, line))
    return out


@pytest.mark.parametrize(
    "stones",
    [
        None,  # no tombstones: dated by the import
        [{"reason": "moved the key"}],  # a forget without a time
        [{"reason": "moved the key", "ts": "2099-01-01T00:00:00.123457Z"}],  # a clock far ahead
    ],
    ids=["no-tombstones", "undated", "future"],
)
async def test_a_revive_here_holds_against_a_forget_the_file_cannot_date_before_it(
    tmp_path, store_target, stones
) -> None:
    """A forget whose time does not place it before this store's revive (none given, or
    ahead of this clock) was applied again by every import of the same file: the user here
    revived the memory, imported the file once more and found it forgotten again."""
    key, live = await _copied(tmp_path / "source.sqlite", store_target)
    forgot = _forgotten_line(live, key, stones)
    with time_machine.travel(T0 + timedelta(days=30), tick=False):
        async with _open(store_target) as mem:
            # Never revived here: the file's forget is applied.
            assert (await mem.import_records(forgot)).counts.get("forgotten") == 1
            assert (await mem.get(key)).archived
    with time_machine.travel(T0 + timedelta(days=31), tick=False):
        async with _open(store_target) as mem:
            await mem.revive(key)
    with time_machine.travel(T0 + timedelta(days=32), tick=False):
        async with _open(store_target) as mem:
            assert "forgotten" not in (await mem.import_records(forgot)).counts
            assert not (await mem.get(key)).archived


async def test_a_line_without_a_use_history_carries_its_forget_too(tmp_path, store_target) -> None:
    """A line of an earlier release or written by hand carries no `history`: found by its
    words, it was answered `exists` and left its memory live here (a faded one was forgotten)."""
    key, live = await _copied(tmp_path / "source.sqlite", store_target)
    stone = [{"reason": "moved the key", "ts": (T0 + timedelta(days=20)).isoformat()}]
    forgot = [
        (at, {k: v for k, v in line.items() if k != "history"})
        for at, line in _forgotten_line(live, key, stone)
    ]
    with time_machine.travel(T0 + timedelta(days=30), tick=False):
        async with _open(store_target) as mem:
            report = await mem.import_records(forgot)
            assert report.counts.get("exists") == 1
            assert report.counts.get("forgotten") == 1
            assert (await mem.get(key)).archived


async def test_a_merged_duplicate_the_file_keeps_live_is_not_forgotten_with_its_anchor(
    tmp_path, store_target
) -> None:
    """Reflection here merged one wording into the other; the user on the other machine forgot
    that other one and kept this wording. The forget took the duplicate with it here, so this
    store recalled neither while the file's own store still recalled the duplicate."""
    old = "The deploy key for the billing cluster rotates every month."
    again = "The deploy key for the billing cluster rotates every month!"
    source = tmp_path / "source.sqlite"
    with time_machine.travel(T0, tick=False):
        async with _open(source) as mem:
            ids = {(await mem.author(old)).id, (await mem.author(again)).id}
        live = await _export(source)
        async with _open(store_target) as mem:
            await mem.import_records(live)
            # Which one survives is the merge's choice (both imported with one time).
            [merged] = (await mem.reflect(["merge"])).steps[0].details
            [dup] = [i for i in ids if i.startswith(merged[:8])]
            [anchor] = [i for i in ids if i != dup]
            assert merged == f"{dup[:8]} → {anchor[:8]}"
    with time_machine.travel(T0 + timedelta(days=3), tick=False):
        async with _open(source) as mem:
            await mem.forget(anchor, "the other wording")
            kept = [h.id for h in (await mem.recall("billing cluster deploy key rotate")).hits]
            assert kept == [dup]
        forgot = await _export(source)
        async with _open(store_target) as mem:
            assert (await mem.import_records(forgot)).counts.get("forgotten") == 1
            assert (await mem.get(anchor)).archived
            hits = (await mem.recall("billing cluster deploy key rotate")).hits
            assert [h.id for h in hits] == kept


async def test_an_archived_line_whose_tombstones_are_all_lifted_forgets_as_it_creates(
    tmp_path, store_target
) -> None:
    """An archived line with no standing tombstone (every one lifted: a store of an earlier
    release, or a file edited by hand) creates a forgotten memory (`domain.archive`: none
    standing reads as forgotten); meeting the memory stored here, it left it live."""
    key, live = await _copied(tmp_path / "source.sqlite", store_target)
    day = (T0 + timedelta(days=10)).isoformat()
    stones = [{"reason": "moved the key", "ts": day, "lifted_at": day}]
    forgot = _forgotten_line(live, key, stones)
    with time_machine.travel(T0 + timedelta(days=30), tick=False):
        async with _open(tmp_path / "fresh.sqlite") as mem:
            await mem.import_records(forgot)
            assert (await mem.get(key)).archived
        async with _open(store_target) as mem:
            assert (await mem.import_records(forgot)).counts.get("forgotten") == 1
            assert (await mem.get(key)).archived


async def test_a_forget_counts_against_a_revive_here_by_their_times(tmp_path, store_target) -> None:
    """A file's forget newer than this store's last revive is applied; one older is not,
    though this store never applied it (its user here forgot and revived on their own)."""
    source = tmp_path / "source.sqlite"
    key, _ = await _copied(source, store_target)
    with time_machine.travel(T0 + timedelta(days=5), tick=False):
        async with _open(store_target) as mem:
            await mem.forget(key, "not sure yet")
    with time_machine.travel(T0 + timedelta(days=6), tick=False):
        async with _open(store_target) as mem:
            await mem.revive(key)
    forgot = await _forgotten_then_exported(source, key, days=10)
    with time_machine.travel(T0 + timedelta(days=11), tick=False):
        async with _open(store_target) as mem:
            assert (await mem.import_records(forgot)).counts.get("forgotten") == 1  # day 10 > 6
            assert (await mem.get(key)).archived
    with time_machine.travel(T0 + timedelta(days=12), tick=False):
        async with _open(store_target) as mem:
            await mem.revive(key)
            await mem.forget(key, "my own reason")
    with time_machine.travel(T0 + timedelta(days=15), tick=False):
        async with _open(store_target) as mem:
            await mem.revive(key)
            assert "forgotten" not in (await mem.import_records(forgot)).counts  # day 10 < 15
            assert not (await mem.get(key)).archived
