"""The Memory facade: authoring rules, updates, forgetting, links and owner scoping."""

import re
from pathlib import Path

import pytest

from nooa_mcp import InvalidInput, Memory, NotFound, OwnerForbidden, Settings
from nooa_mcp.domain.schema import Channel
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.services import provenance

pytestmark = pytest.mark.anyio


async def count(mem, archived=None):
    if archived is None:
        return await mem.engine.store._scalar("SELECT COUNT(*) FROM memories")
    return await mem.engine.store._scalar(
        "SELECT COUNT(*) FROM memories WHERE archived = ?", (int(archived),)
    )


async def test_authoring_stores_the_memory_with_its_ladder_values(mem):
    result = await mem.author(
        "Ship the release on Thursday",
        type="todo",
        title="release",
        importance="HIGH",
        salience="PIVOTAL",
        confidence="TENTATIVE",
        tags=["release", "release"],
        entities=["Thursday"],
    )
    assert result.status == "created"
    view = await mem.get(result.id)
    assert (view.type.value, view.status, view.importance, view.importance_label) == (
        "todo",
        "open",
        8.0,
        "HIGH",
    )
    assert (view.salience, view.confidence) == (1.0, 0.5)
    assert view.tags == ["release"]
    assert view.owner == "coder@laptop"
    assert view.channels == {"created": 1}
    assert view.sizes["chars"] == len("Ship the release on Thursday")


async def test_an_exact_repeat_is_idempotent_and_logs_a_reinforcement(mem):
    """A client retrying after a timeout must not create a second memory; the repeat is the
    author saying it again (DESIGN.md §4.2: `exists`, logged `reinforced`), and what it adds (a
    higher importance, new tags) is kept."""
    first = await mem.author("the build cache lives in /var/cache/build", importance="LOW")
    again = await mem.author(
        "The  build cache lives in /var/cache/build ", importance="HIGH", tags=["ci"]
    )
    assert again.id == first.id
    assert again.status == "exists"
    assert await count(mem) == 1
    view = await mem.get(first.id)
    assert view.channels == {"created": 1, "reinforced": 1}
    assert view.reinforcement_count == 1
    assert (view.importance, view.tags) == (8.0, ["ci"])


async def test_a_near_duplicate_is_stored_and_linked_to_the_closest_memory(mem):
    """DESIGN.md §4.3: a near-duplicate is its own memory, linked `related` to the closest one,
    and the reply says which (the earlier rule reinforced the original and dropped the new)."""
    first = await mem.author("deploys run from the ci runner named atlas", importance="LOW")
    twin = await mem.author(
        "deploys run from the ci runner named atlas!", importance="HIGH", tags=["ci"]
    )
    assert twin.status == "created" and twin.id != first.id
    assert twin.similar_to is not None and twin.similar_to.id == first.id
    assert twin.similar_to.similarity >= 0.92
    assert twin.similar_to.differs_in == []
    assert [(e["target"], e["type"]) for e in (await mem.get(twin.id)).edges] == [
        (first.id, "related")
    ]
    original = await mem.get(first.id)
    assert (original.reinforcement_count, original.importance, original.tags) == (0, 3.0, [])
    assert await count(mem) == 2


async def test_near_duplicates_of_another_type_or_role_are_new_memories(mem, settings, embedder):
    first = await mem.author("water the plants every friday")
    as_todo = await mem.author("water the plants every friday", type="todo")
    assert as_todo.id != first.id and as_todo.status == "created"
    other = Settings(store=settings.store, owner="gardener@shed")
    async with Memory.open(settings=other, embedder=embedder) as theirs:
        assert (await theirs.author("water the plants every friday")).status == "created"


async def test_a_bad_item_in_a_batch_writes_nothing(mem):
    with pytest.raises(InvalidInput) as info:
        await mem.author_many([{"content": "fine"}, {"content": "bad", "importance": "HUGE"}])
    assert info.value.field == "importance"
    assert await count(mem) == 0


