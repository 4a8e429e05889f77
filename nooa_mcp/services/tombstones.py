"""Archiving and tombstones: forgotten statements are not silently re-made.

Archiving records a tombstone (the content hash and embedding of what was archived, why and
when). A later write is checked against the archived memories of the writer's role with the
same content hash or at cosine ≥ 0.95 (from 0.80 for the same words: punctuation alone moves
the cosine), of one memory with it (`domain.repeats`: type, time, place; DESIGN.md §4.4):

- the same statement (`facts.same_statement`) of a faded memory revives it with what the
  write adds; of a forgotten one it is blocked unless the author passes `revive=true`, which
  restores the original (reviving by id restores a given memory the same way);
- anything else close to a forgotten memory with the same values is blocked too, and
  `revive=true` stores the write as a new memory (the forgotten one stays forgotten);
- anything else is a new memory: a changed value, and any other text near a faded memory
  ("the rate limit is high" after "… low" faded: matching on closeness answered `revived`,
  kept "low" and never stored "high").

Who archived a memory matters to recall (`domain.archive`): `archive` is a user's forget, which
recall never shows again; `fade` is maintenance's (prune, merge, reconcile), which recall still
reaches, and `revive_by_use` is what a recall that returned a faded memory does to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import numpy as np

from ..domain.archive import (
    forgotten_with_reason,
    merged_anchor,
    merged_reason,
    reason_fades,
    standing_fade,
)
from ..domain.facts import differs_in, same_statement
from ..domain.imports import UNEXPLAINED, Stone
from ..domain.reflection import MERGE_SIMILARITY
from ..domain.repeats import absorb, one_memory
from ..domain.replies import AuthorResult, TombstoneInfo
from ..domain.schema import Channel, EdgeType, Memory, now as utc_now
from ..domain.scope import owner_role
from ..errors import StoreConflict
from ..storage.base import Tombstone
from .caller import Caller

__all__ = [
    "TOMBSTONE_SIMILARITY",
    "Match",
    "archive",
    "archive_as_exported",
    "blocked_or_revived",
    "fade",
    "forget_as_exported",
    "merged_anchors",
    "merged_twins",
    "restore",
    "revive_by_use",
    "rows_to_revive",
    "tombstone_match",
]

TOMBSTONE_SIMILARITY = 0.95
#: The same statement in the same words is its memory said again from the cosine merge asks
#: for (`reflection.MERGE_SIMILARITY`): a final period alone put a forgotten memory's words at
#: 0.93, under TOMBSTONE_SIMILARITY, and writing them again silently undid the forget.
SAID_AGAIN_FROM = MERGE_SIMILARITY
#: Archived rows a write's tombstone check reads first (then four times as many, and so on,
#: while every row read was at the threshold and none was the memory it says again).
TOMBSTONE_FIRST = 5


async def archive(caller: Caller, memory: Memory, reason: str) -> None:
    """A user's forget, inside an open transaction: archived, out of recall for good (a faded
    memory becomes forgotten too), with a tombstone.

    The duplicates reflection merged into it say the same thing in the same words: they are
    forgotten with it, or recall would still bring the forgotten statement back through them.
    """
    await _archive(caller, memory, reason, faded=False)
    for twin in await _twins(caller, memory, merged_reason(memory.id)):
        if twin.archived and twin.faded:
            await _archive(caller, twin, forgotten_with_reason(memory.id), faded=False)


async def merged_twins(caller: Caller, memory: Memory) -> list[Memory]:
    """The duplicates reflection merged into `memory` that are faded behind it still."""
    twins = await _twins(caller, memory, merged_reason(memory.id))
    return [twin for twin in twins if twin.archived and twin.faded]


async def _twins(caller: Caller, memory: Memory, reason: str) -> list[Memory]:
    """The duplicates reflection merged into `memory` whose standing tombstone says `reason`."""
    edges = await caller.store.edges_touching([memory.id])
    merged = [e.dst for e in edges if e.src == memory.id and e.type == EdgeType.refines.value]
    if not merged:
        return []
    stones = await caller.store.tombstones_of(merged)
    twins = [i for i, t in stones.items() if t.reason == reason]
    return list((await caller.store.fetch_many(twins)).values())


async def archive_as_exported(
    caller: Caller, memory: Memory, stones: Sequence[Stone], faded: bool | None = None
) -> None:
    """Inside the transaction that creates an imported memory: archive it again with the
    tombstones its line carried (lifted ones stay lifted). Faded as the line's `faded` says;
    a line that does not say (an export of an earlier version) is faded only when every
    standing tombstone's reason is maintenance's (`domain.archive.standing_fade`): a user's
    reason that reads like one ("pruned: …") is a forget all the same. In the same
    transaction, so no reader ever sees a memory its user forgot live, and an import stopped
    halfway leaves none behind."""
    when = stones[-1].ts if stones else utc_now()
    for stone in stones:
        await caller.store.add_tombstone(memory.id, stone.reason, stone.ts)
        if stone.lifted_at is not None:
            await caller.store.lift_tombstones(memory.id, stone.lifted_at)
    standing = [s.reason for s in stones if s.lifted_at is None]
    memory.archived = True
    memory.faded = standing_fade(standing) if faded is None else faded
    await caller.store.set_archived(memory.id, True, when, faded=memory.faded)


#: How close two tombstone times are to be one (a store keeps a time as epoch seconds).
_SAME_TIME = timedelta(milliseconds=1)


async def forget_as_exported(
    caller: Caller,
    memory: Memory,
    stones: Sequence[Stone],
    kept: frozenset[str] = frozenset(),
    faded: bool | None = None,
) -> TombstoneInfo | None:
    """Inside the transaction of an import that meets `memory` stored already (the same id
    and text): the forget its line carries, applied to it here too, with the line's tombstones
    that stand for a user's forget. A forget older than this memory's last revival here is
    not applied (this store's user brought it back since), nor is a fade (maintenance's, not
    its user's: this store decides that itself), nor anything on a memory forgotten here
    already. A forget the line gives no time for, and one this store applied already (the
    same reason and time: a time ahead of this clock stays after any revive here), is not
    applied once the memory was revived here: importing the same file again after a revive
    forgot it again each time. A line with no tombstone standing is a forget of no known
    time, as it reads when it creates the memory. Whether the line is a fade or a forget is
    its `faded` (a user may give any reason, "pruned: …" too); a line that does not say (an
    export of an earlier version) is read by its reasons. The tombstone applied, or None."""
    if faded:
        return None
    standing = [s for s in stones if s.lifted_at is None]
    forgets = standing if faded is False else [s for s in standing if not reason_fades(s.reason)]
    if not standing:
        # None standing reads as forgotten (`domain.archive`), as the line creates it: a
        # forget of no known time.
        forgets = [Stone(UNEXPLAINED, utc_now(), dated=False)]
    if not forgets or (memory.archived and not memory.faded):
        return None
    here = (await caller.store.all_tombstones([memory.id])).get(memory.id, [])
    revived = [t for t in here if t.lifted_at is not None]
    if revived:
        last = max(t.lifted_at for t in revived if t.lifted_at is not None)
        forgets = [
            s
            for s in forgets
            if s.dated
            and s.ts > last
            # to the millisecond: a store keeps a time as epoch seconds (a float)
            and not any(t.reason == s.reason and abs(t.ts - s.ts) < _SAME_TIME for t in revived)
        ]
    if not forgets:
        return None
    for stone in forgets:
        await caller.store.add_tombstone(memory.id, stone.reason, stone.ts)
    memory.archived, memory.faded = True, False
    await caller.store.set_archived(memory.id, True, forgets[-1].ts, faded=False)
    # Its merged duplicates say its words: forgotten with it, as a forget here does, but for
    # one the file holds live (`kept`): its user forgot this copy and kept that one.
    for twin in await _twins(caller, memory, merged_reason(memory.id)):
        if twin.archived and twin.faded and twin.id not in kept:
            await _archive(caller, twin, forgotten_with_reason(memory.id), faded=False)
    return TombstoneInfo(
        memory_id=memory.id, reason=forgets[-1].reason, archived_at=forgets[-1].ts, similarity=1.0
    )


async def fade(caller: Caller, memory: Memory, reason: str) -> None:
    """Maintenance's archive, inside an open transaction: out of the live tier, with a
    tombstone, but still within recall's reach (see `domain.archive`)."""
    await _archive(caller, memory, reason, faded=True)


async def _archive(caller: Caller, memory: Memory, reason: str, *, faded: bool) -> None:
    memory.archived, memory.faded = True, faded
    when = utc_now()
    await caller.store.set_archived(memory.id, True, when, faded=faded)
    await caller.store.add_tombstone(memory.id, reason, when)


@dataclass(frozen=True)
class Match:
    """A standing tombstone a write meets: of the same statement (`same`), or, for a
    forgotten memory only, of a text close to it with the same values."""

    stone: Tombstone
    similarity: float
    same: bool
    #: The archived memory the tombstone stands for, as read in this transaction.
    memory: Memory


async def tombstone_match(
    caller: Caller, memory: Memory, vector: np.ndarray | None
) -> Match | None:
    """A standing tombstone of the caller's role for an archived memory that writing `memory`
    would write again: the same content (hash), or at cosine ≥ 0.95, and in either case one
    memory with it said again (`_said_again`)."""
    # Candidates are read without a lock, and only the one a match names is read again
    # locked (`_locked`): each writer locking its candidates in its own order (its exact
    # text's row first, then the nearest, batch after batch) deadlocked writers of near
    # duplicates that reflection had merged (PostgreSQL).
    stone = await caller.store.tombstone_by_hash(memory.content_hash, caller.role)
    if stone is not None:
        archived = (await caller.store.fetch_many([stone.memory_id], lock=False)).get(
            stone.memory_id
        )
        same = None if archived is None else _said_again(archived, memory)
        if archived is not None and same is not None:
            locked = await _locked(caller, archived)
            same = _said_again(locked, memory)
            if same is not None:
                return Match(stone, 1.0, same, locked)
    n = caller.index.size
    # Most writes meet no archived row at all: skip the matrix product then.
    if vector is None or n == 0 or not caller.index.archived[:n].any():
        return None
    mask = caller.index.mask(caller.actor.own, include_archived=True)
    mask &= caller.index.archived[:n]
    # Every archived row at the threshold, nearest first, a few at a time: the 5 nearest
    # alone let forgotten rows of other places or times, word for word the write, hide the
    # one it says again (and the memory its user forgot was written again).
    wanted, checked = TOMBSTONE_FIRST, set[str]()
    while True:
        hits = caller.index.search(vector, mask, wanted, floor=SAID_AGAIN_FROM)
        fresh = [(i, similarity) for i, similarity in hits if i not in checked]
        checked |= {i for i, _ in fresh}
        stones = await caller.store.tombstones_of([i for i, _ in fresh]) if fresh else {}
        archived_rows = await caller.store.fetch_many(
            [i for i, _ in fresh if i in stones], lock=False
        )
        for memory_id, similarity in fresh:
            stone = stones.get(memory_id)
            if stone is None or stone.role != caller.role or memory_id not in archived_rows:
                continue
            same = _said_again(archived_rows[memory_id], memory)
            # Under TOMBSTONE_SIMILARITY only the same words say it again: a rewording
            # that far apart is another statement.
            if same is True or (same is False and similarity >= TOMBSTONE_SIMILARITY):
                return Match(
                    stone, similarity, same, await _locked(caller, archived_rows[memory_id])
                )
        if len(hits) < wanted:
            return None
        wanted *= 4


async def _locked(caller: Caller, seen: Memory) -> Memory:
    """`seen` (read without a lock) read again locked, as the write will change it.

    Raises:
        StoreConflict: it changed meanwhile (revived, edited, forgotten by another writer):
            what this write found before is stale too (the live memories with its text were
            looked up while this one was archived), so the whole write runs again
            (`transactions.in_transaction`) and finds the memory as it is now. Looking past
            it instead stored a second live copy beside the one just revived.
    """
    row = await caller.store.fetch(seen.id)
    if row is None or (row.archived, row.faded, row.content_hash) != (
        seen.archived,
        seen.faded,
        seen.content_hash,
    ):
        raise StoreConflict(
            caller.store.label,
            f"memory {seen.id[:8]}, which this write says again, changed while it was written; "
            "nothing of this call was written.",
            "Retry the call.",
        )
    return row


def _said_again(archived: Memory, memory: Memory) -> bool | None:
    """True when writing `memory` is writing the archived memory again (one memory, the same
    statement: `domain.repeats`, `facts.same_statement`); False when it is close to a
    forgotten one with the same values (a rewording, or a changed word no value shows);
    None otherwise.

    What each means is `blocked_or_revived`'s: only the same statement revives a faded
    memory (a revive without asking must not drop the write: "the rate limit is high"
    answered `revived` and the store kept "… low"); a forgotten one blocks both, which the
    author sees, and `revive=true` then keeps the write."""
    if not one_memory(archived, memory):
        return None
    if same_statement(archived.content, memory.content):
        return True
    return None if differs_in(archived.content, memory.content) else False


async def blocked_or_revived(
    caller: Caller,
    match: Match,
    revive: bool,
    written: Memory,
    edges: Sequence[tuple[str, EdgeType, float]] = (),
    note: str = "revive",
) -> AuthorResult | None:
    """Inside the author transaction: refuse a forgotten memory, or restore it on revive
    with what the write `written` adds (`domain.repeats.absorb`) and its links. None: the
    write goes ahead as a new memory (`revive=true` on a rewording: the author's words are
    stored, the forgotten memory stays forgotten).

    A faded memory (archived by maintenance, not by its user) is never refused: the same
    statement written again is using it, and it is restored as on revive; anything else near
    it is a new memory.
    """
    stone = match.stone
    info = TombstoneInfo(
        memory_id=stone.memory_id,
        reason=stone.reason,
        archived_at=stone.ts,
        similarity=round(match.similarity, 4),
    )
    memory = match.memory
    if not revive and not memory.faded:
        return AuthorResult(
            id=stone.memory_id,
            status="blocked-by-tombstone",
            similarity=info.similarity,
            tombstone=info,
        )
    if not match.same:
        return None
    absorb(memory, written)
    await restore(caller, memory, note)
    for target, relation, weight in edges:
        if target != memory.id:
            await caller.store.add_edge(memory.id, target, relation, weight)
    caller.index.mark_dirty()
    return AuthorResult(id=memory.id, status="revived", similarity=info.similarity, tombstone=info)


async def rows_to_revive(caller: Caller, ids: Sequence[str]) -> dict[str, Memory]:
    """Inside an open transaction: the rows of `ids`, locked, each archived one's words held
    first (`Store.hold_texts`), as a write of the same words holds them.

    A write looks its words up among the live memories, then among the tombstones. A revival
    committing between the two looks left it neither (archived, then lifted): it stored a
    second live copy beside the memory just revived. Held, the write waits for the revival
    and finds the memory live. The words are taken from a row read without a lock, before the
    row's lock (the order a write takes them in); a row that changed meanwhile runs the
    transaction again (`transactions.in_transaction`)."""
    seen = await caller.store.fetch_many(ids, lock=False)
    held = {_text_of(m) for m in seen.values() if m.archived}
    await caller.store.hold_texts(list(held))
    rows = await caller.store.fetch_many(ids)
    for memory in rows.values():
        if memory.archived and _text_of(memory) not in held:
            raise StoreConflict(
                caller.store.label,
                f"memory {memory.id[:8]} changed while it was revived; nothing was written.",
                "Retry the call.",
            )
    return rows


def _text_of(memory: Memory) -> tuple[str, str, str]:
    return memory.content_hash, owner_role(memory.owner), memory.type.value


async def restore(caller: Caller, memory: Memory, note: str = "revive") -> None:
    """Inside an open transaction: un-archive the memory and lift its tombstones.

    Reviving is the author writing the value again: a reinforcing access (noted `note`: an
    import line's revive says which line, `imports.fold_note`), history kept. The
    duplicates forgotten with it (`archive`) are merged into it again, faded, as they were
    before the forget: otherwise their words stayed blocked for good.
    """
    await _unarchive(caller, memory)
    for twin in await _twins(caller, memory, forgotten_with_reason(memory.id)):
        if twin.archived and not twin.faded:
            await fade(caller, twin, merged_reason(memory.id))
    access = caller.access(Channel.reinforced, query=note)
    caller.apply(memory, access)
    await caller.store.save(memory)
    await caller.store.append_accesses([(memory.id, access)])


async def merged_anchors(caller: Caller, ids: Sequence[str]) -> dict[str, str]:
    """The faded memories among `ids` that reflection merged into a memory its user has not
    forgotten (live or faded itself), each with that anchor's id.

    Such a duplicate lives on through its anchor: revived by a recall, it would be a second
    live copy of what the anchor said at the merge, and newer than the anchor, so it would
    outrank the anchor's later edits (a correction from PG-16 to PG-17 undone by the PG-16
    duplicate coming back) — also once time has faded both."""
    stones = await caller.store.tombstones_of(list(ids))
    merged = {i: t.reason for i, t in stones.items() if merged_anchor(t.reason) is not None}
    if not merged:
        return {}
    anchors = {
        e.dst: e.src
        for e in await caller.store.edges_touching(list(merged))
        if e.dst in merged
        and e.type == EdgeType.refines.value
        and merged_reason(e.src) == merged[e.dst]
    }
    rows = await caller.store.fetch_many(list(set(anchors.values())))
    return {
        dup: anchor
        for dup, anchor in anchors.items()
        if anchor in rows and (not rows[anchor].archived or rows[anchor].faded)
    }


async def revive_by_use(caller: Caller, memory: Memory) -> None:
    """Inside an open transaction: a faded memory that a recall returned, and so used, is live
    again: un-archived, its tombstones lifted. The recall's own access is the use (logged by
    the caller); nothing else is added. A memory its user forgot is never revived here."""
    if memory.archived and memory.faded:
        await _unarchive(caller, memory)


async def _unarchive(caller: Caller, memory: Memory) -> None:
    now = utc_now()
    memory.archived, memory.faded = False, False
    await caller.store.set_archived(memory.id, False, now)
    await caller.store.lift_tombstones(memory.id, now)
