"""Export and import: memories as JSON lines, one memory per line, nothing lost on the way.

An export line carries a memory's fields, its edges and references, its use history (when this
store learned it, its uses: what ranking and forgetting read; and every access the store kept,
so explain replays the whole history; what a line has no room for follows it on
`accesses_of` lines),
and — for archived memories — the archive state and every tombstone, so `export
--include-archived | import` brings forgotten memories back *forgotten* (re-authoring one is
still blocked by its tombstone), and a copied store ranks, explains and forgets as its source
did. A line without a history (an older export, plain notes) is learned at its import. After
the memories comes the role's maintenance log (`maintenance` lines), so the copy's stats and
log say what the source's did.
Import validates every line before it writes anything; a bad line is named by its number and
nothing is written, and a key no export writes (`LINE_FIELDS`) is refused by name, never
dropped. Two lines with one id that differ are refused, naming both; a line that repeats an
earlier one word for word is counted once (`repeated_lines`). Ids and edge targets resolve
only within the importer's scope
(`import_scope`). Each line becomes one memory; an exact repeat of a stored memory is
`exists`, but an export line (an id and a history) is only ever its own memory, so memories
the source kept apart with one text come back apart (DESIGN.md §4.7). A line with an id folded
into a memory stored under another id is folded once (`folded`; run again, `already_folded`).
"""

from __future__ import annotations

import bisect
import difflib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import Any

from ..domain.accesses import History, access_record, history_record
from ..domain.archive import id8s, renamed_reason
from ..domain.imports import (
    MAX_HISTORY_TIMES,
    Carried,
    LineEdge,
    Stone,
    carried,
    check_line,
    line_edges,
    older_accesses,
)
from ..domain.inputs import build_memory
from ..domain.references import memory_targets
from ..domain.requests import AuthorRequest, request_of
from ..domain.schema import Edge, Memory, Trigger, as_utc, now as utc_now
from ..domain.scope import OTHER_READER, owner_role
from ..domain.text import holds_unstorable, without_unstorable
from ..errors import InvalidInput, NooaError
from .authoring import author_many
from .caller import Caller
from .import_scope import attach_edges, attach_edges_here, claim_ids
from .transactions import in_transaction
from .views import redact, view

__all__ = [
    "IMPORT_FIELDS",
    "LINE_FIELDS",
    "OLDER_FIELDS",
    "CheckedFile",
    "Imported",
    "check_records",
    "export_records",
    "import_records",
    "import_spec",
]

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
#: Every key an export line may carry: the author request's fields and what `export_records`
#: writes beside them (what `check_line` and `carried` read). Any other key is refused by
#: name: a misspelled field dropped without a word would lose what its user wrote.
LINE_FIELDS = (
    *IMPORT_FIELDS,
    "owner",
    "archived",
    "faded",
    "edges",
    "authored_importance",
    "history",
    "tombstones",
)
#: The keys of a line's `trigger` (what the export writes of an intent's `Trigger`).
TRIGGER_FIELDS = tuple(Trigger.model_fields)
#: The keys of a line's `history` (`accesses.history_record` writes a `History`'s fields).
HISTORY_FIELDS = tuple(f.name for f in fields(History))
#: The keys of each entry of a line's lists of objects, as `export_records` writes them.
NESTED_FIELDS = {
    "edges": tuple(Edge.model_fields),
    "tombstones": tuple(f.name for f in fields(Stone) if f.name != "dated"),
    "references": ("uri", "preview", "captured_at", "root"),
}
#: The keys of an `accesses_of` line (more of a memory's accesses than fit on its own line).
OLDER_FIELDS = ("accesses_of", "accesses")
#: The keys of a `maintenance` line: one entry of the exporting role's maintenance log (a
#: reflection pass and what it did, an intent that fired), so a copy's log, and the stats
#: counted from it, say what its source's did.
LOG_FIELDS = ("maintenance", "ts", "report")
#: Every entry of a role's log (`maintenance_entries` takes a bound).
_WHOLE_LOG = 1_000_000_000
#: The kinds of entry the log keeps (a reflection pass, an intent that fired).
LOG_KINDS = ("reflection", "intent")
#: How deep a report may nest (a pass's nests four levels).
_LOG_DEPTH = 16
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


