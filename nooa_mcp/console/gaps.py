"""Adapters for what the console needs and the Memory facade does not offer yet.

Each function here is built on public facade verbs (and, for the maintenance log only, on
`memory.engine.store.maintenance_entries`). Each is a stand-in for a facade verb; the suggested verb
is named in its docstring, and the console calls nothing else for these needs, so replacing
this module is the whole change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from .. import InvalidInput, Memory, NotFound, OwnerForbidden

if TYPE_CHECKING:  # reply models are read through the verbs' return values only
    from ..domain.replies import AuthorResult, MemoryView, UpdateResult

# --------------------------------------------------------------------------- revive


async def revive(memory: Memory, memory_id: str) -> AuthorResult:
    """Restore a forgotten memory by id. Suggested verb: `Memory.revive(memory_id)`.

    The facade revives only through `author(content, revive=True)`, which matches the
    content against this role's tombstones. The checks below keep that from doing anything
    but reviving this very memory: it must be archived and writable by this owner, and a
    different outcome (another memory's tombstone, a live copy) is reported, not kept quiet.
    What they cannot rule out: an archived memory without a standing tombstone (every archive
    path leaves one today) would be written anew by `author`. A facade verb that revives by
    id has no such edge.
    """
    view = await memory.get(memory_id)
    if not view.archived:
        raise InvalidInput("memory_id", f"{view.id[:8]} is not forgotten.", "Nothing to revive.")
    _writable(memory, view)
    fields: dict = {"type": view.type.value, "title": view.title, "revive": True}
    if view.trigger:
        fields["trigger"] = {k: view.trigger.get(k) for k in ("fire_at", "cue", "every_hours")}
    result = await memory.author(view.content, **fields)
    if result.status == "revived" and result.id != view.id:
        raise InvalidInput(
            "memory_id",
            f"{view.id[:8]} shares its content with {result.id[:8]}, forgotten later, and "
            f"reviving restored {result.id[:8]} instead.",
            f"Open {result.id[:8]}; forget it again if it should stay forgotten.",
        )
    if result.status != "revived":
        raise InvalidInput(
            "memory_id",
            f"{view.id[:8]} could not be revived: writing its content again answered "
            f"'{result.status}' for {result.id[:8]}.",
            "Open that memory instead.",
        )
    return result


def may_write(memory: Memory, view: MemoryView) -> bool:
    """The facade's write rule (SPEC §10), to offer only the buttons that can work.

    Suggested field: `MemoryView.writable`. The facade still refuses on its own; this only
    decides what the page shows (and guards `revive`, which goes through `author`).
    """
    if view.owner == memory.owner:
        return True
    role = memory.owner.partition("@")[0]
    return view.owner != "" and view.owner.partition("@")[0] == role


def _writable(memory: Memory, view: MemoryView) -> None:
    if not may_write(memory, view):
        raise OwnerForbidden(memory.owner, view.owner)


# --------------------------------------------------------------------------- todos and intents


async def todos(
    memory: Memory, limits: dict[str, int] | None = None
) -> dict[str, list[MemoryView]]:
    """Live todos by status: open ones by importance, then oldest first; done and dropped.

    Suggested verb: `todo("list", status=...)` without firing reminders. The todo and intent
    verbs fire due intents as a side effect; a person browsing must not consume the reminders
    an agent is waiting for, so the console reads through `list_memories`. Each status shows
    at most its limit (default 50 open, 10 done, 10 dropped; every row is a full view, about
    a millisecond each at 10k), the first written first; `more` says which statuses have more.
    """
    limits = limits or {"open": 50, "done": 10, "dropped": 10}
    out: dict[str, list[MemoryView]] = {}
    more: set[str] = set()
    for status, limit in limits.items():
        page = await memory.list_memories(type="todo", status=status, limit=limit + 1)
        if len(page) > limit:
            more.add(status)
        views = [v for _, v in page[:limit]]
        out[status] = sorted(views, key=lambda v: (-v.importance, v.created_at))
    return out, more


async def intents(memory: Memory, cap: int = 500) -> list[MemoryView]:
    """Live intents (at most `cap`), soonest time trigger first. Suggested verb:
    `intent("list")` without firing reminders (see `todos`)."""
    items = await _all(memory, "intent", cap)
    far = "9999"
    return sorted(items, key=lambda v: ((v.trigger or {}).get("fire_at") or far, v.created_at))


async def set_todo_status(memory: Memory, memory_id: str, status: str) -> UpdateResult:
    """Close (done, dropped) or reopen a todo. Suggested verb: `todo("done"|"drop"|"reopen")`
    without firing reminders."""
    view = await memory.get(memory_id)
    if view.type.value != "todo":
        raise InvalidInput("memory_id", f"{view.id[:8]} is a {view.type.value}, not a todo.", "")
    return await memory.update(view.id, status=status)


async def cancel_intent(memory: Memory, memory_id: str) -> UpdateResult:
    """Cancel an intent (archived, tombstoned). Suggested verb: `intent("cancel")` without
    reminders."""
    view = await memory.get(memory_id)
    if view.type.value != "intent":
        raise InvalidInput("memory_id", f"{view.id[:8]} is a {view.type.value}, not an intent.", "")
    return await memory.forget(view.id, reason="intent cancelled")


async def _all(memory: Memory, kind: str, cap: int) -> list[MemoryView]:
    out: list[MemoryView] = []
    after = None
    while len(out) < cap:
        page = await memory.list_memories(type=kind, limit=500, after=after)
        out += [v for _, v in page]
        if len(page) < 500:
            break
        after = page[-1][0]
    return out[:cap]


# --------------------------------------------------------------------------- filtered listing


@dataclass
class Listing:
    views: list[MemoryView]
    next_after: int | None  # cursor to continue from, None at the end
    scanned: int


async def list_filtered(
    memory: Memory,
    *,
    type: str | None,
    owner: str | None,
    tag: str | None,
    archived: bool | None,
    after: int | None,
    limit: int = 50,
    scan: int = 250,
) -> Listing:
    """One page of memories with the owner and tag filters applied.

    Suggested verb: `list_memories(..., owner=, tag=)` filtered in SQL. Until then the rows
    are filtered here, and a page scans at most `scan` rows so that a rare tag costs a bounded
    time per page (the page says how far it looked and offers to go on).
    """
    wanted_tag = tag.strip().lower() if tag else None
    views: list[MemoryView] = []
    scanned = 0
    cursor = after
    filtered = owner is not None or bool(wanted_tag)
    while scanned < scan:
        # Each row becomes a full view (edges, references): fetch no more than can be shown.
        want = min(100 if filtered else limit - len(views), scan - scanned)
        # One row more than is looked at says whether the store goes on after this page.
        page = await memory.list_memories(
            archived=archived, type=type, after=cursor, limit=want + 1
        )
        more = len(page) > want
        looked = page[:want]
        for i, (seq, view) in enumerate(looked):
            scanned += 1
            cursor = seq
            if owner is not None and view.owner != owner:
                continue
            if wanted_tag and wanted_tag not in (t.lower() for t in view.tags):
                continue
            views.append(view)
            if len(views) == limit:
                return Listing(views, seq if more or i < len(looked) - 1 else None, scanned)
        if not more:
            return Listing(views, None, scanned)
    return Listing(views, cursor, scanned)


# --------------------------------------------------------------------------- link neighbourhood


@dataclass
class Neighbourhood:
    center: str
    nodes: dict[str, MemoryView]
    edges: list[tuple[str, str, str, float]]  # (src, dst, type, weight)
    rings: list[list[tuple[str, str]]] = field(default_factory=list)  # (node, parent) per hop
    truncated: bool = False


async def neighbourhood(
    memory: Memory, memory_id: str, hops: int = 2, fanout: int = 8, cap: int = 40
) -> Neighbourhood:
    """The memories within `hops` outgoing links of one memory, as the reader may see them.

    Suggested verb: `Memory.neighbourhood(memory_id, hops)` with incoming edges too: the
    facade's views list outgoing edges only, so a memory that refines this one does not show
    here until it does.
    """
    center = await memory.get(memory_id)
    nodes = {center.id: center}
    edges: list[tuple[str, str, str, float]] = []
    frontier = [center]
    hood = Neighbourhood(center.id, nodes, edges)
    for _ in range(max(1, min(hops, 2))):
        ring: list[tuple[str, str]] = []
        for view in frontier:
            ranked = sorted(view.edges, key=lambda e: -float(e.get("weight", 1.0)))
            hood.truncated |= len(ranked) > fanout
            for edge in ranked[:fanout]:
                target = edge["target"]
                edges.append((view.id, target, edge["type"], float(edge.get("weight", 1.0))))
                if target in nodes:
                    continue
                if len(nodes) >= cap:
                    hood.truncated = True
                    continue
                try:
                    nodes[target] = await memory.get(target)
                except NotFound:
                    continue
                ring.append((target, view.id))
        hood.rings.append(ring)
        frontier = [nodes[n] for n, _ in ring]
    hood.edges = [e for e in edges if e[1] in nodes]
    return hood


# --------------------------------------------------------------------------- forgetting


def stability_hours(memory: Memory, view: MemoryView) -> float:
    """S of the forgetting curve R = exp(−Δt/S). Suggested field: `MemoryView.stability_hours`.

    Read off the view's prune ETA (ETA = last access + S·ln(1/threshold)) so the console does
    not restate the forgetting model; an archived memory has no ETA, and then S comes from τ
    and the strength as SPEC §7 defines it.
    """
    policy = memory.settings.forgetting
    if view.prune_eta is not None:
        hours = (view.prune_eta - view.last_accessed_at).total_seconds() / 3600
        return hours / math.log(1 / policy.prune_below)
    return policy.tau_hours * (1 + math.log1p(max(view.strength, 0)))


def protection(memory: Memory, view: MemoryView) -> str | None:
    """Why pruning will never take this memory, or None. Suggested field:
    `MemoryView.protected` (the rule of SPEC §7, stated once in the facade)."""
    policy = memory.settings.forgetting
    if view.type.value in policy.protected_types:
        return f"type {view.type.value} is protected"
    if view.type.value == "todo" and (view.status or "open") == "open":
        return "open todos are protected"
    if view.importance >= policy.protected_importance:
        return f"importance ≥ {policy.protected_importance:g} is protected"
    return None


# --------------------------------------------------------------------------- maintenance log


@dataclass
class Pass:
    when: datetime
    status: str
    trigger: str
    applied: dict[str, int]


async def reflection_history(memory: Memory, limit: int = 60) -> list[Pass]:
    """The latest reflection passes, oldest first, with the changes each step made.

    Suggested verb: `Memory.maintenance_log(kind, limit)` at the caller's role, carrying a KPI
    snapshot per pass so the console can chart never-fetched share over time. Only this role's
    passes are read, and only their counts.
    """
    entries = await memory.engine.store.maintenance_entries("reflection", limit, role=memory.role)
    out = []
    for entry in reversed(entries):
        report = entry.report
        applied = {
            str(s.get("step")): int(s.get("applied", 0) or 0) for s in report.get("steps", [])
        }
        out.append(
            Pass(entry.ts, str(report.get("status", "")), str(report.get("trigger", "")), applied)
        )
    return out
