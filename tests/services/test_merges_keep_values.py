"""Merges keep every value: reflection folds two memories only when they say the same thing.

"The staging cluster has three worker nodes" then "... four worker nodes": a pass used to
archive the newer as merged into the older, and recall answered "three". Now two memories merge
only with the same content words (case, punctuation, stems and stopwords aside) and the same
values; anything else is kept, both live, and recall puts the newer first for the question they
share. Through the CLI with the real model, and the MCP tools, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from datetime import timedelta

import anyio
import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, assume, example, given, seed, settings, strategies as st
from mcp import Client
from row_reads import record_row_reads

from nooa_mcp import Memory, Settings, cli
from nooa_mcp.domain.facts import differs_in, normalise, same_statement
from nooa_mcp.domain.schema import now as utc_now
from nooa_mcp.domain.text import STOPWORDS
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp.server import build_server
from nooa_mcp.storage.keywords import stem

OWNER = "coder@laptop"


@pytest.fixture
def run(store_target, monkeypatch, minilm):
    """The console script's commands on `store_target`, with the real model (loaded once)."""
    monkeypatch.setenv("NOOA_STORE", str(store_target))
    monkeypatch.setenv("NOOA_OWNER", OWNER)
    from nooa_mcp import engine

    monkeypatch.setattr(engine, "default_embedder", lambda cache_dir=None: minilm)
    runner = CliRunner()

    def invoke(*args: str) -> dict | str:
        out = runner.invoke(cli.main, list(args), catch_exceptions=False)
        assert out.exit_code == 0, out.output
        return json.loads(out.stdout) if "--json" in args else out.stdout

    return invoke


CHANGED = [
    (
        "The staging cluster has three worker nodes",
        "The staging cluster has four worker nodes",
        "how many worker nodes does the staging cluster have?",
    ),
    (
        "The API rate limit is low for free users",
        "The API rate limit is high for free users",
        "what is the API rate limit for free users?",
    ),
]


@pytest.mark.real_model
@pytest.mark.parametrize(("old", "new", "question"), CHANGED)
def test_a_changed_word_keeps_both_and_recall_answers_the_newer_first(run, old, new, question):
    first, second, hits = _both_kept_then_recalled(run, old, new, question)
    assert [h["id"] for h in hits[:2]] == [second, first]


def _both_kept_then_recalled(run, old: str, new: str, question: str) -> tuple[str, str, list]:
    """Author both, reflect: nothing merged, nothing archived; then the recall's hits, none
    faded."""
    first = run("author", old).split()[1]
    second = run("author", new).split()[1]
    report = run("reflect", "--json")
    merge = next(s for s in report["steps"] if s["step"] == "merge")
    assert merge["applied"] == 0
    assert run("stats", "--json")["archived"] == 0
    hits = run("recall", question, "--json")["hits"]
    assert not any(h["flags"]["faded"] for h in hits)
    return first, second, hits


SWAPPED = [
    (
        "Nightly backups replicate from Frankfurt to Dublin",
        "Nightly backups replicate from Dublin to Frankfurt",
        "where do the nightly backups replicate?",
    ),
    ("The v1 API was deprecated", "The v1 API will be deprecated", "is the v1 API deprecated?"),
    ("She approves the budget", "He approves the budget", "who approves the budget?"),
    ("Alice reports to Bob", "Bob reports to Alice", "who reports to whom, Alice or Bob?"),
]


@pytest.mark.real_model
@pytest.mark.parametrize(("old", "new", "question"), SWAPPED)
def test_direction_tense_and_person_keep_both_through_reflection(run, old, new, question):
    """Close enough on the real model to be planned as a merge; the words keep them apart, so
    neither fades and recall still finds both."""
    first, second, hits = _both_kept_then_recalled(run, old, new, question)
    assert {first, second} <= {h["id"] for h in hits}


@pytest.mark.real_model
def test_a_reworded_duplicate_in_the_same_words_still_merges(run):
    kept = run("author", "The staging cluster has three worker nodes").split()[1]
    twin = run("author", "the staging cluster has: three worker-nodes.").split()[1]
    report = run("reflect", "--json")
    merge = next(s for s in report["steps"] if s["step"] == "merge")
    assert merge["applied"] == 1
    assert merge["details"] == [f"{twin[:8]} → {kept[:8]}"]
    why = run("explain", "--id", twin[:8], "--json")
    assert why["state"] == "faded"
    hits = run("recall", "how many worker nodes does the staging cluster have?", "--json")["hits"]
    # The live memory answers; the duplicate merged into it is not shown beside it.
    assert [h["id"] for h in hits] == [kept]