def _refused_line(line: int, exc: NooaError, written_before: int | None = None) -> InvalidInput:
    """The line's refusal: its field, the problem, the fix (a file names the types there are,
    as a tool does; before, the fix was dropped: "type: 'note' is not a memory type."), and
    that nothing was imported, or, for a line refused where it meets what is stored in a batch
    after the first (`written_before`: that batch's first line), which lines were: each batch
    is its own transaction, and "Nothing was imported" was said with 256 lines written."""
    done = "Nothing was imported."
    if written_before is not None:
        done = (
            f"The lines before line {written_before} were imported, none from it on: "
            f"run the same import again once line {line} is fixed to add the rest."
        )
    if not isinstance(exc, InvalidInput):  # not found, read-only: the message says it all
        return InvalidInput(f"line {line}", str(exc), done)
    return InvalidInput(f"line {line}", f"{exc.field}: {exc.problem}", f"{exc.fix} {done}".strip())


def _short(value: Any) -> str:
    """A value as a refusal quotes it: as JSON, as the line wrote it, cut short."""
    shown = json.dumps(value, ensure_ascii=False)
    return shown if len(shown) <= 40 else shown[:39] + "…"


def _name(key: str) -> str:
    """A key as a refusal names it: as written when it is short and printable."""
    return key if len(key) <= 40 and key.isprintable() else _short(key)


def _check_keys(item: dict[str, Any], fields: Sequence[str], kind: str, at: str = "") -> None:
    """Refuse a key the line's kind does not have, naming it and the field it most
    resembles (else the fields there are).

    Raises:
        InvalidInput: the first unknown key is named (and how many more the line has).
    """
    unknown = [key for key in item if key not in fields]
    if not unknown:
        return
    by_lower = {f.lower(): f for f in fields}

    def meant(key: str) -> str | None:
        # A key of megabytes is no misspelling: compare its start only.
        close = difflib.get_close_matches(key[:64].lower(), list(by_lower), n=1, cutoff=0.6)
        return by_lower[close[0]] if close else None

    key = unknown[0]
    fix = f"Did you mean {meant(key)}?" if meant(key) else f"Use only {', '.join(fields)}."
    if len(unknown) > 1:
        also = [at + _name(k) + (f" ({meant(k)}?)" if meant(k) else "") for k in unknown[1:4]]
        more = "" if len(unknown) <= 4 else f" and {len(unknown) - 4} more"
        fix += f" Also not fields: {', '.join(also)}{more}."
    raise InvalidInput(at + _name(key), f"is not a field of {kind}. {fix}")


def _split_older(
    items: Sequence[tuple[int, Any]],
) -> tuple[list[tuple[int, Any]], dict[str, list[tuple[int, tuple[Any, ...]]]]]:
    """The memory lines, and the `accesses_of` lines by the id they name (with line numbers)."""
    memories: list[tuple[int, Any]] = []
    older: dict[str, list[tuple[int, tuple[Any, ...]]]] = {}
    for line, item in items:
        try:
            more = older_accesses(item) if isinstance(item, dict) else None
            if more is not None:
                _check_keys(item, OLDER_FIELDS, "an accesses_of line")
        except InvalidInput as exc:
            raise _refused_line(line, exc) from None
        if more is None:
            memories.append((line, item))
        else:
            older.setdefault(more[0], []).append((line, more[1]))
    return memories, older


def _with_older(found: Carried, older: list[tuple[int, tuple[Any, ...]]] | None) -> Carried:
    """A line's carried history with the accesses its `accesses_of` lines add."""
    if not older or found.history is None:
        return found
    accesses = tuple(a for _, chunk in older for a in chunk) + found.history.accesses
    return replace(found, history=replace(found.history, accesses=accesses))


def _check(item: Any, line: int, owner: str) -> dict[str, Any]:
    """Validate one line; the error names the line and the field."""
    if not isinstance(item, dict):
        raise InvalidInput(f"line {line}", "is not a JSON object.", "Nothing was imported.")
    try:
        _check_keys(item, LINE_FIELDS, "an export line")
        if isinstance(item.get("trigger"), dict):
            _check_keys(item["trigger"], TRIGGER_FIELDS, "a trigger", "trigger.")
        if isinstance(item.get("history"), dict):
            _check_keys(item["history"], HISTORY_FIELDS, "a line's history", "history.")
        for key, fields in NESTED_FIELDS.items():
            entries = item.get(key)
            for entry in entries if isinstance(entries, list) else ():
                if isinstance(entry, dict):
                    _check_keys(entry, fields, f"one of a line's {key}", f"{key}.")
        content = item.get("content")
        if content is not None and not isinstance(content, str):
            raise InvalidInput(
                "content",
                f"{_short(content)} is not text. Pass the memory's text as a JSON string.",
            )
        build_memory(request_of(AuthorRequest, import_spec(item)), owner)
        check_line(item)
    except InvalidInput as exc:
        raise _refused_line(line, exc) from None
    return item


