"""The archive as a tier recall reaches: faded memories come back for a query they answer.

Reflection archives what nobody uses (prune) and what another memory already says (merge); that
memory has *faded*. Recall still returns it when it is relevant, flagged `faded` and below live
memories of similar relevance, and that recall is a use: the memory is live again. What a user
forgot on purpose never comes back. Driven through the MCP tools and the CLI, on SQLite and
PostgreSQL; a year and more passes through `reflect(now=...)`.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client

from nooa_mcp import Memory, Settings, cli
from nooa_mcp.domain.schema import now as utc_now
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp.server import build_server

OWNER = "coder@laptop"
DAUGHTER = "Maria's daughter is called Lena"
QUESTION = "what is Maria's daughter called?"
#: Skills are never pruned: they stay live while the rest of the store fades.
SKILL = "Restart the fax daemon with systemctl restart faxd"
LATER = timedelta(days=730)


def settings_for(target: Path | str) -> Settings:
    return Settings(store=target, owner=OWNER)


async def prune_later(target: Path | str, *specs: dict) -> list[str]:
    """Write `specs`, then run the prune step two years on: every unused memory fades."""
    async with Memory.open(settings=settings_for(target), embedder=HashEmbedder()) as mem:
        ids = [r.id for r in await mem.author_many(list(specs))]
        report = await mem.reflect(["prune"], now=utc_now() + LATER)
        assert report.steps[0].applied == sum(1 for s in specs if s.get("type") != "skill")
    return ids


async def call(client: Client, tool: str, **args) -> dict:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    return result.structured_content


def cli_runner(target: Path | str, monkeypatch) -> callable:
    monkeypatch.setenv("NOOA_STORE", str(target))
    monkeypatch.setenv("NOOA_OWNER", OWNER)
    from nooa_mcp import engine

    monkeypatch.setattr(engine, "default_embedder", lambda cache_dir=None: HashEmbedder())
    runner = CliRunner()

    def invoke(*args: str) -> str:
        out = runner.invoke(cli.main, list(args), catch_exceptions=False)
        assert out.exit_code == 0, out.output
        return out.stdout

    return invoke


def test_a_pruned_memory_answers_its_question_flagged_faded_and_lives_again(
    store_target, monkeypatch
) -> None:
    daughter, _ = anyio.run(
        prune_later, store_target, {"content": DAUGHTER}, {"content": SKILL, "type": "skill"}
    )
    run = cli_runner(store_target, monkeypatch)
    assert json.loads(run("stats", "--json"))["archived"] == 1
    # Explain is a dry run: it shows the faded state and changes nothing.
    why = json.loads(run("explain", QUESTION, "--id", daughter[:8], "--json"))
    assert why["state"] == "faded" and why["why_not"]["in_top_k"] is True
    assert "faded" in why["why_not"]["reason"]
    dry = json.loads(run("explain", QUESTION, "--json"))
    assert next((r["id"], r["flags"]["faded"]) for r in dry["rows"]) == (daughter, True)
    assert json.loads(run("stats", "--json"))["archived"] == 1

    table = run("recall", QUESTION)
    first = table.splitlines()[2]
    assert daughter[:8] in first and "faded" in first
    assert "live again" in table
    assert "Nothing stored matches" not in table
    # The recall was a use: live again, its tombstone lifted, a base-level access logged.
    assert json.loads(run("stats", "--json"))["archived"] == 0
    history = json.loads(run("explain", "--id", daughter[:8], "--json"))
    assert history["state"] == "live"
    assert history["accesses"][0]["channel"] == "recalled"
    again = json.loads(run("recall", QUESTION, "--json"))
    assert again["hits"][0]["id"] == daughter and again["hits"][0]["flags"]["faded"] is False
    assert "live again" not in again["note"]


@pytest.mark.anyio
async def test_a_granted_readers_recall_leaves_the_owners_faded_memory_faded(
    store_target,
) -> None:
    """A read grant never changes the owner's memories (DESIGN.md §3.2): another role's
    recall that returns a faded memory shows it, logs the read, and leaves it faded; the
    owner's own recall is a use and brings it back."""
    daughter, _ = await prune_later(
        store_target, {"content": DAUGHTER}, {"content": SKILL, "type": "skill"}
    )
    reviewer = Settings(store=store_target, owner="reviewer@desk", read=["coder"])
    async with Client(build_server(reviewer, embedder=HashEmbedder())) as c:
        seen = await call(c, "memory_recall", query=QUESTION, scope="coder")
    assert seen["hits"][0]["id"] == daughter and seen["hits"][0]["flags"]["faded"] is True
    assert "live again" not in seen["note"]
    assert "1 result(s) are faded memories of another role: they stay faded" in seen["note"]
    async with Client(build_server(reviewer, embedder=HashEmbedder())) as c:
        why = await call(c, "memory_explain", query=QUESTION, memory_id=daughter, scope="coder")
    assert "shows it and leaves it faded (it is another role's" in why["why_not"]["reason"]
    async with Memory.open(settings=settings_for(store_target), embedder=HashEmbedder()) as mem:
        assert (await mem.stats()).archived == 1
        view = await mem.get(daughter)
        assert view.archived and view.flags.faded
        history = await mem.explain(memory_id=daughter)
        # The granted reader's use is logged, not named: coder holds no grant to read it.
        newest = history.accesses[0]
        assert (newest.channel.value, newest.reader_owner, newest.score) == ("recalled", "", None)
    async with Client(build_server(settings_for(store_target), embedder=HashEmbedder())) as c:
        own = await call(c, "memory_recall", query=QUESTION)
    assert own["hits"][0]["id"] == daughter and "live again" in own["note"]
    async with Memory.open(settings=settings_for(store_target), embedder=HashEmbedder()) as mem:
        assert (await mem.stats()).archived == 0


