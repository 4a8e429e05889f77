"""Both backends cut, stem and score keywords alike (storage.keywords, DESIGN §15).

A fixed set of memories holds words the two backends' own stemmers and parsers treated
differently (Porter conflates ski and skies, general and generously, new and news; Snowball
does not; PostgreSQL's parser read `5e2x` as a number and a word). The same store on SQLite and,
after `migrate`, on PostgreSQL must give the same keyword hits with the same BM25 and the
same top-10 for every query. A store written before the stems (schema 4 on SQLite, 3 on
PostgreSQL) is stemmed anew when opened and then ranks as a new one.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.domain.schema import Memory as Record
from nooa_mcp.domain.scope import Scope
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.storage import open_store
from nooa_mcp.storage.keywords import LONGEST, query_stems, row_stems, words
from nooa_mcp.storage.migrate import migrate
from nooa_mcp.storage.sqlite import copy_store

pytestmark = pytest.mark.anyio

EVERYONE = Scope(roles=None)
OWNER = "coder@laptop"

FIXED = [
    ("We went skiing in the Alps last winter.", ["travel"], []),
    ("The skies were clear over the ski lift.", [], ["Alps"]),
    ("I love the ski season more than summer.", ["ski"], []),
    ("She gave generously to the animal shelter.", [], ["Caroline"]),
    ("A general meeting is held every Monday.", ["work"], []),
    ("The news came late on Friday night.", [], []),
    ("A new laptop arrived for the design team.", ["work"], []),
    ("He was dying to see the concert in Zürich.", [], ["Zürich"]),
    ("Die-hard fans queued for the follow-up show.", ["music"], []),
    ("Caroline's résumé lists a café in Montréal.", [], ["Caroline", "Montréal"]),
    ("The build flag is named use_fast_path and set to 5e2x.", ["config_flags"], []),
    ("Caroline researches adoption agencies and LGBTQ support groups.", [], ["Caroline"]),
    ("Running every morning keeps Melanie calm; she runs 5km.", [], ["Melanie"]),
    ("Melanie painted a sunrise over the lake in 2022.", ["art"], ["Melanie"]),
    ("The organisation organises organised events for organizers.", [], []),
]
QUERIES = [
    "ski",
    "skies",
    "generously",
    "general meeting",
    "news",
    "new laptop",
    "dying",
    "die hard",
    "cafe resume",
    "Zurich",
    "follow up",
    "fast path flag",
    "5e2x",
    "What does Caroline research?",
    "Where does Melanie run?",
    "organise",
    "painting sunrise",
]


async def build(path: Path, embedder: HashEmbedder) -> None:
    """The fixed set through the façade, with some recalls so rows hold accesses."""
    async with Memory.open(settings=Settings(store=path, owner=OWNER), embedder=embedder) as mem:
        for content, tags, entities in FIXED:
            await mem.author(content, tags=tags, entities=entities)
        for query in QUERIES[::3]:
            await mem.recall(query)


async def keyword_hits(target) -> dict[str, list[tuple[str, float]]]:
    store = await open_store(target)
    try:
        out = {}
        for query in QUERIES:
            rows = await store.candidates(query, EVERYONE, limit=10)
            # The order of the rows is the caller's to make (ranking sorts them).
            out[query] = sorted((round(r.bm25 or 0.0, 9), r.id) for r in rows)
        return out
    finally:
        await store.close()


async def top_tens(target, embedder: HashEmbedder) -> dict[str, list[str]]:
    settings = Settings(store=target, owner=OWNER)
    async with Memory.open(settings=settings, embedder=embedder) as mem:
        return {q: [r.id for r in (await mem.explain(q, k=10)).rows] for q in QUERIES}


def test_words_are_cut_as_fts5_unicode61_cuts_them_and_stemmed_once() -> None:
    cut = ["zurich", "s", "cafe", "bar", "naive", "fish", "5e2x"]
    assert words("Zürich's café_bar NAÏVE ﬁsh 5e2x") == cut
    assert words("a" * (LONGEST + 1) + " b") == ["b"]
    # Two query words with one stem ask for it twice (FTS5 counts each phrase).
    assert query_stems("running runs") == ["run", "run"]
    assert query_stems("the") == ["the"]
    assert row_stems("Skies", "dying", ["Tag_One"], ["Zürich"]) == (
        '["sky", "die", "tag one", "zurich"]'
    )


@pytest.mark.postgres
async def test_the_same_store_on_both_backends_gives_the_same_hits_and_top_ten(
    tmp_path, postgres
) -> None:
    source = tmp_path / "source.sqlite"
    embedder = HashEmbedder()
    await build(source, embedder)
    await migrate(source, postgres)
    on_sqlite, on_pg = await keyword_hits(source), await keyword_hits(postgres)
    for query in QUERIES:
        assert on_pg[query] == on_sqlite[query], (query, on_pg[query], on_sqlite[query])
    assert all(on_sqlite[q] for q in QUERIES)
    # Stems, not words: "skies" is not "ski", "generously" not "general", "news" not "new".
    assert len(on_sqlite["ski"]) == 3 and len(on_sqlite["skies"]) == 1  # skiing is ski
    assert len(on_sqlite["generously"]) == 1 and len(on_sqlite["news"]) == 1
    assert await top_tens(postgres, embedder) == await top_tens(source, embedder)


def downgrade_sqlite(path: Path) -> None:
    """Put back schema 4's keyword index (FTS5's Porter over the columns) and its version."""
    db = sqlite3.connect(path)
    with db:
        for name in ("memories_ai", "memories_ad", "memories_au"):
            db.execute(f"DROP TRIGGER {name}")
        db.execute("DROP TABLE memories_fts")
        db.execute(
            "CREATE VIRTUAL TABLE memories_fts USING fts5(title, content, tags, entities, "
            "content='memories', content_rowid='seq', "
            "tokenize='porter unicode61 remove_diacritics 2')"
        )
        db.execute("INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')")
        db.execute("ALTER TABLE memories DROP COLUMN stems")
        db.execute("PRAGMA user_version = 4")
    db.close()


def downgrade_postgres(url: str) -> None:
    """Put back schema 3's keyword index (PostgreSQL's Snowball over the columns)."""
    import psycopg

    with psycopg.connect(url) as conn:
        conn.execute("DROP TRIGGER memories_rev ON memories")
        conn.execute("ALTER TABLE memories DROP COLUMN stems, DROP COLUMN tf")
        conn.execute(
            "UPDATE memories SET fts = to_tsvector('nooa_english', title || ' ' || content)"
        )
        conn.execute("DELETE FROM schema_version WHERE version > 3")


async def test_a_store_written_before_the_stems_ranks_as_a_new_one_once_opened(
    tmp_path, store_target
) -> None:
    embedder = HashEmbedder()
    fresh = tmp_path / "fresh.sqlite"
    await build(fresh, embedder)
    expected = await keyword_hits(fresh)
    if isinstance(store_target, Path):
        await copy_store(fresh, store_target)
        downgrade_sqlite(store_target)
    else:
        await migrate(fresh, store_target)
        downgrade_postgres(store_target)
    assert await keyword_hits(store_target) == expected
    store = await open_store(store_target)
    try:
        # Written after the upgrade: indexed by stems as well.
        async with store.transaction():
            await store.insert(Record(content="Skiing skies", owner=OWNER), None)
        assert len(await store.candidates("skies", EVERYONE, limit=10)) == 2
    finally:
        await store.close()
