"""The Store contract (storage/base.py), on SQLite and on PostgreSQL alike.

Every test runs once per backend (`store_target`: a fresh SQLite file, a fresh PostgreSQL
schema). Services see only this protocol, so whatever passes here behaves the same above it.
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import numpy as np
import pytest

from nooa_mcp.domain.prospective import todo_order
from nooa_mcp.domain.schema import (
    AccessRecord,
    Channel,
    Components,
    EdgeType,
    Memory,
    Reference,
    Trigger,
)
from nooa_mcp.domain.scope import Scope
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.errors import AmbiguousId, NotFound, StoreTooNew
from nooa_mcp.storage import Store, open_store
from nooa_mcp.storage.base import DUMP_TABLES, KpiRaw, KpiTotals

pytestmark = pytest.mark.anyio

CODER = Scope(roles=frozenset({"coder"}))
EVERYONE = Scope(roles=None)
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
EMBED = HashEmbedder()


def vec(text: str) -> np.ndarray:
    return EMBED.embed([text])[0]


async def put(store: Store, content: str, owner: str = "coder@laptop", **fields) -> Memory:
    """Insert one memory (with the embedding of its content) and return it."""
    memory = Memory(content=content, owner=owner, **fields)
    async with store.transaction():
        await store.insert(memory, fields.pop("embedding", vec(content)))
    return memory


async def changed_elsewhere(store: Store, token) -> None:
    """Wait (bounded) until the store's change token moves after another connection's commit."""
    wait = getattr(store, "wait_changed", None)
    if wait is not None:
        with anyio.fail_after(5):
            await wait(token)


# --------------------------------------------------------------------------- opening


async def test_a_store_opens_reopens_and_keeps_its_rows(store_target) -> None:
    first = await open_store(store_target)
    try:
        written = await put(first, "kept across opens")
    finally:
        await first.close()
    again = await open_store(store_target)
    try:
        assert (await again.fetch(written.id)).content == "kept across opens"
        assert again.kind in ("sqlite", "postgresql") and again.label
    finally:
        await again.close()


async def test_a_store_of_a_newer_schema_is_refused_untouched(store_target) -> None:
    await (await open_store(store_target)).close()
    if isinstance(store_target, Path):
        import sqlite3

        conn = sqlite3.connect(store_target)
        conn.execute("PRAGMA user_version = 99")
        conn.commit()
        conn.close()
    else:
        import psycopg

        with psycopg.connect(store_target, autocommit=True) as conn:
            conn.execute("INSERT INTO schema_version VALUES (99)")
    with pytest.raises(StoreTooNew) as info:
        await open_store(store_target)
    assert info.value.found == 99
    assert "Upgrade" in str(info.value)
    what = "file" if isinstance(store_target, Path) else "database"
    assert str(info.value).endswith(f"the {what} was not changed.")


# --------------------------------------------------------------------------- rows


async def test_every_field_of_a_memory_survives_insert_and_fetch(store: Store) -> None:
    trigger = Trigger(cue="deploy", every_hours=24.0, fired_count=2, fired_at=T0)
    ref = Reference(kind="url", target="https://example.org/x", preview="x", captured_at=T0)
    access = AccessRecord(
        ts=T0,
        channel=Channel.recalled,
        reader_owner="coder@laptop",
        query="q",
        score=0.5,
        rank=1,
        components=Components(source="both", cos=0.9, rel=0.8),
    )
    memory = Memory(
        content="Every field, stored once.",
        title="Fields",
        type="intent",
        owner="coder@laptop",
        importance=7.0,
        salience=0.4,
        confidence=0.6,
        strength=3,
        reinforcement_count=2,
        access_count=5,
        tags=["a", "b"],
        entities=["Ada"],
        place_or_task="release",
        created_at=T0,
        last_accessed_at=T0 + timedelta(hours=1),
        valid_from=T0,
        valid_to=T0 + timedelta(days=30),
        references=[ref],
        trigger=trigger,
        access_log=[access],
        channels={"recalled": 4, "created": 1},
        actr_count=4,
        first_access_at=T0,
        actr_times=[1.5, 2.25],
        authored_importance=6.0,
    )
    async with store.transaction():
        seq = await store.insert(memory, vec(memory.content))
    assert seq == memory.seq and seq > 0
    got = await store.fetch(memory.id)
    assert got.model_dump(exclude={"edges"}) == memory.model_dump(exclude={"edges"})
    assert np.allclose((await store.embeddings_of([memory.id]))[memory.id], vec(memory.content))


async def test_insertion_order_gives_increasing_seqs(store: Store) -> None:
    seqs = [(await put(store, f"row {i}")).seq for i in range(4)]
    assert seqs == sorted(seqs) and len(set(seqs)) == 4


async def test_save_rewrites_a_row_and_save_accesses_writes_access_state(store: Store) -> None:
    a, b = await put(store, "first"), await put(store, "second")
    a.content, a.strength, a.tags = "first, edited", 9, ["edited"]
    c = await store.fetch(b.id)
    c.access_count, c.strength, c.actr_count, c.actr_times = 11, 3, 2, [5.0, 4.0]
    c.channels = {"recalled": 2}
    c.content = "not written by save_accesses"
    async with store.transaction():
        await store.save(a, vec(a.content))
        await store.save_accesses([c])
    assert (await store.fetch(a.id)).content == "first, edited"
    assert (await store.fetch(a.id)).strength == 9
    assert (await store.fetch(a.id)).tags == ["edited"]
    assert np.allclose((await store.embeddings_of([a.id]))[a.id], vec("first, edited"))
    got = await store.fetch(b.id)
    assert (got.access_count, got.strength, got.actr_count) == (11, 3, 2)
    assert got.actr_times == [5.0, 4.0] and got.channels == {"recalled": 2}
    assert got.content == "second"  # only what an access changes is written


async def test_an_access_logged_on_its_access_state_writes_what_one_on_the_record_does(
    store: Store,
) -> None:
    """Recall's log reads only the access columns (`access_states`) and keeps the ring as
    its JSON: after the same accesses, the row reads back field for field as if the whole
    record had been fetched, changed and saved (every field of a ring record, unicode too)."""
    from nooa_mcp.domain.accesses import apply_access

    old = AccessRecord(ts=T0, channel=Channel.searched, query="old", score=0.5, rank=2)
    memory = await put(
        store,
        "logged lean",
        access_log=[old],
        channels={"searched": 1},
        actr_count=1,
        actr_times=[T0.timestamp()],
        first_access_at=T0,
        last_accessed_at=T0,
    )
    other_role = await put(store, "someone else's", owner="writer@box")
    accesses = [
        AccessRecord(
            ts=T0 + timedelta(hours=h),
            channel=channel,
            reader_owner="coder@laptop",
            session_ref="s-1" if h == 1 else None,
            trace_ref=None,
            query="café ☕ où?",
            score=0.7312,
            rank=h,
            components=Components(source="both", rel=0.9, rec=1.25, spread=0.0),
        )
        for h, channel in ((1, Channel.recalled), (2, Channel.shown), (3, Channel.deref))
    ]
    expected = await store.fetch(memory.id)
    for access in accesses:
        apply_access(expected, access, ring_size=3, grain=0.0)
    assert expected.access_count == 2 and expected.actr_count == 3  # shown touches nothing
    async with store.transaction():
        states = await store.access_states([memory.id, other_role.id, "no-such-id"])
        assert set(states) == {memory.id, other_role.id}
        assert states[other_role.id].owner == "writer@box"
        state = states[memory.id]
        assert [r["query"] for r in state.ring] == ["old"]
        for access in accesses:
            apply_access(state, access, ring_size=3, grain=0.0)
        await store.save_accesses([state])
    got = await store.fetch(memory.id)
    assert got.model_dump() == expected.model_dump()
    assert [r.channel for r in got.access_log] == [Channel.deref, Channel.shown, Channel.recalled]
    assert got.access_log[0].query == "café ☕ où?" and got.access_log[0].components.rec == 1.25


async def test_log_uses_reads_applies_and_writes_the_accesses_in_one_transaction(
    store: Store,
) -> None:
    """`log_uses` writes what `apply` recorded on the states it was given (the access
    columns and the stream), returns those states, skips an id that does not exist, and
    with an `apply` that fails writes nothing and leaves the store writable."""
    from nooa_mcp.domain.accesses import apply_access

    memory = await put(store, "logged in one hop")
    other = await put(store, "not used this time")
    access = AccessRecord(ts=T0 + timedelta(hours=1), channel=Channel.recalled, query="hop")
    expected, untouched = await store.fetch(memory.id), await store.fetch(other.id)
    apply_access(expected, access, ring_size=3, grain=0.0)
    seen: list[set[str]] = []

    def apply(states):
        seen.append(set(states))
        apply_access(states[memory.id], access, ring_size=3, grain=0.0)
        return [(memory.id, access)]

    written = await store.log_uses([memory.id, "no-such-id", other.id], apply)
    assert seen == [{memory.id, other.id}] and set(written) == {memory.id}
    assert written[memory.id].actr_count == expected.actr_count == memory.actr_count + 1
    got = await store.fetch(memory.id)
    assert got.model_dump() == expected.model_dump()
    assert [r.query for _, _, r in await store.access_stream(memory.id, 10)] == ["hop"]
    assert (await store.fetch(other.id)).model_dump() == untouched.model_dump()

    def fails(states):
        apply_access(states[other.id], access, ring_size=3, grain=0.0)
        raise ValueError("apply failed")

    with pytest.raises(ValueError, match="apply failed"):
        await store.log_uses([other.id], fails)
    assert (await store.fetch(other.id)).model_dump() == untouched.model_dump()
    assert await store.count_accesses(other.id) == 0
    # Nothing applied: nothing written, and the store takes the next log.
    assert await store.log_uses([other.id], lambda states: []) == {}
    await store.log_uses([memory.id], apply)
    assert await store.count_accesses(memory.id) == 2


async def test_logging_accesses_does_not_move_the_revision_caches_pull(store: Store) -> None:
    memory = await put(store, "read often")
    _, mark = await store.vector_changes(None, 100)
    async with store.transaction():
        fetched = await store.fetch(memory.id)
        fetched.access_count += 1
        await store.save_accesses([fetched])
    assert (await store.vector_changes(mark, 100))[0] == []
    async with store.transaction():
        await store.set_archived(memory.id, True, fetched.created_at)
    assert [r.archived for r in (await store.vector_changes(mark, 100))[0]] == [True]


async def test_adding_edges_does_not_move_the_revision_caches_pull(store: Store) -> None:
    """No cache holds edges: linking rows must not make every vector cache read them again."""
    a, b, c = [await put(store, f"linked {i}") for i in range(3)]
    _, mark = await store.vector_changes(None, 100)
    async with store.transaction():
        await store.add_edge(a.id, b.id, EdgeType.related, 0.9)
        await store.add_edges([(b.id, c.id, EdgeType.related, 0.8), (c.id, a.id, "related", 0.7)])
        await store.copy_edges(a.id, c.id)
    assert (await store.vector_changes(mark, 100))[0] == []
    assert len(await store.edges_touching([a.id, b.id, c.id])) == 4


async def test_save_without_an_embedding_keeps_the_stored_one(store: Store) -> None:
    a = await put(store, "keep my vector")
    a.strength = 4
    async with store.transaction():
        await store.save(a)
    assert np.allclose((await store.embeddings_of([a.id]))[a.id], vec("keep my vector"))


async def test_fetch_of_a_missing_id_is_none_and_fetch_many_skips_it(store: Store) -> None:
    a = await put(store, "present")
    assert await store.fetch("0" * 32) is None
    assert set(await store.fetch_many([a.id, "0" * 32])) == {a.id}
    assert await store.fetch_many([]) == {}


async def test_ids_resolve_from_full_ids_and_prefixes_of_six_or_more(store: Store) -> None:
    a = await put(store, "resolve me")
    assert await store.resolve_id(a.id) == a.id
    assert await store.resolve_id(a.id[:6]) == a.id
    with pytest.raises(NotFound):
        await store.resolve_id(a.id[:5])
    with pytest.raises(NotFound):
        await store.resolve_id("f" * 32)


async def test_a_prefix_shared_by_two_ids_is_ambiguous(store: Store) -> None:
    await put(store, "one", id="abcdef1" + "0" * 25)
    await put(store, "two", id="abcdef1" + "1" * 25)
    with pytest.raises(AmbiguousId) as info:
        await store.resolve_id("abcdef1")
    assert sorted(info.value.candidates) == ["abcdef1" + "0" * 25, "abcdef1" + "1" * 25]
    assert await store.resolve_id("abcdef10") == "abcdef1" + "0" * 25


async def test_owners_of_names_the_owner_of_each_existing_id(store: Store) -> None:
    a, b = await put(store, "mine"), await put(store, "shared", owner="")
    assert await store.owners_of([a.id, b.id, "0" * 32]) == {a.id: "coder@laptop", b.id: ""}


async def test_find_by_hash_finds_live_rows_of_the_same_role_and_type_only(store: Store) -> None:
    a = await put(store, "Deploys   freeze on Fridays.")
    same = Memory(content="Deploys freeze on Fridays.").content_hash
    assert await store.find_by_hash(same, "coder", "info") == [a.id]
    assert await store.find_by_hash(same, "writer", "info") == []
    assert await store.find_by_hash(same, "coder", "skill") == []
    later = await put(
        store, "Deploys freeze on Fridays.", created_at=a.created_at + timedelta(days=1)
    )
    assert await store.find_by_hash(same, "coder", "info") == [later.id, a.id]  # newest first
    async with store.transaction():
        assert await store.find_by_hash(same, "coder", "info") == [later.id, a.id]
        await store.set_archived(a.id, True, T0)
    assert await store.find_by_hash(same, "coder", "info") == [later.id]


async def test_archiving_sets_and_clears_the_flag(store: Store) -> None:
    a = await put(store, "archive me")
    async with store.transaction():
        await store.set_archived(a.id, True, T0)
    assert (await store.fetch(a.id)).archived is True
    async with store.transaction():
        await store.set_archived(a.id, False, T0)
    assert (await store.fetch(a.id)).archived is False


async def test_importance_and_authored_importance_are_set_separately(store: Store) -> None:
    a = await put(store, "weigh me", importance=5.0)
    async with store.transaction():
        await store.set_importance(a.id, importance=7.0)
    got = await store.fetch(a.id)
    assert (got.importance, got.authored_importance) == (7.0, 5.0)
    async with store.transaction():
        await store.set_importance(a.id, authored=2.0)
    got = await store.fetch(a.id)
    assert (got.importance, got.authored_importance) == (7.0, 2.0)


async def test_unembedded_lists_rows_without_a_vector_of_the_dimension(store: Store) -> None:
    a = await put(store, "has one")
    b = await put(store, "has none", embedding=None)
    c = await put(store, "wrong size", embedding=np.ones(3, dtype=np.float32))
    assert {r[0] for r in await store.unembedded(EMBED.dim, 10)} == {b.id, c.id}
    async with store.transaction():
        await store.set_embedding(b.id, vec("has none"))
    assert {r[0] for r in await store.unembedded(EMBED.dim, 10)} == {c.id}
    assert a.id not in {r[0] for r in await store.unembedded(EMBED.dim, 10)}


async def test_listing_follows_scope_archive_type_status_and_cursor(store: Store) -> None:
    mine = [await put(store, f"mine {i}") for i in range(3)]
    other = await put(store, "theirs", owner="writer@desk")
    shared = await put(store, "everyone's", owner="")
    todo = await put(store, "a todo", type="todo")
    async with store.transaction():
        await store.set_archived(mine[0].id, True, T0)
    listed = [m.id for m in await store.list_memories(CODER)]
    assert listed == [mine[1].id, mine[2].id, shared.id, todo.id]
    assert other.id in [m.id for m in await store.list_memories(EVERYONE)]
    assert [m.id for m in await store.list_memories(CODER, archived=True)] == [mine[0].id]
    assert len(await store.list_memories(CODER, archived=None)) == 5
    assert [m.id for m in await store.list_memories(CODER, type="todo")] == [todo.id]
    assert [m.id for m in await store.list_memories(CODER, status="open")] == [todo.id]
    after = await store.list_memories(CODER, after_seq=mine[2].seq, limit=1)
    assert [m.id for m in after] == [shared.id]
    instance = Scope(roles=frozenset(), owner="coder@laptop")
    assert other.id not in [m.id for m in await store.list_memories(instance)]
    assert await store.count_memories(CODER) == 4
    assert await store.count_memories(CODER, type="todo", status="open") == 1


async def test_listing_filters_by_owner_and_by_tag_folding_ascii_case_only(store: Store) -> None:
    """The console's filters run in the store, alike on both backends: a tag matches whatever
    the case of its ASCII letters, other letters only as written; neither widens the scope."""
    laptop = await put(store, "ops note", tags=["Deploy", "ops"])
    desk = await put(store, "desk note", owner="coder@desk", tags=["deploy"])
    shared = await put(store, "shared note", owner="", tags=["Été"])
    hidden = await put(store, "hidden note", owner="writer@desk", tags=["deploy"])
    await put(store, "untagged note")

    async def ids(scope: Scope = CODER, **filters) -> list[str]:
        return [m.id for m in await store.list_memories(scope, **filters)]

    assert await ids(tag="DEPLOY") == [laptop.id, desk.id]
    assert await ids(EVERYONE, tag="deploy") == [laptop.id, desk.id, hidden.id]
    assert await ids(tag="deploy", after_seq=laptop.seq) == [desk.id]
    assert await ids(tag="Été") == [shared.id]
    assert await ids(tag="été") == []  # lower() folds ASCII only, on every backend
    assert await ids(tag="ÉTÉ") == []
    assert await ids(tag="dep") == []  # a whole tag, not a substring
    assert await ids(owner="") == [shared.id]
    assert await ids(owner="coder@desk") == [desk.id]
    assert await ids(owner="writer@desk") == []  # outside the scope
    assert await ids(owner="coder@laptop", tag="ops") == [laptop.id]
    async with store.transaction():
        await store.set_archived(laptop.id, True, T0)
    assert await ids(tag="deploy") == [desk.id]
    assert await ids(tag="deploy", archived=True) == [laptop.id]


async def test_todo_rows_come_in_todo_order_inside_the_scope_and_the_limit(store: Store) -> None:
    """The store orders todos as `domain.prospective.todo_order` does (open first, higher
    importance, older first; ties in insertion order), so a listing loads only what it shows."""
    spec = [
        ("done", 9.0, 0),
        ("open", 2.0, 3),
        ("open", 8.0, 5),
        ("dropped", 5.0, 1),
        ("open", 8.0, 2),
        ("open", 8.0, 2),
        ("done", 1.0, 4),
    ]
    rows = [
        await put(
            store,
            f"todo {i}",
            type="todo",
            status=status,
            importance=importance,
            created_at=T0 + timedelta(hours=hour),
        )
        for i, (status, importance, hour) in enumerate(spec)
    ]
    await put(store, "someone else's", owner="writer@desk", type="todo", importance=10.0)
    gone = await put(store, "archived", type="todo", importance=10.0)
    await put(store, "not a todo", importance=10.0)
    async with store.transaction():
        await store.set_archived(gone.id, True, T0)
    expected = [
        m.id for m in sorted(rows, key=lambda m: todo_order(m.status, m.importance, m.created_at))
    ]
    assert [m.id for m in await store.todo_rows(CODER, None, 50)] == expected
    assert [m.id for m in await store.todo_rows(CODER, None, 3)] == expected[:3]
    opened = [m.id for m in await store.todo_rows(CODER, "open", 50)]
    assert opened == [rows[4].id, rows[5].id, rows[2].id, rows[1].id]
    assert [m.id for m in await store.todo_rows(CODER, "done", 50)] == [rows[0].id, rows[6].id]
    assert (await store.todo_rows(CODER, "dropped", 50))[0].content == "todo 3"


async def test_links_of_follow_edges_both_ways_to_visible_ends_archived_or_not(
    store: Store,
) -> None:
    hub = await put(store, "hub")
    out = await put(store, "hub points here")
    into = await put(store, "points at hub")
    gone = await put(store, "archived, points at hub")
    hidden = await put(store, "hidden, points at hub", owner="writer@desk")
    far = await put(store, "two hops away")
    async with store.transaction():
        await store.add_edge(hub.id, out.id, EdgeType.refines, 0.7)
        for src in (into, gone, hidden):
            await store.add_edge(src.id, hub.id, EdgeType.related, 0.5)
        await store.add_edge(out.id, far.id, EdgeType.related, 1.0)
        await store.add_edge(into.id, out.id, EdgeType.supports, 0.3)
        await store.set_archived(gone.id, True, T0)

    def pairs(rows) -> list[tuple[str, str, str, float]]:
        return sorted((e.src, e.dst, e.type, round(e.weight, 3)) for e in rows)

    assert pairs(await store.links_of([hub.id], CODER)) == sorted(
        [
            (hub.id, out.id, "refines", 0.7),
            (into.id, hub.id, "related", 0.5),
            (gone.id, hub.id, "related", 0.5),
        ]
    )
    assert (hidden.id, hub.id, "related", 0.5) in pairs(await store.links_of([hub.id], EVERYONE))
    # An edge between two of the ids comes back once.
    both = pairs(await store.links_of([hub.id, out.id, into.id], CODER))
    assert both.count((into.id, out.id, "supports", 0.3)) == 1
    assert (out.id, far.id, "related", 1.0) in both
    assert await store.links_of([far.id, "no-such-id"], CODER) != []
    assert await store.links_of([], CODER) == []


async def test_context_rows_put_open_todos_first_and_skip_scratch_and_closed(store) -> None:
    low = await put(store, "low info", importance=2.0)
    high = await put(store, "high info", importance=9.0)
    todo = await put(store, "open todo", type="todo", importance=1.0)
    await put(store, "closed todo", type="todo", status="done", importance=10.0)
    await put(store, "scratch", type="scratch", importance=10.0)
    async with store.transaction():
        rows = await store.context_rows(CODER, 10)
    assert [m.id for m in rows] == [todo.id, high.id, low.id]
    assert [m.id for m in await store.context_rows(CODER, 2)] == [todo.id, high.id]


async def test_intents_are_the_live_triggered_intents_of_one_role(store: Store) -> None:
    cue = Trigger(cue="deploy")
    first = await put(store, "remind 1", type="intent", trigger=cue)
    await put(store, "no trigger", type="intent")
    await put(store, "other role", type="intent", trigger=cue, owner="writer@desk")
    gone = await put(store, "archived", type="intent", trigger=cue)
    second = await put(store, "remind 2", type="intent", trigger=cue)
    async with store.transaction():
        await store.set_archived(gone.id, True, T0)
    assert [m.id for m in await store.intents("coder")] == [first.id, second.id]


# --------------------------------------------------------------------------- recall


def fts5_bm25(docs: list[dict], query: list[str], row: int) -> float:
    """FTS5's bm25() by hand, for words every tokenizer splits and stems alike."""
    weights = {"title": 2.0, "content": 1.0, "tags": 1.5}
    lengths = [sum(len(d[c]) for c in weights) for d in docs]
    avgdl = sum(lengths) / len(docs)
    score = 0.0
    for word in query:
        n = sum(1 for d in docs if any(word in d[c] for c in weights))
        idf = max(math.log((len(docs) - n + 0.5) / (n + 0.5)), 1e-6)
        f = sum(w * docs[row][c].count(word) for c, w in weights.items())
        if f:
            score += idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * lengths[row] / avgdl))
    return score


async def test_keyword_candidates_score_bm25_exactly_as_fts5_does(store: Store) -> None:
    docs = [
        {"title": ["quartz"], "content": ["quartz", "lantern", "meadow"], "tags": ["copper"]},
        {"title": [], "content": ["lantern", "meadow", "violin", "glacier"], "tags": []},
        {"title": [], "content": ["orchard", "falcon"], "tags": ["quartz"]},
        {"title": ["violin"], "content": ["ember", "saddle", "prism", "tundra"], "tags": []},
        {"title": [], "content": ["walnut", "beacon"], "tags": []},
    ]
    ids = []
    for d in docs:
        m = await put(
            store, " ".join(d["content"]), title=" ".join(d["title"]), tags=d["tags"], entities=[]
        )
        ids.append(m.id)
    rows = await store.candidates("quartz lantern", CODER, limit=10)
    got = {r.id: r.bm25 for r in rows}
    expected = {
        ids[i]: fts5_bm25(docs, ["quartz", "lantern"], i)
        for i in range(len(docs))
        if fts5_bm25(docs, ["quartz", "lantern"], i) > 0
    }
    assert set(got) == set(expected)
    for ident, score in expected.items():
        assert got[ident] == pytest.approx(score, rel=1e-9)
    best = max(rows, key=lambda r: r.bm25)
    assert best.id == ids[0] and best.content == "quartz lantern meadow"


async def test_candidates_stay_in_scope_skip_archived_and_add_the_dense_ids(store) -> None:
    mine = await put(store, "harbor lantern note")
    theirs = await put(store, "harbor lantern other", owner="writer@desk")
    old = await put(store, "harbor lantern archived")
    dense = await put(store, "unrelated words entirely")
    async with store.transaction():
        await store.set_archived(old.id, True, T0)
    rows = await store.candidates("harbor lantern", CODER, limit=10, ids=[dense.id])
    by_id = {r.id: r for r in rows}
    assert set(by_id) == {mine.id, dense.id}
    assert by_id[mine.id].bm25 > 0 and by_id[dense.id].bm25 is None
    # A user's forget keeps a memory out of every keyword tier; a faded one is a candidate
    # only in the faded tier, and only when asked for.
    assert {r.id for r in await store.candidates("harbor", CODER, limit=10, faded=5)} == {mine.id}
    faded = await put(store, "harbor lantern faded")
    async with store.transaction():
        await store.set_archived(faded.id, True, T0, faded=True)
    assert {r.id for r in await store.candidates("harbor", CODER, limit=10)} == {mine.id}
    wide = await store.candidates("harbor", CODER, limit=10, faded=5)
    assert {r.id for r in wide} == {mine.id, faded.id}
    assert {r.id: r.faded for r in wide} == {mine.id: False, faded.id: True}
    assert {r.id for r in await store.candidates("harbor", EVERYONE, limit=10)} == {
        mine.id,
        theirs.id,
    }
    assert [r.id for r in await store.candidates("harbor lantern", CODER, limit=0)] == []


