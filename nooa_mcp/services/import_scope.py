"""An import stays inside the importer's scope: the ids a file carries and its edge ends.

An export line carries its memory's id, so that `export | import` into another store keeps
the ids (and the edges between them). In a store shared by several roles that id may already
name a memory:

- one of the importer's own memories with the same type and content: the line is that memory
  again (`exists`), and its edges are the importer's to add;
- one of the importer's own memories with other content or another type: the import is
  refused before anything is written, naming the line (silently keeping the stored memory
  would drop what the line says);
- any other memory (another role's, or a shared one the importer may read but not write):
  it is not the importer's, so the line is stored as a new memory under a fresh id, and the
  file's edges to the old id follow it. Another owner's memory is never reported `exists`,
  and no edge is attached to it.

Edge targets resolve among the memories the importer may link to, as the tools resolve a
link's target (its own role and shared memories): an edge to another role's memory is not
added, whatever its relation. Edges that are not added are named, line by line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..domain.imports import LineEdge
from ..domain.inputs import check_content, parse_memory_type
from ..domain.schema import content_hash, new_id
from ..errors import AmbiguousId, InvalidInput, NotFound
from .caller import Caller

__all__ = ["attach_edges", "claim_ids"]

#: Ids looked up per store round trip.
_PAGE = 500


async def claim_ids(
    caller: Caller, lines: Sequence[int], specs: list[dict[str, Any]]
) -> dict[str, str]:
    """Decide what each line's id means here; give lines whose id another owner holds a
    fresh id (in `specs`, in place). Returns the ids so replaced: file id → new id.

    Raises:
        InvalidInput: a line's id names one of the importer's memories with other content or
            another type, or two lines carry one id with different content ("line N: ...";
            nothing was written).
    """
    named: dict[str, tuple[int, str, str]] = {}
    for line, spec in zip(lines, specs, strict=True):
        ident = spec.get("id")
        if ident is None:
            continue
        ident = ident.lower()
        spec["id"] = ident
        kind = parse_memory_type(spec.get("type") or "info").value
        said = (kind, content_hash(check_content(spec.get("content"))))
        first = named.get(ident)
        if first is not None and first[1:] != said:
            raise _refused(line, ident, f"line {first[0]} carries it too, with other content")
        named.setdefault(ident, (line, *said))
    if not named:
        return {}
    ids = list(named)
    owners: dict[str, str] = {}
    for start in range(0, len(ids), _PAGE):
        owners |= await caller.store.owners_of(ids[start : start + _PAGE])
    mine = [i for i, owner in owners.items() if caller.may_write(owner)]
    stored: dict[str, Any] = {}
    for start in range(0, len(mine), _PAGE):
        stored |= await caller.store.fetch_many(mine[start : start + _PAGE])
    for ident in mine:
        memory = stored.get(ident)
        line, kind, digest = named[ident]
        if memory is not None and (memory.type.value, memory.content_hash) != (kind, digest):
            raise _refused(line, ident, "it is one of your memories already, with other content")
    renamed = {i: new_id() for i in owners if i not in mine}
    for spec in specs:
        if spec.get("id") in renamed:
            spec["id"] = renamed[spec["id"]]
    return renamed


def _refused(line: int, ident: str, why: str) -> InvalidInput:
    return InvalidInput(
        f"line {line}",
        f"id {ident}: {why}.",
        "Nothing was imported. Drop the line's id to import it as a new memory, or drop the line.",
    )


async def attach_edges(
    caller: Caller, edges: Sequence[tuple[str, int, LineEdge]], renamed: dict[str, str]
) -> tuple[int, list[str]]:
    """Add each (source memory, line, edge) whose target resolves in the importer's scope,
    following ids the import replaced. Returns how many were added and, per edge not
    added, one sentence naming its line."""
    added, skipped = 0, []
    scope = caller.actor.own
    async with caller.store.transaction():
        for src, line, edge in edges:
            wanted = renamed.get(edge.target, edge.target)
            try:
                target = await caller.store.resolve_id(wanted, "edges.target", scope)
            except (NotFound, AmbiguousId) as exc:
                why = (
                    "matches several of your memories"
                    if isinstance(exc, AmbiguousId)
                    else ("names no memory you can link to")
                )
                skipped.append(
                    f"line {line}: the {edge.relation.value} edge to {edge.target} was not "
                    f"added: the id {why}."
                )
                continue
            if target == src:
                skipped.append(
                    f"line {line}: the {edge.relation.value} edge to {edge.target} was not "
                    "added: it points at its own memory."
                )
                continue
            await caller.store.add_edge(src, target, edge.relation, edge.weight, edge.created_at)
            added += 1
    return added, skipped