@pytest.mark.anyio
async def test_a_merge_keeps_the_duplicates_references_on_the_memory_it_folds_into(
    tmp_path,
) -> None:
    """The duplicate is faded and left out beside what it merged into: a reference only it
    held was no longer shown by any recall (auditor's finding); its tags already moved."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "keys.md").write_text("rotate every 90 days")
    settings = Settings(
        store=tmp_path / "m.sqlite", owner=OWNER, dedup_similarity=1.01, reference_root=tmp_path
    )
    async with Memory.open(settings=settings, embedder=OneVector()) as mem:
        kept = (await mem.author("Key rotation runbook lives in the docs folder")).id
        await mem.author(
            "key rotation runbook lives in the docs folder.",
            tags=["runbook"],
            references=["file:docs/keys.md", "url:https://wiki.example/keys"],
        )
        assert (await mem.reflect(["merge"])).steps[0].applied == 1
        view = await mem.get(kept)
        assert [r.uri for r in view.references] == [
            "file:docs/keys.md",
            "url:https://wiki.example/keys",
        ]
        assert view.tags == ["runbook"]
        (hit,) = (await mem.recall("where is the key rotation runbook", k=1)).hits
        assert (hit.id, [r.uri for r in hit.references]) == (kept, [r.uri for r in view.references])


class OneVector:
    """Every text at one point: cosine 1 for every pair, so only the words rule decides."""

    name = "one-vector"
    dim = 8

    def embed(self, texts):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        out[:, 0] = 1.0
        return out


async def _merged(target, texts: list[str], **fields) -> int:
    settings = Settings(store=target, owner=OWNER, dedup_similarity=1.01)
    async with Memory.open(settings=settings, embedder=OneVector()) as mem:
        for text in texts:
            await mem.author(text, **fields)
        report = await mem.reflect(["merge"])
        return report.steps[0].applied


VERSION = (
    "the staging cluster in the basement rack runs kubernetes with {} worker nodes and one "
    "control plane behind the firewall"
)


@pytest.mark.anyio
async def test_versions_of_one_statement_rank_newest_first_unless_the_question_names_one(
    store_target,
):
    """Three values kept apart; the oldest is the most important, and still ranks last for
    the question they share, first for the question that names its value."""
    settings = Settings(store=store_target, owner=OWNER)
    async with Client(build_server(settings, embedder=HashEmbedder())) as c:
        ids = []
        for word, importance in (("three", "HIGH"), ("four", "MEDIUM"), ("five", "MEDIUM")):
            written = await c.call_tool(
                "memory_author", {"content": VERSION.format(word), "importance": importance}
            )
            ids.append(written.structured_content["id"])
        oldest, middle, newest = ids
        shared = await c.call_tool(
            "memory_recall", {"query": "how many worker nodes does the staging cluster run"}
        )
        hits = shared.structured_content["hits"]
        assert [h["id"] for h in hits[:3]] == [newest, middle, oldest]
        assert max(hits[:3], key=lambda h: h["components"]["imp"])["id"] == oldest
        # Each older one names the newest version above it, in the reply and in its text.
        assert [h["flags"]["newer_version"] for h in hits[:3]] == [None, newest, newest]
        assert f"newer version {newest[:8]} above" in shared.content[0].text
        named = await c.call_tool(
            "memory_recall", {"query": "does the staging cluster run three worker nodes"}
        )
        by_id = {h["id"]: h["flags"] for h in named.structured_content["hits"]}
        assert named.structured_content["hits"][0]["id"] == oldest
        # The question names what only the oldest holds: it answers, unmarked.
        assert (by_id[oldest]["newer_version"], by_id[middle]["newer_version"]) == (None, newest)


@pytest.mark.anyio
async def test_a_prompt_is_shown_the_newest_version_not_the_one_it_replaced(tmp_path):
    """What a hook injects holds now: an older version below a newer one is left out."""
    async with Memory.open(tmp_path / "s.sqlite", owner=OWNER, embedder=HashEmbedder()) as mem:
        await mem.author(VERSION.format("three"))
        newest = (await mem.author(VERSION.format("four"))).id
        injected = await mem.inject_for_prompt("worker nodes of the staging cluster kubernetes")
    assert [item[0] for item in injected.memories] == [newest]


@pytest.mark.anyio
async def test_a_later_event_in_nearly_the_same_words_is_no_newer_version(store_target):
    """Two episodes are two events: the later ranks first, the earlier is not marked."""
    settings = Settings(store=store_target, owner=OWNER)
    async with Client(build_server(settings, embedder=HashEmbedder())) as c:
        ids = []
        for word in ("three", "four"):
            written = await c.call_tool(
                "memory_author", {"content": VERSION.format(word), "type": "episode"}
            )
            ids.append(written.structured_content["id"])
        shared = await c.call_tool(
            "memory_recall", {"query": "how many worker nodes does the staging cluster run"}
        )
        hits = shared.structured_content["hits"]
        assert [h["id"] for h in hits[:2]] == ids[::-1]
        assert [h["flags"]["newer_version"] for h in hits[:2]] == [None, None]


@pytest.mark.anyio
async def test_versions_read_their_words_from_the_held_postings_and_rank_as_from_rows(
    store_target, monkeypatch
):
    """Once the keyword postings are held, versions compare words without reading a row: a
    recall reads the rows of the k it returns, no more, and ranks as it does from rows."""
    settings = Settings(store=store_target, owner=OWNER)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        for word, importance in (("three", "HIGH"), ("four", "MEDIUM"), ("five", "MEDIUM")):
            await mem.author(VERSION.format(word), importance=importance)
        await mem.engine.keywords_loaded()
        reads = record_row_reads(mem.engine.store, monkeypatch)
        questions = (
            "how many worker nodes does the staging cluster run",
            "does the staging cluster run three worker nodes",
        )

        async def rankings() -> list[list[tuple[str, float]]]:
            out = []
            for question in questions:
                result = await mem.recall(question, k=2)
                out.append([(h.id, h.score) for h in result.hits])
            return out

        held = await rankings()
        assert [len(ids) for ids in reads] == [2, 2]
        reads.clear()
        monkeypatch.setattr(mem.engine.index.keywords, "mark", None)  # as before they load
        assert await rankings() == held
        assert max(len(ids) for ids in reads) >= 3  # the versions' rows, read to compare


@pytest.mark.anyio
async def test_a_title_is_part_of_what_a_memory_says(store_target):
    """Same content under another title is another statement: kept, never merged."""
    settings = Settings(store=store_target, owner=OWNER, dedup_similarity=1.01)
    async with Memory.open(settings=settings, embedder=OneVector()) as mem:
        await mem.author("three worker nodes", title="Staging cluster")
        # (the same content under any title is an exact repeat on write: "!" tells them apart)
        await mem.author("three worker nodes!", title="Production cluster")
        await mem.author("three worker nodes.", title="staging cluster")
        report = await mem.reflect(["merge"])
        assert (report.steps[0].planned, report.steps[0].applied) == (1, 1)


@pytest.mark.anyio
async def test_two_intents_in_the_same_words_are_never_folded_together(store_target):
    """Each intent carries its own trigger: folding one into the other loses a reminder."""
    settings = Settings(store=store_target, owner=OWNER)
    soon, later = utc_now() + timedelta(days=1), utc_now() + timedelta(days=2)
    async with Client(build_server(settings, embedder=HashEmbedder())) as c:
        for text, when in (("Check the deploy logs.", soon), ("check the deploy logs", later)):
            added = await c.call_tool(
                "intent", {"action": "add", "content": text, "fire_at": when.isoformat()}
            )
            assert not added.is_error, added.content
        report = await c.call_tool("memory_reflect", {})
        assert not report.is_error, report.content
        listed = await c.call_tool("intent", {"action": "list"})
        assert len(listed.structured_content["intents"]) == 2


@pytest.mark.anyio
async def test_an_older_memory_that_refines_a_newer_one_does_not_supersede_it(store_target):
    settings = Settings(store=store_target, owner=OWNER)
    async with Client(build_server(settings, embedder=HashEmbedder())) as c:
        older = await c.call_tool("memory_author", {"content": "the ferry leaves at noon"})
        newer = await c.call_tool("memory_author", {"content": "the ferry leaves at one pm"})
        old_id, new_id = older.structured_content["id"], newer.structured_content["id"]
        linked = await c.call_tool(
            "memory_update",
            {"memory_id": old_id, "links": [{"target": new_id, "relation": "refines"}]},
        )
        assert not linked.is_error, linked.content
        hits = await c.call_tool("memory_recall", {"query": "when does the ferry leave"})
        flags = {h["id"]: h["flags"]["superseded_by"] for h in hits.structured_content["hits"]}
        assert flags == {old_id: None, new_id: None}
        # The other way round, the newer supersedes the older.
        await c.call_tool(
            "memory_update",
            {"memory_id": new_id, "links": [{"target": old_id, "relation": "refines"}]},
        )
        hits = await c.call_tool("memory_recall", {"query": "when does the ferry leave"})
        flags = {h["id"]: h["flags"]["superseded_by"] for h in hits.structured_content["hits"]}
        assert flags == {old_id: new_id, new_id: None}


@pytest.mark.anyio
async def test_a_merge_whose_labels_pass_the_bound_keeps_both_and_the_pass_runs_on(store_target):
    """Two wordings of one statement with 30 tags each: folded, the anchor would hold 60 tags
    (50 at most). The merge raised "tags: 60 labels given" and stopped the whole pass, every
    pass after it too (`reflect` exited 1; link, rescore and prune never ran for the role).
    Now the two stay two memories, each with its own tags, and the pass completes."""
    settings = Settings(store=store_target, owner=OWNER, dedup_similarity=1.01)
    async with Memory.open(settings=settings, embedder=OneVector()) as mem:
        first = [f"a{i}" for i in range(30)]
        second = [f"b{i}" for i in range(30)]
        old = (await mem.author("The cache TTL is five minutes.", tags=first)).id
        new = (await mem.author("the cache TTL is five minutes", tags=second)).id
        report = await mem.reflect(now=utc_now() + timedelta(days=2))
        assert report.status == "completed"
        merge = next(s for s in report.steps if s.step == "merge")
        assert (merge.planned, merge.applied, merge.skipped) == (1, 0, 1)
        # Said why: "1 skipped" alone read as a pass that failed.
        assert merge.note.startswith("1 pair(s) left as two memories: together they hold")
        kept = {m: await mem.get(m) for m in (old, new)}
        assert [(v.archived, v.tags) for v in kept.values()] == [(False, first), (False, second)]
        # Tags that fit still merge: every label of the duplicate joins the anchor.
        third = (await mem.author("THE CACHE TTL IS FIVE MINUTES!", tags=["cache"])).id
        report = await mem.reflect(["merge"])
        assert report.steps[0].details == [f"{third[:8]} → {old[:8]}"]
        assert (await mem.get(old)).tags == [*first, "cache"]


@pytest.mark.anyio
async def test_a_merge_that_would_cut_the_duplicates_references_keeps_both(store_target):
    """15 references on one wording, 10 others on the next: folded, the anchor kept 20 and
    the duplicate's last five were cut, reached from no live memory. Now the two stay two."""
    settings = Settings(store=store_target, owner=OWNER, dedup_similarity=1.01)
    first = [f"url:https://wiki.example/a{i}" for i in range(15)]
    second = [f"url:https://wiki.example/b{i}" for i in range(10)]
    async with Memory.open(settings=settings, embedder=OneVector()) as mem:
        old = (await mem.author("The runbooks are on the wiki.", references=first)).id
        new = (await mem.author("the runbooks are on the wiki", references=second)).id
        report = await mem.reflect(["merge"])
        assert (report.steps[0].planned, report.steps[0].applied) == (1, 0)
        views = [await mem.get(m) for m in (old, new)]
        assert [(v.archived, [r.uri for r in v.references]) for v in views] == [
            (False, first),
            (False, second),
        ]


