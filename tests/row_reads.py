"""A spy on the rows a store is asked for by id (`Store.scoring_rows`): tests that count what
a recall reads, and how much."""

from __future__ import annotations

from typing import Any

import pytest


def record_row_reads(store: Any, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The ids of each `scoring_rows` call on `store` from now on, in order."""
    reads: list[list[str]] = []
    original = store.scoring_rows

    async def recording(ids: Any) -> Any:
        reads.append(list(ids))
        return await original(ids)

    monkeypatch.setattr(store, "scoring_rows", recording)
    return reads
