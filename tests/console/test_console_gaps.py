"""The adapters in console/gaps.py, on a real store through the facade."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from nooa_mcp import InvalidInput, Memory, OwnerForbidden
from nooa_mcp.console import gaps

pytestmark = pytest.mark.anyio

YEAR_AGO = datetime.now(UTC) - timedelta(days=365)


async def test_a_tag_filter_scans_a_bounded_number_of_rows_per_page_and_continues(mem):
    for i in range(30):
        await mem.author(f"entry {i} about topic {i * 7}", tags=["rare"] if i % 10 == 9 else [])
    first = await gaps.list_filtered(
        mem, type=None, owner=None, tag="RARE", archived=False, after=None, scan=15
    )
    assert [v.content for v in first.views] == ["entry 9 about topic 63"]
    assert first.scanned == 15 and first.next_after is not None
    rest = await gaps.list_filtered(
        mem, type=None, owner=None, tag="rare", archived=False, after=first.next_after, scan=15
    )
    assert [v.content for v in rest.views] == [
        "entry 19 about topic 133",
        "entry 29 about topic 203",
    ]
    assert rest.next_after is None


async def test_an_owner_filter_keeps_only_that_owners_rows(store_path, embedder):
    async with Memory.open(store_path, owner="", embedder=embedder) as shared:
        await shared.author("everyone may read this")
    async with Memory.open(store_path, owner="coder@laptop", embedder=embedder) as mine:
        await mine.author("only the coder role reads this")
        only_shared = await gaps.list_filtered(
            mine, type=None, owner="", tag=None, archived=False, after=None
        )
        only_me = await gaps.list_filtered(
            mine, type=None, owner="coder@laptop", tag=None, archived=False, after=None
        )
    assert [v.content for v in only_shared.views] == ["everyone may read this"]
    assert [v.content for v in only_me.views] == ["only the coder role reads this"]


async def test_revive_restores_the_same_memory_with_its_history(mem):
    written = await mem.author("The office wifi password is on the fridge")
    await mem.forget(written.id)
    result = await gaps.revive(mem, written.id[:8])
    view = await mem.get(written.id)
    assert (result.status, result.id, view.archived) == ("revived", written.id, False)
    channels = [a.channel.value for _, a in await mem.access_log(written.id)]
    assert channels == ["reinforced", "created"]


async def test_reviving_a_live_memory_is_refused(mem):
    written = await mem.author("Standup is at 9:30")
    with pytest.raises(InvalidInput, match="is not forgotten"):
        await gaps.revive(mem, written.id)


async def test_revive_across_roles_is_refused_and_writes_nothing(store_path, embedder):
    async with Memory.open(store_path, owner="", embedder=embedder) as shared:
        note = await shared.author("A shared note about the printer")
        await shared.forget(note.id)
    async with Memory.open(store_path, owner="coder@laptop", embedder=embedder) as mine:
        before = (await mine.stats()).total
        with pytest.raises(OwnerForbidden):
            await gaps.revive(mine, note.id)
        assert (await mine.stats()).total == before
        assert (await mine.get(note.id)).archived


async def test_revive_says_which_memory_came_back_when_two_forgotten_ones_share_content(mem):
    first = await mem.author("Releases happen on Tuesdays")
    twin = await mem.author("Releases happen on Tuesdays", type="skill")
    await mem.forget(first.id)
    await mem.forget(twin.id)  # the newer tombstone for the same content
    with pytest.raises(InvalidInput, match=f"reviving restored {twin.id[:8]} instead"):
        await gaps.revive(mem, first.id)
    assert (await mem.get(first.id)).archived and not (await mem.get(twin.id)).archived


async def test_revive_is_refused_when_a_live_memory_already_holds_the_content(mem):
    old = await mem.author("The VPN needs the new client")
    await mem.forget(old.id)
    other = await mem.author("Something else entirely")
    await mem.update(other.id, content="The VPN needs the new client")
    with pytest.raises(InvalidInput, match=f"answered 'exists' for {other.id[:8]}"):
        await gaps.revive(mem, old.id)
    assert (await mem.get(old.id)).archived


async def test_stability_read_off_the_prune_eta_reproduces_the_views_retention(mem):
    written = await mem.author(
        "Parking is in level B2", created_at=datetime.now(UTC) - timedelta(days=20)
    )
    view = await mem.get(written.id)
    stability = gaps.stability_hours(mem, view)
    hours = (datetime.now(UTC) - view.last_accessed_at).total_seconds() / 3600
    assert math.exp(-hours / stability) == pytest.approx(view.retention, abs=1e-3)
    await mem.forget(written.id)
    archived = await mem.get(written.id)
    assert archived.prune_eta is None
    assert gaps.stability_hours(mem, archived) == pytest.approx(stability, rel=1e-6)


async def test_todos_list_open_first_then_by_importance_then_oldest(mem):
    low = (await mem.todo("add", content="water plants", importance="LOW")).id
    high = (await mem.todo("add", content="renew the TLS cert", importance="HIGH")).id
    done = (await mem.todo("add", content="book the room", importance="CRITICAL")).id
    await gaps.set_todo_status(mem, done, "done")
    groups, more = await gaps.todos(mem)
    assert {s: [v.id for v in items] for s, items in groups.items()} == {
        "open": [high, low],
        "done": [done],
        "dropped": [],
    }
    assert more == set()
    _, more = await gaps.todos(mem, {"open": 1, "done": 1})
    assert more == {"open"}


async def test_closing_something_that_is_not_a_todo_is_refused(mem):
    note = await mem.author("not a todo")
    with pytest.raises(InvalidInput, match="not a todo"):
        await gaps.set_todo_status(mem, note.id, "done")
    intent = await mem.intent("add", content="ping", cue="deploy")
    with pytest.raises(InvalidInput, match="not an intent"):
        await gaps.cancel_intent(mem, note.id)
    await gaps.cancel_intent(mem, intent.id)
    assert (await mem.get(intent.id)).archived


async def test_the_neighbourhood_follows_outgoing_links_two_hops_and_no_further(mem):
    a, b, c, d = [(await mem.author(f"node {n} text {n * 11}")).id for n in range(4)]
    await mem.link(a, b, "related")
    await mem.link(b, c, "causes")
    await mem.link(c, d, "causes")
    hood = await gaps.neighbourhood(mem, a, hops=2)
    assert set(hood.nodes) == {a, b, c}
    assert [[n for n, _ in ring] for ring in hood.rings] == [[b], [c]]
    assert sorted((s, t, k) for s, t, k, _ in hood.edges) == sorted(
        [(a, b, "related"), (b, c, "causes")]
    )


async def test_reflection_history_lists_passes_oldest_first_with_changes_per_step(mem):
    for i in range(3):
        await mem.author(
            f"forgotten errand {i} code {i * 13}", importance="TRIVIAL", created_at=YEAR_AGO
        )
    await mem.reflect(["prune"])
    await mem.reflect(["prune"])
    passes = await gaps.reflection_history(mem)
    assert [p.applied for p in passes] == [{"prune": 3}, {"prune": 0}]
    assert passes[0].when <= passes[1].when
