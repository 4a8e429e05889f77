"""The reading pages: search with score bars, a memory, lists, todos, intents, KPIs, links.

Every page reads through the Memory facade's dry-run and view verbs, so looking at memory
never changes it: no access is logged, no reminder fires, nothing is reinforced.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any

from starlette.responses import Response

from .. import InvalidInput, MemoryType
from ..cursors import CURSORS
from ..domain.forgetting import prune_eta
from ..errors import NotFound
from . import svg
from .auth import LoopbackOnly
from .web import Page

BAR_WIDTH = 260.0
#: A row of the access timeline per channel; `shown` is a weak recall hit (never a use).
LANES = (
    "created",
    "recalled",
    "searched",
    "shown",
    "reinforced",
    "deref",
    "injected",
    "reflected",
)
STEPS = ("merge", "reconcile", "link", "rescore", "abstract", "prune")
TIMELINE = {"left": 90.0, "right": 700.0, "top": 8.0, "lane": 18.0}
#: (left, top, right, bottom) of each chart inside its 720-pixel-wide picture: room on the
#: left for the y-axis ticks and title, above for marker labels, below for time ticks.
CURVE_BOX = (64.0, 34.0, 700.0, 176.0)
CHART_BOX = (64.0, 22.0, 700.0, 170.0)
KPI_BOX = (64.0, 10.0, 700.0, 170.0)
#: The shares each reflection pass logs with its report (`services.views.KPI_SHARES`), as the
#: stats page labels them.
KPI_LINES = {
    "never_fetched_share": "never fetched",
    "reflection_reads_share": "reads of reflection output",
    "top10pct_read_share": "reads going to the top 10%",
    "archived_share": "archived (faded or forgotten)",
}
#: The link graph's picture: the page's width, taller as it holds more memories.
GRAPH_WIDTH = 1100.0
GRAPH_HEIGHTS = ((4, 300.0), (8, 420.0), (16, 540.0))
GRAPH_TALLEST = 660.0
#: Rows on one page of the memories list.
LIST_PAGE = 50
#: Todos shown per status: a person scans the first few.
TODO_LIMITS = {"open": 50, "done": 10, "dropped": 10}
#: Reflection passes the stats chart shows.
CHART_PASSES = 60
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _int(page: Page, name: str, default: int, low: int, high: int) -> int:
    raw = page.arg(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidInput(name, f"'{raw}' is not a whole number.", f"Use {low}–{high}.") from None
    if not low <= value <= high:
        raise InvalidInput(name, f"{value} is outside {low}–{high}.", f"Use {low}–{high}.")
    return value


def _after(page: Page) -> int | None:
    """Where a listing continues: the position behind the page's opaque `after` cursor."""
    position = CURSORS.resume(
        page.memory.owner,
        "/memories",
        page.arg("after"),
        "after",
        "Follow the More link of the page before, or start from the first page.",
    )
    return None if position is None else int(position)


#: The bars draw the score's terms (`ScoreTerms`), already scaled and weighted: each counts once.
TERM_WEIGHTS = dict.fromkeys(svg.PARTS, 1.0)


def parts(terms: Any) -> dict[str, float | None]:
    """The terms a score adds for rel, rec, imp and spread (explain's `terms`): the segments
    add up to the score, less its penalties."""
    return {p: None if terms is None else getattr(terms, p) for p in svg.PARTS}


async def other_roles(page: Page) -> dict[str, int]:
    """Other roles' live memories when the viewer sees none, on a console run by whoever holds
    the store (loopback, no tokens): an empty page must not read as an empty store. A token's
    owner is never told that other roles exist."""
    if not isinstance(page.console.auth, LoopbackOnly):
        return {}
    return await page.memory.other_roles()


async def ready(page: Page) -> None:
    """Wait for the embedding model (about a second after start) before ranking.

    A person asking why something ranks wants the ranking recall gives, not the keyword-only
    stand-in used while the model loads. If the model cannot load at all, the page still
    answers with keyword matches and says so (explain reports embeddings "warming").
    """
    with contextlib.suppress(Exception):
        await page.memory.wait_ready()


