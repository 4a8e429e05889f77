"""Chinese, Japanese and Korean text is found by its words (storage.keywords, DESIGN §15).

Those scripts put no spaces between words, so a run of their characters was one "word": a
memory "東京の会議は月曜日です" was met only by that whole run, never by "東京 会議". A run
is now indexed as its overlapping character bigrams, on both backends, and a store written
before (its rows holding whole runs) is stemmed anew when opened.
"""

from __future__ import annotations

import json
import re
import sqlite3
import unicodedata
from pathlib import Path

import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.domain.cues import cue_keywords, keywords_match
from nooa_mcp.domain.injection import content_words, shared_words
from nooa_mcp.domain.scope import Scope
from nooa_mcp.domain.text import stem
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.storage import open_store
from nooa_mcp.storage.keywords import query_stems, words

pytestmark = pytest.mark.anyio

EVERYONE = Scope(roles=None)
OWNER = "coder@laptop"

TOKYO_MEETING = "東京の会議は月曜日です"
SEOUL_MEETING = "회의는 월요일 서울에서 합니다"
MEMORIES = [
    TOKYO_MEETING,
    "京都で会議の資料を作った",  # 会議 without 東京
    "東京タワーに行った",  # 東京 without 会議
    "大阪の天気は晴れです",
    SEOUL_MEETING,
    "서울 여행은 즐거웠다",  # 서울 without 회의
    "회의실이 너무 좁다",  # 회의 without 서울
    "The quarterly meeting in Tokyo is on Monday.",
    "We deploy the billing service every Friday.",
]


def test_a_cjk_run_is_cut_into_bigrams_and_other_text_as_before() -> None:
    assert words(TOKYO_MEETING) == [
        "東京", "京の", "の会", "会議", "議は", "は月", "月曜", "曜日", "日で", "です"
    ]  # fmt: skip
    assert query_stems("東京 会議") == ["東京", "会議"]
    assert words("東") == ["東"]
    # Hangul in syllables (NFKD alone would leave jamo), kana with their voicing marks.
    assert words("회의는") == ["회의", "의는"]
    assert words("がっこう ｶﾞｯｺｳ") == ["がっ", "っこ", "こう", "ガッ", "ッコ", "コウ"]
    # Letters of other scripts beside a run stay words.
    assert words("iPhone買った Zürich") == ["iphone", "買っ", "った", "zurich"]
    # A long run is indexed (a run of 101 characters was dropped as a blob), and a query's
    # bigrams count against its 32 terms.
    assert len(words("会" * 150)) == 149
    assert len(query_stems("東京の会議は月曜日です" * 10)) == 32


def best(hits: list[tuple[str, float]]) -> str:
    """The id of the best keyword hit (hits come in no order; the higher score is better)."""
    return max(hits, key=lambda hit: hit[1])[0]


async def ids_by_text(mem: Memory) -> dict[str, str]:
    return {text: (await mem.author(text)).id for text in MEMORIES}


async def test_a_cjk_memory_is_found_first_by_two_of_its_words(store_target) -> None:
    settings = Settings(store=store_target, owner=OWNER)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        ids = await ids_by_text(mem)
        for query, wanted in (("東京 会議", TOKYO_MEETING), ("서울 회의", SEOUL_MEETING)):
            rows = (await mem.explain(query, k=5)).rows
            assert rows[0].id == ids[wanted], query
            hits = (await mem.recall(query)).hits
            assert hits[0].id == ids[wanted], query
    store = await open_store(store_target)
    try:
        found = await store.keyword_hits("東京 会議", EVERYONE, limit=10)
        assert best(found) == ids[TOKYO_MEETING]  # both words: the best BM25
        assert len(found) == 3  # and each row holding one of them
    finally:
        await store.close()


def old_stems(title: str, content: str, tags: list[str], entities: list[str]) -> str:
    """`row_stems` as schema 6 (SQLite) and 7 (PostgreSQL) wrote it: a CJK run one word."""

    def cut(text: str) -> str:
        folded = unicodedata.normalize("NFKD", text.lower())
        folded = "".join(c for c in folded if not unicodedata.combining(c)).lower()
        return " ".join(stem(w) for w in re.findall(r"[^\W_]+", folded) if len(w) <= 100)

    return json.dumps(
        [cut(title), cut(content), cut(" ".join(tags)), cut(" ".join(entities))],
        ensure_ascii=False,
    )


