"""Importing the same file again adds nothing: a line another owner's id names is stored under
an id this importer derives from it, the same each time, and a line that says a shared memory
again is that memory.

Before: each import of another role's export gave every line a fresh random id, so a second
import made a second copy of everything; re-importing your own export (which carries the shared
memories you read) made private copies of every shared memory, and recall showed each twice.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder

pytestmark = pytest.mark.anyio


def _open(store: Path | str, owner: str) -> Memory:
    return Memory.open(settings=Settings(store=store, owner=owner), embedder=HashEmbedder())


async def _export(store: Path | str, owner: str) -> list[tuple[int, dict]]:
    async with _open(store, owner) as mem:
        return list(enumerate([r async for r in mem.export_records()], 1))  # the log's too


async def _linked(store: Path | str, owner: str, first: str, second: str) -> str:
    """`first`, and `second` linked to it, written by `owner`; the id of `first`."""
    async with _open(store, owner) as mem:
        target = (await mem.author(first)).id
        await mem.author(second, links=[{"target": target, "relation": "related"}])
        return target


async def _own_count(store: Path | str, owner: str) -> int:
    async with _open(store, owner) as mem:
        return sum(1 for r in [r async for r in mem.export_records()] if r.get("owner") == owner)


async def test_another_role_s_export_imported_twice_is_copied_once(store_path) -> None:
    store = store_path
    crane = await _linked(
        store, "bob@b", "The harbour crane is serviced on Tuesdays", "The ferry leaves at seven"
    )
    lines = await _export(store, "bob@b")
    async with _open(store, "alice@a") as alice:
        first = await alice.import_records(lines)
        second = await alice.import_records(lines)
        assert first.counts.get("created") == 2
        assert second.counts.get("exists") == 2 and "created" not in second.counts
        assert second.ids == first.ids  # the same copies, found again
        assert crane not in first.ids  # bob's memory is bob's: alice's copy has its own id
        ferry = await alice.get(first.ids[1])
        assert [e["target"] for e in ferry.edges] == [first.ids[0]]  # one edge, to the copy
        hits = (await alice.recall("harbour crane serviced", k=10)).hits
        assert sum(h.content == "The harbour crane is serviced on Tuesdays" for h in hits) == 1
    assert await _own_count(store, "alice@a") == 2
    # Another importer derives other ids: carol's copies are not alice's.
    async with _open(store, "carol@c") as carol:
        theirs = await carol.import_records(lines)
        assert theirs.counts.get("created") == 2
        assert not set(theirs.ids) & set(first.ids)


async def test_your_export_imported_back_leaves_the_shared_memories_shared(store_path) -> None:
    store = store_path
    rule = await _linked(store, "", "Deploys freeze on Fridays", "Hotfixes still ship on Fridays")
    async with _open(store, "alice@a") as alice:
        await alice.author("Alice reviews the deploy checklist")
    lines = await _export(store, "alice@a")
    assert {item["owner"] for _, item in lines} == {"", "alice@a"}
    async with _open(store, "alice@a") as alice:
        again = await alice.import_records(lines)
        assert again.counts.get("exists") == 3 and "created" not in again.counts
        assert rule in again.ids
        # The shared memory's link is the shared owner's: named, not added by alice.
        assert again.counts["edges"] == 0
        assert [s.split(": ", 1)[1] for s in again.skipped_edges] == [
            f"the related edge to {rule} was not added: its memory is a shared one stored "
            "already, which only the shared owner links from."
        ]
        hits = (await alice.recall("deploys freeze fridays", k=10)).hits
        assert [h.id for h in hits if h.content == "Deploys freeze on Fridays"] == [rule]
    assert await _own_count(store, "alice@a") == 1


async def test_a_line_that_differs_from_the_shared_memory_its_id_names_is_kept(
    store_path,
) -> None:
    store = store_path
    async with _open(store, "") as shared:
        rule = (await shared.author("Deploys freeze on Fridays")).id
    line = {"id": rule, "content": "Deploys freeze on Fridays and Saturdays", "owner": ""}
    async with _open(store, "alice@a") as alice:
        first = await alice.import_records([(1, line)])
        second = await alice.import_records([(1, line)])
        assert first.counts.get("created") == 1
        assert second.counts.get("exists") == 1 and "created" not in second.counts
        assert first.ids == second.ids and first.ids[0] != rule
        kept = await alice.get(first.ids[0])
        assert kept.content == "Deploys freeze on Fridays and Saturdays"
        assert (await alice.get(rule)).content == "Deploys freeze on Fridays"


async def test_a_copy_edited_since_is_not_overwritten_by_the_line_again(store_path) -> None:
    store = store_path
    async with _open(store, "bob@b") as bob:
        await bob.author("The harbour crane is serviced on Tuesdays")
    lines = await _export(store, "bob@b")
    async with _open(store, "alice@a") as alice:
        [copy] = (await alice.import_records(lines)).ids
        await alice.update(copy, content="The harbour crane is serviced on Wednesdays")
        again = await alice.import_records(lines)
        assert again.counts.get("created") == 1  # the line says something else: kept too
        assert again.ids[0] != copy
        assert (await alice.get(copy)).content == "The harbour crane is serviced on Wednesdays"
        third = await alice.import_records(lines)  # found beside the edited copy
        assert third.ids == again.ids and "created" not in third.counts
    assert await _own_count(store, "alice@a") == 2


async def test_another_instance_of_the_role_finds_the_copies_too(store_path) -> None:
    """Memories belong to a role: alice on her desktop finds what alice on her laptop
    imported, as she finds everything else the laptop wrote."""
    store = store_path
    async with _open(store, "bob@b") as bob:
        await bob.author("The harbour crane is serviced on Tuesdays")
    lines = await _export(store, "bob@b")
    async with _open(store, "alice@laptop") as laptop:
        first = await laptop.import_records(lines)
    async with _open(store, "alice@desktop") as desktop:
        again = await desktop.import_records(lines)
    assert again.ids == first.ids and "created" not in again.counts


async def test_a_dated_copy_faded_by_a_pass_is_found_again_not_copied(store_path) -> None:
    """Time passes: a 2023 line of another role's export, imported, faded by a pass two
    years on; the same file imported again is that copy (`exists`, as it is), not a second
    copy beside it."""
    from datetime import timedelta

    from nooa_mcp.domain.schema import now as utc_now

    async with _open(store_path, "bob@b") as bob:
        await bob.author("The harbour crane was serviced by Kranwerk")
    lines = await _export(store_path, "bob@b")
    [(_, line)] = lines
    line = {**line, "created_at": "2023-03-01T10:00:00+00:00"}
    line.pop("history", None)  # learned at its import, on its own date
    async with _open(store_path, "alice@a") as alice:
        [copy] = (await alice.import_records([(1, line)])).ids
        assert (await alice.get(copy)).created_at.year == 2023
        await alice.reflect(["prune"], now=utc_now() + timedelta(days=730))
        assert (await alice.get(copy)).archived  # faded by the pass
        again = await alice.import_records([(1, line)])
        assert again.ids == [copy] and again.counts.get("exists") == 1
        assert (await alice.get(copy)).archived
    assert await _own_count(store_path, "alice@a") == 1


def _linking(line_id: str, content: str, target: str) -> dict:
    """A line of a day later with a `related` edge to `target` (an id or a prefix)."""
    edge = {"target": target, "type": "related", "weight": 1.0}
    return {
        "id": line_id,
        "content": content,
        "created_at": "2026-01-02T10:00:00Z",
        "edges": [edge],
    }


def _rent_paid_twice(first: str, second: str, **extra) -> list[dict]:
    """Two plain lines of one episode 40 minutes apart: the second is folded into the first."""
    paid = {"type": "episode", "content": "Paid the office rent"}
    return [
        {"id": first, **paid, "created_at": "2026-01-01T10:00:00Z"},
        {"id": second, **paid, "created_at": "2026-01-01T10:40:00Z", **extra},
    ]


async def test_an_edge_to_a_line_folded_into_a_stored_memory_lands_on_that_memory(
    store_path,
) -> None:
    """A plain line that says a stored memory again (an episode within the hour) is folded
    into it, `exists`; an edge another line of the file made to its id was skipped, "the id
    names no memory you can link to" (time-passing helper)."""
    rent, again, account = ("5" * 32, "6" * 32, "7" * 32)
    lines = [
        *_rent_paid_twice(rent, again, tags=["finance"]),
        _linking(account, "Rent is paid from the operations account", again),
        _linking("8" * 32, "The landlord is paid on the first of the month", again[:8]),
    ]
    async with _open(store_path, "alice@a") as mem:
        report = await mem.import_records(list(enumerate(lines, 1)))
        assert report.counts.get("exists") == 1 and report.counts["edges"] == 2, report
        assert report.skipped_edges == []
        edges = (await mem.get(account)).edges
        assert [(e["target"], e["type"]) for e in edges] == [(rent, "related")], edges
        by_prefix = (await mem.get("8" * 32)).edges  # the target named by its first 8
        assert [(e["target"], e["type"]) for e in by_prefix] == [(rent, "related")], by_prefix
        assert (await mem.get(rent)).tags == ["finance"]


async def test_a_prefix_both_a_folded_line_and_a_stored_memory_start_with_is_ambiguous(
    store_path,
) -> None:
    """It went to the folded line's memory without a word (re-test helper); the store's own
    lookup calls such a prefix ambiguous, and so does the import now."""
    rent, again, printer = "5" * 32, "ab" * 16, "ab" * 4 + "c" * 24
    lines = [
        *_rent_paid_twice(rent, again),
        {"id": printer, "content": "The printer on floor two is broken"},
        _linking("9" * 32, "Rent and repairs come from one budget", again[:8]),
    ]
    async with _open(store_path, "alice@a") as mem:
        report = await mem.import_records(list(enumerate(lines, 1)))
        assert report.counts["edges"] == 0
        (skipped,) = report.skipped_edges
        assert "abababab" in skipped and "matches several of your memories" in skipped
