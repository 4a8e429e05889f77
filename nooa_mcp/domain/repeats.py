"""When a write, a revive or a merge is the same memory said again, and what it adds.

Pure. Three paths fold one memory into another: an exact repeat at write time (the same text
of the same type), a write that meets an archived memory's tombstone (a faded one is revived,
a forgotten one is refused), and reflection's merge of a duplicate into its anchor. Each keeps
one memory and drops the other's row, so each must be sure the two are one memory, not only
one text. They are when, beyond saying the same thing in the same words
(`facts.same_statement`, checked by the caller on the text it has):

- they are of one type: a todo or an intent with an info's words is a task, not the info;
- they hold for the same time: the same `valid_from` and `valid_to` (the guest wifi password
  until December is not the one from January on);
- an episode happened at one time: its event time (`created_at`) within `SAME_EVENT` (an
  hour) of the other's ("Paid the rent" on 1 October and again on 1 November are two
  payments);
- a todo is one errand while it is as open or closed as the other: "Renew the certificate"
  added again after the last one was done is a new errand;
- they name no different place or task (one may leave it out).

What the repeat adds is kept (`absorb`): the higher importance, salience and confidence, new
tags and entities, a place where there was none. The text is the same by the rule above.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ..errors import InvalidInput
from .facts import written_key
from .forgetting import SPENT
from .references import MAX_REFERENCES
from .schema import MAX_LABELS, Memory, MemoryType, clean_labels

__all__ = [
    "SAME_EVENT",
    "absorb",
    "absorb_labels",
    "labels_fit",
    "one_memory",
    "one_place",
    "one_time",
    "repeat_key",
]

#: Two episodes with the same words are one event when they happened this close together: an
#: agent saying again, or retrying, what just happened (a retry minutes later, a client clock
#: ahead of the server's, clamped to now); further apart they are two events ("Paid the
#: rent" on the first of two months).
SAME_EVENT = timedelta(hours=1)


def one_memory(kept: Memory, again: Memory) -> bool:
    """Whether `again` (a write, or a duplicate) may be folded into `kept` without losing what
    it says about its type, its time or its place; the words are the caller's check."""
    if not one_time(
        (kept.type.value, kept.valid_from, kept.valid_to, kept.created_at.timestamp()),
        (again.type.value, again.valid_from, again.valid_to, again.created_at.timestamp()),
    ):
        return False
    if kept.type is MemoryType.todo and (kept.status or "open") != (again.status or "open"):
        return False
    if kept.type is MemoryType.intent and (
        trigger_key(kept) != trigger_key(again) or kept.prune_status == SPENT
    ):
        # Another time or cue is another intent (a repeat dropped the new trigger, and the
        # cue never fired); a spent one-shot said again is asked for again.
        return False
    return one_place(kept.place_or_task, again.place_or_task)


def trigger_key(memory: Memory) -> tuple[object, ...] | None:
    """What an intent waits for: its time, cue (case folded) and period."""
    t = memory.trigger
    if t is None:
        return None
    return (t.fire_at, " ".join((t.cue or "").casefold().split()), t.every_hours)


def one_place(a: str, b: str) -> bool:
    """Whether two places or tasks name no different ones (either may be empty)."""
    return len({a.strip().casefold(), b.strip().casefold()} - {""}) <= 1


def one_time(a: tuple[str, Any, Any, float], b: tuple[str, Any, Any, float]) -> bool:
    """`one_memory`'s rules of type and time on bare values: (type, valid_from, valid_to,
    created_at as a timestamp) of each, as ranking holds them."""
    if a[:3] != b[:3]:
        return False
    return a[0] != MemoryType.episode.value or abs(a[3] - b[3]) <= SAME_EVENT.total_seconds()


def repeat_key(memory: Memory) -> tuple[object, ...]:
    """What two writes of one batch must share to be one memory: the text, folded and as
    written (`facts.same_as_written`), and `one_memory` as equality, the event time to the
    hour for an episode (a row of the batch found otherwise, by its text, is checked by
    `one_memory` as a stored one is)."""
    when = memory.created_at.replace(minute=0, second=0, microsecond=0)
    return (
        memory.type.value,
        memory.content_hash,
        written_key(memory.content),
        memory.valid_from,
        memory.valid_to,
        when if memory.type is MemoryType.episode else None,
        memory.place_or_task.strip().casefold(),
        memory.status if memory.type is MemoryType.todo else None,
        trigger_key(memory) if memory.type is MemoryType.intent else None,
    )


