"""The facade verbs the console stands on: revive by id, the reader's write rule and
forgetting curve on a view, listing by owner and tag, the neighbourhood either way, the
maintenance log, and todo and intent listings that fire no reminder. Owner rules are the tools'
(DESIGN.md §10): what one role may not change through a tool it may not change here."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from nooa_mcp import InvalidInput, Memory, NotFound, OwnerForbidden, Settings

pytestmark = pytest.mark.anyio

YEAR_AGO = datetime.now(UTC) - timedelta(days=365)
PAST = "2020-01-01T00:00:00Z"
FACT = "The office wifi password is on the fridge"


# --------------------------------------------------------------------------- revive


async def test_revive_restores_that_very_memory_with_its_history_and_lifts_its_tombstone(mem):
    written = await mem.author(FACT, importance="HIGH", tags=["office"])
    await mem.link(written.id, (await mem.author("The fridge is in room 4")).id, "related")
    await mem.forget(written.id)
    result = await mem.revive(written.id[:8])
    assert (result.id, result.changed, result.archived) == (written.id, ["revived"], False)
    view = await mem.get(written.id)
    assert (view.archived, view.tags, view.importance, view.edges_total) == (
        False,
        ["office"],
        8.0,
        1,
    )
    log = [a for _, a in await mem.access_log(written.id)]
    assert [(a.channel.value, a.query) for a in log] == [
        ("reinforced", "revive"),
        ("reinforced", None),  # the link
        ("created", None),
    ]
    assert log[0].reader_owner == "coder@laptop"
    # The tombstone is lifted: writing the value again is an exact repeat, not a blocked write.
    assert (await mem.author(FACT)).status == "exists"
    assert (await mem.recall("wifi password fridge")).hits[0].id == written.id


async def test_reviving_a_live_memory_changes_nothing(mem):
    written = await mem.author(FACT)
    result = await mem.revive(written.id)
    assert (result.changed, result.archived) == ([], False)
    assert [a.channel.value for _, a in await mem.access_log(written.id)] == ["created"]


async def test_revive_restores_the_memory_asked_for_when_a_newer_forgotten_twin_shares_it(mem):
    """Reviving through `author(revive=True)` matches content and would restore the newer
    twin's tombstone; by id, the memory named comes back and the twin stays forgotten."""
    first = await mem.author("Releases happen on Tuesdays")
    twin = await mem.author("Releases happen on Tuesdays", type="skill")
    await mem.forget(first.id)
    await mem.forget(twin.id)
    await mem.revive(first.id)
    assert not (await mem.get(first.id)).archived
    assert (await mem.get(twin.id)).archived
    assert (await mem.author("Releases happen on Tuesdays", type="skill")).status == (
        "blocked-by-tombstone"
    )


async def test_revive_restores_the_memory_even_when_a_live_one_now_holds_its_content(mem):
    old = await mem.author("The VPN needs the new client")
    await mem.forget(old.id)
    other = await mem.author("Something else entirely")
    await mem.update(other.id, content="The VPN needs the new client")
    assert (await mem.revive(old.id)).changed == ["revived"]
    assert not (await mem.get(old.id)).archived and not (await mem.get(other.id)).archived


async def test_revive_of_a_shared_memory_by_a_role_is_refused_and_writes_nothing(
    store_path, embedder
):
    async with Memory.open(store_path, owner="", embedder=embedder) as shared:
        note = await shared.author("A shared note about the printer")
        live = await shared.author("The printer is on the second floor")
        await shared.forget(note.id)
    async with Memory.open(store_path, owner="coder@laptop", embedder=embedder) as coder:
        with pytest.raises(OwnerForbidden):
            await coder.forget(live.id)  # a live shared memory: the user's, said so
        # One the user forgot is the user's alone (DESIGN.md §10): not there for a role,
        # to revive, forget again, read or read the history of.
        for verb in (coder.revive, coder.forget, coder.get, coder.access_log):
            with pytest.raises(NotFound):
                await verb(note.id)
    async with Memory.open(store_path, owner="", embedder=embedder) as shared:
        assert len(await shared.access_log(note.id)) == 1
        assert (await shared.revive(note.id)).changed == ["revived"]