# --------------------------------------------------------------------------- the words rule

#: Content words of every kind a value can change in.
KINDS = {
    "number": ["three", "four", "seven", "twelve", "dozen"],
    "antonym": ["low", "high", "open", "closed", "fast", "slow", "on", "off"],
    "place": ["staging", "production", "berlin", "paris", "eu-west", "basement"],
    "product": ["postgres", "redis", "kafka", "nginx", "chrome", "firefox"],
    "unit": ["seconds", "minutes", "megabytes", "gigabytes", "percent", "euros"],
}
WORDS = st.sampled_from(sorted({w for words in KINDS.values() for w in words}))
PLAIN = st.text("abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=9).filter(
    lambda w: w not in STOPWORDS
)
CONTENT = st.one_of(WORDS, PLAIN)
FILLERS = ["the", "is", "for", "of", "a", "and", "with", "in"]


@st.composite
def sentences(draw) -> list[str]:
    """Content words with stopwords between them."""
    words = draw(st.lists(CONTENT, min_size=2, max_size=8))
    out = []
    for word in words:
        out += [*draw(st.lists(st.sampled_from(FILLERS), max_size=2)), word]
    return out


def _text(words: list[str]) -> str:
    return " ".join(words)


#: Small words that carry direction, time, person or relation: changing one changes a meaning.
SMALL = ["from", "to", "was", "will", "he", "she", "is", "for", "with", "in", "by", "and"]
ARTICLES = ("a", "an", "the")