@dataclass
class Imported:
    """What an import did: counts by outcome (and edges, archived, and `from_other_owners`:
    lines the file gave another owner, stored as the importer's), each line's memory id, and
    one sentence per edge that was not added (its line, target and why)."""

    counts: dict[str, int] = field(default_factory=dict)
    ids: list[str] = field(default_factory=list)
    skipped_edges: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class CheckedFile:
    """A file `check_records` accepted: its memory lines (line number, item) and its
    `accesses_of` lines by the id they name. `import_records` takes it as it is, so a command
    that checked a file before opening the store does not check every line twice."""

    lines: list[tuple[int, dict[str, Any]]]
    older: dict[str, list[tuple[int, tuple[Any, ...]]]]
    #: The maintenance lines: (kind, time, report), in the file's order.
    log: list[tuple[str, datetime, dict[str, Any]]] = field(default_factory=list)
    #: Memory lines left out as a repeat, word for word, of an earlier line with their id.
    repeated: int = 0


def _line_id(item: dict[str, Any]) -> str | None:
    """A line's memory id as the store keys it (ids are lower-case hex), or None."""
    ident = item.get("id")
    return ident.strip().lower() if isinstance(ident, str) else None


def check_records(items: Sequence[tuple[int, Any]], owner: str) -> CheckedFile:
    """Check every (line number, decoded JSON) item without touching a store, so a command
    can refuse a file before it opens (or creates) one: the memory lines, and the
    `accesses_of` lines by the id they name.

    Raises:
        InvalidInput: a line is malformed ("line N: ..."), or an `accesses_of` line names no
            memory line of the file that carries a history.
    """
    log = [
        _check_log(item, line)
        for line, item in items
        if isinstance(item, dict) and "maintenance" in item
    ]
    lines, older = _split_older(
        [
            (line, item)
            for line, item in items
            if not (isinstance(item, dict) and "maintenance" in item)
        ]
    )
    checked, repeated = _once_per_id([(line, _check(item, line, owner)) for line, item in lines])
    with_history = {_line_id(item) for _, item in checked if item.get("history") is not None} - {
        None
    }
    for target, found in older.items():
        if target not in with_history:
            raise _refused_line(
                found[0][0],
                InvalidInput(
                    "accesses_of", f"{target} names no line of this file that carries a history."
                ),
            )
    return CheckedFile(checked, older, log, repeated)


def _once_per_id(
    checked: list[tuple[int, dict[str, Any]]],
) -> tuple[list[tuple[int, dict[str, Any]]], int]:
    """The memory lines with each id once, and how many lines were left out: a line that
    repeats an earlier one with its id word for word says nothing more.

    Raises:
        InvalidInput: two lines carry one id and differ: which one the user meant is not the
            import's to guess (applied in order, the later one silently overwrote the earlier
            one's tags, state or edges), so the file is refused before anything is written.
    """
    first: dict[str, tuple[int, dict[str, Any]]] = {}
    out: list[tuple[int, dict[str, Any]]] = []
    for line, item in checked:
        ident = _line_id(item)
        seen = None if ident is None else first.get(ident)
        if seen is None:
            if ident is not None:
                first[ident] = (line, item)
            out.append((line, item))
        elif seen[1] != item:
            raise InvalidInput(
                f"line {line}",
                f"carries id {ident}, which line {seen[0]} carries too, and the two lines differ.",
                "Nothing was imported. Keep the one you mean, or drop one line's id to import it "
                "as a memory of its own.",
            )
    return out, len(checked) - len(out)


