"""Explain: why memories rank where they do, without logging anything (DESIGN.md §6).

A dry run of the recall pipeline for a query, a memory's access history from the stream, or
— with both — why that memory did or did not make the top k for that query now, with its
retention and prune ETA. A memory asked about by id comes with its state: live, faded (archived
by maintenance, which recall still reaches) or forgotten (by its user, which it never does).
"""

from __future__ import annotations

from ..domain.archive import merged_anchor, state
from ..domain.epoch import from_epoch
from ..domain.forgetting import prune_eta, retention
from ..domain.inputs import recall_args
from ..domain.replies import ExplainResult, ExplainRow, WhyNot
from ..domain.requests import ExplainRequest
from ..domain.schema import Memory, now as utc_now
from ..errors import InvalidInput
from .caller import Caller
from .corrections import kept_from_pruning
from .ranking import Ranked, Ranking
from .recall import flags, ranking_for, settle
from .tombstones import merged_anchors
from .views import redact

__all__ = ["explain"]


async def _archived_because(caller: Caller, memory: Memory) -> str:
    """Why an archived memory is (its tombstone's reason), for a replay: a merged duplicate
    names the memory that answers for it, which "(faded)" alone left the reader to find. A
    user's forget says its reason only to a writer of the memory's role (the words are the
    user's); maintenance's reasons name ids and numbers only."""
    if not memory.archived:
        return ""
    stone = (await caller.store.tombstones_of([memory.id])).get(memory.id)
    if stone is None:
        return ""
    if memory.faded:
        # Only a merge's reason names an anchor: other fades need no second look.
        merged = merged_anchor(stone.reason) is not None
        anchor = (await merged_anchors(caller, [memory.id])).get(memory.id) if merged else None
        if anchor is not None:
            return f"Faded: merged into {anchor} by reflection, which answers for it."
        return f"Faded: {stone.reason}."
    if caller.may_write(memory.owner):
        return f"Forgotten: {stone.reason}."
    return "Forgotten."


async def explain(caller: Caller, request: ExplainRequest) -> ExplainResult:
    """Why things rank: a dry run for a query, a memory's access history, or "why not".

    Raises:
        InvalidInput: neither query nor memory_id given, or a bad argument.
        NotFound: the memory does not exist in this scope.
    """
    query, memory_id, k, hops = request.query, request.memory_id, request.k, request.hops
    scope_obj = caller.scope(request.scope)
    if query is None and memory_id is None:
        raise InvalidInput(
            "query", "is missing, and so is memory_id.", "Pass a query, a memory_id, or both."
        )
    target = await caller.resolve_in_scope(memory_id, scope_obj) if memory_id is not None else None
    if query is None:
        assert target is not None  # one of query and memory_id was given
        stream = await caller.store.access_stream(target, limit=100)
        shown = caller.actor.effective()
        memory = await caller.fetch(target)
        why = await _archived_because(caller, memory)
        return ExplainResult(
            mode="replay",
            memory_id=target,
            state=state(memory.archived, memory.faded),
            accesses=[redact(a, shown) for _, _, a in stream],
            total_accesses=await caller.store.count_accesses(target),
            embeddings=caller.engine.embeddings_state,
            note=" ".join(filter(None, [caller.narrowed(request.scope, scope_obj), why])),
        )
    query, _ = recall_args(query, k, None, hops)
    extra = (target,) if target else ()
    # With a memory asked about, every archived memory is searched, so that one is scored
    # as the query finds it whatever its state (the others found are left out).
    ranking = await ranking_for(
        caller, query, scope_obj, None, hops, extra=extra, whole_archive=True, shown=k
    )
    await settle(caller, ranking, k)
    rows = [_row(caller, ranking, i, r) for i, r in enumerate(ranking.rows[:k], 1)]
    ready = "ready" if ranking.dense_ready else "warming"
    narrowed = caller.narrowed(request.scope, scope_obj)
    if target is None:
        return ExplainResult(mode="query", query=query, rows=rows, embeddings=ready, note=narrowed)
    why_not = await _why_not(caller, target, ranking, k)
    return ExplainResult(
        mode="why_not",
        query=query,
        memory_id=target,
        state=why_not.state,
        rows=rows,
        why_not=why_not,
        embeddings=ready,
        note=narrowed,
    )


def _row(caller: Caller, ranking: Ranking, position: int, r: Ranked) -> ExplainRow:
    return ExplainRow(
        rank=position,
        id=r.id,
        score=round(r.score, 4),
        source=r.source,
        cos=None if r.cos is None else round(r.cos, 4),
        rel=round(r.rel, 4),
        rec=round(r.rec, 4),
        imp=round(r.imp, 4),
        spread=round(r.spread, 4),
        type=r.row.type,
        owner=r.full.owner,
        head=r.head,
        path=r.path,
        flags=flags(caller, r),
        forgotten=r.forgotten,
        terms=ranking.terms(r, caller.settings.recall),
    )


