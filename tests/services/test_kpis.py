"""KPIs in stats (DESIGN.md §8.10): never-fetched share, read concentration, reflection rows against
their reads (the paper's 22% of rows for ~1% of reads), archived share, todos, intents, cross-owner
reads; and the snapshot of them each reflection pass logs for the console's chart over time."""

from __future__ import annotations

import pytest

from nooa_mcp import Memory
from nooa_mcp.services import consolidation, views

pytestmark = pytest.mark.anyio

#: The shares a reflection pass logs for the console's chart over time.
CHARTED = ("never_fetched_share", "top10pct_read_share", "reflection_reads_share", "archived_share")


async def test_kpis_count_reads_reflection_share_todos_and_archive(mem):
    hot = await mem.author("the deploy key lives in the team vault")
    await mem.author("the cafeteria closes at three on fridays")
    await mem.author("lesson: deploys after five tend to fail", type="reflection")
    gone = await mem.author("an obsolete fact about the old printer")
    await mem.forget(gone.id)
    await mem.todo("add", content="rotate the deploy key")
    done = await mem.todo("add", content="order more coffee")
    await mem.todo("done", memory_id=done.id)
    for _ in range(3):
        await mem.recall("where does the deploy key live", k=1)
    kpi = (await mem.stats()).extra
    assert kpi["reads"] == 3
    # Five live memories (two facts, a reflection, two todos); only the hot fact was fetched.
    assert kpi["never_fetched_share"] == pytest.approx(4 / 5)
    assert kpi["top10pct_read_share"] == 1.0
    assert kpi["reflection_rows"] == 1
    assert kpi["reflection_rows_share"] == pytest.approx(1 / 5)
    assert kpi["reflection_reads_share"] == 0.0
    assert kpi["archived_share"] == pytest.approx(1 / 6, abs=1e-4)
    assert kpi["tombstones"] == 1
    assert (kpi["todos_open"], kpi["todos_closed"]) == (1, 1)
    assert kpi["todo_open_median_age_hours"] == 0.0
    assert kpi["intents_fired"] == 0
    assert hot.status == "created"


async def test_reads_of_derived_memories_count_toward_the_reflection_share(mem):
    source = await mem.author("the nightly build broke on a flaky test")
    insight = await mem.author(
        "flaky tests break nightly builds; quarantine them",
        links=[{"target": source.id, "relation": "derived_from"}],
    )
    await mem.recall("quarantine flaky tests", k=1)
    kpi = (await mem.stats()).extra
    assert kpi["reflection_rows"] == 1
    assert kpi["reflection_reads_share"] == 1.0
    assert insight.status == "created"


async def test_cross_owner_reads_are_counted(settings, embedder, store_path):
    async with Memory.open(settings=settings, embedder=embedder) as mine:
        await mine.author("coder notes: the api rate limit is 100 per minute")
    async with Memory.open(
        store_path, owner="reviewer@desk", read=["coder"], embedder=embedder
    ) as other:
        result = await other.recall("api rate limit", scope="*", k=1)
        assert result.hits
    async with Memory.open(settings=settings, embedder=embedder) as mine:
        await mine.recall("api rate limit", k=1)
        assert (await mine.stats()).extra["cross_owner_reads"] == 1


async def test_an_empty_store_reports_zero_shares(mem):
    kpi = (await mem.stats()).extra
    assert kpi["never_fetched_share"] == 0.0
    assert kpi["todo_open_median_age_hours"] is None
    assert kpi["last_reflection_at"] is None


async def test_each_reflection_pass_logs_the_kpis_stats_reported_as_it_ended(mem):
    hot = await mem.author("the deploy key lives in the team vault")
    await mem.author("the cafeteria closes at three on fridays")
    await mem.author("the printer on floor two jams on thick paper")
    await mem.reflect()
    before = await mem.stats()
    for _ in range(2):
        await mem.recall("where does the deploy key live", k=1)
    await mem.reflect()
    after = await mem.stats()
    logged = [entry.report["kpis"] for entry in reversed(await mem.maintenance_log())]
    assert logged == [
        {**{k: s.extra[k] for k in CHARTED}, "active": s.active} for s in (before, after)
    ]
    # Nothing was read before the first pass; the recalls fetched one of three after it.
    assert [k["never_fetched_share"] for k in logged] == [1.0, pytest.approx(2 / 3, abs=1e-4)]
    assert [k["top10pct_read_share"] for k in logged] == [0.0, 1.0]
    assert [k["active"] for k in logged] == [3, 3]
    assert hot.status == "created"


async def test_passes_started_by_writes_log_the_kpis_at_most_once_a_minute(mem, monkeypatch):
    """A client filling a store starts a pass every few hundred writes; each would read
    every memory for a chart point all but equal to the last. Passes asked for, and idle
    ones, log it every time."""
    await mem.author("the deploy key lives in the team vault")
    for trigger in ("after-writes", "after-writes", "on-demand", "idle", "after-writes"):
        await mem.reflect(trigger=trigger)
    monkeypatch.setattr(consolidation, "KPI_EVERY", 0.0)
    await mem.reflect(trigger="after-writes")
    logged = [
        ("kpis" in e.report, e.report["trigger"]) for e in reversed(await mem.maintenance_log())
    ]
    assert logged == [
        (True, "after-writes"),
        (False, "after-writes"),
        (True, "on-demand"),
        (True, "idle"),
        (False, "after-writes"),
        (True, "after-writes"),
    ]


async def test_a_failed_kpi_snapshot_still_logs_the_pass(mem, monkeypatch):
    async def broken(*_: object, **__: object) -> None:
        raise RuntimeError("the store went away")

    await mem.author("the deploy key lives in the team vault")
    monkeypatch.setattr(views, "kpi_snapshot", broken)
    report = await mem.reflect()
    (entry,) = await mem.maintenance_log()
    assert report.status == entry.report["status"] == "completed"
    assert "kpis" not in entry.report
