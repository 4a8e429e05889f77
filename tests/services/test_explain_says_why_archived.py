"""A replay of an archived memory says why it is archived: a merged duplicate names the
memory that answers for it ("(faded)" alone left the reader to find it, an auditor's find);
a forget says its reason to its own role. On SQLite and PostgreSQL, and through the CLI.
"""

from __future__ import annotations

import anyio
import pytest
from click.testing import CliRunner

from nooa_mcp import Memory, Settings, cli
from nooa_mcp.embeddings import HashEmbedder


async def _merged_and_forgotten(settings: Settings) -> tuple[str, str, str]:
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        anchor = (await mem.author("The billing cluster rotates its deploy key monthly.")).id
        dup = (await mem.author("the billing cluster rotates its deploy key monthly!")).id
        await mem.reflect(["merge"])
        gone = (await mem.author("The guest wifi password is tulip-42")).id
        await mem.forget(gone, reason="changed at the office")
    return anchor, dup, gone


@pytest.mark.anyio
async def test_a_replay_names_the_anchor_of_a_merged_duplicate_and_a_forgets_reason(
    store_target,
):
    settings = Settings(store=store_target, owner="alice")
    anchor, dup, gone = await _merged_and_forgotten(settings)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        merged = await mem.explain(memory_id=dup)
        forgotten = await mem.explain(memory_id=gone)
        live = await mem.explain(memory_id=anchor)
    assert merged.state == "faded"
    assert merged.note == f"Faded: merged into {anchor} by reflection, which answers for it."
    assert forgotten.note == "Forgotten: changed at the office."
    assert live.note == ""


def test_the_cli_replay_prints_why(tmp_path, monkeypatch):
    store = tmp_path / "m.sqlite"
    anchor, dup, _ = anyio.run(_merged_and_forgotten, Settings(store=store, owner=""))
    from nooa_mcp import engine

    monkeypatch.setattr(engine, "default_embedder", lambda cache_dir=None: HashEmbedder())
    out = CliRunner().invoke(cli.main, ["--store", str(store), "explain", "--id", dup[:8]])
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert lines[0] == f"1 accesses of {dup} (faded)"
    assert lines[1] == f"Faded: merged into {anchor} by reflection, which answers for it."
