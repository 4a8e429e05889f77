"""The console in a real browser: what people see matches what the facade says.

Each test drives Debian's Chromium through Playwright against a console served on loopback,
and checks the page against the Memory facade opened on the same store file.
"""

from __future__ import annotations

import math
import threading
import uuid
from datetime import UTC, datetime, timedelta

import anyio.to_thread
import pytest
import time_machine
from browsing import shot
from conftest import OWNER

from nooa_mcp import Memory
from nooa_mcp.console import runs as console_runs

pytestmark = pytest.mark.anyio

QUERY = "where are the production SSH keys"
YEAR_AGO = datetime.now(UTC) - timedelta(days=365)


async def search(page, url: str, query: str) -> None:
    await page.goto(url + "/")
    await page.fill("#q", query)
    await page.press("#q", "Enter")
    await page.wait_for_selector("table.results")


async def test_search_draws_each_score_term_at_the_value_explain_reports(
    site, owner_settings, embedder
):
    """Each bar is the score's terms (explain's `terms`): its segments add up to the score
    (less penalties), on one scale for every row."""
    url, chromium = site
    page = await chromium.new_page()
    await search(page, url, QUERY)
    await shot(page, "search")
    async with Memory.open(settings=owner_settings, embedder=embedder) as mem:
        explained = await mem.explain(QUERY, k=10)
    rows = page.locator("table.results tbody tr")
    assert await rows.count() == len(explained.rows)
    assert [await rows.nth(i).get_attribute("data-id") for i in range(await rows.count())] == [
        r.id for r in explained.rows
    ]
    pixels_per_unit = None
    for i, row in enumerate(explained.rows):
        assert row.terms is not None
        rects = rows.nth(i).locator("svg.bar rect.part")
        assert await rects.count() == 4
        drawn = 0.0
        for j, part in enumerate(("rel", "rec", "imp", "spread")):
            rect = rects.nth(j)
            assert await rect.get_attribute("data-part") == part
            value = float(await rect.get_attribute("data-value"))
            assert value == pytest.approx(getattr(row.terms, part), abs=0.001)
            width = float(await rect.get_attribute("width"))
            drawn += value
            if value > 0.05:
                scale = width / value
                pixels_per_unit = pixels_per_unit or scale
                # Every segment of every row is drawn on one scale, so bars compare.
                assert scale == pytest.approx(pixels_per_unit, rel=0.01)
        penalties = row.terms.penalty + row.terms.order
        assert drawn + penalties == pytest.approx(row.score, abs=0.001)
    assert pixels_per_unit is not None


async def test_why_not_first_opens_inside_the_row_with_the_facades_reason(
    site, owner_settings, embedder
):
    url, chromium = site
    page = await chromium.new_page()
    await search(page, url, QUERY)
    second = page.locator("table.results tbody tr").nth(1)
    memory_id = await second.get_attribute("data-id")
    await second.locator("details summary").click()
    reason = second.locator("[data-reason]")
    await reason.wait_for()
    async with Memory.open(settings=owner_settings, embedder=embedder) as mem:
        answer = (await mem.explain(QUERY, memory_id=memory_id, k=1)).why_not
    assert answer is not None and not answer.in_top_k
    assert await reason.inner_text() == answer.reason
    assert await second.locator(".whynot").get_attribute("data-rank") == str(answer.rank)


async def test_memory_page_draws_one_timeline_dot_per_access_with_its_channel_rank_and_query(
    site, owner_settings, embedder, seeded
):
    url, chromium = site
    async with Memory.open(settings=owner_settings, embedder=embedder) as mem:
        await mem.recall(QUERY, k=3)
        await mem.recall("vault", k=3)
        log = [a for _, a in reversed(await mem.access_log(seeded["keys"], limit=50))]
    page = await chromium.new_page()
    await search(page, url, QUERY)
    await page.click(f"table.results a[href$='/memory/{seeded['keys']}']")
    await page.wait_for_selector("svg.timeline")
    await shot(page, "memory")
    dots = page.locator("svg.timeline circle.dot")
    assert await dots.count() == len(log) >= 3
    timeline = page.locator("svg.timeline")
    start = datetime.fromisoformat(await timeline.get_attribute("data-start"))
    end = datetime.fromisoformat(await timeline.get_attribute("data-end"))
    left = float(await timeline.get_attribute("data-left"))
    right = float(await timeline.get_attribute("data-right"))
    for i, access in enumerate(log):
        dot = dots.nth(i)
        assert await dot.get_attribute("data-channel") == access.channel.value
        assert await dot.get_attribute("data-query") == (access.query or "")
        assert await dot.get_attribute("data-rank") == (
            "" if access.rank is None else str(access.rank)
        )
        assert await dot.get_attribute("data-reader") == access.reader_owner
        expected_x = left + (access.ts - start) / (end - start) * (right - left)
        assert float(await dot.get_attribute("cx")) == pytest.approx(expected_x, abs=0.05)
    recalled = [a for a in log if a.channel.value == "recalled"]
    assert [a.query for a in recalled] == [QUERY, "vault"]


