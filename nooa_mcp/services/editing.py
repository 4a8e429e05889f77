"""Editing: change, link, archive or revive one of your memories (DESIGN.md §4.6).

Writes stay inside the writer's role. An update logs `reinforced` without the strength bump;
new content is re-embedded and is a cue for intents, like authored content.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..domain.inputs import check_content, check_short_text, parse_status
from ..domain.replies import UpdateResult
from ..domain.requests import UpdateRequest
from ..domain.schema import IMPORTANCE, Channel, Memory, MemoryType, as_utc, clean_labels
from ..domain.text import a_or_an
from ..engine import text_of
from ..errors import InvalidInput, NotFound
from . import reminders
from .authoring import parse_links, to_anchors
from .caller import Caller
from .tombstones import (
    archive,
    merged_anchors,
    merged_twins,
    restore,
    revive_by_use,
    rows_to_revive,
)
from .transactions import in_transaction

if TYPE_CHECKING:
    import numpy as np

__all__ = ["forget", "revive", "update"]


async def update(caller: Caller, request: UpdateRequest) -> UpdateResult:
    """Change, link or archive one of the caller's memories in one transaction.

    Raises:
        NotFound / AmbiguousId: the id does not name one visible memory.
        OwnerForbidden: the memory belongs to another role.
        InvalidInput: a field is malformed, or no field is given.
    """
    content, title, status = request.content, request.title, request.status
    valid_to, forget = request.valid_to, request.forget
    given = (content, title, request.importance, request.tags, status, valid_to)
    # The id first: an unknown one is named as such, not answered with "nothing to change".
    target = await caller.resolve_writable(request.memory_id)
    if all(v is None for v in given) and not request.links and not forget:
        # Answering "Updated …: nothing" would let a model believe a change it never sent.
        raise InvalidInput(
            "memory_id",
            "only the id was given, so there is nothing to change.",
            "Pass at least one of content, title, importance, tags, status, links, valid_to "
            "or forget.",
        )
    if forget and (content is not None or title is not None):
        # The forget keeps the words a revive brings back; rewritten in the same call, the
        # text the user wrote was gone for good (a model put its reason in `content`).
        raise InvalidInput(
            "content" if content is not None else "title",
            "cannot be changed in the call that forgets the memory: the forget keeps its "
            "words as they are, for a revive.",
            "Send forget alone; to keep a new text, write it as a new memory.",
        )
    edges = await parse_links(caller, request.links)
    importance = request.importance
    new_importance = IMPORTANCE.parse(importance) if importance is not None else None
    new_tags = None
    if request.tags is not None:
        new_tags = clean_labels(
            request.tags, "tags", "Give it a word or leave it out; tags=[] removes them all."
        )
    new_valid_to = as_utc(valid_to, "valid_to")
    new_content = None
    if content is not None:
        new_content = check_content(content, required_fix="Pass the new text, or leave it out.")
    if status is not None:
        parse_status(status)
    new_title = check_short_text(title, "title") if title is not None else None

    def text_after(m: Memory) -> str:
        return text_of(
            m.title if new_title is None else new_title,
            m.content if new_content is None else new_content,
        )

    memory = await caller.fetch(target)
    caller.writable(memory)
    # Embed outside the lock; the text is checked again under it (below).
    basis = text_after(memory)
    vector = None
    if basis != text_of(memory.title, memory.content):
        vector = (await caller.engine.embed([basis]))[0]
    first_target, embedded, asked_edges = target, vector, edges

    async def attempt() -> tuple[Memory, str, str | None, list[str], np.ndarray | None]:
        # Every value from what the call was given: an attempt a concurrent transaction
        # aborted (PostgreSQL) is run again from the start (`transactions`).
        target, vector, edges = first_target, embedded, asked_edges
        changed: list[str] = []
        merged_from = None
        memory = await caller.fetch(target)
        merged = memory.faded and not forget
        anchor = (await merged_anchors(caller, [target])).get(target) if merged else None
        if anchor is not None:
            # A duplicate reflection merged away lives on through its anchor, which recall
            # shows for it: the change goes there (on the duplicate it changed a hidden copy
            # and the reply called it forgotten; a content edit there ranked below the text
            # it replaced). Not a forget: the anchor may have been edited since the merge, and
            # forgetting the copy must not drop what the anchor says now.
            merged_from, target = target, anchor
            memory = await caller.fetch(target)
            caller.writable(memory)
        edges = await to_anchors(caller, edges)
        if new_content is not None and new_content != memory.content:
            memory.content = new_content
            changed.append("content")
        if new_title is not None and new_title != memory.title:
            memory.title = new_title
            changed.append("title")
        if "content" not in changed and "title" not in changed:
            vector = None
        elif vector is None or basis != text_of(memory.title, memory.content):
            # A concurrent update changed the other half of the text since it was
            # embedded: the stored vector must be of the text as it is now saved.
            vector = (await caller.engine.embed([text_of(memory.title, memory.content)]))[0]
        if new_importance is not None and new_importance != memory.importance:
            memory.importance = new_importance
            memory.authored_importance = new_importance
            changed.append("importance")
        if new_tags is not None and new_tags != memory.tags:
            memory.tags = new_tags
            changed.append("tags")
        if status is not None and status != memory.status:
            if memory.type is not MemoryType.todo:
                raise InvalidInput(
                    "status",
                    f"only todos have a status; this is {a_or_an(memory.type.value)}.",
                    "Leave status out.",
                )
            memory.status = status  # type: ignore[assignment]
            changed.append("status")
        if valid_to is not None and new_valid_to != memory.valid_to:
            if memory.valid_from and new_valid_to and new_valid_to < memory.valid_from:
                raise InvalidInput("valid_to", "is before valid_from.", "Pass a later date.")
            memory.valid_to = new_valid_to
            changed.append("valid_to")
            for twin in await merged_twins(caller, memory):
                # A duplicate merged into it said the same thing for the same time, and lives
                # on through it: it stops holding with it (recall showed it unflagged, first,
                # beside the memory its user had said no longer holds).
                twin.valid_to = new_valid_to
                await caller.store.save(twin)
        for other, relation, weight in edges:
            if other == target:
                raise InvalidInput(
                    "links.target", "a memory cannot link to itself.", "Pick another target."
                )
            await caller.store.add_edge(target, other, relation, weight)
            changed.append(f"link:{relation.value}->{other[:8]}")
        if changed:
            # An update is not a rehearsal: `reinforced`, without the strength bump.
            access = caller.access(Channel.reinforced)
            caller.apply(memory, access, bump_strength=False)
            await caller.store.save(memory, vector)
            await caller.store.append_accesses([(target, access)])
            if not forget and memory.faded and not await merged_anchors(caller, [target]):
                # Changing a faded memory is using it: a todo reopened, a fact corrected
                # after reflection pruned it, is live again (a forgotten one stays archived;
                # a merged duplicate stays behind its anchor, which answers for it).
                await revive_by_use(caller, memory)
        if forget and (not memory.archived or memory.faded):
            # Forgetting a faded memory takes it out of recall's reach for good too.
            await archive(caller, memory, "forgotten")
            changed.append("archived")
        return memory, target, merged_from, changed, vector

    memory, target, merged_from, changed, vector = await in_transaction(caller, attempt)
    caller.index.mark_dirty()
    archived = memory.archived or forget
    result = UpdateResult(id=target, changed=changed, archived=archived, merged_from=merged_from)
    if "tags" in changed:
        result.tags = list(memory.tags)
    if "content" in changed:
        # New content is a cue like authored content (an intent never cues itself).
        due = (await reminders.fire(caller, [(memory.content, vector)], exclude=[target]))[0]
        result.reminders, result.reminders_more = due.reminders, due.more
    return result


async def forget(caller: Caller, memory_id: str, reason: str = "forgotten") -> UpdateResult:
    """Archive a memory (never deleted): recall and spreading skip it from now on. A memory
    reflection had faded is forgotten the same way (recall stops reaching it).

    Raises:
        NotFound / AmbiguousId / OwnerForbidden: as for `update`.
    """
    target = await caller.resolve_writable(memory_id)

    async def attempt() -> bool:
        memory = await caller.fetch(target)
        caller.writable(memory)
        already = memory.archived and not memory.faded
        if not already:
            await archive(caller, memory, reason)
        return already

    already = await in_transaction(caller, attempt)
    caller.index.mark_dirty()
    return UpdateResult(id=target, changed=[] if already else ["archived"], archived=True)


async def revive(caller: Caller, memory_id: str) -> UpdateResult:
    """Restore a forgotten memory by id: that very memory, un-archived, its tombstone lifted.

    Nothing is written anew: the memory keeps its id, edges and access history, and the revive
    logs a reinforcing access, as `author(..., revive=True)` does. A live memory is left as it
    is (`changed` is empty), as `forget` leaves an archived one. A live memory holding the same
    content does not stop it: both are live afterwards (reflection merges such duplicates when
    they share a type).

    Raises:
        NotFound / AmbiguousId / OwnerForbidden: as for `update`.
    """
    target = await caller.resolve_writable(memory_id)

    async def attempt() -> bool:
        memory = (await rows_to_revive(caller, [target])).get(target)
        if memory is None:
            raise NotFound(target)  # as `Caller.fetch` says it
        caller.writable(memory)
        archived = memory.archived
        if archived:
            await restore(caller, memory)
        return archived

    archived = await in_transaction(caller, attempt)
    caller.index.mark_dirty()
    return UpdateResult(id=target, changed=["revived"] if archived else [], archived=False)
