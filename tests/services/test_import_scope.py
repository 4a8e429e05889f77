"""An import stays inside the importer's scope: ids and edge ends resolve only among its own
memories (and shared ones for edge targets), through the `nooa-mcp import` command.

Before: alice importing a line that carried bob's id was told `exists`, and the line's edges
were attached to bob's memory (bob's other answer showed as superseded in bob's own recall);
an imported `refines` edge into bob's role was created although the tools refuse that link;
and an id colliding with one of alice's memories silently dropped the line's different text.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client
from shared_support import acli, call, hash_server, read_json

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder

pytestmark = pytest.mark.anyio

BEST = "The fix for the billing outage is to restart the invoice worker pool."
OTHER = "Invoices that failed overnight are retried by the morning job."
ALICE_OWN = "The staging cluster is rebuilt every Sunday night."


async def _seed(store: Path) -> dict[str, str]:
    ids = {}
    async with Memory.open(store, owner="bob", embedder=HashEmbedder()) as mem:
        ids["best"] = (await mem.author(BEST)).id
        ids["other"] = (await mem.author(OTHER)).id
    async with Memory.open(store, owner="alice", embedder=HashEmbedder()) as mem:
        ids["alice"] = (await mem.author(ALICE_OWN)).id
    return ids


async def _import(tmp_path: Path, store: Path, lines: list[dict]):
    dump = tmp_path / "dump.jsonl"
    dump.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return await acli(["--store", str(store), "--owner", "alice", "import", str(dump), "--json"])


async def _as_bob(store: Path, query: str) -> tuple[dict, dict, dict]:
    settings = Settings(store=store, owner="bob")
    async with Client(hash_server(settings), cache=None) as client:
        reply = await call(client, "memory_recall", {"query": query, "k": 5})
        hits = {h["id"]: h for h in reply["hits"]}
        stats = await read_json(client, "memory://stats")
        views = {}
        for ident in hits:
            views[ident] = await read_json(client, f"memory://memories/{ident}")
    return hits, views, stats


async def test_a_line_carrying_another_owners_id_is_stored_as_alices_own_new_memory(
    tmp_path: Path,
) -> None:
    store = tmp_path / "shared.sqlite"
    ids = await _seed(store)
    line = {
        "id": ids["best"],
        "content": BEST,
        "edges": [{"target": ids["other"], "type": "refines"}],
    }
    result = await _import(tmp_path, store, [line])
    assert result.exit_code == 0, result.output
    counts = json.loads(result.stdout)
    # Not `exists` (that is bob's memory), and no edge into bob's role.
    assert (counts.get("exists", 0), counts["created"], counts["edges"]) == (0, 1, 0)
    hits, views, _ = await _as_bob(store, "invoices failed overnight retried morning job")
    assert hits[ids["other"]]["flags"]["superseded_by"] is None
    assert views[ids["best"]]["edges"] == [] and views[ids["best"]]["reinforcement_count"] == 0


async def test_an_imported_refines_edge_into_another_role_is_not_added_and_is_named(
    tmp_path: Path,
) -> None:
    store = tmp_path / "shared.sqlite"
    ids = await _seed(store)
    line = {
        "content": "The billing outage is fixed by scaling the invoice workers, not a restart.",
        "edges": [{"target": ids["best"], "type": "refines"}],
    }
    result = await _import(tmp_path, store, [line])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["edges"] == 0
    assert "line 1" in result.stderr and ids["best"] in result.stderr
    hits, _, _ = await _as_bob(store, "billing outage invoice worker restart")
    assert hits[ids["best"]]["flags"]["superseded_by"] is None


async def test_an_edge_between_lines_of_the_file_follows_a_reassigned_id(tmp_path: Path) -> None:
    store = tmp_path / "shared.sqlite"
    ids = await _seed(store)
    lines = [
        {"id": ids["best"], "content": BEST},
        {
            "content": "Restarting the pool takes four minutes.",
            "edges": [{"target": ids["best"], "type": "supports"}],
        },
    ]
    result = await _import(tmp_path, store, lines)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["edges"] == 1
    settings = Settings(store=store, owner="alice")
    async with Client(hash_server(settings), cache=None) as client:
        reply = await call(client, "memory_recall", {"query": "restarting the pool four minutes"})
        top = reply["hits"][0]
        view = await read_json(client, f"memory://memories/{top['id']}")
    (edge,) = view["edges"]
    assert edge["target"] != ids["best"] and edge["type"] == "supports"


async def test_an_id_of_your_own_memory_with_other_content_is_refused_by_line_before_writing(
    tmp_path: Path,
) -> None:
    store = tmp_path / "shared.sqlite"
    ids = await _seed(store)
    lines = [
        {"content": "A first line that would be written."},
        {"id": ids["alice"], "content": "The staging cluster is rebuilt every Monday night."},
    ]
    result = await _import(tmp_path, store, lines)
    assert result.exit_code == 1
    assert "line 2" in result.stderr and ids["alice"] in result.stderr
    assert "Traceback" not in result.output
    stats = await acli(["--store", str(store), "--owner", "alice", "stats", "--json"])
    assert json.loads(stats.stdout)["total"] == 1  # only alice's own memory: nothing written
    async with Memory.open(store, owner="alice", embedder=HashEmbedder()) as mem:
        assert (await mem.get(ids["alice"])).content == ALICE_OWN


async def test_reimporting_your_own_export_is_exists_and_keeps_its_edges(tmp_path: Path) -> None:
    store = tmp_path / "mine.sqlite"
    async with Memory.open(store, owner="alice", embedder=HashEmbedder()) as mem:
        a = await mem.author("The backup job runs at 3am.")
        await mem.author(
            "Restores are tested on Fridays.", links=[{"target": a.id, "relation": "supports"}]
        )
    exported = await acli(["--store", str(store), "--owner", "alice", "export"])
    lines = [json.loads(x) for x in exported.stdout.splitlines() if x.strip()]
    result = await _import(tmp_path, store, lines)
    assert result.exit_code == 0, result.output
    counts = json.loads(result.stdout)
    # The edge was there already: none added, and it is still there.
    assert (counts["exists"], counts.get("created", 0), counts["edges"]) == (2, 0, 0)
    async with Memory.open(store, owner="alice", embedder=HashEmbedder()) as mem:
        edges = (await mem.get(lines[1]["id"])).edges
        assert [(e["target"], e["type"]) for e in edges] == [(lines[0]["id"], "supports")]


@pytest.mark.parametrize("said", [42, ["bob"], "bad owner!!", "a\x00b", "x" * 500])
async def test_a_malformed_owner_on_a_line_is_never_stored(tmp_path: Path, said: object) -> None:
    """The file's owner is not configuration: whatever it says, the line is the importer's, so
    a malformed owner reaches neither the store nor an export (auditor item: checked, kept)."""
    async with Memory.open(tmp_path / "m.sqlite", owner="alice", embedder=HashEmbedder()) as mem:
        result = await mem.import_records([(1, {"content": ALICE_OWN, "owner": said})])
        owners = [record["owner"] async for record in mem.export_records()]
    assert result.counts["created"] == 1
    assert owners == ["alice"]