@pytest.mark.anyio
async def test_a_faded_memory_ranks_below_a_live_one_of_similar_relevance(store_target) -> None:
    # The faded one is (a little) more relevant: only the faded tier's penalty puts it second.
    faded, live = await prune_later(
        store_target,
        {"content": "harbor lantern blue"},
        {"content": "harbor lantern green", "type": "skill"},
    )
    async with Client(build_server(settings_for(store_target), embedder=HashEmbedder())) as c:
        dry = await call(c, "memory_explain", query="harbor lantern colour")
        rel = {r["id"]: r["rel"] for r in dry["rows"]}
        assert rel[live] < rel[faded] < rel[live] + 0.1
        result = await call(c, "memory_recall", query="harbor lantern colour")
        assert [(h["id"], h["flags"]["faded"]) for h in result["hits"]] == [
            (live, False),
            (faded, True),
        ]
        text = (await c.call_tool("memory_recall", {"query": "lantern blue harbor"})).content
        # Named by its own word, it is the more relevant by far: first, no longer faded.
        assert "FADED" not in text[0].text.splitlines()[1]


@pytest.mark.anyio
async def test_a_much_more_relevant_faded_memory_ranks_above_a_live_one(store_target) -> None:
    faded, _live = await prune_later(
        store_target,
        {"content": DAUGHTER},
        {"content": "Maria restarts the fax daemon on Mondays", "type": "skill"},
    )
    async with Client(build_server(settings_for(store_target), embedder=HashEmbedder())) as c:
        result = await call(c, "memory_recall", query=QUESTION)
        assert result["hits"][0]["id"] == faded and result["hits"][0]["flags"]["faded"]


