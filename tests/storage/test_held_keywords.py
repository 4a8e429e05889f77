"""Keyword search from the postings held in memory ranks as the store's own search does
(`storage.postings`, `VectorIndex.keyword_hit_rows`; DESIGN.md §5.13).

The store's search (FTS5's `bm25()` in SQLite, its formula in PostgreSQL's SQL) is the
reference: for every query, scope and tier setting, the held search must return the same ids
in the same order with the same BM25 to the last bit — on a fresh store, after rows are
rewritten (their stems change, their postings go stale), archived by their user or by
maintenance, with the "too common" cut-off and the pool fallback reached, on both backends.
A recall uses the held search once the postings are loaded, and the store's inside a
transaction. (PostgreSQL's SQL sums the same terms in another order, so its BM25 may differ
in the last bit and it lists its hits in its own order: there the same hits must come with
the same BM25 to 1e-9.)
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import anyio
import numpy as np
import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.domain.scope import Scope
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.storage import postings
from nooa_mcp.storage.keywords import indexed_stems, named_stems, query_stems
from nooa_mcp.storage.postings import HeldKeywords
from nooa_mcp.storage.residency import Residency
from nooa_mcp.storage.vectors import VectorIndex

pytestmark = pytest.mark.anyio

OWNERS = ["ana@laptop", "ben@desk", ""]

TOPICS = [
    "harbour crane inspection",
    "crane operator rota",
    "storm damage report",
    "jib bolts from Malmo",
    "parking permit renewal",
    "night shift notes",
    "quay lights flicker",
    "cable order audit",
]

QUERIES = [
    "harbour crane",
    "crane cranes",
    "who runs the night shift",
    "Malmo bolts",
    "audit of the cable order",
    "permit",
    "lights",
    "storm storm report",
    "nothing matches zebra",
    "the",
    "inspection of item 17",
]

SCOPES = [
    Scope(roles=None),
    Scope(owner="ana@laptop"),
    Scope(roles=frozenset({"ben"})),
    Scope(roles=frozenset({"ana", "ben"})),
    Scope(roles=frozenset()),
]

#: (limit, faded, wide): the recall's own, a faded tier, every row in one tier, and a small
#: limit whose pool (200 rows) is full of other owners' rows (the fallback reads every match).
TIERS = [(50, 5, False), (10, 3, False), (50, 0, True), (2, 0, False), (5, 5, False)]


def _text(i: int) -> tuple[str, list[str], list[str]]:
    topic = TOPICS[i % len(TOPICS)]
    words = " ".join(TOPICS[(i * 7 + j) % len(TOPICS)].split()[0] for j in range(i % 4))
    return f"{topic} {words} item {i}".strip(), [f"tag{i % 3}"], ["Malmo"] if i % 5 == 0 else []


async def _fill(target, n: int) -> list[list[str]]:
    """`n` memories for each owner (other owners' first, so one owner's rows are few among
    the best matches), each owner's ids."""
    ids: list[list[str]] = []
    for owner in OWNERS:
        settings = Settings(store=target, owner=owner)
        async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
            batch = []
            for i in range(n):
                content, tags, entities = _text(i + len(ids) * 1000)
                batch.append({"content": content, "tags": tags, "entities": entities})
            ids.append([r.id for r in await mem.author_many(batch)])
    return ids


def _held_hits(index, stems, scope, **tiers) -> list[tuple[str, float]] | None:
    """`VectorIndex.keyword_hit_rows` as the store gives its hits: (id, BM25) pairs."""
    found = index.keyword_hit_rows(stems, scope, **tiers)
    if found is None:
        return None
    rows, scores = found
    return list(zip(index.ids.names(rows.tolist()), scores.tolist(), strict=True))


def _alike(store, got: list[tuple[str, float]], want: list[tuple[str, float]]) -> bool:
    if store.dialect.name == "sqlite":
        return got == want
    return sorted((i, round(s, 9)) for i, s in got) == sorted((i, round(s, 9)) for i, s in want)


async def _compare(store, index, queries, scopes) -> int:
    """The held search against the store's for every query, scope and tier; how many hits
    were compared."""
    compared = 0
    for query in queries:
        for scope in scopes:
            for limit, faded, wide in TIERS:
                want = await store.keyword_hits(
                    query, scope, limit=limit, faded=faded, include_archived=wide
                )
                got = _held_hits(
                    index,
                    query_stems(query),
                    scope,
                    limit=limit,
                    faded=faded,
                    wide=wide,
                    floor=store.common_floor,
                )
                assert _alike(store, got, want), (query, scope, limit, faded, wide)
                compared += len(want)
    return compared


async def _same_hits(store, floor: int | None = None) -> int:
    """`_compare` on an index loaded afresh, with every query and scope."""
    if floor is not None:
        store.common_floor = floor
    index = VectorIndex(HashEmbedder().dim)
    await index.sync(store)
    await index.load_keywords(store)
    assert index.keywords.ready
    return await _compare(store, index, QUERIES, SCOPES)


@pytest.fixture
async def filled(store_target):
    ids = await _fill(store_target, 120)
    from nooa_mcp.storage import open_store

    store = await open_store(store_target)
    try:
        yield store, ids
    finally:
        await store.close()


async def test_the_heap_the_postings_read_freed_is_handed_back(filled, monkeypatch) -> None:
    """The first read of every row's stems frees its pages of parsed rows into the heap,
    where they stayed resident (12 MiB at 100k rows): it ends by handing the free heap back
    to the system, once the postings are in place."""
    store, _ = filled
    from nooa_mcp.storage import vectors

    index = VectorIndex(HashEmbedder().dim)
    trims: list[bool] = []
    monkeypatch.setattr(vectors, "release_free_memory", lambda: trims.append(index.keywords.ready))
    await index.load_keywords(store)
    assert trims == [True]


async def test_held_search_ranks_as_the_store_with_scopes_and_tiers(filled) -> None:
    store, _ = filled
    assert await _same_hits(store) > 1000


async def test_held_search_follows_rewrites_and_archives(filled) -> None:
    store, ids = filled
    index = VectorIndex(HashEmbedder().dim)
    await index.sync(store)
    await index.load_keywords(store)
    when = datetime.now(UTC)
    ana = ids[0]
    for n, memory_id in enumerate(ana[:40]):
        if n % 3 == 0:
            await store.set_archived(memory_id, True, when, faded=True)
        elif n % 3 == 1:
            await store.set_archived(memory_id, True, when)
        else:
            memory = await store.fetch(memory_id)
            assert memory is not None
            memory.content = f"storm crane rewritten {n} zebra"
            await store.save(memory)
    # The index held before the changes pulls them as a recall does before it searches.
    index.mark_dirty()
    await index.sync(store)
    await index.pull_keywords(store)
    queries = ("zebra", "storm crane", "harbour crane", "rewritten")
    assert await _compare(store, index, queries, SCOPES[:2]) > 0
    zebra = _held_hits(
        index, ["zebra"], SCOPES[0], limit=50, faded=5, wide=False, floor=store.common_floor
    )
    assert len(zebra) == 13  # the 13 rewritten rows, each found by its new words only
    # And a fresh index, loaded from scratch, holds the same.
    assert await _same_hits(store) > 1000


async def test_the_common_word_cut_and_the_pool_fallback_match(filled) -> None:
    store, _ = filled
    # A floor under the store's size: words in more rows than it are not searched.
    assert await _same_hits(store, floor=60) > 0
    index = VectorIndex(HashEmbedder().dim)
    await index.load_keywords(store)
    kept = index.keywords.selective(query_stems("inspection of item 17"), 60, 0.01)
    assert kept == ["inspect", "17"]  # "item" is in all 360 rows, "inspect" in under 60


async def test_the_pool_fallback_finds_the_scope_s_rows_below_others(tmp_path) -> None:
    """The best 200 matches are all another owner's: the store reads every match, and so
    must the held search (limit 5 of ana's, none among the 200)."""
    target = tmp_path / "m.sqlite"
    for owner, text, n in (("ben@desk", "zebra zebra crossing", 230), ("ana@laptop", "zebra", 8)):
        async with Memory.open(
            settings=Settings(store=target, owner=owner), embedder=HashEmbedder()
        ) as mem:
            await mem.author_many([{"content": f"{text} {i}"} for i in range(n)])
    from nooa_mcp.storage import open_store

    store = await open_store(target)
    try:
        index = VectorIndex(HashEmbedder().dim)
        await index.sync(store)
        await index.load_keywords(store)
        ana = Scope(owner="ana@laptop")
        want = await store.keyword_hits("zebra", ana, limit=5, faded=0)
        got = _held_hits(index, ["zebra"], ana, limit=5, faded=0, wide=False, floor=1000)
        assert got == want and len(got) == 5
    finally:
        await store.close()


async def test_an_index_holding_only_an_empty_role_finds_nothing_as_the_store(tmp_path) -> None:
    """The postings hold every role's rows; the index only the roles loaded, here one with
    no row at all and no shared row either (a new owner's first recall): no hit."""
    target = tmp_path / "m.sqlite"
    async with Memory.open(
        settings=Settings(store=target, owner="ana@laptop"), embedder=HashEmbedder()
    ) as mem:
        await mem.author_many([{"content": f"harbour crane {i}"} for i in range(5)])
    from nooa_mcp.storage import open_store

    store = await open_store(target)
    try:
        index = VectorIndex(HashEmbedder().dim, Residency())
        carl = Scope(roles=frozenset({"carl"}))
        await index.ensure(store, carl.visible_roles)
        await index.load_keywords(store)
        assert index.holds(carl.visible_roles) and index.keywords.count == 5
        got = _held_hits(index, ["crane"], carl, limit=50, faded=5, wide=False, floor=1000)
        assert got == await store.keyword_hits("crane", carl, limit=50, faded=5) == []
    finally:
        await store.close()


def test_postings_merge_keeps_what_was_appended_and_drops_what_went_stale() -> None:
    held = HeldKeywords()
    held.apply([(1, '["a", "b b", "", ""]'), (2, '["", "b c", "a", ""]')])
    held.merge()
    held.apply([(1, '["", "c", "", ""]'), (3, '["c", "", "", "b"]')])
    # Row 1's old postings are stale before and after the merge; weights in half-units.
    for merge in (False, True):
        if merge:
            held.merge()
        rows, weights = held.postings("b")
        assert sorted(zip(rows.tolist(), weights.tolist(), strict=True)) == [(2, 2), (3, 3)]
        rows, weights = held.postings("c")
        assert sorted(zip(rows.tolist(), weights.tolist(), strict=True)) == [(1, 2), (2, 2), (3, 4)]
        assert held.postings("a")[0].tolist() == [2]
        assert (held.count, held.tokens) == (3, 1 + 3 + 2)


def _merged_by_one_sort(held: HeldKeywords) -> tuple[list[int], list[int], list[int]]:
    """The base a merge must build: the current entries (the base's not stale, then the
    appended ones of each row's current version) in one stable sort by stem."""
    base_stems = np.repeat(np.arange(held._starts.size - 1), np.diff(held._starts))
    keep = ~held._stale[held._rows]
    rows = np.frombuffer(held._new_row, dtype=np.int32)
    current = held._version[rows] == np.frombuffer(held._new_version, dtype=np.int32)
    stems = np.concatenate([base_stems[keep], np.frombuffer(held._new_stem, np.int32)[current]])
    entries = np.concatenate([held._rows[keep], rows[current]])
    weights = np.concatenate(
        [held._weights[keep], np.frombuffer(held._new_weight, np.uint16)[current]]
    )
    order = np.argsort(stems, kind="stable")
    starts = np.zeros(len(held._stems) + 1, dtype=np.int64)
    np.cumsum(np.bincount(stems, minlength=len(held._stems)), out=starts[1:])
    return starts.tolist(), entries[order].tolist(), weights[order].tolist()