async def test_memory_page_marks_today_and_the_prune_eta_on_the_retention_curve(
    site, owner_settings, embedder, seeded
):
    url, chromium = site
    page = await chromium.new_page()
    await page.goto(f"{url}/memory/{seeded['lunch']}")
    curve = page.locator("svg.curve")
    async with Memory.open(settings=owner_settings, embedder=embedder) as mem:
        view = await mem.get(seeded["lunch"])
    assert view.prune_eta is not None
    assert float(await curve.get_attribute("data-today-r")) == pytest.approx(
        view.retention, abs=1e-3
    )
    assert await curve.get_attribute("data-eta") == view.prune_eta.isoformat()
    start = datetime.fromisoformat(await curve.get_attribute("data-start"))
    end = datetime.fromisoformat(await curve.get_attribute("data-end"))
    left = float(await curve.get_attribute("data-left"))
    right = float(await curve.get_attribute("data-right"))
    eta_x = left + (view.prune_eta - start) / (end - start) * (right - left)
    assert float(await curve.get_attribute("data-eta-x")) == pytest.approx(eta_x, abs=0.05)
    assert float(await page.locator("svg.curve line.eta").get_attribute("x1")) == pytest.approx(
        eta_x, abs=0.05
    )
    # The curve is R = exp(−Δt/S): at the ETA it crosses the prune threshold.
    threshold = float(await curve.get_attribute("data-threshold"))
    stability = (
        (view.prune_eta - view.last_accessed_at).total_seconds() / 3600 / math.log(1 / threshold)
    )
    hours = (
        datetime.now(view.last_accessed_at.tzinfo) - view.last_accessed_at
    ).total_seconds() / 3600
    assert math.exp(-hours / stability) == pytest.approx(view.retention, abs=1e-3)


async def test_forget_then_revive_from_the_memory_page_round_trips_through_the_facade(
    site, owner_settings, embedder, seeded
):
    url, chromium = site
    page = await chromium.new_page()
    target = seeded["bastion"]
    await page.goto(f"{url}/memory/{target}")
    await page.click("[data-action=forget]")
    await page.wait_for_selector("[data-note=forgotten]")
    assert await page.get_attribute("article.memory", "data-archived") == "yes"
    async with Memory.open(settings=owner_settings, embedder=embedder) as mem:
        assert (await mem.get(target)).archived
        assert target not in [r.id for r in (await mem.explain("bastion host keys")).rows]
    await search(page, url, "bastion host keys")
    assert await page.locator(f"tr[data-id='{target}']").count() == 0
    await page.goto(f"{url}/memory/{target}")
    await page.click("[data-action=revive]")
    await page.wait_for_selector("[data-note=revived]")
    assert await page.get_attribute("article.memory", "data-archived") == "no"
    async with Memory.open(settings=owner_settings, embedder=embedder) as mem:
        assert not (await mem.get(target)).archived
        assert (await mem.explain("bastion host keys")).rows[0].id == target
        log = [a for _, a in await mem.access_log(target)]
    assert log[0].channel.value == "reinforced" and log[0].reader_owner == OWNER


