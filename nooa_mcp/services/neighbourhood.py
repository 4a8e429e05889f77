"""Neighbourhood: the memories linked to one memory within a few hops, either way (DESIGN.md §10).

A link is followed whichever way it points, so a memory that refines this one shows beside
the ones this one refines. Only memories inside the reader's scope appear, and nothing is
logged: looking at links is not a use. A memory another role forgot (or the user, a shared one)
is left out, with its links (`Caller.withdrawn`).
"""

from __future__ import annotations

from ..domain.replies import GraphEdge, MemoryView, Neighbourhood
from ..errors import InvalidInput
from ..storage.base import EdgeRow
from .caller import Caller
from .views import view

__all__ = ["MAX_HOPS", "neighbourhood"]

#: Hops a neighbourhood reaches at most: three already shows most of a small store.
MAX_HOPS = 3


async def neighbourhood(
    caller: Caller,
    memory_id: str,
    *,
    hops: int = 2,
    fanout: int = 8,
    cap: int = 40,
    scope: str = "mine",
) -> Neighbourhood:
    """The memories within `hops` links of one memory, in or out, as the reader may see them.

    Each memory contributes its `fanout` strongest links (ties: the stored order of ids), and
    at most `cap` memories are shown; `truncated` says whether anything was left out. Archived
    memories are shown (their view says so), since a person fixing memory wants to see them.

    Raises:
        NotFound / AmbiguousId: the id does not name one memory in the scope.
        InvalidInput: hops, fanout or cap is out of range.
    """
    if not isinstance(hops, int) or not 1 <= hops <= MAX_HOPS:
        raise InvalidInput("hops", f"{hops!r} is outside 1–{MAX_HOPS}.", f"Use 1–{MAX_HOPS}.")
    if not isinstance(fanout, int) or fanout < 1:
        raise InvalidInput("fanout", f"{fanout!r} is not a positive count.", "Use 1 or more.")
    if not isinstance(cap, int) or cap < 1:
        raise InvalidInput("cap", f"{cap!r} is not a positive count.", "Use 1 or more.")
    scope_obj = caller.scope(scope)
    center = await caller.resolve(memory_id, scope_obj)
    shown = [center]
    seen = {center}
    kept: dict[tuple[str, str, str], EdgeRow] = {}
    rings: list[list[tuple[str, str]]] = []
    truncated = False
    frontier = [center]
    for _ in range(hops):
        around: dict[str, list[EdgeRow]] = {node: [] for node in frontier}
        links = await caller.store.links_of(frontier, scope_obj)
        # What another role forgot is not there for this reader, nor reached through
        # (`Caller.withdrawn`): its words, its id and its links stay out.
        gone = await caller.withdrawn_among(
            end for edge in links for end in (edge.src, edge.dst) if end not in seen
        )
        for edge in links:
            if edge.src in gone or edge.dst in gone:
                continue
            for end in {edge.src, edge.dst}:
                if end in around:
                    around[end].append(edge)
        ring: list[tuple[str, str]] = []
        for node in frontier:
            ranked = sorted(around[node], key=lambda e: (-e.weight, e.src, e.dst, e.type))
            truncated |= len(ranked) > fanout
            for edge in ranked[:fanout]:
                other = edge.dst if edge.src == node else edge.src
                if other not in seen:
                    if len(seen) >= cap:
                        truncated = True
                        continue
                    seen.add(other)
                    shown.append(other)
                    ring.append((other, node))
                kept[(edge.src, edge.dst, edge.type)] = edge
        rings.append(ring)
        frontier = [node for node, _ in ring]
        if not frontier:
            break
    found = await caller.store.fetch_many(shown)
    nodes: dict[str, MemoryView] = {}
    for node in shown:
        if node in found:
            nodes[node] = await view(caller, found[node], scope_obj)
    edges = [
        GraphEdge(src=e.src, dst=e.dst, type=e.type, weight=e.weight)
        for e in kept.values()
        if e.src in nodes and e.dst in nodes
    ]
    rings = [[(n, p) for n, p in ring if n in nodes] for ring in rings]
    return Neighbourhood(center=center, nodes=nodes, edges=edges, rings=rings, truncated=truncated)