@pytest.mark.anyio
async def test_a_weakly_related_faded_memory_stays_faded_unless_asked_for(store_target) -> None:
    faded, live = await prune_later(
        store_target,
        {"content": "the quartz meadow ledger of the old mill"},
        {"content": "harbor lantern ferry schedule notes", "type": "skill"},
    )
    async with Client(build_server(settings_for(store_target), embedder=HashEmbedder())) as c:
        plain = await call(c, "memory_recall", query="harbor lantern ferry schedule")
        assert [h["id"] for h in plain["hits"]] == [live]
        wide = await call(
            c, "memory_recall", query="harbor lantern ferry schedule", include_archived=True
        )
        assert [h["id"] for h in wide["hits"]] == [live, faded]
        assert wide["hits"][1]["flags"] == {
            "weak": True,
            "stale": False,
            "holds_from": None,
            "superseded_by": None,
            "newer_version": None,
            "faded": True,
        }
        # Shown, not used: a weak hit revives nothing.
        await call(c, "memory_explain", memory_id=faded)
        assert (await call(c, "memory_explain", memory_id=faded))["state"] == "faded"


@pytest.mark.anyio
async def test_what_a_user_forgot_never_comes_back(store_target) -> None:
    async with Client(build_server(settings_for(store_target), embedder=HashEmbedder())) as c:
        wifi = (await call(c, "memory_author", content="The office wifi password is hunter2"))["id"]
        await call(c, "memory_update", memory_id=wifi, forget=True)
        for wide in (False, True):
            result = await call(
                c, "memory_recall", query="office wifi password", include_archived=wide
            )
            assert result["hits"] == []
            assert result["note"].startswith("Nothing stored matches this query.")
        dry = await call(c, "memory_explain", query="office wifi password")
        assert dry["rows"] == []
        why = await call(c, "memory_explain", query="office wifi password", memory_id=wifi)
        assert why["state"] == "forgotten" and why["why_not"]["in_top_k"] is False
        assert "forgotten by its user" in why["why_not"]["reason"]


@pytest.mark.anyio
async def test_writing_a_faded_value_again_revives_it_and_a_forgotten_one_is_refused(
    store_target,
) -> None:
    daughter, _ = await prune_later(
        store_target, {"content": DAUGHTER}, {"content": SKILL, "type": "skill"}
    )
    async with Client(build_server(settings_for(store_target), embedder=HashEmbedder())) as c:
        again = await call(c, "memory_author", content=DAUGHTER)
        assert (again["id"], again["status"]) == (daughter, "revived")
        assert (await call(c, "memory_explain", memory_id=daughter))["state"] == "live"
        await call(c, "memory_update", memory_id=daughter, forget=True)
        refused = await call(c, "memory_author", content=DAUGHTER)
        assert (refused["id"], refused["status"]) == (daughter, "blocked-by-tombstone")


@pytest.mark.anyio
async def test_forgetting_a_faded_memory_takes_it_out_of_reach(store_target) -> None:
    daughter, _ = await prune_later(
        store_target, {"content": DAUGHTER}, {"content": SKILL, "type": "skill"}
    )
    async with Client(build_server(settings_for(store_target), embedder=HashEmbedder())) as c:
        await call(c, "memory_update", memory_id=daughter, forget=True)
        assert (await call(c, "memory_recall", query=QUESTION))["hits"] == []
        assert (await call(c, "memory_explain", memory_id=daughter))["state"] == "forgotten"


@pytest.mark.anyio
async def test_a_duplicate_merged_into_a_forgotten_memory_is_forgotten_with_it(
    store_target,
) -> None:
    settings = settings_for(store_target).model_copy(update={"dedup_similarity": 1.01})
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        kept = (await mem.author("the ferry leaves pier nine at noon")).id
        twin = (await mem.author("The ferry leaves pier nine, at noon.")).id
        merged = await mem.reflect(["merge"])
        assert merged.steps[0].applied == 1
        assert (await mem.explain(memory_id=twin)).state == "faded"
    async with Client(build_server(settings, embedder=HashEmbedder())) as c:
        hits = (await call(c, "memory_recall", query="when does the ferry leave pier nine"))["hits"]
        # The live memory answers; its merged duplicate, saying the same, is left out.
        assert [h["id"] for h in hits] == [kept]
        await call(c, "memory_update", memory_id=kept, forget=True)
        assert (await call(c, "memory_recall", query="ferry pier nine noon"))["hits"] == []
        assert (await call(c, "memory_explain", memory_id=twin))["state"] == "forgotten"


