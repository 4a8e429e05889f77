"""Copy a whole store to another one, across backends (`nooa-mcp migrate SOURCE DEST`).

Every table goes over row for row through the Store's `dump`/`load`: memories with every
field (access ring, counters, authored importance, embeddings, seq), edges, the access stream,
tombstones, the maintenance log and meta. The destination computes its own revisions and
search indexes. The copy is one transaction on the destination: it lands whole or not at all,
and it is undone and run again when the source changed while it was read.

PostgreSQL's text and JSON types cannot hold a NUL character, which an SQLite file written
before such text was refused may hold. Into PostgreSQL, each NUL becomes U+FFFD (the
replacement character) and the row is named in the report: the memory is copied with
everything else it holds, never left out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..domain.schema import content_hash
from ..domain.text import holds_unstorable, without_unstorable
from ..errors import StoreUnavailable
from . import open_store, store_kind
from .base import DUMP_TABLES, Store

__all__ = ["COPY_ATTEMPTS", "PAGE", "CopyReport", "copy_rows", "migrate"]

#: Rows per dump page (a page of memories with embeddings is ~2 MB).
PAGE = 1000


@dataclass
class CopyReport:
    """Rows copied per table, the row counts the destination holds afterwards, and the rows
    copied with a character the destination cannot hold replaced (one line each: table, key
    and which columns)."""

    copied: dict[str, int] = field(default_factory=dict)
    dest_sizes: dict[str, int] = field(default_factory=dict)
    replaced: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.copied.values())


async def copy_rows(
    source: Store,
    dest: Store,
    progress: Callable[[str, int], None] | None = None,
    sizes: Callable[[dict[str, int]], None] | None = None,
    page: int = PAGE,
) -> CopyReport:
    """Copy every row of `source` into the empty store `dest`. `sizes` hears the source's row
    counts before the first row moves, `progress(table, rows)` each page after it lands.

    The source is read a page at a time, table after table, without a lock: a server that
    writes to it meanwhile could leave the copy holding half of a change (a memory live, the
    tombstone that forgot it copied). Its row counts are read before and after: when they
    moved, the destination's transaction is undone and the copy runs again.

    Raises:
        StoreUnavailable: `dest` already holds memories or history, or `source` kept changing
            during every attempt (nothing is written).
    """
    for attempt in range(1, COPY_ATTEMPTS + 1):
        before = await source.table_sizes()
        if sizes is not None and attempt == 1:
            sizes(before)
        report = CopyReport()
        try:
            async with dest.transaction():
                await _refuse_held(dest)
                await _copy(source, dest, report, progress, page)
                # A server writing to SOURCE meanwhile: its tables were read page by page,
                # so the copy could hold a memory live beside the tombstone that forgot it.
                if await source.table_sizes() != before:
                    raise _SourceMoved
        except _SourceMoved:
            continue
        report.dest_sizes = await dest.table_sizes()
        return report
    raise StoreUnavailable(
        f"SOURCE {source.label}",
        f"changed while it was copied, {COPY_ATTEMPTS} times (a server is writing to it); "
        "nothing was written.",
        "Stop the servers that use it, then run migrate again.",
    )


async def _refuse_held(dest: Store) -> None:
    """Inside the copy's transaction: refuse a `dest` that holds memories or history. Two
    migrates into one new store take turns (SQLite's BEGIN IMMEDIATE holds the file, and
    PostgreSQL an advisory lock on the schema, until the copy commits), so the second reads
    the first one's rows here and says so, rather than fail on a duplicate key mid-copy.

    Raises:
        StoreUnavailable: `dest` is not empty (nothing is written).
    """
    await dest.lock_meta("migrate")
    held = {t: n for t, n in (await dest.table_sizes()).items() if n and t != "meta"}
    if held:
        shown = ", ".join(f"{n} {t}" for t, n in held.items())
        raise StoreUnavailable(
            f"DEST {dest.label}",
            f"is not empty ({shown}); migrate copies into a new store only, nothing was written.",
            "Pick a new file, or an empty schema (options=-csearch_path%3D<schema> in the URL).",
        )


#: Copies tried while SOURCE keeps changing under them.
COPY_ATTEMPTS = 3


class _SourceMoved(Exception):
    """SOURCE's row counts changed during a copy: the destination's transaction is undone."""


async def _copy(
    source: Store,
    dest: Store,
    report: CopyReport,
    progress: Callable[[str, int], None] | None,
    page: int,
) -> None:
    for table in DUMP_TABLES:
        report.copied[table] = 0
        after = None
        while True:
            rows, after = await source.dump(table, after, page)
            if dest.kind == "postgresql":
                rows = _carried(table, rows, report.replaced)
            await dest.load(table, rows)
            report.copied[table] += len(rows)
            if progress is not None:
                progress(table, len(rows))
            if after is None:
                break


def _key(table: str, row: dict[str, Any]) -> str:
    if table == "memories":
        return str(row["id"])
    if table == "edges":
        return f"{row['src']} -{row['type']}-> {row['dst']}"
    if table == "meta":
        return str(row["key"]).replace("\x00", "\\x00")
    return f"seq {row['seq']}"


def _carried(
    table: str, rows: Sequence[dict[str, Any]], replaced: list[str]
) -> list[dict[str, Any]]:
    """The rows as PostgreSQL can hold them: each NUL character replaced by U+FFFD (a changed
    content hashed again, so saying it again is still a repeat), the row named in
    `replaced`."""
    kept = []
    for row in rows:
        columns = [c for c, v in row.items() if holds_unstorable(v)]
        if columns:
            row = {c: without_unstorable(v) for c, v in row.items()}
            if table == "memories" and "content" in columns:
                row["content_hash"] = content_hash(row["content"])
            replaced.append(
                f"{table} {_key(table, row)}: a NUL character or a lone surrogate in "
                f"{', '.join(columns)}, which PostgreSQL text cannot hold, replaced by U+FFFD"
            )
        kept.append(row)
    return kept


async def migrate(
    source: str | Path,
    dest: str | Path,
    progress: Callable[[str, int], None] | None = None,
    sizes: Callable[[dict[str, int]], None] | None = None,
) -> CopyReport:
    """Open both stores and copy SOURCE into DEST (see `copy_rows`).

    Raises:
        StoreUnavailable: SOURCE does not exist, DEST is not empty, or either cannot be opened.
        StoreTooNew: either store was written by a newer nooa-mcp.
    """
    if store_kind(source) == "sqlite" and not Path(source).expanduser().is_file():
        raise StoreUnavailable(
            f"SOURCE {source}", "no store file is there.", "Pass the path of an existing store."
        )
    if str(source) == str(dest):
        raise StoreUnavailable(
            f"DEST {dest}", "is the same store as SOURCE.", "Pass a different destination."
        )
    src = await open_store(source)
    try:
        dst = await open_store(dest)
        try:
            return await copy_rows(src, dst, progress, sizes)
        finally:
            await dst.close()
    finally:
        await src.close()