async def test_closing_a_todo_moves_it_to_done_and_fires_no_reminder(
    site, owner_settings, embedder
):
    url, chromium = site
    async with Memory.open(settings=owner_settings, embedder=embedder) as mem:
        todo = (await mem.todo("add", content="Rotate the SSH bastion keys")).id
        due = (
            await mem.intent("add", content="Ask about the audit", fire_at="2020-01-01T00:00:00Z")
        ).id
    page = await chromium.new_page()
    await page.goto(url + "/todos")
    await page.click(f"ul[data-status=open] li[data-id='{todo}'] [data-action=todo-done]")
    await page.wait_for_selector(f"ul[data-status=done] li[data-id='{todo}']")
    await shot(page, "todos")
    await page.goto(url + "/intents")
    assert await page.locator(f"tr[data-id='{due}']").count() == 1
    async with Memory.open(settings=owner_settings, embedder=embedder) as mem:
        assert (await mem.get(todo)).status == "done"
        # Looking at todos and intents is not the agent's turn: the due intent is still armed.
        assert (await mem.get(due)).trigger["fired_count"] == 0


async def test_cancelling_an_intent_archives_it(site, owner_settings, embedder):
    url, chromium = site
    async with Memory.open(settings=owner_settings, embedder=embedder) as mem:
        intent = (await mem.intent("add", content="Check the vault audit", cue="vault audit")).id
    page = await chromium.new_page()
    await page.goto(url + "/intents")
    await page.click(f"tr[data-id='{intent}'] [data-action=cancel-intent]")
    await page.wait_for_selector("[data-note=cancelled]")
    assert await page.locator(f"tr[data-id='{intent}']").count() == 0
    async with Memory.open(settings=owner_settings, embedder=embedder) as mem:
        assert (await mem.get(intent)).archived


async def test_editing_content_importance_and_tags_saves_them_as_the_consoles_owner(
    site, owner_settings, embedder, seeded
):
    url, chromium = site
    page = await chromium.new_page()
    target = seeded["staging"]
    await page.goto(f"{url}/memory/{target}")
    await page.fill("#content", "The staging cluster has five worker nodes")
    await page.fill("#importance", "HIGH")
    await page.fill("#tags", "ops, capacity")
    await page.click("[data-action=save]")
    await page.wait_for_selector("[data-note=saved]")
    assert await page.inner_text("[data-content]") == "The staging cluster has five worker nodes"
    async with Memory.open(settings=owner_settings, embedder=embedder) as mem:
        view = await mem.get(target)
        newest = (await mem.access_log(target, limit=1))[0][1]
    assert (view.content, view.importance, view.tags) == (
        "The staging cluster has five worker nodes",
        8.0,
        ["ops", "capacity"],
    )
    assert newest.reader_owner == OWNER


async def test_a_bad_importance_shows_the_facades_sentence_and_changes_nothing(
    site, owner_settings, embedder, seeded
):
    url, chromium = site
    page = await chromium.new_page()
    target = seeded["staging"]
    await page.goto(f"{url}/memory/{target}")
    await page.fill("#importance", "HUGE")
    await page.click("[data-action=save]")
    error = await page.inner_text("[data-error]")
    assert "importance" in error and "CRITICAL" in error
    async with Memory.open(settings=owner_settings, embedder=embedder) as mem:
        assert (await mem.get(target)).importance == 5.0


async def test_a_reflection_pass_shows_live_progress_and_lands_in_the_chart(
    site, owner_settings, embedder, monkeypatch
):
    url, chromium = site
    # A pass over 300 rows can end before a loaded machine has rendered the run's page, which
    # then shows the report without following anything: hold the pass until the page listens.
    listening = threading.Event()
    events, reflect = console_runs.Runs.events, console_runs._reflect

    async def listened(self, run):
        listening.set()
        async for state in events(self, run):
            yield state

    async def once_listened(run, memory, steps):
        await anyio.to_thread.run_sync(listening.wait, 30)
        await reflect(run, memory, steps)

    monkeypatch.setattr(console_runs.Runs, "events", listened)
    monkeypatch.setattr(console_runs, "_reflect", once_listened)
    async with Memory.open(settings=owner_settings, embedder=embedder) as mem:
        with time_machine.travel(YEAR_AGO):  # learned a year ago
            await mem.author_many(
                [
                    {"content": f"Parking {uuid.uuid4().hex}", "importance": "TRIVIAL"}
                    for _ in range(300)
                ]
            )
    page = await chromium.new_page()
    await page.goto(url + "/stats")
    assert await page.locator("svg.chart g.column").count() == 0
    await page.click("[data-action=reflect]")
    await page.wait_for_selector("#run")
    run_id = await page.get_attribute("#run", "data-run")
    await page.wait_for_selector("table[data-report]", timeout=60_000)
    assert await page.get_attribute("#run", "data-status") == "completed"
    steps = await page.locator("table[data-report] tr[data-step]").all_inner_texts()
    assert [s.split()[0] for s in steps] == ["merge", "link", "rescore", "prune"]
    assert steps[-1].split()[1:3] == ["300", "300"]  # planned, applied
    # The page followed the pass by server-sent events before it showed the report.
    followed = await page.evaluate(f"sessionStorage.getItem('nooa-run-{run_id}')")
    assert followed is not None and int(followed) >= 1
    await page.goto(url + "/stats")
    assert await page.locator("svg.chart g.column").count() == 1
    await shot(page, "stats")