def _check_log(item: dict[str, Any], line: int) -> tuple[str, datetime, dict[str, Any]]:
    """One maintenance line as (kind, time, report); the error names the line and the key.

    Checked as a memory line is, before the store is opened: a kind the log keeps, a time
    (one ahead of this clock counts as now), and a report of JSON a store can hold (no NUL,
    no lone surrogate, nested at most `_LOG_DEPTH` deep): PostgreSQL refused such a report
    only when a later read parsed every row's, and then every role's stats and export
    failed.
    """
    try:
        _check_keys(item, LOG_FIELDS, "a maintenance line")
        kind = item.get("maintenance")
        if kind not in LOG_KINDS:
            raise InvalidInput(
                "maintenance",
                f"{_short(kind)} is not a kind of entry.",
                f"Use one of {', '.join(LOG_KINDS)}, as the export wrote it.",
            )
        ts = as_utc(item.get("ts"), "ts")
        if ts is None:
            raise InvalidInput("ts", "is missing.", "Write when the entry was made (ISO 8601).")
        # A time ahead of this clock (another machine's, skewed) counts as now, as a line's
        # created_at does: never later than the entries this store makes next.
        ts = min(ts, utc_now())
        report = item.get("report")
        if not isinstance(report, dict):
            raise InvalidInput(
                "report", f"{_short(report)} is not a JSON object.", "Write the entry's report."
            )
        if _depth(report, _LOG_DEPTH) > _LOG_DEPTH:
            raise InvalidInput(
                "report", f"is nested more than {_LOG_DEPTH} deep.", "Write the entry's report."
            )
        if holds_unstorable(report):
            raise InvalidInput(
                "report",
                "contains a NUL byte or a lone surrogate, which no store holds.",
                "Remove it (an export writes U+FFFD in its place).",
            )
    except InvalidInput as exc:
        raise _refused_line(line, exc) from None
    return kind, ts, report


def _depth(value: Any, limit: int) -> int:
    """How deep `value` nests lists and objects, counted up to `limit` + 1 (no deeper)."""
    if limit < 0 or not isinstance(value, dict | list):
        return 0
    items = value.values() if isinstance(value, dict) else value
    return 1 + max((_depth(v, limit - 1) for v in items), default=0)