async def test_revive_of_a_granted_roles_memory_is_refused_as_read_only(store_path, embedder):
    async with Memory.open(store_path, owner="writer@desk", embedder=embedder) as writer:
        faded = (await writer.author("The style guide prefers short sentences")).id
        gone = (await writer.author("The old style guide wanted long sentences")).id
        await writer.forget(gone)
        await writer.reflect(["prune"], now=datetime.now(UTC) + timedelta(days=3650))
    async with Memory.open(
        store_path, owner="coder@laptop", read=["writer"], embedder=embedder
    ) as coder:
        assert (await coder.get(faded, scope="writer")).archived
        # It reads it (a grant), so "no memory with id" would mislead: read-only, said so.
        with pytest.raises(OwnerForbidden) as refused:
            await coder.revive(faded)
        # Named by the argument that named it (it said "owner:").
        assert str(refused.value).startswith(
            "memory_id: that memory is of role 'writer', which this server lets you read"
        )
        # What the role forgot a grant does not reach: plainly not found (DESIGN.md §10).
        for read in (lambda: coder.get(gone, scope="writer"), lambda: coder.revive(gone)):
            with pytest.raises(NotFound):
                await read()
    async with Memory.open(store_path, owner="writer@desk", embedder=embedder) as writer:
        assert (await writer.get(faded)).archived and (await writer.get(gone)).archived


async def test_another_instance_of_the_same_role_may_revive(store_path, embedder):
    async with Memory.open(store_path, owner="coder@laptop", embedder=embedder) as laptop:
        written = (await laptop.author(FACT)).id
        await laptop.forget(written)
    async with Memory.open(store_path, owner="coder@desk", embedder=embedder) as desk:
        assert (await desk.revive(written)).changed == ["revived"]
        newest = (await desk.access_log(written, limit=1))[0][1]
    assert newest.reader_owner == "coder@desk"


# --------------------------------------------------------------------------- what a view says


async def test_a_view_says_whether_this_reader_may_change_it(store_path, embedder):
    async with Memory.open(store_path, owner="", embedder=embedder) as shared:
        public = (await shared.author("Lunch is at noon")).id
        assert (await shared.get(public)).writable
    async with Memory.open(store_path, owner="coder@laptop", embedder=embedder) as laptop:
        mine = (await laptop.author(FACT)).id
        assert (await laptop.get(mine)).writable
        assert not (await laptop.get(public)).writable
    async with Memory.open(
        store_path, owner="writer@desk", read=["coder"], embedder=embedder
    ) as writer:
        assert not (await writer.get(mine, scope="coder")).writable
    async with Memory.open(store_path, owner="coder@desk", embedder=embedder) as desk:
        assert (await desk.get(mine)).writable
        assert [v.writable for _, v in await desk.list_memories()] == [False, True]


async def test_a_views_stability_reproduces_its_retention_and_prune_eta(mem):
    """R = exp(−Δt/S) and ETA = last access + S·ln(1/threshold) (DESIGN.md §7), S from the view."""
    written = await mem.author(FACT, created_at=datetime.now(UTC) - timedelta(days=20))
    view = await mem.get(written.id)
    hours = (datetime.now(UTC) - view.last_accessed_at).total_seconds() / 3600
    assert math.exp(-hours / view.stability_hours) == pytest.approx(view.retention, abs=1e-3)
    threshold = mem.settings.forgetting.prune_below
    eta = view.last_accessed_at + timedelta(hours=view.stability_hours * math.log(1 / threshold))
    assert abs((view.prune_eta - eta).total_seconds()) < 1
    # Each rehearsal stretches the curve: S = τ·(1 + ln(1 + strength)).
    await mem.recall("wifi password fridge")
    again = await mem.get(written.id)
    assert again.strength == view.strength + 1
    tau = mem.settings.forgetting.tau_hours
    assert again.stability_hours == pytest.approx(tau * (1 + math.log1p(again.strength)))


async def test_a_view_says_why_pruning_never_takes_it(mem):
    skill = (await mem.author("How to rotate keys", type="skill")).id
    todo = (await mem.todo("add", content="Rotate the keys")).id
    vital = (await mem.author("The root CA lives offline", importance="CRITICAL")).id
    plain = (await mem.author(FACT)).id
    assert (await mem.get(skill)).protected == "type skill is protected"
    assert (await mem.get(todo)).protected == "open todo"
    assert (await mem.get(vital)).protected == "importance ≥ 8"
    assert (await mem.get(plain)).protected is None
    await mem.todo("done", memory_id=todo)
    assert (await mem.get(todo)).protected is None