async def test_author_many_dedups_inside_the_batch(mem):
    results = await mem.author_many([{"content": "same thing"}, {"content": "same thing"}])
    assert results[0].id == results[1].id
    assert [r.status for r in results] == ["created", "exists"]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"content": ""}, "content"),
        ({"content": "x", "type": "memo"}, "type"),
        ({"content": "x", "status": "done"}, "status"),
        ({"content": "x", "type": "todo", "status": "finished"}, "status"),
        ({"content": "x", "importance": "HUGE"}, "importance"),
        ({"content": "x", "salience": 3}, "salience"),
        ({"content": "x", "valid_to": "not a date"}, "valid_to"),
        ({"content": "x", "valid_from": "2026-02-01", "valid_to": "2026-01-01"}, "valid_to"),
        ({"content": "x", "trigger": {"cue": "deploy"}}, "trigger"),
        ({"content": "x", "type": "intent", "trigger": {}}, "trigger"),
        ({"content": "x", "references": ["ftp:somewhere"]}, "references"),
        (
            {"content": "x", "links": [{"target": "abcdef12", "relation": "likes"}]},
            "links.relation",
        ),
        ({"content": "x", "tags": [1]}, "tags"),
        ({"content": "a\x00b"}, "content"),
    ],
)
async def test_bad_author_arguments_name_their_field(mem, fields, field):
    with pytest.raises(InvalidInput) as info:
        await mem.author(**fields)
    assert info.value.field == field
    assert await count(mem) == 0


async def test_a_link_to_an_unknown_id_is_refused_and_nothing_is_written(mem):
    with pytest.raises(NotFound):
        await mem.author("x", links=[{"target": "0123456789ab", "relation": "related"}])
    assert await count(mem) == 0


async def test_a_link_key_it_does_not_know_is_refused_by_name_not_dropped(mem):
    # Before: `wieght` (a typo of weight) was dropped and the link stored at the default weight.
    target = await mem.author("deploys go through the release train")
    typo = {"target": target.id, "relation": "related", "wieght": "STRONG"}
    with pytest.raises(InvalidInput) as info:
        await mem.author("the friday freeze", links=[typo])
    assert info.value.field == "links"
    assert "no key 'wieght'" in str(info.value) and "target, relation and weight" in str(info.value)
    with pytest.raises(InvalidInput, match="no key 'wieght'"):
        await mem.update(target.id, links=[{**typo, "target": target.id[:8]}])
    assert await count(mem) == 1


async def test_update_changes_fields_re_embeds_and_logs_reinforced_without_strength(mem):
    written = await mem.author("the api gateway runs on port 8080")
    vector_before = mem.engine.index.vector(written.id).copy()
    result = await mem.update(
        written.id[:8],
        content="the api gateway moved to port 9090",
        importance="HIGH",
        tags=["ports"],
    )
    assert result.changed == ["content", "importance", "tags"]
    view = await mem.get(written.id)
    assert view.content == "the api gateway moved to port 9090"
    assert view.strength == 1
    assert view.channels["reinforced"] == 1
    await mem.recall("gateway port")
    assert not (mem.engine.index.vector(written.id) == vector_before).all()
    top = (await mem.recall("api gateway moved to port 9090")).hits[0]
    assert top.id == written.id


async def test_update_with_nothing_new_changes_nothing(mem):
    written = await mem.author("steady state")
    result = await mem.update(written.id, content="steady state")
    assert result.changed == []
    assert "reinforced" not in (await mem.get(written.id)).channels


async def test_status_changes_only_on_todos(mem):
    todo = await mem.author("renew the certificate", type="todo")
    assert (await mem.update(todo.id, status="done")).changed == ["status"]
    assert (await mem.get(todo.id)).status == "done"
    info_id = (await mem.author("a plain fact")).id
    with pytest.raises(InvalidInput) as info:
        await mem.update(info_id, status="done")
    assert info.value.field == "status"


async def test_forget_archives_and_recall_stops_returning_it(mem):
    written = await mem.author("temporary password is hunter2")
    result = await mem.forget(written.id)
    assert result.archived and result.changed == ["archived"]
    assert await count(mem, archived=True) == 1
    hits = (await mem.recall("temporary password")).hits
    assert written.id not in {h.id for h in hits}
    assert (await mem.get(written.id)).archived
    # What a user forgot stays out of recall, even of the archive (include_archived).
    assert written.id not in {
        h.id for h in (await mem.recall("temporary password", include_archived=True)).hits
    }


