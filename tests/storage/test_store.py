"""The SQLite store (DESIGN.md §15): pragmas, migrations, prefixes, FTS safety, refresh."""

import random
import re
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from nooa_mcp import AmbiguousId, Memory, NotFound, StoreTooNew
from nooa_mcp.domain.scope import Scope
from nooa_mcp.storage.sqlite import SCHEMA_VERSION, SQLiteStore as Store, fts_query

pytestmark = pytest.mark.anyio


async def test_a_new_store_is_wal_with_a_busy_timeout_and_the_current_version(store_path):
    store = await Store.open(store_path)
    try:
        assert await store._scalar("PRAGMA journal_mode") == "wal"
        # The store's own connection (reads apart, on the event loop's thread, wait less
        # and then go to a thread that waits this long: test_reads_on_the_loop.py).
        assert next(iter(await store._read(None, "PRAGMA busy_timeout", ())))[0] >= 5000
        assert await store._scalar("PRAGMA user_version") == SCHEMA_VERSION == 7
        tables = {r[0] for r in await store._rows("SELECT name FROM sqlite_master")}
        assert {"memories", "edges", "accesses", "maintenance_log", "tombstones"} <= tables
        assert "memories_fts" in tables
    finally:
        await store.close()


async def test_a_file_from_a_newer_version_is_refused_and_left_untouched(store_path):
    await (await Store.open(store_path)).close()  # create it
    conn = sqlite3.connect(store_path)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    before = store_path.read_bytes()
    with pytest.raises(StoreTooNew) as info:
        await Store.open(store_path)
    assert info.value.found == 99
    assert "Upgrade" in str(info.value)
    assert store_path.read_bytes() == before


async def test_reopening_keeps_everything(store_path, embedder):
    async with Memory.open(store_path, owner="a", embedder=embedder) as mem:
        written = await mem.author("persist me across opens")
    async with Memory.open(store_path, owner="a", embedder=embedder) as mem:
        assert (await mem.get(written.id)).content == "persist me across opens"


async def test_prefixes_of_six_or_more_characters_resolve(mem):
    written = await mem.author("prefix target")
    assert (await mem.get(written.id[:8])).id == written.id
    assert (await mem.get(written.id[:6].upper())).id == written.id
    with pytest.raises(NotFound):
        await mem.get(written.id[:5])


async def test_an_ambiguous_prefix_lists_the_candidates(mem):
    # Two ids sharing their first 7 characters, written straight into the store.
    first = await mem.author("first of two")
    second = await mem.author("second of two")
    async with mem.engine.store.transaction():
        await mem.engine.store.conn.execute(
            "UPDATE memories SET id = ? WHERE id = ?", ("abcdef1" + "0" * 25, first.id)
        )
        await mem.engine.store.conn.execute(
            "UPDATE memories SET id = ? WHERE id = ?", ("abcdef1" + "1" * 25, second.id)
        )
    with pytest.raises(AmbiguousId) as info:
        await mem.get("abcdef1")
    assert len(info.value.candidates) == 2
    assert "more characters" in str(info.value)


NASTY_FACT = "he said hi near the start of the secret title"
#: FTS5 syntax and odd text from users, and whether the fact above must be found: each word of
#: the text is searched as a plain word (operators and quotes included), never as syntax.
NASTY = [
    ('he said "hi', True),
    ("NEAR(a b)", True),  # "near" is a word of the fact
    ("a AND OR NOT b", False),
    ("*", False),
    ("title:secret", True),
    ("^start", True),
    ("(((", False),
    ("x - y + z", False),
    ("''''", False),
    ("col:val OR", False),
    ("😀 emoji", False),
    ("\u0000null", False),
    ("", False),
    ("   ", False),
    ("SECRET*", True),
    ('"start of"', True),
]


@pytest.mark.parametrize(("text", "found"), NASTY)
async def test_fts_queries_from_user_text_never_raise_and_match_words(mem, text, found):
    fact = (await mem.author(NASTY_FACT)).id
    await mem.author("an unrelated line about gardening")
    hits = await mem.engine.store.candidates(text, Scope(None), limit=10)
    assert [h.id for h in hits] == ([fact] if found else [])
    assert all(h.bm25 is not None and h.bm25 > 0 for h in hits)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(max_size=80))
def test_fts_query_quotes_every_term(text):
    query = fts_query(text)
    if query is not None:
        for term in query.split(" OR "):
            assert term.startswith('"') and term.endswith('"')
            assert '"' not in term[1:-1]


async def test_fts_search_survives_generated_text(mem):
    """Random strings of FTS5 operators, quotes, accents, CJK and emoji: no query raises, a
    hit always shares a word with the query, and a query holding the word "ab" finds it."""
    ab = (await mem.author("ab")).id
    other = (await mem.author("zz")).id
    rng = random.Random(3)
    alphabet = 'ab "*():^-+NEARANDOR\u00e9\u4e2d\U0001f600'
    found = 0
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        hits = {h.id for h in await mem.engine.store.candidates(text, Scope(None), limit=5)}
        assert other not in hits, text
        # A CJK character is a word of its own (storage.keywords): "ab中" holds "ab".
        words = {w.lower() for w in re.findall(r"\w+", text.replace("\u4e2d", " "))}
        assert (ab in hits) == ("ab" in words), text
        found += ab in hits
    assert found >= 5  # seed 3 makes the word 6 times: the positive side is exercised


async def test_a_second_connection_sees_new_memories_through_data_version(store_path, embedder):
    async with (
        Memory.open(store_path, owner="a@one", embedder=embedder) as first,
        Memory.open(store_path, owner="a@two", embedder=embedder) as second,
    ):
        await second.recall("anything at all")
        before = second.engine.index.size
        written = await first.author("zebra crossings on the moon")
        result = await second.recall("zebra crossings moon")
        assert second.engine.index.size == before + 1
        assert result.hits[0].id == written.id
        assert result.hits[0].components.source == "both"


async def test_a_store_written_with_another_model_is_re_embedded_on_first_use(store_path):
    from nooa_mcp.embeddings import HashEmbedder

    async with Memory.open(store_path, owner="a", embedder=HashEmbedder(dim=32)) as small:
        written = (await small.author("migrating vectors between models")).id
    async with Memory.open(store_path, owner="a", embedder=HashEmbedder(dim=64)) as big:
        result = await big.recall("migrating vectors between models")
        assert result.hits[0].id == written
        assert result.hits[0].components.source == "both"
        assert await big.engine.store.get_meta("embedder") == "hash-64:64"
        blob = await big.engine.store._scalar("SELECT embedding FROM memories")
        assert len(blob) == 64 * 4