async def test_the_stats_page_charts_the_kpis_each_pass_logged_one_point_per_pass(
    site, owner_settings, embedder
):
    url, chromium = site
    async with Memory.open(settings=owner_settings, embedder=embedder) as mem:
        # A pass logged before passes carried their KPIs: a column, but no point.
        async with mem.engine.store.transaction():
            await mem.engine.store.log_maintenance(
                "reflection", {"status": "completed", "steps": [], "role": mem.role}
            )
        await mem.reflect(["rescore"])
        await mem.recall(QUERY, k=1)
        await mem.reflect(["rescore"])
        logged = [e.report.get("kpis") for e in reversed(await mem.maintenance_log())]
    assert logged[0] is None
    snapshots = logged[1:]
    assert snapshots[0]["never_fetched_share"] > snapshots[1]["never_fetched_share"]
    page = await chromium.new_page()
    await page.goto(url + "/stats")
    assert await page.locator("svg.chart g.column").count() == 3
    chart = page.locator("svg.kpi-chart")
    assert await chart.get_attribute("data-passes") == "2"
    left, top, right, bottom = map(float, (await chart.get_attribute("data-box")).split())
    keys = await chart.locator("g.kpi").evaluate_all("gs => gs.map(g => g.dataset.kpi)")
    assert set(keys) == {"never_fetched_share", "top10pct_read_share"} | {
        "reflection_reads_share",
        "archived_share",
    }
    for key in keys:
        dots = await chart.locator(f"g[data-kpi={key}] circle.kpi-dot").evaluate_all(
            "ds => ds.map(d => [+d.dataset.value, +d.getAttribute('cx'), +d.getAttribute('cy')])"
        )
        assert [v for v, _, _ in dots] == [s[key] for s in snapshots]
        assert [y for _, _, y in dots] == pytest.approx(
            [bottom - s[key] * (bottom - top) for s in snapshots], abs=0.01
        )
        assert left < dots[0][1] < dots[1][1] < right
        points = await chart.locator(f"g[data-kpi={key}] polyline").get_attribute("points")
        assert len(points.split()) == 2
    assert await page.locator("table.kpi-history tbody tr").count() == 2
    # The lines stand out from the page in light and in dark mode.
    for scheme in ("light", "dark"):
        await page.emulate_media(color_scheme=scheme)
        stroke, background = await page.evaluate(
            """() => [getComputedStyle(document.querySelector('svg.kpi-chart polyline')).stroke,
                      getComputedStyle(document.documentElement).backgroundColor]"""
        )
        assert stroke not in (background, "none", "")
        await shot(page, f"stats-kpis-{scheme}")


async def test_the_link_graph_shows_two_hops_of_links_whichever_way_they_point(linked, site):
    url, chromium = site
    seeded = linked
    page = await chromium.new_page()
    await page.goto(f"{url}/memory/{seeded['staging']}/graph")
    nodes = page.locator("svg.graph circle.node")
    assert sorted(
        [await nodes.nth(i).get_attribute("data-id") for i in range(await nodes.count())]
    ) == sorted([seeded["staging"], seeded["deploys"], seeded["keys"]])
    edges = page.locator("svg.graph line.edge")
    assert {
        (await edges.nth(i).get_attribute("data-type")) for i in range(await edges.count())
    } == {"related", "supports"}
    await page.goto(f"{url}/memory/{seeded['staging']}/graph?hops=1")
    assert await page.locator("svg.graph circle.node").count() == 2
    await shot(page, "graph")
    # keys has no outgoing link: deploys shows through the link that points at keys.
    await page.goto(f"{url}/memory/{seeded['keys']}/graph?hops=1")
    nodes = page.locator("svg.graph circle.node")
    assert sorted(
        [await nodes.nth(i).get_attribute("data-id") for i in range(await nodes.count())]
    ) == sorted([seeded["keys"], seeded["deploys"]])
    edge = page.locator("svg.graph line.edge")
    assert (await edge.get_attribute("data-src"), await edge.get_attribute("data-dst")) == (
        seeded["deploys"],
        seeded["keys"],
    )


async def test_lists_filter_by_tag_type_and_archived_state(site, seeded):
    url, chromium = site
    page = await chromium.new_page()
    await page.goto(url + "/memories?tag=security")
    ids = await page.locator("table.list tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.id)"
    )
    assert sorted(ids) == sorted([seeded["keys"], seeded["bastion"]])
    await page.select_option("#type", "todo")
    await page.click("form.filters button")
    assert await page.locator("[data-empty]").count() == 1


async def test_reading_works_without_javascript(site, seeded):
    url, chromium = site
    context = await chromium.new_context(java_script_enabled=False)
    page = await context.new_page()
    await page.goto(url + "/?q=SSH+keys")
    assert await page.locator("table.results svg.bar rect.part").count() > 0
    await page.click("table.results tbody tr:nth-child(2) details summary")
    await page.click("table.results tbody tr:nth-child(2) details a")
    # The link's page, loaded: a count taken at once can read the search page still (CI
    # under load counted 0 there).
    await page.wait_for_url("**/why?*")
    await page.wait_for_load_state()
    assert await page.locator("[data-reason]").count() == 1
    await page.goto(f"{url}/memory/{seeded['keys']}")
    assert await page.locator("svg.timeline circle.dot").count() >= 1
    # A reflection pass is followed by the page reloading itself until the report is in.
    await page.goto(url + "/stats")
    await page.click("[data-action=reflect]")
    await page.wait_for_selector("table[data-report]")
    await context.close()


async def test_keyboard_alone_reaches_search_and_opens_a_result(site, seeded):
    url, chromium = site
    page = await chromium.new_page()
    await page.goto(url + "/memories")
    await page.keyboard.press("/")
    assert await page.evaluate("document.activeElement.tagName") == "BODY"  # no box here
    await page.goto(url + "/")
    await page.evaluate("document.activeElement.blur()")
    await page.keyboard.press("/")
    await page.keyboard.type("vault")
    await page.keyboard.press("Enter")
    await page.wait_for_selector("table.results")
    for _ in range(30):
        await page.keyboard.press("Tab")
        href = await page.evaluate("document.activeElement.getAttribute('href') || ''")
        if "/memory/" in href:
            break
    await page.keyboard.press("Enter")
    await page.wait_for_selector("article.memory")
    assert await page.get_attribute("article.memory", "data-id") == seeded["keys"]


async def test_dark_mode_follows_the_system_setting(linked, site, owner_settings, embedder):
    url, chromium = site
    async with Memory.open(settings=owner_settings, embedder=embedder) as mem:
        for query in (QUERY, "SSH keys vault", "who approves production deploys"):
            await mem.recall(query, k=3)
    colours = {}
    for scheme in ("light", "dark"):
        context = await chromium.new_context(
            color_scheme=scheme, viewport={"width": 1100, "height": 760}
        )
        page = await context.new_page()
        await page.goto(url + "/?q=" + QUERY.replace(" ", "+"))
        colours[scheme] = await page.evaluate(
            "getComputedStyle(document.documentElement).backgroundColor"
        )
        second = page.locator("table.results tbody tr").nth(1)
        await second.locator("details summary").click()
        await second.locator("[data-reason]").wait_for()
        await shot(page, f"search-{scheme}")
        await page.goto(f"{url}/memory/{linked['keys']}")
        await shot(page, f"memory-{scheme}")
        await context.close()
    assert colours["light"] != colours["dark"]
