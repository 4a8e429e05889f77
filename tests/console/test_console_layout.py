"""The console's pages as a person sees them at 1280×900, light and dark: nothing wider than the
window, a link graph laid out in two dimensions with whole labels, charts with axes and
values, and marker labels that keep clear of the axes and of each other.

Every page is screenshotted into tests/console/artifacts/ (layout-<page>-<scheme>.png).
"""

from __future__ import annotations

import re

import pytest
from browsing import console_at, shot

from nooa_mcp import Memory
from nooa_mcp.console import TokenLogin
from nooa_mcp.domain.forgetting import prune_eta

pytestmark = pytest.mark.anyio

QUERY = "where are the production SSH keys"
VIEWPORT = {"width": 1280, "height": 900}

#: Every element's box against the window, except the skip link and visually hidden labels,
#: which sit off screen on purpose until they are focused.
OVERFLOW = """() => {
  const vw = document.documentElement.clientWidth;
  const wide = [];
  for (const el of document.querySelectorAll('body *')) {
    if (el.closest('.skip, .visually-hidden')) continue;
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (r.right > vw + 0.5 || r.left < -0.5) {
      const cls = typeof el.className === 'string' ? el.className : el.className.baseVal;
      const where = `[${Math.round(r.left)}, ${Math.round(r.right)}]`;
      wide.push(`${el.tagName.toLowerCase()}.${cls} ${where}`);
    }
  }
  return {scroll: document.documentElement.scrollWidth, vw, wide};
}"""

#: Pairs of SVG texts (by selector) whose boxes intersect.
OVERLAPS = """([svg, selector]) => {
  const texts = [...document.querySelectorAll(svg + ' ' + selector)];
  const boxes = texts.map(t => t.getBoundingClientRect());
  const out = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i], b = boxes[j];
    const across = a.left < b.right - 0.5 && b.left < a.right - 0.5;
    if (across && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5)
      out.push([texts[i].textContent.trim(), texts[j].textContent.trim()]);
  }
  return out;
}"""


@pytest.fixture
async def hub(owner_settings, embedder, linked) -> dict[str, str]:
    """The linked facts with deploys at the centre of five links, and passes in the log."""
    async with Memory.open(settings=owner_settings, embedder=embedder) as mem:
        await mem.link(linked["bastion"], linked["keys"], "related", "WEAK")
        await mem.link(linked["lunch"], linked["deploys"], "precedes")
        await mem.link(linked["deploys"], linked["bastion"], "causes")
        # Starts like deploys for 58 characters: its label must not read like deploys'.
        alike = await mem.author(
            "Deploys to production need two approvals in the release chat, on Fridays three",
            tags=["ops"],
        )
        await mem.link(alike.id, linked["deploys"], "related")
        for query in (QUERY, "who approves deploys"):
            await mem.recall(query, k=3)
        await mem.reflect(["rescore"])
        await mem.reflect(["rescore"])
    return linked


async def open_why(page) -> None:
    second = page.locator("table.results tbody tr").nth(1)
    await second.locator("details summary").click()
    await second.locator("[data-reason]").wait_for()


async def test_no_page_is_wider_than_the_window_in_light_or_dark(site, hub):
    url, chromium = site
    pages = {
        "search": "/?q=" + QUERY.replace(" ", "+"),
        "why": f"/why?q={QUERY.replace(' ', '+')}&id={hub['bastion']}",
        "memories": "/memories",
        "memory": f"/memory/{hub['keys']}",
        "memory-fading": f"/memory/{hub['lunch']}",
        "graph": f"/memory/{hub['deploys']}/graph",
        "todos": "/todos",
        "intents": "/intents",
        "stats": "/stats",
    }
    problems = {}
    for scheme in ("light", "dark"):
        context = await chromium.new_context(viewport=VIEWPORT, color_scheme=scheme)
        page = await context.new_page()
        for name, path in pages.items():
            response = await page.goto(url + path)
            assert response.status == 200, (name, response.status)
            if name == "search":
                await open_why(page)
            found = await page.evaluate(OVERFLOW)
            if found["scroll"] > found["vw"] or found["wide"]:
                problems[f"{name}-{scheme}"] = found
            await shot(page, f"layout-{name}-{scheme}")
        # The page a pass started from the stats page runs on, once it has finished.
        await page.goto(url + "/stats")
        await page.click("[data-action=reflect]")
        await page.wait_for_selector("table[data-report]", timeout=60_000)
        found = await page.evaluate(OVERFLOW)
        if found["scroll"] > found["vw"] or found["wide"]:
            problems[f"reflect-{scheme}"] = found
        await shot(page, f"layout-reflect-{scheme}")
        await context.close()
    assert problems == {}


async def test_opening_why_not_first_keeps_the_table_and_its_bars_in_place(site, hub):
    url, chromium = site
    context = await chromium.new_context(viewport=VIEWPORT)
    page = await context.new_page()
    await page.goto(url + "/?q=" + QUERY.replace(" ", "+"))
    columns = "ths => ths.map(th => Math.round(th.getBoundingClientRect().width))"
    before = await page.locator("table.results thead th").evaluate_all(columns)
    await open_why(page)
    after = await page.locator("table.results thead th").evaluate_all(columns)
    assert after == before  # opening the panel reflows nothing
    cell = await page.locator("table.results tbody tr").nth(1).locator("td.why").bounding_box()
    table = await page.locator("table.results").bounding_box()
    bars = page.locator("table.results tbody tr").nth(1).locator(".whynot svg.bar")
    assert await bars.count() == 2
    for i in range(2):
        box = await bars.nth(i).bounding_box()
        assert cell["x"] <= box["x"] and box["x"] + box["width"] <= cell["x"] + cell["width"] + 0.5
        assert box["x"] + box["width"] <= table["x"] + table["width"]
    await context.close()