@seed(20261203)
@settings(max_examples=300, deadline=None)
@given(sentences(), st.data())
@example(["the", "staging", "cluster", "has", "three", "worker", "nodes"], None)
@example(["the", "api", "rate", "limit", "is", "low", "for", "free", "users"], None)
def test_pairs_that_differ_in_one_word_are_never_the_same_statement(words, data):
    positions = [i for i, w in enumerate(words) if w not in ARTICLES]
    if data is None:  # the known cases: three → four, low → high
        i = words.index("three") if "three" in words else words.index("low")
        other = "four" if words[i] == "three" else "high"
    else:
        i = data.draw(st.sampled_from(positions))
        other = data.draw(
            st.one_of(CONTENT, st.sampled_from(SMALL)).filter(lambda w: stem(w) != stem(words[i]))
        )
    changed = [*words[:i], other, *words[i + 1 :]]
    assert not same_statement(_text(words), _text(changed))
    assert not same_statement(_text(changed), _text(words))


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (
            "Backups replicate from Frankfurt to Dublin",
            "Backups replicate from Dublin to Frankfurt",
        ),
        ("The v1 API was deprecated", "The v1 API will be deprecated"),
        ("She approves the budget", "He approves the budget"),
        ("Alice reports to Bob", "Bob reports to Alice"),
        ("The cache sits in front of the database", "The database sits in front of the cache"),
        (
            "The rate limit of the API is 100 requests per minute",
            "The API rate limit is 100 requests per minute",
        ),
    ],
)
def test_the_same_words_in_another_role_or_order_are_not_the_same_statement(first, second):
    """Direction, tense, person and order change a meaning; a merge of these would fade one
    statement for the other, so a rewording in another order is kept as a second memory."""
    assert not same_statement(first, second)
    assert not same_statement(second, first)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("We write the backend in C++.", "We write the backend in C"),
        ("Store config files in ~/data", "Store config files in /data"),
        ("Alert when latency > 500 ms", "Alert when latency < 500 ms"),
        ("The API is stable?", "The API is stable."),
        ("Ship it!", "Ship it?"),
        ("Review: 👍", "Review: 👎"),
        ("Write it in C#", "Write it in C"),
        ("The payroll job must satisfy x != y", "The payroll job must satisfy x = y"),
        ("Use !important on the banner", "Use important on the banner"),
        ("Alert when latency >= 5", "Alert when latency > 5"),
    ],
)
def test_a_sign_that_says_something_is_a_word_of_the_statement(first, second):
    """A merge now compares texts from cosine 0.80, and a tombstone the same words from 0.80:
    "C++" / "C" (0.865), "~/data" / "/data" (0.946), "?" / "!" (0.827) were the same words
    when signs were split away like commas, and a merge kept one, a write of the other was
    blocked, or revived the forgotten one in its place (re-test helper)."""
    assert not same_statement(first, second)
    assert not same_statement(second, first)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("Ship it!", "ship it."),
        ("It is a well-known fact", "It is a well known fact"),
        ('He said "yes" (twice)', "he said yes twice"),
        ("The user’s cat is Tom", "The user's cat is Tom"),
        ("Deploys are frozen… until Monday", "Deploys are frozen until Monday"),
        # Markdown, a path's closing slash, arrows written two ways (re-test helper: these
        # had become two statements with the signs).
        ("Config lives in /etc/importer/", "Config lives in /etc/importer"),
        ("Docs at https://example.com/a/", "Docs at https://example.com/a"),
        ("**Deploy** on Fridays", "Deploy on Fridays"),
        ("* Deploy on Fridays", "Deploy on Fridays"),
        ("> Deploy on Fridays", "Deploy on Fridays"),
        ("# Deploy on Fridays", "Deploy on Fridays"),
        ("Tag releases with #stable", "Tag releases with stable"),
        ("Ask @alice first", "Ask alice first"),
        ("| owner | alice |", "owner alice"),
        ("build -> test => deploy", "build → test → deploy"),
        # A full stop after a time or a date (time-passing auditor: "at 02:00." read as the
        # numbers 02 and 00, so the two never merged).
        ("The backup job runs nightly at 02:00", "The backup job runs nightly at 02:00."),
        ("Launch is on 2026-03-01", "Launch is on 2026-03-01."),
        ("Standup at 9:30 am", "Standup at 9:30 am."),
    ],
)
def test_marks_that_carry_no_meaning_leave_one_statement(first, second):
    assert same_statement(first, second)