async def test_link_adds_a_typed_edge_and_keeps_the_larger_weight(mem):
    a = (await mem.author("cause memory")).id
    b = (await mem.author("effect memory")).id
    await mem.link(a, b[:8], "causes", "WEAK")
    await mem.link(a, b, "causes", "STRONG")
    await mem.link(a, b, "causes", 0.5)
    edges = (await mem.get(a)).edges
    assert [(e["target"], e["type"], e["weight"]) for e in edges] == [(b, "causes", 1.0)]


async def test_link_refuses_unknown_ids_relations_and_self_links(mem):
    a = (await mem.author("lonely memory")).id
    with pytest.raises(NotFound):
        await mem.link(a, "ffffffffff", "related")
    with pytest.raises(InvalidInput) as info:
        await mem.link(a, a, "loves")
    assert info.value.field == "links.relation"
    with pytest.raises(InvalidInput):
        await mem.link(a, a, "related")
    assert (await mem.get(a)).edges == []


async def test_cross_role_writes_are_refused_and_foreign_rows_stay_invisible(settings, embedder):
    async with Memory.open(settings=settings, embedder=embedder) as mine:
        own = (await mine.author("coder's private memory")).id
    other = Settings(store=settings.store, owner="reviewer@desk")
    async with Memory.open(settings=other, embedder=embedder) as theirs:
        with pytest.raises(NotFound):
            await theirs.get(own)
        with pytest.raises(NotFound):
            await theirs.update(own, content="hijacked")
        # DESIGN.md §10: without a read grant, * narrows to the caller's own role.
        with pytest.raises(NotFound):
            await theirs.get(own, scope="*")
    granted = Settings(store=settings.store, owner="reviewer@desk", read=["coder"])
    async with Memory.open(settings=granted, embedder=embedder) as theirs:
        assert (await theirs.get(own, scope="*")).content == "coder's private memory"
        # A read grant is not a write grant: the write is refused as read-only (the reader
        # sees it in recall, so "no memory with id" would mislead), naming the role only.
        with pytest.raises(OwnerForbidden, match="role 'coder', which this server lets you"):
            await theirs.update(own, content="hijacked")
        assert (await theirs.get(own, scope="*")).content == "coder's private memory"
        theirs_id = (await theirs.author("reviewer note")).id
        with pytest.raises(OwnerForbidden, match="lets you read but not link to"):
            await theirs.link(theirs_id, own, "related")
        assert (await theirs.get(theirs_id)).edges == []


async def test_another_instance_of_the_same_role_may_write(settings, embedder):
    async with Memory.open(settings=settings, embedder=embedder) as laptop:
        own = (await laptop.author("role-wide memory")).id
    desktop = Settings(store=settings.store, owner="coder@desktop")
    async with Memory.open(settings=desktop, embedder=embedder) as mem:
        assert (await mem.update(own, importance="HIGH")).changed == ["importance"]
        hits = (await mem.recall("role-wide memory", scope="instance")).hits
        assert own not in {h.id for h in hits}


async def test_shared_rows_are_visible_to_everyone_but_written_only_by_the_shared_owner(
    store_path, embedder
):
    async with Memory.open(store_path, owner="", embedder=embedder) as shared:
        fact = (await shared.author("the company was founded in 1999")).id
    async with Memory.open(store_path, owner="coder@x", embedder=embedder) as coder:
        assert (await coder.recall("company founded")).hits[0].id == fact
        with pytest.raises(OwnerForbidden):
            await coder.update(fact, content="founded in 2001")


