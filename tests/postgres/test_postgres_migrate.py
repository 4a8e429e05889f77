"""`nooa-mcp migrate SOURCE DEST`: a store goes SQLite → PostgreSQL → SQLite and comes back equal.

The source is built through the facade, so it holds what real use leaves behind: memories of
several owners and types with access rings and counters, edited importance, todos and intents,
links and derived edges, the access stream, a tombstone, reflection reports in the maintenance
log, and meta. Equality is checked table by table on the dumps, row for row and field for field.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from click.testing import CliRunner

from nooa_mcp import Memory, Settings, cli
from nooa_mcp.domain.scope import Scope
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.errors import StoreUnavailable
from nooa_mcp.storage import open_store
from nooa_mcp.storage.base import DUMP_TABLES
from nooa_mcp.storage.migrate import copy_rows, migrate

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


async def build_source(path, embedder) -> None:
    """A store with one of everything the copy must carry."""
    settings = Settings(store=path, owner="coder@laptop")
    async with Memory.open(settings=settings, embedder=embedder) as mem:
        a = await mem.author("The backup job runs at 3am on the db host.", tags=["ops"])
        b = await mem.author(
            "Restores are tested every Friday.",
            importance="HIGH",
            links=[{"target": a.id, "relation": "supports"}],
        )
        await mem.author("A scratch thought.", type="scratch")
        await mem.todo("add", content="Rotate the backup keys")
        await mem.intent("add", content="Check restores", cue="restore")
        await mem.recall("backup job")
        await mem.recall("restore friday")
        await mem.update(b.id, importance="CRITICAL")
        gone = await mem.author("The old server was called zeus.")
        await mem.forget(gone.id, reason="decommissioned")
        await mem.reflect()
    other = Settings(store=path, owner="writer@desk")
    async with Memory.open(settings=other, embedder=embedder) as mem:
        await mem.author("Drafts live in the shared folder.", valid_from="2026-01-01")


async def dump_all(target) -> dict[str, list[dict]]:
    store = await open_store(target)
    try:
        out = {}
        for table in DUMP_TABLES:
            rows, after = [], None
            while True:
                page, after = await store.dump(table, after, 3)
                rows += page
                if after is None:
                    break
            out[table] = rows
        return out
    finally:
        await store.close()


async def test_a_store_goes_to_postgres_and_back_unchanged(tmp_path, postgres) -> None:
    source, back = tmp_path / "source.sqlite", tmp_path / "back.sqlite"
    await build_source(source, HashEmbedder())
    seen: dict[str, int] = {}
    total: list[int] = []

    def progress(table: str, rows: int) -> None:
        seen[table] = seen.get(table, 0) + rows

    there = await migrate(
        source, postgres, progress, lambda sizes: total.append(sum(sizes.values()))
    )
    again = await migrate(postgres, back)
    original, on_pg, returned = (
        await dump_all(source),
        await dump_all(postgres),
        await dump_all(back),
    )
    for table in DUMP_TABLES:
        assert on_pg[table] == original[table], f"{table} changed on the way to PostgreSQL"
        assert returned[table] == original[table], f"{table} changed on the way back"
    assert there.copied == again.copied == {t: len(original[t]) for t in DUMP_TABLES}
    assert seen == there.copied and total == [there.total]
    assert there.dest_sizes == there.copied
    # Everything a reader relies on is there: rings, counters, authored importance, vectors.
    memories = original["memories"]
    assert {m["type"] for m in memories} >= {"info", "scratch", "todo", "intent"}
    assert any(m["archived"] for m in memories) and original["tombstones"]
    assert any(m["ring"] and m["channels"].get("recalled") for m in memories)
    assert all(m["authored_importance"] is not None for m in memories)
    assert any(m["actr_times"] and m["first_access_at"] for m in memories)
    assert all(m["embedding"] is not None for m in memories)
    assert original["edges"] and original["maintenance_log"] and original["meta"]


async def test_recall_on_the_copy_ranks_like_the_source(tmp_path, postgres) -> None:
    source = tmp_path / "source.sqlite"
    embedder = HashEmbedder()
    await build_source(source, embedder)
    await migrate(source, postgres)
    for target in (source, postgres):
        settings = Settings(store=target, owner="coder@laptop")
        async with Memory.open(settings=settings, embedder=embedder) as mem:
            ranked = await mem.explain("when does the backup job run")
            got = [(r.id, r.source) for r in ranked.rows]
            cos = [round(r.cos or 0.0, 6) for r in ranked.rows]
        if target == source:
            expected, expected_cos = got, cos
    assert got == expected and cos == expected_cos


async def test_stats_on_the_copies_report_what_the_source_reports(tmp_path, postgres) -> None:
    """Stats reads per-memory access counts that each store's triggers keep as migrate loads
    the stream, never copied: every number comes out as the source's, there and back."""
    source, back = tmp_path / "source.sqlite", tmp_path / "back.sqlite"
    embedder = HashEmbedder()
    await build_source(source, embedder)
    await migrate(source, postgres)
    await migrate(postgres, back)
    reported = []
    for target in (source, postgres, back):
        numbers = {}
        for owner in ("coder@laptop", "writer@desk"):
            settings = Settings(store=target, owner=owner, read=["coder", "writer"])
            async with Memory.open(settings=settings, embedder=embedder) as mem:
                for scope in ("mine", "*"):
                    stats = (await mem.stats(scope=scope)).model_dump(mode="json")
                    # The open todo's age moves with the clock between the three stores.
                    stats["extra"].pop("todo_open_median_age_hours")
                    numbers[owner, scope] = {k: stats[k] for k in stats if k != "store"}
        reported.append(numbers)
    assert reported[1] == reported[0] and reported[2] == reported[0]
    mine = reported[0]["coder@laptop", "mine"]
    assert mine["accesses"] > mine["total"] and mine["extra"]["reads"] > 0