async def test_faded_keyword_rows_have_places_of_their_own(store: Store) -> None:
    """The live top `limit` is the same with faded rows beside it; faded rows take the top
    `faded` of their own tier, best first."""
    live = [await put(store, "quartz lantern " + "meadow " * i) for i in range(1, 4)]
    gone = [await put(store, "quartz lantern") for _ in range(3)]
    async with store.transaction():
        for m in gone:
            await store.set_archived(m.id, True, T0, faded=True)
    plain = await store.candidates("quartz lantern", CODER, limit=2)
    tiered = await store.candidates("quartz lantern", CODER, limit=2, faded=2)
    assert [r.id for r in plain] == [live[0].id, live[1].id]
    assert [r.id for r in tiered if not r.archived] == [live[0].id, live[1].id]
    assert len([r for r in tiered if r.archived]) == 2
    assert all(r.faded for r in tiered if r.archived)


async def test_set_archived_tells_faded_from_forgotten_and_clears_it_when_live(store) -> None:
    m = await put(store, "lantern harbour")
    async with store.transaction():
        await store.set_archived(m.id, True, T0, faded=True)
    got = await store.fetch(m.id)
    assert got.archived and got.faded
    async with store.transaction():
        await store.set_archived(m.id, True, T0)
    got = await store.fetch(m.id)
    assert got.archived and not got.faded
    async with store.transaction():
        await store.set_archived(m.id, True, T0, faded=True)
        await store.set_archived(m.id, False, T0, faded=True)
    got = await store.fetch(m.id)
    assert not got.archived and not got.faded
    rows, _ = await store.vector_changes(None, 100)
    assert [(r.archived, r.faded) for r in rows if r.id == m.id] == [(False, False)]


async def test_candidates_limit_to_the_best_keyword_rows(store: Store) -> None:
    for i in range(6):
        await put(store, "falcon " * (i + 1) + f"filler {i}")
    rows = await store.candidates("falcon", CODER, limit=2)
    assert len(rows) == 2
    assert all("falcon " * 5 in r.content for r in rows)


async def test_a_word_in_too_many_rows_generates_no_candidates(store: Store) -> None:
    store.common_floor = 4
    for i in range(6):
        await put(store, f"common word and rare{i}")
    rows = await store.candidates("common rare3", CODER, limit=10)
    assert [r.content for r in rows] == ["common word and rare3"]


async def test_a_word_that_becomes_too_common_stops_generating_candidates(store: Store) -> None:
    """Words' counts for the cut may be kept between searches, but never across a write."""
    store.common_floor = 4
    for text in ("common word rare0", "common word rare1", "other 2", "other 3", "other 4"):
        await put(store, text)
    assert len(await store.candidates("common", CODER, limit=10)) == 2
    for i in range(5, 8):
        await put(store, f"common word rare{i}")
    rows = await store.candidates("common rare6", CODER, limit=10)
    assert [r.content for r in rows] == ["common word rare6"]


async def test_a_word_edited_out_of_rows_generates_candidates_again(store: Store) -> None:
    store.common_floor = 4
    rows = [await put(store, f"common word rare{i}") for i in range(4)]
    await put(store, "other 4")
    assert await store.candidates("common", CODER, limit=10) == []
    edited = rows[0].model_copy(update={"content": "plain word rare0"})
    async with store.transaction():
        await store.save(edited, vec(edited.content))
    found = await store.candidates("common", CODER, limit=10)
    assert sorted(r.content for r in found) == [f"common word rare{i}" for i in (1, 2, 3)]


async def test_counts_seen_inside_a_rolled_back_transaction_are_not_kept(store: Store) -> None:
    """Rows a transaction wrote are counted while it runs; rolled back, their revisions are
    taken again by other rows, so counts read inside it must not outlive it."""
    store.common_floor = 4
    for text in ("common word rare0", "common word rare1", "other 2", "other 3", "other 4"):
        await put(store, text)
    with pytest.raises(RuntimeError):
        async with store.transaction():
            for i in range(5, 8):
                row = Memory(content=f"common word rare{i}", owner="coder@laptop")
                await store.insert(row, vec(row.content))
            assert await store.candidates("common", CODER, limit=10) == []
            raise RuntimeError("roll back")
    for i in range(5, 8):
        await put(store, f"plain word rare{i}")
    assert len(await store.candidates("common", CODER, limit=10)) == 2


async def test_a_word_made_common_by_another_connection_stops_generating_candidates(
    store_target,
) -> None:
    a, b = await open_store(store_target), await open_store(store_target)
    try:
        a.common_floor = b.common_floor = 4
        for text in ("common word rare0", "common word rare1", "other 2", "other 3", "other 4"):
            await put(b, text)
        await changed_elsewhere(a, None)
        assert len(await a.candidates("common", CODER, limit=10)) == 2
        before = await a.change_token()
        for i in range(5, 8):
            await put(b, f"common word rare{i}")
        await changed_elsewhere(a, before)
        rows = await a.candidates("common rare6", CODER, limit=10)
        assert [r.content for r in rows] == ["common word rare6"]
    finally:
        await a.close()
        await b.close()


async def test_queries_with_operators_and_quotes_match_words_and_never_raise(
    store: Store,
) -> None:
    """Operators, quotes and column filters in user text are searched as plain words."""
    await put(store, "he said hi near the start")
    await put(store, "plain words here")
    expected = {
        'he said "hi': ["he said hi near the start"],
        "NEAR(a b)": ["he said hi near the start"],
        "a AND OR NOT b": [],
        "*": [],
        "col:umn": [],
        "words:plain": ["plain words here"],
        "'; DROP": [],
        "": [],
    }
    for text, contents in expected.items():
        rows = await store.candidates(text, CODER, limit=5)
        assert [r.content for r in rows] == contents, text


async def test_scoring_rows_carry_what_scoring_needs(store: Store) -> None:
    a = await put(store, "score me", tags=["Deploy"], entities=["Ada Lovelace"], strength=2)
    (row,) = await store.scoring_rows([a.id])
    assert (row.id, row.seq, row.strength, row.archived) == (a.id, a.seq, 2, False)
    assert {"deploy", "ada", "lovelace"} <= row.cues
    assert row.created_at == pytest.approx(a.created_at.timestamp())
    assert row.bm25 is None


async def test_vector_changes_return_every_row_then_only_what_changed(store: Store) -> None:
    rows = [await put(store, f"vector {i}") for i in range(5)]
    got, mark = await store.vector_changes(None, 100)
    assert [r.id for r in got] == [m.id for m in rows]
    assert np.allclose(got[0].embedding, vec("vector 0")) and got[0].role == "coder"
    again, mark = await store.vector_changes(mark, 100)
    assert again == []
    async with store.transaction():
        await store.set_archived(rows[2].id, True, T0)
    moved, mark = await store.vector_changes(mark, 100)
    assert [(r.id, r.archived) for r in moved] == [(rows[2].id, True)]
    assert await store.row_count() == 5


async def test_vector_changes_page_through_without_losing_rows(store: Store) -> None:
    rows = [await put(store, f"page {i}") for i in range(7)]
    seen: list[str] = []
    mark = None
    while True:
        got, mark = await store.vector_changes(mark, 3)
        seen += [r.id for r in got]
        if len(got) < 3:
            break
    assert seen == [m.id for m in rows]
    late = await put(store, "after paging")
    got, mark = await store.vector_changes(mark, 3)
    assert [r.id for r in got] == [late.id]


async def test_the_change_token_moves_when_another_connection_commits(store_target) -> None:
    a, b = await open_store(store_target), await open_store(store_target)
    try:
        await put(a, "seed")
        await changed_elsewhere(b, None)
        _, mark = await b.vector_changes(None, 100)
        before = await b.change_token()
        written = await put(a, "from the other connection")
        await changed_elsewhere(b, before)
        assert await b.change_token() != before
        got, _ = await b.vector_changes(mark, 100)
        assert [r.id for r in got] == [written.id]
    finally:
        await a.close()
        await b.close()


# --------------------------------------------------------------------------- ranking changes


async def test_ranking_changes_name_the_links_since_the_mark(store: Store) -> None:
    """Links move no revision (tests above), so a process holding what ranking reads learns
    of them from this feed: each link written after the mark, once, and nothing after the
    next mark; uses logged meanwhile are not links (they come from `use_changes`). An upsert
    that keeps the larger weight changes nothing."""
    a, b, c = [await put(store, f"fed {i}") for i in range(3)]
    mark = await store.ranking_mark()
    changes, mark = await store.ranking_changes(mark)
    assert changes == []
    async with store.transaction():
        await store.append_accesses([(a.id, record(Channel.recalled, i)) for i in range(2)])
        await store.append_accesses([(b.id, record(Channel.searched, 5))])
        await store.add_edge(a.id, b.id, EdgeType.related, 0.5)
    changes, mark = await store.ranking_changes(mark)
    assert [(e.src, e.dst, e.type, e.weight) for e in changes] == [(a.id, b.id, "related", 0.5)]
    changes, mark = await store.ranking_changes(mark)
    assert changes == []
    async with store.transaction():
        await store.add_edge(a.id, b.id, EdgeType.related, 0.3)
    changes, mark = await store.ranking_changes(mark)
    assert changes == []
    async with store.transaction():
        await store.add_edges([(a.id, b.id, EdgeType.related, 0.9)])
        await store.copy_edges(a.id, c.id)
    changes, mark = await store.ranking_changes(mark)
    assert sorted((e.src, e.dst, e.weight) for e in changes) == sorted(
        [(a.id, b.id, 0.9), (c.id, b.id, 0.9)]
    )


