"""Prospective memory: intent triggers that fire, recurrence, and todo ordering (SPEC §9).

Pure: the caller embeds the text and the cues and passes the vectors in. A trigger is armed
until it fires; a recurring one (`every_hours`) is re-armed: a time trigger moves to its next
occurrence after now, a cue trigger waits `every_hours` before it may fire again. A trigger with
both a time and a cue fires on whichever comes first: the time is a "by then at the latest".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

import numpy as np

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

#: Cosine between cue and text at or above which a cue trigger fires (SPEC §9).
CUE_SIMILARITY = 0.55

_STOPWORDS = frozenset(
    """a an the and or but if then when whenever while of to in on at by for with about from into
    onto over under is are was were be been being am do does did done have has had i me my we us
    our you your he she it its they them their this that these those there here what which who
    whom whose how why where as so not no nor too very can could should would will shall may might
    must just than also any some all each every again once up down out off""".split()  # noqa: SIM905
)
_WORD = re.compile(r"[\w'-]+")


@dataclass(frozen=True)
class Firing:
    """An intent that fires now, and the trigger it leaves behind."""

    intent_id: str
    reason: Literal["time", "cue"]
    trigger: Trigger
    rearmed: bool
    similarity: float | None = None


def cue_keywords(cue: str) -> frozenset[str]:
    """The content words of a cue, lower-cased, without stop words."""
    words = {w.strip("'-") for w in _WORD.findall(cue.lower())}
    return frozenset(w for w in words if w and w not in _STOPWORDS)


def _text_words(text: str) -> set[str]:
    return {w.strip("'-") for w in _WORD.findall(text.lower())}


def _keyword_present(keyword: str, words: set[str]) -> bool:
    # A keyword of 4+ letters also matches its inflections ("deploy" in "deploying").
    if keyword in words:
        return True
    return len(keyword) >= 4 and any(w.startswith(keyword) for w in words)


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
    keywords = cue_keywords(cue)
    if keywords:
        words = _text_words(text)
        if all(_keyword_present(k, words) for k in keywords):
            return True, cos
    return False, cos


def is_armed(trigger: Trigger, now: datetime) -> bool:
    """A one-shot trigger is armed until it fires; a recurring one after its cooldown."""
    if trigger.fired_count == 0 or trigger.fired_at is None:
        return True
    if trigger.every_hours is None:
        return False
    return now >= trigger.fired_at + timedelta(hours=trigger.every_hours)


def time_due(trigger: Trigger, now: datetime) -> bool:
    """A time trigger is due once `fire_at` has passed and it is still armed."""
    if trigger.fire_at is None or trigger.fire_at > now:
        return False
    if trigger.fired_at is not None and trigger.fired_at >= trigger.fire_at:
        return False  # already fired for this occurrence
    return trigger.every_hours is not None or trigger.fired_count == 0


def next_fire_at(fire_at: datetime, every_hours: float, now: datetime) -> datetime:
    """The first occurrence of `fire_at + n·every` strictly after now (occurrences missed while
    nobody called are collapsed into this one firing)."""
    step = timedelta(hours=every_hours)
    if fire_at > now:
        return fire_at
    missed = math.floor((now - fire_at) / step) + 1
    return fire_at + missed * step


def fire(trigger: Trigger, now: datetime) -> tuple[Trigger, bool]:
    """The trigger after firing now, and whether it was re-armed."""
    update: dict = {"fired_at": now, "fired_count": trigger.fired_count + 1}
    rearmed = trigger.every_hours is not None
    if rearmed and trigger.fire_at is not None:
        update["fire_at"] = next_fire_at(trigger.fire_at, trigger.every_hours, now)
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
    """Sort key for todos: open first, then higher importance, then older first (SPEC §9)."""
    rank = {"open": 0, "done": 1, "dropped": 2}.get(status or "open", 3)
    return (rank, -importance, created_at)
