"""A write's transaction, run again when the database aborted it for a concurrent one.

PostgreSQL resolves a deadlock, or a serialization failure, by rolling one of the
transactions back (`StoreConflict`): nothing of it was written, and the same work run again
usually goes through, since the other transaction has finished by then. Several servers
writing near one another (two memories linked to each other at once, near-duplicates said
by three agents while reflection merges their kind) meet such aborts, and a caller told
"retry the call" for work the server could redo itself was told too much. A write verb runs
its transaction through `in_transaction`, with every value the body derives made inside the
body, so an attempt starts from what the call was given (DESIGN.md §15).

SQLite never aborts a transaction so (one writer holds the file at a time): there the body
runs once.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from ..errors import StoreConflict
from .caller import Caller

__all__ = ["CONFLICT_ATTEMPTS", "in_transaction"]

T = TypeVar("T")

#: Attempts of one transaction before its conflict reaches the caller.
CONFLICT_ATTEMPTS = 4
#: Seconds an attempt waits at most before the next, times its number (jittered: two
#: writers that deadlocked must not meet again in step).
CONFLICT_PAUSE = 0.02


async def in_transaction(caller: Caller, body: Callable[[], Awaitable[T]]) -> T:
    """`await body()` inside one transaction of the caller's store, run again (a fresh
    transaction) when the database aborts it for a concurrent one, up to
    `CONFLICT_ATTEMPTS` times. Inside a transaction already (a savepoint), once: the abort
    is the outer transaction's, and so is running it again.

    Raises:
        StoreConflict: every attempt was aborted.
    """
    store = caller.store
    if store.in_transaction:
        async with store.transaction():
            return await body()
    for attempt in range(1, CONFLICT_ATTEMPTS + 1):
        try:
            async with store.transaction():
                return await body()
        except StoreConflict:
            if attempt == CONFLICT_ATTEMPTS:
                raise
            await anyio.sleep(random.uniform(0.0, CONFLICT_PAUSE * attempt))
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises
