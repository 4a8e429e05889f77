"""The facade verbs of a memory that lives: tombstones, references, reminders, todos, intents,
reflection passes and KPIs (SPEC §7–§9, §11). `Memory` inherits them; front ends call them on
`Memory` like every other verb.

Kept apart from memory.py so the core and these mechanisms can change without stepping on each
other. Everything here runs through the same store transactions and access rules as the core.
"""

from __future__ import annotations

import functools
import json
import math
import statistics
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np

from . import references as refs
from .accesses import apply_access, created_record
from .errors import InvalidInput
from .forgetting import retention, should_prune
from .generative import (
    SYSTEM,
    MalformedReply,
    Sampler,
    SamplingUnavailable,
    abstract_prompt,
    parse_abstraction,
    parse_reconciliation,
    plan_abstract,
    plan_clusters,
    reconcile_prompt,
)
from .prospective import evaluate, todo_order
from .reflection import (
    MERGE_SIMILARITY,
    Node,
    merged_fields,
    plan_links,
    plan_merges,
    plan_prune,
    plan_rescore,
    rescore,
)
from .replies import (
    AuthorResult,
    IntentItem,
    IntentResult,
    RecallHit,
    ReflectReport,
    ReflectStep,
    Reminder,
    ResolvedReference,
    TodoItem,
    TodoResult,
    TombstoneInfo,
)
from .schema import (
    IMPORTANCE,
    Channel,
    EdgeType,
    Reference,
    Trigger,
    head,
)
from .schema import (
    Memory as MemoryRecord,
)
from .schema import (
    now as utc_now,
)
from .store import Scope, dt, memory_from_row
from .tracing import access_refs as refs_now

REMINDER_CHARS = 1_000

if TYPE_CHECKING:
    from .memory import Memory

__all__ = ["STEPS", "Living", "Progress"]

#: Reflection steps in the order a pass runs them (SPEC §8).
STEPS: tuple[str, ...] = ("merge", "reconcile", "link", "rescore", "abstract", "prune")
GENERATIVE = frozenset({"reconcile", "abstract"})
TOMBSTONE_SIMILARITY = 0.95
#: Channels that count as a read in the KPIs: deliberate fetches, not what the server showed.
READ_CHANNELS = ("recalled", "searched", "deref")
LEASE_KEY = "reflection_lease"
LEASE_SECONDS = 300.0
SUPERSEDING_OR_DERIVED = frozenset({"refines", "contradicts", "derived_from"})

Progress = Callable[[int, int, str], Awaitable[None]]


@dataclass
class _State:
    """Per-process state of the living mechanisms, created on first use."""

    reflect_lock: anyio.Lock = field(default_factory=anyio.Lock)
    cue_vectors: dict[str, np.ndarray] = field(default_factory=dict)
    writes: int = 0
    last_activity: float = 0.0
    wake: anyio.Event = field(default_factory=anyio.Event)
    pass_done: anyio.Event = field(default_factory=anyio.Event)
    last_report: ReflectReport | None = None
    holder: str = field(default_factory=lambda: uuid.uuid4().hex)