async def test_edges_are_read_and_fed_for_the_roles_asked(store: Store) -> None:
    """A process holding a few roles reads the edges a role brings to them (`role_edges`:
    both ends in the roles held, one in the role loaded, archived ends too) and is fed the
    edges between its roles only, its mark moving past the others."""
    a1, a2 = await put(store, "ann one", "ann"), await put(store, "ann two", "ann")
    b1, s1 = await put(store, "bo one", "bo@desk"), await put(store, "shared one", "")
    c1 = await put(store, "cy one", "cy")
    async with store.transaction():
        await store.set_archived(a2.id, True, a2.created_at)
    pairs = [(a1, a2), (a2, a1), (a1, b1), (b1, a1), (b1, s1), (s1, a1), (c1, a1), (c1, b1)]
    async with store.transaction():
        await store.add_edges([(x.id, y.id, EdgeType.related, 0.5) for x, y in pairs])

    def ends(edges) -> list[tuple[str, str]]:
        return sorted((e.src, e.dst) for e in edges)

    def want(*of) -> list[tuple[str, str]]:
        return sorted((x.id, y.id) for x, y in of)

    assert ends(await store.role_edges(["ann", ""], ["ann", ""])) == want(
        (a1, a2), (a2, a1), (s1, a1)
    )
    # Bo loaded beside ann: bo's edges with ann and the shared role, each once, not cy's.
    assert ends(await store.role_edges(["bo"], ["ann", "bo", ""])) == want(
        (a1, b1), (b1, a1), (b1, s1)
    )
    assert await store.role_edges(["zed"], ["ann", "zed", ""]) == []
    mark = await store.ranking_mark()
    async with store.transaction():
        await store.add_edges(
            [(x.id, y.id, EdgeType.causes, 0.7) for x, y in [(a1, a2), (c1, a1), (a1, b1)]]
        )
    changes, later = await store.ranking_changes(mark, ["ann", ""])
    assert ends(changes) == want((a1, a2))
    changes, _ = await store.ranking_changes(mark, ["ann", "bo", ""])
    assert ends(changes) == want((a1, a2), (a1, b1))
    changes, _ = await store.ranking_changes(mark)
    assert len(changes) == 3
    changes, _ = await store.ranking_changes(later, ["ann", "bo", "cy", ""])
    assert changes == []  # the mark moved past the edges of roles not asked


async def test_ranking_and_use_changes_see_another_connections_late_commit(
    store_target,
) -> None:
    """A use and a link written by a transaction still open when the mark is taken are read
    once it commits (the link by `ranking_changes`, the use by `use_changes`): a mark that
    only looked past the newest finished write (on PostgreSQL, one that ignored the
    snapshot's running transactions) would miss them.
    The late writer is a plain connection, so its writes reach the database before it commits
    (a store's transaction may hold them back until then)."""
    a, b = await open_store(store_target), await open_store(store_target)
    try:
        x, y = await put(a, "written here"), await put(a, "linked here")
        mark = await b.ranking_mark()
        use = "INSERT INTO accesses(memory_id, ts, channel) VALUES ({p}, 0, 'recalled')"
        link = (
            "INSERT INTO edges(src, dst, type, weight, created_at) "
            "VALUES ({p}, {p}, 'supports', 0.7, 0)"
        )
        if isinstance(store_target, Path):
            import sqlite3

            late = sqlite3.connect(store_target, isolation_level=None)
            late.execute("BEGIN IMMEDIATE")
            late.execute(use.format(p="?"), (x.id,))
            late.execute(link.format(p="?"), (x.id, y.id))
        else:
            import psycopg

            late = psycopg.connect(store_target)
            late.execute(use.format(p="%s"), (x.id,))
            late.execute(link.format(p="%s"), (x.id, y.id))
            # A later transaction commits first: the open one is then below the snapshot's
            # xmax, among its running transactions.
            await put(a, "committed meanwhile")
        try:
            early = await b.ranking_mark()
            seen, _ = await b.ranking_changes(early)
            uses, _ = await b.use_changes(early)
            assert (seen, uses) == ([], {})
            late.commit()
        finally:
            late.close()
        for since in (mark, early):
            changes, _ = await b.ranking_changes(since)
            uses, _ = await b.use_changes(since)
            assert list(uses) == [x.id]
            assert [(e.src, e.dst, e.type) for e in changes] == [(x.id, y.id, "supports")]
    finally:
        await a.close()
        await b.close()


async def test_a_store_from_before_ranking_changes_is_upgraded_when_opened(store_target) -> None:
    """A store of the previous schema (SQLite 5, PostgreSQL 5) has no numbers on its uses and
    edges; opening it adds them, keeps its edges, and the feed names what is written next."""
    store = await open_store(store_target)
    try:
        a, b = await put(store, "old a"), await put(store, "old b")
        async with store.transaction():
            await store.add_edge(a.id, b.id, EdgeType.related, 0.4)
    finally:
        await store.close()
    if isinstance(store_target, Path):
        import sqlite3

        conn = sqlite3.connect(store_target)
        with conn:
            for name in ("edges_rev_insert", "edges_rev_update"):
                conn.execute(f"DROP TRIGGER {name}")
            conn.execute("DROP INDEX edges_rev")
            conn.execute("ALTER TABLE edges DROP COLUMN rev")
            conn.execute("PRAGMA user_version = 5")
        conn.close()
    else:
        import psycopg

        with psycopg.connect(store_target) as conn:
            conn.execute("DROP FUNCTION nooa_edge_rev() CASCADE")
            conn.execute("ALTER TABLE edges DROP COLUMN rev")
            conn.execute("ALTER TABLE accesses DROP COLUMN xid")
            conn.execute("DELETE FROM schema_version WHERE version > 5")
    store = await open_store(store_target)
    try:
        mark = await store.ranking_mark()
        async with store.transaction():
            await store.add_edge(b.id, a.id, EdgeType.related, 0.6)
            await store.append_accesses([(a.id, record(Channel.recalled, 1))])
        changes, _ = await store.ranking_changes(mark)
        uses, _ = await store.use_changes(mark)
        assert list(uses) == [a.id]
        assert [(e.src, e.dst) for e in changes] == [(b.id, a.id)]
        assert len(await store.edges_touching([a.id])) == 2
    finally:
        await store.close()


# --------------------------------------------------------------------------- edges


async def test_edges_upsert_to_the_larger_weight(store: Store) -> None:
    a, b = await put(store, "a"), await put(store, "b")
    async with store.transaction():
        await store.add_edge(a.id, b.id, EdgeType.related, 0.4)
        await store.add_edge(a.id, b.id, EdgeType.related, 0.9)
        await store.add_edge(a.id, b.id, EdgeType.related, 0.2)
        await store.add_edge(a.id, b.id, EdgeType.supports, 0.5)
    edges = await store.edges_of(a.id)
    assert sorted((e.target, e.type.value, e.weight) for e in edges) == [
        (b.id, "related", 0.9),
        (b.id, "supports", 0.5),
    ]
    assert await store.edges_of(b.id) == []


async def test_live_ids_names_the_existing_unarchived_ones(store: Store) -> None:
    a, b = await put(store, "a"), await put(store, "b")
    async with store.transaction():
        await store.set_archived(b.id, True, T0)
    assert await store.live_ids([a.id, b.id, "0" * 32]) == {a.id}
    assert await store.live_ids([]) == set()


async def test_add_edges_is_add_edge_for_each_in_order(store: Store) -> None:
    """Reflection links a few hundred pairs per transaction with one call."""
    a, b, c = await put(store, "a"), await put(store, "b"), await put(store, "c")
    async with store.transaction():
        await store.add_edge(b.id, a.id, EdgeType.related, 0.6)  # kept: larger than 0.4
        await store.add_edges([])
        await store.add_edges(
            [
                (a.id, b.id, EdgeType.related, 0.4),
                (b.id, a.id, EdgeType.related, 0.4),
                (a.id, b.id, EdgeType.related, 0.9),
                (a.id, c.id, EdgeType.related, 0.2),
                (a.id, b.id, EdgeType.related, 0.3),
            ]
        )
    assert sorted((e.target, e.weight) for e in await store.edges_of(a.id)) == sorted(
        [(b.id, 0.9), (c.id, 0.2)]
    )
    assert [(e.target, e.weight) for e in await store.edges_of(b.id)] == [(a.id, 0.6)]


async def test_out_edges_drop_archived_and_hidden_targets(store: Store) -> None:
    src = await put(store, "source")
    live = await put(store, "live target")
    gone = await put(store, "archived target")
    hidden = await put(store, "hidden target", owner="writer@desk")
    async with store.transaction():
        for dst in (live, gone, hidden):
            await store.add_edge(src.id, dst.id, EdgeType.related, 1.0)
        await store.set_archived(gone.id, True, T0)
    assert [e.dst for e in await store.out_edges([src.id], CODER)] == [live.id]
    assert {e.dst for e in await store.out_edges([src.id], EVERYONE)} == {live.id, hidden.id}


async def test_successors_are_visible_sources_not_forgotten_by_relation(store: Store) -> None:
    """A correction maintenance faded still supersedes; one its user forgot does not."""
    old = await put(store, "old fact")
    new = await put(store, "new fact")
    faded = await put(store, "a faded correction")
    gone = await put(store, "a forgotten correction")
    note = await put(store, "a related note")
    async with store.transaction():
        await store.add_edge(new.id, old.id, EdgeType.refines, 1.0)
        await store.add_edge(faded.id, old.id, EdgeType.contradicts, 1.0)
        await store.add_edge(gone.id, old.id, EdgeType.refines, 1.0)
        await store.add_edge(note.id, old.id, EdgeType.related, 1.0)
        await store.set_archived(faded.id, True, T0, faded=True)
        await store.set_archived(gone.id, True, T0)
    got = await store.successors([old.id], ["refines", "contradicts"], CODER)
    assert sorted((e.src, e.type) for e in got) == sorted(
        [(new.id, "refines"), (faded.id, "contradicts")]
    )


async def test_edge_pairs_by_role_and_liveness_and_copy_edges(store: Store) -> None:
    a, b, c = await put(store, "a"), await put(store, "b"), await put(store, "c")
    w = await put(store, "w", owner="writer@desk")
    async with store.transaction():
        await store.add_edge(a.id, b.id, EdgeType.related, 0.5)
        await store.add_edge(a.id, c.id, EdgeType.causes, 1.0)
        await store.add_edge(w.id, a.id, EdgeType.related, 1.0)
        await store.set_archived(c.id, True, T0)
    assert {(e.src, e.dst) for e in await store.edge_pairs("coder")} == {(a.id, b.id)}
    assert len(await store.edge_pairs("coder", live_only=False)) == 2
    assert len(await store.edge_pairs(None)) == 2
    async with store.transaction():
        # a→b itself is not copied onto b; what leaves a and what arrives at a are.
        assert await store.copy_edges(a.id, b.id) == 2
    assert {(e.target, e.type.value) for e in await store.edges_of(b.id)} == {(c.id, "causes")}
    arriving = {(e.src, e.type) for e in await store.edges_touching([b.id]) if e.dst == b.id}
    assert arriving == {(a.id, "related"), (w.id, "related")}


async def test_edges_touching_are_every_edge_at_either_end_once(store: Store) -> None:
    a, b, c, d = [await put(store, x) for x in "abcd"]
    async with store.transaction():
        await store.add_edge(a.id, b.id, EdgeType.related, 0.5)
        await store.add_edge(b.id, a.id, EdgeType.related, 0.5)
        await store.add_edge(c.id, a.id, EdgeType.refines, 1.0)
        await store.add_edge(c.id, d.id, EdgeType.causes, 1.0)
        await store.set_archived(c.id, True, T0)
    got = await store.edges_touching([a.id, b.id])
    assert sorted((e.src, e.dst, e.type) for e in got) == sorted(
        [(a.id, b.id, "related"), (b.id, a.id, "related"), (c.id, a.id, "refines")]
    )
    assert [(e.src, e.dst) for e in await store.edges_touching([d.id, d.id])] == [(c.id, d.id)]
    assert await store.edges_touching([]) == []


# --------------------------------------------------------------------------- accesses


def record(channel: Channel, minutes: int, reader: str = "coder@laptop") -> AccessRecord:
    return AccessRecord(
        ts=T0 + timedelta(minutes=minutes),
        channel=channel,
        reader_owner=reader,
        query=f"q{minutes}",
        score=0.25,
        rank=2,
        components=Components(source="sparse", rel=0.5),
    )


async def test_the_access_stream_is_newest_first_and_pages_by_seq(store: Store) -> None:
    a, b = await put(store, "a"), await put(store, "b", owner="writer@desk")
    async with store.transaction():
        await store.append_accesses([(a.id, record(Channel.recalled, i)) for i in range(3)])
        await store.append_accesses([(b.id, record(Channel.searched, 9))])
    stream = await store.access_stream(a.id, 10)
    assert [r.query for _, _, r in stream] == ["q2", "q1", "q0"]
    assert stream[0][2] == record(Channel.recalled, 2)
    older = await store.access_stream(a.id, 10, before_seq=stream[0][0])
    assert [r.query for _, _, r in older] == ["q1", "q0"]
    assert [mid for _, mid, _ in await store.access_stream(None, 10, scope=CODER)] == [a.id] * 3
    assert len(await store.access_stream(None, 10)) == 4
    assert await store.count_accesses(a.id) == 3


# --------------------------------------------------------------------------- tombstones


async def test_tombstones_stand_for_archived_rows_until_lifted(store: Store) -> None:
    a = await put(store, "forget this")
    async with store.transaction():
        await store.set_archived(a.id, True, T0)
        await store.add_tombstone(a.id, "wrong", T0)
    stone = await store.tombstone_by_hash(a.content_hash, "coder")
    assert (stone.memory_id, stone.reason, stone.type, stone.owner) == (
        a.id,
        "wrong",
        "info",
        "coder@laptop",
    )
    assert np.allclose(stone.embedding, vec("forget this")) and stone.ts == T0
    assert await store.tombstone_by_hash(a.content_hash, "writer") is None
    assert set(await store.tombstones_of([a.id])) == {a.id}
    async with store.transaction():
        await store.lift_tombstones(a.id, T0)
        await store.add_tombstone(a.id, "again", T0 + timedelta(hours=1))
        await store.lift_tombstones(a.id, T0 + timedelta(hours=2))
    assert await store.tombstone_by_hash(a.content_hash, "coder") is None
    assert await store.tombstones_of([a.id]) == {}
    every = await store.all_tombstones([a.id, "0" * 32])
    assert [(t.reason, t.lifted_at) for t in every[a.id]] == [
        ("wrong", T0),
        ("again", T0 + timedelta(hours=2)),
    ]


# --------------------------------------------------------------------------- maintenance


async def test_the_maintenance_log_filters_by_kind_and_role(store: Store) -> None:
    async with store.transaction():
        await store.log_maintenance("reflection", {"role": "coder", "applied": 3})
        await store.log_maintenance("reflection", {"role": "writer", "applied": 1})
        await store.log_maintenance("intent", {"role": "coder"})
    entries = await store.maintenance_entries("reflection")
    assert [e.report["role"] for e in entries] == ["writer", "coder"]
    assert [e.report for e in await store.maintenance_entries(role="coder")] == [
        {"role": "coder"},
        {"role": "coder", "applied": 3},
    ]
    assert await store.count_maintenance("reflection") == 2
    assert await store.count_maintenance("reflection", role="coder") == 1
    assert len(await store.maintenance_entries(limit=1)) == 1


async def test_reflection_nodes_are_the_live_rows_of_a_role_with_vectors(store: Store) -> None:
    a = await put(store, "node a", importance=6.0)
    await put(store, "other role", owner="writer@desk")
    gone = await put(store, "archived node")
    async with store.transaction():
        await store.set_archived(gone.id, True, T0)
    nodes, vectors = await store.reflection_nodes("coder")
    assert [n.id for n in nodes] == [a.id]
    assert nodes[0].importance == 6.0 and nodes[0].row == 0
    assert np.allclose(vectors[0], vec("node a"))
    assert len((await store.reflection_nodes(None))[0]) == 2


async def test_reflection_rows_are_pages_of_live_rows_as_columns(store: Store) -> None:
    made = [
        await put(store, f"row {i}", importance=float(i), created_at=T0 + timedelta(hours=i))
        for i in range(5)
    ]
    other = await put(store, "same role, other instance", owner="coder@desk")
    await put(store, "other role", owner="writer@desk")
    async with store.transaction():
        await store.set_archived(made[1].id, True, T0)
        await store.set_importance(made[2].id, authored=9.0)
    # Pages follow (owner, seq): the role index's order.
    first = await store.reflection_rows("coder", None, 2)
    assert first.ids == [other.id, made[0].id]
    rest = await store.reflection_rows("coder", (first.owner_of(1), int(first.seq[1])), 10)
    assert rest.ids == [made[2].id, made[3].id, made[4].id]
    assert len(await store.reflection_rows("coder", ("coder@laptop", int(rest.seq[-1])), 9)) == 0
    assert len(await store.reflection_rows(None, None, 10)) == 6
    node = rest.node(0)
    assert (node.id, node.type, node.owner, node.importance) == (
        made[2].id,
        "info",
        "coder@laptop",
        2.0,
    )
    assert node.authored_importance == 9.0 and node.created_at == T0 + timedelta(hours=2)
    assert node.status is None and not node.archived


# --------------------------------------------------------------------------- statistics