def test_a_time_is_one_value_however_its_half_of_the_day_is_written() -> None:
    assert differs_in("Meet at 5pm", "Meet at 5 p.m.") == []
    assert differs_in("Standup at 9:30 am.", "Standup at 9:30 AM") == []
    assert differs_in("Meet at 5pm.", "Meet at 6 p.m.") == ["date"]
    assert differs_in("Runs at 02:00.", "Runs at 02:00.5") == ["number", "date"]


@seed(20261203)
@settings(max_examples=300, deadline=None)
@given(sentences(), st.data())
def test_two_words_swapped_are_not_the_same_statement(words, data):
    i, j = data.draw(
        st.lists(st.sampled_from(range(len(words))), min_size=2, max_size=2, unique=True)
    )
    assume(
        stem(words[i]) != stem(words[j]) and words[i] not in ARTICLES and words[j] not in ARTICLES
    )
    swapped = list(words)
    swapped[i], swapped[j] = words[j], words[i]
    assert not same_statement(_text(words), _text(swapped))


@st.composite
def rewordings(draw, words: list[str]) -> str:
    """The same words in the same order: case, punctuation and articles changed around them."""
    out = []
    for word in words:
        if word in ARTICLES:
            if draw(st.booleans()):
                continue
            out.append(word)
        elif word in STOPWORDS or word in FILLERS:
            out.append(word.upper() if draw(st.booleans()) else word)
        else:
            out.append(word.upper() if draw(st.booleans()) else word.capitalize())
        out.append(draw(st.sampled_from(["", ",", ":", " -", ";"])))
        out += draw(st.lists(st.sampled_from(ARTICLES), max_size=1))
    # Not "?": a question is not the statement (`test_a_sign_that_says_something_...`).
    return " ".join(out).strip() + draw(st.sampled_from(["", ".", "!"]))


@seed(20261203)
@settings(max_examples=300, deadline=None)
@given(sentences(), st.data())
@example(["the", "staging", "cluster", "has", "three", "worker", "nodes"], None)
def test_reworded_duplicates_in_the_same_words_are_the_same_statement(words, data):
    assert same_statement("the cluster's nodes", "the cluster nodes")  # a possessive's s
    assert same_statement("The deploy runs nightly.", "the DEPLOY runs, nightly")
    if data is None:
        again = "the staging cluster has: three worker-nodes."
    else:
        again = data.draw(rewordings(words))
    assert same_statement(_text(words), again)


@seed(20261203)
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sentences(), st.data())
@example(["the", "staging", "cluster", "has", "three", "worker", "nodes"], None)
def test_reflection_merges_a_rewording_and_never_a_changed_word(tmp_path_factory, words, data):
    """Through a reflection pass, with every pair at cosine 1: the words alone decide."""
    if data is None:
        changed = "The staging cluster has four worker nodes"
        again = "the staging cluster has: three worker-nodes."
    else:
        i = data.draw(st.sampled_from([i for i, w in enumerate(words) if w not in ARTICLES]))
        other = data.draw(
            st.one_of(CONTENT, st.sampled_from(SMALL)).filter(lambda w: stem(w) != stem(words[i]))
        )
        changed = _text([*words[:i], other, *words[i + 1 :]])
        again = data.draw(rewordings(words))
        assume(normalise(again) != normalise(_text(words)))  # else an exact repeat: one memory
    folder = tmp_path_factory.mktemp("merge")
    assert anyio.run(_merged, folder / "changed.sqlite", [_text(words), changed]) == 0
    assert anyio.run(_merged, folder / "again.sqlite", [_text(words), again]) == 1


