"""Authoring: writes keep what they are told (DESIGN.md §4).

- An exact repeat (same type and role, same content after NFKC, case folding and whitespace
  collapsing) is idempotent: its id comes back with status `exists`, and it logs `reinforced`,
  so a retried call never duplicates. An export line being imported is the exception: it is
  that memory, and only its own id stored already is a repeat.
- Anything else is stored as its own memory. A near-duplicate (same type and role, cosine ≥
  `dedup_similarity`) is stored too, linked `related` to the closest existing memory, and the
  reply names it in `similar_to` with the values they differ in (number, date, identifier,
  name, negation). Merging what truly repeats is reflection's job, which never folds two
  different values into one.
- A value that was forgotten is not silently re-made (tombstones, DESIGN.md §4.4).
- Everything is validated before anything is written: one bad item writes nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np

from ..domain.accesses import apply_access, created_record, restore_history
from ..domain.facts import differs_in, same_as_written
from ..domain.imports import Carried, fold_note
from ..domain.inputs import build_memory, refuse_silent_cue
from ..domain.repeats import absorb, one_memory, repeat_key
from ..domain.replies import AuthorResult, SimilarTo, TombstoneInfo
from ..domain.requests import AuthorRequest
from ..domain.schema import (
    EDGE_WEIGHT,
    AccessRecord,
    Channel,
    EdgeType,
    Memory,
    Reference,
    normalise_id,
    now as utc_now,
    parse_link,
)
from ..engine import text_of
from ..errors import InvalidInput, NotFound
from ..storage.base import VectorRow
from ..storage.rows import facts_of
from . import provenance, reminders
from .caller import Caller
from .references import capture_all
from .tombstones import (
    archive_as_exported,
    blocked_or_revived,
    forget_as_exported,
    merged_anchors,
    tombstone_match,
)
from .transactions import in_transaction

__all__ = ["author_many", "import_edges", "parse_links"]

Near = tuple[str | None, float, int]


async def _capture(
    caller: Caller, records: Sequence[Memory], extra: Sequence[Carried | None]
) -> None:
    """Capture the records' references, except those an export line carries with their
    previews (`Carried.snapshots`): those are restored as they were captured, never captured
    again (what they name may be a later line of the file, archived, or under no root here)."""
    kept: list[dict[str, Reference]] = []
    order: list[list[str]] = []
    for record, found in zip(records, extra, strict=True):
        snapshots = {ref.uri: ref for ref in found.snapshots} if found is not None else {}
        kept.append(snapshots)
        order.append([r.uri for r in record.references])
        record.references = [r for r in record.references if r.uri not in snapshots]
    # A reference that cannot be captured (a `memory:` id not found or read-only, a file
    # outside the root) says which item: an import names its line.
    await capture_all(caller, records)
    for record, snapshots, uris in zip(records, kept, order, strict=True):
        if snapshots:
            captured = {r.uri: r for r in record.references}
            record.references = [snapshots.get(uri) or captured[uri] for uri in uris]


async def parse_links(
    caller: Caller, links: Sequence[Any] | None
) -> list[tuple[str, EdgeType, float]]:
    """Validate links and resolve their targets among memories the caller can see. A target
    reflection merged into another memory (not forgotten) is that memory: it speaks for the
    duplicate, so a correction linked to the duplicate corrects what recall shows.

    Raises:
        InvalidInput: not a list, a malformed link, an unknown relation or a bad weight.
        NotFound: a target is not visible to the caller.
        OwnerForbidden: a target of a role a server-side grant lets the caller read.
    """
    out = []
    if links is not None and not isinstance(links, list | tuple):
        raise InvalidInput("links", f"{links!r} is not a list.", "Pass a list of links.")
    for raw in links or []:
        link = parse_link(raw)
        # A granted role's memory (recall shows it) is refused as such, not "no memory".
        target = await caller.resolve_writable(link.target, "links.target", "link to")
        weight = EDGE_WEIGHT.parse(link.weight, "links.weight") if link.weight is not None else 1.0
        out.append((target, link.relation, weight))
    return await to_anchors(caller, out)


async def to_anchors(
    caller: Caller, edges: list[tuple[str, EdgeType, float]]
) -> list[tuple[str, EdgeType, float]]:
    """Each link's target, or the memory reflection merged it into (see `parse_links`). Asked
    again inside the write's transaction: a merge that committed after the links were parsed
    (and while the text was embedded) has moved the duplicate's place to its anchor, and a
    link to the duplicate would correct a memory recall no longer shows."""
    if not edges:
        return edges
    targets = [target for target, _, _ in edges]
    if caller.store.in_transaction:
        # Held until this write commits (PostgreSQL: FOR UPDATE; a merge locks the duplicate
        # the same way first): a merge either committed before this read, which then sees
        # it, or waits and copies the link this write adds. Read committed alone let a merge
        # commit between this read and the write's commit (re-tester: 3 runs of 7).
        await caller.store.fetch_many(targets)
    anchors = await merged_anchors(caller, targets)
    return [(anchors.get(target, target), kind, weight) for target, kind, weight in edges]


async def _links_to_anchors(
    caller: Caller, links: list[list[tuple[str, EdgeType, float]]]
) -> list[list[tuple[str, EdgeType, float]]]:
    """`to_anchors` for each write of a batch, in one read."""
    flat = await to_anchors(caller, [edge for edges in links for edge in edges])
    out, at = [], 0
    for edges in links:
        out.append(flat[at : at + len(edges)])
        at += len(edges)
    return out


async def author_many(
    caller: Caller,
    requests: Sequence[AuthorRequest],
    *,
    remind: bool = True,
    carried: Sequence[Carried | None] | None = None,
    then: Callable[[list[AuthorResult]], Awaitable[None]] | None = None,
) -> list[AuthorResult]:
    """Remember several memories in one transaction (see the module docstring for the rules).

    With `remind=False` (an import) no intent fires: a restore is nobody's turn, and an
    intent fired there would be spent without anyone seeing it; due ones fire on the next
    call that shows them. `carried` (an import) gives each memory it creates what its export
    line carried beyond the request: its use history, authored importance, firing state.
    `then(results)` runs in the same transaction after the writes (an import attaches the
    batch's edges there), again with each attempt run again.

    Raises:
        InvalidInput: a field is malformed (the message names it and the fix).
        NotFound: a link target does not exist.
    """
    records = [build_memory(request, caller.owner) for request in requests]
    if carried is None:  # a new write; an import restores what an earlier release accepted
        for record in records:
            refuse_silent_cue(record.trigger.cue if record.trigger else None)
    revive = [request.revive for request in requests]
    # Only an id the caller gave (an import) can be there already; a new one never is.
    given = [request.id is not None for request in requests]
    links = [await parse_links(caller, request.links) for request in requests]
    extra = list(carried) if carried is not None else [None] * len(records)
    await _capture(caller, records, extra)
    vectors = await caller.engine.embed([text_of(r.title, r.content) for r in records])
    # Near-duplicates among the rows cached now, for the whole batch in one product, before
    # the transaction and off the event loop (a product per item made a write's cost grow
    # with the store). Rows cached after it (this batch's, other writers') are checked
    # per item in the transaction.
    roles = caller.actor.own.visible_roles
    # Rows an attempt noted in the index for the batch's later items: rolled back (an error,
    # a conflict run again, or the caller cancelled), they were never stored.
    noted: list[str] = []

    def withdraw_noted() -> None:
        if noted:
            caller.index.withdraw(noted)
            noted.clear()

    async def attempt() -> list[AuthorResult]:
        withdraw_noted()  # an earlier attempt's, aborted for a concurrent transaction
        done: list[AuthorResult] = []
        await caller.engine.sync_vectors(roles)
        anchored = await _links_to_anchors(caller, links)
        if len(records) > 1:
            # Each item's lookup holds its words until the commit (`find_by_hash`): two
            # batches holding the same words in other orders deadlocked, and under load a
            # batch failed after every attempt. Held in one order first, they take turns.
            await caller.store.hold_texts(
                [(r.content_hash, caller.role, r.type.value) for r in records]
            )
        batch: dict[tuple[object, ...], str] = {}
        # Each attempt writes the records as they were built: one aborted may have logged
        # a first use or restored a history on them.
        for at, (record, vector, edges, again, near, named, more) in enumerate(
            zip(
                [r.model_copy(deep=True) for r in records],
                vectors,
                anchored,
                revive,
                prior,
                given,
                extra,
                strict=True,
            )
        ):
            try:
                result = await _author_one(
                    caller, record, vector, edges, batch, again, near, named, more
                )
            except InvalidInput as exc:
                # A repeat past a memory's bounds (`repeats.absorb_labels`): which item.
                exc.item = at if exc.item is None else exc.item
                raise
            done.append(result)
            if done[-1].status == "created":
                noted.append(record.id)
        if then is not None:
            await then(done)
        return done

    # The role's rows are loaded before the near-duplicate search, and row numbers found
    # before the transaction stay valid inside it (no role is let go while this holds).
    async with caller.engine.vectors(roles):
        prior = await _nearest_existing(caller, records, vectors)
        try:
            results = await in_transaction(caller, attempt)
        except BaseException:
            withdraw_noted()
            raise
    if any(
        r.status != "created" or m.type.value == "intent"
        for r, m in zip(results, records, strict=True)
    ):
        # A repeat rewrote an existing row, or an intent was written: what is derived from
        # rows (the intents) is read again. A new memory that is no intent was noted in the
        # index as it is now committed, and leaves the intents as they were.
        caller.index.mark_dirty()
    caller.note_activity(writes=sum(r.status != "exists" for r in results))
    # Authored content is a cue too (DESIGN.md §9.2), but an intent never cues itself.
    if not remind:
        return results
    texts = [(r.content, v) for r, v in zip(records, vectors, strict=True)]
    fired = await reminders.fire(caller, texts, exclude=[r.id for r in results])
    for result, due in zip(results, fired, strict=True):
        result.reminders, result.reminders_more = due.reminders, due.more
    return results


async def _carried_forget(
    caller: Caller, stored: Memory, carried: Carried | None
) -> TombstoneInfo | None:
    """The forget an import line carries, applied to `stored`, the memory it names here
    (`tombstones.forget_as_exported`); None for a line that carries none."""
    if carried is None or carried.archive is None:
        return None
    return await forget_as_exported(caller, stored, carried.archive, carried.kept, carried.faded)


async def _author_one(
    caller: Caller,
    record: Memory,
    vector: np.ndarray,
    edges: list[tuple[str, EdgeType, float]],
    batch: dict[tuple[object, ...], str],
    revive: bool = False,
    near: Near | None = None,
    named: bool = True,
    carried: Carried | None = None,
) -> AuthorResult:
    key = repeat_key(record)
    # An export line (its own id and the use history its store kept) is that memory: it is
    # never folded into another memory with the same text, which the exporting store kept
    # apart (one forgotten and another later edited to its words, a duplicate merged away by
    # reflection, two copies the user revived). Only that very id stored already is a repeat,
    # and it carries its own edges, so no `related` link its store never had is added.
    restored = named and carried is not None and carried.history is not None
    existing = None if restored else batch.get(key)
    repeated: Memory | None = None  # its row, when read here already
    if existing is None and not restored:
        same_text = await caller.store.find_by_hash(
            record.content_hash, caller.role, record.type.value
        )
        if same_text:
            # The same text is one memory only if it holds for the same time, happened at
            # the same time and names no other place (`domain.repeats`): the newest such
            # memory is repeated, else this is a new memory. Only a live one: a forget that
            # committed while this write waited for the row's lock (PostgreSQL) archived the
            # row found live, and its tombstone answers below (revived, or refused), as if the
            # forget had come first; a repeat answered `exists` and left it forgotten.
            rows = await caller.store.fetch_many(same_text)
            # A line whose own id holds its text is that memory, whichever is newest.
            order = sorted(same_text, key=lambda i: not (named and i == record.id))
            repeated = next(
                (
                    rows[i]
                    for i in order
                    if i in rows
                    and not rows[i].archived
                    and one_memory(rows[i], record)
                    and same_as_written(rows[i].content, record.content)
                ),
                None,
            )
            existing = None if repeated is None else repeated.id
    if existing is None and named:
        # Held until the transaction ends: a second import of this line waits, then finds it.
        stored = await caller.store.claim_id(record.id)
        if stored is not None:
            # A re-import of the caller's own memory is that memory again; an id that names
            # another owner's memory, or other content, is never taken as this one.
            again = (stored.type, stored.content_hash) == (
                record.type,
                record.content_hash,
            ) and same_as_written(stored.content, record.content)
            if not (again and caller.may_write(stored.owner)):
                raise InvalidInput(
                    "id",
                    f"{record.id} already names another memory.",
                    "Leave id out to store this as a new memory.",
                )
            # A line its user forgot since this copy was made carries the forget: applied
            # here too, unless this store's user revived the memory after it.
            forgot = await _carried_forget(caller, stored, carried)
            return AuthorResult(id=record.id, status="exists", similarity=1.0, tombstone=forgot)
    if named and not restored and existing != record.id:
        # An import line folded into a memory stored under another id (below) by an earlier
        # import of the file: that fold counted once. A second one (the file run again after
        # a kill, or by mistake) re-reinforced it, or revived it after a prune.
        before = await _folded_before(caller, record)
        if before is not None:
            return before
    if existing is not None:
        # The same memory imported again (its own id) is a restore, not the author saying it
        # again: it changes nothing, so importing one file twice leaves what the first did.
        if not (named and existing == record.id):
            await _repeat(caller, repeated or await caller.fetch(existing), record, edges, named)
            return AuthorResult(id=existing, status="exists", similarity=1.0)
        # Its own line without a use history (a file of an earlier release, or written by
        # hand) found it by its words: the forget it carries applies as above.
        forgot = None
        if carried is not None and carried.archive is not None:
            forgot = await _carried_forget(
                caller, repeated or await caller.fetch(existing), carried
            )
        return AuthorResult(id=existing, status="exists", similarity=1.0, tombstone=forgot)
    # An export line is that memory, archived or not, whatever was forgotten here before.
    match = None if restored else await tombstone_match(caller, record, vector)
    if match is not None and match.same and match.memory.faded:
        # A duplicate reflection merged into a live memory is said again: that memory speaks
        # for it and is the one used. Revived, the duplicate would be a second live copy that
        # no pass merges again, and, once the survivor is corrected, an outdated one.
        anchor = (await merged_anchors(caller, [match.memory.id])).get(match.memory.id)
        survivor = None if anchor is None else await caller.store.fetch(anchor)
        if survivor is not None and not survivor.archived:
            await _repeat(caller, survivor, record, edges, named)
            return AuthorResult(
                id=survivor.id, status="exists", similarity=round(match.similarity, 4)
            )
    if match is not None:
        answered = await blocked_or_revived(
            caller, match, revive, record, edges, fold_note(record.id) if named else "revive"
        )
        if answered is not None:
            return answered
    twin, similarity = (
        (None, 0.0) if restored else _near_duplicate(caller, record.type.value, vector, near)
    )
    # The index also holds rows noted by writes still open on other connections (PostgreSQL
    # runs a process's transactions side by side) or rolled back since: such a twin is not
    # there for this transaction, and this write goes ahead without the link.
    original = None if twin is None else await caller.store.fetch(twin)
    similar = None
    if original is not None and twin is not None:
        # The write's own link to the twin stands for the related edge (a correction first).
        given = sorted(
            (relation for target, relation, _ in edges if target == twin),
            key=lambda relation: relation not in (EdgeType.refines, EdgeType.contradicts),
        )
        similar = SimilarTo(
            id=twin,
            similarity=round(similarity, 4),
            differs_in=differs_in(original.content, record.content),
            relation=EdgeType(given[0]).value if given else EdgeType.related.value,
        )
        if not given:
            edges = [*edges, (twin, EdgeType.related, round(min(similarity, 1.0), 4))]
    stream = _first_accesses(caller, record, carried)
    seq = await caller.store.insert(record, vector)
    await caller.store.append_accesses([(record.id, access) for access in stream])
    for target, relation, weight in edges:
        await caller.store.add_edge(record.id, target, relation, weight)
    if carried is not None and carried.archive is not None:
        await archive_as_exported(caller, record, carried.archive, carried.faded)
    else:
        # Later items of the same batch must see this one, for dedup.
        batch[key] = record.id
    caller.index.note(
        VectorRow(
            seq,
            record.id,
            caller.role,
            caller.owner,
            record.type.value,
            record.archived,
            vector,
            faded=record.faded,
            facts=facts_of(record),
        )
    )
    return AuthorResult(id=record.id, status="created", similar_to=similar)


def _first_accesses(caller: Caller, record: Memory, carried: Carried | None) -> list[AccessRecord]:
    """A new memory's first accesses, oldest first: learned now (`created`), or, for an
    imported one, the use history and state its export line carried."""
    if carried is not None:
        if carried.authored_importance is not None:
            record.authored_importance = carried.authored_importance
        if record.trigger is not None and (carried.fired_at or carried.fired_count):
            record.trigger.fired_at = carried.fired_at
            record.trigger.fired_count = carried.fired_count
        if carried.history is not None:
            return restore_history(
                record,
                carried.history,
                now=utc_now(),
                exact_k=caller.settings.recall.exact_accesses,
                ring_size=caller.settings.ring_size,
            )
    apply_access(
        record,
        created_record(record, caller.owner, *provenance.access_refs()),
        ring_size=caller.settings.ring_size,
        exact_k=caller.settings.recall.exact_accesses,
    )
    return [record.access_log[0]]


def _dedup_mask(caller: Caller, type: str, start: int = 0, stop: int | None = None) -> np.ndarray:
    """Rows `start`…`stop` that a new memory of `type` may be a near-duplicate of."""
    stop = caller.index.size if stop is None else stop
    mask = caller.index.mask(caller.actor.own, types={type}, start=start, stop=stop)
    if caller.role:
        # Same owner role only: shared rows are not this owner's to link as its own repeats.
        mask &= caller.index.owner_code[start:stop] != 0
    return mask


async def _nearest_existing(
    caller: Caller, records: Sequence[Memory], vectors: np.ndarray
) -> list[Near]:
    """Per record: the most similar dedup candidate among the cached rows, if at the
    near-duplicate threshold, its cosine, and how many rows were cached then (rows after
    that are checked one by one)."""
    masks = {kind: _dedup_mask(caller, kind) for kind in {r.type.value for r in records}}
    n = caller.index.size
    if n == 0 or not any(mask.any() for mask in masks.values()):
        return [(None, -1.0, n)] * len(records)
    found = await caller.engine.nearest(
        vectors, [masks[r.type.value] for r in records], caller.settings.dedup_similarity
    )
    return [(caller.index.ids[row] if row >= 0 else None, cos, n) for row, cos in found]


def _near_duplicate(
    caller: Caller, type: str, vector: np.ndarray, near: Near | None = None
) -> tuple[str | None, float]:
    if near is None:
        hits = caller.index.search(
            vector, _dedup_mask(caller, type), 1, floor=caller.settings.dedup_similarity
        )
    else:
        # `near` covers rows [0, since); only rows written after it are searched here.
        twin, cos, since = near
        row = caller.index.ids.get(twin) if twin is not None else None
        # Found before the transaction: the twin may have been archived or deleted since.
        still = row is not None and bool(_dedup_mask(caller, type, start=row, stop=row + 1)[0])
        hits = [(twin, cos)] if still and twin is not None else []
        # Few rows: `search` multiplies only those it keeps.
        fresh = caller.index.search(vector, _dedup_mask(caller, type, start=since), 1, start=since)
        if fresh and (not hits or fresh[0][1] > hits[0][1]):
            hits = fresh
    if hits and hits[0][1] >= caller.settings.dedup_similarity:
        return hits[0][0], hits[0][1]
    return None, 0.0


async def _folded_before(caller: Caller, record: Memory) -> AuthorResult | None:
    """`exists` (nothing written) when an earlier import folded this line (its id, as stored
    here) into a memory of the caller's role with its text, live or archived since: that
    memory, or the live one reflection merged it into."""
    holder = await caller.store.folded_into(record.content_hash, caller.role, fold_note(record.id))
    if holder is None:
        return None
    memory = await caller.store.fetch(holder)
    if memory is not None and memory.archived and memory.faded:
        anchor = (await merged_anchors(caller, [holder])).get(holder)
        survivor = None if anchor is None else await caller.store.fetch(anchor)
        if survivor is not None and not survivor.archived:
            holder = survivor.id
    return AuthorResult(id=holder, status="exists", similarity=1.0, folded_before=True)


async def _repeat(
    caller: Caller,
    memory: Memory,
    record: Memory,
    edges: list[tuple[str, EdgeType, float]],
    named: bool = False,
) -> None:
    """An exact repeat: the author said it again. Reinforce the memory (its row as read in
    this transaction) and keep what the repeat adds (a higher importance, new tags, entities
    and links); the text is the same. An import line with an id (`named`) notes it on the
    access (`fold_note`), so running the import again does not fold it twice."""
    memory_id = memory.id
    memory.reinforcement_count += 1
    absorb(memory, record)
    access = caller.access(Channel.reinforced, query=fold_note(record.id) if named else None)
    caller.apply(memory, access)
    await caller.store.save(memory)
    await caller.store.append_accesses([(memory_id, access)])
    for target, relation, weight in edges:
        if target != memory_id:
            await caller.store.add_edge(memory_id, target, relation, weight)


async def import_edges(caller: Caller, edges: Sequence[tuple[str, dict[str, Any]]]) -> int:
    """Recreate exported edges whose both ends exist here; returns how many were added.

    Both ends must be the caller's to link, as a tool's link is: the source one of its own
    memories, the target among its own role's and shared memories.
    """
    added = 0
    scope = caller.actor.own
    async with caller.store.transaction():
        owners = await caller.store.owners_of(list({src for src, _ in edges}))
        for src, edge in edges:
            if src not in owners or not caller.may_write(owners[src]):
                continue
            try:
                relation = EdgeType(str(edge.get("type")))
                weight = EDGE_WEIGHT.parse(edge.get("weight", 1.0), "edges.weight")
                target = await caller.store.resolve_id(
                    normalise_id(str(edge.get("target"))), "edges.target", scope
                )
            except (ValueError, NotFound):
                continue
            if target != src:
                await caller.store.add_edge(src, target, relation, weight)
                added += 1
    return added
