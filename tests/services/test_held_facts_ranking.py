"""Ranking scores on the facts the vector index holds (`storage.facts`), not on rows it reads.

A recall reads the keyword search's ids, scores every candidate on the columns held beside
the vectors (importance, when learned, validity, cue words, use history) and reads rows only
for what it shows. These tests hold it to the ranking from rows read from the store, to the
last bit, while uses are logged (by this process and by another), importance and validity
change, memories are forgotten and time passes — on both backends.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import anyio
import pytest
import time_machine
from row_reads import record_row_reads

from nooa_mcp import Memory
from nooa_mcp.domain.schema import Channel, EdgeType, now as utc_now
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.services.ranking import held_keywords, keyword_candidates, rank
from nooa_mcp.services.recall import log_batch
from nooa_mcp.storage.rows import uses_of
from nooa_mcp.storage.sqlite import SQLiteStore

pytestmark = pytest.mark.anyio

TEXTS = [
    ("the harbour crane inspection is due on Friday", ["Dana"], ["ops"], 6.0),
    ("the harbour crane operator is Dana", ["Dana"], [], 5.0),
    ("a storm bent the crane jib last winter", [], ["weather"], 4.0),
    ("the jib bolts come from Malmo", ["Malmo"], [], 3.0),
    ("harbour crane limit was 40 tonnes", [], ["limits"], 7.0),
    ("harbour crane limit is now 55 tonnes", [], ["limits"], 7.0),
    ("parking permits for the harbour renew in March", [], [], 2.0),
    ("Dana prefers the night shift at the harbour", ["Dana"], ["people"], 5.5),
    ("the quay lights flicker when the crane lifts", [], [], 3.5),
    ("order new crane cables before the audit", [], ["todo"], 8.0),
]

QUERIES = ["harbour crane", "who operates the crane", "crane limit tonnes", "Dana shift", "jib"]


async def _store(mem: Memory) -> list[str]:
    ids = []
    for text, entities, tags, importance in TEXTS:
        result = await mem.author(text, entities=entities, tags=tags, importance=importance)
        ids.append(result.id)
    store = mem.engine.store
    async with store.transaction():
        await store.add_edge(ids[5], ids[4], EdgeType.refines, 1.0)
        await store.add_edge(ids[2], ids[3], EdgeType.causes, 0.8)
        await store.add_edge(ids[0], ids[8], EdgeType.related, 0.7)
    mem.engine.index.mark_dirty()
    return ids


#: Every way `_ways` ranks.
FOUR = ("columns", "named", "held", "rows")


async def _same(mem: Memory, now: float | None = None) -> None:
    now = utc_now().timestamp() if now is None else now
    for query in QUERIES:
        ways = await _ways(mem, query, now)
        assert ways["held"] and ways["held"] == ways["rows"], query


async def test_held_facts_rank_as_the_rows_do_as_uses_and_edits_come(store_target) -> None:
    async with Memory.open(store_target, owner="me", embedder=HashEmbedder()) as mem:
        ids = await _store(mem)
        await _same(mem)
        # Uses logged by this process's recalls (behind their replies), then counted.
        for query in QUERIES * 2:
            await mem.recall(query, k=3)
        await mem.engine.flush()
        await _same(mem)
        held = mem.engine.index
        row = int(held.ids.rows_of([ids[0]])[0])
        stored = uses_of(await mem.engine.store.fetch(ids[0]))
        # Uses closer than the grain are one use: the newest time moved on, the count did not.
        assert max(stored.actr_times) > stored.first_access_at + 0.01
        assert held.facts.use_state(row, ids[0]) == stored
        # Edits: importance, validity, a forgotten memory.
        await mem.update(ids[1], importance=9.5)
        past = datetime.now(UTC) - timedelta(days=1)
        await mem.update(ids[6], valid_to=past.isoformat())
        await mem.forget(ids[3])
        await _same(mem)
        # Time passes: a month later the same facts rank as the rows do.
        await _same(mem, utc_now().timestamp() + 30 * 86400)


async def test_uses_another_process_logs_reach_the_held_facts(store_target) -> None:
    async with Memory.open(store_target, owner="me", embedder=HashEmbedder()) as mem:
        ids = await _store(mem)
        await _same(mem)
        async with Memory.open(store_target, owner="me", embedder=HashEmbedder()) as other:
            for _ in range(3):
                await other.recall("harbour crane limit", k=2)
                await other.engine.flush()
            used = uses_of(await other.engine.store.fetch(ids[4]))
        assert max(used.actr_times) > used.first_access_at + 0.01
        # The first process learns of them on a sync once it has heard of the commit (at
        # once on SQLite; PostgreSQL's notification comes a moment later) and ranks as the
        # rows do.
        index = mem.engine.index
        row = int(index.ids.rows_of([ids[4]])[0])
        for _ in range(100):
            await index.sync(mem.engine.store)
            if index.facts.use_state(row, ids[4]) == used:
                break
            await anyio.sleep(0.05)
        assert index.facts.use_state(row, ids[4]) == used
        await _same(mem)


async def test_a_row_read_before_a_use_committed_keeps_that_use(store_target, monkeypatch) -> None:
    """A sync reads a memory's row (another process edited it), and a use this process logs
    commits, and is noted, before that read is applied: the held facts keep the use. The
    row's older history once replaced it, never to be read again (this process's own use
    moves no revision and no change token): the memory ranked without its newest use for the
    rest of the session (a round trip's store ranked a hit with rec 0.0002, its copy with
    0.0166: `test_roundtrip_random`)."""
    start = datetime.now(UTC).replace(microsecond=0)
    later = start + timedelta(days=1, hours=2)
    with time_machine.travel(start, tick=False):
        async with Memory.open(store_target, owner="me", embedder=HashEmbedder()) as mem:
            ids = await _store(mem)
            await _same(mem)
    target = ids[4]
    with time_machine.travel(start + timedelta(days=1), tick=False):
        async with Memory.open(store_target, owner="me", embedder=HashEmbedder()) as mem:
            await _same(mem)
            c = mem._caller
            store, index = c.store, c.index
            read = store.vector_changes
            logged = []

            async def read_then_use(*args, **kwargs):
                rows, mark = await read(*args, **kwargs)
                if not logged and any(r.id == target for r in rows):
                    # A recall's use of it, logged behind the reply, commits in between.
                    with time_machine.travel(later, tick=False):
                        access = c.access(Channel.recalled, query="harbour crane limit")
                        await log_batch([(c, [(target, access)])])
                    logged.append(access)
                return rows, mark

            monkeypatch.setattr(store, "vector_changes", read_then_use)
            async with Memory.open(store_target, owner="me", embedder=HashEmbedder()) as other:
                await other.update(target, importance=8.0)
            index.mark_dirty()
            await index.sync(store)
            assert logged
            row = int(index.ids.rows_of([target])[0])
            stored = uses_of(await store.fetch(target))
            assert max(stored.actr_times) == later.timestamp()
            assert index.facts.use_state(row, target) == stored
            # Two hours on, held facts and rows rank it alike (its newest use now counts).
            await _same(mem, later.timestamp())


async def test_a_recall_reads_the_rows_of_what_it_shows_only(mem: Memory, monkeypatch) -> None:
    await _store(mem)
    await mem.recall("harbour crane", k=2)  # the index loaded and synced
    asked = record_row_reads(mem.engine.store, monkeypatch)
    result = await mem.recall("harbour crane", k=2, hops=0)
    # One read: the rows shown (with, when versions of one statement compare their words,
    # theirs and the few that may move up past them), never every candidate's.
    assert len(asked) == 1
    assert {h.id for h in result.hits} <= set(asked[0])
    assert len(asked[0]) < len(TEXTS)
    assert all(h.content for h in result.hits)


async def _ways(
    mem: Memory,
    query: str,
    now: float,
    ways: tuple[str, ...] = ("held", "rows"),
    types: set[str] | None = None,
    whole: bool = False,
) -> dict[str, list[tuple]]:
    """The ranking of `query` at `now`, each of `ways`: "columns", from the held postings'
    rows and the columns beside them (what a warm server does); "named", from the same hits
    named by id, their facts looked up by id; "held", from the store's keyword search and
    held facts; "rows", from the store's search and rows."""
    c = mem._caller
    scope = c.scope("mine")
    settings = c.settings.recall
    vector = await c.engine.query_vector(query, c.role)
    out = {}
    for way in ways:
        async with c.engine.vectors(scope.visible_roles) as index:
            assert index.holds(scope.visible_roles)
            if way in ("columns", "named"):
                read = await held_keywords(
                    query,
                    index=index,
                    store=c.store,
                    scope=scope,
                    settings=settings,
                    types=types,
                    whole_archive=whole,
                )
                assert read.hit_rows is not None and read.hits is None
                if way == "named":
                    at, scores = read.hit_rows
                    read.hits = list(
                        zip(index.ids.names(at.tolist()), scores.tolist(), strict=True)
                    )
                    read.hit_rows = None
            else:
                read = await keyword_candidates(
                    query,
                    store=c.store,
                    scope=scope,
                    settings=settings,
                    types=types,
                    whole_archive=whole,
                    held=way == "held",
                )
                assert (read.hits is not None) is (way == "held")

            async def done(read=read):
                return read

            ranking = await rank(
                query,
                store=c.store,
                index=index,
                query_vector=vector,
                scope=scope,
                settings=settings,
                now=now,
                types=types,
                keyword=done(),
                whole_archive=whole,
            )
        out[way] = [
            (
                r.id,
                r.source,
                r.score,
                r.cos,
                r.rel,
                r.rec,
                r.imp,
                r.spread,
                r.stale,
                r.superseded_by,
                r.faded,
                r.path,
                r.row.bm25,
            )
            for r in ranking.rows
        ]
    return out


