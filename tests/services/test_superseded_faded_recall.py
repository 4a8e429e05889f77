"""A faded memory that a newer one replaces is shown by a recall, not used: it stays faded.

Before: a recall that returned a superseded, faded fact (flagged superseded, ranked below its
successor) revived it as if the reader had used it, so a stale value reflection had set aside
was live again beside the memory that replaced it, and counted a use.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.domain.schema import now as utc_now
from nooa_mcp.embeddings import HashEmbedder

pytestmark = pytest.mark.anyio

OLD = "The staging database runs PostgreSQL 15 on port 5432"
NEW = "The staging database runs PostgreSQL 16 on port 5432, upgraded"
LATER = timedelta(days=730)


def settings_for(target: Path | str) -> Settings:
    return Settings(store=target, owner="coder@laptop")


async def prune_later(target: Path | str, *specs: dict) -> list[str]:
    """Write `specs`, then run the prune step two years on: each of them fades."""
    async with Memory.open(settings=settings_for(target), embedder=HashEmbedder()) as mem:
        ids = [r.id for r in await mem.author_many(list(specs))]
        report = await mem.reflect(["prune"], now=utc_now() + LATER)
        assert report.steps[0].applied == len(specs)
    return ids


async def test_a_superseded_faded_fact_is_shown_not_revived(store_target) -> None:
    old, other = await prune_later(
        store_target,
        {"content": OLD},
        {"content": "The staging cache runs Redis 7 on port 6379"},
    )
    async with Memory.open(settings=settings_for(store_target), embedder=HashEmbedder()) as mem:
        new = (await mem.author(NEW, type="skill")).id
        await mem.link(new, old, "refines")
        hits = (await mem.recall("which PostgreSQL does the staging database run", k=5)).hits
        shown = {h.id: h for h in hits}
        assert old in shown and shown[old].flags.faded, [h.id for h in hits]
        assert shown[old].flags.superseded_by == new
        view = await mem.get(old)
        assert view.archived and view.flags.faded
        # One a newer memory does not replace is used, and lives again (as before).
        hits = (await mem.recall("which Redis does the staging cache run", k=5)).hits
        assert other in [h.id for h in hits]
        assert not (await mem.get(other)).archived
