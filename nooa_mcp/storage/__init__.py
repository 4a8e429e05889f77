"""Storage: the Store contract and its backends (the only SQL in nooa-mcp).

`Store` is imported on first use (PEP 562), so `storage.quick` — the hook's fast path, standard
library only — does not pull the contract's numpy and pydantic in with the package.
"""

from __future__ import annotations

import importlib

#: False when run; a type checker reads it as true (pyproject's [tool.mypy] always_true), so
#: the imports below are for it alone: typing and pathlib cost the hook's fast path ~25 ms.
FOR_TYPE_CHECKERS = False
if FOR_TYPE_CHECKERS:
    from pathlib import Path

    from .base import Store

__all__ = ["Store", "copy_store", "file_holds_memories", "open_store", "store_kind"]


def __getattr__(name: str) -> object:
    if name == "Store":
        return importlib.import_module(".base", __name__).Store
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def store_kind(target: str | Path) -> str:
    """ "postgresql" for a postgres:// or postgresql:// URL, else "sqlite" (a file path)."""
    text = str(target)
    return "postgresql" if text.startswith(("postgresql://", "postgres://")) else "sqlite"


def file_holds_memories(path: str | Path) -> bool:
    """Whether the SQLite file holds a memory (True when it cannot be read: a caller deciding
    whether to delete it keeps it)."""
    import sqlite3
    from contextlib import closing
    from pathlib import Path

    path = Path(path).absolute()
    if not path.exists():
        return False
    try:
        with closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as conn:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            if "memories" not in tables:
                return False
            return conn.execute("SELECT 1 FROM memories LIMIT 1").fetchone() is not None
    except sqlite3.Error:
        return True


async def open_store(target: str | Path) -> Store:
    """Open the store at `target`: a file path (SQLite) or a PostgreSQL URL.

    Raises:
        StoreTooNew: the store was written by a newer nooa-mcp.
        StoreUnavailable: the store cannot be opened (the message names it and the fix).
    """
    from pathlib import Path

    if store_kind(target) == "postgresql":
        try:
            from .postgres import PostgresStore
        except ModuleNotFoundError as exc:
            if exc.name not in ("psycopg", "psycopg_pool"):
                raise
            from ..errors import StoreUnavailable

            raise StoreUnavailable(
                "--store",
                "a postgresql:// store needs the PostgreSQL driver, which is not installed.",
                "Install it with: pip install 'nooa-mcp[postgres]'.",
            ) from None
        return await PostgresStore.open(str(target))
    from .sqlite import SQLiteStore

    return await SQLiteStore.open(Path(target))


async def copy_store(source: str | Path, target: str | Path) -> None:
    """Copy a store to `target` (SQLite files only: the evaluation's per-variant copies).

    Raises:
        InvalidInput: the store is not a file.
    """
    from pathlib import Path

    if store_kind(source) != "sqlite":
        from ..errors import InvalidInput

        raise InvalidInput("store", f"{source} is not a file.", "Copy SQLite stores only.")
    from .sqlite import copy_store as copy_file

    await copy_file(Path(source), Path(target))
