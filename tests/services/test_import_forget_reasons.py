"""An import tells a user's forget from maintenance's fade by the line's `faded`, never by the
text of a reason a user can write.

Before: a forget whose reason the user happened to start with "pruned: ", "merged into " or
"superseded by " came back from `export | import` faded: recallable, and revived by the next
recall that showed it. An export of an earlier version (no `faded` on its lines) is still read
by its reasons, as it was.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import time_machine

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.errors import InvalidInput

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 12, 1, 9, tzinfo=UTC)
PIN = "My old bank PIN was 4321"


def _open(store: Path | str) -> Memory:
    return Memory.open(settings=Settings(store=store, owner="alice@a"), embedder=HashEmbedder())


async def _export(store: Path | str) -> list[dict]:
    async with _open(store) as mem:
        return [
            r async for r in mem.export_records(include_archived=True) if "maintenance" not in r
        ]


@pytest.mark.parametrize("reason", ["pruned: I closed that account", "superseded by my new PIN"])
async def test_a_forget_whose_reason_reads_like_maintenance_comes_back_forgotten(
    tmp_path, store_target, reason
) -> None:
    source = tmp_path / "source.sqlite"
    with time_machine.travel(T0, tick=False):
        async with _open(source) as mem:
            pin = (await mem.author(PIN)).id
        live = await _export(source)
        async with _open(store_target) as mem:  # holds it live already
            await mem.import_records(list(enumerate(live, 1)))
    with time_machine.travel(T0 + timedelta(days=1), tick=False):
        async with _open(source) as mem:
            await mem.forget(pin, reason)
        [line] = await _export(source)
        assert line["faded"] is False and line["tombstones"][0]["reason"] == reason
        fresh = tmp_path / "fresh.sqlite"
        for target in (fresh, store_target):
            async with _open(target) as mem:
                report = await mem.import_records([(1, line)])
                view = await mem.get(pin)
                assert view.archived and not view.flags.faded, (target, report.counts)
                hits = (await mem.recall("what was my bank PIN", include_archived=True)).hits
                assert pin not in [h.id for h in hits]


async def test_a_faded_line_stays_faded_whatever_its_reason_says(tmp_path, store_target) -> None:
    source = tmp_path / "source.sqlite"
    with time_machine.travel(T0, tick=False):
        async with _open(source) as mem:
            pin = (await mem.author(PIN)).id
    with time_machine.travel(T0 + timedelta(days=121), tick=False):
        async with _open(source) as mem:
            await mem.reflect(["prune"])
            assert (await mem.get(pin)).flags.faded
        [line] = await _export(source)
        assert line["faded"] is True
        async with _open(store_target) as mem:
            await mem.import_records([(1, line)])
            assert (await mem.get(pin)).flags.faded


@pytest.mark.parametrize(
    ("reason", "faded"),
    [("pruned: retention 0.0100 < 0.05", True), ("forgotten", False), ("moved", False)],
)
async def test_an_export_of_an_earlier_version_is_read_by_its_reasons(
    store_target, reason, faded
) -> None:
    """Its lines carry no `faded`: maintenance's reasons fade, anything else forgets."""
    line = {
        "id": "3f9a2c1d5e6f47a8b9c0d1e2f3a4b5c6",
        "content": PIN,
        "type": "info",
        "archived": True,
        "tombstones": [{"reason": reason, "ts": T0.isoformat()}],
    }
    with time_machine.travel(T0 + timedelta(days=1), tick=False):
        async with _open(store_target) as mem:
            await mem.import_records([(1, line)])
            view = await mem.get(line["id"])
            assert view.archived and view.flags.faded is faded


async def test_faded_on_a_live_line_is_refused_by_name(tmp_path) -> None:
    line = {"content": PIN, "faded": True}
    async with _open(tmp_path / "m.sqlite") as mem:
        with pytest.raises(InvalidInput, match="faded") as refused:
            await mem.import_records([(1, line)])
        assert "line 1" in str(refused.value)
        assert (await mem.stats()).total == 0