async def test_candidates_taken_as_columns_rank_as_the_rows_do(store_target) -> None:
    """Live, faded and forgotten memories of several types, keyword places filled in both
    tiers: the candidates picked from rows of the index and scored on the columns (no row
    object for a memory that is not one) are those, in the order, with the numbers, that
    rows named by id and rows read from the store give."""
    async with Memory.open(store_target, owner="me", embedder=HashEmbedder()) as mem:
        settings = mem._caller.settings.recall
        # Few places, so the keyword search fills both tiers and leaves hits out.
        settings.n_sparse, settings.n_faded, settings.n_dense = 3, 2, 4
        old = await mem.author_many(
            [{"content": text, "type": "episode"} for text, _, _, _ in TEXTS[:5]]
        )
        report = await mem.reflect(["prune"], now=utc_now() + timedelta(days=730))
        assert report.steps[0].applied == 5  # every one of them faded
        ids = await _store(mem)
        await mem.author("to reset the harbour crane, restart its hoist controller", type="skill")
        await mem.forget(ids[3])
        await mem.engine.index.load_keywords(mem.engine.store)
        now = utc_now().timestamp()
        # The held postings rank as SQLite's FTS5 does, to the bit; PostgreSQL's own search
        # is another (a warm server on either searches the postings).
        same_search = isinstance(mem.engine.store, SQLiteStore)
        sources: set[str] = set()
        faded = 0
        for query in [*QUERIES, "crane", "harbour crane limit tonnes Dana jib", "jib bolts"]:
            # `whole`: every memory in one tier, as explain's dry run searches.
            for types, whole in [
                (None, False),
                ({"info"}, False),
                ({"skill", "episode"}, False),
                (None, True),
            ]:
                ways = await _ways(mem, query, now, FOUR, types, whole)
                assert ways["columns"] == ways["named"], (query, types, whole)
                if same_search:
                    assert ways["columns"] == ways["held"] == ways["rows"], (query, types, whole)
                sources |= {row[1] for row in ways["columns"]}
                faded += sum(row[10] for row in ways["columns"])
                assert ids[3] not in {row[0] for row in ways["columns"]}
        assert {"both", "sparse", "dense"} <= sources and faded > 0
        assert {r.id for r in old} & {r[0] for r in ways["columns"]}


async def test_uses_days_apart_rank_from_the_columns_as_from_the_rows(store_target) -> None:
    """Recalls on three days leave memories with several use times (held in a dict beside
    the columns, not in the lone-time column): ranked as the rows rank them, a week later,
    and at a clock behind every use, where each age counts as none (the same ranking a
    week further back)."""
    start = datetime.now(UTC)
    async with Memory.open(store_target, owner="me", embedder=HashEmbedder()) as mem:
        await _store(mem)
        for day in range(3):
            with time_machine.travel(start + timedelta(days=day, hours=1), tick=False):
                for query in QUERIES:
                    await mem.recall(query, k=3)
                await mem.engine.flush()
        index = mem.engine.index
        assert len(index.facts.times) >= 3  # memories with more than one use time
        later = (start + timedelta(days=9)).timestamp()
        await _same(mem, later)
        behind = [
            (await _ways(mem, q, start.timestamp() - d * 86400))["held"]
            for d in (7, 14)
            for q in QUERIES
        ]
        assert behind[: len(QUERIES)] == behind[len(QUERIES) :]
        assert all(row[5] == row[5] for ranking in behind for row in ranking)  # no NaN rec