def set_back(target) -> None:
    """Give every row the stems the previous schema wrote, and put its version back."""
    if isinstance(target, Path):
        db = sqlite3.connect(target)
        with db:
            rows = db.execute("SELECT seq, title, content, tags, entities FROM memories")
            for seq, title, content, tags, entities in rows.fetchall():
                stems = old_stems(title, content, json.loads(tags), json.loads(entities))
                db.execute("UPDATE memories SET stems = ? WHERE seq = ?", (stems, seq))
            db.execute("PRAGMA user_version = 6")
        db.close()
        return
    import psycopg

    with psycopg.connect(target) as conn:
        rows = conn.execute("SELECT seq, title, content, tags::text, entities::text FROM memories")
        for seq, title, content, tags, entities in rows.fetchall():
            stems = old_stems(title, content, json.loads(tags), json.loads(entities))
            conn.execute("UPDATE memories SET stems = %s WHERE seq = %s", (stems, seq))
        conn.execute("DELETE FROM schema_version WHERE version > 7")


async def test_a_store_written_before_the_bigrams_finds_cjk_once_opened(store_target) -> None:
    settings = Settings(store=store_target, owner=OWNER)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        ids = await ids_by_text(mem)
    store = await open_store(store_target)
    try:
        english = await store.keyword_hits("meeting Tokyo Monday", EVERYONE, limit=10)
    finally:
        await store.close()
    set_back(store_target)
    if isinstance(store_target, Path):  # as the previous release left it: no CJK word met
        db = sqlite3.connect(store_target)
        hits = db.execute(
            "SELECT count(*) FROM memories_fts WHERE memories_fts MATCH '\"会議\"'"
        ).fetchone()
        db.close()
        assert hits == (0,)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        # The held postings, loaded after the upgrade, hold the bigrams too.
        assert (await mem.explain("東京 会議", k=5)).rows[0].id == ids[TOKYO_MEETING]
        assert (await mem.recall("서울 회의")).hits[0].id == ids[SEOUL_MEETING]
    store = await open_store(store_target)
    try:
        found = await store.keyword_hits("東京 会議", EVERYONE, limit=10)
        assert best(found) == ids[TOKYO_MEETING] and len(found) == 3
        # English rows kept their stems: the same hits with the same BM25.
        after = await store.keyword_hits("meeting Tokyo Monday", EVERYONE, limit=10)
        assert sorted(after) == sorted(english) and len(english) == 1
    finally:
        await store.close()


def test_a_cjk_cue_fires_on_a_cjk_message_and_injection_sees_shared_words() -> None:
    assert cue_keywords("東京 会議") == {"東京", "会議"}
    assert keywords_match("東京 会議", "明日は東京で会議があります")
    assert not keywords_match("東京 会議", "明日は大阪で会議があります")
    assert keywords_match("会議", "会議室を予約して")
    assert keywords_match("東", "東京に行く")  # one character: inside a bigram
    assert keywords_match("서울 회의", "내일 서울에서 회의가 있어요")
    prompt = content_words("東京の会議はいつ?")
    assert {"東京", "会議"} <= shared_words(prompt, content_words(TOKYO_MEETING))
    # English as before.
    assert keywords_match("deploy billing", "we are deploying the billing service")
    assert content_words("Deploy the billing service") == {"deploy", "billing", "service"}


def test_a_cjk_label_is_a_cue_word_a_cjk_query_names() -> None:
    from nooa_mcp.domain.schema import cue_set
    from nooa_mcp.domain.text import tokens

    labels = cue_set(["会議"], ["東京"], "")
    assert labels == {"会議", "東京"}
    assert tokens("東京の会議はいつ") & labels == {"会議", "東京"}
    assert cue_set(["서울 회의"], [], "") <= tokens("서울에서 회의")
    # English as before.
    assert cue_set(["Work-Trip"], ["Caroline's"], "") == {"work-trip", "caroline's"}
    assert tokens("Caroline's work-trip to the Alps") == {"caroline's", "work-trip", "alps"}