class Living:
    """Mixin of `Memory`: the verbs of issue 4. Relies on the core's store, index and helpers."""

    # ------------------------------------------------------------------ state

    def _lv(self: Memory) -> _State:
        state = self.__dict__.get("_living_state")
        if state is None:
            state = _State(last_activity=anyio.current_time())
            self.__dict__["_living_state"] = state
        return state

    def _note_activity(self: Memory, writes: int = 0) -> None:
        """Count writes toward the next automatic pass and mark the server busy."""
        state = self._lv()
        state.last_activity = anyio.current_time()
        if writes:
            state.writes += writes
            every = self.settings.reflect_every_writes
            if every and state.writes >= every:
                state.wake.set()

    # ------------------------------------------------------------------ tombstones (SPEC §7)

    async def _tombstone_match(
        self: Memory, record: MemoryRecord, vector: np.ndarray | None
    ) -> tuple[Any, float] | None:
        """A standing tombstone of this role for the same content (hash) or cosine ≥ 0.95."""
        row = await self.store.tombstone_by_hash(record.content_hash, self.role)
        if row is not None:
            return row, 1.0
        n = self.index.size
        # Most writes meet no archived row at all: skip the matrix product then.
        if vector is None or n == 0 or not self.index.archived[:n].any():
            return None
        mask = self.index.mask(Scope("role", role=self.role), include_archived=True)
        mask &= self.index.archived[:n]
        hits = [h for h in self.index.search(vector, mask, 5) if h[1] >= TOMBSTONE_SIMILARITY]
        if not hits:
            return None
        stones = await self.store.tombstones_of([i for i, _ in hits])
        for memory_id, similarity in hits:
            stone = stones.get(memory_id)
            if stone is not None and stone["role"] == self.role:
                return stone, similarity
        return None

    async def _blocked_or_revived(
        self: Memory, stone: Any, similarity: float, revive: bool
    ) -> AuthorResult:
        """Inside the author transaction: refuse a forgotten value, or restore it on revive."""
        info = TombstoneInfo(
            memory_id=stone["memory_id"],
            reason=stone["reason"],
            archived_at=dt(stone["ts"]),
            similarity=round(similarity, 4),
        )
        if not revive:
            return AuthorResult(
                id=stone["memory_id"],
                status="blocked-by-tombstone",
                similarity=info.similarity,
                tombstone=info,
            )
        memory, actr = await self._fetch(stone["memory_id"])
        now = utc_now()
        memory.archived = False
        await self.store.set_archived(memory.id, False, now)
        await self.store.lift_tombstones(memory.id, now)
        # Reviving is the author writing the value again: a reinforcing access, history kept.
        access = self._access(Channel.reinforced, query="revive")
        actr = self._apply(memory, actr, access)
        await self.store.save(memory, actr)
        await self.store.append_accesses([(memory.id, access)])
        self.index.mark_dirty()
        return AuthorResult(
            id=memory.id, status="revived", similarity=info.similarity, tombstone=info
        )

    # ------------------------------------------------------------------ references (SPEC §11)

    async def _visible_contents(
        self: Memory, ids: Sequence[str], scope: Scope | None = None
    ) -> dict[str, str]:
        """Content of live memories among `ids` that `scope` may read (default: mine)."""
        scope = scope or self.scope("mine")
        fetched = await self.store.fetch_many(list(ids))
        return {
            i: m.content
            for i, (m, _) in fetched.items()
            if not m.archived and scope.allows(m.owner)
        }

    async def _capture_references(self: Memory, records: Sequence[MemoryRecord]) -> None:
        """Resolve memory prefixes to full ids and capture every preview (write time).

        A reference that arrives with a preview (an import) keeps its snapshot untouched.

        Raises:
            InvalidInput / ReferenceOutsideRoot / NotFound: a reference cannot be captured.
        """
        for record in records:
            if not record.references:
                continue
            captured: list[Reference] = []
            for ref in record.references:
                if ref.preview:
                    captured.append(ref)  # imported with its snapshot: keep it as it was
                    continue
                if ref.kind == "memory":
                    full = await self._resolve(ref.target, self.scope("mine"), "references")
                    ref = ref.model_copy(update={"target": full})
                contents = await self._visible_contents(refs.memory_targets([ref]))
                captured.append(
                    refs.capture(ref, root=self.settings.reference_root, lookup=contents.get)
                )
            record.references = captured

    async def _resolve_references(
        self: Memory, references: Sequence[Reference], scope: Scope | None = None
    ) -> tuple[list[ResolvedReference], list[str]]:
        """Resolve references now; also return the memory ids that resolved LIVE (for deref).

        A `memory:` target the reader's scope hides shows as HIDDEN, without its id or the
        snapshot captured at write time: a reference must not relay what the scope gates
        (SPEC §10).
        """
        scope = scope or self.scope("mine")
        targets = refs.memory_targets(references)
        contents = await self._visible_contents(targets, scope)
        owners = await self.store.owners_of(targets)
        resolved = [
            ResolvedReference(uri="memory:(hidden)", state="HIDDEN")
            if r.kind == "memory" and r.target in owners and not scope.allows(owners[r.target])
            else refs.resolve(r, root=self.settings.reference_root, lookup=contents.get)
            for r in references
        ]
        live = [
            r.target
            for r, out in zip(references, resolved, strict=True)
            if r.kind == "memory" and out.state == "LIVE"
        ]
        return resolved, live

    async def _attach_references(
        self: Memory, hits: list[RecallHit], by_id: dict[str, list[Reference]], scope: Scope
    ) -> None:
        """Fill each hit's references, and log `deref` on every memory a reference reached."""
        derefs: list[tuple[str, str]] = []
        for hit in hits:
            stored = by_id.get(hit.id) or []
            if not stored:
                continue
            hit.references, live = await self._resolve_references(stored, scope)
            derefs += [(hit.id, target) for target in live]
        if not derefs:
            return
        async with self.store.transaction():
            fetched = await self.store.fetch_many([t for _, t in derefs])
            logged = []
            for source, target in derefs:
                if target not in fetched:
                    continue
                memory, actr = fetched[target]
                access = self._access(Channel.deref, query=f"memory:{target[:8]} from {source[:8]}")
                actr = self._apply(memory, actr, access)
                fetched[target] = (memory, actr)
                logged.append((target, access))
            await self.store.save_many([fetched[t] for t in {t for t, _ in logged}])
            await self.store.append_accesses(logged)
        self.index.mark_dirty()

    # ------------------------------------------------------------------ reminders (SPEC §9)

    async def _cue_vectors(self: Memory, intents: list[tuple[str, Trigger]]) -> dict[str, Any]:
        if self.embeddings_state != "ready":
            return {}
        cache = self._lv().cue_vectors
        missing = sorted({t.cue for _, t in intents if t.cue and t.cue not in cache})
        if missing:
            for cue, vec in zip(missing, await self._embed(missing), strict=True):
                cache[cue] = vec
        return {i: cache[t.cue] for i, t in intents if t.cue and t.cue in cache}

    async def _reminders(
        self: Memory,
        texts: Sequence[tuple[str | None, np.ndarray | None]] = ((None, None),),
        exclude: Sequence[str] = (),
    ) -> list[list[Reminder]]:
        """Fire the intents due now or cued by each text; one reminder list per text.

        Each firing is decided again on the fresh row inside the write transaction, so two
        processes never both fire a one-shot intent. A fired intent logs `injected` (shown by
        the server, never reinforcing) and a maintenance-log entry, and is marked fired or
        re-armed.
        """
        out: list[list[Reminder]] = [[] for _ in texts]
        rows = [r for r in await self.store.intents(self.role) if r["id"] not in set(exclude)]
        if not rows:
            return out
        now = utc_now()
        triggers = {r["id"]: Trigger.model_validate_json(r["trigger"]) for r in rows}
        cue_vecs = await self._cue_vectors(list(triggers.items()))
        fired: list[tuple[int, Any]] = []
        for position, (text, vector) in enumerate(texts):
            for firing in evaluate(list(triggers.items()), now, text, vector, cue_vecs):
                triggers[firing.intent_id] = firing.trigger
                fired.append((position, firing))
        if not fired:
            return out
        async with self.store.transaction():
            for position, firing in fired:
                found = await self.store.fetch(firing.intent_id)
                if found is None or found[0].archived or found[0].trigger is None:
                    continue
                memory, actr = found
                text, vector = texts[position]
                again = evaluate([(memory.id, memory.trigger)], now, text, vector, cue_vecs)
                if not again:
                    continue
                memory.trigger = again[0].trigger
                access = self._access(Channel.injected, query=(text or "")[:200] or None)
                actr = self._apply(memory, actr, access)
                await self.store.save(memory, actr)
                await self.store.append_accesses([(memory.id, access)])
                await self.store.log_maintenance(
                    "intent",
                    {
                        "intent_id": memory.id,
                        "reason": again[0].reason,
                        "rearmed": again[0].rearmed,
                        "text": (text or "")[:200],
                        "similarity": again[0].similarity,
                    },
                )
                out[position].append(
                    Reminder(
                        intent_id=memory.id,
                        # Bounded: every later reply carries its reminders (SPEC §12).
                        content=head(memory.content, REMINDER_CHARS),
                        reason=again[0].reason,
                        fired_at=now,
                        rearmed=again[0].rearmed,
                    )
                )
        self.index.mark_dirty()
        return out

    # ------------------------------------------------------------------ todos (SPEC §9)

    async def todo(
        self: Memory,
        action: str = "list",
        *,
        content: str | None = None,
        memory_id: str | None = None,
        title: str = "",
        importance: Any = "MEDIUM",
        tags: Sequence[str] | None = None,
        status: str = "open",
        limit: int = 50,
    ) -> TodoResult:
        """Add, list, close (done / drop) or reopen a todo; open todos are protected from pruning.

        `list` shows open todos first, then by importance, then oldest first; `status` filters
        it (open, done, dropped or all). Every action returns the open todos and any reminders.

        Raises:
            InvalidInput: unknown action, missing content or id, or the id is not a todo.
            NotFound: the id does not name a visible memory.
        """
        actions = {"add", "list", "done", "drop", "reopen"}
        if action not in actions:
            raise InvalidInput(
                "action",
                f"'{action}' is not a todo action.",
                "Use add, list, done, drop or reopen.",
            )
        reminders: list[Reminder] = []
        result = TodoResult(action=action)  # type: ignore[arg-type]
        if action == "add":
            if not isinstance(content, str) or not content.strip():
                raise InvalidInput("content", "is empty.", "Say what needs doing.")
            written = await self.author(
                content, type="todo", title=title, importance=importance, tags=tags
            )
            result.id, result.outcome, result.status = written.id, written.status, "open"
            reminders += written.reminders
        elif action in {"done", "drop", "reopen"}:
            if not memory_id:
                raise InvalidInput(
                    "memory_id", "is missing.", f"Pass the id of the todo to {action}."
                )
            view = await self.get(memory_id)
            if view.type.value != "todo":
                raise InvalidInput(
                    "memory_id",
                    f"{view.id[:8]} is a {view.type.value}, not a todo.",
                    "List todos to find the id.",
                )
            new = {"done": "done", "drop": "dropped", "reopen": "open"}[action]
            updated = await self.update(view.id, status=new)
            result.id, result.status = view.id, new
            result.outcome = new if "status" in updated.changed else f"already {new}"
            reminders += (await self._reminders())[0]
        else:
            if status not in {"open", "done", "dropped", "all"}:
                raise InvalidInput(
                    "status", f"'{status}' is not a todo status.", "Use open, done, dropped or all."
                )
            reminders += (await self._reminders())[0]
        wanted = status if action == "list" else "open"
        result.todos = await self._todo_items(None if wanted == "all" else wanted, limit)
        result.open_count = await self._open_todo_count()
        result.reminders = reminders
        return result

    async def _todo_items(self: Memory, status: str | None, limit: int) -> list[TodoItem]:
        rows = await self.store.list_memories(
            self.scope("mine"), archived=False, type="todo", status=status, limit=100_000
        )
        now = utc_now()
        memories = sorted(
            (memory_from_row(r) for r in rows),
            key=lambda m: todo_order(m.status, m.importance, m.created_at),
        )
        return [
            TodoItem(
                id=m.id,
                id8=m.id[:8],
                title=m.title,
                content=head(m.content, 300),
                status=m.status or "open",
                importance=m.importance,
                importance_label=IMPORTANCE.label(m.importance),
                created_at=m.created_at,
                age_hours=round((now - m.created_at).total_seconds() / 3600, 1),
            )
            for m in memories[: max(1, min(limit, 500))]
        ]

    async def _open_todo_count(self: Memory) -> int:
        rows = await self.store.list_memories(
            self.scope("mine"), archived=False, type="todo", status="open", limit=100_000
        )
        return len(rows)

    # ------------------------------------------------------------------ intents (SPEC §9)

    async def intent(
        self: Memory,
        action: str = "list",
        *,
        content: str | None = None,
        memory_id: str | None = None,
        fire_at: datetime | str | None = None,
        cue: str | None = None,
        every_hours: float | None = None,
        text: str | None = None,
        importance: Any = "MEDIUM",
    ) -> IntentResult:
        """Add an intent that fires at a time or on a cue, list intents, check now, or cancel one.

        A time trigger fires once `fire_at` has passed; a cue fires when a recall query or
        authored content matches it (cosine ≥ 0.55, or every cue keyword present). With both,
        whichever comes first fires it; `every_hours` re-arms it. `check` evaluates the time
        triggers, and the cues against `text` if given.

        Raises:
            InvalidInput: unknown action, missing content/trigger/id, or the id is not an intent.
            NotFound: the id does not name a visible memory.
        """
        if action not in {"add", "list", "check", "cancel"}:
            raise InvalidInput(
                "action", f"'{action}' is not an intent action.", "Use add, list, check or cancel."
            )
        result = IntentResult(action=action)  # type: ignore[arg-type]
        if action == "add":
            if not isinstance(content, str) or not content.strip():
                raise InvalidInput("content", "is empty.", "Say what to do when it fires.")
            trigger = {"fire_at": fire_at, "cue": cue, "every_hours": every_hours}
            written = await self.author(
                content, type="intent", trigger=trigger, importance=importance
            )
            result.id, result.outcome = written.id, written.status
            result.reminders = written.reminders
        elif action == "cancel":
            if not memory_id:
                raise InvalidInput("memory_id", "is missing.", "Pass the id of the intent.")
            view = await self.get(memory_id)
            if view.type.value != "intent":
                raise InvalidInput(
                    "memory_id",
                    f"{view.id[:8]} is a {view.type.value}, not an intent.",
                    "List intents to find the id.",
                )
            await self.forget(view.id, reason="intent cancelled")
            result.id, result.outcome = view.id, "cancelled"
            result.reminders = (await self._reminders())[0]
        elif action == "check":
            if text is not None and not isinstance(text, str):
                raise InvalidInput("text", "must be text.", "Pass what is happening now.")
            vector = await self._query_vector(text) if text else None
            result.reminders = (await self._reminders([(text or None, vector)]))[0]
            result.outcome = f"{len(result.reminders)} fired"
        else:
            result.reminders = (await self._reminders())[0]
        result.intents = await self._intent_items()
        return result

    async def _intent_items(self: Memory) -> list[IntentItem]:
        items = []
        for row in await self.store.intents(self.role):
            trig = Trigger.model_validate_json(row["trigger"])
            items.append(
                IntentItem(
                    id=row["id"],
                    id8=row["id"][:8],
                    content=head(row["content"], 300),
                    fire_at=trig.fire_at,
                    cue=trig.cue,
                    every_hours=trig.every_hours,
                    # Re-armed recurring intents stay armed; a one-shot is spent once fired.
                    armed=trig.every_hours is not None or trig.fired_count == 0,
                    fired_count=trig.fired_count,
                    last_fired_at=trig.fired_at,
                )
            )
        return items

    # ------------------------------------------------------------------ reflection (SPEC §8)

    async def reflect(
        self: Memory,
        steps: Sequence[str] | None = None,
        *,
        sampler: Sampler | None = None,
        progress: Progress | None = None,
        now: datetime | None = None,
        trigger: str = "on-demand",
    ) -> ReflectReport:
        """Run one reflection pass: merge → reconcile → link → rescore → abstract → prune.

        Each item is committed on its own, so the pass can be stopped (cancelled) between items
        and a later pass converges to the same store; writes made meanwhile are re-read, never
        overwritten. Only one pass runs at a time across processes: a second caller gets
        `already-running`. Reconcile and abstract need a `sampler` (the client's model through
        MCP sampling) and are skipped without one. The report goes to the maintenance log.

        Args:
            steps: a subset of merge, reconcile, link, rescore, abstract, prune (default: all).
            sampler: asks the client's model; None skips the generative steps.
            progress: awaited as (done, total, message) after every item.
            now: the time pruning is judged at (default: now).

        Raises:
            InvalidInput: an unknown step.
        """
        wanted = list(STEPS) if steps is None else [str(s).strip().lower() for s in steps]
        for step in wanted:
            if step not in STEPS:
                raise InvalidInput("steps", f"'{step}' is not a step.", f"Use {', '.join(STEPS)}.")
        state = self._lv()
        report = ReflectReport(status="already-running", trigger=trigger, started_at=utc_now())
        if state.reflect_lock.locked():
            return report
        async with state.reflect_lock:
            if not await self._take_lease():
                return report
            report.status = "interrupted"
            try:
                await self._run_pass(
                    report, [s for s in STEPS if s in wanted], sampler, progress, now
                )
                report.status = "completed"
            finally:
                with anyio.CancelScope(shield=True):
                    report.finished_at = utc_now()
                    report.applied = sum(s.applied for s in report.steps)
                    async with self.store.transaction():
                        await self.store.log_maintenance(
                            "reflection", report.model_dump(mode="json")
                        )
                        await self._release_lease()
                    self.index.mark_dirty()
                    state.last_report = report
                    state.pass_done.set()
                    state.pass_done = anyio.Event()
        return report

    async def _take_lease(self: Memory) -> bool:
        state = self._lv()
        async with self.store.transaction():
            raw = await self.store.get_meta(LEASE_KEY)
            now = utc_now().timestamp()
            if raw:
                lease = json.loads(raw)
                if lease["holder"] != state.holder and lease["until"] > now:
                    return False
            await self.store.set_meta(
                LEASE_KEY, json.dumps({"holder": state.holder, "until": now + LEASE_SECONDS})
            )
        return True

    async def _renew_lease(self: Memory) -> None:
        # Inside an item's transaction: the lease outlives a pass only by LEASE_SECONDS.
        await self.store.set_meta(
            LEASE_KEY,
            json.dumps(
                {"holder": self._lv().holder, "until": utc_now().timestamp() + LEASE_SECONDS}
            ),
        )

    async def _release_lease(self: Memory) -> None:
        raw = await self.store.get_meta(LEASE_KEY)
        if raw and json.loads(raw)["holder"] == self._lv().holder:
            await self.store.set_meta(LEASE_KEY, json.dumps({"holder": "", "until": 0}))

    async def _nodes(self: Memory) -> tuple[list[Node], np.ndarray]:
        """The live rows reflection plans over (this role, or every role for the shared owner)."""
        rows = await self.store.reflection_rows(self.role if self.owner else None)
        dim = self.embedder.dim
        vectors = np.zeros((len(rows), dim), dtype=np.float32)
        nodes = []
        for i, row in enumerate(rows):
            if row["embedding"] is not None:
                vec = np.frombuffer(row["embedding"], dtype=np.float32)
                if vec.shape[0] == dim:
                    vectors[i] = vec
            nodes.append(_node(row, i))
        return nodes, vectors

    async def _run_pass(
        self: Memory,
        report: ReflectReport,
        steps: list[str],
        sampler: Sampler | None,
        progress: Progress | None,
        now: datetime | None,
    ) -> None:
        done = 0
        total = 0

        async def tick(message: str) -> None:
            nonlocal done
            done += 1
            if progress is not None:
                await progress(done, total, message)

        for name in steps:
            step = ReflectStep(step=name)
            report.steps.append(step)
            if name in GENERATIVE and sampler is None:
                step.note = "skipped: no sampler (the client does not offer MCP sampling)"
                continue
            nodes, vectors = await self._nodes()
            edges = await self.store.edge_pairs()
            if name == "merge":
                exclude = {
                    frozenset((e["src"], e["dst"]))
                    for e in edges
                    if e["type"] in SUPERSEDING_OR_DERIVED
                }
                # Planning compares every pair in a role (numpy, seconds at 100k): off the
                # event loop, so a server keeps answering while a pass plans.
                plan: list[Any] = await anyio.to_thread.run_sync(
                    functools.partial(plan_merges, nodes, vectors, exclude=exclude)
                )
                apply = self._apply_merge
            elif name == "link":
                # The link budget counts related edges to archived memories too, so pruning
                # after linking frees no budget and a second pass adds nothing.
                related: dict[str, set[str]] = {}
                for e in await self.store.edge_pairs(live_only=False):
                    if e["type"] == "related":
                        related.setdefault(e["src"], set()).add(e["dst"])
                        related.setdefault(e["dst"], set()).add(e["src"])
                linked = {frozenset((e["src"], e["dst"])) for e in edges}
                plan = await anyio.to_thread.run_sync(plan_links, nodes, vectors, related, linked)
                apply = self._apply_link
            elif name == "rescore":
                plan = plan_rescore(nodes)
                apply = self._apply_rescore
            elif name == "prune":
                at = now or utc_now()
                plan = plan_prune(nodes, at, self.settings.forgetting)
                apply = lambda item, at=at: self._apply_prune(item, at)  # noqa: E731
            elif name == "reconcile":
                consolidated = {
                    e[k] for e in edges if e["type"] == "derived_from" for k in ("src", "dst")
                }
                plan = await anyio.to_thread.run_sync(plan_clusters, nodes, vectors, consolidated)
                apply = lambda cluster: self._apply_reconcile(cluster, sampler)  # noqa: E731
            else:
                plan = await self._abstract_plan(nodes)
                apply = lambda batch: self._apply_abstract(batch, sampler)  # noqa: E731
            step.planned = len(plan)
            total += len(plan)
            for item in plan:
                try:
                    outcome = await apply(item)
                except MalformedReply as exc:
                    step.failed += 1
                    step.details.append(f"malformed reply: {exc}")
                    outcome = None
                except SamplingUnavailable as exc:
                    step.note = f"stopped: {exc}"
                    break
                if outcome is None:
                    pass
                elif outcome:
                    step.applied += 1
                    if len(step.details) < 20:
                        step.details.append(outcome)
                else:
                    step.skipped += 1
                await tick(f"{name} {step.applied + step.skipped + step.failed}/{step.planned}")

    # Each _apply_* runs one item in its own transaction, re-reading what it changes; it
    # returns a short description when it changed something, "" when the item no longer holds.

    async def _apply_merge(self: Memory, item: Any) -> str:
        async with self.store.transaction():
            got = await self.store.fetch_many([item.anchor, item.dup])
            if len(got) < 2 or got[item.anchor][0].archived or got[item.dup][0].archived:
                return ""
            (anchor, actr), (dup, _) = got[item.anchor], got[item.dup]
            if anchor.type != dup.type:
                return ""
            vecs = await self.store.embeddings_of([anchor.id, dup.id])
            if len(vecs) < 2 or float(vecs[anchor.id] @ vecs[dup.id]) < MERGE_SIMILARITY:
                return ""
            authored = await self.store.authored_of([anchor.id, dup.id])
            fields = merged_fields(
                _record_node(anchor, authored[anchor.id]), _record_node(dup, authored[dup.id])
            )
            anchor.reinforcement_count = int(fields["reinforcement_count"])
            anchor.strength = int(fields["strength"])
            anchor.importance = float(fields["importance"])
            anchor.salience = float(fields["salience"])
            anchor.confidence = float(fields["confidence"])
            access = self._access(Channel.reflected, query=f"merged {dup.id[:8]}")
            actr = self._apply(anchor, actr, access)
            await self.store.save(anchor, actr)
            await self.store.set_authored_importance(anchor.id, fields["authored_importance"])
            await self.store.copy_edges(dup.id, anchor.id)
            await self.store.add_edge(anchor.id, dup.id, EdgeType.refines, 1.0)
            await self._archive(dup, f"merged into {anchor.id[:8]}")
            await self.store.append_accesses([(anchor.id, access)])
            await self._renew_lease()
        return f"{dup.id[:8]} → {anchor.id[:8]}"

    async def _apply_link(self: Memory, item: Any) -> str:
        async with self.store.transaction():
            got = await self.store.fetch_many([item.a, item.b])
            if len(got) < 2 or any(m.archived for m, _ in got.values()):
                return ""
            await self.store.add_edge(item.a, item.b, EdgeType.related, item.weight)
            await self.store.add_edge(item.b, item.a, EdgeType.related, item.weight)
            await self._renew_lease()
        return f"{item.a[:8]} ~ {item.b[:8]} ({item.weight:.2f})"

    async def _apply_rescore(self: Memory, item: Any) -> str:
        async with self.store.transaction():
            found = await self.store.fetch(item.id)
            if found is None or found[0].archived:
                return ""
            memory = found[0]
            authored = (await self.store.authored_of([item.id]))[item.id]
            new = rescore(authored, memory.salience, memory.strength)
            if abs(new - memory.importance) < 1e-9:
                return ""
            await self.store.update_fields(item.id, {"importance": new})
            await self._renew_lease()
        return f"{item.id[:8]} {memory.importance:g} → {new:g}"

    async def _apply_prune(self: Memory, item: Any, at: datetime) -> str:
        policy = self.settings.forgetting
        async with self.store.transaction():
            found = await self.store.fetch(item.id)
            if found is None:
                return ""
            m = found[0]
            if not should_prune(
                type=m.type,
                importance=m.importance,
                status=m.status,
                archived=m.archived,
                created_at=m.created_at,
                last_accessed_at=m.last_accessed_at,
                strength=m.strength,
                now=at,
                policy=policy,
            ):
                return ""
            r = retention(m.last_accessed_at, m.strength, at, policy.tau_hours)
            await self._archive(m, f"pruned: retention {r:.4f} < {policy.prune_below:g}")
            await self._renew_lease()
        return f"{item.id[:8]} (retention {r:.4f})"

    async def _sample(self: Memory, sampler: Sampler | None, prompt: str, max_tokens: int) -> str:
        if sampler is None:
            raise SamplingUnavailable("no sampler")
        try:
            reply = await sampler(system=SYSTEM, prompt=prompt, max_tokens=max_tokens)
        except SamplingUnavailable:
            raise
        except MalformedReply:
            raise
        except Exception as exc:  # the client refused or failed: stop generative work
            raise SamplingUnavailable(
                f"sampling failed ({exc.__class__.__name__}: {exc})"
            ) from None
        if not isinstance(reply, str):
            raise MalformedReply("the reply is not text")
        return reply

    async def _insert_derived(
        self: Memory, record: MemoryRecord, sources: Sequence[str], vector: np.ndarray
    ) -> None:
        """Insert a memory written by reflection, with `derived_from` edges to its sources."""
        actr = apply_access(
            record,
            [],
            created_record(record, self.owner, *refs_now()),
            ring_size=self.settings.ring_size,
            exact_k=self.settings.recall.exact_accesses,
        )
        await self.store.insert(record, actr, vector)
        await self.store.append_accesses([(record.id, record.access_log[0])])
        for source in sources:
            await self.store.add_edge(record.id, source, EdgeType.derived_from, 1.0)

    async def _apply_reconcile(self: Memory, cluster: list[Node], sampler: Sampler | None) -> str:
        ids = [n.id for n in cluster]
        contents = await self._visible_contents(ids)
        members = [(i, contents[i]) for i in ids if i in contents]
        if len(members) < 2:
            return ""
        reply = await self._sample(sampler, reconcile_prompt(members), 1200)
        result = parse_reconciliation(reply, [i for i, _ in members])
        if result is None:
            return ""
        vector = (
            await self._embed(
                [f"{result.title}. {result.content}" if result.title else result.content]
            )
        )[0]
        seed = cluster[0]
        async with self.store.transaction():
            fresh = await self.store.fetch_many([i for i, _ in members])
            live = [i for i, _ in members if i in fresh and not fresh[i][0].archived]
            if len(live) < 2:
                return ""
            olds = [fresh[i][0] for i in live]
            record = MemoryRecord(
                type=seed.type,
                title=result.title,
                content=result.content,
                owner=seed.owner,
                importance=max(m.importance for m in olds),
                salience=max(m.salience for m in olds),
                confidence=max(m.confidence for m in olds),
                tags=list(dict.fromkeys(t for m in olds for t in m.tags))[:50],
                entities=list(dict.fromkeys(t for m in olds for t in m.entities))[:50],
            )
            await self._insert_derived(record, live, vector)
            superseded = [i for i in result.supersedes if i in live]
            for old in superseded:
                await self.store.add_edge(record.id, old, EdgeType.refines, 1.0)
                await self._archive(fresh[old][0], f"superseded by {record.id[:8]} (reconcile)")
            await self._renew_lease()
        ignored = f", ignored ids {result.ignored_ids}" if result.ignored_ids else ""
        return f"{record.id[:8]} from {len(live)}, superseding {len(superseded)}{ignored}"

    async def _abstract_plan(self: Memory, nodes: list[Node]) -> list[list[Node]]:
        mark = await self.store.get_meta(f"abstract_watermark:{self.role}")
        done: set[str] = set()
        if mark:
            ts_mark, id_mark = json.loads(mark)
            done = {
                n.id
                for n in nodes
                if n.type == "episode" and (n.created_at.timestamp(), n.id) <= (ts_mark, id_mark)
            }
        batch = plan_abstract(nodes, done)
        return [batch] if len(batch) >= 2 else []

    async def _apply_abstract(self: Memory, batch: list[Node], sampler: Sampler | None) -> str:
        ids = [n.id for n in batch]
        contents = await self._visible_contents(ids)
        episodes = [(i, contents[i]) for i in ids if i in contents]
        reply = await self._sample(sampler, abstract_prompt(episodes), 2000)
        insights = parse_abstraction(reply, [i for i, _ in episodes])
        vectors = await self._embed([a.content for a in insights]) if insights else []
        last = batch[-1]
        async with self.store.transaction():
            for insight, vector in zip(insights, vectors, strict=True):
                record = MemoryRecord(
                    type="reflection",
                    title=insight.title,
                    content=insight.content,
                    owner=last.owner,
                    importance=6.0,
                )
                await self._insert_derived(record, insight.sources, vector)
            await self.store.set_meta(
                f"abstract_watermark:{self.role}",
                json.dumps([last.created_at.timestamp(), last.id]),
            )
            await self._renew_lease()
        return f"{len(insights)} reflections from {len(episodes)} episodes"

    # ------------------------------------------------------------------ automatic passes

    async def maintain(self: Memory) -> None:
        """Run deterministic reflection passes after N writes and when idle, until cancelled.

        The server starts this in its task group. Settings: `reflect_every_writes` (N; 0 = off)
        and `reflect_idle_seconds` (a pass once nothing was written or recalled for that long
        after at least one write; 0 = off).
        """
        every = self.settings.reflect_every_writes
        idle = self.settings.reflect_idle_seconds
        if not every and not idle:
            return
        state = self._lv()
        while True:
            timeout = math.inf
            if idle:
                timeout = max(idle - (anyio.current_time() - state.last_activity), 0.0)
                if state.writes == 0:
                    timeout = idle
            with anyio.move_on_after(timeout):
                await state.wake.wait()
            state.wake = anyio.Event()
            by_writes = bool(every) and state.writes >= every
            by_idle = (
                bool(idle)
                and state.writes > 0
                and anyio.current_time() - state.last_activity >= idle
            )
            if by_writes or by_idle:
                state.writes = 0
                await self.reflect(trigger="after-writes" if by_writes else "idle")

    # ------------------------------------------------------------------ KPIs (issue 4 §9)

    async def _kpis(self: Memory, scope: Scope) -> dict[str, float | int | str | None]:
        raw = await self.store.kpi_rows(scope, READ_CHANNELS)
        per = raw["per_memory"]
        reads = [n for _, _, _, n in per]
        total_reads = sum(reads)
        active = len(per)
        top = sorted(reads, reverse=True)[: max(1, math.ceil(active * 0.1))] if per else []
        reflective = [(t, d, n) for _, t, d, n in per if t == "reflection" or d]
        todos = raw["todos"]
        now = utc_now()
        open_ages = [(now - c).total_seconds() / 3600 for s, c in todos if s == "open"]
        counts = await self.store.counts(scope)
        last = await self.store.maintenance_entries("reflection", limit=1)
        return {
            "reads": total_reads,
            "never_fetched_share": _share(sum(1 for n in reads if n == 0), active),
            "top10pct_read_share": _share(sum(top), total_reads),
            "reflection_rows": len(reflective),
            "reflection_rows_share": _share(len(reflective), active),
            "reflection_reads_share": _share(sum(n for _, _, n in reflective), total_reads),
            "archived_share": _share(counts["archived"], counts["total"]),
            "tombstones": raw["tombstones"],
            "todos_open": len(open_ages),
            "todos_closed": sum(1 for s, _ in todos if s in ("done", "dropped")),
            "todo_open_median_age_hours": round(statistics.median(open_ages), 1)
            if open_ages
            else None,
            "intents_fired": await self.store.count_maintenance("intent"),
            "cross_owner_reads": raw["cross_owner_reads"],
            "reflection_passes": await self.store.count_maintenance("reflection"),
            "last_reflection_at": last[0]["ts"].isoformat() if last else None,
        }


def _share(part: float, whole: float) -> float:
    return round(part / whole, 4) if whole else 0.0


def _node(row: Any, index: int) -> Node:
    authored = row["authored_importance"]
    return Node(
        id=row["id"],
        type=row["type"],
        owner=row["owner"],
        created_at=dt(row["created_at"]),
        last_accessed_at=dt(row["last_accessed_at"]),
        importance=row["importance"],
        authored_importance=row["importance"] if authored is None else authored,
        salience=row["salience"],
        confidence=row["confidence"],
        strength=row["strength"],
        reinforcement_count=row["reinforcement_count"],
        status=row["status"],
        archived=bool(row["archived"]),
        row=index,
    )


def _record_node(m: MemoryRecord, authored: float) -> Node:
    return Node(
        id=m.id,
        type=m.type.value,
        owner=m.owner,
        created_at=m.created_at,
        last_accessed_at=m.last_accessed_at,
        importance=m.importance,
        authored_importance=authored,
        salience=m.salience,
        confidence=m.confidence,
        strength=m.strength,
        reinforcement_count=m.reinforcement_count,
        status=m.status,
        archived=m.archived,
    )
