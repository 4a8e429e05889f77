"""The CLI for people: each command against a real store file, with tables and --json."""

import json

import pytest
from click.testing import CliRunner

from nooa_mcp import cli
from nooa_mcp.embeddings import HashEmbedder


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.setenv("NOOA_STORE", str(tmp_path / "cli.sqlite"))
    monkeypatch.delenv("NOOA_OWNER", raising=False)
    # The CLI builds its own Memory; hand it the fast embedder for these wiring tests.
    from nooa_mcp import engine as memory

    monkeypatch.setattr(memory, "default_embedder", lambda cache_dir=None: HashEmbedder())
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(cli.main, list(args), catch_exceptions=False)

    return invoke


def test_every_command_has_help(run):
    for command in cli.main.commands:
        result = run(command, "--help")
        assert result.exit_code == 0
        assert "Usage:" in result.output


def test_author_recall_explain_and_stats_work_together(run):
    out = run("author", "The backup job runs at 3am", "--importance", "HIGH", "--tag", "ops")
    assert out.exit_code == 0 and out.output.startswith("created")
    memory_id = out.output.split()[1]
    run("author", "Bananas are yellow", "--importance", "HIGH")
    recall = run("recall", "when does the backup job run", "--json")
    data = json.loads(recall.stdout)
    assert data["hits"][0]["id"] == memory_id
    assert set(data["hits"][0]["components"]) == {"source", "cos", "rel", "rec", "imp", "spread"}
    table = run("recall", "backup job")
    assert "score" in table.output and memory_id[:8] in table.output
    explain = run("explain", "--id", memory_id[:8])
    assert "recalled" in explain.output and "created" in explain.output
    why = run("explain", "bananas", "--id", memory_id[:8], "-k", "1", "--json")
    assert json.loads(why.stdout)["why_not"]["in_top_k"] is False
    stats = json.loads(run("stats", "--json").stdout)
    assert stats["total"] == 2 and stats["by_type"] == {"info": 2}


def test_a_library_error_becomes_a_clean_message(run):
    out = run("author", "x", "--importance", "HUGE")
    assert out.exit_code == 1
    assert "importance: 'HUGE' is not a level" in out.output
    assert "Traceback" not in out.output


def test_export_then_import_round_trips_memories_and_edges(run, tmp_path, monkeypatch):
    a = run("author", "first memory to move").output.split()[1]
    b = run("author", "second memory to move", "--type", "todo").output.split()[1]
    import anyio

    from nooa_mcp import Memory

    async def link():
        async with Memory.open(tmp_path / "cli.sqlite", owner="", embedder=HashEmbedder()) as m:
            await m.link(a, b, "causes")

    anyio.run(link)
    exported = run("export").output
    lines = [json.loads(x) for x in exported.splitlines()]
    assert [x["id"] for x in lines] == [a, b]
    (tmp_path / "dump.jsonl").write_text(exported)
    monkeypatch.setenv("NOOA_STORE", str(tmp_path / "copy.sqlite"))
    imported = json.loads(run("import", str(tmp_path / "dump.jsonl"), "--json").stdout)
    assert imported == {"created": 2, "edges": 1}
    again = json.loads(run("import", str(tmp_path / "dump.jsonl"), "--json").stdout)
    assert again["exists"] == 2
    assert run("export").output == exported


#: What the round trip below sets on its memories, field by field: each differs from the
#: default, so a field export or import drops (on both sides alike) shows as a difference.
RICH = {
    "type": "episode",
    "title": "Relay",
    "importance": 8.0,
    "salience": 1.0,
    "confidence": 0.5,
    "tags": ["ops", "relay"],
    "entities": ["bay 4"],
    "place_or_task": "plant",
    "created_at": "2026-02-03T04:05:06Z",  # event time: when it happened
    "valid_from": "2026-01-01T00:00:00Z",
    "valid_to": "2026-06-30T00:00:00Z",
    "references": ["url:https://example.com/relay"],
}