async def test_counts_and_kpis_stay_inside_the_scope(store: Store) -> None:
    a = await put(store, "a")
    b = await put(store, "b", type="todo")
    w = await put(store, "w", owner="writer@desk")
    gone = await put(store, "gone")
    async with store.transaction():
        await store.set_archived(gone.id, True, T0)
        await store.add_tombstone(gone.id, "x", T0)
        await store.add_edge(a.id, b.id, EdgeType.derived_from, 1.0)
        await store.add_edge(a.id, w.id, EdgeType.related, 1.0)
        await store.append_accesses(
            [
                (a.id, record(Channel.recalled, 1)),
                (a.id, record(Channel.recalled, 2, reader="writer@desk")),
                (w.id, record(Channel.recalled, 3)),
            ]
        )
    counts = await store.counts(CODER)
    assert (counts.total, counts.archived) == (3, 1)
    assert counts.by_type == {"info": 1, "todo": 1}
    assert counts.by_owner == {"coder@laptop": 2}
    kpi = await store.kpi_rows(CODER, ["recalled", "searched"])
    assert sorted(kpi.per_memory) == sorted([(a.id, "info", True, 2), (b.id, "todo", False, 0)])
    assert [s for s, _ in kpi.todos] == ["open"]
    assert (kpi.cross_owner_reads, kpi.tombstones, kpi.edges, kpi.accesses) == (1, 1, 1, 2)
    everyone = await store.kpi_rows(EVERYONE, ["recalled"])
    assert (everyone.cross_owner_reads, everyone.edges, everyone.accesses) == (2, 2, 3)


READS = ["recalled", "searched", "deref"]
#: Scopes and read channels `kpi_totals` is checked in: a role with shared rows, every role,
#: one instance, another role; two sets of channels.
KPI_CASES = [
    (scope, reads)
    for scope in (CODER, EVERYONE, Scope(owner="coder@laptop"), Scope(roles=frozenset({"writer"})))
    for reads in (READS, ["recalled"])
]


def summed(raw: KpiRaw) -> tuple:
    """What `KpiTotals` must hold, computed from the plain per-memory rows."""
    counted = Counter(
        (kind == "reflection" or derived, n) for _, kind, derived, n in raw.per_memory
    )
    return (
        dict(counted),
        sorted(raw.todos, key=str),
        (raw.cross_owner_reads, raw.tombstones, raw.edges, raw.accesses),
    )


def totals(t: KpiTotals) -> tuple:
    pairs = [(flagged, n) for flagged, n, _ in t.read_counts]
    assert len(pairs) == len(set(pairs)), "one row per (reflective, reads)"
    return (
        {(flagged, n): k for flagged, n, k in t.read_counts},
        sorted(t.todos, key=str),
        (t.cross_owner_reads, t.tombstones, t.edges, t.accesses),
    )


async def assert_totals_are_the_row_sums(store: Store) -> None:
    """`kpi_totals` agrees with the sums of `kpi_rows` in every scope and read set."""
    for scope, reads in KPI_CASES:
        assert totals(await store.kpi_totals(scope, reads)) == summed(
            await store.kpi_rows(scope, reads)
        ), (scope, reads)


async def kpi_store(store: Store) -> dict[str, Memory]:
    """Memories of two roles and shared, a reflection, a derived one, an archived one with a
    tombstone, and accesses by readers of this role, another role, none, on every kind of row
    (and on an id no memory has), in two batches."""
    m = {
        "a": await put(store, "a"),
        "r": await put(store, "r", type="reflection"),
        "d": await put(store, "d"),
        "t": await put(store, "t", type="todo"),
        "s": await put(store, "s", owner=""),
        "w": await put(store, "w", owner="writer@desk"),
        "gone": await put(store, "gone", type="episode"),
    }
    log = [
        (m["a"].id, record(Channel.recalled, 1)),
        (m["a"].id, record(Channel.recalled, 2)),
        (m["a"].id, record(Channel.searched, 3, reader="coder@desk")),
        (m["a"].id, record(Channel.recalled, 4, reader="writer@desk")),
        (m["a"].id, record(Channel.injected, 5, reader="writer@desk")),
        (m["r"].id, record(Channel.deref, 6, reader="")),
        (m["d"].id, record(Channel.recalled, 7, reader="writer")),
        (m["s"].id, record(Channel.recalled, 8, reader="writer@desk")),
        (m["w"].id, record(Channel.recalled, 9)),
        (m["w"].id, record(Channel.shown, 10)),
        (m["gone"].id, record(Channel.created, 0)),
        (m["gone"].id, record(Channel.recalled, 11, reader="writer@desk")),
        ("0" * 32, record(Channel.recalled, 12)),
    ]
    async with store.transaction():
        await store.set_archived(m["gone"].id, True, T0)
        await store.add_tombstone(m["gone"].id, "x", T0)
        await store.add_edge(m["d"].id, m["a"].id, EdgeType.derived_from, 1.0)
        await store.add_edge(m["a"].id, m["w"].id, EdgeType.related, 1.0)
        await store.add_edge(m["s"].id, m["a"].id, EdgeType.related, 1.0)
        await store.append_accesses(log[:6])
    async with store.transaction():
        await store.append_accesses(log[6:])
    return m


async def test_kpi_totals_are_the_sums_of_the_plain_kpi_rows(store: Store) -> None:
    """Stats reads `kpi_totals`; `kpi_rows` counts the stream itself. They agree in every
    scope, and on these numbers worked out by hand for the role: a read 4 times (once by
    another role; an injection is no read), the reflection and the derived memory once each,
    the shared row once, the todo never; cross-owner: a's, d's (a reader named by role alone)
    and the archived row's; the shared row and the unnamed reader never count."""
    await kpi_store(store)
    await assert_totals_are_the_row_sums(store)
    coder = await store.kpi_totals(CODER, READS)
    assert sorted(coder.read_counts) == [(False, 0, 1), (False, 1, 1), (False, 4, 1), (True, 1, 2)]
    assert [s for s, _ in coder.todos] == ["open"]
    assert (coder.cross_owner_reads, coder.tombstones, coder.edges, coder.accesses) == (3, 1, 2, 10)
    # Counts in the same pass-per-scope style: live rows per type and owner (the archived
    # episode is no type of the live ones), all rows and archived ones overall.
    counts = await store.counts(CODER)
    assert (counts.total, counts.archived) == (6, 1)
    assert counts.by_type == {"info": 3, "reflection": 1, "todo": 1}
    assert counts.by_owner == {"": 1, "coder@laptop": 4}
    writer = await store.counts(Scope(roles=frozenset({"writer"})))
    assert (writer.total, writer.archived, writer.by_owner) == (2, 0, {"": 1, "writer@desk": 1})


async def test_access_counts_follow_deleted_and_rewritten_accesses(store_target) -> None:
    """No verb deletes or rewrites the stream, but whatever does (by hand, a later tool) keeps
    the counts stats reads equal to the stream: triggers keep them, not the callers."""
    store = await open_store(store_target)
    try:
        m = await kpi_store(store)
    finally:
        await store.close()
    a = m["a"].id
    delete = "DELETE FROM accesses WHERE memory_id = {p} AND channel = 'searched'"
    rewrite = "UPDATE accesses SET channel = 'deref', reader_owner = '' WHERE channel = 'shown'"
    if isinstance(store_target, Path):
        import sqlite3

        conn = sqlite3.connect(store_target)
        with conn:
            conn.execute(delete.format(p="?"), (a,))
            conn.execute(rewrite)
        conn.close()
    else:
        import psycopg

        with psycopg.connect(store_target) as conn:
            conn.execute(delete.format(p="%s"), (a,))
            conn.execute(rewrite)
    store = await open_store(store_target)
    try:
        await assert_totals_are_the_row_sums(store)
        everyone = await store.kpi_totals(EVERYONE, READS)
        assert sorted(everyone.read_counts)[-2:] == [(False, 3, 1), (True, 1, 2)]
    finally:
        await store.close()


async def test_a_store_from_before_the_access_counts_is_counted_when_opened(store_target) -> None:
    """A store of the previous schema (SQLite 2, PostgreSQL 1) has no counts; opening it takes
    them from its stream, including what an older nooa-mcp appended meanwhile."""
    store = await open_store(store_target)
    try:
        m = await kpi_store(store)
    finally:
        await store.close()
    late = (
        "INSERT INTO accesses(memory_id, ts, channel, reader_owner) "
        "VALUES ({p}, 0, 'recalled', 'writer@desk')"
    )
    if isinstance(store_target, Path):
        import sqlite3

        conn = sqlite3.connect(store_target)
        with conn:
            for name in ("accesses_count", "accesses_uncount", "accesses_recount"):
                conn.execute(f"DROP TRIGGER {name}")
            conn.execute("DROP TABLE access_counts")
            conn.execute("DROP INDEX memories_kpi")
            conn.execute("PRAGMA user_version = 2")
            conn.execute(late.format(p="?"), (m["t"].id,))
        conn.close()
    else:
        import psycopg

        with psycopg.connect(store_target) as conn:
            conn.execute("DROP TABLE access_counts")
            conn.execute("DROP FUNCTION nooa_count_accesses() CASCADE")
            conn.execute("DELETE FROM schema_version WHERE version > 1")
            conn.execute(late.format(p="%s"), (m["t"].id,))
    store = await open_store(store_target)
    try:
        await assert_totals_are_the_row_sums(store)
        coder = await store.kpi_totals(CODER, READS)
        assert sorted(coder.read_counts)[:2] == [(False, 1, 2), (False, 4, 1)]
        assert (coder.cross_owner_reads, coder.accesses) == (4, 11)
    finally:
        await store.close()


