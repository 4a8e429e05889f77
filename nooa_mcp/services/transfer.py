"""Export and import: memories as JSON lines, one memory per line, nothing lost on the way.

An export line carries a memory's fields, its edges and references, its use history (when this
store learned it, its uses and the ring of newest accesses: what ranking and forgetting read),
and — for archived memories — the archive state and every tombstone, so `export
--include-archived | import` brings forgotten memories back *forgotten* (re-authoring one is
still blocked by its tombstone), and a copied store ranks, explains and forgets as its source
did. A line without a history (an older export, plain notes) is learned at its import.
Import validates every line before it writes anything; a bad line is named by its number and
nothing is written. Ids and edge targets resolve only within the importer's scope
(`import_scope`). Each line becomes one memory; an exact repeat of a stored memory is
`exists`, but an export line (an id and a history) is only ever its own memory, so memories
the source kept apart with one text come back apart (DESIGN.md §4.7).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..domain.accesses import history_record
from ..domain.archive import reason_fades
from ..domain.imports import LineEdge, carried, check_line, line_edges
from ..domain.inputs import build_memory
from ..domain.requests import AuthorRequest, request_of
from ..domain.schema import as_utc, now as utc_now
from ..errors import InvalidInput
from .authoring import author_many
from .caller import Caller
from .import_scope import attach_edges, claim_ids
from .views import view

__all__ = ["IMPORT_FIELDS", "Imported", "export_records", "import_records", "import_spec"]

#: The fields of a memory an export writes and an import reads back.
IMPORT_FIELDS = (
    "id",
    "content",
    "type",
    "title",
    "importance",
    "salience",
    "confidence",
    "tags",
    "entities",
    "place_or_task",
    "created_at",
    "valid_from",
    "valid_to",
    "status",
    "trigger",
    "references",
)
BATCH = 256

Tick = Callable[[int], Awaitable[None] | None]


def import_spec(item: dict[str, Any]) -> dict[str, Any]:
    """The author request of one export line (the fields authoring accepts)."""
    spec = {k: item[k] for k in IMPORT_FIELDS if item.get(k) is not None}
    if isinstance(spec.get("trigger"), dict):
        spec["trigger"] = {
            k: v for k, v in spec["trigger"].items() if k in ("fire_at", "cue", "every_hours")
        }
    if isinstance(spec.get("references"), list):
        spec["references"] = [
            r["uri"] if isinstance(r, dict) and "uri" in r else r for r in spec["references"]
        ]
    return spec


def _check(item: Any, line: int, owner: str) -> dict[str, Any]:
    """Validate one line; the error names the line and the field."""
    if not isinstance(item, dict):
        raise InvalidInput(f"line {line}", "is not a JSON object.", "Nothing was imported.")
    try:
        build_memory(request_of(AuthorRequest, import_spec(item)), owner)
        check_line(item)
    except InvalidInput as exc:
        raise InvalidInput(
            f"line {line}", f"{exc.field}: {exc.problem}", "Nothing was imported."
        ) from None
    return item


@dataclass
class Imported:
    """What an import did: counts by outcome (and edges, archived), each line's memory id,
    and one sentence per edge that was not added (its line, target and why)."""

    counts: dict[str, int] = field(default_factory=dict)
    ids: list[str] = field(default_factory=list)
    skipped_edges: list[str] = field(default_factory=list)


async def import_records(
    caller: Caller, items: Sequence[tuple[int, Any]], tick: Tick | None = None
) -> Imported:
    """Import (line number, decoded JSON) items, in order.

    Raises:
        InvalidInput: a line is malformed ("line N: ..."); nothing was written.
    """
    checked = [(line, _check(item, line, caller.owner)) for line, item in items]
    specs = [import_spec(item) for _, item in checked]
    renamed = await claim_ids(caller, [line for line, _ in checked], specs)
    report = Imported()
    counts = report.counts
    edges: list[tuple[str, int, LineEdge]] = []
    archived: list[tuple[str, dict[str, Any]]] = []
    for start in range(0, len(checked), BATCH):
        chunk = checked[start : start + BATCH]
        results = await author_many(
            caller,
            [request_of(AuthorRequest, spec) for spec in specs[start : start + BATCH]],
            remind=False,
            carried=[carried(item) for _, item in chunk],
        )
        for (line, item), result in zip(chunk, results, strict=True):
            report.ids.append(result.id)
            counts[result.status] = counts.get(result.status, 0) + 1
            edges += [(result.id, line, e) for e in line_edges(item)]
            if item.get("archived") and result.status == "created":
                archived.append((result.id, item))
        if tick is not None:
            done = tick(len(chunk))
            if done is not None:
                await done
    counts["edges"], report.skipped_edges = await attach_edges(caller, edges, renamed)
    if report.skipped_edges:
        counts["edges_skipped"] = len(report.skipped_edges)
    if renamed:
        counts["new_ids"] = len(renamed)
    if archived:
        counts["archived"] = await _restore_archived(caller, archived)
    return report


async def _restore_archived(caller: Caller, items: list[tuple[str, dict[str, Any]]]) -> int:
    """Archive imported memories again, with the tombstones they were exported with."""
    async with caller.store.transaction():
        for memory_id, item in items:
            stones = item.get("tombstones") or [{"reason": "archived before export"}]
            when: datetime = utc_now()
            for stone in stones:
                when = as_utc(stone.get("ts"), "tombstones.ts") or utc_now()
                await caller.store.add_tombstone(memory_id, stone["reason"], when)
                lifted = as_utc(stone.get("lifted_at"), "tombstones.lifted_at")
                if lifted is not None:
                    await caller.store.lift_tombstones(memory_id, lifted)
            # Faded (maintenance archived it) or forgotten (its user did), as the exporting
            # store said by the standing tombstone's reason (`domain.archive`).
            standing = [s["reason"] for s in stones if not s.get("lifted_at")]
            faded = bool(standing) and reason_fades(standing[-1])
            await caller.store.set_archived(memory_id, True, when, faded=faded)
    caller.index.mark_dirty()
    return len(items)


async def export_records(caller: Caller, *, include_archived: bool = False) -> AsyncIterator[dict]:
    """Every memory of the caller's scope as an export record, in insertion order."""
    await caller.engine.flush()  # with the accesses of recalls already answered
    scope = caller.scope("mine")
    after = None
    while True:
        page = await caller.store.list_memories(
            scope, archived=None if include_archived else False, after_seq=after, limit=500
        )
        if not page:
            return
        stones = await caller.store.all_tombstones([m.id for m in page if m.archived])
        for memory in page:
            after = memory.seq
            shown = await view(caller, memory, scope, edge_limit=None)
            record = shown.model_dump(mode="json", include={*IMPORT_FIELDS, "owner", "archived"})
            record["edges"] = [
                {k: e[k] for k in ("target", "type", "weight", "created_at")} for e in shown.edges
            ]
            record["references"] = [r.uri for r in memory.references]
            record["authored_importance"] = memory.authored
            record["history"] = history_record(memory)
            if memory.archived:
                record["tombstones"] = [
                    {
                        "reason": t.reason,
                        "ts": t.ts.isoformat(),
                        "lifted_at": t.lifted_at.isoformat() if t.lifted_at else None,
                    }
                    for t in stones.get(memory.id, [])
                ]
            yield record
