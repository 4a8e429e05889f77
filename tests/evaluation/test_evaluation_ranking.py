"""Ranking changes the LoCoMo evaluation led to, each pinned on tiny synthetic data.

Lexical relevance inside rel, cue overlap as an overlap coefficient, a minimum span for
min-max of recency, and a stemming FTS index (see BENCHMARKS.md for the measured effect).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
import time_machine

from nooa_mcp.config import Settings
from nooa_mcp.domain import scoring
from nooa_mcp.domain.schema import now as utc_now
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.memory import Memory
from nooa_mcp.storage.sqlite import fts_query

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def test_relevance_without_lex_is_noohs_formula():
    """Pinned: NOOA's rel = λ·cos + (1−λ)·overlap stays available when no lexical score is given."""
    rel = scoring.relevance(np.array([0.5, -0.2]), np.array([1.0, 0.0]), 0.7)
    assert rel == pytest.approx([0.7 * 0.5 + 0.3, 0.0])


def test_relevance_with_lex_fuses_cosine_bm25_and_cues():
    rel = scoring.relevance(
        np.array([0.4, 0.4]), np.array([0.0, 1.0]), 0.5, lex=np.array([1.0, 0.0]), mu=0.3
    )
    assert rel == pytest.approx([0.2 + 0.5, 0.2 + 0.3])


def test_overlap_coefficient_does_not_shrink_with_longer_queries():
    """A memory whose only cue the query names overlaps fully, however long the query is."""
    cues = {"caroline"}
    short, long = {"caroline", "research"}, {"caroline", "research", "adoption", "agencies"}
    assert scoring.overlap_coefficient(short, cues) == scoring.overlap_coefficient(long, cues) == 1
    assert scoring.jaccard(long, cues) < scoring.jaccard(short, cues)
    assert scoring.overlap_coefficient(set(), cues) == 0.0


def test_minmax_min_span_keeps_tiny_differences_tiny():
    """Months-old memories differ in sigmoid(B) by 1e-4; that must not become a 0..1 spread."""
    values = np.array([1.0e-4, 1.5e-4, 2.0e-4])
    assert scoring.minmax(values)[-1] == pytest.approx(1.0)
    assert scoring.minmax(values, min_span=0.1).max() < 0.01
    assert scoring.minmax(np.array([0.0, 0.5]), min_span=0.1) == pytest.approx([0.0, 1.0])
    assert scoring.minmax(np.array([0.5, 0.5]), min_span=0.1) == pytest.approx([0.5, 0.5])


def test_fts_query_drops_function_words_but_keeps_an_all_function_query():
    # Each kept word is asked for by its stem, as the index holds it (storage.keywords).
    assert fts_query("What did Caroline research?") == '"carolin" OR "research"'
    assert fts_query("who was it") is not None


def settings(tmp_path, **recall) -> Settings:
    s = Settings(store=tmp_path / "m.sqlite", owner="tester")
    return s.model_copy(update={"recall": s.recall.model_copy(update=recall)})


async def test_stemming_lets_a_keyword_match_its_inflections(tmp_path):
    """'painting' in the query finds 'painted' through the porter FTS tokenizer (BM25-only)."""
    s = settings(tmp_path, use_dense=False, lam=0.0, mu=0.0, a_rec=0.0, a_imp=0.0, gamma=0.0)
    async with Memory.open(s.store, owner="tester", embedder=HashEmbedder(), settings=s) as mem:
        painted = (await mem.author("Mel painted a sunrise over the lake")).id
        await mem.author("The weather was cold all week")
        ex = await mem.explain("painting", k=5)
    assert [r.id for r in ex.rows] == [painted]


async def test_old_memories_are_not_ranked_by_a_few_days_of_age(tmp_path):
    """Year-old memories a week apart: the most relevant wins although another is newer.

    Plain min-max (norm_min_span = 0) stretches their 1e-4 recency gap into a full a_rec
    bonus for the newest and flips the order; that is what the span prevents.
    """
    old = datetime.now(UTC) - timedelta(days=400)
    texts = [
        ("Caroline researched adoption agencies", old),
        ("Caroline researched adoption agencies online", old + timedelta(days=7)),
        ("Caroline walked the dog", old),
    ]
    tops = {}
    for span in (0.1, 0.0):
        s = settings(tmp_path / str(span), norm_min_span=span, gamma=0.0)
        (tmp_path / str(span)).mkdir()
        async with Memory.open(s.store, owner="tester", embedder=HashEmbedder(), settings=s) as mem:
            ids = []
            for t, when in texts:
                with time_machine.travel(when):  # learned then, never used since
                    ids.append((await mem.author(t)).id)
            ex = await mem.explain("Caroline researched adoption agencies", k=3)
        tops[span] = ids.index(ex.rows[0].id)
    assert tops == {0.1: 0, 0.0: 1}