# --------------------------------------------------------------------------- listing filters


async def test_a_tag_filter_runs_in_the_store_and_pages_by_cursor(mem):
    for i in range(30):
        await mem.author(f"entry {i} about topic {i * 7}", tags=["rare"] if i % 10 == 9 else [])
    first = await mem.list_memories(tag="RARE", limit=2)
    assert [v.content for _, v in first] == ["entry 9 about topic 63", "entry 19 about topic 133"]
    rest = await mem.list_memories(tag=" rare ", after=first[-1][0], limit=2)
    assert [v.content for _, v in rest] == ["entry 29 about topic 203"]


async def test_an_owner_filter_keeps_one_owners_rows_and_never_widens_the_scope(
    store_path, embedder
):
    async with Memory.open(store_path, owner="", embedder=embedder) as shared:
        await shared.author("everyone may read this")
    async with Memory.open(store_path, owner="writer@desk", embedder=embedder) as writer:
        await writer.author("only writers read this")
    async with Memory.open(store_path, owner="coder@laptop", embedder=embedder) as coder:
        await coder.author("only the coder role reads this")
        only_shared = await coder.list_memories(owner="")
        only_me = await coder.list_memories(owner="coder@laptop")
        theirs = await coder.list_memories(owner="writer@desk", archived=None)
        with pytest.raises(InvalidInput) as bad_owner:
            await coder.list_memories(owner="not an owner")
        with pytest.raises(InvalidInput) as bad_tag:
            await coder.list_memories(tag="  ")
    assert [v.content for _, v in only_shared] == ["everyone may read this"]
    assert [v.content for _, v in only_me] == ["only the coder role reads this"]
    assert theirs == []
    assert (bad_owner.value.field, bad_tag.value.field) == ("owner", "tag")


# --------------------------------------------------------------------------- neighbourhood


async def test_the_neighbourhood_follows_links_either_way_two_hops_and_no_further(mem):
    a, b, c, d, e = [(await mem.author(f"node {n} text {n * 11}")).id for n in range(5)]
    await mem.link(a, b, "related")
    await mem.link(c, b, "refines")  # points at b: found from b all the same
    await mem.link(b, d, "causes")
    await mem.link(d, e, "causes")  # three hops from a
    hood = await mem.neighbourhood(a[:8], hops=2)
    assert hood.center == a
    assert set(hood.nodes) == {a, b, c, d}
    assert [sorted(ring) for ring in hood.rings] == [[(b, a)], sorted([(c, b), (d, b)])]
    assert sorted((x.src, x.dst, x.type) for x in hood.edges) == sorted(
        [(a, b, "related"), (c, b, "refines"), (b, d, "causes")]
    )
    assert not hood.truncated
    one = await mem.neighbourhood(e, hops=1)
    assert (set(one.nodes), [(x.src, x.dst) for x in one.edges]) == ({e, d}, [(d, e)])


async def test_the_neighbourhood_keeps_the_strongest_links_and_says_what_it_left_out(mem):
    hub = (await mem.author("the hub")).id
    spokes = [(await mem.author(f"spoke {i} code {i * 17}")).id for i in range(5)]
    for i, spoke in enumerate(spokes):
        await mem.link(hub, spoke, "related", round(0.2 + 0.15 * i, 2))
    hood = await mem.neighbourhood(hub, hops=1, fanout=2)
    assert set(hood.nodes) == {hub, spokes[4], spokes[3]} and hood.truncated
    capped = await mem.neighbourhood(hub, hops=1, cap=3)
    assert len(capped.nodes) == 3 and capped.truncated
    assert all(x.src in capped.nodes and x.dst in capped.nodes for x in capped.edges)
    whole = await mem.neighbourhood(hub, hops=1)
    assert len(whole.nodes) == 6 and not whole.truncated


