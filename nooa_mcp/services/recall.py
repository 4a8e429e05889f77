"""Recall: rank memories for a query and log why each returned one ranked there (DESIGN.md §5).

Every returned memory gets an access record (query, score, rank, components) on its ring and in
the stream; references are resolved for the reader's scope and `deref` is logged on memories
they reach; intents cued by the query fire. The records are made while the call runs and
written right after its reply (`Engine.after_reply`): the client waits for the ranking, not
for the log, and every other verb waits for the log before it reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine, Sequence

from ..domain.accesses import AccessState
from ..domain.epoch import from_epoch
from ..domain.forgetting import fading_since, protection, prune_eta, retention
from ..domain.injection import content_words
from ..domain.inputs import recall_args
from ..domain.replies import Flags, RecallHit, RecallResult
from ..domain.requests import RecallRequest
from ..domain.schema import (
    AccessRecord,
    Channel,
    Components,
    Reference,
    now as utc_now,
)
from ..domain.scope import Scope, owner_role
from ..errors import StoreConflict
from ..storage.rows import uses_of
from . import reminders
from .caller import Caller
from .corrections import correcting_live
from .ranking import KeywordRead, Ranked, Ranking, held_keywords, keyword_candidates, rank
from .references import resolve_all
from .relevance import on_its_own_terms
from .tombstones import merged_anchors, revive_by_use, rows_to_revive
from .transactions import in_transaction

__all__ = [
    "flags",
    "log_after_reply",
    "log_batch",
    "ranking_for",
    "recall",
    "revive",
]


async def ranking_for(
    caller: Caller,
    query: str,
    scope: Scope,
    kinds: set[str] | None,
    hops: int | None,
    include_archived: bool = False,
    extra: tuple[str, ...] = (),
    whole_archive: bool = False,
    shown: int | None = None,
) -> Ranking:
    """The full ranking of `query` for the caller, with the vector cache brought up to date
    (`include_archived` and `whole_archive` as for `ranking.rank`).

    Once the process holds the keyword postings (`storage.postings`) the keyword search
    runs on them after the index's sync, in well under a millisecond. Before (or for a
    scope whose roles are not loaded yet), the store's keyword read runs while the query is
    embedded: neither needs the other, so recall's fixed cost is the longer one.
    """
    # Held (every role of the scope loaded): the search reads ids alone, and ranking scores
    # on the facts the index holds (`storage.facts`).
    held = caller.index.holds(scope.visible_roles)
    store, settings = caller.store, caller.settings.recall
    keyword: Awaitable[KeywordRead]
    if held and caller.index.keywords.ready:
        # The postings are held too (`storage.postings`): the search is a few numpy
        # operations, run once the index is brought up to date below, not a task beside
        # the model for the cores.
        keyword = held_keywords(
            query,
            index=caller.index,
            store=store,
            scope=scope,
            settings=settings,
            types=kinds,
            whole_archive=whole_archive,
        )
    else:
        keyword = asyncio.get_running_loop().create_task(
            keyword_candidates(
                query,
                store=store,
                scope=scope,
                settings=settings,
                types=kinds,
                whole_archive=whole_archive,
                held=held,
            )
        )
    try:
        query_vector = await caller.engine.query_vector(query, caller.role)
        # Every role the scope sees is loaded before the search (a cold role's first recall
        # reads its rows), and none is let go while the ranking holds row numbers.
        async with caller.engine.vectors(
            scope.visible_roles, for_keywords=query_vector is None
        ) as index:
            # `rank` searches the vectors before it waits for the keyword rows: at 100k the
            # matrix product (~8 ms) runs beside the full-text search (~8 ms) too.
            return await rank(
                query,
                store=caller.store,
                index=index,
                query_vector=query_vector,
                scope=scope,
                settings=caller.settings.recall,
                now=utc_now().timestamp(),
                types=kinds,
                hops=hops,
                include_archived=include_archived,
                extra_ids=extra,
                keyword=keyword,
                whole_archive=whole_archive,
                shown=shown,
            )
    except BaseException:
        # Leaving with an error (or cancelled): the read is not wanted any more, and its own
        # error, if any, is collected so it is never reported as unretrieved.
        if isinstance(keyword, asyncio.Task):
            keyword.add_done_callback(lambda t: t.cancelled() or t.exception())
            keyword.cancel()
        elif isinstance(keyword, Coroutine):
            keyword.close()
        raise


def flags(caller: Caller, r: Ranked) -> Flags:
    weak = r.weak(caller.settings.recall.weak_relevance)
    return Flags(
        weak=weak,
        stale=r.stale,
        holds_from=(
            from_epoch(r.row.valid_from) if r.upcoming and r.row.valid_from is not None else None
        ),
        superseded_by=r.superseded_by,
        newer_version=r.newer_version,
        faded=r.faded,
    )


async def settle(caller: Caller, ranking: Ranking, k: int) -> dict[str, str]:
    """Read the first `k` rows of `ranking`, with each merged duplicate among them placed
    below its anchor (recall and explain rank alike). Returns those duplicates: a
    duplicate merged into a memory not forgotten lives on through it, so a recall that
    returns it leaves it faded (DESIGN.md §5.8)."""
    await ranking.fill(caller.store, k)
    faded = [r.id for r in ranking.rows[:k] if r.faded]
    anchors = await merged_anchors(caller, faded) if faded else {}
    if anchors:
        ranking.rows = below_anchors(ranking.rows, anchors)
        await ranking.fill(caller.store, k)
    return anchors


def below_anchors(rows: list[Ranked], anchors: dict[str, str]) -> list[Ranked]:
    """`rows` with each merged duplicate that ranks above its anchor moved to just below it
    (a duplicate whose anchor is not ranked stays where it is)."""
    out = list(rows)
    for dup, anchor in anchors.items():
        ids = [r.id for r in out]
        if dup in ids and anchor in ids and ids.index(dup) < ids.index(anchor):
            moved = out.pop(ids.index(dup))
            out.insert(ids.index(anchor), moved)
    return out


async def recall(caller: Caller, request: RecallRequest) -> RecallResult:
    """Rank memories for a query and log why each returned one ranked where it did.

    A faded memory returned without the weak flag was used: it is live again (`revived`).
    `include_archived` also returns faded memories that are only weakly related (shown,
    not used); a memory its user forgot is never returned.

    Raises:
        InvalidInput: empty query, k outside 1–50, unknown type or scope.
    """
    k, hops, scope = request.k, request.hops, request.scope
    query, kinds = recall_args(request.query, k, request.types, hops)
    scope_obj = caller.scope(scope)
    ranking = await ranking_for(
        caller, query, scope_obj, kinds, hops, request.include_archived, shown=k
    )
    anchors = await settle(caller, ranking, k)
    top = ranking.rows[:k]
    channel = Channel.searched if hops == 0 else Channel.recalled
    stored_refs = {r.id: r.full.references() for r in top}
    # Each hit's flags and score parts once: the log and the reply show the same.
    marks = [flags(caller, r) for r in top]
    parts = [r.components for r in top]
    # DESIGN.md §16.9: only what the reader could have used counts as use: a hit not weak
    # that the query answers on its own terms (not one incidental word that made it the
    # best keyword hit: `relevance`). A faded one so used is revived; the others are shown.
    words = content_words(query)
    # A faded memory a newer one replaces (superseded, or an older version of one) is shown,
    # flagged, not used: the reader was told what replaces it, and reviving it put the value
    # reflection set aside live again beside its successor. Still faded, it answers the
    # next query that asks for it all the same. DESIGN.md §5.8.
    usable = [
        not f.weak
        and not (r.faded and (r.superseded_by or r.newer_version) is not None)
        and on_its_own_terms(r, words, caller.settings.recall, current_only=False)
        for r, f in zip(top, marks, strict=True)
    ]
    used = [r for r, u in zip(top, usable, strict=True) if r.faded and u and r.id not in anchors]
    # Another role's faded memory, read through a grant, stays faded: a read grant never
    # changes that owner's memories (DESIGN.md §3.2).
    revived = [r.id for r in used if caller.uses_count(r.full.owner)]
    left_faded = len(used) - len(revived)
    if top and caller.store.writable:
        # A hit the reader could not have used is logged as `shown`: no base-level, no
        # strength, no rehearsal.
        accesses = [
            (
                r.id,
                caller.access(
                    channel if u else Channel.shown,
                    query=query[:200],
                    score=round(r.score, 4),
                    rank=position,
                    components=c,
                ),
            )
            for position, (r, u, c) in enumerate(zip(top, usable, parts, strict=True), 1)
        ]
        await log_after_reply(caller, accesses)
    stayed_faded = 0
    if revived and caller.store.writable:
        # At once, not with the log after the reply: the next recall sees them live. A
        # revival that conflicted on every attempt (other servers rewriting those rows)
        # leaves them faded and says so: what the reader asked for is answered either way.
        try:
            await revive(caller, revived)
        except StoreConflict:
            stayed_faded, revived = len(revived), []
    hits = [
        _hit(caller, position, r, f, c)
        for position, (r, f, c) in enumerate(zip(top, marks, parts, strict=True), 1)
    ]
    # A correction of a live memory is never pruned (DESIGN.md §7.2): no prune date either.
    kept = await correcting_live(caller, [h.id for h in hits if h.prune_eta], scope_obj)
    for hit in hits:
        if hit.id in kept:
            hit.prune_eta = None
    await _attach_references(caller, hits, stored_refs, scope_obj)
    caller.note_activity()
    due = (await reminders.fire(caller, [(query, ranking.query_vector)]))[0]
    nothing = all(h.flags.weak for h in hits)
    note = ""
    if not hits:
        note = "Nothing stored matches this query."
    elif nothing:
        note = "Nothing relevant: every result is only weakly related to the query."
    if revived and caller.store.writable:
        note = (note + " " if note else "") + (
            f"{len(revived)} result(s) had faded (archived by reflection, flagged faded); "
            "this recall used them, so they are live again."
        )
    if stayed_faded:
        note = (note + " " if note else "") + (
            f"{stayed_faded} result(s) are faded memories this recall used, but other writes to "
            "them kept them from being made live again now; they stay faded until a later use."
        )
    if left_faded and caller.store.writable:
        note = (note + " " if note else "") + (
            f"{left_faded} result(s) are faded memories of another role: they stay faded, since "
            "only that role's own use brings them back."
        )
    use_dense = caller.settings.recall.use_dense
    if ranking.dense_ready is False and use_dense:
        note = (note + " " if note else "") + "Embeddings are warming: keyword matches only."
    if not caller.store.writable:
        note = (note + " " if note else "") + (
            f"The store ({caller.store.label}) is read-only: this recall was not logged and no "
            "reminders fired."
        )
    if due.more:
        note = (note + " " if note else "") + (
            f"{due.more} more reminder(s) are due; they come with later replies, or call intent "
            "with action=check to see them."
        )
    narrowed = caller.narrowed(scope, scope_obj)
    if narrowed:
        note = (note + " " if note else "") + narrowed
    return RecallResult(
        query=query,
        scope=scope or "mine",
        roles_searched=scope_obj.describe(),
        hits=hits,
        embeddings="ready" if ranking.dense_ready or not use_dense else "warming",
        nothing_relevant=nothing,
        note=note,
        reminders=due.reminders,
        reminders_more=due.more,
    )


def _hit(caller: Caller, position: int, r: Ranked, marks: Flags, parts: Components) -> RecallHit:
    row = r.full
    valid_from = None if row.valid_from is None else from_epoch(row.valid_from)
    used = from_epoch(row.last_accessed_at)
    last = fading_since(used, valid_from)
    policy = caller.settings.forgetting
    return RecallHit(
        rank=position,
        id=r.id,
        id8=r.id[:8],
        type=row.type,
        owner=row.owner,
        title=row.title,
        content=row.content,
        score=round(r.score, 4),
        components=parts,
        flags=marks,
        status=row.status,
        importance=row.importance,
        created_at=from_epoch(row.created_at),
        valid_from=valid_from,
        valid_to=None if row.valid_to is None else from_epoch(row.valid_to),
        retention=round(retention(last, row.strength, utc_now(), policy.tau_hours), 4),
        # A memory pruning never takes has no prune date (DESIGN.md §7.3).
        prune_eta=None
        if protection(row.type, row.importance, row.prune_status, policy)
        else prune_eta(used, row.strength, policy, utc_now(), valid_from),
        path=r.path,
    )


#: Times a log of accesses is tried when the database aborts it for a concurrent
#: transaction: it is written after the reply, so no caller is there to retry it.
LOG_ATTEMPTS = 3


async def revive(caller: Caller, ids: Sequence[str]) -> None:
    """Make the faded memories among `ids`, which a recall just used, live again (one
    transaction; a memory forgotten or revived meanwhile is left as it is)."""

    async def attempt() -> None:
        for memory in (await rows_to_revive(caller, list(dict.fromkeys(ids)))).values():
            await revive_by_use(caller, memory)

    await in_transaction(caller, attempt)
    caller.index.mark_dirty()


async def log_after_reply(caller: Caller, accesses: list[tuple[str, AccessRecord]]) -> None:
    """Log `accesses` (memory id, record) after the reply, with every other read's log
    queued before that log starts, in one transaction (`Engine.after_reply_batched`)."""
    await caller.engine.after_reply_batched("accesses", (caller, accesses), log_batch)


async def log_batch(batch: list[tuple[Caller, list[tuple[str, AccessRecord]]]]) -> None:
    """Apply and store the accesses of several reads, each as its caller (owner and role)
    records them, in the order given, in one transaction, on fresh rows. The records are
    made before (`Caller.access` reads the session from the task's context; SQLite applies
    them on its connection's thread).

    Only what an access changes is read and written (`Store.log_uses`, one hop on SQLite):
    this runs behind the replies, beside the next call's query embedding; reads back to
    back share one transaction (its commit, and each memory's row read and written once).
    On PostgreSQL the log cannot deadlock (it never waits for a row while holding another,
    `PostgresStore.log_uses`); a conflict it still meets wrote nothing, and it is run again
    on rows read afresh.
    """
    if not batch:
        return
    first = batch[0][0]

    def apply(fetched: dict[str, AccessState]) -> list[tuple[str, AccessRecord]]:
        logged = []
        for caller, accesses in batch:
            for memory_id, access in accesses:
                memory = fetched.get(memory_id)
                if memory is not None:
                    caller.apply(memory, access)
                    logged.append((memory_id, access))
        return logged

    ids = list(dict.fromkeys(i for _, accesses in batch for i, _ in accesses))
    for attempt in range(1, LOG_ATTEMPTS + 1):
        try:
            written = await first.store.log_uses(ids, apply)
        except StoreConflict:
            if attempt == LOG_ATTEMPTS:
                raise
            await asyncio.sleep(0.05 * attempt)
            continue
        # Committed: ranking scores these uses from now on (`storage.facts`).
        first.index.note_uses({i: uses_of(state) for i, state in written.items()})
        return


async def _attach_references(
    caller: Caller, hits: list[RecallHit], by_id: dict[str, list[Reference]], scope: Scope
) -> None:
    """Fill each hit's references, and log `deref` on every memory a reference reached."""
    derefs: list[tuple[str, str]] = []
    for hit in hits:
        stored = by_id.get(hit.id) or []
        if not stored:
            continue
        own = owner_role(hit.owner) == caller.role
        hit.references, live = await resolve_all(caller, stored, scope, own=own)
        derefs += [(hit.id, target) for target in live]
    if not derefs or not caller.store.writable:
        return
    accesses = [
        (target, caller.access(Channel.deref, query=f"memory:{target[:8]} from {source[:8]}"))
        for source, target in derefs
    ]
    await log_after_reply(caller, accesses)
