"""Reminders: intents that fire on time or on a cue, returned with the next tool result (SPEC §9).

Fired intents log `injected` (shown by the server, never reinforcing) and a maintenance-log
entry, and are marked fired or re-armed. Each firing is decided again on the fresh row inside
the write transaction, so two processes never both fire a one-shot intent.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..domain.prospective import evaluate
from ..domain.replies import Reminder
from ..domain.schema import Channel
from ..domain.schema import now as utc_now
from ..domain.text import head
from .caller import Caller

__all__ = ["REMINDER_CHARS", "fire"]

#: A fired intent's content is clipped here: every later reply carries its reminders (SPEC §12).
REMINDER_CHARS = 1_000


async def fire(
    c: Caller,
    texts: Sequence[tuple[str | None, np.ndarray | None]] = ((None, None),),
    exclude: Sequence[str] = (),
) -> list[list[Reminder]]:
    """Fire the caller's intents due now or cued by each text; one reminder list per text."""
    out: list[list[Reminder]] = [[] for _ in texts]
    skip = set(exclude)
    intents = [m for m in await c.store.intents(c.role) if m.id not in skip]
    if not intents:
        return out
    now = utc_now()
    triggers = {m.id: m.trigger for m in intents if m.trigger is not None}
    cues = await c.engine.cue_vectors_for([t.cue for t in triggers.values() if t.cue])
    cue_vecs = {i: cues[t.cue] for i, t in triggers.items() if t.cue and t.cue in cues}
    fired = []
    for position, (text, vector) in enumerate(texts):
        for firing in evaluate(list(triggers.items()), now, text, vector, cue_vecs):
            triggers[firing.intent_id] = firing.trigger
            fired.append((position, firing))
    if not fired:
        return out
    async with c.store.transaction():
        for position, firing in fired:
            memory = await c.store.fetch(firing.intent_id)
            if memory is None or memory.archived or memory.trigger is None:
                continue
            text, vector = texts[position]
            again = evaluate([(memory.id, memory.trigger)], now, text, vector, cue_vecs)
            if not again:
                continue
            memory.trigger = again[0].trigger
            access = c.access(Channel.injected, query=(text or "")[:200] or None)
            c.apply(memory, access)
            await c.store.save(memory)
            await c.store.append_accesses([(memory.id, access)])
            await c.store.log_maintenance(
                "intent",
                {
                    "intent_id": memory.id,
                    "role": c.role,
                    "reason": again[0].reason,
                    "rearmed": again[0].rearmed,
                    "text": (text or "")[:200],
                    "similarity": again[0].similarity,
                },
            )
            out[position].append(
                Reminder(
                    intent_id=memory.id,
                    content=head(memory.content, REMINDER_CHARS),
                    reason=again[0].reason,
                    fired_at=now,
                    rearmed=again[0].rearmed,
                )
            )
    c.index.mark_dirty()
    return out