async def test_the_neighbourhood_shows_forgotten_memories_as_such_and_logs_nothing(mem):
    a, b = [(await mem.author(f"pair {n} text {n * 5}")).id for n in range(2)]
    await mem.link(a, b, "supports")
    await mem.forget(b)
    hood = await mem.neighbourhood(a)
    assert hood.nodes[b].archived and not hood.nodes[a].archived
    assert [x.channel.value for _, x in await mem.access_log(a)] == ["reinforced", "created"]


async def test_the_neighbourhood_shows_only_what_the_reader_may_see(store_path, embedder):
    """Links point at a shared memory from two roles: each role sees its own side only,
    unless a read grant and the scope word `*` show it the other."""
    async with Memory.open(store_path, owner="", embedder=embedder) as shared:
        hub = (await shared.author("The build cache lives on the NAS")).id
    async with Memory.open(store_path, owner="writer@desk", embedder=embedder) as writer:
        theirs = (await writer.author("Document where the build cache lives")).id
        await writer.link(theirs, hub, "refines")
    async with Memory.open(
        store_path, owner="coder@laptop", read=["writer"], embedder=embedder
    ) as coder:
        mine = (await coder.author("Point the CI at the build cache")).id
        await coder.link(mine, hub, "supports")
        own_scope = await coder.neighbourhood(hub)
        granted = await coder.neighbourhood(hub, scope="*")
        with pytest.raises(NotFound):
            await coder.neighbourhood(theirs)  # not in the coder's own scope
        with pytest.raises(InvalidInput) as bad:
            await coder.neighbourhood(hub, hops=0)
    async with Memory.open(store_path, owner="writer@desk", embedder=embedder) as writer:
        writers = await writer.neighbourhood(hub)
    assert set(own_scope.nodes) == {hub, mine}
    assert [(e.src, e.dst) for e in own_scope.edges] == [(mine, hub)]
    assert set(granted.nodes) == {hub, mine, theirs}
    assert not granted.nodes[theirs].writable and granted.nodes[mine].writable
    assert set(writers.nodes) == {hub, theirs}
    assert bad.value.field == "hops"


# --------------------------------------------------------------------------- maintenance log


async def test_the_maintenance_log_lists_this_roles_passes_newest_first(store_path, embedder):
    async with Memory.open(store_path, owner="coder@laptop", embedder=embedder) as coder:
        with time_machine.travel(YEAR_AGO):  # learned a year ago, never used since
            for i in range(3):
                await coder.author(f"forgotten errand {i} code {i * 13}", importance="TRIVIAL")
        await coder.reflect(["prune"])
        await coder.reflect(["prune"])
        await coder.intent("add", content="Ask about the audit", fire_at=PAST)
        await coder.todo("list")  # the agent's turn: the due intent fires
        passes = await coder.maintenance_log()
        fired = await coder.maintenance_log("intent", limit=5)
        with pytest.raises(InvalidInput) as bad:
            await coder.maintenance_log("vacuum")
    async with Memory.open(store_path, owner="writer@desk", embedder=embedder) as writer:
        assert await writer.maintenance_log() == []
    assert [p.kind for p in passes] == ["reflection", "reflection"]
    assert passes[0].ts >= passes[1].ts and passes[0].seq > passes[1].seq
    assert [[(s["step"], s["applied"]) for s in p.report["steps"]] for p in passes] == [
        [("prune", 0)],
        [("prune", 3)],
    ]
    assert [(f.kind, f.report["reason"]) for f in fired] == [("intent", "time")]
    assert bad.value.field == "kind"


# --------------------------------------------------------------------------- no reminders


async def test_listing_and_closing_with_remind_false_fire_no_due_intent(mem):
    todo = (await mem.todo("add", content="Rotate the SSH bastion keys")).id
    other = (await mem.intent("add", content="Ping the vault team", cue="vault")).id
    # Added last: authoring is the agent's turn too, and would fire it.
    due = (await mem.intent("add", content="Ask about the audit", fire_at=PAST)).id
    listed = await mem.todo("list", remind=False)
    assert ([t.id for t in listed.todos], listed.reminders) == ([todo], [])
    closed = await mem.todo("done", memory_id=todo, remind=False)
    assert (closed.outcome, closed.reminders) == ("done", [])
    intents = await mem.intent("list", remind=False)
    assert sorted(i.id for i in intents.intents) == sorted([due, other])
    cancelled = await mem.intent("cancel", memory_id=other, remind=False)
    assert (cancelled.outcome, cancelled.reminders) == ("cancelled", [])
    assert (await mem.get(due)).trigger["fired_count"] == 0
    assert await mem.maintenance_log("intent") == []
    # Without the flag, listing is the agent's turn and the due intent fires.
    fired = await mem.todo("list")
    assert [r.intent_id for r in fired.reminders] == [due]
    assert (await mem.get(due)).trigger["fired_count"] == 1