async def test_a_bm25_match_lifts_a_memory_the_embedding_ranks_lower(tmp_path):
    """With λ < 1 a rare exact keyword counts beside cosine; with λ = 1 it does not."""
    texts = [
        "project alpha deadline moved to friday afternoon meeting notes",
        "zx81 serial number",
        "project alpha deadline friday meeting notes summary",
    ]
    query = "project alpha deadline friday meeting zx81"
    ranks = {}
    for lam in (1.0, 0.5):
        s = settings(tmp_path / str(lam), lam=lam, gamma=0.0)
        (tmp_path / str(lam)).mkdir()
        async with Memory.open(s.store, owner="tester", embedder=HashEmbedder(), settings=s) as mem:
            ids = [(await mem.author(t)).id for t in texts]
            ex = await mem.explain(query, k=3)
        ranks[lam] = [r.id for r in ex.rows].index(ids[1])
    assert ranks[0.5] < ranks[1.0]


def test_vectorised_base_levels_match_the_per_memory_formula():
    """recall scores every candidate in one pass; each row must equal scoring.base_level."""
    cases = [
        ([], 0, None),
        ([10.0], 1, 10.0),
        ([0.2, 50.0, 3600.0], 3, 3600.0),
        ([5.0, 60.0], 40, 86400.0 * 30),
        ([100.0, 100.0], 9, 100.0),
        ([7.0], 3, None),
    ]
    ages, counts, firsts = zip(*cases, strict=True)
    got = scoring.base_levels(list(ages), list(counts), list(firsts), d=0.5)
    want = [scoring.base_level(a, n, f, d=0.5) for a, n, f in cases]
    assert got == pytest.approx(want)


async def test_keyword_search_still_finds_my_rows_behind_many_foreign_matches(tmp_path):
    """fts_search ranks inside FTS5 before filtering by scope; when the best 200 matches all
    belong to another role, it falls back to filtering every match rather than missing mine."""
    from nooa_mcp.domain.scope import Scope
    from nooa_mcp.storage.sqlite import SQLiteStore as Store

    s = settings(tmp_path)
    async with Memory.open(s.store, owner="other", embedder=HashEmbedder(), settings=s) as mem:
        await mem.author_many([{"content": f"deploy deploy deploy note {i}"} for i in range(220)])
    async with Memory.open(s.store, owner="tester", embedder=HashEmbedder(), settings=s) as mem:
        mine = (await mem.author("a long note that mentions deploy once among many words")).id
    store = await Store.open(s.store)
    try:
        rows = await store.candidates("deploy", Scope(frozenset({"tester"})), limit=5)
    finally:
        await store.close()
    assert [r.id for r in rows] == [mine]
    # The same fall back with the faded tier beside the live one: each keeps its own rows.
    async with Memory.open(s.store, owner="tester", embedder=HashEmbedder(), settings=s) as mem:
        gone = (await mem.author("another long note that says deploy once in passing")).id
        await mem.reflect(["prune"], now=utc_now() + timedelta(days=730))
        kept = (await mem.author("a third note that says deploy just once too")).id
    store = await Store.open(s.store)
    try:
        rows = await store.candidates("deploy", Scope(frozenset({"tester"})), limit=5, faded=5)
    finally:
        await store.close()
    assert {(r.id, r.faded) for r in rows} == {(mine, True), (gone, True), (kept, False)}


async def test_keyword_search_ignores_terms_too_common_to_rank(tmp_path):
    """A term in at least `common_floor` rows (and 1% of the store) generates no candidates:
    BM25 would score every row it matches for almost no IDF. A rarer term still does, and a
    query of common terms only leaves candidate generation to the dense side."""
    from nooa_mcp.domain.scope import Scope
    from nooa_mcp.storage.sqlite import SQLiteStore as Store

    s = settings(tmp_path)
    async with Memory.open(s.store, owner="tester", embedder=HashEmbedder(), settings=s) as mem:
        await mem.author_many([{"content": f"deploy step {i} finished"} for i in range(30)])
        zebra = (await mem.author("the zebra deploy went fine")).id
    store = await Store.open(s.store)
    try:
        scope = Scope(None)
        by_default = await store.candidates("deploy", scope, limit=50)
        store.common_floor = 10
        rows = await store.candidates("deploy zebra", scope, limit=50)
        only_common = await store.candidates("deploy", scope, limit=50)
    finally:
        await store.close()
    assert [r.id for r in rows] == [zebra]
    assert only_common == []
    assert len(by_default) > 10  # some of the 31 near-duplicates merged on write


async def test_the_vector_cache_reads_a_store_in_pages_and_matches_a_single_read(
    tmp_path, monkeypatch
):
    """Cold sync pages through vector rows (SYNC_PAGE) into a matrix sized once; the result
    is the same cache as reading everything in one go."""
    from nooa_mcp.storage import vectors
    from nooa_mcp.storage.sqlite import SQLiteStore as Store

    s = settings(tmp_path)
    async with Memory.open(s.store, owner="tester", embedder=HashEmbedder(), settings=s) as mem:
        await mem.author_many(
            [{"content": f"note number {i} about topic {i % 7}"} for i in range(23)]
        )
    store = await Store.open(s.store)
    try:
        whole = vectors.VectorIndex(64)
        await whole.sync(store)
        monkeypatch.setattr(vectors, "SYNC_PAGE", 4)
        paged = vectors.VectorIndex(64)
        await paged.sync(store)
    finally:
        await store.close()
    n = whole.size
    assert n > 4 * 4 and paged.size == n
    assert list(paged.ids) == list(whole.ids) and paged.mark == whole.mark
    assert paged.matrix.shape == whole.matrix.shape
    assert np.array_equal(paged.matrix[:n], whole.matrix[:n])


