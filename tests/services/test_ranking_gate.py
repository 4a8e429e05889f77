"""Relevance gates usage, and time and model state never fake a score (DESIGN.md §16.8-16.9).

- a hit flagged weak never ranks above one that is not, whatever importance and recency;
- a time in the future counts as now: no recency bonus, no negative age, retention ≤ 1;
- reflection's rescore never promotes what the author set;
- a recall that arrives while the model loads waits for it;
- a cosine that was never computed is shown as null, never as 1 or 0.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from datetime import datetime
from pathlib import Path

import anyio
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st
from mcp import Client
from writes_support import Cli, hash_cli, jsonl

from nooa_mcp import Memory, RecallSettings, Settings
from nooa_mcp.embeddings import HashEmbedder, WarmingEmbedder
from nooa_mcp.mcp.server import build_server


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    return hash_cli(tmp_path, monkeypatch)


# --------------------------------------------------------------------------- weak never first

RELEVANT = "The office wifi network is Nooa-Guest and its password is taped to the fridge"
QUERIES = ("office wifi", "wifi password", "what is the office wifi network called?")
IRRELEVANT = (
    "Deploy the billing service with make release from the main branch",
    "The staging database restarts at midnight every Sunday",
    "Quarterly taxes are due in April and October",
    "The CI runner has four cores and sixteen gigabytes of memory",
    "Team lunch is on Fridays at noon in the cafeteria",
    "The marketing site is built with Hugo and deployed by Netlify",
)
LADDER = ("CRITICAL", "HIGH", "MEDIUM", "LOW", "TRIVIAL")


@st.composite
def busy_stores(draw):
    """A store where irrelevant memories are important and were just used, and one is relevant."""
    chosen = draw(st.lists(st.sampled_from(IRRELEVANT), min_size=2, max_size=6, unique=True))
    return {
        "relevant_importance": draw(st.sampled_from(LADDER)),
        "relevant_first": draw(st.booleans()),
        "irrelevant": [
            (text, draw(st.sampled_from(LADDER)), draw(st.integers(0, 5))) for text in chosen
        ],
        "query": draw(st.sampled_from(QUERIES)),
        "asks": draw(st.integers(1, 4)),
    }


def weak_order(hits) -> list[bool]:
    return [bool(h.flags.weak) for h in hits]


@hsettings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(store=busy_stores())
def test_a_weak_hit_never_ranks_above_a_hit_that_is_not_weak(store: dict) -> None:
    async def body(path: Path) -> list[list[bool]]:
        async with Memory.open(path, owner="ops", embedder=HashEmbedder()) as mem:
            if store["relevant_first"]:
                await mem.author(RELEVANT, importance=store["relevant_importance"], tags=["wifi"])
            for text, importance, _ in store["irrelevant"]:
                await mem.author(text, importance=importance)
            if not store["relevant_first"]:
                await mem.author(RELEVANT, importance=store["relevant_importance"], tags=["wifi"])
            # Each irrelevant memory is used: recalled by its own words, alone.
            for text, _, uses in store["irrelevant"]:
                for _ in range(uses):
                    await mem.recall(text, k=1)
            orders = []
            # Live: every recall logs accesses, and the next one ranks with them.
            for _ in range(store["asks"]):
                result = await mem.recall(store["query"], k=5)
                assert any(h.content == RELEVANT for h in result.hits)
                orders.append(weak_order(result.hits))
            return orders

    with tempfile.TemporaryDirectory() as tmp:
        orders = anyio.run(body, Path(tmp) / "m.sqlite")
    for order in orders:
        # Non-weak hits first, then the weak ones: False sorts before True.
        assert order == sorted(order), order
        assert order[0] is False, "the wifi memory matches the query and must not be weak"


# --------------------------------------------------------------------------- future timestamps

FUTURE = "2031-05-01T10:00:00+00:00"


def test_a_memory_stamped_in_2031_gets_no_recency_bonus_and_no_impossible_age(
    cli: Cli, tmp_path: Path
) -> None:
    source = tmp_path / "skewed.jsonl"
    source.write_text(
        jsonl(
            [
                # Stamped by a clock years ahead. (A `valid_from` that far ahead would say
                # the fact holds only from then: kept, by design, until it does.)
                {"content": "The office wifi password is Blue-Falcon-77", "created_at": FUTURE},
            ]
        )
    )
    assert cli("import", str(source)).exit_code == 0
    current = cli("author", "The office wifi password is Green-Otter-12")
    assert current.exit_code == 0, current.output
    explained = cli.json("explain", "office wifi password", "--json")
    recalls = [cli.json("recall", "office wifi password", "--json") for _ in range(3)]
    by_content = {r["head"]: r for r in explained["rows"]}
    skewed = by_content["The office wifi password is Blue-Falcon-77"]
    fresh = by_content["The office wifi password is Green-Otter-12"]
    assert skewed["rec"] <= fresh["rec"], (skewed, fresh)
    for result in recalls:
        hits = {h["content"]: h for h in result["hits"]}
        skewed = hits["The office wifi password is Blue-Falcon-77"]
        fresh = hits["The office wifi password is Green-Otter-12"]
        assert skewed["components"]["rec"] <= fresh["components"]["rec"], (skewed, fresh)
        assert all(0 <= h["retention"] <= 1 for h in result["hits"])
        # Forgetting runs from the last access, which cannot be later than now.
        skewed_eta = datetime.fromisoformat(skewed["prune_eta"])
        fresh_eta = datetime.fromisoformat(fresh["prune_eta"])
        assert (skewed_eta - fresh_eta).total_seconds() <= 24 * 3600, (skewed_eta, fresh_eta)


def test_a_todo_stamped_in_2031_never_shows_a_negative_age(cli: Cli, tmp_path: Path) -> None:
    source = tmp_path / "skewed.jsonl"
    source.write_text(
        jsonl([{"content": "Renew the wifi certificate", "type": "todo", "created_at": FUTURE}])
    )
    assert cli("import", str(source)).exit_code == 0

    async def listed() -> dict:
        settings = Settings(store=cli.store, owner="")
        async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as client:
            return (await client.call_tool("todo", {"action": "list"})).structured_content

    todos = anyio.run(listed)["todos"]
    assert [t["content"] for t in todos] == ["Renew the wifi certificate"]
    assert todos[0]["age_hours"] >= 0


# --------------------------------------------------------------------------- rescore


async def _use(client: Client, content: str, importance: str, times: int) -> str:
    written = await client.call_tool(
        "memory_author", {"content": content, "importance": importance, "salience": "PIVOTAL"}
    )
    assert not written.is_error, written.content
    memory_id = written.structured_content["id"]
    for _ in range(times):
        got = await client.call_tool("memory_recall", {"query": content, "k": 1})
        assert got.structured_content["hits"][0]["id"] == memory_id
    return memory_id


async def _record(client: Client, memory_id: str) -> dict:
    return json.loads(
        (await client.read_resource(f"memory://memories/{memory_id}")).contents[0].text
    )


@pytest.mark.anyio
async def test_reflection_never_promotes_what_the_author_set(tmp_path: Path) -> None:
    settings = Settings(store=tmp_path / "m.sqlite", owner="ops")
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as client:
        high = await _use(client, "The production database password rotates often", "HIGH", 20)
        medium = await _use(client, "The billing cron job runs at five every morning", "MEDIUM", 20)
        for _ in range(2):
            report = await client.call_tool("memory_reflect", {})
            assert not report.is_error, report.content
        high_record = await _record(client, high)
        medium_record = await _record(client, medium)
        context = (await client.read_resource("memory://context")).contents[0].text
    assert (high_record["importance"], high_record["importance_label"]) == (8, "HIGH")
    assert medium_record["importance"] <= 7
    assert "CRITICAL" not in context


# --------------------------------------------------------------------------- the model loading

STORE_TEXTS = (
    "The deploy key for the billing service lives in the 1Password vault",
    "The staging database restarts at midnight every Sunday",
    "Team lunch is on Fridays at noon in the cafeteria",
)


class Gate:
    """A model load that finishes only when the test opens the gate."""

    def __init__(self) -> None:
        self.open = threading.Event()

    def embedder(self) -> WarmingEmbedder:
        inner = HashEmbedder()

        def load() -> HashEmbedder:
            self.open.wait()
            return inner

        return WarmingEmbedder(load, inner.name, inner.dim)


async def _seed(path: Path) -> None:
    async with Memory.open(path, owner="ops", embedder=HashEmbedder()) as mem:
        for text in STORE_TEXTS:
            await mem.author(text)


async def _while_loading(gate: Gate, call):
    """Start `call`, let it reach whatever it waits on, then let the model finish loading."""
    result = {}

    async def run() -> None:
        result["value"] = await call()

    try:
        with anyio.fail_after(60):  # a guard against a hang, not a timing assertion
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(run)
                await anyio.wait_all_tasks_blocked()
                gate.open.set()
    finally:
        gate.open.set()
    return result["value"]


@pytest.mark.anyio
async def test_a_recall_while_the_model_loads_answers_from_keywords_then_uses_the_model(
    tmp_path: Path,
) -> None:
    await _seed(tmp_path / "warm.sqlite")
    shutil.copy(tmp_path / "warm.sqlite", tmp_path / "ready.sqlite")
    query = "where is the billing deploy key kept?"
    async with Memory.open(tmp_path / "ready.sqlite", owner="ops", embedder=HashEmbedder()) as mem:
        ready = await mem.recall(query, k=3)
    gate = Gate()
    try:
        async with Memory.open(
            tmp_path / "warm.sqlite", owner="ops", embedder=gate.embedder()
        ) as m:
            # The model cannot finish loading before the gate opens: this answer came without it.
            early = await m.recall(query, k=3)
            gate.open.set()
            with anyio.fail_after(60):  # a guard against a hang, not a timing assertion
                await m.wait_ready()
            later = await m.recall(query, k=3)
    finally:
        gate.open.set()
    assert early.embeddings == "warming"
    assert "keyword matches only" in early.note
    assert {h.components.source for h in early.hits} == {"sparse"}
    assert [h.components.cos for h in early.hits] == [None] * len(early.hits)
    assert early.hits[0].content == STORE_TEXTS[0]
    assert later.embeddings == "ready" and "warming" not in later.note.lower()
    assert later.hits[0].components.source in ("dense", "both")
    assert later.hits[0].id == ready.hits[0].id


@pytest.mark.anyio
async def test_memory_recall_over_mcp_while_the_model_loads_answers_at_once(
    tmp_path: Path,
) -> None:
    await _seed(tmp_path / "m.sqlite")
    gate = Gate()
    settings = Settings(store=tmp_path / "m.sqlite", owner="ops")
    arguments = {"query": "billing deploy key", "k": 3}
    try:
        async with Client(build_server(settings, embedder=gate.embedder()), cache=None) as client:
            early = await client.call_tool("memory_recall", arguments)
            gate.open.set()
            later = early
            with anyio.fail_after(60):  # a guard against a hang, not a timing assertion
                while later.structured_content["embeddings"] != "ready":
                    await anyio.sleep(0.02)
                    later = await client.call_tool("memory_recall", arguments)
    finally:
        gate.open.set()
    assert not early.is_error, early.content
    reply = early.structured_content
    assert reply["embeddings"] == "warming"
    assert reply["hits"][0]["content"] == STORE_TEXTS[0]
    assert reply["hits"][0]["components"]["source"] == "sparse"
    assert "keyword matches only" in early.content[0].text
    assert later.structured_content["hits"][0]["components"]["source"] in ("dense", "both")


# --------------------------------------------------------------------------- cos never made up

WIFI = "The office wifi password is taped to the fridge"
KITCHEN = "The fridge stands in the kitchen on the second floor"


@pytest.mark.anyio
async def test_keyword_only_explain_and_recall_show_cos_as_null(tmp_path: Path) -> None:
    keyword_only = Settings(
        store=tmp_path / "m.sqlite", owner="ops", recall=RecallSettings(use_dense=False)
    )
    async with Memory.open(settings=keyword_only, embedder=HashEmbedder()) as mem:
        wifi = await mem.author(WIFI)
        kitchen = await mem.author(KITCHEN)
        await mem.link(wifi.id, kitchen.id, "related")
        explained = await mem.explain("wifi password", k=10)
        recalled = await mem.recall("wifi password", k=5)
    sources = {row.id: row.source for row in explained.rows}
    assert sources[wifi.id] in ("sparse", "both")
    assert [row.cos for row in explained.rows] == [None] * len(explained.rows)
    assert [h.components.cos for h in recalled.hits] == [None] * len(recalled.hits)
    assert all(row.rel is not None and row.rel > 0 for row in explained.rows if row.id == wifi.id)


@pytest.mark.anyio
async def test_explain_while_the_model_loads_shows_a_real_cosine_or_null(tmp_path: Path) -> None:
    await _seed(tmp_path / "m.sqlite")
    embedder = HashEmbedder()
    query = "billing deploy key"
    gate = Gate()
    async with Memory.open(tmp_path / "m.sqlite", owner="ops", embedder=gate.embedder()) as mem:
        explained = await _while_loading(gate, lambda: mem.explain(query, k=10))
    assert explained.rows
    q = embedder.embed([query])[0]
    for row in explained.rows:
        if row.cos is None:
            continue
        text = next(t for t in STORE_TEXTS if t.startswith(row.head.rstrip("…")))
        true = float(np.dot(q, embedder.embed([text])[0]))
        assert row.cos == pytest.approx(true, abs=1e-3), (row.head, row.cos, true)


@pytest.mark.anyio
async def test_explain_with_embeddings_ready_shows_every_candidates_real_cosine(
    tmp_path: Path,
) -> None:
    """The other side of null: where a cosine was computed, it is shown."""
    embedder = HashEmbedder()
    async with Memory.open(tmp_path / "m.sqlite", owner="ops", embedder=embedder) as mem:
        wifi = await mem.author(WIFI)
        kitchen = await mem.author(KITCHEN)
        await mem.link(wifi.id, kitchen.id, "related")
        explained = await mem.explain("wifi password", k=10)
    q = embedder.embed(["wifi password"])[0]
    texts = {wifi.id: WIFI, kitchen.id: KITCHEN}
    assert {row.id for row in explained.rows} == set(texts)
    for row in explained.rows:
        true = float(np.dot(q, embedder.embed([texts[row.id]])[0]))
        assert row.cos == pytest.approx(true, abs=1e-3)
