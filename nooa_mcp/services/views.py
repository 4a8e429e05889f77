"""Views: a memory as a reader sees it, listings, access histories, the context block and
statistics. Reading a record is a look, not a use: nothing here reinforces.

Everything is gated by the reader's scope: edges to hidden memories, hidden references and
other roles' queries in access histories are left out or redacted.
"""

from __future__ import annotations

import math
import statistics

from ..domain.forgetting import prune_eta, retention, stability_hours
from ..domain.replies import Flags, MaintenanceRecord, MemoryView, Stats
from ..domain.schema import (
    IMPORTANCE,
    MAINTENANCE_KINDS,
    AccessRecord,
    Memory,
    now as utc_now,
    refuse_unstorable,
)
from ..domain.scope import Scope, owner_role, parse_owner
from ..domain.text import choices
from ..errors import InvalidInput
from ..storage.base import Counts, KpiTotals
from .caller import Caller
from .corrections import kept_from_pruning, successor_of
from .references import resolve_all

__all__ = [
    "KPI_SHARES",
    "READ_CHANNELS",
    "access_log",
    "get",
    "kpi_shares",
    "kpi_snapshot",
    "list_memories",
    "maintenance_log",
    "recent_accesses",
    "redact",
    "stats",
    "view",
]

#: Channels that count as a read in the KPIs: deliberate fetches, not what the server showed.
READ_CHANNELS = ("recalled", "searched", "deref")
#: The KPIs a reflection pass logs and the console charts over passes: shares in [0, 1].
KPI_SHARES = (
    "never_fetched_share",
    "top10pct_read_share",
    "reflection_reads_share",
    "archived_share",
)
#: Edges a view lists (strongest first); `edges_total` says how many there are.
VIEW_EDGES = 50


#: What a reader outside the scope leaves on its access: its time and channel only.
_REDACTED: dict[str, object] = {
    "reader_owner": "",
    **dict.fromkeys(("query", "session_ref", "trace_ref", "score", "rank", "components")),
}


def redact(record: AccessRecord, scope: Scope) -> AccessRecord:
    """An access by a reader outside the scope: when and how it was used, not by whom nor
    for what.

    A shared memory is read by every role, and a granted role reads another's memories; one
    role's name, its queries (and the ids of its own memories in a deref note) and how well
    its query matched are not another's to read (DESIGN.md §10): the reader is left blank,
    as the shared owner's own accesses are, so no reply names a role the caller may not read.
    The shared owner's reads are the user's own (`Scope.shows_reads_of`): every role reads
    shared memories, but not what the user asked of them.
    """
    if scope.shows_reads_of(record.reader_owner):
        return record
    return record.model_copy(update=_REDACTED)


async def get(caller: Caller, memory_id: str, *, scope: str = "mine") -> MemoryView:
    """One memory with everything derived from it now (no access is logged).

    Raises:
        NotFound / AmbiguousId: the id does not name one memory in the scope.
    """
    scope_obj = caller.scope(scope)
    target = await caller.resolve(memory_id, scope_obj)
    return await view(caller, await caller.fetch(target), scope_obj)