@pytest.mark.parametrize("step", [1, 3, 64, postings.MERGE_STEP])
def test_a_merge_places_every_entry_as_one_sort_of_them_all(monkeypatch, step: int) -> None:
    """A merge writes each step's entries to their stem's places (a counting sort): the
    base it builds is the one a stable sort of every current entry builds — the base's
    entries of rows not rewritten first, then the appended ones, each in the order held —
    over rounds of new rows, rewrites (whose old entries went stale) and rows with no
    words, whatever the step."""
    monkeypatch.setattr(postings, "MERGE_STEP", step)
    rng = np.random.default_rng(7)
    words = [f"w{k}" for k in range(40)]
    held = HeldKeywords()
    for round_ in range(6):
        # Two pages a round: a row in both is appended twice, its first entries stale.
        for _ in range(2):
            page = []
            for seq in rng.choice(60, size=25, replace=False).tolist():
                columns = [" ".join(rng.choice(words, size=rng.integers(0, 5))) for _ in range(4)]
                stems = None if round_ % 3 == 2 and seq % 7 == 0 else json.dumps(columns)
                page.append((seq, stems))
            held.apply(page, merge=False)
        want = _merged_by_one_sort(held)
        held.merge()
        assert (held._starts.tolist(), held._rows.tolist(), held._weights.tolist()) == want
        assert not held._new_stem and not held._stale.any()
    assert held._rows.size > 100  # the rounds left a base worth merging into


def test_a_page_of_new_rows_is_held_as_row_by_row() -> None:
    """A first read's pages are counted with numpy (`_append_new`); what they hold, and the
    base a merge builds of it, is what applying the rows one at a time holds."""
    page = [
        (5, '["t t", "a b a", "tag", "ent a"]'),
        (2, None),  # no stems stored: a row of no tokens
        (9, '["", "b"]'),  # fewer columns than four
        (3, ["a", "", "", "z z z"]),  # decoded already (PostgreSQL's jsonb)
        (7, '["a", "a a a a a a", "", ""]'),
    ]
    for rows in (page, [*page[:2], (5, '["x", "", "", ""]')]):  # a repeat: row by row
        paged, each = HeldKeywords(), HeldKeywords()
        paged.apply(rows, merge=False)
        each._apply_each(rows)
        for merged in (False, True):
            if merged:
                paged.merge()
                each.merge()
            assert paged._stems == each._stems
            for stem in paged._stems:
                got, want = paged.postings(stem), each.postings(stem)
                assert got[0].tolist() == want[0].tolist(), stem
                assert got[1].tolist() == want[1].tolist(), stem
            assert paged.lengths.tolist() == each.lengths.tolist()
            assert (paged.count, paged.tokens) == (each.count, each.tokens)
        for name in ("_starts", "_rows", "_weights", "_version"):
            assert getattr(paged, name).tolist() == getattr(each, name).tolist(), name
    held = HeldKeywords()
    held.apply(page, merge=False)
    assert held.postings("a")[0].tolist() == [5, 3, 7]
    assert held.postings("a")[1].tolist() == [2 * 2 + 3, 4, 4 + 12]
    assert (held.count, held.tokens) == (5, 8 + 0 + 1 + 4 + 7)


def test_the_score_is_fts5_bm25_to_the_bit() -> None:
    """FTS5's formula on numbers worked by hand: N = 3, avgdl = 2, |D| = 1 and 3."""
    held = HeldKeywords()
    held.apply([(1, '["x", "", "", ""]'), (2, '["", "x y z", "", ""]'), (3, '["", "w w", "", ""]')])
    seqs, scores = held.search(["x"])
    assert seqs.tolist() == [1, 2]
    idf = np.log((3 - 2 + 0.5) / (2 + 0.5))  # negative: FTS5 uses 1e-6 instead
    assert idf < 0
    k1, b = postings.K1, postings.B
    want = [
        1e-6 * ((f * (k1 + 1.0)) / (f + k1 * ((1 - b) + b * d / 2.0)))
        for f, d in ((2.0, 1), (1.0, 3))
    ]
    assert scores.tolist() == want


