"""Ebbinghaus forgetting: retention, prune eligibility and prune ETA (DESIGN.md §7).

Retention is computed when read, from `last_accessed_at` and `strength`, so it is always
current without any sweep.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from .kinds import MemoryType


@dataclass(frozen=True)
class ForgettingPolicy:
    """When a memory is let go. τ is an e-folding time in hours, not a half-life."""

    tau_hours: float = 336.0
    prune_below: float = 0.02
    min_age_hours: float = 24.0
    # Skills are kept for good; an intent is kept until its user drops it: archived, it would
    # never fire, and a reminder set for next year goes a year unused by design.
    protected_types: frozenset[str] = field(default_factory=lambda: frozenset({"skill", "intent"}))
    protected_importance: float = 8.0


def fading_since(last_accessed_at: datetime, valid_from: datetime | None) -> datetime:
    """Where forgetting's clock starts for a memory: its last touching access, or for a fact
    that holds only from a later date, that date. Written ahead, such a fact goes unused by
    design until it holds (as an intent set for next year); pruned before, it came back
    faded, below the stale fact it replaces, on the day it began to hold."""
    if valid_from is not None and valid_from > last_accessed_at:
        return valid_from
    return last_accessed_at


def stability_hours(strength: int, tau_hours: float = 336.0) -> float:
    """S = τ·(1 + ln(1 + strength)): each rehearsal stretches the forgetting curve."""
    return tau_hours * (1.0 + math.log1p(max(strength, 0)))


def retention(
    last_accessed_at: datetime, strength: int, now: datetime, tau_hours: float = 336.0
) -> float:
    """R = exp(−Δt_hours / S), Δt since the last touching access (a time in the future, from
    an import or a skewed clock, counts as now: retention never exceeds 1)."""
    dt_hours = max((now - last_accessed_at).total_seconds(), 0.0) / 3600.0
    return math.exp(-dt_hours / stability_hours(strength, tau_hours))


def prune_eta(
    last_accessed_at: datetime,
    strength: int,
    policy: ForgettingPolicy | None = None,
    now: datetime | None = None,
    valid_from: datetime | None = None,
) -> datetime:
    """When retention falls below the prune threshold: last_accessed + S·ln(1/threshold),
    from a later `valid_from` instead (`fading_since`).

    A last access after `now` counts as now, so a future stamp never postpones pruning; a
    `valid_from` ahead does, as the fact is not meant to be used before it holds.
    """
    policy = policy or ForgettingPolicy()
    if now is not None:
        last_accessed_at = min(last_accessed_at, now)
    last_accessed_at = fading_since(last_accessed_at, valid_from)
    hours = stability_hours(strength, policy.tau_hours) * math.log(1.0 / policy.prune_below)
    return last_accessed_at + timedelta(hours=hours)


#: The status the prune rule reads for a one-shot intent that has fired (an intent has no
#: stored status): its reminder was given, nothing is left to wait for, so it may fade like a
#: closed todo instead of being kept, and listed, for good.
SPENT = "spent"


def intent_status(trigger: object | None) -> str | None:
    """`SPENT` for a trigger that fired once and never re-arms, else None (`trigger`: the
    stored `Trigger` or anything with `every_hours` and `fired_count`)."""
    if trigger is None or getattr(trigger, "every_hours", None) is not None:
        return None
    return SPENT if (getattr(trigger, "fired_count", 0) or 0) > 0 else None


def protection(
    type: MemoryType | str, importance: float, status: str | None, policy: ForgettingPolicy
) -> str | None:
    """Why a memory may never be pruned, or None when it may be. An intent's `status` is
    `intent_status` of its trigger: a spent one is not protected by its type."""
    kind = MemoryType(type)
    if kind.value in policy.protected_types and not (kind is MemoryType.intent and status == SPENT):
        return f"type {kind.value} is protected"
    if kind is MemoryType.todo and status == "open":
        return "open todo"
    if importance >= policy.protected_importance:
        return f"importance ≥ {policy.protected_importance:g}"
    return None


def should_prune(
    *,
    type: MemoryType | str,
    importance: float,
    status: str | None,
    archived: bool,
    learned_at: datetime,
    last_accessed_at: datetime,
    strength: int,
    now: datetime,
    policy: ForgettingPolicy | None = None,
) -> bool:
    """The prune rule: not archived, not protected, learned here at least a day ago,
    retention < 0.02. Age counts from when the store learned the memory, never from the date
    it happened: a note dated 2023 imported today is a day old tomorrow."""
    policy = policy or ForgettingPolicy()
    if archived or protection(type, importance, status, policy) is not None:
        return False
    if (now - learned_at).total_seconds() < policy.min_age_hours * 3600:
        return False
    return retention(last_accessed_at, strength, now, policy.tau_hours) < policy.prune_below


class Prunable(Protocol):
    """What the prune rule reads of a memory: a stored Memory or reflection's Node."""

    @property
    def type(self) -> MemoryType | str: ...
    @property
    def importance(self) -> float: ...
    @property
    def prune_status(self) -> str | None: ...
    @property
    def archived(self) -> bool: ...
    @property
    def learned_at(self) -> datetime: ...
    @property
    def last_accessed_at(self) -> datetime: ...
    @property
    def strength(self) -> int: ...


def prunable(row: Prunable, now: datetime, policy: ForgettingPolicy | None = None) -> bool:
    """`should_prune` of a memory as it is: the planner and the step that applies its plan
    ask the same question of different row types."""
    return should_prune(
        type=row.type,
        importance=row.importance,
        status=row.prune_status,
        archived=row.archived,
        learned_at=row.learned_at,
        last_accessed_at=row.last_accessed_at,
        strength=row.strength,
        now=now,
        policy=policy,
    )