async def _revived_after_supersession(target) -> tuple[list, bool]:
    settings = Settings(store=target, owner=OWNER, dedup_similarity=1.01)
    async with Memory.open(settings=settings, embedder=HashEmbedder(dim=64)) as mem:
        anchor = (await mem.author("The database is PG-15")).id
        dup = (await mem.author("The database is PG-16")).id
        await mem.update(anchor, content="The database is PG-16")
        merge = (await mem.reflect(["merge"])).steps[0]
        assert merge.details == [f"{dup[:8]} → {anchor[:8]}"]
        new = (
            await mem.author(
                "The database is PG-17 now", links=[{"target": anchor, "relation": "refines"}]
            )
        ).id
        hits = (await mem.recall("which database is it")).hits
        order = [(h.id, h.flags.superseded_by) for h in hits]
        return order, (await mem.get(dup)).archived, (anchor, dup, new)


def test_a_duplicate_merged_into_a_superseded_memory_stays_faded(tmp_path) -> None:
    """The duplicate reflection merged into a memory says what that memory says; once a newer
    memory supersedes it, recall used the duplicate (its anchor out of the comparison as
    superseded) and revived it as a live, unsuperseded fact ranked first."""
    order, archived, (anchor, dup, new) = anyio.run(
        _revived_after_supersession, tmp_path / "m.sqlite"
    )
    assert archived
    assert dup not in [i for i, _ in order]
    assert order[:2] == [(new, None), (anchor, new)]


async def _after_a_correction(target) -> tuple:
    settings = Settings(store=target, owner=OWNER, dedup_similarity=1.01)
    async with Memory.open(settings=settings, embedder=HashEmbedder(dim=64)) as mem:
        anchor = (await mem.author("The database is PG-15")).id
        dup = (await mem.author("The database is PG-16")).id
        await mem.update(anchor, content="The database is PG-16")
        await mem.reflect(["merge"])
        await mem.update(anchor, content="The database is PG-17")  # the user's correction
        asked = (await mem.recall("The database is PG-16")).hits
        shown = [(h.id, h.flags.faded) for h in asked]
        view = await mem.get(dup)
        later = [h.id for h in (await mem.recall("which database is it")).hits]
        return (anchor, dup), shown, (view.archived, view.flags.faded), later


def test_a_duplicate_merged_into_a_live_memory_is_shown_but_not_revived(tmp_path) -> None:
    """A duplicate lives on through the memory it was merged into. Asked for by its own words
    it is still found (faded), but it is not made live again: a second live copy, newer than
    its anchor, would outrank the anchor's later correction."""
    (anchor, dup), shown, state, later = anyio.run(_after_a_correction, tmp_path / "m.sqlite")
    assert (dup, True) in shown
    assert state == (True, True)
    assert later[0] == anchor


TWINS = (
    "The deploy key for the billing service rotates every 90 days",
    "the deploy key for the billing service rotates every 90 days.",
)


@pytest.mark.real_model
def test_twins_apart_only_by_punctuation_merge_and_the_correction_of_one_leads(run, minilm):
    """A final period alone put these two at cosine 0.948, under the 0.95 the merge asked for:
    they stayed two memories, linked, and the correction of the second ranked below the first,
    which nothing marked as replaced (a helper's time-passing trial). The words decide now."""
    vectors = minilm.embed(list(TWINS))
    assert float(vectors[0] @ vectors[1]) < 0.95  # the case this test is about
    first = run("author", TWINS[0]).split()[1]
    second = run("author", TWINS[1]).split()[1]
    assert first != second
    fix = run(
        "author",
        "Correction: the billing deploy key now rotates every 30 days, not 90",
        "--link",
        f"{second}:refines",
    ).split()[1]
    report = run("reflect", "--json")
    merge = next(s for s in report["steps"] if s["step"] == "merge")
    assert merge["applied"] == 1, report
    hits = run("recall", "how often does the billing deploy key rotate?", "--json")["hits"]
    ids = [h["id"] for h in hits]
    assert ids[0] == fix, ids
    assert ids[1] == first, ids
    assert hits[1]["flags"]["superseded_by"] == fix, hits[1]
    assert second not in ids or hits[ids.index(second)]["flags"]["faded"], hits