def _downgrade(target: Path | str) -> None:
    """Make the store look as a release before the faded flag wrote it."""
    if isinstance(target, Path):
        with sqlite3.connect(target) as db:
            db.execute("ALTER TABLE memories DROP COLUMN faded")
            db.execute("PRAGMA user_version = 3")
        return
    import psycopg

    with psycopg.connect(target) as conn:
        conn.execute("ALTER TABLE memories DROP COLUMN faded CASCADE")
        conn.execute("DELETE FROM schema_version WHERE version > 2")


@pytest.mark.anyio
async def test_an_older_store_keeps_its_forgets_forgotten_and_its_prunes_faded(
    store_target,
) -> None:
    pruned, forgotten, _ = await prune_later(
        store_target,
        {"content": DAUGHTER},
        {"content": "Maria's daughter was called Lena Marie"},
        {"content": SKILL, "type": "skill"},
    )
    async with Memory.open(settings=settings_for(store_target), embedder=HashEmbedder()) as mem:
        await mem.forget(forgotten)
    _downgrade(store_target)
    async with Client(build_server(settings_for(store_target), embedder=HashEmbedder())) as c:
        assert (await call(c, "memory_explain", memory_id=pruned))["state"] == "faded"
        assert (await call(c, "memory_explain", memory_id=forgotten))["state"] == "forgotten"
        hits = (await call(c, "memory_recall", query=QUESTION))["hits"]
        assert [(h["id"], h["flags"]["faded"]) for h in hits] == [(pruned, True)]


@pytest.mark.anyio
async def test_spreading_never_reaches_a_faded_memory(store_target) -> None:
    settings = settings_for(store_target)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        cause, effect = [
            r.id
            for r in await mem.author_many(
                [
                    {"content": "the disk filled up on the build server", "type": "skill"},
                    {"content": "nightly artefacts were not uploaded"},
                ]
            )
        ]
        await mem.link(cause, effect, "causes", "STRONG")
        found = await mem.recall("disk filled up build server")
        assert effect in {h.id for h in found.hits}  # reached by spreading while live
        await mem.reflect(["prune"], now=utc_now() + LATER)
    async with Client(build_server(settings, embedder=HashEmbedder())) as c:
        hits = (await call(c, "memory_recall", query="disk filled up build server"))["hits"]
        assert [h["id"] for h in hits] == [cause]


def test_the_archive_tier_keeps_the_default_ranking_when_nothing_is_archived(tmp_path) -> None:
    """With no archived row, the faded tier adds no candidate and moves no score."""

    async def scores(n_faded: int) -> list[tuple[str, float]]:
        settings = Settings(store=tmp_path / f"{n_faded}.sqlite", owner=OWNER)
        settings.recall.n_faded = n_faded
        async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
            for text in ("harbor lantern blue", "lantern ferry", "ferry pier nine noon"):
                await mem.author(text)
            result = await mem.explain("harbor lantern ferry")
            return [(r.head, r.score) for r in result.rows]

    assert anyio.run(scores, 10) == anyio.run(scores, 0)


@pytest.mark.processes
def test_a_prompt_hook_brings_in_a_relevant_faded_memory_and_session_start_does_not(
    tmp_path,
) -> None:
    """The hook's keyword path (no server): a faded memory the prompt is about is shown,
    noted as faded, and stays faded (shown unasked is not a use); session start leaves it."""
    from hooks_support import hook_env, recorded, run_hook

    project = tmp_path / "billing"
    (project / ".git").mkdir(parents=True)
    store = tmp_path / "memory.sqlite"
    invoices, _ = anyio.run(
        prune_later,
        store,
        {
            "content": "The invoice export writes CSV files to the finance bucket",
            "tags": ["billing"],
        },
        {"content": SKILL, "type": "skill"},
    )
    env = hook_env(tmp_path)
    prompt = recorded(
        "user_prompt", project, prompt="Where does the invoice export write its CSV files?"
    )
    answer = run_hook("user-prompt", prompt, env, "--store", str(store), "--owner", OWNER)
    assert answer.code == 0, answer.stderr
    assert "finance bucket" in answer.context and "faded" in answer.context
    start = run_hook(
        "session-start",
        recorded("session_start", project),
        env,
        "--store",
        str(store),
        "--owner",
        OWNER,
    )
    assert "finance bucket" not in (start.context if start.stdout.strip() else "")

    async def state() -> str:
        async with Memory.open(settings=settings_for(store), embedder=HashEmbedder()) as mem:
            return (await mem.explain(memory_id=invoices)).state

    assert anyio.run(state) == "faded"