async def view(
    caller: Caller,
    memory: Memory,
    scope: Scope,
    *,
    edge_limit: int | None = VIEW_EDGES,
    successor: bool = True,
) -> MemoryView:
    """A memory as a reader in `scope` sees it: only edges and references the scope shows.

    References are resolved live without logging deref: reading a record is a look, not a use.
    A reply shows the `edge_limit` strongest edges; an export asks for all of them (None),
    since a copy that kept only some would lose links its user made. `successor=False`
    (an export, which writes no flags) skips the look for a memory that supersedes it.
    """
    edges = await caller.store.edges_of(memory.id)
    owners = await caller.store.owners_of([e.target for e in edges]) if edges else {}
    visible = [e for e in edges if e.target in owners and scope.allows(owners[e.target])]
    own = owner_role(memory.owner) == caller.role
    if visible and not own:
        # Another's link to what another role forgot (`Caller.withdrawn`) is not there; a
        # role's own links stay (its export carries them, a revive brings the target back).
        gone = await caller.withdrawn_among(e.target for e in visible)
        visible = [e for e in visible if e.target not in gone]
    # A view is bounded like every reply: the strongest edges, and how many there are.
    strongest = sorted(visible, key=lambda e: (-e.weight, e.created_at))
    shown_edges = [e.model_dump(mode="json") for e in strongest[:edge_limit]]
    policy = caller.settings.forgetting
    now = utc_now()
    stale = memory.valid_to is not None and memory.valid_to < now
    protected = await kept_from_pruning(caller, memory, edges)
    # What recall ranks it below (a faded memory too: recall reaches it), so a listing says so
    # as a recall's flags do.
    forgotten = memory.archived and not memory.faded
    newer = None if forgotten or not successor else await successor_of(caller, memory, scope)
    references, _ = await resolve_all(caller, memory.references, scope, own=own)
    return MemoryView(
        id=memory.id,
        type=memory.type,
        owner=memory.owner,
        title=memory.title,
        content=memory.content,
        importance=memory.importance,
        importance_label=IMPORTANCE.label(memory.importance),
        salience=memory.salience,
        confidence=memory.confidence,
        strength=memory.strength,
        reinforcement_count=memory.reinforcement_count,
        access_count=memory.access_count,
        tags=memory.tags,
        entities=memory.entities,
        place_or_task=memory.place_or_task,
        created_at=memory.created_at,
        learned_at=memory.learned_at,
        last_accessed_at=memory.last_accessed_at,
        valid_from=memory.valid_from,
        valid_to=memory.valid_to,
        archived=memory.archived,
        status=memory.status,
        trigger=memory.trigger.model_dump(mode="json") if memory.trigger else None,
        edges=shown_edges,
        edges_total=len(visible),
        references=references,
        channels=memory.channels,
        sizes=memory.sizes,
        retention=round(retention(memory.fading_since, memory.strength, now, policy.tau_hours), 4),
        # When a pass would prune it: none for a memory pruning never takes (`protected`
        # says why), as recall and explain give none (DESIGN.md §7.3).
        prune_eta=None
        if memory.archived or protected
        else prune_eta(memory.last_accessed_at, memory.strength, policy, now, memory.valid_from),
        # To 4 places as retention: a reader draws the curve from it, and the prune ETA it
        # gives stays within a second of the view's own.
        stability_hours=round(stability_hours(memory.strength, policy.tau_hours), 4),
        protected=protected,
        writable=caller.may_write(memory.owner),
        flags=Flags(
            stale=stale,
            holds_from=memory.valid_from if memory.valid_from and memory.valid_from > now else None,
            faded=memory.archived and memory.faded,
            superseded_by=newer,
        ),
    )


async def list_memories(
    caller: Caller,
    *,
    archived: bool | None = False,
    limit: int = 50,
    after: int | None = None,
    type: str | None = None,
    status: str | None = None,
    owner: str | None = None,
    tag: str | None = None,
    scope: str = "mine",
) -> list[tuple[int, MemoryView]]:
    """Memories in insertion order with their cursor (seq); pass the last seq as `after`.

    `owner` keeps one owner's rows (`""`: the shared ones) and `tag` the rows carrying that
    tag (ASCII case ignored); both filter inside the store, so a rare tag costs one query,
    and neither widens the scope.

    Raises:
        InvalidInput: the scope word, the owner or the tag is malformed.
    """
    scope_obj = caller.scope(scope)
    if owner is not None:
        parse_owner(owner)
    if tag is not None:
        if not isinstance(tag, str) or not tag.split():
            raise InvalidInput("tag", "is empty.", "Pass a tag, or leave it out.")
        tag = " ".join(refuse_unstorable(tag, "tag").split())
    memories = await caller.store.list_memories(
        scope_obj,
        archived=archived,
        type=type,
        status=status,
        owner=owner,
        tag=tag,
        after_seq=after,
        limit=max(1, min(limit, 500)),
        # Another role's (or the user's shared) forgotten memories are not listed
        # (`Caller.withdrawn`).
        forgotten_of=None if archived is False else caller.role,
    )
    return [(m.seq or 0, await view(caller, m, scope_obj)) for m in memories]