async def search(page: Page) -> Response:
    query = page.arg("q")
    k = _int(page, "k", 10, 1, 50)
    if not query:
        return page.render("search.html", query="", k=k, result=None, rows=[])
    await ready(page)
    result = await page.memory.explain(query, k=k)
    w = TERM_WEIGHTS
    values = [parts(r.terms) for r in result.rows]
    scale = svg.bar_scale(values, w, BAR_WIDTH)
    rows = [(r, svg.score_segments(v, w, scale)) for r, v in zip(result.rows, values, strict=True)]
    return page.render(
        "search.html",
        query=query,
        k=k,
        result=result,
        rows=rows,
        bar_width=BAR_WIDTH,
        weights=w,
        hidden=await other_roles(page) if not rows else {},
    )


async def why(page: Page) -> Response:
    query = page.arg("q")
    memory_id = page.arg("id")
    k = _int(page, "k", 1, 1, 50)
    if not query or not memory_id:
        raise InvalidInput("q", "and id are both needed.", "Open this from a search result.")
    await ready(page)
    try:
        result = await page.memory.explain(query, memory_id=memory_id, k=k)
    except NotFound as missing:
        # The console shows its role's and shared memories only: an id of a role the token
        # may read through MCP is not found here, as its memory page says, not "pass the
        # scope" (the console has no scope to pass).
        raise NotFound(memory_id, missing.field) from None
    answer = result.why_not
    assert answer is not None  # explain with a query and an id always says why (not)
    w = TERM_WEIGHTS
    bars = []
    for label, terms in (("this memory", answer.terms), (f"rank {k}", answer.kth_terms)):
        if terms is not None:
            bars.append((label, parts(terms)))
    scale = svg.bar_scale([v for _, v in bars], w, BAR_WIDTH)
    drawn = [(label, svg.score_segments(v, w, scale)) for label, v in bars]
    template = "why_fragment.html" if page.arg("fragment") else "why.html"
    return page.render(template, query=query, k=k, answer=answer, bars=drawn, bar_width=BAR_WIDTH)


async def memory(page: Page) -> Response:
    mem = page.memory
    view = await mem.get(page.request.path_params["memory_id"])
    log = await mem.access_log(view.id, limit=200)
    accesses = [a for _, a in reversed(log)]  # oldest first
    now = datetime.now(UTC)
    t = TIMELINE
    axis = svg.padded_axis([a.ts for a in accesses] + [now], t["left"], t["right"])
    marks = svg.timeline_marks(
        [(a.ts, a.channel.value) for a in accesses], axis, LANES, t["top"], t["lane"]
    )
    policy = mem.settings.forgetting
    # A memory pruning never takes has no prune date to mark, only a curve that fades: drawn
    # to where it crosses the prune line.
    fades_at = (
        None
        if view.archived
        else prune_eta(view.last_accessed_at, view.strength, policy, now, view.valid_from)
    )
    curve = svg.retention_curve(
        view.last_accessed_at,
        view.stability_hours,
        now,
        view.prune_eta,
        policy.prune_below,
        CURVE_BOX,
        fades_at=fades_at,
    )
    return page.render(
        "memory.html",
        view=view,
        accesses=accesses,
        marks=marks,
        axis=axis,
        lanes=LANES,
        timeline=t,
        total_accesses=sum(view.channels.values()),
        curve=curve,
        eta=view.prune_eta,
        tick_anchor=svg.tick_anchor,
        threshold=policy.prune_below,
        protected=view.protected,
        writable=view.writable,
        now=now,
    )


async def memories(page: Page) -> Response:
    kind = page.arg("type") or None
    if kind is not None and kind not in {t.value for t in MemoryType}:
        raise InvalidInput(
            "type",
            f"'{kind}' is not a memory type.",
            f"Use {', '.join(t.value for t in MemoryType)}.",
        )
    owner_arg = page.arg("owner")
    owner = None if not owner_arg else ("" if owner_arg == "(shared)" else owner_arg)
    state = page.arg("archived", "live")
    archived = {"live": False, "archived": True, "all": None}.get(state)
    if state not in ("live", "archived", "all"):
        raise InvalidInput("archived", f"'{state}' is not a state.", "Use live, archived or all.")
    after = _after(page)
    # One row more than a page says whether there is a next page.
    rows = await page.memory.list_memories(
        type=kind,
        owner=owner,
        tag=page.arg("tag") or None,
        archived=archived,
        after=after,
        limit=LIST_PAGE + 1,
    )
    filtered = any((kind, owner_arg, page.arg("tag"), after, state != "live"))
    return page.render(
        "memories.html",
        hidden=await other_roles(page) if not rows and not filtered else {},
        views=[v for _, v in rows[:LIST_PAGE]],
        # An opaque cursor, not the store's sequence number, which counts every role's rows.
        next_after=CURSORS.issue(page.memory.owner, "/memories", str(rows[LIST_PAGE - 1][0]))
        if len(rows) > LIST_PAGE
        else None,
        kind=kind or "",
        owner=owner_arg,
        tag=page.arg("tag"),
        state=state,
        types=[t.value for t in MemoryType],
    )


