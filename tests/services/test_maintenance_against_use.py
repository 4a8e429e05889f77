"""Forgetting tested against use: what maintenance must do as time passes, and must never do.

Each test moves the clock (time-machine) through the MCP tools or the Memory facade, on SQLite
and PostgreSQL, and fails on a plausible bug in the rule it names:

- a memory used often outlives one used once, and a use of a faded memory revives it (prune
  reading the wrong time, or a use that does not count);
- base-level sums the newest uses exactly (keeping the oldest instead makes a memory used all
  year look unused) and counts uses inside the time grain once (massed repetition is not
  spaced practice);
- reflection never folds two intents together, nor prunes one (a reminder would be lost: an
  archived intent never fires, and one set for next year goes unused until then);
- rescore never moves what the author set HIGH below the prune guard;
- prune re-checks each item when it applies it: a memory recalled or raised since the plan
  stays;
- only a newer memory supersedes the one it refines;
- a correction outlives what it corrects: prune keeps it while the memory it refines is live
  (an old HIGH fact would otherwise come back first while the correction sits faded), and
  fades it with that memory when both are unused.

The pure bookkeeping of `domain.accesses` is asserted value by value at the end.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from pathlib import Path

import anyio
import pytest
import time_machine
from mcp import Client

from nooa_mcp import Memory, Settings
from nooa_mcp.domain.accesses import apply_access, history_record
from nooa_mcp.domain.forgetting import prune_eta
from nooa_mcp.domain.schema import AccessRecord, Channel, Memory as Record, now as utc_now
from nooa_mcp.domain.scoring import base_level, base_level_exact, sigmoid
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp.server import build_server
from nooa_mcp.services import consolidation

OWNER = "coder@laptop"
NOW = utc_now().replace(microsecond=0)
T0 = NOW - timedelta(days=200)
DAY = timedelta(days=1)
#: No word in common, so neither is ever a hit (a use) of the other's recall.
OFTEN = "Build cache lives on NAS share"
ONCE = "Coffee machine descales every Friday"


def settings_for(target: Path | str) -> Settings:
    return Settings(store=target, owner=OWNER)


async def call(client: Client, tool: str, **args) -> dict:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    return result.structured_content


async def session(target: Path | str, calls: list[tuple[str, dict]]) -> list[dict]:
    async with Client(build_server(settings_for(target), embedder=HashEmbedder())) as c:
        return [await call(c, tool, **args) for tool, args in calls]


def at(when: datetime, target: Path | str, *calls: tuple[str, dict]) -> list[dict]:
    """The tool calls `calls` in one MCP session at `when` (the clock running from there)."""
    with time_machine.travel(when):
        return anyio.run(session, target, list(calls))


def recall(query: str) -> tuple[str, dict]:
    return ("memory_recall", {"query": query})


def author(content: str, **fields) -> tuple[str, dict]:
    return ("memory_author", {"content": content, **fields})


def explained(target: Path | str, query: str, when: datetime) -> dict[str, dict]:
    (result,) = at(when, target, ("memory_explain", {"query": query, "k": 10}))
    return {row["id"]: row for row in result["rows"]}


async def _views(target: Path | str, ids: list[str]) -> dict[str, object]:
    async with Memory.open(settings=settings_for(target), embedder=HashEmbedder()) as mem:
        return {i: await mem.get(i) for i in ids}


def views(target: Path | str, ids: list[str], when: datetime) -> dict:
    with time_machine.travel(when, tick=False):
        return anyio.run(_views, target, ids)


def on_model(target: Path | str, model, when: datetime, body):
    """`body(mem)` on a facade over `target` with `model` (the real one, where a rule reads
    cosines), the clock held at `when`."""

    async def run():
        async with Memory.open(settings=settings_for(target), embedder=model) as mem:
            return await body(mem)

    with time_machine.travel(when, tick=False):
        return anyio.run(run)


# --------------------------------------------------------------------------- use and prune


def test_a_memory_used_often_outlives_one_used_once_and_a_use_revives_it(store_target) -> None:
    often, once = (r["id"] for r in at(T0, store_target, author(OFTEN), author(ONCE)))
    at(T0 + DAY, store_target, recall(OFTEN), recall(ONCE))
    for day in (10, 30, 60, 100, 150):
        at(T0 + day * DAY, store_target, recall(OFTEN))
    shown = views(store_target, [often, once], NOW)
    # Retention and its prune ETA follow use: 6 spaced uses (the last 50 days ago) against
    # one (199 days ago).
    assert shown[often].retention > 0.2 > 0.02 > shown[once].retention
    assert shown[once].prune_eta < NOW < shown[often].prune_eta
    assert shown[often].prune_eta - shown[once].prune_eta > timedelta(days=150)
    (report,) = at(NOW, store_target, ("memory_reflect", {"steps": ["prune"]}))
    assert [s["applied"] for s in report["steps"]] == [1]
    after = views(store_target, [often, once], NOW)
    assert (after[often].archived, after[once].archived) == (False, True)
    # A recall that finds the faded one is a use: it is live again, and forgets from now.
    (found,) = at(NOW + timedelta(hours=1), store_target, recall(ONCE))
    assert found["hits"][0]["id"] == once and found["hits"][0]["flags"]["faded"]
    revived = views(store_target, [once], NOW + timedelta(hours=2))[once]
    assert not revived.archived and revived.retention > 0.99
    assert revived.prune_eta > NOW + timedelta(days=90)


def test_base_level_sums_the_newest_uses_exactly(store_target, tmp_path) -> None:
    """Used all year (16 early uses, 4 recent) against used only recently (the same 4): the
    first is at least as recent. Keeping the oldest uses exactly made it look unused."""
    year, recent = (r["id"] for r in at(T0, store_target, author(OFTEN), author(ONCE)))
    for day in range(1, 17):
        at(T0 + day * DAY, store_target, recall(OFTEN))
    for day in range(195, 199):
        at(T0 + day * DAY, store_target, recall(OFTEN), recall(ONCE))
    rows = explained(store_target, "build cache NAS coffee machine descales", NOW)
    assert rows[year]["rec"] > rows[recent]["rec"]
    with time_machine.travel(NOW, tick=False):
        history = anyio.run(_export_history, store_target)
    kept = [datetime.fromisoformat(t) for t in history[year]["use_times"]]
    assert history[year]["uses"] == 21 and len(kept) == 16
    # The newest 16 of the 21: the four recent ones and the last twelve early ones.
    assert min(kept).date() == (T0 + 5 * DAY).date() and max(kept).date() == (T0 + 198 * DAY).date()


async def _export_history(target: Path | str) -> dict[str, dict]:
    async with Memory.open(settings=settings_for(target), embedder=HashEmbedder()) as mem:
        return {r["id"]: r["history"] async for r in mem.export_records()}


def test_uses_inside_the_time_grain_count_once(store_target) -> None:
    """Five recalls within a minute are one use: as recent as a single recall then."""
    massed, single = (r["id"] for r in at(T0, store_target, author(OFTEN), author(ONCE)))
    at(T0 + 2 * DAY, store_target, *[recall(OFTEN)] * 5, recall(ONCE))
    rows = explained(store_target, "build cache NAS coffee machine descales", T0 + 3 * DAY)
    assert rows[massed]["rec"] == pytest.approx(rows[single]["rec"], abs=1e-4)
    with time_machine.travel(T0 + 3 * DAY, tick=False):
        history = anyio.run(_export_history, store_target)
    assert history[massed]["uses"] == history[single]["uses"] == 2
    assert history[massed]["channels"]["recalled"] == 5


# --------------------------------------------------------------------------- what reflection keeps


def test_reflection_never_folds_two_intents_together(store_target) -> None:
    first, second = at(
        T0,
        store_target,
        (
            "intent",
            {
                "action": "add",
                "content": "Call the dentist about the crown",
                "fire_at": (NOW + 2 * DAY).isoformat(),
            },
        ),
        (
            "intent",
            {"action": "add", "content": "call the dentist about the crown!", "cue": "dentist"},
        ),
    )
    at(NOW, store_target, ("memory_reflect", {}))
    shown = views(store_target, [first["id"], second["id"]], NOW)
    assert [v.archived for v in shown.values()] == [False, False]
    (listed,) = at(NOW, store_target, ("intent", {"action": "list"}))
    assert {first["id"], second["id"]} <= {i["id"] for i in listed["intents"]}


def test_reflection_never_folds_two_todos_together(store_target) -> None:
    """Two open todos alike are two errands: folding one into the other loses one."""
    first, second = at(
        T0,
        store_target,
        ("todo", {"action": "add", "content": "Water the office plants"}),
        ("todo", {"action": "add", "content": "water the office plants!"}),
    )
    at(NOW, store_target, ("memory_reflect", {}))
    shown = views(store_target, [first["id"], second["id"]], NOW)
    assert [v.archived for v in shown.values()] == [False, False]
    (listed,) = at(NOW, store_target, ("todo", {"action": "list"}))
    assert {first["id"], second["id"]} <= {t["id"] for t in listed["todos"]}


def test_rescore_never_moves_a_high_importance_below_the_prune_guard(store_target) -> None:
    """HIGH with salience NONE: rescore's formula would give 7.4, under the guard at 8, and
    a year unused would then prune what its author marked important."""
    (made,) = at(T0, store_target, author(OFTEN, importance="HIGH", salience="NONE"))
    at(NOW + timedelta(days=365), store_target, ("memory_reflect", {}))
    shown = views(store_target, [made["id"]], NOW + timedelta(days=366))[made["id"]]
    assert (shown.importance, shown.archived) == (8.0, False)
    assert shown.protected is not None


@pytest.mark.anyio
async def test_prune_skips_what_was_recalled_or_raised_since_its_plan(
    store_target, monkeypatch
) -> None:
    monkeypatch.setattr(consolidation, "APPLY_BATCH", 1)
    texts = [OFTEN, ONCE, "Fire drill happens monthly"]
    with time_machine.travel(T0):
        async with Memory.open(settings=settings_for(store_target), embedder=HashEmbedder()) as m:
            ids = [(await m.author(t)).id for t in texts]
    later = NOW + timedelta(days=30)
    acted: list[str] = []
    with time_machine.travel(later):
        async with Memory.open(settings=settings_for(store_target), embedder=HashEmbedder()) as m:

            async def progress(done: int, total: int, message: str) -> None:
                if message.startswith("prune 1/") and not acted:
                    live = [i for i in ids if not (await m.get(i)).archived]
                    assert len(live) == 2  # planned: all three; applied: one
                    await m.recall(texts[ids.index(live[0])])
                    await m.update(live[1], importance="HIGH")
                    acted.extend(live)

            report = await m.reflect(["prune"], progress=progress)
            step = report.steps[0]
            assert (step.planned, step.applied, step.skipped) == (3, 1, 2)
            states = {i: (await m.get(i)).archived for i in ids}
    assert [states[i] for i in acted] == [False, False]


def test_only_a_newer_memory_supersedes_the_one_it_refines(store_target) -> None:
    (old,) = at(T0, store_target, author("The staging cluster has three worker nodes"))
    (new,) = at(T0 + 10 * DAY, store_target, author("The staging cluster has four worker nodes"))
    # The older one is linked as refining the newer one (a wrong or late link): no effect.
    at(
        T0 + 11 * DAY,
        store_target,
        (
            "memory_update",
            {"memory_id": old["id"], "links": [{"target": new["id"], "relation": "refines"}]},
        ),
    )
    (found,) = at(NOW, store_target, recall("how many worker nodes has the staging cluster"))
    flags = {h["id"]: h["flags"]["superseded_by"] for h in found["hits"]}
    assert flags[new["id"]] is None
    assert views(store_target, [new["id"]], NOW)[new["id"]].flags.superseded_by is None
    # The newer one refining the older one supersedes it.
    at(
        NOW,
        store_target,
        (
            "memory_update",
            {"memory_id": new["id"], "links": [{"target": old["id"], "relation": "refines"}]},
        ),
    )
    (found,) = at(NOW, store_target, recall("how many worker nodes has the staging cluster"))
    flags = {h["id"]: h["flags"]["superseded_by"] for h in found["hits"]}
    assert flags[old["id"]] == new["id"] and flags[new["id"]] is None
    assert found["hits"][0]["id"] == new["id"]
    shown = views(store_target, [old["id"], new["id"]], NOW)
    assert [shown[i].flags.superseded_by for i in (old["id"], new["id"])] == [new["id"], None]


# --------------------------------------------------------------------------- the bookkeeping


def _use(memory: Record, when: datetime, channel: Channel = Channel.recalled, **kw) -> None:
    apply_access(memory, AccessRecord(ts=when, channel=channel), grain=3600.0, **kw)


def fresh() -> Record:
    return Record(content="x", created_at=T0, last_accessed_at=T0)


def test_apply_access_counts_uses_keeps_the_newest_times_and_the_first() -> None:
    m = fresh()
    for day in range(20):
        _use(m, T0 + day * DAY, exact_k=16)
    assert m.actr_count == 20
    assert m.actr_times == [(T0 + d * DAY).timestamp() for d in range(19, 3, -1)]
    assert m.first_access_at == T0
    assert (m.access_count, m.strength, m.last_accessed_at) == (20, 21, T0 + 19 * DAY)
    # The approximation over the 4 dropped uses stays within 1 % of the exact sum.
    ages = [(NOW - (T0 + d * DAY)).total_seconds() for d in range(20)]
    newest = [NOW.timestamp() - t for t in m.actr_times]
    first = (NOW - m.first_access_at).total_seconds()
    approx = base_level(newest, m.actr_count, first, grain=3600.0)
    assert approx == pytest.approx(base_level_exact(ages, grain=3600.0), rel=0.01)


def test_apply_access_folds_uses_inside_the_grain_and_counts_what_only_shows_nowhere() -> None:
    m = fresh()
    _use(m, T0, Channel.created)
    _use(m, T0 + timedelta(minutes=10))
    _use(m, T0 + timedelta(minutes=50))  # 40 min after the newest counted: still one use
    assert (m.actr_count, m.actr_times) == (1, [(T0 + timedelta(minutes=50)).timestamp()])
    _use(m, T0 + timedelta(hours=3))
    assert m.actr_count == 2
    for channel in (Channel.shown, Channel.injected, Channel.reflected):
        _use(m, T0 + timedelta(days=5), channel)
    assert m.actr_count == 2 and m.last_accessed_at == T0 + timedelta(hours=3)
    assert m.channels == {"created": 1, "recalled": 3, "shown": 1, "injected": 1, "reflected": 1}
    assert [a.channel for a in m.access_log][:2] == [Channel.reflected, Channel.injected]
    # Another role's read is logged and changes nothing this owner's memory ages by.
    before = (m.actr_count, m.access_count, m.strength, m.last_accessed_at)
    _use(m, T0 + timedelta(days=9), count_for_owner=False)
    assert (m.actr_count, m.access_count, m.strength, m.last_accessed_at) == before
    assert m.channels["recalled"] == 4


def test_the_ring_keeps_the_newest_accesses_and_the_history_exports_them() -> None:
    m = fresh()
    for hour in range(10):
        _use(m, T0 + hour * timedelta(hours=2), ring_size=4, exact_k=3)
    assert [a.ts for a in m.access_log] == [T0 + h * timedelta(hours=2) for h in (9, 8, 7, 6)]
    record = history_record(m)
    assert record["uses"] == 10 and len(record["use_times"]) == 3
    assert [json.dumps(a["channel"]) for a in record["accesses"]] == ['"recalled"'] * 4
    assert datetime.fromisoformat(record["learned_at"]) == T0
    rec = float(sigmoid(base_level([3600.0 * 2], 1, None)))
    assert 0 < rec < 1 and math.isfinite(rec)


# --------------------------------------------------------------------------- corrections


BILLING_OLD = "The billing service runs on host zeta-7"
BILLING_NEW = "The billing service moved to host omega-3"
BILLING_Q = "which host runs the billing service"


def test_prune_keeps_a_correction_while_the_fact_it_corrects_is_live(store_target) -> None:
    """The old fact is HIGH (never pruned); the correction is MEDIUM and goes unused for
    months. Without the rule, prune fades the correction and the old fact ranks first again,
    unsuperseded."""
    (old,) = at(T0, store_target, author(BILLING_OLD, importance="CRITICAL"))
    (new,) = at(
        T0 + DAY,
        store_target,
        author(BILLING_NEW, links=[{"target": old["id"], "relation": "refines"}]),
    )
    # Unrelated memories that go unused as long: prune has something to take.
    (idle,) = at(T0 + DAY, store_target, author(ONCE))
    before = views(store_target, [new["id"], idle["id"]], NOW)
    assert before[new["id"]].protected == f"corrects {old['id'][:8]}, which is still live"
    # Kept: no prune date (its curve crossed the line before NOW); the idle one's passed.
    assert before[new["id"]].prune_eta is None and before[idle["id"]].prune_eta < NOW
    assert before[idle["id"]].protected is None
    (report,) = at(NOW, store_target, ("memory_reflect", {"steps": ["prune"]}))
    assert [s["applied"] for s in report["steps"]] == [1]
    after = views(store_target, [old["id"], new["id"], idle["id"]], NOW)
    assert [after[i].archived for i in (old["id"], new["id"], idle["id"])] == [False, False, True]
    rows = explained(store_target, BILLING_Q, NOW + timedelta(hours=1))
    (why,) = at(NOW, store_target, ("memory_explain", {"query": BILLING_Q, "memory_id": new["id"]}))
    assert why["why_not"]["prune_eta"] is None  # kept while the fact it corrects is live
    assert rows[old["id"]]["flags"]["superseded_by"] == new["id"]
    assert rows[new["id"]]["rank"] < rows[old["id"]]["rank"]
    # Forgotten on purpose, the old fact no longer holds the correction: it may fade.
    at(NOW, store_target, ("memory_update", {"memory_id": old["id"], "forget": True}))
    assert views(store_target, [new["id"]], NOW)[new["id"]].protected is None
    (again,) = at(NOW, store_target, ("memory_reflect", {"steps": ["prune"]}))
    assert [s["applied"] for s in again["steps"]] == [1]
    assert views(store_target, [new["id"]], NOW)[new["id"]].archived


def test_a_recall_gives_a_kept_correction_no_prune_date_until_what_it_corrects_goes(
    store_target,
) -> None:
    """Recall's hits carry the prune date a view gives: none for a correction prune keeps
    while the fact it corrects is live, a date again once that fact is forgotten."""
    (old,) = at(T0, store_target, author(BILLING_OLD, importance="CRITICAL"))
    (new, other) = at(
        T0 + DAY,
        store_target,
        author(BILLING_NEW, links=[{"target": old["id"], "relation": "refines"}]),
        author("Invoices for billing are archived for ten years"),
    )

    def prune_dates() -> dict[str, str | None]:
        (found,) = at(NOW, store_target, ("memory_recall", {"query": BILLING_Q, "k": 10}))
        return {h["id"]: h["prune_eta"] for h in found["hits"]}

    dates = prune_dates()
    assert dates[new["id"]] is None and dates[other["id"]] is not None
    assert dates[old["id"]] is None  # CRITICAL: protected by its importance
    at(NOW, store_target, ("memory_update", {"memory_id": old["id"], "forget": True}))
    assert prune_dates()[new["id"]] is not None


def test_a_spent_one_shot_intent_fades_like_a_closed_todo_and_an_armed_one_never(
    store_target,
) -> None:
    """An intent is kept while it can still fire; a one-shot that fired has given its
    reminder, and was kept (and listed, and recalled) for good."""
    soon = (T0 + timedelta(hours=1)).isoformat()
    spent, waiting, daily = (
        r["id"]
        for r in at(
            T0,
            store_target,
            ("intent", {"action": "add", "content": "Send the invoice run", "fire_at": soon}),
            ("intent", {"action": "add", "content": "Renew the domain", "fire_at": "2099-01-01"}),
            (
                "intent",
                {"action": "add", "content": "Rotate the logs", "fire_at": soon, "every_hours": 24},
            ),
        )
    )
    (fired,) = at(T0 + timedelta(hours=2), store_target, ("intent", {"action": "check"}))
    assert {r["intent_id"] for r in fired["reminders"]} == {spent, daily}
    before = views(store_target, [spent, waiting, daily], NOW)
    assert before[spent].protected is None and before[spent].prune_eta < NOW
    assert before[waiting].protected == before[daily].protected == "type intent is protected"
    (report,) = at(NOW, store_target, ("memory_reflect", {"steps": ["prune"]}))
    assert [s["applied"] for s in report["steps"]] == [1]
    after = views(store_target, [spent, waiting, daily], NOW)
    assert [after[i].archived for i in (spent, waiting, daily)] == [True, False, False]


def test_a_recall_gives_a_spent_one_shot_intent_the_prune_date_its_view_gives(
    store_target,
) -> None:
    """Recall decided "never pruned" from the stored status, which an intent does not keep:
    a spent one-shot showed no prune date in a recall and one in its view and explain."""
    soon = (T0 + timedelta(hours=1)).isoformat()
    spent, waiting = (
        r["id"]
        for r in at(
            T0,
            store_target,
            ("intent", {"action": "add", "content": "Send the invoice run", "fire_at": soon}),
            (
                "intent",
                {"action": "add", "content": "Send the invoice archive", "fire_at": "2099-01-01"},
            ),
        )
    )
    at(T0 + timedelta(hours=2), store_target, ("intent", {"action": "check"}))
    shown = views(store_target, [spent, waiting], T0 + timedelta(hours=3))
    (found,) = at(
        T0 + timedelta(hours=3),
        store_target,
        ("memory_recall", {"query": "send the invoice run", "k": 10, "types": ["intent"]}),
    )
    dates = {h["id"]: h["prune_eta"] for h in found["hits"]}
    assert dates[waiting] is None and shown[waiting].prune_eta is None
    assert dates[spent] is not None
    assert datetime.fromisoformat(dates[spent]) == shown[spent].prune_eta


def test_one_incidental_word_shows_a_faded_memory_but_does_not_revive_it(
    store_target, minilm
) -> None:
    """The only keyword hit gets the full keyword score, which clears the weak line: "orders"
    alone brought back a faded note about lunch orders as used, live again, for a question
    about billing (real model: cosine 0.34). It is shown, flagged faded, and stays faded; a
    question it answers revives it."""

    async def write(mem: Memory) -> str:
        return (await mem.author("Lunch orders are due by 11am on Fridays")).id

    async def prune(mem: Memory) -> int:
        return (await mem.reflect(["prune"])).steps[0].applied

    def ask(query: str) -> tuple[list, str, bool]:
        async def body(mem: Memory) -> tuple[list, str, bool]:
            found = await mem.recall(query)
            return found.hits, found.note, (await mem.get(lunch)).archived

        return on_model(store_target, minilm, NOW, body)

    lunch = on_model(store_target, minilm, T0, write)
    assert on_model(store_target, minilm, NOW, prune) == 1
    hits, note, archived = ask("How are customer orders processed in the billing service?")
    (hit,) = [h for h in hits if h.id == lunch]
    assert hit.flags.faded and not hit.flags.weak  # shown, as it ranks
    assert archived and "live again" not in note  # not used
    hits, note, archived = ask("When are the lunch orders due?")
    assert hits[0].id == lunch and not archived and "live again" in note


def test_a_fact_written_ahead_starts_fading_when_it_starts_to_hold(store_target) -> None:
    """A "VPN endpoint is vpn2" from June, written in January and unused until then by design,
    was pruned in May, before it held, and came back faded below the stale vpn1 in June.
    Forgetting's clock starts at its valid_from: kept before, and for as long after as an
    unused memory is kept after its last use."""
    starts = T0 + timedelta(days=150)
    vpn2, other = (
        r["id"]
        for r in at(
            T0,
            store_target,
            author("The VPN endpoint is vpn2.example.net", valid_from=starts.isoformat()),
            author(ONCE),
        )
    )
    before = views(store_target, [vpn2, other], starts - DAY)
    assert before[other].prune_eta < starts - DAY < before[vpn2].prune_eta
    # As an unused memory's is after its last use, counted from the day it starts to hold.
    assert abs(before[vpn2].prune_eta - prune_eta(starts, 1)) < timedelta(minutes=1)
    (report,) = at(starts - DAY, store_target, ("memory_reflect", {"steps": ["prune"]}))
    # The idle note, not the VPN fact: not even planned.
    assert [(s["planned"], s["applied"]) for s in report["steps"]] == [(1, 1)]
    (again,) = at(
        starts + timedelta(days=30), store_target, ("memory_reflect", {"steps": ["prune"]})
    )
    assert [s["applied"] for s in again["steps"]] == [0]
    after = views(store_target, [vpn2, other], starts + timedelta(days=30))
    assert (after[vpn2].archived, after[other].archived) == (False, True)
    (late,) = at(
        starts + timedelta(days=120), store_target, ("memory_reflect", {"steps": ["prune"]})
    )
    assert [s["applied"] for s in late["steps"]] == [1]  # unused for 120 days once it held


def test_a_newer_version_that_faded_unused_still_ranks_above_the_older_live_one(
    store_target, minilm
) -> None:
    """A "... three worker nodes", protected (or much used before), stays live; "... four worker
    nodes", written later and not asked about since, fades. The versions rule paired only
    live memories, so "three" came back first; the newer leads, and the recall uses it."""

    def write(when: datetime, text: str, importance: str) -> str:
        async def body(mem: Memory) -> str:
            return (await mem.author(text, importance=importance)).id

        return on_model(store_target, minilm, when, body)

    async def prune(mem: Memory) -> int:
        return (await mem.reflect(["prune"])).steps[0].applied

    async def ask(mem: Memory) -> tuple[list[str], bool, bool]:
        found = await mem.recall("How many worker nodes does staging have?")
        ids = [h.id for h in found.hits]
        return ids, found.hits[0].flags.faded, (await mem.get(new)).archived

    old = write(T0, "The staging cluster has three worker nodes", "CRITICAL")
    new = write(T0 + DAY, "The staging cluster has four worker nodes", "MEDIUM")
    assert on_model(store_target, minilm, NOW, prune) == 1
    ids, faded, archived = on_model(store_target, minilm, NOW, ask)
    assert ids[:2] == [new, old] and faded and not archived  # shown first, and used


def test_of_two_facts_on_one_subject_what_holds_now_leads_in_a_small_store(
    store_target, minilm
) -> None:
    """The wiki "lives on Confluence" until a date, "... on Notion" from it (cosine 0.69,
    not versions). With only these two candidates the stretch gave the more relevant stale
    one rel' 1, which its penalty only cancelled, and it came first. What holds now leads,
    unless the query names a word they differ in."""
    switch = (NOW - 10 * DAY).isoformat()

    async def run(mem: Memory) -> tuple[list[str], list[str], str, str]:
        old = (await mem.author("The team wiki lives on Confluence", valid_to=switch)).id
        new = (await mem.author("The team wiki lives on Notion", valid_from=switch)).id
        plain = [h.id for h in (await mem.recall("where does the team wiki live?")).hits]
        named = [h.id for h in (await mem.recall("is the wiki on Confluence?")).hits]
        return plain, named, old, new

    plain, named, old, new = on_model(store_target, minilm, NOW, run)
    assert plain == [new, old]
    assert named == [old, new]


def test_a_hit_of_one_incidental_word_is_shown_not_used(store_target, minilm) -> None:
    """A question about billing orders made a lunch note the only keyword hit of "orders",
    not weak, and every time it was asked the note was logged as used: it never faded
    (auditor: an onboarding note got 25 uses from a PostgreSQL question). Only a hit the
    query answers on its own terms is used; the others are logged as shown."""

    async def run(mem: Memory) -> list[str]:
        lunch = (await mem.author("Lunch orders are due by 11am on Fridays")).id
        checkout = (
            await mem.author("Checkout hands each customer purchase to the payments worker")
        ).id
        hits = (await mem.recall("How are customer orders processed in the billing service?")).hits
        assert {h.id for h in hits if not h.flags.weak} == {lunch, checkout}
        await mem.engine.flush()
        logs = [await mem.access_log(i) for i in (lunch, checkout)]
        return [log[0][1].channel.value for log in logs]  # newest first

    newest = on_model(store_target, minilm, NOW, run)
    assert newest == ["shown", "recalled"]


def test_a_correction_and_the_fact_it_corrects_fade_together(store_target) -> None:
    """Both unused for months and neither protected: the pass fades both, so nothing stale is
    left live above a faded correction."""
    (old,) = at(T0, store_target, author(BILLING_OLD))
    (new,) = at(
        T0 + DAY,
        store_target,
        author(BILLING_NEW, links=[{"target": old["id"], "relation": "refines"}]),
    )
    (report,) = at(NOW, store_target, ("memory_reflect", {"steps": ["prune"]}))
    assert [s["applied"] for s in report["steps"]] == [2]
    after = views(store_target, [old["id"], new["id"]], NOW)
    assert after[old["id"]].archived and after[new["id"]].archived
    # Faded together, the correction still supersedes: the old fact never comes back first,
    # unflagged, while the correction sits faded (a faded successor is not a forgotten one).
    assert after[old["id"]].flags.superseded_by == new["id"]
    rows = explained(store_target, BILLING_Q, NOW + timedelta(hours=1))
    assert rows[old["id"]]["flags"]["superseded_by"] == new["id"]
    assert rows[new["id"]]["rank"] < rows[old["id"]]["rank"]
    (found,) = at(
        NOW + timedelta(hours=2), store_target, ("memory_recall", {**recall(BILLING_Q)[1], "k": 1})
    )
    assert [hit["id"] for hit in found["hits"]] == [new["id"]]
    revived = views(store_target, [old["id"], new["id"]], NOW + timedelta(hours=3))
    assert revived[old["id"]].archived and not revived[new["id"]].archived


def test_a_merge_carries_a_correction_of_the_duplicate_to_what_survives(store_target) -> None:
    """Two copies of one statement, the newer corrected by a third memory: the merge folds one
    copy into the other, and the correction, which pointed at one copy, corrects the memory
    that is left (it would otherwise be live, unflagged and first, the correction below it)."""
    (first,) = at(T0, store_target, author("The payments queue is served by RabbitMQ on mq-1"))
    (second,) = at(
        T0 + DAY,
        store_target,
        author("The payments queue is served by RabbitMQ on mq-1.", tags=["payments"]),
    )
    (fix,) = at(
        T0 + 2 * DAY,
        store_target,
        author(
            "The payments queue moved from RabbitMQ to Kafka on kafka-3",
            links=[{"target": second["id"], "relation": "contradicts"}],
        ),
    )
    (report,) = at(T0 + 3 * DAY, store_target, ("memory_reflect", {"steps": ["merge"]}))
    assert [s["applied"] for s in report["steps"]] == [1]
    shown = views(store_target, [first["id"], second["id"]], T0 + 3 * DAY)
    (kept,) = [i for i, v in shown.items() if not v.archived]
    assert shown[kept].flags.superseded_by == fix["id"]
    query = "which host serves the payments queue"
    rows = explained(store_target, query, T0 + 3 * DAY)
    assert rows[kept]["flags"]["superseded_by"] == fix["id"]
    assert rows[fix["id"]]["rank"] < rows[kept]["rank"]


CI_OLD = "The legacy CI host ci-legacy-01 builds the mobile app"
CI_NEW = "The new CI host ci-02 builds the mobile app"
CI_Q = "which CI host builds the mobile app"
CI_OTHERS = (
    "The mobile app release checklist lives in the team wiki",
    "CI pipelines run the linter before the unit tests",
    "The docs site is built on the pages host",
    "Nightly builds of the app are uploaded to the beta channel",
)


def test_what_holds_now_ranks_above_a_version_valid_only_from_a_later_date(
    store_target,
) -> None:
    """The old host holds until the switch, the new one from it: before the switch the old
    ranks first and the new one is flagged with its date; after it, the old is stale and
    the new first. A query naming a word they differ in lets relevance decide."""
    switch = T0 + 60 * DAY
    # Other memories the query half matches: relevance is stretched over a store's range.
    at(T0, store_target, *(author(text) for text in CI_OTHERS))
    (old,) = at(T0, store_target, author(CI_OLD, importance="HIGH", valid_to=switch.isoformat()))
    (new,) = at(
        T0 + DAY, store_target, author(CI_NEW, importance="HIGH", valid_from=switch.isoformat())
    )
    before = explained(store_target, CI_Q, T0 + 10 * DAY)
    assert before[old["id"]]["rank"] < before[new["id"]]["rank"]
    assert before[new["id"]]["flags"]["holds_from"].startswith(f"{switch:%Y-%m-%d}")
    assert before[old["id"]]["flags"]["holds_from"] is None
    named = explained(store_target, "which CI host builds the mobile app, ci-02?", T0 + 10 * DAY)
    assert named[new["id"]]["rank"] < named[old["id"]]["rank"]
    (why,) = at(
        T0 + 10 * DAY,
        store_target,
        ("memory_explain", {"query": CI_Q, "memory_id": new["id"]}),
    )
    assert f"holds only from {switch:%Y-%m-%d}" in why["why_not"]["reason"]
    after = explained(store_target, CI_Q, switch + 10 * DAY)
    assert after[new["id"]]["rank"] < after[old["id"]]["rank"]
    assert after[old["id"]]["flags"]["stale"] and after[new["id"]]["flags"]["holds_from"] is None
    shown = views(store_target, [new["id"]], T0 + 10 * DAY)[new["id"]]
    assert shown.flags.holds_from == switch


def test_of_two_versions_of_one_statement_the_one_that_holds_now_ranks_first(
    store_target,
) -> None:
    """Two versions a word apart (versions of one statement rank newer first): when the newer
    holds only from a later date, the one that holds now ranks first until that date."""
    old = (
        "The mobile app for the shop is built by the CI host alpha in the Frankfurt data "
        "centre behind the shared runner pool"
    )
    new = old.replace("alpha", "omega")
    switch = T0 + 60 * DAY
    (first,) = at(T0, store_target, author(old, importance="HIGH"))
    (second,) = at(
        T0 + DAY, store_target, author(new, importance="HIGH", valid_from=switch.isoformat())
    )
    query = "which CI host builds the shop's mobile app"
    before = explained(store_target, query, T0 + 10 * DAY)
    assert before[first["id"]]["rank"] < before[second["id"]]["rank"]
    after = explained(store_target, query, switch + DAY)
    assert after[second["id"]]["rank"] < after[first["id"]]["rank"]


def test_a_chain_of_corrections_ranks_newest_first_however_relevant_the_oldest(
    store_target,
) -> None:
    """A refined by B, B contradicted by C, the oldest the most relevant to the query: each
    ranks below what replaced it, so C, then B, then A (a clamp applied in visiting order
    once left A above both, placed below B before B was placed below C)."""
    (a,) = at(T0, store_target, author("The CI pipeline caches dependencies on the runner disk"))
    (b,) = at(
        T0 + DAY,
        store_target,
        author(
            "Dependency caching moved to the shared volume",
            links=[{"target": a["id"], "relation": "refines"}],
        ),
    )
    (c,) = at(
        T0 + 2 * DAY,
        store_target,
        author(
            "No dependency cache any more: builds fetch fresh",
            links=[{"target": b["id"], "relation": "contradicts"}],
        ),
    )
    rows = explained(store_target, "where does the CI pipeline cache dependencies", T0 + 3 * DAY)
    assert rows[a["id"]]["flags"]["superseded_by"] == b["id"]
    assert rows[b["id"]]["flags"]["superseded_by"] == c["id"]
    assert rows[c["id"]]["rank"] < rows[b["id"]]["rank"] < rows[a["id"]]["rank"]


def test_a_fact_two_memories_refine_ranks_below_both(store_target) -> None:
    """A refined by B and by C, B's own words far from the query: B is a current version of
    a relevant memory (not weak), and A ranks below both, not only below the first."""
    (a,) = at(T0, store_target, author("The staging database listens on port 5432"))
    link = [{"target": a["id"], "relation": "refines"}]
    (b,) = at(T0 + DAY, store_target, author("Moved behind pgbouncer last sprint", links=link))
    (c,) = at(
        T0 + 2 * DAY,
        store_target,
        author("The staging database port is now 6432", links=link),
    )
    rows = explained(store_target, "which port does the staging database listen on", T0 + 3 * DAY)
    assert rows[a["id"]]["flags"]["superseded_by"] in (b["id"], c["id"])
    assert not rows[b["id"]]["flags"]["weak"]
    assert rows[a["id"]]["rank"] > max(rows[b["id"]]["rank"], rows[c["id"]]["rank"])


BACKUP = "The nightly backup job of the storage cluster runs at 02:00 on the first node"


def merged_copies(store_target) -> tuple[dict, dict]:
    """BACKUP written twice (the second with a full stop and a tag), then merged by a pass:
    the first written (the anchor, live) and the copy (faded, merged into it)."""
    (first,) = at(T0, store_target, author(BACKUP))
    (copy,) = at(T0 + DAY, store_target, author(BACKUP + ".", tags=["backup"]))
    (report,) = at(T0 + 2 * DAY, store_target, ("memory_reflect", {"steps": ["merge"]}))
    assert [s["applied"] for s in report["steps"]] == [1]
    return first, copy


def test_a_correction_linked_to_a_merged_duplicate_corrects_the_memory_it_was_merged_into(
    store_target,
) -> None:
    """After the merge, a model holding the duplicate's id links a correction to it: the
    memory the duplicate was merged into speaks for it, so that memory is the one corrected
    (else it stays live, first and unflagged, and the hook injects it)."""
    first, copy = merged_copies(store_target)
    (fix,) = at(
        T0 + 3 * DAY,
        store_target,
        author(
            "The nightly backup job moved to 04:00",
            links=[{"target": copy["id"], "relation": "refines"}],
        ),
    )
    rows = explained(store_target, "when does the nightly backup job run", T0 + 4 * DAY)
    assert rows[first["id"]]["flags"]["superseded_by"] == fix["id"]
    assert rows[fix["id"]]["rank"] < rows[first["id"]]["rank"]
    edges = views(store_target, [fix["id"]], T0 + 4 * DAY)[fix["id"]].edges
    assert [(e["target"], e["type"]) for e in edges] == [(first["id"], "refines")]


def test_saying_a_merged_duplicate_again_uses_the_memory_it_was_merged_into(
    store_target,
) -> None:
    """The same statement as a duplicate reflection merged away is said again: the memory it
    was merged into is reinforced (`exists`, its id), and the duplicate stays faded (revived,
    it was a second live copy no pass merges again)."""
    first, copy = merged_copies(store_target)
    (again,) = at(T0 + 3 * DAY, store_target, author(BACKUP + "!"))
    assert (again["id"], again["status"]) == (first["id"], "exists")
    shown = views(store_target, [first["id"], copy["id"]], T0 + 3 * DAY)
    assert not shown[first["id"]].archived and shown[copy["id"]].archived
    assert shown[first["id"]].reinforcement_count == 2  # the merge's, and this one
