"""Trigger rules that need no model: cue keywords, time triggers, recurrence (DESIGN.md §9.2).

Pure, the standard library and the stemmer only, so the Claude Code hook's fast path (a fresh
process before every prompt, no numpy, no pydantic) applies exactly the rules the server
applies. A trigger
here is anything with `fire_at`, `cue`, `every_hours`, `fired_at` and `fired_count`
attributes: the stored `Trigger` model, or a plain namespace read from the store's JSON.
`prospective` adds the cosine half of cue matching and the evaluation over many intents.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta

from .text import cut_cjk, has_cjk, stem

__all__ = [
    "cue_keywords",
    "fired_fields",
    "is_armed",
    "keyword_present",
    "keywords_match",
    "next_fire_at",
    "text_words",
    "time_due",
]

_STOPWORDS = frozenset(
    """a an the and or but if then when whenever while of to in on at by for with about from into
    onto over under is are was were be been being am do does did done have has had i me my we us
    our you your he she it its they them their this that these those there here what which who
    whom whose how why where as so not no nor too very can could should would will shall may might
    must just than also any some all each every again once up down out off
    s t d ll re ve m""".split()  # noqa: SIM905
)
_WORD = re.compile(r"[\w'-]+")
#: Typographic apostrophes as the ASCII one: "don’t" from a phone's keyboard is "don't" (cut
#: at the curly one, a cue "don’t deploy" wanted the words "don" and "t", and "’s" was "s").
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})


def _words(text: str) -> set[str]:
    # A run of Chinese, Japanese or Korean as its bigrams, as search cuts it.
    found = cut_cjk(_WORD.findall(text.lower().translate(_APOSTROPHES)), text)
    return {w.strip("'-") for w in found}


def cue_keywords(cue: str) -> frozenset[str]:
    """The content words of a cue, lower-cased, without stop words."""
    return frozenset(w for w in _words(cue) if w and w not in _STOPWORDS)


def text_words(text: str) -> set[str]:
    """Every word of a text, lower-cased (stop words kept: a cue keyword may be one)."""
    return _words(text)


def keyword_present(keyword: str, words: set[str]) -> bool:
    """Whether `keyword` is among `words`, or a word with its stem is (the English Snowball
    stemmer keyword search uses): "deploy" in "deploying", "upgrade" in "upgrading", but not
    "plan" in "planet" (a word that only begins with it)."""
    if keyword in words:
        return True
    if len(keyword) == 1 and has_cjk(keyword):  # one character: inside a bigram
        return any(keyword in w for w in words)
    wanted = stem(keyword)
    return any(stem(w) == wanted for w in words)


def keywords_match(cue: str, text: str) -> bool:
    """The keyword half of cue matching: every content word of the cue appears in the text."""
    keywords = cue_keywords(cue)
    if not keywords:
        return False
    words = text_words(text)
    return all(keyword_present(k, words) for k in keywords)


def is_armed(trigger: object, now: datetime) -> bool:
    """A one-shot trigger is armed until it fires; a recurring one after its cooldown."""
    fired_at, every = trigger.fired_at, trigger.every_hours  # type: ignore[attr-defined]
    if trigger.fired_count == 0 or fired_at is None:  # type: ignore[attr-defined]
        return True
    if every is None:
        return False
    return now >= fired_at + timedelta(hours=every)


def time_due(trigger: object, now: datetime) -> bool:
    """A time trigger is due once `fire_at` has passed and it is still armed."""
    fire_at = trigger.fire_at  # type: ignore[attr-defined]
    fired_at = trigger.fired_at  # type: ignore[attr-defined]
    if fire_at is None or fire_at > now:
        return False
    if fired_at is not None and fired_at >= fire_at:
        return False  # already fired for this occurrence
    return trigger.every_hours is not None or trigger.fired_count == 0  # type: ignore[attr-defined]


def next_fire_at(fire_at: datetime, every_hours: float, now: datetime) -> datetime:
    """The first occurrence of `fire_at + n·every` strictly after now (occurrences missed while
    nobody called are collapsed into this one firing)."""
    step = timedelta(hours=every_hours)
    if fire_at > now:
        return fire_at
    missed = math.floor((now - fire_at) / step) + 1
    return fire_at + missed * step


def due_occurrence(
    fire_at: datetime | None, every_hours: float | None, now: datetime
) -> datetime | None:
    """The occurrence of a time trigger that a firing at `now` answers: `fire_at`, or for a
    recurring one the latest `fire_at + n·every` not after now (the ones missed before it
    collapse into this firing, `next_fire_at`)."""
    if fire_at is None or every_hours is None or fire_at > now:
        return fire_at
    return next_fire_at(fire_at, every_hours, now) - timedelta(hours=every_hours)


def lateness(due: datetime | None, fired: datetime) -> str:
    """ ", due <time> UTC, <n> day(s) late" for a reminder given an hour or more after its time
    came (a day nobody called), else "": it must not read as given on time."""
    if due is None or fired - due < timedelta(hours=1):
        return ""
    late = fired - due
    span = f"{late.days} day(s)" if late.days else f"{late.seconds // 3600} hour(s)"
    return f", due {due:%Y-%m-%d %H:%M} UTC, {span} late"


def fired_fields(trigger: object, now: datetime) -> tuple[dict, bool]:
    """What firing now changes on a trigger, and whether it is re-armed (recurring)."""
    every = trigger.every_hours  # type: ignore[attr-defined]
    fire_at = trigger.fire_at  # type: ignore[attr-defined]
    update: dict = {"fired_at": now, "fired_count": trigger.fired_count + 1}  # type: ignore[attr-defined]
    rearmed = every is not None
    if rearmed and fire_at is not None:
        update["fire_at"] = next_fire_at(fire_at, every, now)
    return update, rearmed