async def test_recall_searches_the_held_postings_and_a_transaction_the_store(
    tmp_path, monkeypatch
) -> None:
    settings = Settings(store=tmp_path / "m.sqlite", owner="ana@laptop")
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        await mem.author_many([{"content": f"harbour crane note {i}"} for i in range(30)])
        await mem.engine.keywords_loaded()
        store = mem.engine.store
        asked = []
        original = type(store).keyword_hits

        async def counted(self, *args, **kwargs):
            asked.append(args[0])
            return await original(self, *args, **kwargs)

        monkeypatch.setattr(type(store), "keyword_hits", counted)
        await mem.recall("harbour crane")  # pulls the rows written since the load
        asked.clear()
        result = await mem.recall("crane note 7")
        assert result.hits and result.hits[0].content == "harbour crane note 7"
        assert asked == []  # held: no keyword statement
        from nooa_mcp.services.ranking import held_keywords

        scope = mem._caller.scope("mine")
        async with store.transaction():
            read = await held_keywords(
                "crane note 7",
                index=mem.engine.index,
                store=store,
                scope=scope,
                settings=mem._caller.settings.recall,
            )
        assert asked == ["crane note 7"]  # in a transaction: the store searched
        assert read.hits and read.hits[0][0] == result.hits[0].id


async def test_the_postings_first_read_goes_on_between_calls_not_inside_them(
    tmp_path, monkeypatch
) -> None:
    """A page of the background read run inside a call made each of the call's awaits wait
    for one: while a front end serves a call (`Engine.serving`), no page is read."""
    from nooa_mcp import engine as engine_module
    from nooa_mcp.storage import vectors

    settings = Settings(store=tmp_path / "m.sqlite", owner="ana@laptop")
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        await mem.author_many([{"content": f"harbour crane note {i}"} for i in range(200)])
    monkeypatch.setattr(vectors, "LOAD_PAGE", 4)
    monkeypatch.setattr(engine_module, "CATCH_UP_AT_MOST", 60.0)
    pages: list[int] = []
    original = HeldKeywords.apply

    def counted(self, rows, **options):
        pages.append(len(rows))
        return original(self, rows, **options)

    monkeypatch.setattr(HeldKeywords, "apply", counted)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        with mem.engine.serving():
            assert not mem.engine.index.keywords.ready
            before = len(pages)
            for _ in range(50):
                await asyncio.sleep(0.002)
            assert len(pages) <= before + 1  # at most the page under way when the call came
            assert not mem.engine.index.keywords.ready
        await mem.engine.keywords_loaded()
        assert sum(pages) == 200 and len(pages) >= 50
        result = await mem.recall("crane note 7")
        assert result.hits[0].content == "harbour crane note 7"


async def test_a_server_never_idle_still_reads_its_postings(tmp_path, monkeypatch) -> None:
    """A server whose calls never pause (back-to-back recalls, agents sharing it) waits for a
    moment between calls in vain: each page of the first read goes in once its own, short
    wait runs out (`CATCH_UP_AT_MOST`), not the access log's. At 100k rows, pages that waited
    the log's 50 ms kept recall on the store's keyword search for 40–45 s after start."""
    from nooa_mcp import engine as engine_module
    from nooa_mcp.storage import vectors

    settings = Settings(store=tmp_path / "m.sqlite", owner="ana@laptop")
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        await mem.author_many([{"content": f"harbour crane note {i}"} for i in range(200)])
    monkeypatch.setattr(vectors, "LOAD_PAGE", 4)
    monkeypatch.setattr(engine_module, "BETWEEN_CALLS_AT_MOST", 3600.0)
    monkeypatch.setattr(engine_module, "CATCH_UP_AT_MOST", 0.001)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        with mem.engine.serving():  # one call served the whole time
            assert not mem.engine.index.keywords.ready
            with anyio.fail_after(30):
                await mem.engine.keywords_loaded()
            assert mem.engine.index.keywords.ready and mem.engine.index.keywords.count == 200