def _gaps(mine: Ranked | None, other: Ranked) -> list[str]:
    """The parts in which `mine` falls short of `other` ("rel 0.093 < 0.136")."""
    if mine is None:
        return []
    return [
        f"{name} {getattr(mine, name):.3f} < {getattr(other, name):.3f}"
        for name in ("rel", "rec", "imp", "spread")
        if getattr(mine, name) < getattr(other, name)
    ]


async def _why_not(caller: Caller, target: str, ranking: Ranking, k: int) -> WhyNot:
    memory = await caller.fetch(target)
    position = ranking.rank_of(target)
    mine = ranking.rows[position - 1] if position else None
    kth = ranking.rows[k - 1] if len(ranking.rows) >= k else None
    policy = caller.settings.forgetting
    now = utc_now()
    weak_line = caller.settings.recall.weak_relevance
    faded = memory.archived and memory.faded
    forgotten = memory.archived and not memory.faded
    own = caller.uses_count(memory.owner)  # another role's read never revives it
    relevant = mine is not None and not mine.weak(weak_line)
    in_top = position is not None and position <= k and not forgotten
    anchor = (await merged_anchors(caller, [target])).get(target) if faded else None
    if forgotten:
        reason = "It was forgotten by its user (archived on purpose), so recall never shows it."
    elif anchor is not None and not in_top:
        at = ranking.rank_of(anchor)
        reason = (
            f"Reflection merged it into {anchor[:8]}, which said the same thing and answers for "
            "it" + (f" (ranked {at} for this query)" if at else "") + ": recall shows that "
            "memory first and leaves this copy faded."
        )
    elif faded and not relevant:
        reason = (
            "It has faded (archived by reflection: pruned or merged) and is only weakly related "
            f"to this query (rel {0.0 if mine is None else mine.rel:.3f} < {weak_line:g}), so "
            "recall leaves it out; a query it answers "
            + ("brings it back." if own else "shows it (its own role's recall brings it back).")
        )
    elif in_top and faded:
        reason = (
            f"It has faded (archived by reflection) and ranks {position} of the top {k}, below "
            "live memories of similar relevance; a recall that returns it "
            + (
                "makes it live again."
                if own
                else "shows it and leaves it faded (it is another role's: only that role's "
                "recall makes it live again)."
            )
        ) + _penalised(mine)
    elif in_top:
        reason = f"It ranks {position} of the top {k}"
        if position is not None and position > 1:
            # What puts the one above it first, not rank k's (which ranks below it).
            above = ranking.rows[position - 2]
            gaps = _gaps(mine, above)
            reason += f", below {above.id[:8]}" + (f": {', '.join(gaps)}" if gaps else "")
        reason = _penalty_first(mine, reason + ".")
    elif mine is None:
        reason = "It was not a candidate: it is filtered out for this query."
    else:
        gaps = [] if kth is None else _gaps(mine, kth)
        reason = f"It ranks {position}, below the top {k}" + (
            f": {', '.join(gaps)} against rank {k}." if gaps else "."
        )
        reason = _penalty_first(mine, reason)
        if faded:
            reason += " It has faded (archived by reflection), which ranks it lower."
    return WhyNot(
        id=target,
        in_top_k=in_top,
        rank=position,
        k=k,
        score=None if mine is None else round(mine.score, 4),
        components=None if mine is None else mine.components,
        kth_score=None if kth is None else round(kth.score, 4),
        kth_components=None if kth is None else kth.components,
        terms=None if mine is None else ranking.terms(mine, caller.settings.recall),
        kth_terms=None if kth is None else ranking.terms(kth, caller.settings.recall),
        retention=round(retention(memory.fading_since, memory.strength, now, policy.tau_hours), 4),
        # A memory pruning never takes, or one already archived, has no prune date (§7.3).
        prune_eta=None
        if memory.archived or await kept_from_pruning(caller, memory)
        else prune_eta(memory.last_accessed_at, memory.strength, policy, now, memory.valid_from),
        archived=memory.archived,
        reason=reason,
        state=state(memory.archived, memory.faded),
    )


def _penalty_first(mine: Ranked | None, ranks: str) -> str:
    """`ranks` (where it ranks, and the score gaps to the one above) after the penalty it
    carries, when it carries one: that is why it ranks there ("imp 0.500 < 1.000 against
    rank 2" came first and read as the cause, and "superseded by" only after it)."""
    penalty = _penalised(mine).strip()
    return f"{penalty} {ranks}" if penalty else ranks


def _penalised(mine: Ranked | None) -> str:
    """What the score's penalty term stands for, by name: superseded (and by which memory),
    validity ended or not begun."""
    if mine is None:
        return ""
    said = ""
    if mine.superseded_by:
        said += (
            f" It is superseded by {mine.superseded_by[:8]} (a newer memory refines or "
            "contradicts it): a penalty, and it never ranks above that memory."
        )
    if mine.stale:
        said += " Its validity ended (valid_to is past): a penalty."
    if mine.upcoming and mine.row.valid_from is not None:
        said += (
            f" It holds only from {from_epoch(mine.row.valid_from):%Y-%m-%d}"
            " (valid_from is ahead): a penalty, as for a memory whose validity ended."
        )
    return said