# --------------------------------------------------------------------------- meta, transactions


async def test_meta_values_are_set_read_and_locked(store: Store) -> None:
    assert await store.get_meta("k") is None
    async with store.transaction():
        assert await store.lock_meta("k") is None
        await store.set_meta("k", "1")
        await store.set_meta("k", "2")
    assert await store.get_meta("k") == "2"


async def test_a_failed_transaction_writes_nothing(store: Store) -> None:
    kept = await put(store, "kept")
    with pytest.raises(RuntimeError, match="boom"):
        async with store.transaction():
            await store.insert(Memory(content="rolled back", owner="coder@laptop"), None)
            await store.set_archived(kept.id, True, T0)
            await store.set_meta("k", "v")
            raise RuntimeError("boom")
    assert [m.id for m in await store.list_memories(CODER, archived=None)] == [kept.id]
    assert await store.get_meta("k") is None


async def test_read_then_rewrite_in_transactions_loses_no_update(store_target) -> None:
    """Two connections (two servers) bump one counter by fetch + save: none is lost."""
    stores = [await open_store(store_target), await open_store(store_target)]
    try:
        target = await put(stores[0], "counted")

        async def bump(store: Store) -> None:
            for _ in range(10):
                async with store.transaction():
                    memory = await store.fetch(target.id)
                    memory.reinforcement_count += 1
                    await store.save(memory)

        async with anyio.create_task_group() as tg:
            for s in stores:
                for _ in range(3):
                    tg.start_soon(bump, s)
        assert (await stores[0].fetch(target.id)).reinforcement_count == 60
    finally:
        for s in stores:
            await s.close()


async def test_check_then_insert_of_one_text_makes_one_row_across_connections(
    store_target,
) -> None:
    stores = [await open_store(store_target), await open_store(store_target)]
    record_ = Memory(content="Exactly once, from anywhere.", owner="coder@laptop")
    made: list[str] = []
    try:

        async def author(store: Store) -> None:
            async with store.transaction():
                if not await store.find_by_hash(record_.content_hash, "coder", "info"):
                    fresh = Memory(content=record_.content, owner="coder@laptop")
                    await store.insert(fresh, None)
                    made.append(fresh.id)

        async with anyio.create_task_group() as tg:
            for s in stores:
                for _ in range(4):
                    tg.start_soon(author, s)
        assert len(made) == 1
        assert await stores[1].count_memories(CODER) == 1
    finally:
        for s in stores:
            await s.close()


async def test_a_locked_meta_key_serialises_read_modify_write(store_target) -> None:
    stores = [await open_store(store_target), await open_store(store_target)]
    try:

        async def take(store: Store) -> None:
            for _ in range(5):
                async with store.transaction():
                    value = await store.lock_meta("lease")
                    await store.set_meta("lease", str(int(value or 0) + 1))

        async with anyio.create_task_group() as tg:
            for s in stores:
                for _ in range(3):
                    tg.start_soon(take, s)
        assert await stores[0].get_meta("lease") == "30"
    finally:
        for s in stores:
            await s.close()


# --------------------------------------------------------------------------- dump and load


async def test_dump_pages_through_every_table_and_load_copies_it(store, tmp_path) -> None:
    a = await put(store, "dumped a", tags=["x"])
    b = await put(store, "dumped b")
    async with store.transaction():
        await store.add_edge(a.id, b.id, EdgeType.related, 0.5)
        await store.append_accesses([(a.id, record(Channel.recalled, 1))])
        await store.set_archived(b.id, True, T0)
        await store.add_tombstone(b.id, "gone", T0)
        await store.log_maintenance("reflection", {"role": "coder"})
        await store.set_meta("embedder", "hash:256")
    sizes = await store.table_sizes()
    assert sizes == {
        "meta": 1,
        "memories": 2,
        "edges": 1,
        "accesses": 1,
        "tombstones": 1,
        "maintenance_log": 1,
    }
    copy = await open_store(tmp_path / "copy.sqlite")
    try:
        dumped: dict[str, list[dict]] = {}
        for table in DUMP_TABLES:
            after, rows = None, []
            while True:
                page, after = await store.dump(table, after, 1)
                rows += page
                if after is None:
                    break
            dumped[table] = rows
            async with copy.transaction():
                await copy.load(table, rows)
        assert await copy.table_sizes() == sizes
        assert dumped["memories"][1]["archived"] is True
        assert dumped["memories"][0]["tags"] == ["x"]
        for table in DUMP_TABLES:
            again, _ = await copy.dump(table, None, 100)
            assert again == dumped[table], table
        assert (await copy.fetch(a.id)).model_dump() == (await store.fetch(a.id)).model_dump()
        assert [r.id for r in await copy.candidates("dumped", EVERYONE, limit=5)] == [a.id]
    finally:
        await copy.close()


# --------------------------------------------------------------------------- held facts


async def test_keyword_hits_are_the_candidates_keyword_rows_read_narrow(store: Store) -> None:
    """`keyword_hits` gives the ids and scores `candidates` gives its keyword rows, in the
    same order, in every tier: also when the pool is full of rows the scope or the archive
    leaves out (the search then ranks every match, the path that once named a column the
    narrow read did not select)."""
    store.common_floor = 10_000
    live = [await put(store, "quartz lantern " + "meadow " * i) for i in range(1, 6)]
    faded = [await put(store, "quartz lantern faded " + "x " * i) for i in range(3)]
    gone = [await put(store, "quartz lantern") for _ in range(205)]
    async with store.transaction():
        for m in faded:
            await store.set_archived(m.id, True, T0, faded=True)
        for m in gone:
            await store.set_archived(m.id, True, T0)
    for kwargs in (
        {"limit": 10},
        {"limit": 10, "faded": 2},
        {"limit": 3},
        {"limit": 10, "include_archived": True},
    ):
        rows = await store.candidates("quartz lantern", CODER, **kwargs)
        hits = await store.keyword_hits("quartz lantern", CODER, **kwargs)
        assert hits == [(r.id, r.bm25) for r in rows if r.bm25 is not None], kwargs
        assert hits, kwargs
    assert {i for i, _ in await store.keyword_hits("quartz lantern", CODER, limit=10)} == {
        m.id for m in live
    }
    assert await store.keyword_hits("", CODER, limit=10) == []


async def test_vector_rows_carry_what_ranking_scores_and_uses_read_alike(store: Store) -> None:
    from nooa_mcp.domain.accesses import apply_access
    from nooa_mcp.domain.schema import AccessRecord, Channel
    from nooa_mcp.storage.rows import access_values, facts_of, memory_values, uses_of

    m = await put(
        store,
        "the quay lights flicker",
        tags=["ops"],
        entities=["Dana"],
        place_or_task="harbour",
        importance=7.25,
        valid_to=T0 + timedelta(days=3),
    )
    for age in (3600, 60):
        apply_access(m, AccessRecord(ts=T0 - timedelta(seconds=age), channel=Channel.recalled))
    async with store.transaction():
        await store.save(m)
    rows, _ = await store.vector_changes(None, 100)
    (row,) = [r for r in rows if r.id == m.id]
    assert row.facts == facts_of(m)
    assert row.facts.cues == frozenset({"ops", "dana", "harbour"})
    assert row.facts.uses.actr_count == m.actr_count >= 2
    assert row.facts.uses == uses_of(m) == uses_of(await store.fetch(m.id))
    # What an access log writes is what a whole row's write would for those columns.
    whole = memory_values(m, None)
    assert access_values(m) == {k: whole[k] for k in access_values(m)}


async def test_use_changes_give_each_used_memorys_history_once(store: Store) -> None:
    from nooa_mcp.domain.accesses import apply_access
    from nooa_mcp.domain.schema import AccessRecord, Channel
    from nooa_mcp.storage.rows import uses_of

    used = await put(store, "the quay lights flicker")
    other = await put(store, "parking permits renew in March")
    mark = await store.ranking_mark()
    assert (await store.use_changes(mark))[0] == {}
    for _ in range(2):
        access = AccessRecord(ts=T0, channel=Channel.recalled)
        async with store.transaction():
            apply_access(used, access)
            await store.save_accesses([used])
            await store.append_accesses([(used.id, access)])
    got, mark = await store.use_changes(mark)
    assert got == {used.id: uses_of(used)} and other.id not in got
    assert (await store.use_changes(mark))[0] == {}