async def import_records(
    caller: Caller, items: Sequence[tuple[int, Any]] | CheckedFile, tick: Tick | None = None
) -> Imported:
    """Import (line number, decoded JSON) items, in order (or a file `check_records` has
    checked already).

    Raises:
        InvalidInput: a line is malformed ("line N: ..."); nothing was written.
    """
    file = items if isinstance(items, CheckedFile) else check_records(items, caller.owner)
    checked, older = file.lines, file.older
    specs = [import_spec(item) for _, item in checked]
    claimed = await claim_ids(caller, [line for line, _ in checked], specs)
    renamed = claimed.renamed
    report = Imported()
    counts = report.counts
    edges: list[tuple[str, int, LineEdge]] = []
    now = utc_now()
    prefixes = id8s(renamed)
    shared = {specs[at]["id"] for at in claimed.shared_at}
    # What the file keeps live: a forgotten line's merged duplicate here among them stays.
    kept = frozenset(
        spec["id"]
        for spec, (_, item) in zip(specs, checked, strict=True)
        if spec.get("id") and not item.get("archived")
    )
    folded: dict[str, str] = {}
    # Each batch's edges are attached in the transaction that writes it, but for those whose
    # target may name a line not written yet (they wait for it): an import cut short (killed,
    # a lost connection) keeps every edge between the memories it wrote, and a correction
    # stored keeps its link to what it corrects. Running the import again completes it.
    ahead = _LinesAhead(checked, specs)
    added = 0
    for start in range(0, len(checked), BATCH):
        batch = list(enumerate(checked[start : start + BATCH], start))
        end = start + len(batch)
        # A line that says a shared memory again is that memory: nothing to write.
        written = [(at, line, item) for at, (line, item) in batch if at not in claimed.shared_at]
        restores = [
            _renamed(replace(carried(item, now), kept=kept), renamed, prefixes)
            for _, _, item in written
        ]
        attached: list[tuple[int, list[str], list[tuple[str, int, LineEdge]]]] = []

        async def attach_batch(
            results: list[Any],
            batch: Any = batch,
            end: int = end,
            pending: list[tuple[str, int, LineEdge]] = edges,
            out: list[Any] = attached,
        ) -> None:
            """In the batch's transaction (each attempt of it): the edges ready now."""
            mine, more = _batch_edges(batch, claimed.shared_at, specs, results, renamed)
            ready: list[tuple[str, int, LineEdge]] = []
            wait: list[tuple[str, int, LineEdge]] = []
            for edge in [*pending, *mine]:
                (wait if ahead.names(edge[2].target, end) else ready).append(edge)
            done = await attach_edges_here(caller, ready, {**renamed, **folded, **more}, shared)
            out[:] = [(*done, wait)]

        try:
            results = await author_many(
                caller,
                [request_of(AuthorRequest, specs[at]) for at, _, _ in written],
                remind=False,
                carried=[
                    _with_older(found, older.get(_line_id(item) or ""))
                    for found, (_, _, item) in zip(restores, written, strict=True)
                ],
                then=attach_batch,
            )
        except NooaError as exc:
            # A line refused only where it meets what is stored (a repeat past a memory's
            # bounds, a `memory:` reference not found or read-only) names its line, as a line
            # refused on reading does.
            if exc.item is None:
                raise
            # The batches before this one are written (each its own transaction).
            before = checked[start][0] if start else None
            raise _refused_line(written[exc.item][1], exc, before) from None
        mine, more = _batch_edges(batch, claimed.shared_at, specs, results, renamed)
        folded.update(more)
        if attached:
            n, skipped, edges = attached[0]
            added += n
            report.skipped_edges += skipped
        else:  # nothing written in this batch: its edges wait for the next one, or the end
            edges += mine
        outcomes = iter(zip(results, restores, strict=True))
        for at, (_, item) in batch:
            if at in claimed.shared_at:
                report.ids.append(specs[at]["id"])
                counts["exists"] = counts.get("exists", 0) + 1
                continue
            result, found = next(outcomes)
            report.ids.append(result.id)
            counts[result.status] = counts.get(result.status, 0) + 1
            if found.archive is not None and result.status == "created":
                counts["archived"] = counts.get("archived", 0) + 1
            elif result.status == "exists" and result.tombstone is not None:
                # A memory stored here already that the file says its user forgot since.
                counts["forgotten"] = counts.get("forgotten", 0) + 1
            said_id = _line_id(item)
            if result.folded_before:
                # Folded into a memory stored under another id by an earlier import.
                counts["already_folded"] = counts.get("already_folded", 0) + 1
            elif result.status in ("exists", "revived") and result.id != renamed.get(
                said_id or "", said_id
            ):
                # Said again by a memory stored here under another id: it was reinforced.
                counts["folded"] = counts.get("folded", 0) + 1
            # The file's owner is not configuration: what it names as another owner's (a
            # shared memory, another role's) is the importer's now, and the report says so.
            said = item.get("owner")
            if result.status == "created" and isinstance(said, str) and said != caller.owner:
                counts["from_other_owners"] = counts.get("from_other_owners", 0) + 1
        if tick is not None:
            done = tick(len(batch))
            if done is not None:
                await done
    if older and tick is not None:
        done = tick(sum(len(found) for found in older.values()))
        if done is not None:
            await done
    last, skipped = await attach_edges(caller, edges, {**renamed, **folded}, shared)
    counts["edges"] = added + last
    report.skipped_edges += skipped
    if report.skipped_edges:
        counts["edges_skipped"] = len(report.skipped_edges)
    if file.log:
        counts["maintenance"] = await _restore_log(caller, file.log, renamed)
    if renamed:
        counts["new_ids"] = len(renamed)
    if file.repeated:
        counts["repeated_lines"] = file.repeated
    return report


def _batch_edges(
    batch: Sequence[tuple[int, tuple[int, dict[str, Any]]]],
    shared_at: Collection[int],
    specs: list[dict[str, Any]],
    results: Sequence[Any],
    renamed: dict[str, str],
) -> tuple[list[tuple[str, int, LineEdge]], dict[str, str]]:
    """A written batch's edges (source memory, line, edge), and the lines of it folded into a
    memory stored already (an exact repeat, a plain note said again), which live on in it:
    an edge of the file to the line's id goes there. `results` are the written lines' (those
    not saying a shared memory again, `shared_at`), in order."""
    edges: list[tuple[str, int, LineEdge]] = []
    folded: dict[str, str] = {}
    outcomes = iter(results)
    for at, (line, item) in batch:
        if at in shared_at:
            src = specs[at]["id"]
        else:
            src = next(outcomes).id
            said = _line_id(item)
            if said and src != renamed.get(said, said):
                folded[said] = src
        edges += [(src, line, e) for e in line_edges(item)]
    return edges, folded