def absorb(kept: Memory, again: Memory) -> None:
    """Keep in `kept` what `again` adds: the higher of the scores its author gave (one left
    out is no score: a write that says nothing of importance does not raise a TRIVIAL memory
    to the default MEDIUM), and its labels (`absorb_labels`) (in place)."""
    unsaid = again._unsaid
    if "importance" not in unsaid:
        kept.importance = max(kept.importance, again.importance)
        kept.authored_importance = max(kept.authored, again.authored)
    if "salience" not in unsaid:
        kept.salience = max(kept.salience, again.salience)
    if "confidence" not in unsaid:
        kept.confidence = max(kept.confidence, again.confidence)
    absorb_labels(kept, again)


def labels_fit(kept: Memory, again: Memory) -> bool:
    """Whether `kept` can hold `again`'s tags, entities and references beside its own
    (`MAX_LABELS` tags and as many entities, `MAX_REFERENCES` references). A merge that could
    not keep them all keeps both memories: folded, the labels past the bound were refused, and
    that failure stopped every pass of the role; the references past it were cut, and the
    duplicate's no longer reached from the memory recall shows in its place."""
    return _past_bound(kept, again) is None


def _past_bound(kept: Memory, again: Memory) -> tuple[str, int, int, int] | None:
    """The first of tags, entities and references that `kept` could not hold with `again`'s
    new ones: (field, how many it has, how many are new, the bound); None when all fit."""
    for field, mine, theirs, bound in (
        ("tags", kept.tags, again.tags, MAX_LABELS),
        ("entities", kept.entities, again.entities, MAX_LABELS),
        (
            "references",
            [r.uri for r in kept.references],
            [r.uri for r in again.references],
            MAX_REFERENCES,
        ),
    ):
        held = set(mine)
        new = [x for x in dict.fromkeys(theirs) if x not in held]
        if len(held) + len(new) > bound:
            return field, len(held), len(new), bound
    return None


_ONE = {"tags": "tag", "entities": "entity", "references": "reference", "new": "new one"}


def _count(n: int, what: str) -> str:
    """ "1 tag", "2 tags", "1 new one", "5 new ones", "1 new reference" (`absorb_labels`)."""
    head, _, last = what.rpartition(" ")
    if n == 1:
        return f"1 {head + ' ' if head else ''}{_ONE[last]}"
    return f"{n} {what}" if last != "new" else f"{n} new ones"


def absorb_labels(kept: Memory, again: Memory) -> None:
    """Keep in `kept` the tags, entities and references of `again`, and its place when `kept`
    has none (a merge takes its scores from `reflection.merged_fields`, its labels from
    here): what the duplicate pointed at is still pointed at once it fades.

    Raises:
        InvalidInput: `kept` cannot hold them all (a merge asks `labels_fit` first). A repeat
            with references past the bound was answered `exists` with the last ones dropped,
            and one with tags past it was refused as "60 labels given" when 30 were.
    """
    past = _past_bound(kept, again)
    if past is not None:
        field, has, new, bound = past
        fits = max(bound - has, 0)
        fix = f"Pass at most {_count(fits, 'new ' + field)}." if fits else ""
        raise InvalidInput(
            field,
            f"memory {kept.id[:8]} says this already and has {_count(has, field)}; "
            f"with the {_count(new, 'new')} given it would have {has + new}, and a memory has "
            f"at most {bound}.",
            fix or f"Pass no new {field}.",
        )
    kept.tags = clean_labels(kept.tags + again.tags, "tags")
    kept.entities = clean_labels(kept.entities + again.entities, "entities")
    held = {r.uri for r in kept.references}
    added = [r for r in again.references if r.uri not in held]
    kept.references = [*kept.references, *added][:MAX_REFERENCES]
    if not kept.place_or_task.strip():
        kept.place_or_task = again.place_or_task
