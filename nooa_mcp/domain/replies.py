"""What the facade answers: the pydantic reply models every front end renders (DESIGN.md §13).

Outcomes that are not failures (a near-duplicate reinforced, a write blocked by a tombstone,
nothing relevant found) are fields here, never exceptions and never free text.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field
from pydantic.json_schema import SkipJsonSchema

from .archive import State
from .cues import lateness
from .schema import AccessRecord, Components, MemoryType


class Reminder(BaseModel):
    """An intent that fired on this call: do what it says."""

    intent_id: str
    #: Other intents with the same text that fired with it (shown once).
    also: list[str] = Field(default_factory=list)
    content: str
    reason: Literal["time", "cue"]
    fired_at: datetime
    rearmed: bool = False
    #: When a time trigger came due (it fires at the first call after): a reminder given days
    #: late must not read as given on time.
    due_at: datetime | None = None

    def lateness(self) -> str:
        """ ", due <time> UTC, <n> late" when it fired an hour or more after it came due."""
        return lateness(self.due_at, self.fired_at)


class ResolvedReference(BaseModel):
    """A reference resolved against its live target at read time."""

    uri: str
    state: Literal["LIVE", "DANGLING", "OPAQUE", "HIDDEN"]
    value: str = ""
    snapshot_at: datetime | None = None
    #: Why a reference is DANGLING, when that is not plain absence.
    note: str = ""


class Flags(BaseModel):
    weak: bool = False
    stale: bool = False
    #: Not valid yet: it holds from this time on (its `valid_from` is ahead), ranked below
    #: what holds now as a stale memory is.
    holds_from: datetime | None = None
    superseded_by: str | None = None
    #: Nearly the same words as this one, written later and not linked to it: the version
    #: that ranks above it (DESIGN.md §5.7), likely the current one.
    newer_version: str | None = None
    #: Archived by maintenance (pruned, merged, superseded by a reconcile) when ranked: a
    #: recall that returns it (not weak) uses it, and it is live again.
    faded: bool = False


class RecallHit(BaseModel):
    rank: int
    id: str
    id8: str
    type: MemoryType
    owner: str
    title: str
    content: str
    score: float
    components: Components
    flags: Flags = Field(default_factory=Flags)
    status: str | None = None
    importance: float
    created_at: datetime
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    retention: float
    prune_eta: datetime | None = None
    path: list[str] = Field(default_factory=list)
    references: list[ResolvedReference] = Field(default_factory=list)


class RecallResult(BaseModel):
    query: str
    scope: str
    #: The roles actually searched (a scope word can narrow, never widen: DESIGN.md §10).
    roles_searched: list[str] = Field(default_factory=list)
    hits: list[RecallHit]
    embeddings: Literal["ready", "warming"] = "ready"
    nothing_relevant: bool = False
    note: str = ""
    reminders: list[Reminder] = Field(default_factory=list)
    #: Intents due now but not shown in this reply (at most 5 are): they stay armed and come
    #: with later replies, or all at once with `intent` action=check.
    reminders_more: int = 0


class TombstoneInfo(BaseModel):
    memory_id: str
    reason: str
    archived_at: datetime
    similarity: float


class SimilarTo(BaseModel):
    """The closest memory a new one resembles (cosine ≥ 0.92): both are kept, linked `related`.

    `differs_in` names the values that make them different facts (number, date, identifier,
    name, negation, indentation); empty when the new one reads as a rewording of the old.
    """

    id: str
    similarity: float
    differs_in: list[str] = Field(default_factory=list)
    #: How the new memory is linked to it: `related`, or the relation the write gave it.
    relation: str = "related"


class AuthorResult(BaseModel):
    id: str
    status: Literal["created", "exists", "blocked-by-tombstone", "revived"]
    #: Set when the write was not stored as a new memory (any status but created): how close
    #: the text is to the memory `id` names. A new memory's close match is `similar_to`.
    similarity: float | None = Field(
        None, description="Unless created: how close the text is to the memory id names."
    )
    similar_to: SimilarTo | None = Field(
        None, description="When created: the closest other memory; both kept, linked (relation)."
    )
    tombstone: TombstoneInfo | None = None
    reminders: list[Reminder] = Field(default_factory=list)
    #: Intents due now but not shown in this reply (at most 5 are): they stay armed and come
    #: with later replies, or all at once with `intent` action=check.
    reminders_more: int = 0
    #: An import's line (`exists`) that an earlier import folded into the memory `id`
    #: already: nothing was written. Not part of any reply.
    folded_before: SkipJsonSchema[bool] = Field(False, exclude=True)

    def notes(self, *, relink: str, revive: str) -> list[str]:
        """What the reply says beyond its status, in every front end alike: the close match
        kept beside a new memory (DESIGN.md §4.3; the reader must see which one and why, or
        it cannot mark a changed fact as the successor), or the forgotten memory that
        blocked (or was revived by) the write. `relink` and `revive` say how the front end
        asks for a successor ({id}: the close match's) and for a revive (the tools'
        arguments, the CLI's options)."""
        lines = []
        if self.similar_to is not None:
            s = self.similar_to
            what = (
                f"differs in {', '.join(s.differs_in)}" if s.differs_in else "reads as a rewording"
            )
            close = f"{s.similarity:.2f}".rstrip("0").rstrip(".") if s.similarity else "0"
            if s.relation in ("refines", "contradicts"):
                lines.append(
                    f"Close to {s.id[:8]} (similarity {close}; {what}): both kept; "
                    f"this one {s.relation} it, as the write said."
                )
            else:
                lines.append(
                    f"Close to {s.id[:8]} (similarity {close}; {what}): both kept, "
                    f"linked {s.relation}. If it replaces {s.id[:8]}, "
                    f"{relink.format(id=s.id[:8])}."
                )
        if self.tombstone is not None:
            t = self.tombstone
            when = f"{t.archived_at:%Y-%m-%d} ({t.reason})"
            if self.status == "blocked-by-tombstone":
                lines.append(
                    f"It was archived on {when} as {t.memory_id[:8]}. Pass {revive} to keep "
                    "it anyway (in the same words, that memory is restored)."
                )
            else:
                lines.append(f"It had been archived on {when}; it is active again.")
        return lines


class UpdateResult(BaseModel):
    id: str
    changed: list[str]
    archived: bool = False
    #: The id asked for, when reflection had merged it into `id`: the change went there.
    merged_from: str | None = Field(
        None, description="The id asked for, merged by reflection into id: changed there."
    )
    #: The tags now, when this update replaced them (the list given replaces the old one).
    tags: list[str] | None = Field(None, description="The tags now, when they changed.")
    reminders: list[Reminder] = Field(default_factory=list)
    #: Intents due now but not shown in this reply (at most 5 are): they stay armed and come
    #: with later replies, or all at once with `intent` action=check.
    reminders_more: int = 0


class ScoreTerms(BaseModel):
    """What a score is made of: these add up to the score shown. The parts a row reports
    (rel, rec, imp, spread) are raw; the score takes rel, rec and imp min-max scaled over the
    candidates of its query, times their weights, recency and importance also scaled by
    relevance (rel over the best rel among them), and spread times γ:
    S = a_rel·rel' + g·(a_rec·rec' + a_imp·imp') + γ·spread − penalties (DESIGN.md §5.5)."""

    rel: float
    rec: float
    imp: float
    spread: float
    #: Taken off for a validity that ended and for a memory another replaced.
    penalty: float = 0.0
    #: The move that keeps one version below another (a replaced memory below what replaced
    #: it, an older version below a newer one that says the same in other words), and the last
    #: digit of rounding: 0 mostly.
    order: float = 0.0


class ExplainRow(BaseModel):
    rank: int
    id: str
    score: float
    source: str
    cos: float | None
    rel: float
    rec: float
    imp: float
    spread: float
    type: MemoryType
    owner: str
    head: str
    path: list[str] = Field(default_factory=list)
    flags: Flags = Field(default_factory=Flags)
    #: Forgotten by its user: ranked here only because "why not" asked about it by id.
    forgotten: bool = False
    #: The score's terms, which add up to it.
    terms: ScoreTerms | None = None


class WhyNot(BaseModel):
    """Why a memory did or did not make the top k for a query, now."""

    id: str
    in_top_k: bool
    rank: int | None
    k: int
    score: float | None
    components: Components | None
    kth_score: float | None
    kth_components: Components | None
    #: The terms of `score` and of `kth_score` (see `ScoreTerms`): where the gap comes from.
    terms: ScoreTerms | None = None
    kth_terms: ScoreTerms | None = None
    retention: float
    prune_eta: datetime | None
    archived: bool
    reason: str
    #: live; faded (archived by maintenance: recall returns it when relevant, and that use
    #: revives it); forgotten (archived by its user: never recalled).
    state: State = "live"


class ExplainResult(BaseModel):
    mode: Literal["query", "replay", "why_not"]
    query: str | None = None
    memory_id: str | None = None
    #: The state of `memory_id` (live, faded or forgotten), when one is asked about.
    state: State | None = None
    rows: list[ExplainRow] = Field(default_factory=list)
    accesses: list[AccessRecord] = Field(default_factory=list)
    total_accesses: int = 0
    why_not: WhyNot | None = None
    embeddings: Literal["ready", "warming"] = "ready"
    #: Said when the scope word asked for roles this connection has no grant for.
    note: str = ""


class MemoryView(BaseModel):
    """One memory as a reader sees it, with derived values computed now."""

    id: str
    type: MemoryType
    owner: str
    title: str
    content: str
    importance: float
    importance_label: str
    salience: float
    confidence: float
    strength: int
    reinforcement_count: int
    access_count: int
    tags: list[str]
    entities: list[str]
    place_or_task: str
    #: When it happened (the date its author or an import gave; else when it was written).
    created_at: datetime
    last_accessed_at: datetime
    valid_from: datetime | None
    valid_to: datetime | None
    archived: bool
    status: str | None
    trigger: dict | None
    edges: list[dict]
    #: When this store learned it (its first access here): retention and recency count from
    #: it and its uses, never from `created_at`.
    learned_at: datetime | None = None
    #: How many visible outgoing edges there are; `edges` shows at most the 50 strongest.
    edges_total: int = 0
    references: list[ResolvedReference]
    channels: dict[str, int]
    sizes: dict[str, int]
    retention: float
    prune_eta: datetime | None
    #: S of the forgetting curve R = exp(−Δt/S) in hours (DESIGN.md §7.1), so a reader can draw it.
    stability_hours: float = 0.0
    #: Why pruning never takes this memory (DESIGN.md §7.2), or None when it may.
    protected: str | None = None
    #: Whether this reader may change it: own role, or the shared owner's own rows.
    writable: bool = False
    flags: Flags = Field(default_factory=Flags)


class GraphEdge(BaseModel):
    """One typed edge of a neighbourhood, in its stored direction."""

    src: str
    dst: str
    type: str
    weight: float


class Neighbourhood(BaseModel):
    """The memories linked to one memory within a few hops, in either direction."""

    center: str
    #: Every memory shown, the centre included, as the reader sees it.
    nodes: dict[str, MemoryView]
    #: The links followed, each between two shown memories.
    edges: list[GraphEdge] = Field(default_factory=list)
    #: Per hop, (memory, the memory it was reached from), in the order reached: each
    #: memory's strongest links first.
    rings: list[list[tuple[str, str]]] = Field(default_factory=list)
    #: Some links were left out: the strongest few per memory, up to a bounded total, are kept.
    truncated: bool = False


class MaintenanceRecord(BaseModel):
    """One entry of the maintenance log: a reflection pass or a fired intent."""

    seq: int
    ts: datetime
    kind: str
    #: What was logged: a reflection pass is a `ReflectReport` as JSON, a firing names its intent.
    report: dict[str, Any]


class Stats(BaseModel):
    total: int
    active: int
    archived: int
    #: The active memories (not archived) by type and by owner: each adds up to `active`.
    by_type: dict[str, int]
    by_owner: dict[str, int]
    edges: int
    accesses: int
    embeddings: Literal["ready", "warming"]
    store: str
    extra: dict[str, float | int | str | None] = Field(default_factory=dict)
    #: Said when the scope word asked for roles this connection has no grant for.
    note: str = ""


# --------------------------------------------------------------------------- living memory


class TodoItem(BaseModel):
    """A todo as the todo tool lists it."""

    id: str
    id8: str
    title: str
    content: str
    status: str
    importance: float
    importance_label: str
    created_at: datetime
    age_hours: float
    #: The shared owner's todo, which this caller may not close: the user closes it.
    shared: bool = False


class TodoResult(BaseModel):
    action: Literal["add", "list", "done", "drop", "reopen"]
    id: str | None = None
    status: str | None = None
    outcome: str = ""
    todos: list[TodoItem] = Field(default_factory=list)
    open_count: int = 0
    reminders: list[Reminder] = Field(default_factory=list)
    #: Intents due now but not shown in this reply (at most 5 are): they stay armed and come
    #: with later replies, or all at once with `intent` action=check.
    reminders_more: int = 0


class IntentItem(BaseModel):
    """An intent with the state of its trigger."""

    id: str
    id8: str
    content: str
    fire_at: datetime | None = None
    cue: str | None = None
    every_hours: float | None = None
    armed: bool
    fired_count: int = 0
    last_fired_at: datetime | None = None


class IntentResult(BaseModel):
    action: Literal["add", "list", "check", "cancel"]
    id: str | None = None
    outcome: str = ""
    intents: list[IntentItem] = Field(default_factory=list)
    reminders: list[Reminder] = Field(default_factory=list)
    #: Intents due now but not shown in this reply (at most 5 are): they stay armed and come
    #: with later replies, or all at once with `intent` action=check.
    reminders_more: int = 0


class ReflectStep(BaseModel):
    """What one step of a reflection pass did."""

    step: str
    planned: int = 0
    applied: int = 0
    skipped: int = 0
    failed: int = 0
    note: str = ""
    details: list[str] = Field(default_factory=list)

    def outcomes(self) -> tuple[list[str], int]:
        """The outcomes a reply spells out, and how many more the step applied (a pass keeps
        at most 20): up to 10 of what a merge or a prune archived, which a reader may want
        back, up to 3 of the other steps' (links, new scores)."""
        shown = self.details[: 10 if self.step in ("merge", "prune") else 3]
        return shown, max(self.applied - len(shown), 0)


class ReflectReport(BaseModel):
    """A reflection pass, as written to the maintenance log."""

    status: Literal["completed", "interrupted", "already-running"]
    trigger: str = "on-demand"
    started_at: datetime
    finished_at: datetime | None = None
    steps: list[ReflectStep] = Field(default_factory=list)
    applied: int = 0
    #: How pairs were found: "full" (every pair), "clustered" (a large role's first pass:
    #: each memory against its nearest clusters, most pairs), "changed" (only memories
    #: changed since the last completed pass, against all), "" (no step needed pairs).
    sweep: str = ""
    #: Memories compared against the whole role, and the pairs (cosines) that took.
    changed: int = 0
    compared: int = 0