class _LinesAhead:
    """Which edge targets may name a line not written yet: an id (or a prefix of one), as
    the file says it or as it is stored here, of a line at or after a place in the file."""

    def __init__(self, checked: Sequence[tuple[int, dict[str, Any]]], specs: list[dict[str, Any]]):
        last: dict[str, int] = {}
        for at, ((_, item), spec) in enumerate(zip(checked, specs, strict=True)):
            for ident in (_line_id(item), spec.get("id")):
                if ident:
                    last[ident] = at
        self._last = last
        self._keys = sorted(last)

    def names(self, target: str, end: int) -> bool:
        """Whether `target` may name a line at place `end` or later."""
        at = bisect.bisect_left(self._keys, target)
        while at < len(self._keys) and self._keys[at].startswith(target):
            if self._last[self._keys[at]] >= end:
                return True
            at += 1
        return False


async def _restore_log(
    caller: Caller,
    entries: Sequence[tuple[str, datetime, dict[str, Any]]],
    renamed: dict[str, str],
) -> int:
    """Add the file's maintenance entries of the importer's role (another role's passes are
    not its history) that its log does not hold yet, each at its own time: importing a file
    again adds none. An id the import gave a line another (`renamed`) is named as stored here
    where a report holds it whole (an intent's id); prose naming id prefixes is kept as
    written. Returns how many were added."""
    mine = [
        (kind, ts, _renamed_ids(report, renamed))
        for kind, ts, report in entries
        if report.get("role") == caller.role
    ]
    if not mine:
        return 0

    def key(kind: str, ts: datetime, report: dict[str, Any]) -> tuple[str, float, str]:
        return kind, round(ts.timestamp(), 3), json.dumps(report, sort_keys=True, default=str)

    async def attempt() -> int:
        held = {
            key(e.kind, e.ts, e.report)
            for e in await caller.store.maintenance_entries(limit=_WHOLE_LOG, role=caller.role)
        }
        added = 0
        for kind, ts, report in mine:
            if key(kind, ts, report) not in held:
                held.add(key(kind, ts, report))
                await caller.store.log_maintenance(kind, report, ts=ts)
                added += 1
        return added

    return await in_transaction(caller, attempt)


def _renamed_ids(value: Any, renamed: dict[str, str]) -> Any:
    """`value` (a report) with each text that is a whole id `renamed` names replaced."""
    if not renamed:
        return value
    if isinstance(value, str):
        return renamed.get(value, value)
    if isinstance(value, dict):
        return {k: _renamed_ids(v, renamed) for k, v in value.items()}
    if isinstance(value, list):
        return [_renamed_ids(v, renamed) for v in value]
    return value


def _renamed(found: Carried, renamed: dict[str, str], prefixes: dict[str, str]) -> Carried:
    """What a line carries, naming memories by the ids this import gave them (`renamed`: old
    → new id; `prefixes`: the same by their first 8 characters). A duplicate's tombstone
    "merged into <anchor>" must name the anchor as stored here, or forgetting the anchor would
    leave the duplicate answering, and recall would revive it beside the anchor; a `memory:`
    reference's snapshot names the line it points at (its request was renamed by
    `claim_ids`)."""
    if not renamed:
        return found
    stones = found.archive
    if stones:
        stones = tuple(replace(s, reason=renamed_reason(s.reason, prefixes)) for s in stones)
    snapshots = tuple(
        s.model_copy(update={"target": renamed[s.target]})
        if s.kind == "memory" and s.target in renamed
        else s
        for s in found.snapshots
    )
    return replace(found, archive=stones, snapshots=snapshots)


async def export_records(caller: Caller, *, include_archived: bool = False) -> AsyncIterator[dict]:
    """Every memory of the caller's scope that recall can still reach (live and faded) as an
    export record, in insertion order; forgotten ones too with `include_archived`.

    Faded memories go by default: reflection archived them, not their user, and recall still
    answers from them, so a store moved by `export | import` without them lost answers.
    """
    await caller.engine.flush()  # with the accesses of recalls already answered
    scope = caller.scope("mine")
    after = None
    while True:
        page = await caller.store.list_memories(
            scope,
            archived=None,
            after_seq=after,
            limit=500,
            # The user's forgotten shared memories are the user's (`Caller.withdrawn`).
            forgotten_of=caller.role,
        )
        if not page:
            break
        if not include_archived:
            after = page[-1].seq
            page = [m for m in page if not m.archived or m.faded]
        stones = await caller.store.all_tombstones([m.id for m in page if m.archived])
        for memory in page:
            after = memory.seq
            shown = await view(caller, memory, scope, edge_limit=None, successor=False)
            record = shown.model_dump(mode="json", include={*IMPORT_FIELDS, "owner", "archived"})
            record["edges"] = [{k: e[k] for k in NESTED_FIELDS["edges"]} for e in shown.edges]
            # With each preview as it was captured: an import keeps it rather than capture it
            # again (the memory it names may come later in the file, or be archived; a file
            # may be under no root there).
            # A shared memory's reference to one the user forgot (`Caller.withdrawn`) is left
            # out of a role's file, as from its view: its preview is the forgotten words. The
            # role's own references go whole, as its own links do.
            gone = set()
            if owner_role(memory.owner) != caller.role:
                gone = await caller.withdrawn_among(memory_targets(memory.references))
            record["references"] = [
                {
                    "uri": r.uri,
                    "preview": r.preview,
                    "captured_at": r.captured_at.isoformat(),
                    "root": r.root,
                }
                for r in memory.references
                if not (r.kind == "memory" and r.target in gone)
            ]
            record["authored_importance"] = memory.authored
            accesses = await _all_accesses(caller, memory)
            record["history"] = history_record(memory, accesses[-MAX_HISTORY_TIMES:])
            if memory.archived:
                # Who archived it, as the store's flag says: a user's forget may give any
                # reason, one that reads like maintenance's too ("pruned: …").
                record["faded"] = memory.faded
                record["tombstones"] = [
                    {
                        "reason": t.reason,
                        "ts": t.ts.isoformat(),
                        "lifted_at": t.lifted_at.isoformat() if t.lifted_at else None,
                    }
                    for t in stones.get(memory.id, [])
                ]
            # A NUL or a lone surrogate (which stores of earlier releases may hold) becomes
            # U+FFFD: an import refuses a line holding one, and with it the whole file.
            yield without_unstorable(record)
            # What the line has no room for follows it, oldest first, so an import keeps every
            # access the store kept and explain replays the whole history.
            rest = accesses[:-MAX_HISTORY_TIMES]
            for start in range(0, len(rest), MAX_HISTORY_TIMES):
                yield without_unstorable(
                    {
                        "accesses_of": memory.id,
                        "accesses": [
                            access_record(a) for a in rest[start : start + MAX_HISTORY_TIMES]
                        ],
                    }
                )
    # Then the role's maintenance log, oldest first: what reflection did to these memories
    # and which intents fired, as `stats` and `maintenance_log` read it.
    entries = await caller.store.maintenance_entries(limit=_WHOLE_LOG, role=caller.role)
    for entry in reversed(entries):
        yield without_unstorable(
            {"maintenance": entry.kind, "ts": entry.ts.isoformat(), "report": entry.report}
        )


async def _all_accesses(caller: Caller, memory: Memory) -> list[Any]:
    """Every access of one memory the store kept, oldest first, another reader's query left
    out as a reader of the memory's view would see it (`views.redact`). An access by a reader
    of another role than the memory's (and, for a shared memory, than the exporter's) reads
    `OTHER_READER` (redacted or not), so its line says it was another reader's
    (`accesses.access_record`) and names no one; any other reads as the owner's (blank).
    Queries are shown as the exporter's own scope shows them, not its grants': a shared
    memory's reads are never marked, so with `--read '*'` another role's query and the
    user's own (a CLI recall) went into the file as the exporter's reads."""
    shown = caller.actor.own
    # The memory's role's reads, and the exporter's own of a shared memory (which the import
    # makes the importer's), are the owner's: stats counts neither as another role's, and
    # their queries are the importer's to read. No read of a shared memory is marked: every
    # role reads those as its own (stats counts none as another role's), and the shared
    # owner's export, imported first, made the next role's own reads another reader's.
    own = {owner_role(memory.owner), caller.actor.role}
    out: list[Any] = []
    before = None
    while True:
        page = await caller.store.access_stream(memory.id, _STREAM_PAGE, before)
        out += [
            redact(record, shown).model_copy(update={"reader_owner": OTHER_READER})
            if memory.owner and record.reader_owner and owner_role(record.reader_owner) not in own
            else redact(record, shown).model_copy(update={"reader_owner": ""})
            for _, _, record in page
        ]
        if len(page) < _STREAM_PAGE:
            return out[::-1]
        before = page[-1][0]


#: Accesses read from the stream per store round trip.
_STREAM_PAGE = 5000
