"""Intents: prospective memory that fires at a time or on a cue (DESIGN.md §9.2)."""

from __future__ import annotations

from ..domain.inputs import check_situation, refuse_foreign, refuse_silent_cue
from ..domain.replies import IntentItem, IntentResult
from ..domain.requests import AuthorRequest, IntentRequest
from ..domain.schema import INTENT_ACTIONS, as_utc, now as utc_now
from ..domain.text import a_or_an, choices, head
from ..errors import InvalidInput
from . import reminders
from .authoring import author_many
from .caller import Caller
from .editing import forget
from .views import get

__all__ = ["intent"]


async def intent(caller: Caller, request: IntentRequest, *, remind: bool = True) -> IntentResult:
    """Add an intent that fires at a time or on a cue, list intents, check now, or cancel one.

    A time trigger fires once `fire_at` has passed; a cue fires when a recall query or
    authored content matches it (cosine ≥ 0.55, or every cue keyword present). With both,
    whichever comes first fires it; `every_hours` re-arms it. `check` evaluates the time
    triggers, and the cues against `text` if given. `remind=False` makes list and cancel
    fire nothing (a person looking must not consume an agent's reminders); `check` fires
    by definition and refuses it.

    Raises:
        InvalidInput: unknown action, missing content/trigger/id, or the id is not an intent.
        NotFound: the id does not name a visible memory.
    """
    action, content, memory_id = request.action, request.content, request.memory_id
    if action not in INTENT_ACTIONS:
        raise InvalidInput(
            "action", f"{action!r} is not an intent action.", f"Use {choices(INTENT_ACTIONS)}."
        )
    if action == "check" and not remind:
        raise InvalidInput(
            "remind", "check is the action that fires intents.", "Use list to look without firing."
        )
    add = ("add",)
    refuse_foreign(
        action,
        {
            "content": content,
            "fire_at": request.fire_at,
            "cue": request.cue,
            "every_hours": request.every_hours,
            "memory_id": memory_id,
            "text": request.text,
        },
        {
            "content": add,
            "fire_at": add,
            "cue": add,
            "every_hours": add,
            "memory_id": ("cancel",),
            "text": ("check",),
        },
    )
    result = IntentResult(action=action)  # type: ignore[arg-type]
    if action == "add":
        if not isinstance(content, str) or not content.strip():
            raise InvalidInput("content", "is empty.", "Say what to do when it fires.")
        refuse_silent_cue(request.cue, "cue")
        trigger = {
            "fire_at": request.fire_at,
            "cue": request.cue,
            "every_hours": request.every_hours,
        }
        added = AuthorRequest(
            content=content, type="intent", trigger=trigger, importance=request.importance
        )
        try:
            written = (await author_many(caller, [added], remind=remind))[0]
        except InvalidInput as exc:
            # The tool takes fire_at, cue and every_hours as arguments of their own.
            if not exc.field.startswith("trigger."):
                raise
            raise InvalidInput(exc.field.removeprefix("trigger."), exc.problem, exc.fix) from None
        result.id, result.outcome = written.id, written.status
        result.reminders, result.reminders_more = written.reminders, written.reminders_more
        when = as_utc(request.fire_at, "fire_at")
        if written.status == "created" and when is not None and when < utc_now():
            # A mistyped year is accepted as a time that has come: say so, once.
            result.outcome += (
                f" (fire_at {when:%Y-%m-%d %H:%M} UTC has passed: it fires at the next call;"
                " check the date if that was not meant)"
            )
    elif action == "cancel":
        if not memory_id:
            raise InvalidInput("memory_id", "is missing.", "Pass the id of the intent.")
        # A granted role's intent is read-only, said as such (recall shows it); an unreadable
        # id stays plainly not found.
        target = await caller.resolve_writable(memory_id, action="cancel")
        found = await get(caller, target)
        if found.type.value != "intent":
            raise InvalidInput(
                "memory_id",
                f"{found.id[:8]} is {a_or_an(found.type.value)}, not an intent.",
                "List intents to find the id.",
            )
        archived = await forget(caller, found.id, reason="intent cancelled")
        # Cancelling it again changes nothing, and says so rather than "cancelled" anew.
        outcome = "cancelled" if archived.changed else "already cancelled"
        result.id, result.outcome = found.id, outcome
        if remind:
            due = (await reminders.fire(caller))[0]
            result.reminders, result.reminders_more = due.reminders, due.more
    elif action == "check":
        text = check_situation(request.text)
        vector = await caller.engine.query_vector(text, caller.role) if text else None
        due = (await reminders.fire(caller, [(text or None, vector)]))[0]
        result.reminders, result.reminders_more = due.reminders, due.more
        result.outcome = f"{len(result.reminders)} fired" + (
            "" if text else " (times only: pass text to check cues against it)"
        )
    elif remind:
        due = (await reminders.fire(caller))[0]
        result.reminders, result.reminders_more = due.reminders, due.more
    result.intents = await _items(caller)
    return result


async def _items(caller: Caller) -> list[IntentItem]:
    items = []
    for m in await caller.store.intents(caller.role):
        trig = m.trigger
        if trig is None:
            continue
        items.append(
            IntentItem(
                id=m.id,
                id8=m.id[:8],
                content=head(m.content, 300),
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