async def test_an_id_in_a_granted_role_outside_the_scope_is_named_with_the_scope_to_pass(
    settings, embedder
):
    """Recall with scope=coder shows the memory; explain of its id without the scope did not
    find it and said only "no memory". The error names the granted role to pass; an id of a
    role without a grant stays plainly not found."""
    async with Memory.open(settings=settings, embedder=embedder) as mine:
        own = (await mine.author("omicron design doc")).id
    hidden = Settings(store=settings.store, owner="ops@box")
    async with Memory.open(settings=hidden, embedder=embedder) as ops:
        secret = (await ops.author("ops rota for omicron")).id
    granted = Settings(store=settings.store, owner="reviewer@desk", read=["coder"])
    async with Memory.open(settings=granted, embedder=embedder) as theirs:
        with pytest.raises(NotFound, match="It is in role 'coder', which you may read: pass th"):
            await theirs.explain(memory_id=own)
        # A call that takes no scope (an update, a view by id) is not told to pass one.
        with pytest.raises(NotFound) as unscoped:
            await theirs.get(own)
        assert "role" not in str(unscoped.value)
        assert (await theirs.explain(memory_id=own, scope="coder")).memory_id == own
        with pytest.raises(NotFound) as plain:
            await theirs.explain(memory_id=secret)
        assert "ops" not in str(plain.value) and "role" not in str(plain.value)


async def test_a_foreign_read_is_logged_but_does_not_age_the_owner_s_memory(settings, embedder):
    async with Memory.open(settings=settings, embedder=embedder) as mine:
        own = (await mine.author("omicron design doc")).id
    other = Settings(store=settings.store, owner="reviewer@desk", read=["coder"])
    async with Memory.open(settings=other, embedder=embedder) as theirs:
        await theirs.recall("omicron design doc", scope="*")
        view = await theirs.get(own, scope="*")
        assert view.strength == 1
        log = await theirs.access_log(own, scope="*")
        assert log[0][1].channel is Channel.recalled
        assert log[0][1].reader_owner == "reviewer@desk"


async def test_explain_replays_a_memory_s_access_stream_newest_first(mem):
    written = (await mem.author("replay me please")).id
    await mem.recall("replay me")
    await mem.recall("please replay")
    result = await mem.explain(memory_id=written[:8])
    assert result.mode == "replay"
    assert result.total_accesses == 3
    assert [a.channel.value for a in result.accesses] == ["recalled", "recalled", "created"]
    assert [a.query for a in result.accesses[:2]] == ["please replay", "replay me"]


async def test_explain_by_query_is_a_dry_run(mem):
    written = (await mem.author("dry run memory")).id
    before = await mem.engine.store.count_accesses(written)
    result = await mem.explain("dry run")
    assert result.mode == "query" and result.rows[0].id == written
    assert await mem.engine.store.count_accesses(written) == before
    assert (await mem.get(written)).channels == {"created": 1}


async def test_why_not_compares_a_memory_with_the_kth_result(mem):
    target = (await mem.author("the quarterly report template")).id
    for i in range(4):
        await mem.author(f"quarterly planning meeting number {i}", importance="HIGH")
    result = await mem.explain("quarterly planning meeting", memory_id=target, k=2)
    why = result.why_not
    assert result.mode == "why_not"
    assert not why.in_top_k and why.rank > 2
    assert why.kth_score > why.score
    assert "below the top 2" in why.reason
    assert 0 < why.retention <= 1 and why.prune_eta is not None


async def test_why_not_quotes_spread_as_the_rows_show_it(mem):
    """The reason compares the spread as the rows show it (the raw part, as rel, rec and imp
    are; the score's term is γ·spread): it once said 0.755 beside a row showing 0.3775."""
    a = (await mem.author("omega deployment checklist")).id
    b = (await mem.author("rollback runbook kept in the wiki")).id
    await mem.link(a, b, "causes")
    target = (await mem.author("omega tea break schedule")).id
    rows = (await mem.explain("omega deployment checklist", k=5)).rows
    assert [r.id for r in rows[:2]] == [a, b] and rows[1].spread > 0
    why = (await mem.explain("omega deployment checklist", memory_id=target, k=2)).why_not
    quoted = re.search(r"spread 0\.000 < ([\d.]+) against rank 2", why.reason)
    assert quoted and float(quoted.group(1)) == pytest.approx(rows[1].spread, abs=1e-3)


async def test_why_not_for_a_memory_in_the_top_k(mem):
    target = (await mem.author("exact phrase to find")).id
    why = (await mem.explain("exact phrase to find", memory_id=target, k=3)).why_not
    assert why.in_top_k and why.rank == 1


