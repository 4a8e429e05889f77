"""Copy a whole store to another one, across backends (`nooa-mcp migrate SOURCE DEST`).

Every table goes over row for row through the Store's `dump`/`load`: memories with every
field (access ring, counters, authored importance, embeddings, seq), edges, the access stream,
tombstones, the maintenance log and meta. The destination computes its own revisions and
search indexes. The copy is one transaction on the destination: it lands whole or not at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import StoreUnavailable
from . import open_store, store_kind
from .base import DUMP_TABLES, Store

__all__ = ["PAGE", "CopyReport", "copy_rows", "migrate"]

#: Rows per dump page (a page of memories with embeddings is ~2 MB).
PAGE = 1000


@dataclass
class CopyReport:
    """Rows copied per table, and the row counts the destination holds afterwards."""

    copied: dict[str, int] = field(default_factory=dict)
    dest_sizes: dict[str, int] = field(default_factory=dict)

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

    Raises:
        StoreUnavailable: `dest` already holds memories or history (nothing is written).
    """
    held = {t: n for t, n in (await dest.table_sizes()).items() if n and t != "meta"}
    if held:
        shown = ", ".join(f"{n} {t}" for t, n in held.items())
        raise StoreUnavailable(
            f"DEST {dest.label}",
            f"is not empty ({shown}); migrate copies into a new store only, nothing was written.",
            "Pick a new file, or an empty schema (options=-csearch_path%3D<schema> in the URL).",
        )
    if sizes is not None:
        sizes(await source.table_sizes())
    report = CopyReport()
    async with dest.transaction():
        for table in DUMP_TABLES:
            report.copied[table] = 0
            after = None
            while True:
                rows, after = await source.dump(table, after, page)
                await dest.load(table, rows)
                report.copied[table] += len(rows)
                if progress is not None:
                    progress(table, len(rows))
                if after is None:
                    break
    report.dest_sizes = await dest.table_sizes()
    return report


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
