"""Count the store's round trips: every hop to SQLite's connection threads and every statement
sent to PostgreSQL (BEGIN and COMMIT of a transaction block included), process-wide.

    with RoundTrips() as trips:
        await mem.recall(question)
    trips.sqlite, trips.postgres

aiosqlite runs each operation (an execute, a fetch, a commit) as one job on the connection's
thread: a hop there and back through the event loop. psycopg sends each statement outside a
pipeline and waits for its answer: one round trip (nooa-mcp prepares statements only inside
pipelines, where the Parse rides too); a pipeline
(`executemany` runs in one) sends its statements together and syncs once: one round trip
(a statement or a transaction's BEGIN / COMMIT sent inside one rides it).
Patching is undone on exit; nested counters are not supported.
"""

from __future__ import annotations

import functools
from types import TracebackType
from typing import Any


class RoundTrips:
    def __init__(self) -> None:
        self.sqlite = 0
        self.postgres = 0
        self._undo: list[tuple[Any, str, Any]] = []

    def _patch(self, owner: Any, name: str, field: str, alone: bool = False) -> None:
        """Count each call of `owner.name`; with `alone`, only outside a pipeline."""
        original = owner.__dict__[name]

        @functools.wraps(original)
        async def counted(*args: Any, **kwargs: Any) -> Any:
            if not (alone and args[0]._conn._pipeline):
                setattr(self, field, getattr(self, field) + 1)
            return await original(*args, **kwargs)

        setattr(owner, name, counted)
        self._undo.append((owner, name, original))

    def __enter__(self) -> RoundTrips:
        import aiosqlite

        self._patch(aiosqlite.Connection, "_execute", "sqlite")
        try:
            import psycopg
        except ImportError:
            return self
        self._patch(psycopg.AsyncCursor, "execute", "postgres", alone=True)
        self._patch(psycopg.AsyncPipeline, "__aexit__", "postgres")
        # BEGIN and COMMIT: a COMMIT sent in a pipeline (with the writes held back before it
        # and the notification after it, `PostgresStore._commit`) rides that pipeline's trip.
        self._patch(psycopg.AsyncTransaction, "__aenter__", "postgres", alone=True)
        self._patch(psycopg.AsyncTransaction, "__aexit__", "postgres", alone=True)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for owner, name, original in reversed(self._undo):
            setattr(owner, name, original)
        self._undo.clear()

    def take(self) -> tuple[int, int]:
        """The counts so far, and start again from zero."""
        out = (self.sqlite, self.postgres)
        self.sqlite = self.postgres = 0
        return out