async def access_log(
    caller: Caller,
    memory_id: str,
    *,
    limit: int = 50,
    before: int | None = None,
    scope: str = "mine",
) -> list[tuple[int, AccessRecord]]:
    """A memory's accesses from the stream, newest first, with their cursor."""
    target = await caller.resolve(memory_id, caller.scope(scope))
    stream = await caller.store.access_stream(target, max(1, min(limit, 500)), before)
    shown = caller.actor.effective()
    return [(seq, redact(record, shown)) for seq, _, record in stream]


async def recent_accesses(
    caller: Caller, *, limit: int = 50, before: int | None = None, scope: str = "mine"
) -> list[tuple[int, str, AccessRecord]]:
    """Store-wide accesses to memories in the scope, newest first; none of a memory another
    role forgot (`Caller.withdrawn`), so a page may hold fewer than `limit`."""
    stream = await caller.store.access_stream(
        None, max(1, min(limit, 500)), before, scope=caller.scope(scope)
    )
    shown = caller.actor.effective()
    # Accesses of what another role forgot (or the user, a shared one) are that role's: their
    # ids and queries stay out, as the memory does (`Caller.withdrawn`).
    gone = await caller.withdrawn_among(mid for _, mid, _ in stream)
    return [(seq, mid, redact(record, shown)) for seq, mid, record in stream if mid not in gone]


def kpi_shares(counts: Counts, raw: KpiTotals) -> dict[str, float | int]:
    """The read and archive KPIs of one scope from the store's totals (DESIGN.md §8.10).

    One definition for `stats` and for the snapshot every reflection pass logs, so that the
    console's chart over time and the numbers beside it cannot drift apart.
    """
    # (reads, live memories with that many reads), most-read first: the top tenth is a prefix.
    by_reads = sorted(((n, k) for _, n, k in raw.read_counts), reverse=True)
    active = sum(k for _, k in by_reads)
    total_reads = sum(n * k for n, k in by_reads)
    top, room = 0, (max(1, math.ceil(active * 0.1)) if active else 0)
    for n, k in by_reads:
        take = min(k, room)
        top, room = top + n * take, room - take
    reflective = [(n, k) for flagged, n, k in raw.read_counts if flagged]
    reflection_rows = sum(k for _, k in reflective)
    return {
        "reads": total_reads,
        "never_fetched_share": _share(sum(k for n, k in by_reads if n == 0), active),
        "top10pct_read_share": _share(top, total_reads),
        "reflection_rows": reflection_rows,
        "reflection_rows_share": _share(reflection_rows, active),
        "reflection_reads_share": _share(sum(n * k for n, k in reflective), total_reads),
        "archived_share": _share(counts.archived, counts.total),
    }


async def kpi_snapshot(caller: Caller, *, scope: str = "mine") -> dict[str, float | int]:
    """The charted KPI shares (`KPI_SHARES`) of a scope and its live memories, as of now.

    Nothing stores KPIs over time, so a reflection pass logs this with its report; the
    console draws the shares over the passes. Two store reads, the ones `stats` makes.
    """
    scope_obj = caller.scope(scope)
    counts = await caller.store.counts(scope_obj)
    shares = kpi_shares(counts, await caller.store.kpi_totals(scope_obj, READ_CHANNELS))
    return {**{k: shares[k] for k in KPI_SHARES}, "active": counts.total - counts.archived}