def test_only_reflections_reasons_fade_and_every_other_archive_is_a_forget() -> None:
    from nooa_mcp.domain.archive import (
        merged_anchor,
        merged_reason,
        pruned_reason,
        reason_fades,
        state,
        superseded_reason,
    )

    assert merged_reason("0123456789abcdef") == "merged into 01234567"
    assert pruned_reason(0.00412, 0.02) == "pruned: retention 0.0041 < 0.02"
    assert superseded_reason("fedcba9876543210") == "superseded by fedcba98 (reconcile)"
    for reason in (
        merged_reason("ab" * 16),
        pruned_reason(0.01, 0.02),
        superseded_reason("c" * 32),
    ):
        assert reason_fades(reason)
    for reason in ("forgotten", "intent cancelled", "archived before export", "", None):
        assert not reason_fades(reason)
    assert not reason_fades("Merged into 01234567")  # only the exact words reflection writes
    assert merged_anchor(merged_reason("0123456789abcdef")) == "01234567"
    assert [merged_anchor(r) for r in (pruned_reason(0.01, 0.02), "forgotten", None)] == [None] * 3
    assert [state(False, False), state(False, True), state(True, True), state(True, False)] == [
        "live",
        "live",
        "faded",
        "forgotten",
    ]


@pytest.mark.anyio
async def test_a_recall_never_revives_what_its_user_forgot_meanwhile(store_target) -> None:
    """The revival a recall makes checks the row as it is now: a memory forgotten between
    the ranking and the revival stays forgotten."""
    from nooa_mcp.services.recall import revive

    async with Memory.open(settings=settings_for(store_target), embedder=HashEmbedder()) as mem:
        gone = (await mem.author(DAUGHTER)).id
        await mem.forget(gone)
        await revive(mem._caller, [gone])
        assert (await mem.explain(memory_id=gone)).state == "forgotten"


@pytest.mark.anyio
async def test_a_recall_whose_revival_conflicts_every_time_still_answers(
    store_target, monkeypatch
) -> None:
    """Other servers rewriting the rows a recall used can abort its revival on every attempt:
    the recall failed as a whole, though what its reader asked for was ranked. It answers,
    the memory stays faded and the note says why."""
    from nooa_mcp.errors import StoreConflict
    from nooa_mcp.services import recall as recall_service

    daughter, _ = await prune_later(
        store_target, {"content": DAUGHTER}, {"content": SKILL, "type": "skill"}
    )
    async with Memory.open(settings=settings_for(store_target), embedder=HashEmbedder()) as mem:

        async def conflicts(caller, ids):
            raise StoreConflict("test store", "aborted for a concurrent transaction.", "Retry.")

        monkeypatch.setattr(recall_service, "revive", conflicts)
        seen = await mem.recall(QUESTION)
        monkeypatch.undo()
        assert seen.hits[0].id == daughter and seen.hits[0].flags.faded
        assert "kept them from being made live again" in seen.note
        assert "live again." not in seen.note  # not said to be live
        assert (await mem.explain(memory_id=daughter)).state == "faded"
        again = await mem.recall(QUESTION)  # the next use revives it
        assert "live again" in again.note
        assert (await mem.explain(memory_id=daughter)).state == "live"
