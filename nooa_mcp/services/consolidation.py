"""Consolidation: reflection passes over one role, and the background loop that runs them.

DESIGN.md §8 describes each step.

A pass runs merge → reconcile → link → rescore → abstract → prune. Merge folds a memory into
an older one only when the two say the same thing in the same words (`facts.same_statement`);
a pair as close that differs in any word is linked instead. What a pass archives fades: recall
still reaches it (`domain.archive`). Each item re-reads what it
changes, so a pass can be stopped between transactions and a later pass converges to the same
store. Deterministic items share transactions of up to 200 items or 50 ms of work (a commit
costs more than a link), so the store's write lock is never held for long and a client's write
waits behind at most one such transaction; a batch that fails is redone item by item.
What a pass plans over — the rows, their vectors, the similar pairs, and only the pairs that
touch what changed since the last completed pass — is `planning.Planner`'s business. One pass
per role runs at a time across processes: a lease per role in the store, renewed beside the
pass while it runs. A lease whose holder process is gone (same host, pid not alive) is taken
over at once, so a killed pass never blocks the role for long, and one role's pass never
blocks another's.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import numpy as np

from ..domain.accesses import apply_access, created_record
from ..domain.archive import merged_reason, pruned_reason, superseded_reason
from ..domain.facts import same_statement, statement_words
from ..domain.forgetting import prunable, retention
from ..domain.generative import (
    SYSTEM,
    MalformedReply,
    SamplingUnavailable,
    abstract_prompt,
    clusters_from_neighbours,
    parse_abstraction,
    parse_reconciliation,
    plan_abstract,
    reconcile_prompt,
)
from ..domain.reflection import (
    LINK_LOW,
    MERGE_SIMILARITY,
    UNMERGED_TYPES,
    Node,
    Rows,
    id_ranks,
    link_item,
    links_greedy,
    merged_fields,
    merges_from_pairs,
    prune_rows,
    rescore,
    rescore_rows,
)
from ..domain.repeats import absorb_labels, labels_fit, one_memory
from ..domain.replies import ReflectReport, ReflectStep
from ..domain.schema import REFLECTION_STEPS, Channel, EdgeType, Memory, now as utc_now
from ..domain.scope import Actor, owner_role
from ..domain.text import choices, head
from ..engine import Engine, RoleState, text_of
from ..errors import InvalidInput, NooaError
from ..malloc_tuning import release_free_memory
from . import provenance, views
from .caller import Caller
from .corrections import live_corrected
from .planning import PAIR_STEPS, Planner, edges_around
from .references import visible_contents
from .sampler import Sampler
from .tombstones import fade

__all__ = ["GENERATIVE", "LEASE_SECONDS", "Progress", "maintain", "reflect"]

GENERATIVE = frozenset({"reconcile", "abstract"})
LEASE_SECONDS = 300.0
#: How long a pass's closing KPI snapshot may take before the entry is logged without it.
KPI_SECONDS = 30.0
#: A pass started by writes logs the KPIs only if none was logged for the role in this many
#: seconds: while a client fills a store, passes come every few seconds, and the snapshot
#: reads every memory and its access counts (a large share of a pass at 100k) for a point on
#: the console's chart all but equal to the last. Passes asked for, and idle ones, always log
#: it.
KPI_EVERY = 60.0

#: Most items one transaction of a deterministic step applies, and the most work (seconds)
#: it starts inside one: whichever comes first ends the transaction. 50 ms bounds how long
#: a client's write waits for the write lock behind a pass.
APPLY_BATCH = 200
APPLY_SECONDS = 0.05
SUPERSEDING_OR_DERIVED = frozenset({"refines", "contradicts", "derived_from"})

Progress = Callable[[int, int, str], Awaitable[None]]

logger = logging.getLogger(__name__)


def _lease_key(role: str) -> str:
    return f"reflection_lease:{role}"


def _holder_alive(holder: str) -> bool:
    """Whether a lease holder ("host:pid:nonce") may still be running.

    A holder on this host whose pid is gone is dead for sure; one on another host is trusted
    until its lease expires.
    """
    host, _, rest = holder.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return True
    pid = int(pid_text)
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A killed process its parent has not reaped yet still answers signal 0: a zombie runs
    # nothing and holds nothing.
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Whether `pid` has exited and waits to be reaped (Linux /proc; elsewhere: no)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # The state follows the command name, which is in parentheses and may hold spaces.
    fields = stat.rpartition(")")[2].split()
    return bool(fields) and fields[0] in ("Z", "X")


async def reflect(
    caller: Caller,
    steps: Sequence[str] | None = None,
    *,
    sampler: Sampler | None = None,
    progress: Progress | None = None,
    now: datetime | None = None,
    trigger: str = "on-demand",
) -> ReflectReport:
    """Run one reflection pass over the caller's role (see the module docstring).

    Reconcile and abstract need a `sampler` (the client's model through MCP sampling) and are
    skipped without one. The report goes to the maintenance log.

    Args:
        steps: a subset of merge, reconcile, link, rescore, abstract, prune (default: all).
        sampler: asks the client's model; None skips the generative steps.
        progress: awaited as (done, total, message) after every item.
        now: the time pruning is judged at (default: now).

    Raises:
        InvalidInput: an unknown step.
    """
    wanted = list(REFLECTION_STEPS) if steps is None else [str(s).strip().lower() for s in steps]
    for step in wanted:
        if step not in REFLECTION_STEPS:
            raise InvalidInput(
                "steps", f"{step!r} is not a step.", f"Use {choices(REFLECTION_STEPS)}."
            )
    state = caller.engine.role_state(caller.role)
    report = ReflectReport(status="already-running", trigger=trigger, started_at=utc_now())
    if state.reflect_lock.locked():
        return report
    async with state.reflect_lock:
        if not await _take_lease(caller):
            return report
        report.status = "interrupted"
        try:
            pass_ = _Pass(caller, report, sampler, progress, now)
            failed: Exception | None = None
            # The pass keeps row numbers of the vector index from its sweep to its last
            # step: no role is let go before it ends.
            with caller.index.held():
                async with anyio.create_task_group() as tg:
                    # A full sweep of a large role plans for minutes: the lease is renewed
                    # beside the pass, not by its items.
                    tg.start_soon(_keep_lease, caller)
                    try:
                        await pass_.run([s for s in REFLECTION_STEPS if s in wanted])
                    except Exception as exc:  # re-raised as it is, not in an exception group
                        failed = exc
                    tg.cancel_scope.cancel()
                if failed is not None:
                    raise failed
                await pass_.planner.commit(pass_.unsettled)
            report.status = "completed"
        finally:
            with anyio.CancelScope(shield=True):
                report.finished_at = utc_now()
                report.applied = sum(s.applied for s in report.steps)
                entry = {**report.model_dump(mode="json"), "role": caller.role}
                kpis = await _kpi_snapshot(caller) if _kpis_due(state, trigger) else None
                if kpis is not None:
                    entry["kpis"] = kpis
                    state.kpis_at = anyio.current_time()
                async with caller.store.transaction():
                    await caller.store.log_maintenance("reflection", entry)
                    await _release_lease(caller)
                caller.index.mark_dirty()
                state.last_report = report
                state.pass_done.set()
                state.pass_done = anyio.Event()
    return report


def _kpis_due(state: RoleState, trigger: str) -> bool:
    """Whether this pass logs a KPI snapshot (see `KPI_EVERY`)."""
    if trigger != "after-writes" or state.kpis_at is None:
        return True
    return anyio.current_time() - state.kpis_at >= KPI_EVERY


async def _kpi_snapshot(caller: Caller) -> dict[str, float | int] | None:
    """The role's KPIs as the pass leaves them, for the console's chart over passes.

    Read outside the log's transaction (no write lock held for it) and never the pass's
    undoing: a failed or slow read leaves the entry without "kpis", and the entry is logged.
    """
    with anyio.move_on_after(KPI_SECONDS):
        try:
            return await views.kpi_snapshot(caller)
        except Exception:
            logger.warning("the KPI snapshot of %r's pass failed", caller.role, exc_info=True)
            return None
    logger.warning("the KPI snapshot of %r's pass took over %ss", caller.role, KPI_SECONDS)
    return None


async def _take_lease(caller: Caller) -> bool:
    async with caller.store.transaction():
        raw = await caller.store.lock_meta(_lease_key(caller.role))
        now = utc_now().timestamp()
        if raw:
            lease = json.loads(raw)
            held = lease["holder"] and lease["holder"] != caller.engine.holder
            if held and lease["until"] > now and _holder_alive(lease["holder"]):
                return False
        await _write_lease(caller)
    return True


async def _write_lease(caller: Caller) -> None:
    # Inside a transaction: the lease outlives a pass only by LEASE_SECONDS.
    until = utc_now().timestamp() + LEASE_SECONDS
    await caller.store.set_meta(
        _lease_key(caller.role), json.dumps({"holder": caller.engine.holder, "until": until})
    )


async def _keep_lease(caller: Caller) -> None:
    """Renew the lease while a pass runs (a failed renewal is retried; the pass goes on)."""
    while True:
        await anyio.sleep(LEASE_SECONDS / 5)
        try:
            async with caller.store.transaction():
                await _write_lease(caller)
        except Exception:
            logger.warning("renewing the reflection lease of %r failed", caller.role, exc_info=True)


async def _release_lease(caller: Caller) -> None:
    raw = await caller.store.lock_meta(_lease_key(caller.role))
    if raw and json.loads(raw)["holder"] == caller.engine.holder:
        await caller.store.set_meta(_lease_key(caller.role), json.dumps({"holder": "", "until": 0}))


class _Pass:
    """One reflection pass: plans each step on the store as it is now, applies its items in
    short transactions (see `_apply`).

    The rows are read once and again only after a step changed something; the vectors come
    from the process's vector index; one similarity sweep (see `planning.Planner`) serves
    merge, link and reconcile, and covers only the rows changed since the last completed
    pass when that pass's record allows.
    """

    def __init__(
        self,
        caller: Caller,
        report: ReflectReport,
        sampler: Sampler | None,
        progress: Progress | None,
        now: datetime | None,
    ) -> None:
        self.caller = caller
        self.report = report
        self.sampler = sampler
        self.progress = progress
        self.now = now
        self.done = 0
        self.total = 0
        self.role = caller.role if caller.owner else None
        self.planner = Planner(caller, self.role, [], False)
        #: Ids of items skipped because a row vanished meanwhile: the next pass looks again.
        self.unsettled: set[str] = set()
        #: Merges skipped because one memory could not hold both's labels (`labels_fit`): a
        #: set, so an item redone after a rolled-back batch is counted once.
        self.kept_apart: set[tuple[str, str]] = set()

    async def tick(self, message: str) -> None:
        self.done += 1
        if self.progress is not None:
            await self.progress(self.done, self.total, message)

    async def run(self, steps: list[str]) -> None:
        runs = [s for s in steps if not (s in GENERATIVE and self.sampler is None)]
        self.planner = Planner(
            self.caller, self.role, [s for s in runs if s in PAIR_STEPS], "reconcile" in runs
        )
        await self.planner.start()
        self._count()
        for name in steps:
            step = ReflectStep(step=name)
            self.report.steps.append(step)
            if name in GENERATIVE and self.sampler is None:
                step.note = (
                    "skipped: it asks the client's model (MCP sampling), so only a server "
                    "with NOOA_GENERATIVE_REFLECTION=1 whose client offers sampling runs it"
                )
                continue
            plan, apply = await self._plan(name)
            self._count()
            step.planned = len(plan)
            self.total += len(plan)
            if name in GENERATIVE:
                await self._apply_one_by_one(step, plan, apply)
            else:
                await self._apply(step, plan, apply, self._link_many if name == "link" else None)
            if name == "merge" and self.kept_apart:
                # Said, or "1 skipped" read as a pass that failed or a rule broken.
                step.note = (
                    f"{len(self.kept_apart)} pair(s) left as two memories: together they hold "
                    "more than one memory may (50 tags, 50 entities or 20 references)"
                )

    async def _apply(
        self,
        step: ReflectStep,
        plan: list[Any],
        apply: Callable[[Any], Awaitable[str]],
        many: Callable[[list[Any]], Awaitable[list[str]]] | None = None,
    ) -> None:
        """Apply items in transactions of up to `APPLY_BATCH` items or `APPLY_SECONDS` of
        work, whichever comes first; with `many`, a transaction's items in one call.

        Each statement is a round trip (on SQLite a hop to the connection's thread, which a
        loaded machine makes cost a context switch), and a transaction adds two: 92k links
        at one transaction and five statements each took 338 s at 100k. So items share a
        transaction, and link items (`_link_many`) one read and one write per transaction.
        The bound on a transaction's work bounds how long a client's write waits for the
        store's write lock, and between two transactions the pass yields, so calls waiting
        for the lock go first. A batch that fails is rolled back and redone one item per
        transaction (`_apply_each`): the items before the failing one are kept, and the
        failure reaches the caller as it did with one transaction per item. Progress goes
        out after the commit: a callback may write to the store.
        """
        start = 0
        while start < len(plan):
            outcomes: list[str] = []
            tried = 0
            try:
                async with self.caller.store.transaction():
                    began = time.perf_counter()
                    if many is not None:
                        chunk = plan[start : start + APPLY_BATCH]
                        tried = len(chunk)
                        outcomes = await many(chunk)
                    else:
                        for item in plan[start : start + APPLY_BATCH]:
                            tried += 1
                            outcomes.append(await apply(item))
                            if time.perf_counter() - began >= APPLY_SECONDS:
                                break
            except Exception:
                if tried == 0:
                    raise  # the transaction could not begin: no item to redo
                # Rolled back: redo what the batch tried, one item per transaction.
                logger.info("a batch of %s items failed; redoing it item by item", step.step)
                await self._apply_each(step, plan[start : start + tried], apply)
                start += tried
                continue
            start += tried
            for outcome in outcomes:
                self._record(step, outcome)
                await self._tick_step(step)
            await anyio.sleep(0)

    async def _apply_each(
        self, step: ReflectStep, plan: list[Any], apply: Callable[[Any], Awaitable[str]]
    ) -> None:
        """Apply items one transaction each: the fallback for a batch that failed, so one
        failing item loses none of the others before it."""
        for item in plan:
            async with self.caller.store.transaction():
                outcome = await apply(item)
            self._record(step, outcome)
            await self._tick_step(step)
            await anyio.sleep(0)

    async def _apply_one_by_one(
        self, step: ReflectStep, plan: list[Any], apply: Callable[[Any], Awaitable[str]]
    ) -> None:
        """Generative items: each asks the client's model first, then commits on its own."""
        for item in plan:
            try:
                outcome: str | None = await apply(item)
            except MalformedReply as exc:
                step.failed += 1
                step.details.append(f"malformed reply: {exc}")
                outcome = None
            except SamplingUnavailable as exc:
                step.note = f"stopped: {exc}"
                break
            if outcome is not None:
                self._record(step, outcome)
            await self._tick_step(step)
            await anyio.sleep(0)

    async def _tick_step(self, step: ReflectStep) -> None:
        """Progress: how many of the step's planned items are done (applied, skipped, failed)."""
        done = step.applied + step.skipped + step.failed
        await self.tick(f"{step.step} {done}/{step.planned}")

    def _record(self, step: ReflectStep, outcome: str) -> None:
        if outcome:
            step.applied += 1
            if step.step in GENERATIVE:
                self.planner.stale = True  # new rows: read them
            if len(step.details) < 20:
                step.details.append(outcome)
        else:
            step.skipped += 1

    def _count(self) -> None:
        self.report.sweep = self.planner.kind
        self.report.changed = self.planner.changed
        self.report.compared = self.planner.compared

    async def _plan(self, name: str) -> tuple[list[Any], Callable[[Any], Awaitable[str]]]:
        rows = await self.planner.rows()
        if name == "merge":
            return await self._merge_plan(rows), self._merge
        if name == "link":
            return await self._link_plan(rows), self._link
        if name == "rescore":
            # Off the event loop, like all work over every row of a role.
            return await anyio.to_thread.run_sync(rescore_rows, rows), self._rescore
        if name == "prune":
            at = self.now or utc_now()
            plan = await anyio.to_thread.run_sync(
                prune_rows, rows, at, self.caller.settings.forgetting
            )
            return await self._keep_corrections(plan), functools.partial(self._prune, at=at)
        if name == "reconcile":
            return await self._reconcile_plan(rows), self._reconcile
        return await self._abstract_plan(rows), self._abstract

    async def _keep_corrections(self, plan: list[Any]) -> list[Any]:
        """The plan without the corrections of a memory that stays live (DESIGN.md §7.2): one
        whose corrected memory fades in this plan too goes with it."""
        planned = {item.id for item in plan}
        corrected = await live_corrected(self.caller, [item.id for item in plan])
        kept = {src for src, olds in corrected.items() if not set(olds) <= planned}
        return [item for item in plan if item.id not in kept]

    async def _merge_plan(self, rows: Rows) -> list[Any]:
        a, b, cos = self.planner.pairs(rows, MERGE_SIMILARITY)
        same = rows.type_code[a] == rows.type_code[b]
        same &= rows.mask_types(UNMERGED_TYPES, keep=False)[a]
        a, b, cos = a[same], b[same], cos[same]
        if not a.size:
            return []
        # Only two memories that say the same thing in the same words are one memory; any
        # other changed word ("three" / "four", "low" / "high", a place) keeps both. Asked
        # first: of the pairs from the links' cosine, few are left to read the edges of.
        texts = await _texts(self.caller, [rows.ids[p] for p in np.unique(np.concatenate([a, b]))])
        same = await anyio.to_thread.run_sync(_same_pairs, rows, a, b, texts)
        a, b, cos = a[same], b[same], cos[same]
        if not a.size:
            return []
        # A memory and what it refines, contradicts or was derived from are versions.
        ends = np.unique(np.concatenate([a, b]))
        facts = await edges_around(self.caller, rows, ends, SUPERSEDING_OR_DERIVED)
        keep = ~facts.joins(a, b, len(rows))
        a, b, cos = a[keep], b[keep], cos[keep]
        # Off the event loop: a full plan can name much of a large role.
        return await anyio.to_thread.run_sync(_merge_items, rows, a, b, cos)

    async def _link_plan(self, rows: Rows) -> list[Any]:
        await self.planner.extend(rows)
        # Up from LINK_LOW with no ceiling: a pair close enough to merge that merge kept (it
        # differs in a word) is linked as two versions of a statement.
        a, b, cos = self.planner.pairs(rows, LINK_LOW)
        if not a.size:
            return []
        ends = np.unique(np.concatenate([a, b]))
        # The link budget counts related edges to archived memories too, so pruning after
        # linking frees no budget and a second pass adds nothing.
        facts = await edges_around(self.caller, rows, ends)
        keep = ~facts.joins(a, b, len(rows))
        a, b, cos = a[keep], b[keep], cos[keep]
        # Ties break by id: the ends' order among themselves is all links_greedy reads, and
        # sorting every id of a large role would cost each pass.
        rank = np.zeros(len(rows), dtype=np.int64)
        rank[ends] = await anyio.to_thread.run_sync(id_ranks, [rows.ids[p] for p in ends.tolist()])
        chosen = await anyio.to_thread.run_sync(links_greedy, a, b, cos, rank, facts.related)
        return [link_item(rows.ids[a[k]], rows.ids[b[k]], float(cos[k])) for k in chosen.tolist()]

    async def _reconcile_plan(self, rows: Rows) -> list[list[Node]]:
        hood = await self.planner.neighbours(rows)
        if hood is None:
            return []
        seeds = np.flatnonzero(hood.count > 0)
        keys: list[tuple] = [()] * hood.count.shape[0]
        ids = []
        for p in seeds.tolist():
            r = int(hood.where[p])
            ids.append(rows.ids[r])
            keys[p] = (owner_role(rows.owner_of(r)), float(rows.created_at[r]), rows.ids[r])
        # A product or source of an earlier reconcile (a derived_from edge between live
        # memories) is consolidated: a cluster of those only is not asked about again.
        derived = []
        for start in range(0, len(ids), 2000):
            edges = await self.caller.store.edges_touching(ids[start : start + 2000])
            derived += [e for e in edges if e.type == "derived_from"]
        ends = sorted({x for e in derived for x in (e.src, e.dst)})
        live = set(ends).intersection(rows.ids)
        consolidated = {
            x for e in derived if e.src in live and e.dst in live for x in (e.src, e.dst)
        }
        settled = [False] * hood.count.shape[0]
        for p in seeds.tolist():
            settled[p] = rows.ids[int(hood.where[p])] in consolidated
        clusters = clusters_from_neighbours(keys, hood.count, hood.top, hood.top_cos, settled)
        return [[rows.node(int(hood.where[p])) for p in members] for members in clusters]

    # The deterministic steps below apply one item inside the transaction `_apply` opens
    # (shared with the items before and after it), re-reading what it changes, so an item sees
    # what earlier items of its transaction wrote; each returns a short description when it
    # changed something, "" when the item no longer holds. They touch the pass's own state
    # only with what a redo repeats (archived, revised, unsettled), so a batch rolled back and
    # redone item by item leaves it as one transaction per item would. The lease is renewed
    # by `_keep_lease`.

    async def _merge(self, item: Any) -> str:
        caller = self.caller
        got = await caller.store.fetch_many([item.anchor, item.dup])
        if len(got) < 2 or got[item.anchor].archived or got[item.dup].archived:
            self.unsettled.update((item.anchor, item.dup))
            return ""
        anchor, dup = got[item.anchor], got[item.dup]
        # One memory, not only one text: the same type, time of validity, event time and
        # place (`domain.repeats`): "Paid the rent" in October and in November are two.
        if not one_memory(anchor, dup):
            return ""
        # The anchor keeps every tag, entity and reference of the duplicate, or they stay two.
        if not labels_fit(anchor, dup):
            self.kept_apart.add((anchor.id, dup.id))
            return ""
        vecs = await caller.store.embeddings_of([anchor.id, dup.id])
        if len(vecs) < 2 or float(vecs[anchor.id] @ vecs[dup.id]) < MERGE_SIMILARITY:
            return ""
        # Never fold two different statements into one, however close their embeddings
        # (DESIGN.md §8.2). Checked again on the rows as they are now: either may have been
        # edited since the plan.
        if not same_statement(
            text_of(anchor.title, anchor.content), text_of(dup.title, dup.content)
        ):
            return ""
        fields = merged_fields(_node(anchor), _node(dup))
        anchor.reinforcement_count = int(fields["reinforcement_count"])
        anchor.strength = int(fields["strength"])
        anchor.importance = float(fields["importance"])
        anchor.authored_importance = float(fields["authored_importance"])
        anchor.salience = float(fields["salience"])
        anchor.confidence = float(fields["confidence"])
        absorb_labels(anchor, dup)  # the duplicate's tags, entities and place stay findable
        access = caller.access(Channel.reflected, query=f"merged {dup.id[:8]}")
        caller.apply(anchor, access)
        await caller.store.save(anchor)
        await caller.store.copy_edges(dup.id, anchor.id)
        await caller.store.add_edge(anchor.id, dup.id, EdgeType.refines, 1.0)
        await fade(caller, dup, merged_reason(anchor.id))
        await caller.store.append_accesses([(anchor.id, access)])
        self.planner.archived([dup.id])
        self.planner.revised(
            anchor.id,
            reinforcement_count=anchor.reinforcement_count,
            strength=anchor.strength,
            importance=anchor.importance,
            authored_importance=anchor.authored_importance,
            salience=anchor.salience,
            confidence=anchor.confidence,
            last_accessed_at=anchor.fading_since.timestamp(),
        )
        return f"{dup.id[:8]} → {anchor.id[:8]}"

    async def _link(self, item: Any) -> str:
        caller = self.caller
        got = await caller.store.fetch_many([item.a, item.b])
        if len(got) < 2 or any(m.archived for m in got.values()):
            self.unsettled.update((item.a, item.b))
            return ""
        await caller.store.add_edge(item.a, item.b, EdgeType.related, item.weight)
        await caller.store.add_edge(item.b, item.a, EdgeType.related, item.weight)
        return f"{item.a[:8]} ~ {item.b[:8]} ({item.weight:.2f})"

    async def _link_many(self, items: list[Any]) -> list[str]:
        """`_link` over several items inside one transaction: one read of which of their
        ends are live (no row parsed) and one write of all their edges. The same outcomes as
        item by item: link items only add edges, so no item changes what a later one reads."""
        caller = self.caller
        live = await caller.store.live_ids(
            list(dict.fromkeys(x for i in items for x in (i.a, i.b)))
        )
        outcomes, edges = [], []
        for item in items:
            if item.a not in live or item.b not in live:
                self.unsettled.update((item.a, item.b))
                outcomes.append("")
                continue
            edges.append((item.a, item.b, EdgeType.related, item.weight))
            edges.append((item.b, item.a, EdgeType.related, item.weight))
            outcomes.append(f"{item.a[:8]} ~ {item.b[:8]} ({item.weight:.2f})")
        await caller.store.add_edges(edges)
        return outcomes

    async def _rescore(self, item: Any) -> str:
        caller = self.caller
        memory = await caller.store.fetch(item.id)
        if memory is None or memory.archived:
            return ""
        new = rescore(memory.authored, memory.salience, memory.reinforcement_count)
        if abs(new - memory.importance) < 1e-9:
            return ""
        await caller.store.set_importance(item.id, importance=new)
        self.planner.revised(item.id, importance=new)
        return f"{item.id[:8]} {memory.importance:g} → {new:g}"

    async def _prune(self, item: Any, at: datetime) -> str:
        caller = self.caller
        policy = caller.settings.forgetting
        m = await caller.store.fetch(item.id)
        if m is None:
            return ""
        if not prunable(_node(m), at, policy):
            return ""
        r = retention(m.fading_since, m.strength, at, policy.tau_hours)
        await fade(caller, m, pruned_reason(r, policy.prune_below))
        self.planner.archived([m.id])
        # What faded, in its own words: a reader (or the model) sees what it would lose. Not
        # another role's words: the shared owner's pass over every role logs as the shared
        # owner, whose log (and export) another role's memories are not in (DESIGN.md §10).
        said = m.owner == "" or owner_role(m.owner) == caller.role
        words = f" {head(text_of(m.title, m.content), 60)}" if said else ""
        return f"{item.id[:8]} (retention {r:.4f}){words}"

    async def _sample(self, prompt: str, max_tokens: int) -> str:
        if self.sampler is None:
            raise SamplingUnavailable("no sampler")
        try:
            reply = await self.sampler(system=SYSTEM, prompt=prompt, max_tokens=max_tokens)
        except (SamplingUnavailable, MalformedReply):
            raise
        except Exception as exc:  # the client refused or failed: stop generative work
            raise SamplingUnavailable(
                f"sampling failed ({exc.__class__.__name__}: {exc})"
            ) from None
        if not isinstance(reply, str):
            raise MalformedReply("the reply is not text")
        return reply

    async def _insert_derived(
        self, record: Memory, sources: Sequence[str], vector: np.ndarray
    ) -> None:
        """Insert a memory written by reflection, with `derived_from` edges to its sources."""
        caller = self.caller
        apply_access(
            record,
            created_record(record, caller.owner, *provenance.access_refs()),
            ring_size=caller.settings.ring_size,
            exact_k=caller.settings.recall.exact_accesses,
        )
        await caller.store.insert(record, vector)
        await caller.store.append_accesses([(record.id, record.access_log[0])])
        for source in sources:
            await caller.store.add_edge(record.id, source, EdgeType.derived_from, 1.0)

    async def _reconcile(self, cluster: list[Node]) -> str:
        caller = self.caller
        ids = [n.id for n in cluster]
        contents = await visible_contents(caller, ids)
        members = [(i, contents[i]) for i in ids if i in contents]
        if len(members) < 2:
            return ""
        reply = await self._sample(reconcile_prompt(members), 1200)
        result = parse_reconciliation(reply, [i for i, _ in members])
        if result is None:
            return ""
        vector = (await caller.engine.embed([text_of(result.title, result.content)]))[0]
        seed = cluster[0]
        async with caller.store.transaction():
            fresh = await caller.store.fetch_many([i for i, _ in members])
            live = [i for i, _ in members if i in fresh and not fresh[i].archived]
            if len(live) < 2:
                return ""
            olds = [fresh[i] for i in live]
            importance = max(m.importance for m in olds)
            record = Memory(
                type=seed.type,
                title=result.title,
                content=result.content,
                owner=seed.owner,
                importance=importance,
                authored_importance=importance,
                salience=max(m.salience for m in olds),
                confidence=max(m.confidence for m in olds),
                tags=list(dict.fromkeys(t for m in olds for t in m.tags))[:50],
                entities=list(dict.fromkeys(t for m in olds for t in m.entities))[:50],
            )
            await self._insert_derived(record, live, vector)
            superseded = [i for i in result.supersedes if i in live]
            for old in superseded:
                await caller.store.add_edge(record.id, old, EdgeType.refines, 1.0)
                await fade(caller, fresh[old], superseded_reason(record.id))
            await _write_lease(caller)
        ignored = f", ignored ids {result.ignored_ids}" if result.ignored_ids else ""
        return f"{record.id[:8]} from {len(live)}, superseding {len(superseded)}{ignored}"

    async def _abstract_plan(self, rows: Rows) -> list[list[Node]]:
        mark = await self.caller.store.get_meta(f"abstract_watermark:{self.caller.role}")
        pool = rows.mask_types({"episode"})
        ts_mark, id_mark = (-math.inf, "")
        if mark:
            ts_mark, id_mark = json.loads(mark)
            # A margin of a second: the exact comparison below is on the nodes themselves.
            pool &= rows.created_at >= ts_mark - 1.0
        nodes = [rows.node(p) for p in np.flatnonzero(pool).tolist()]
        done = {n.id for n in nodes if (n.created_at.timestamp(), n.id) <= (ts_mark, id_mark)}
        batch = plan_abstract(nodes, done)
        return [batch] if len(batch) >= 2 else []

    async def _abstract(self, batch: list[Node]) -> str:
        caller = self.caller
        ids = [n.id for n in batch]
        contents = await visible_contents(caller, ids)
        episodes = [(i, contents[i]) for i in ids if i in contents]
        reply = await self._sample(abstract_prompt(episodes), 2000)
        insights = parse_abstraction(reply, [i for i, _ in episodes])
        vectors: Any = await caller.engine.embed([a.content for a in insights]) if insights else []
        last = batch[-1]
        async with caller.store.transaction():
            for insight, vector in zip(insights, vectors, strict=True):
                record = Memory(
                    type="reflection",
                    title=insight.title,
                    content=insight.content,
                    owner=last.owner,
                    importance=6.0,
                    authored_importance=6.0,
                )
                await self._insert_derived(record, insight.sources, vector)
            await caller.store.set_meta(
                f"abstract_watermark:{caller.role}",
                json.dumps([last.created_at.timestamp(), last.id]),
            )
            await _write_lease(caller)
        return f"{len(insights)} reflections from {len(episodes)} episodes"


async def _texts(caller: Caller, ids: list[str]) -> dict[str, str]:
    """Each memory's text as it is embedded (title and content), a chunk of ids at a time."""
    out: dict[str, str] = {}
    for start in range(0, len(ids), 2000):
        for row in await caller.store.scoring_rows(ids[start : start + 2000]):
            out[row.id] = text_of(row.title, row.content)
    return out


def _same_pairs(rows: Rows, a: np.ndarray, b: np.ndarray, texts: dict[str, str]) -> np.ndarray:
    """Which pairs (positions into `rows`) say the same thing in the same words. Candidates
    start at the links' cosine, so most pairs differ: their words, split once per memory,
    settle it before the whole comparison runs."""
    words = {i: statement_words(t) for i, t in texts.items()}
    out = np.zeros(a.size, dtype=bool)
    for k, (p, q) in enumerate(zip(a.tolist(), b.tolist(), strict=True)):
        left, right = rows.ids[p], rows.ids[q]
        if left in words and right in words and words[left] == words[right]:
            out[k] = same_statement(texts[left], texts[right])
    return out


def _merge_items(rows: Rows, a: np.ndarray, b: np.ndarray, cos: np.ndarray) -> list[Any]:
    """`merges_from_pairs` over the nodes these pairs name (only those are built)."""
    ends = np.unique(np.concatenate([a, b]))
    nodes = [rows.node(p) for p in ends.tolist()]
    ia, ib = np.searchsorted(ends, a).tolist(), np.searchsorted(ends, b).tolist()
    return merges_from_pairs(nodes, zip(ia, ib, cos.tolist(), strict=True))


def _node(m: Memory) -> Node:
    return Node(
        id=m.id,
        type=m.type.value,
        owner=m.owner,
        created_at=m.created_at,
        last_accessed_at=m.fading_since,
        importance=m.importance,
        authored_importance=m.importance
        if m.authored_importance is None
        else m.authored_importance,
        salience=m.salience,
        confidence=m.confidence,
        strength=m.strength,
        reinforcement_count=m.reinforcement_count,
        status=m.prune_status,
        archived=m.archived,
        learned=m.learned_at,
    )


async def maintain(engine: Engine) -> None:
    """Run deterministic reflection passes after N writes and when idle, until cancelled.

    One loop per process serves every role: a role's pass starts once it has seen
    `reflect_every_writes` writes (0 = off), or once it had writes and nothing was written or
    recalled in it for `reflect_idle_seconds` (0 = off). A failing pass is logged and never
    stops the loop (or the server).
    """
    every = engine.settings.reflect_every_writes
    idle = engine.settings.reflect_idle_seconds
    if not every and not idle:
        return
    while True:
        timeout = math.inf
        now = anyio.current_time()
        for state in engine.roles.values():
            if idle and state.writes:
                timeout = min(timeout, max(idle - (now - state.last_activity), 0.0))
        with anyio.move_on_after(timeout):
            await engine.wake.wait()
        engine.wake = anyio.Event()
        now = anyio.current_time()
        for role, state in list(engine.roles.items()):
            by_writes = bool(every) and state.writes >= every
            by_idle = bool(idle) and state.writes > 0 and now - state.last_activity >= idle
            if by_writes or by_idle:
                state.writes = 0
                caller = Caller(engine, Actor(state.last_owner or role))
                try:
                    await reflect(caller, trigger="after-writes" if by_writes else "idle")
                except NooaError as exc:  # the store's state, not a bug: one line
                    logger.warning("background reflection of role %r failed: %s", role, exc)
                except Exception:
                    logger.exception("background reflection of role %r failed", role)
                if not state.writes:
                    # No memory was authored in this process since the pass was due (or
                    # it did not run): taken as the writes having paused, the role's rows,
                    # kept to spare the next pass a full read (13 MB at 100k), go rather
                    # than stay resident until it comes. A busy writer's rows are kept.
                    state.rows = None
                # What the pass allocated (rows, sweep blocks, plans) is free now but glibc
                # keeps it resident. Handing it back takes a few ms, off the loop.
                await anyio.to_thread.run_sync(release_free_memory)