WORDED = [
    {"content": "The staging cluster has three worker nodes", "tags": ["blue-rack"]},
    {"content": "The staging cluster has four worker nodes", "entities": ["Zoë Baker"]},
    {"title": "Café ledger", "content": "deploy_script runs at noon"},
    {"content": "Caroline's dog sleeps by the harbour crane", "tags": ["pets", "harbour"]},
]
ASKED = [
    "how many worker nodes in the blue rack?",
    "what did Zoe Baker say about four nodes",
    "when does the deploy script run at the cafe",
    "where does Caroline's dog sleep",
]


async def _words_alike(store, index, ids: list[str]) -> int:
    """`stems_held` against the rows' own `indexed_stems` for every question; how many
    memories held a word asked."""
    rows = {row.id: row for row in await store.scoring_rows(ids)}
    holding = 0
    for question in ASKED:
        asked = named_stems(question)
        got = index.stems_held(ids, asked)
        want = {
            i: asked
            & indexed_stems(
                r.title, r.content, json.loads(r.tags_json), json.loads(r.entities_json)
            )
            for i, r in rows.items()
        }
        assert got == want, question
        holding += sum(1 for found in got.values() if found)
    return holding


async def test_the_words_a_memory_holds_are_read_from_the_postings_as_from_its_row(
    store_target,
) -> None:
    """Versions' word test (`ranking._versions`) asks the held postings which of a query's
    words a memory holds: the same as its row's title, content, tags and entities give,
    accents, underscores and possessives cut alike, and again after a rewrite."""
    async with Memory.open(
        settings=Settings(store=store_target, owner="ana@laptop"), embedder=HashEmbedder()
    ) as mem:
        ids = [r.id for r in await mem.author_many(WORDED)]
    from nooa_mcp.storage import open_store

    store = await open_store(store_target)
    try:
        index = VectorIndex(HashEmbedder().dim)
        await index.sync(store)
        await index.load_keywords(store)
        assert await _words_alike(store, index, ids) >= 6
        named = index.stems_held(ids, named_stems("blue rack worker nodes Zoe"))
        assert named[ids[0]] == {"blue", "rack", "worker", "node"}
        assert named[ids[1]] == {"worker", "node", "zoe"}
        memory = await store.fetch(ids[0])
        assert memory is not None
        memory.content, memory.tags = "The staging cluster has five spare nodes", []
        await store.save(memory)
        index.mark_dirty()
        await index.sync(store)
        await index.pull_keywords(store)
        assert index.stems_held(ids[:1], named_stems("blue worker nodes")) == {ids[0]: {"node"}}
        assert await _words_alike(store, index, ids) >= 5
        # A memory the postings do not hold yet (written since their last pull), or the
        # index not at all, gets no entry: its row is read instead.
        before = await store.change_token()
        async with Memory.open(
            settings=Settings(store=store_target, owner="ana@laptop"), embedder=HashEmbedder()
        ) as mem:
            late = (await mem.author("The staging cluster has six worker nodes")).id
        with anyio.fail_after(10):  # at once on SQLite; on PostgreSQL once the NOTIFY is heard
            while await store.change_token() == before:
                await anyio.sleep(0.01)
        await index.sync(store)
        assert index.ids.get(late) is not None
        asked = named_stems("six worker nodes")
        assert index.stems_held([late, "0" * 32, ids[1]], asked) == {ids[1]: {"worker", "node"}}
        await index.pull_keywords(store)
        assert index.stems_held([late], asked) == {late: {"six", "worker", "node"}}
    finally:
        await store.close()
