"""An import stays inside the importer's scope: the ids a file carries and its edge ends.

An export line carries its memory's id, so that `export | import` into another store keeps
the ids (and the edges between them). In a store shared by several roles that id may already
name a memory:

- one of the importer's own memories with the same type and content: the line is that memory
  again (`exists`), and its edges are the importer's to add;
- one of the importer's own memories with other content or another type: the import is
  refused before anything is written, naming the line (silently keeping the stored memory
  would drop what the line says);
- a shared memory with the same type and content (an export carries the shared memories
  its owner reads, so a file imported back says them again): the line is that memory
  (`exists`); it is not the importer's to link from, so the line's edges are not added;
- any other memory (another role's, or a shared one that says something else): it is not
  the importer's, so the line is stored as the importer's under an id derived from the
  file's id and the importer's role (`derived_id`), and the file's edges to the old id follow
  it. The same file imported again finds those copies (`exists`), never copies them again;
  a copy edited since is left as it is, and the line stored beside it (under the next id
  derived from the file's, where the import after finds it in turn).
  Another role's memory is never reported `exists`, and no edge is attached to it.

Edge targets resolve among the memories the importer may link to, as the tools resolve a
link's target (its own role and shared memories): an edge to another role's memory is not
added, whatever its relation. Edges that are not added are named, line by line.
"""

from __future__ import annotations

import bisect
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..domain.facts import written_key
from ..domain.imports import LineEdge
from ..domain.inputs import check_content, parse_memory_type
from ..domain.schema import content_hash
from ..errors import AmbiguousId, InvalidInput, NotFound
from .caller import Caller
from .transactions import in_transaction

__all__ = ["Claimed", "attach_edges", "attach_edges_here", "claim_ids", "derived_id"]

#: Ids looked up per store round trip.
_PAGE = 500
#: The namespace of the ids an import derives (`derived_id`).
_DERIVED = uuid.UUID("6f1c2a52-8d0e-4b7a-9c3e-2f5d7e1b4a90")


def derived_id(role: str, file_id: str) -> str:
    """The id `role` stores a copy of another owner's memory `file_id` under: the same on
    every import, so a file imported again finds its copies."""
    return uuid.uuid5(_DERIVED, f"{role}\n{file_id}").hex


@dataclass
class Claimed:
    """What the file's ids mean here (`claim_ids`)."""

    #: File id → the id its line is stored under here (another owner's id).
    renamed: dict[str, str] = field(default_factory=dict)
    #: The lines (by place in the file's memory lines) that say a shared memory again, word
    #: for word: that memory (`exists`), not written.
    shared_at: set[int] = field(default_factory=set)


async def claim_ids(caller: Caller, lines: Sequence[int], specs: list[dict[str, Any]]) -> Claimed:
    """Decide what each line's id means here; give lines whose id another owner holds the
    importer's own id for it (in `specs`, in place).

    Raises:
        InvalidInput: a line's id names one of the importer's memories with other content or
            another type, or two lines carry one id with different content ("line N: ...";
            nothing was written).
    """
    named: dict[str, tuple[Any, ...]] = {}
    for line, spec in zip(lines, specs, strict=True):
        ident = spec.get("id")
        if ident is None:
            continue
        ident = ident.lower()
        spec["id"] = ident
        kind = parse_memory_type(spec.get("type") or "info").value
        content = check_content(spec.get("content"))
        said = (kind, content_hash(content), written_key(content))
        first = named.get(ident)
        if first is not None and first[1:] != said:
            raise _refused(line, ident, f"line {first[0]} carries it too, with other content")
        named.setdefault(ident, (line, *said))
    if not named:
        return Claimed()
    owners = await _owners(caller, list(named))
    mine = [i for i, owner in owners.items() if caller.may_write(owner)]
    stored = await _fetched(caller, [i for i, owner in owners.items() if owner == "" or i in mine])
    for ident in mine:
        if ident in stored and not _says(stored[ident], named[ident]):
            raise _refused(
                named[ident][0], ident, "it is one of your memories already, with other content"
            )
    claimed = Claimed()
    others = [i for i in owners if i not in mine]
    shared = {i for i in others if owners[i] == "" and _says(stored.get(i), named[i])}
    claimed.shared_at = {at for at, spec in enumerate(specs) if spec.get("id") in shared}
    pending = [i for i in others if i not in shared]
    tries = 0
    while pending:
        # The line's copy, or where it goes: the first of its derived ids that is free or
        # holds it. One taken by anything else (the copy edited since) is passed over, so
        # the line is kept beside it, and found there the next time.
        derived = {i: derived_id(caller.role, i if not tries else f"{i}/{tries}") for i in pending}
        held = await _owners(caller, list(derived.values()))
        copies = await _fetched(caller, [d for d, owner in held.items() if caller.may_write(owner)])
        for ident, copy in derived.items():
            if copy not in held or _says(copies.get(copy), named[ident]):
                claimed.renamed[ident] = copy
        pending = [i for i in pending if i not in claimed.renamed]
        tries += 1
    renamed = claimed.renamed
    for spec in specs:
        if spec.get("id") in renamed:
            spec["id"] = renamed[spec["id"]]
        # A `memory:` reference to a line renamed here names it by its new id.
        if renamed and isinstance(spec.get("references"), list):
            spec["references"] = [
                f"memory:{renamed[r[7:]]}"
                if isinstance(r, str) and r.startswith("memory:") and r[7:] in renamed
                else r
                for r in spec["references"]
            ]
    return claimed