async def test_a_store_opened_with_n_rows_reserves_room_before_the_matrix_grows(tmp_path):
    """Growing the vector matrix by copying holds two copies at once (+150 MB at 100k rows):
    the cold open reserves a quarter more (at least one growth step of 4,096 rows), untouched
    and so not resident until used; writes up to it keep the same array."""
    from nooa_mcp.domain.schema import Memory as Record
    from nooa_mcp.storage import open_store, vectors

    store = await open_store(tmp_path / "grow.sqlite")
    embed = HashEmbedder()

    async def put(n: int, tag: str) -> None:
        async with store.transaction():
            for i in range(n):
                text = f"{tag} note {i}"
                await store.insert(Record(content=text, owner="tester"), embed.embed([text])[0])

    try:
        await put(2000, "seed")
        index = vectors.VectorIndex(embed.dim)
        await index.sync(store)
        matrix = index.matrix
        assert (index.size, matrix.shape[0]) == (2000, max(2000 + 500, vectors.GROW_STEP))
        await put(matrix.shape[0] - 2000, "later")
        index.mark_dirty()
        await index.sync(store)
        assert index.size == matrix.shape[0] and index.matrix is matrix
        kept = matrix.copy()
        await put(1, "one more")
        index.mark_dirty()
        await index.sync(store)
        # This test holds the old array, so it is copied rather than resized under it.
        assert index.size == kept.shape[0] + 1 and index.matrix.shape[0] > kept.shape[0]
        assert np.array_equal(index.matrix[: kept.shape[0]], kept)
    finally:
        await store.close()


async def test_every_write_takes_a_fresh_store_revision_inside_its_own_statement(tmp_path):
    """insert and save compute rev in SQL (one round trip less per write); the vector cache
    still sees each write as newer than the last."""
    s = settings(tmp_path)
    async with Memory.open(s.store, owner="tester", embedder=HashEmbedder(), settings=s) as mem:
        a = (await mem.author("first note about kafka")).id
        b = (await mem.author("second note about redis")).id
        await mem.update(a, content="first note about kafka, revised")
        revs = {
            r["id"]: r["rev"]
            for r in await mem.engine.store._rows("SELECT id, rev FROM memories ORDER BY rev")
        }
    assert revs[a] > revs[b] > 0
    assert len(set(revs.values())) == 2


async def test_batch_dedup_finds_twins_among_stored_rows_and_earlier_items_of_the_batch(
    tmp_path,
):
    """author_many checks near-duplicates against the stored rows in one pass per batch and
    against the batch's own earlier items one by one; both must still be found (named in
    similar_to and linked), and only within the same type."""
    s = settings(tmp_path).model_copy(update={"dedup_similarity": 0.9})
    async with Memory.open(s.store, owner="tester", embedder=HashEmbedder(), settings=s) as mem:
        stored = (await mem.author("the nightly backup job runs at two in the morning")).id
        results = await mem.author_many(
            [
                {"content": "the nightly backup job runs at two in the morning!"},
                {"content": "kafka consumers lag behind during the weekly reindex"},
                {"content": "kafka consumers lag behind during the weekly reindex!"},
                {
                    "content": "kafka consumers lag behind during the weekly reindex!",
                    "type": "skill",
                },
            ]
        )
    assert [r.status for r in results] == ["created"] * 4
    assert [r.similar_to.id if r.similar_to else None for r in results] == [
        stored,
        None,
        results[1].id,
        None,
    ]


async def test_the_exact_repeat_lookup_uses_the_hash_index_not_a_type_scan(tmp_path):
    """Every write asks find_by_hash; without statistics SQLite preferred the (type, archived)
    index and scanned every live row of the type, making each write O(n)."""
    s = settings(tmp_path)
    async with Memory.open(s.store, owner="tester", embedder=HashEmbedder(), settings=s) as mem:
        first = await mem.author("the release train leaves on thursdays")
        seen: list[str] = []
        conn = mem.engine.store.conn
        await conn._execute(lambda: conn._conn.set_trace_callback(seen.append))
        again = await mem.author("the release train leaves on thursdays")
        await conn._execute(lambda: conn._conn.set_trace_callback(None))
        sql = next(q for q in seen if "content_hash =" in q and q.startswith("SELECT id"))
        plan = await mem.engine.store._rows(f"EXPLAIN QUERY PLAN {sql}")
    assert again.status == "exists" and again.id == first.id
    assert any("memories_hash" in str(tuple(row)) for row in plan)