async def test_explain_needs_a_query_or_an_id(mem):
    with pytest.raises(InvalidInput):
        await mem.explain()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"query": ""}, "query"),
        ({"query": "x", "k": 0}, "k"),
        ({"query": "x", "k": 51}, "k"),
        ({"query": "x", "types": ["memo"]}, "types"),
        ({"query": "x", "hops": 9}, "hops"),
        ({"query": "x", "scope": "bad scope!"}, "scope"),
    ],
)
async def test_bad_recall_arguments_name_their_field(mem, kwargs, field):
    with pytest.raises(InvalidInput) as info:
        await mem.recall(**kwargs)
    assert info.value.field == field


async def test_recall_filters_by_type(mem):
    await mem.author("invoice due friday", type="todo")
    await mem.author("invoice format uses pdf")
    hits = (await mem.recall("invoice", types=["todo"])).hits
    assert [h.type.value for h in hits] == ["todo"]
    assert hits[0].status == "open"


async def test_stats_count_by_type_and_owner(mem):
    await mem.author("one", type="todo")
    await mem.author("two")
    second = (await mem.author("three")).id
    await mem.forget(second)
    stats = await mem.stats()
    assert (stats.total, stats.active, stats.archived) == (3, 2, 1)
    assert stats.by_type == {"info": 1, "todo": 1}
    assert stats.by_owner == {"coder@laptop": 2}


# --------------------------------------------------------------------------- access-log redaction


async def test_another_readers_query_on_a_shared_memory_is_redacted(tmp_path: Path) -> None:
    """Catches: access-log redaction disabled (another role's query showed on a shared memory).

    Both sides: Alice sees that the shared memory was read (when, how) but neither by whom,
    nor his query, session or score; she does see her own query, session and score.
    """
    store = tmp_path / "m.sqlite"
    embedder = HashEmbedder()
    async with Memory.open(store, owner="", embedder=embedder) as shared:
        fact = (await shared.author("The quarterly ledger is kept in the finance share.")).id
    async with Memory.open(store, owner="bob@ci", embedder=embedder) as bob:
        with provenance.session("bobsession77"):
            await bob.recall("quarterly ledger bobsprivatequestion")
    async with Memory.open(store, owner="alice@laptop", embedder=embedder) as alice:
        with provenance.session("alicesession42"):
            await alice.recall("quarterly ledger alicequestion")
        stream = [a for _, a in await alice.access_log(fact)]
        recent = [a for _, mid, a in await alice.recent_accesses() if mid == fact]
    for records in (stream, recent):
        by_reader = {a.reader_owner: a for a in records if a.channel.value == "recalled"}
        # Bob's read is there (when, how), but not who read it nor how well it matched.
        assert set(by_reader) == {"", "alice@laptop"}
        bob_read, alice_read = by_reader[""], by_reader["alice@laptop"]
        assert (bob_read.query, bob_read.session_ref) == (None, None)
        assert (bob_read.score, bob_read.rank, bob_read.components) == (None, None, None)
        assert alice_read.query == "quarterly ledger alicequestion"
        assert alice_read.session_ref == "alicesession42"
        assert alice_read.score is not None and alice_read.rank == 1
        dumped = str([a.model_dump() for a in records])
        assert "bobsprivatequestion" not in dumped and "bob" not in dumped


async def test_why_not_for_a_memory_below_the_first_names_the_one_above(mem):
    """In the top k but not first: the reason compared it with rank k, which ranks below it
    (newcomer: "rank 2 of the top 3 … rank 3's 0.55"); it names the memory above and how."""
    first = (await mem.author("the quarterly planning meeting agenda", importance="HIGH")).id
    second = (await mem.author("notes from a quarterly planning meeting", importance="LOW")).id
    await mem.author("the office plants need water on Fridays")
    rows = (await mem.explain("quarterly planning meeting", k=3)).rows
    assert [r.id for r in rows[:2]] == [first, second]
    why = (await mem.explain("quarterly planning meeting", memory_id=second, k=3)).why_not
    assert why.in_top_k and why.rank == 2
    assert why.reason.startswith(f"It ranks 2 of the top 3, below {first[:8]}: ")
    assert f"imp {rows[1].imp:.3f} < {rows[0].imp:.3f}" in why.reason
    assert "rank 3" not in why.reason
    top = (await mem.explain("quarterly planning meeting", memory_id=first, k=3)).why_not
    assert top.reason == "It ranks 1 of the top 3."