async def test_migrate_refuses_a_destination_that_holds_memories(tmp_path, postgres) -> None:
    source = tmp_path / "source.sqlite"
    await build_source(source, HashEmbedder())
    await migrate(source, postgres)
    before = await dump_all(postgres)
    with pytest.raises(StoreUnavailable) as info:
        await migrate(source, postgres)
    assert "not empty" in str(info.value) and "nothing was written" in str(info.value)
    assert await dump_all(postgres) == before


async def test_migrate_refuses_a_source_that_does_not_exist(tmp_path, postgres) -> None:
    with pytest.raises(StoreUnavailable) as info:
        await migrate(tmp_path / "missing.sqlite", postgres)
    assert "SOURCE" in str(info.value) and "missing.sqlite" in str(info.value)
    assert not (tmp_path / "missing.sqlite").exists()


async def test_a_failed_copy_leaves_the_destination_empty(tmp_path, postgres) -> None:
    source = tmp_path / "source.sqlite"
    await build_source(source, HashEmbedder())
    src, dst = await open_store(source), await open_store(postgres)
    calls = 0

    def fail_midway(table: str, rows: int) -> None:
        nonlocal calls
        calls += 1
        if table == "accesses":
            raise RuntimeError("interrupted")

    try:
        with pytest.raises(RuntimeError, match="interrupted"):
            await copy_rows(src, dst, fail_midway)
        assert calls >= 3
        assert set((await dst.table_sizes()).values()) == {0}
        assert await dst.list_memories(Scope(roles=None), archived=None) == []
    finally:
        await src.close()
        await dst.close()


def test_the_migrate_command_copies_with_a_progress_bar_and_a_table(
    tmp_path, postgres, monkeypatch
) -> None:
    import anyio

    source = tmp_path / "source.sqlite"
    anyio.run(build_source, source, HashEmbedder())
    # The bar is drawn for a person at a terminal (on a pipe it writes nothing).
    monkeypatch.setattr(cli, "stderr_is_terminal", lambda: True)
    runner = CliRunner()
    result = runner.invoke(cli.main, ["migrate", str(source), postgres, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["copied"]["memories"] == report["dest"]["memories"] >= 6
    assert "copying" in result.stderr
    again = runner.invoke(cli.main, ["migrate", str(source), postgres])
    assert again.exit_code == 1
    assert "not empty" in again.output and "Traceback" not in again.output


def test_the_copy_keeps_vectors_and_times_bit_for_bit(tmp_path, postgres) -> None:
    import anyio

    async def scenario() -> None:
        source = tmp_path / "s.sqlite"
        store = await open_store(source)
        try:
            from nooa_mcp.domain.schema import Memory as Record

            when = datetime(2031, 5, 4, 3, 2, 1, 123456, tzinfo=UTC)
            record = Record(
                content="x",
                owner="a@b",
                created_at=when,
                last_accessed_at=when + timedelta(microseconds=1),
                actr_times=[0.001, 1e-3, 12345.678],
            )
            vector = np.array([1e-30, -0.0, 3.4e38, 0.1], dtype=np.float32)
            async with store.transaction():
                await store.insert(record, vector)
        finally:
            await store.close()
        await migrate(source, postgres)
        copy = await open_store(postgres)
        try:
            got = await copy.fetch(record.id)
            assert got.created_at == when and got.actr_times == [0.001, 0.001, 12345.678]
            assert (await copy.embeddings_of([record.id]))[record.id].tobytes() == vector.tobytes()
        finally:
            await copy.close()

    anyio.run(scenario)
