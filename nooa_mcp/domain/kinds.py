"""The names of the NOOA model: kinds of memory, relations, channels, steps (DESIGN.md §2, §3).

Plain enums and tuples, apart from the pydantic models in `schema` (which re-exports them):
the configuration, the command line and the forgetting rules need the names at start-up,
and a stdio server's start-up is what a client waits for.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal


class MemoryType(StrEnum):
    """The seven kinds of memory (DESIGN.md §2.2)."""

    info = "info"
    skill = "skill"
    episode = "episode"
    intent = "intent"
    todo = "todo"
    reflection = "reflection"
    scratch = "scratch"


class EdgeType(StrEnum):
    """The ten typed relations between memories (DESIGN.md §2.3)."""

    derived_from = "derived_from"
    created_by = "created_by"
    causes = "causes"
    refines = "refines"
    supports = "supports"
    contradicts = "contradicts"
    related = "related"
    precedes = "precedes"
    part_of = "part_of"
    triggers = "triggers"


#: Traversal weight of each relation: causal ones carry full activation, the rest 0.6.
TYPE_WEIGHT: dict[EdgeType, float] = {
    EdgeType.derived_from: 1.0,
    EdgeType.created_by: 1.0,
    EdgeType.causes: 1.0,
    EdgeType.refines: 1.0,
    EdgeType.supports: 0.6,
    EdgeType.contradicts: 0.6,
    EdgeType.related: 0.6,
    EdgeType.precedes: 0.6,
    EdgeType.part_of: 0.6,
    EdgeType.triggers: 0.6,
}

#: Relations by which a newer memory replaces an older one (DESIGN.md §5.7).
SUPERSEDING: frozenset[EdgeType] = frozenset({EdgeType.refines, EdgeType.contradicts})


class Channel(StrEnum):
    """How a memory was reached (DESIGN.md §3.1)."""

    created = "created"
    recalled = "recalled"
    searched = "searched"
    injected = "injected"
    reinforced = "reinforced"
    deref = "deref"
    reflected = "reflected"
    shown = "shown"


#: Channels that count toward ACT-R base-level. Injected and reflected never do: what the
#: server chose to show must not distort what the agent used.
ACTR_CHANNELS: frozenset[Channel] = frozenset(
    {Channel.created, Channel.recalled, Channel.searched, Channel.reinforced, Channel.deref}
)
#: Channels that touch a memory: last_accessed, access_count and strength + 1.
TOUCH_CHANNELS: frozenset[Channel] = frozenset(
    {Channel.recalled, Channel.searched, Channel.reinforced, Channel.deref}
)

TodoStatus = Literal["open", "done", "dropped"]
#: The lists of values every front end offers (tool Literals, click choices) come from here.
TODO_STATUSES: tuple[str, ...] = ("open", "done", "dropped")
MEMORY_TYPES: tuple[str, ...] = tuple(t.value for t in MemoryType)
EDGE_TYPES: tuple[str, ...] = tuple(e.value for e in EdgeType)
#: Reflection steps in the order a pass runs them (DESIGN.md §8.1).
REFLECTION_STEPS: tuple[str, ...] = ("merge", "reconcile", "link", "rescore", "abstract", "prune")
TODO_ACTIONS: tuple[str, ...] = ("add", "list", "done", "drop", "reopen")
INTENT_ACTIONS: tuple[str, ...] = ("add", "list", "check", "cancel")
#: What the maintenance log holds: reflection passes and fired intents.
MAINTENANCE_KINDS: tuple[str, ...] = ("reflection", "intent")
