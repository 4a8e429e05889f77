"""Prospective memory: intent triggers that fire, recurrence, and todo ordering (DESIGN.md §9).

Pure: the caller embeds the text and the cues and passes the vectors in. A trigger is armed
until it fires; a recurring one (`every_hours`) is re-armed: a time trigger moves to its next
occurrence after now, a cue trigger waits `every_hours` before it may fire again. A trigger with
both a time and a cue fires on whichever comes first: the time is a "by then at the latest".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import numpy as np

from .cues import cue_keywords, fired_fields, is_armed, keywords_match, next_fire_at, time_due
from .schema import Trigger

__all__ = [
    "CUE_SIMILARITY",
    "Firing",
    "cue_keywords",
    "cue_matches",
    "evaluate",
    "fire",
    "is_armed",
    "next_fire_at",
    "time_due",
    "todo_order",
]

#: Cosine between cue and text at or above which a cue trigger fires.
CUE_SIMILARITY = 0.55


@dataclass(frozen=True)
class Firing:
    """An intent that fires now, and the trigger it leaves behind."""

    intent_id: str
    reason: Literal["time", "cue"]
    trigger: Trigger
    rearmed: bool
    similarity: float | None = None


def cue_matches(
    cue: str,
    text: str,
    cue_vec: np.ndarray | None = None,
    text_vec: np.ndarray | None = None,
    threshold: float = CUE_SIMILARITY,
) -> tuple[bool, float | None]:
    """Whether `text` matches `cue`: cosine ≥ threshold, or every cue keyword present.

    Vectors are L2-normalised, so cosine is their dot product. Returns (matched, cosine or None).
    """
    cos: float | None = None
    if cue_vec is not None and text_vec is not None:
        cos = float(np.dot(cue_vec, text_vec))
        if cos >= threshold:
            return True, cos
    return keywords_match(cue, text), cos


def fire(trigger: Trigger, now: datetime) -> tuple[Trigger, bool]:
    """The trigger after firing now, and whether it was re-armed."""
    update, rearmed = fired_fields(trigger, now)
    return trigger.model_copy(update=update), rearmed


def evaluate(
    intents: list[tuple[str, Trigger]],
    now: datetime,
    text: str | None = None,
    text_vec: np.ndarray | None = None,
    cue_vecs: dict[str, np.ndarray] | None = None,
    threshold: float = CUE_SIMILARITY,
) -> list[Firing]:
    """The intents that fire now: time triggers that are due, and cue triggers matched by `text`.

    Args:
        intents: (intent id, trigger) of every live intent in the caller's scope.
        now: the current time.
        text: the recall query or authored content of this call; None for a plain check.
        text_vec: the embedding of `text`, if available (cue keywords work without it).
        cue_vecs: intent id → embedding of its cue.

    Returns:
        One Firing per intent that fires, time before cue, in input order within each.
    """
    cue_vecs = cue_vecs or {}
    timed: list[Firing] = []
    cued: list[Firing] = []
    for intent_id, trigger in intents:
        if time_due(trigger, now):
            after, rearmed = fire(trigger, now)
            timed.append(Firing(intent_id, "time", after, rearmed))
            continue
        if text is None or not (trigger.cue or "").strip():
            continue
        if not is_armed(trigger, now):
            continue
        matched, cos = cue_matches(
            trigger.cue or "", text, cue_vecs.get(intent_id), text_vec, threshold
        )
        if matched:
            after, rearmed = fire(trigger, now)
            cued.append(Firing(intent_id, "cue", after, rearmed, cos))
    return timed + cued


def todo_order(status: str | None, importance: float, created_at: datetime) -> tuple:
    """Sort key for todos: open first, then higher importance, then older first."""
    rank = {"open": 0, "done": 1, "dropped": 2}.get(status or "open", 3)
    return (rank, -importance, created_at)
