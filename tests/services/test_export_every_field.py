"""Export -> import keeps every field a memory can carry, compared field by field.

The older round-trip test compared a re-export with the export on memories holding only content
and type: a field dropped on both sides (as `valid_to` could be) passed unseen. Here memories
are built through the MCP tools with every field set (labels, ladders, validity, references,
links, a todo's status, an intent that fired, an importance rescore raised, a memory forgotten
and one that faded), moved with `nooa-mcp export --include-archived | nooa-mcp import`, and
each memory is compared field by field, as the reader sees it and as a re-export writes it.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import anyio
import time_machine
from click.testing import CliRunner
from mcp import Client

from nooa_mcp import Memory, Settings, cli
from nooa_mcp.domain.schema import now as utc_now
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp.server import build_server

OWNER = "coder@laptop"
NOW = utc_now().replace(microsecond=0)
T0 = NOW - timedelta(days=120)
#: What is computed from the clock or the reader rather than stored: equal at one instant.
DERIVED = {"writable"}


def _by_id(exported: str) -> dict[str, dict]:
    """The memory lines of an export by id (the maintenance log's lines name none)."""
    lines = [json.loads(x) for x in exported.splitlines()]
    return {x["id"]: x for x in lines if "maintenance" not in x}


def settings_for(target: Path | str, root: Path) -> Settings:
    return Settings(store=target, owner=OWNER, reference_root=root)


async def call(client: Client, tool: str, **args) -> dict:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    return result.structured_content


async def build(target: Path, root: Path) -> dict[str, str]:
    ids: dict[str, str] = {}
    server = build_server(settings_for(target, root), embedder=HashEmbedder())
    async with Client(server) as c:
        with time_machine.travel(T0):
            ids["plain"] = (await call(c, "memory_author", content="The fax line is 555-0100"))[
                "id"
            ]
            ids["full"] = (
                await call(
                    c,
                    "memory_author",
                    content="The staging cluster has four worker nodes",
                    type="info",
                    title="Staging size",
                    importance="HIGH",
                    salience="PIVOTAL",
                    confidence="CERTAIN",
                    tags=["ops", "staging"],
                    entities=["staging cluster"],
                    place_or_task="infra review",
                    references=["file:notes.md", "url:https://example.org/staging"],
                    links=[{"target": ids["plain"], "relation": "supports", "weight": "WEAK"}],
                    valid_from="2026-01-01T00:00:00Z",
                    valid_to="2030-01-01T00:00:00Z",
                )
            )["id"]
            ids["expiring"] = (
                await call(c, "memory_author", content="The VPN uses the old gateway")
            )["id"]
            ids["raised"] = (
                await call(
                    c,
                    "memory_author",
                    content="The release train leaves on Thursdays",
                    importance="LOW",
                    salience="PIVOTAL",
                    type="skill",
                )
            )["id"]
            ids["todo"] = (await call(c, "todo", action="add", content="Rotate the deploy keys"))[
                "id"
            ]
            ids["intent"] = (
                await call(
                    c,
                    "intent",
                    action="add",
                    content="Ask about the audit",
                    fire_at="2020-01-01T00:00:00Z",
                    cue="audit",
                    every_hours=24,
                )
            )["id"]
            ids["forgotten"] = (
                await call(c, "memory_author", content="The old wiki password was hunter2")
            )["id"]
            ids["faded"] = (await call(c, "memory_author", content="Lunch was soup on a Monday"))[
                "id"
            ]
            # Memory references into the same file (one import batch): the one it names is not
            # stored yet when this line is written, and one is forgotten by export time.
            ids["citing"] = (
                await call(
                    c,
                    "memory_author",
                    content="Both numbers are in the ops binder",
                    references=[f"memory:{ids['plain']}", f"memory:{ids['forgotten']}"],
                )
            )["id"]
        with time_machine.travel(T0 + timedelta(days=1)):
            await call(c, "memory_update", memory_id=ids["expiring"], valid_to="2026-02-01")
            await call(c, "todo", action="done", memory_id=ids["todo"])
            await call(c, "todo", action="list")  # the agent's turn: the due intent fires
            await call(c, "memory_update", memory_id=ids["forgotten"], forget=True)
            await call(c, "memory_recall", query="staging cluster worker nodes")
        with time_machine.travel(T0 + timedelta(days=20)):
            await call(c, "memory_recall", query="staging cluster worker nodes")
            await call(c, "memory_recall", query="release train")
    async with Memory.open(settings=settings_for(target, root), embedder=HashEmbedder()) as mem:
        with time_machine.travel(NOW - timedelta(days=1)):
            # Rescore lifts the PIVOTAL skill above LOW; prune fades the lunch note.
            await mem.reflect(["rescore", "prune"])
    return ids


async def views(target: Path | str, root: Path, ids: dict[str, str]) -> dict[str, dict]:
    async with Memory.open(settings=settings_for(target, root), embedder=HashEmbedder()) as mem:
        out = {}
        for name, memory_id in ids.items():
            view = (await mem.get(memory_id)).model_dump(mode="json")
            # A reference keeps the preview and the time it was captured at, as exported.
            out[name] = {k: v for k, v in view.items() if k not in DERIVED}
        return out


def run_cli(target: Path | str, root: Path, monkeypatch, *args: str) -> str:
    from nooa_mcp import engine

    monkeypatch.setenv("NOOA_OWNER", OWNER)
    monkeypatch.setenv("NOOA_REFERENCE_ROOT", str(root))
    monkeypatch.setattr(engine, "default_embedder", lambda cache_dir=None: HashEmbedder())
    out = CliRunner().invoke(cli.main, ["--store", str(target), *args], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    return out.stdout


def test_every_field_survives_export_and_import(store_target, tmp_path, monkeypatch) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.md").write_text("staging has four workers\n")
    source = tmp_path / "source.sqlite"
    ids = anyio.run(build, source, root)
    with time_machine.travel(NOW, tick=False):
        before = anyio.run(views, source, root, ids)
        exported = run_cli(source, root, monkeypatch, "export", "--include-archived")
        (tmp_path / "all.jsonl").write_text(exported)
        run_cli(store_target, root, monkeypatch, "import", str(tmp_path / "all.jsonl"))
        after = anyio.run(views, store_target, root, ids)
        again = run_cli(store_target, root, monkeypatch, "export", "--include-archived")
    # The store built what the test means: each field set, each state reached.
    full, expiring = before["full"], before["expiring"]
    assert (full["importance_label"], full["salience"], full["confidence"]) == ("HIGH", 1.0, 1.0)
    assert full["valid_to"].startswith("2030-01-01") and full["edges_total"] == 1
    assert expiring["valid_to"].startswith("2026-02-01") and expiring["flags"]["stale"]
    assert before["todo"]["status"] == "done"
    assert before["intent"]["trigger"]["fired_count"] >= 1
    assert before["raised"]["importance"] > 3.0
    assert before["forgotten"]["archived"] and not before["forgotten"]["flags"]["faded"]
    assert before["faded"]["archived"] and before["faded"]["flags"]["faded"]
    assert [r["uri"][7:15] for r in before["citing"]["references"]] == [
        ids["plain"][:8],
        ids["forgotten"][:8],
    ]
    for name in ids:
        for field in before[name]:
            assert after[name][field] == before[name][field], (name, field)
    lines = _by_id(exported)
    relines = _by_id(again)
    assert relines.keys() == lines.keys() == set(ids.values())
    for memory_id, line in lines.items():
        for key in line:
            assert relines[memory_id][key] == line[key], (memory_id, key)


async def build_hub(target: Path, root: Path, spokes: int) -> tuple[str, list[str]]:
    """A memory linked to `spokes` others through the tools: more than a reply shows."""
    server = build_server(settings_for(target, root), embedder=HashEmbedder())
    async with Client(server) as c:
        ids = [
            (await call(c, "memory_author", content=f"Runbook step {n}: restart worker {n}"))["id"]
            for n in range(spokes)
        ]
        links = [{"target": t, "relation": "related"} for t in ids]
        hub = await call(
            c, "memory_author", content="The on-call runbook for the worker fleet", links=links
        )
    return hub["id"], ids


def test_an_export_carries_every_edge_of_a_memory_not_the_fifty_a_reply_shows(
    store_target, tmp_path, monkeypatch
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    source = tmp_path / "source.sqlite"
    hub, spokes = anyio.run(build_hub, source, root, 60)
    exported = run_cli(source, root, monkeypatch, "export")
    line = _by_id(exported)[hub]
    assert len(line["edges"]) == 60
    assert {e["target"] for e in line["edges"]} == set(spokes)
    (tmp_path / "all.jsonl").write_text(exported)
    run_cli(store_target, root, monkeypatch, "import", str(tmp_path / "all.jsonl"))
    again = run_cli(store_target, root, monkeypatch, "export")
    reline = _by_id(again)[hub]
    assert {e["target"] for e in reline["edges"]} == set(spokes)
    # A reply still shows the fifty strongest and says how many there are.
    shown = anyio.run(views, store_target, root, {"hub": hub})["hub"]
    assert (len(shown["edges"]), shown["edges_total"]) == (50, 60)


async def build_same_texts(target: Path, root: Path) -> dict[str, str]:
    """Memories that share one text and that the store keeps apart: a forgotten memory and a
    live one later edited to its words; two live copies; a duplicate merged away by reflection
    (faded, with its tombstone and the anchor's `refines` edge to it)."""
    async with Memory.open(settings=settings_for(target, root), embedder=HashEmbedder()) as mem:
        ids = {}
        ids["forgotten"] = (await mem.author("The build server is ci-01")).id
        await mem.forget(ids["forgotten"])
        ids["edited"] = (await mem.author("The build server is ci-02")).id
        await mem.update(ids["edited"], content="The build server is ci-01")
        ids["copy_a"] = (await mem.author("Standup is at nine")).id
        ids["copy_b"] = (await mem.author("Standup is at ten")).id
        await mem.update(ids["copy_b"], content="Standup is at nine")
        ids["anchor"] = (await mem.author("The database is PG-15")).id
        ids["merged"] = (await mem.author("The database is PG-16")).id
        await mem.update(ids["anchor"], content="The database is PG-16")
        ids["linked"] = (
            await mem.author(
                "The DBA owns upgrades", links=[{"target": ids["merged"], "relation": "related"}]
            )
        ).id
        report = await mem.reflect(["merge"])
        assert report.steps[0].applied == 2  # both live copies pairs: copy_b, merged
    return ids


def test_memories_with_one_text_come_back_as_they_were(store_target, tmp_path, monkeypatch):
    """Export -> import never folds one exported memory into another with the same text: each
    id comes back in its own state, with its tombstones and edges, and nothing is reinforced."""
    root = tmp_path / "project"
    root.mkdir()
    source = tmp_path / "source.sqlite"
    with time_machine.travel(T0):
        ids = anyio.run(build_same_texts, source, root)
    with time_machine.travel(NOW, tick=False):
        exported = run_cli(source, root, monkeypatch, "export", "--include-archived")
        (tmp_path / "all.jsonl").write_text(exported)
        counts = json.loads(
            run_cli(
                store_target, root, monkeypatch, "import", str(tmp_path / "all.jsonl"), "--json"
            )
        )
        again = run_cli(store_target, root, monkeypatch, "export", "--include-archived")
        before = anyio.run(views, source, root, ids)
        after = anyio.run(views, store_target, root, ids)
    lines = _by_id(exported)
    relines = _by_id(again)
    assert counts["created"] == len(ids) == len(lines) and "exists" not in counts
    assert counts["archived"] == 3  # forgotten; copy_b and merged faded by the merge
    assert relines.keys() == lines.keys() == set(ids.values())
    for memory_id, line in lines.items():
        for key in line:
            assert relines[memory_id][key] == line[key], (memory_id, key)
    assert before["forgotten"]["archived"] and not before["forgotten"]["flags"]["faded"]
    assert before["merged"]["flags"]["faded"] and not before["edited"]["archived"]
    for name in ids:
        assert after[name] == before[name], name