async def stats(caller: Caller, *, scope: str = "mine", show_path: bool = False) -> Stats:
    """Counts of memories, edges and accesses in the scope, and the KPIs (DESIGN.md §8.10)."""
    scope_obj = caller.scope(scope)
    counts = await caller.store.counts(scope_obj)
    raw = await caller.store.kpi_totals(scope_obj, READ_CHANNELS)
    now = utc_now()
    open_ages = [(now - created).total_seconds() / 3600 for s, created in raw.todos if s == "open"]
    # The shared owner's passes (`nooa-mcp reflect` without --owner, its server's) run over
    # every role: they are this role's passes too. Counted as its own alone, a role whose
    # memories such a pass pruned showed its last pass as months before.
    covering = dict.fromkeys([caller.role, ""])
    last = max(
        [
            entry
            for role in covering
            for entry in await caller.store.maintenance_entries("reflection", limit=1, role=role)
        ],
        key=lambda entry: entry.ts,
        default=None,
    )
    passes = 0
    for role in covering:
        passes += await caller.store.count_maintenance("reflection", role=role)
    extra = {
        **kpi_shares(counts, raw),
        "tombstones": raw.tombstones,
        "todos_open": len(open_ages),
        "todos_closed": sum(1 for s, _ in raw.todos if s in ("done", "dropped")),
        "todo_open_median_age_hours": round(statistics.median(open_ages), 1) if open_ages else None,
        "intents_fired": await caller.store.count_maintenance("intent", role=caller.role),
        "cross_owner_reads": raw.cross_owner_reads,
        "reflection_passes": passes,
        "last_reflection_at": last.ts.isoformat() if last else None,
    }
    store = caller.store
    where = str(getattr(store, "path", store.label)) if show_path else store.label
    return Stats(
        total=counts.total,
        active=counts.total - counts.archived,
        archived=counts.archived,
        by_type=counts.by_type,
        by_owner=counts.by_owner,
        edges=raw.edges,
        accesses=raw.accesses,
        embeddings=caller.engine.embeddings_state,
        store=f"{store.kind}:{where}",
        extra=extra,
        note=caller.narrowed(scope, scope_obj, "Counted"),
    )


async def other_roles(caller: Caller) -> dict[str, int]:
    """Live memories per role that the caller cannot read, when the caller can read none.

    Without it, a store whose memories all belong to roles the caller was not started as
    (`hooks install --owner me@code`, then a plain `nooa-mcp stats`) reads as an empty store.
    Only for front ends run by whoever holds the store itself — the CLI, the console on
    loopback without tokens — who could count these rows by opening the file: role names (set
    in configuration, never by a model) and counts, never a memory's content. An MCP client
    or a token's owner is never told that other roles exist. Empty when the caller sees at
    least one live memory.
    """
    mine = await caller.store.counts(caller.scope("mine"))
    if mine.total - mine.archived > 0:
        return {}
    everyone = await caller.store.counts(Scope(roles=None))
    hidden: dict[str, int] = {}
    # The caller sees no live memory, so every live one of a named owner is outside its
    # scope (shared ones, owner "", are inside every scope).
    for owner, n in everyone.by_owner.items():
        if owner:
            hidden[owner_role(owner)] = hidden.get(owner_role(owner), 0) + n
    return dict(sorted(hidden.items()))


async def maintenance_log(
    caller: Caller, kind: str = "reflection", *, limit: int = 20
) -> list[MaintenanceRecord]:
    """The caller's role's latest maintenance-log entries of one kind, newest first.

    Reflection passes carry their report (steps, planned and applied counts); fired intents
    name the intent and what cued it. Another role's entries are never read.

    Raises:
        InvalidInput: the kind is not one the log holds.
    """
    if kind not in MAINTENANCE_KINDS:
        raise InvalidInput(
            "kind", f"{kind!r} is not a maintenance-log kind.", f"Use {choices(MAINTENANCE_KINDS)}."
        )
    entries = await caller.store.maintenance_entries(
        kind, max(1, min(limit, 500)), role=caller.role
    )
    return [MaintenanceRecord(seq=e.seq, ts=e.ts, kind=e.kind, report=e.report) for e in entries]


def _share(part: float, whole: float) -> float:
    return round(part / whole, 4) if whole else 0.0