async def _owners(caller: Caller, ids: list[str]) -> dict[str, str]:
    owners: dict[str, str] = {}
    for start in range(0, len(ids), _PAGE):
        owners |= await caller.store.owners_of(ids[start : start + _PAGE])
    return owners


async def _fetched(caller: Caller, ids: list[str]) -> dict[str, Any]:
    stored: dict[str, Any] = {}
    for start in range(0, len(ids), _PAGE):
        stored |= await caller.store.fetch_many(ids[start : start + _PAGE])
    return stored


def _says(memory: Any, named: tuple[Any, ...]) -> bool:
    """Whether a stored memory (None: none) has the line's type and content, as written
    (`facts.same_as_written`: "aB3xY9" is not "Ab3Xy9")."""
    return memory is not None and (
        memory.type.value,
        memory.content_hash,
        written_key(memory.content),
    ) == tuple(named[1:])


def _refused(line: int, ident: str, why: str) -> InvalidInput:
    return InvalidInput(
        f"line {line}",
        f"id {ident}: {why}.",
        "Nothing was imported. Drop the line's id to import it as a new memory, or drop the line.",
    )


async def attach_edges(
    caller: Caller,
    edges: Sequence[tuple[str, int, LineEdge]],
    renamed: dict[str, str],
    shared: Collection[str] = (),
) -> tuple[int, list[str]]:
    """Add each (source memory, line, edge) whose target resolves in the importer's scope,
    following ids the import replaced; none from a `shared` source (a shared memory the file
    said again: only the shared owner links from it). Returns how many were added (not an
    edge the store held already, as when a file is imported again, nor one another import
    running at once made first: the store's insert says which, `Store.add_new_edge`) and,
    per edge not added, one sentence naming its line."""

    async def attempt() -> tuple[int, list[str]]:
        return await attach_edges_here(caller, edges, renamed, shared)

    return await in_transaction(caller, attempt)


async def attach_edges_here(
    caller: Caller,
    edges: Sequence[tuple[str, int, LineEdge]],
    renamed: dict[str, str],
    shared: Collection[str] = (),
) -> tuple[int, list[str]]:
    """`attach_edges` inside the caller's transaction (an import's batch attaches the edges
    between memories it has written there, in the transaction that writes them)."""
    scope = caller.actor.own
    keys = sorted(renamed)
    added, skipped = 0, []
    for src, line, edge in edges:
        if src in shared:
            skipped.append(
                _not_added(
                    line,
                    edge,
                    "its memory is a shared one stored already, which only the shared "
                    "owner links from",
                )
            )
            continue
        wanted = _followed(edge.target, renamed, keys)
        try:
            if wanted != edge.target and edge.target not in renamed:
                # A prefix of a line the import renamed or folded: one of the caller's
                # stored memories starting with it too makes it ambiguous.
                await _no_other(caller, edge.target, wanted, scope)
            target = await caller.store.resolve_id(wanted, "edges.target", scope)
        except (NotFound, AmbiguousId) as exc:
            why = (
                "matches several of your memories"
                if isinstance(exc, AmbiguousId)
                else ("names no memory you can link to")
            )
            skipped.append(_not_added(line, edge, f"the id {why}"))
            continue
        if target == src:
            skipped.append(_not_added(line, edge, "it points at its own memory"))
            continue
        added += await caller.store.add_new_edge(
            src, target, edge.relation, edge.weight, edge.created_at
        )
    return added, skipped


def _not_added(line: int, edge: LineEdge, why: str) -> str:
    return f"line {line}: the {edge.relation.value} edge to {edge.target} was not added: {why}."


def _followed(target: str, renamed: dict[str, str], keys: list[str]) -> str:
    """The id an edge's target names after the import: a line's id the import replaced (or
    folded into a stored memory) by its whole id or by a prefix only it starts with; else the
    target as written, which the store resolves."""
    if target in renamed:
        return renamed[target]
    found = set()
    at = bisect.bisect_left(keys, target)
    while at < len(keys) and keys[at].startswith(target):
        found.add(renamed[keys[at]])
        at += 1
    return found.pop() if len(found) == 1 else target


async def _no_other(caller: Caller, prefix: str, followed: str, scope: Any) -> None:
    """Raise AmbiguousId when `prefix` also names a stored memory other than `followed`."""
    try:
        found = await caller.store.resolve_id(prefix, "edges.target", scope)
    except NotFound:
        return
    if found != followed:
        raise AmbiguousId(prefix, [found, followed], "edges.target")
