"""Storage: the Store contract and its backends (the only SQL in nooa-mcp)."""

from __future__ import annotations

from pathlib import Path

from .base import Store

__all__ = ["Store", "open_store", "store_kind"]


def store_kind(target: str | Path) -> str:
    """ "postgresql" for a postgres:// or postgresql:// URL, else "sqlite" (a file path)."""
    text = str(target)
    return "postgresql" if text.startswith(("postgresql://", "postgres://")) else "sqlite"


async def open_store(target: str | Path) -> Store:
    """Open the store at `target`: a file path (SQLite) or a PostgreSQL URL.

    Raises:
        StoreTooNew: the store was written by a newer nooa-mcp.
        StoreUnavailable: the store cannot be opened (the message names it and the fix).
    """
    if store_kind(target) == "postgresql":
        from .postgres import PostgresStore

        return await PostgresStore.open(str(target))
    from .sqlite import SQLiteStore

    return await SQLiteStore.open(Path(target))