async def todos(page: Page) -> Response:
    """Todos by status; looking fires no reminder an agent is waiting for (`remind=False`)."""
    groups: dict[str, list[Any]] = {}
    more: set[str] = set()
    for status, limit in TODO_LIMITS.items():
        listed = await page.memory.todo("list", status=status, limit=limit + 1, remind=False)
        if len(listed.todos) > limit:
            more.add(status)
        groups[status] = listed.todos[:limit]
    return page.render("todos.html", groups=groups, more=more)


async def intents(page: Page) -> Response:
    """Armed intents, the soonest time trigger first; looking fires none of them."""
    listed = await page.memory.intent("list", remind=False)
    items = sorted(listed.intents, key=lambda i: (i.fire_at is None, i.fire_at or _EPOCH))
    return page.render("intents.html", items=items)


def applied_per_step(report: dict[str, Any]) -> dict[str, int]:
    """The changes each step of a logged reflection pass made."""
    return {str(s.get("step")): int(s.get("applied") or 0) for s in report.get("steps", [])}


def logged_kpis(report: dict[str, Any]) -> dict[str, float] | None:
    """The KPI snapshot a reflection pass logged, or None (passes logged before there was one)."""
    kpis = report.get("kpis")
    if not isinstance(kpis, dict):
        return None
    numbers = {
        str(k): float(v)
        for k, v in kpis.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }
    return numbers or None


async def stats(page: Page) -> Response:
    numbers = await page.memory.stats()
    log = await page.memory.maintenance_log("reflection", limit=CHART_PASSES)
    passes = [(entry.ts, applied_per_step(entry.report)) for entry in reversed(log)]
    counts = svg.count_ticks(max((sum(c.values()) for _, c in passes), default=0))
    columns = svg.stacked_columns(passes, STEPS, CHART_BOX, scale_max=counts[-1])
    top, bottom = CHART_BOX[1], CHART_BOX[3]
    count_axis = [(n, round(bottom - n / counts[-1] * (bottom - top), 2)) for n in counts]
    last = numbers.extra.get("last_reflection_at")
    snapshots = [(e.ts, kpis) for e in reversed(log) if (kpis := logged_kpis(e.report))]
    kpi_chart = svg.share_lines(snapshots, list(KPI_LINES), KPI_BOX)
    return page.render(
        "stats.html",
        hidden=await other_roles(page) if numbers.active == 0 else {},
        stats=numbers,
        kpis=numbers.extra,
        passes=passes,
        columns=columns,
        count_axis=count_axis,
        last_pass=datetime.fromisoformat(last) if isinstance(last, str) else None,
        tick_anchor=svg.tick_anchor,
        steps=STEPS,
        box=CHART_BOX,
        snapshots=snapshots,
        kpi_chart=kpi_chart,
        kpi_lines=KPI_LINES,
        kpi_box=KPI_BOX,
        running=page.console.runs.active(page.owner),
        store_name=numbers.store.rsplit("/", 1)[-1],
    )


async def graph(page: Page) -> Response:
    hops = _int(page, "hops", 2, 1, 2)
    hood = await page.memory.neighbourhood(page.request.path_params["memory_id"], hops=hops)
    height = next((h for n, h in GRAPH_HEIGHTS if len(hood.nodes) <= n), GRAPH_TALLEST)
    labels = {i: v.title or v.content for i, v in hood.nodes.items()}
    edges = [(e.src, e.dst) for e in hood.edges]
    pos = svg.force_layout(hood.center, hood.rings, edges, labels, GRAPH_WIDTH, height)
    return page.render(
        "graph.html", hood=hood, pos=pos, width=GRAPH_WIDTH, height=height, hops=hops
    )