async def test_the_link_graph_uses_two_dimensions_and_whole_labels(site, hub):
    url, chromium = site
    context = await chromium.new_context(viewport=VIEWPORT)
    page = await context.new_page()
    await page.goto(f"{url}/memory/{hub['deploys']}/graph")
    nodes = await page.locator("svg.graph circle.node").evaluate_all(
        "cs => cs.map(c => [c.dataset.id, +c.getAttribute('cx'), +c.getAttribute('cy')])"
    )
    assert len(nodes) == 6
    xs = sorted(x for _, x, _ in nodes)
    ys = sorted(y for _, _, y in nodes)
    # Not one column, not one row: spread across the page's width and down.
    assert xs[-1] - xs[0] > 400 and ys[-1] - ys[0] > 100
    assert len({round(x) for x in xs}) >= 4 and len({round(y) for y in ys}) >= 3
    labels = await page.locator("svg.graph text.node-label").evaluate_all(
        "ts => ts.map(t => [t.dataset.id,"
        " [...t.querySelectorAll('tspan')].map(s => s.textContent)])"
    )
    for memory_id, lines in labels:
        text = await page.locator(f"svg.graph circle[data-id='{memory_id}'] title").text_content()
        content = text.split(": ", 1)[1]
        shown = " ".join(lines)
        # Wrapped into lines, not cut at a couple of dozen characters.
        if len(content) <= 60:
            assert shown == content
        else:
            assert len(shown) > 50
            words = shown.removesuffix(f" ({memory_id[:8]})").rstrip("…")
            assert content.startswith(words)
    # Two memories that start alike do not read alike.
    assert len({" ".join(lines) for _, lines in labels}) == len(labels)
    assert await page.evaluate(OVERLAPS, ["svg.graph", "text.node-label"]) == []
    await context.close()


async def test_the_reflection_chart_has_a_count_axis_and_each_pass_its_total(site, hub):
    url, chromium = site
    page = await chromium.new_page()
    await page.goto(url + "/stats")
    ticks = await page.locator("svg.chart text.count-tick").all_text_contents()
    assert len(ticks) >= 2 and ticks[0] == "0" and all(t.isdigit() for t in ticks)
    columns = page.locator("svg.chart g.column")
    assert await columns.count() == 2
    for i in range(2):
        total = await columns.nth(i).get_attribute("data-total")
        assert await columns.nth(i).locator("text.column-total").text_content() == total
    assert int(ticks[-1]) >= max(
        [int(await columns.nth(i).get_attribute("data-total")) for i in range(2)]
    )
    assert "changes per pass" in await page.locator("svg.chart").text_content()
    last = await page.locator("[data-last-pass]").text_content()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", last), last  # no ISO T, no microseconds
    kpi_titles = await page.locator("svg.kpi-chart text.axis-title").count()
    assert kpi_titles == 1


async def test_a_memory_pruning_never_takes_draws_no_prune_date(
    site, hub, owner_settings, embedder
):
    url, chromium = site
    async with Memory.open(settings=owner_settings, embedder=embedder) as mem:
        view = await mem.get(hub["keys"])  # HIGH: importance 8
    # No prune date, as recall and explain give none (list --json and recall --json
    # disagreed); the curve is drawn to where it would cross the line.
    assert view.protected and view.prune_eta is None
    crossing = prune_eta(view.last_accessed_at, view.strength, owner_settings.forgetting)
    page = await chromium.new_page()
    await page.goto(f"{url}/memory/{hub['keys']}")
    assert "Never pruned" in await page.locator("#ret-h + p").text_content()
    assert await page.locator("svg.curve line.eta").count() == 0
    assert await page.locator("svg.curve [data-label=eta]").count() == 0
    assert await page.get_attribute("svg.curve", "data-eta") == ""
    # The curve still shows how it would fade: it runs past the date it reaches the line.
    end = await page.get_attribute("svg.curve", "data-end")
    assert end > crossing.isoformat()


async def test_marker_labels_keep_clear_of_the_axes_and_of_each_other(site, hub):
    url, chromium = site
    page = await chromium.new_page()
    for memory in ("keys", "lunch"):  # "today" at the y-axis (just used), and far from it
        await page.goto(f"{url}/memory/{hub[memory]}")
        axis_x = float(await page.get_attribute("svg.curve", "data-left"))
        svg_box = await page.locator("svg.curve").bounding_box()
        scale = svg_box["width"] / 720
        today = await page.locator("svg.curve [data-label=today]").bounding_box()
        assert today["x"] > svg_box["x"] + axis_x * scale  # right of the y-axis, not on it
        texts = "text.tick, text.mark-label, text.axis-title"
        assert await page.evaluate(OVERLAPS, ["svg.curve", texts]) == []
        assert await page.evaluate(OVERLAPS, ["svg.timeline", "text"]) == []


async def test_the_sign_in_page_fits_the_window_in_light_and_dark(
    owner_settings, embedder, hub, site
):
    _, chromium = site
    problems = {}
    async with console_at(owner_settings, embedder, TokenLogin({"a" * 32: "alice@laptop"})) as url:
        for scheme in ("light", "dark"):
            context = await chromium.new_context(viewport=VIEWPORT, color_scheme=scheme)
            page = await context.new_page()
            await page.goto(url + "/memories")
            assert "/login" in page.url
            await page.locator("#token").wait_for()
            found = await page.evaluate(OVERFLOW)
            if found["scroll"] > found["vw"] or found["wide"]:
                problems[scheme] = found
            await shot(page, f"layout-login-{scheme}")
            await context.close()
    assert problems == {}