async def test_check_is_refused_without_reminders_since_it_is_what_fires_them(mem):
    with pytest.raises(InvalidInput) as bad:
        await mem.intent("check", remind=False)
    assert bad.value.field == "remind"


async def test_closing_a_shared_todo_without_reminders_is_refused_as_the_tool_refuses_it(
    store_path, embedder
):
    async with Memory.open(store_path, owner="", embedder=embedder) as shared:
        todo = (await shared.todo("add", content="Water the office plants")).id
    async with Memory.open(store_path, owner="coder@laptop", embedder=embedder) as coder:
        with pytest.raises(OwnerForbidden):
            await coder.todo("done", memory_id=todo, remind=False)
        with pytest.raises(OwnerForbidden):
            await coder.todo("done", memory_id=todo)
        assert (await coder.get(todo)).status == "open"
        note = (await coder.author("not a todo")).id
        with pytest.raises(InvalidInput, match="not a todo"):
            await coder.todo("done", memory_id=note, remind=False)
        with pytest.raises(InvalidInput, match="not an intent"):
            await coder.intent("cancel", memory_id=note, remind=False)


@pytest.mark.parametrize(("owner", "searched"), [("coder", "coder and shared"), ("", "shared")])
async def test_a_scope_word_without_a_grant_says_what_was_searched(
    store_path, embedder, owner, searched
):
    """The shared owner's role is empty: the note said "shared and shared" for it."""
    async with Memory.open(
        settings=Settings(store=store_path, owner=owner), embedder=embedder
    ) as m:
        await m.author("The deploy runs at night")
        note = (await m.recall("deploy", scope="everything")).note
        # explain and stats said nothing of it (auditor): the same sentence, counted for stats
        why = await m.explain(query="deploy", scope="everything")
        hidden = await m.explain(memory_id=(await m.recall("deploy")).hits[0].id, scope="else")
        counted = (await m.stats(scope="everything")).note
        plain = (await m.stats()).note, (await m.explain(query="deploy")).note
    grant = "memories: this connection has no read grant for "
    assert f"Searched only {searched} {grant}'everything'." in note
    assert why.note == f"Searched only {searched} {grant}'everything'."
    assert hidden.note == f"Searched only {searched} {grant}'else'."
    assert counted == f"Counted only {searched} {grant}'everything'."
    assert plain == ("", "")


async def test_a_protected_memory_has_no_prune_date_in_any_reply(mem):
    """list --json and recall --json disagreed: the view gave a HIGH note a prune date."""
    kept = (await mem.author("The vault key rotates yearly", importance="HIGH")).id
    plain = (await mem.author("The vault door is painted blue")).id
    view, other = await mem.get(kept), await mem.get(plain)
    hit = {h.id: h for h in (await mem.recall("vault key rotation", k=5)).hits}
    why = (await mem.explain("vault key rotation", memory_id=kept)).why_not
    assert view.protected and view.prune_eta is None
    assert hit[kept].prune_eta is None and why.prune_eta is None
    assert other.protected is None and other.prune_eta is not None


async def test_an_update_with_tags_as_one_string_is_refused_not_split_into_letters(mem):
    """`update(id, tags="ops")` made the tags "o", "p", "s" (the string was listed before the
    check that refuses it, as author's does); it is refused and the tags kept."""
    made = await mem.author("The VPN needs a reconnect after sleep", tags=["vpn"])
    with pytest.raises(InvalidInput) as refused:
        await mem.update(made.id, tags="ops")
    assert str(refused.value) == "tags: 'ops' is not a list. Pass a list of short strings, " + (
        'e.g. ["ops"].'
    )
    assert (await mem.get(made.id)).tags == ["vpn"]