def test_export_then_import_round_trips_every_field_a_memory_can_carry(run, tmp_path, monkeypatch):
    """Export, import into an empty store, export again: the same lines, and each field holds
    what was set (not a default both exports agree on). Edges with their time, use history,
    an intent's trigger, a todo's status, an archived memory and its tombstone included."""
    import anyio

    from nooa_mcp import Memory

    async def fill():
        async with Memory.open(tmp_path / "cli.sqlite", owner="", embedder=HashEmbedder()) as m:
            spec = {k: v for k, v in RICH.items() if k != "references"}
            rich = await m.author(
                "The relay in bay 4 was replaced.", references=["https://example.com/relay"], **spec
            )
            intent = await m.author(
                "Check the relay again.",
                type="intent",
                trigger={"fire_at": "2030-01-01T00:00:00Z", "cue": "relay inspection"},
            )
            todo = await m.todo("add", content="Order a spare relay.")
            await m.todo("done", memory_id=todo.id)
            await m.link(rich.id, intent.id, "causes", weight="WEAK")
            await m.recall("relay bay")
            gone = await m.author("An obsolete fact about the relay.")
            await m.forget(gone.id, reason="wrong bay")
            return rich.id, intent.id, todo.id, gone.id

    rich, intent, todo, gone = anyio.run(fill)
    exported = run("export", "--include-archived").output
    lines = {x["id"]: x for x in map(json.loads, exported.splitlines())}
    assert set(lines) == {rich, intent, todo, gone}
    for field, value in RICH.items():
        if field == "references":  # each with the preview and time it was captured at
            assert [r["uri"] for r in lines[rich][field]] == value
            assert {"preview", "captured_at", "root"} <= set(lines[rich][field][0])
            continue
        assert lines[rich][field] == value, field
    assert lines[rich]["authored_importance"] == 8.0
    (edge,) = lines[rich]["edges"]
    assert (edge["target"], edge["type"], edge["weight"]) == (intent, "causes", 0.3)
    assert edge["created_at"]
    history = lines[rich]["history"]
    assert history["uses"] >= 1 and history["channels"]["recalled"] == 1
    assert [a["query"] for a in history["accesses"] if a["channel"] == "recalled"] == ["relay bay"]
    assert lines[intent]["trigger"]["cue"] == "relay inspection"
    assert lines[intent]["trigger"]["fire_at"] == "2030-01-01T00:00:00Z"
    assert lines[todo]["status"] == "done"
    assert lines[gone]["archived"] is True
    assert [t["reason"] for t in lines[gone]["tombstones"]] == ["wrong bay"]

    (tmp_path / "dump.jsonl").write_text(exported)
    monkeypatch.setenv("NOOA_STORE", str(tmp_path / "copy.sqlite"))
    imported = json.loads(run("import", str(tmp_path / "dump.jsonl"), "--json").stdout)
    assert imported["created"] == 4 and imported["edges"] == 1
    assert run("export", "--include-archived").output == exported
    # Again: every line exists, and the edge it carries was there already.
    again = json.loads(run("import", str(tmp_path / "dump.jsonl"), "--json").stdout)
    assert (again.get("created", 0), again["edges"]) == (0, 0), again


def test_import_refuses_a_broken_file_without_writing(run, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"content": "ok"}\nnot json\n')
    out = run("import", str(bad))
    assert out.exit_code == 1 and "line 2" in out.output
    # Nothing was written, not even the store file (stats only reads: it refuses a store that
    # is not there).
    assert not (tmp_path / "cli.sqlite").exists()
    stats = run("stats", "--json")
    assert stats.exit_code == 1 and "No store at" in stats.output


def test_stats_says_its_type_and_owner_counts_are_of_the_active_memories(run, tmp_path):
    # Time-passing auditor: after a pass faded most of a store, `type info 2` beside
    # `memories 10` read as a miscount.
    import anyio

    from nooa_mcp import Memory

    kept = run("author", "The backup job runs at 3am").output.split()[1]
    gone = run("author", "Bananas are yellow").output.split()[1]

    async def forget() -> None:
        async with Memory.open(tmp_path / "cli.sqlite", embedder=HashEmbedder()) as mem:
            await mem.forget(gone, reason="wrong")

    anyio.run(forget)
    rows = dict(line.rsplit(None, 1) for line in run("stats").output.splitlines()[2:])
    rows = {label.strip(): value for label, value in rows.items()}
    assert rows["memories"] == "2" and rows["active"] == "1"
    assert rows["active, type info"] == "1" and rows["active, owner (shared)"] == "1"
    assert "type info" not in rows
    stats = json.loads(run("stats", "--json").stdout)
    assert stats["by_type"] == {"info": 1} and kept != gone


def test_author_says_which_close_memory_it_kept_beside_the_new_one(run):
    said = (
        "The nightly backup job of the billing database in the Frankfurt region keeps its "
        "copies for 30 days on the cold storage tier"
    )
    old = run("author", said).output.split()[1]
    out = run("author", said.replace("30", "90"))
    assert out.exit_code == 0 and out.output.startswith("created")
    assert f"Close to {old[:8]}" in out.output and "differs in number" in out.output
    assert f"--link {old[:8]}:refines" in out.output


def test_author_blocked_by_a_forget_says_so_and_revive_restores_it(run, tmp_path):
    import anyio

    from nooa_mcp import Memory

    first = run("author", "The VPN gateway is vpn2.example.org").output.split()[1]

    async def forget():
        async with Memory.open(tmp_path / "cli.sqlite", owner="", embedder=HashEmbedder()) as m:
            await m.forget(first)

    anyio.run(forget)
    blocked = run("author", "The VPN gateway is vpn2.example.org")
    assert blocked.output.startswith(f"blocked-by-tombstone  {first}")
    assert "It was archived on" in blocked.output and "Pass --revive" in blocked.output
    revived = run("author", "The VPN gateway is vpn2.example.org", "--revive")
    assert revived.output.startswith(f"revived  {first}")
    assert "it is active again" in revived.output
