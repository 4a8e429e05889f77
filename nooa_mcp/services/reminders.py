"""Reminders: intents that fire on time or on a cue, returned with the next tool result.

Fired intents log `injected` (shown by the server, never reinforcing) and a maintenance-log
entry, and are marked fired or re-armed. Each firing is decided again on the fresh row inside
the write transaction, so two processes never both fire a one-shot intent.

A reply carries at most `MAX_REMINDERS`, and intents with the same text are shown once: 300
intents cued by one word must not crowd the answer out of a recall (DESIGN.md §9.3). The
intents left out are not fired: they stay armed, and the reply says how many more are due.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from ..domain.cues import due_occurrence
from ..domain.prospective import Firing, evaluate
from ..domain.replies import Reminder
from ..domain.schema import Channel, now as utc_now
from ..domain.text import head
from .caller import Caller
from .transactions import in_transaction

__all__ = ["MAX_REMINDERS", "REMINDER_CHARS", "Fired", "fire"]

#: A fired intent's content is clipped here: a reply carries it beside its own answer.
REMINDER_CHARS = 1_000
#: Reminders one reply carries at most; the rest stay armed for later replies.
MAX_REMINDERS = 5


@dataclass
class Fired:
    """The reminders for one text, and how many more intents are due but not shown."""

    reminders: list[Reminder] = field(default_factory=list)
    more: int = 0


async def fire(
    caller: Caller,
    texts: Sequence[tuple[str | None, np.ndarray | None]] = ((None, None),),
    exclude: Sequence[str] = (),
) -> list[Fired]:
    """Fire the caller's intents due now or cued by each text; one `Fired` per text."""
    out = [Fired() for _ in texts]
    if not caller.store.writable:
        return out  # firing marks the intent: nothing fires where nothing can be written
    skip = set(exclude)
    intents = {m.id: m for m in await caller.engine.intents(caller.role) if m.id not in skip}
    if not intents:
        return out
    now = utc_now()
    triggers = {i: m.trigger for i, m in intents.items() if m.trigger is not None}
    cues = await caller.engine.cue_vectors_for(
        [t.cue for t in triggers.values() if t.cue], caller.role
    )
    cue_vecs = {i: cues[t.cue] for i, t in triggers.items() if t.cue and t.cue in cues}
    chosen: list[tuple[int, list[Firing]]] = []
    for position, (text, vector) in enumerate(texts):
        groups: dict[str, list[Firing]] = {}
        for firing in evaluate(list(triggers.items()), now, text, vector, cue_vecs):
            shown = head(intents[firing.intent_id].content, REMINDER_CHARS)
            groups.setdefault(shown, []).append(firing)
        kept = list(groups.values())[:MAX_REMINDERS]
        out[position].more = sum(len(g) for g in list(groups.values())[MAX_REMINDERS:])
        for group in kept:
            for firing in group:
                triggers[firing.intent_id] = firing.trigger
            chosen.append((position, group))
    if not chosen:
        return out
    # What was logged behind earlier replies (a recall's hits, this call's too) happened
    # first: it is written first, so the access stream keeps the order things happened in.
    await caller.engine.flush()

    async def attempt() -> list[tuple[int, Reminder]]:
        # Decided again on each intent's row as it is now, inside the transaction: an
        # attempt a concurrent transaction aborted is decided again (`transactions`).
        shown: list[tuple[int, Reminder]] = []
        for position, group in chosen:
            text, vector = texts[position]
            fired_ids: list[str] = []
            reason = None
            due: datetime | None = None
            for firing in group:
                memory = await caller.store.fetch(firing.intent_id)
                if memory is None or memory.archived or memory.trigger is None:
                    continue
                again = evaluate([(memory.id, memory.trigger)], now, text, vector, cue_vecs)
                if not again:
                    continue
                if again[0].reason == "time" and due is None:
                    due = due_occurrence(memory.trigger.fire_at, memory.trigger.every_hours, now)
                memory.trigger = again[0].trigger
                access = caller.access(Channel.injected, query=(text or "")[:200] or None)
                caller.apply(memory, access)
                await caller.store.save(memory)
                await caller.store.append_accesses([(memory.id, access)])
                await caller.store.log_maintenance(
                    "intent",
                    {
                        "intent_id": memory.id,
                        "role": caller.role,
                        "reason": again[0].reason,
                        "rearmed": again[0].rearmed,
                        "text": (text or "")[:200],
                        "similarity": again[0].similarity,
                    },
                )
                fired_ids.append(memory.id)
                reason = reason or again[0]
            if reason is None:
                continue
            first = intents[fired_ids[0]]
            shown.append(
                (
                    position,
                    Reminder(
                        intent_id=first.id,
                        also=fired_ids[1:],
                        content=head(first.content, REMINDER_CHARS),
                        reason=reason.reason,
                        fired_at=now,
                        rearmed=reason.rearmed,
                        due_at=due if reason.reason == "time" else None,
                    ),
                )
            )
        return shown

    for position, reminder in await in_transaction(caller, attempt):
        out[position].reminders.append(reminder)
    caller.index.mark_dirty()
    return out
