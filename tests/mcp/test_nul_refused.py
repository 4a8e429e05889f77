"""A NUL character is refused in every text field, on both backends, with one sentence naming
the field; a hook prompt holding one is answered; `migrate` carries what PostgreSQL can hold.

PostgreSQL's text and JSON types hold no NUL: before the refusal, a NUL in a tag reached the
database and the caller read a bare "Error executing tool", while SQLite stored it; a store
holding such rows could then not be migrated at all.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import anyio
import httpx
import pytest
import uvicorn
from click.testing import CliRunner
from mcp import Client

from nooa_mcp import Settings, cli
from nooa_mcp.domain.schema import Memory as Record
from nooa_mcp.domain.scope import Scope
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.hosts import server_config
from nooa_mcp.mcp.http import http_app
from nooa_mcp.mcp.server import build_server
from nooa_mcp.serving import build_http_server
from nooa_mcp.storage import open_store

pytestmark = pytest.mark.anyio

NUL = "left\x00right"
#: What Python makes of a byte that is not UTF-8 in a command line (0xff): no UTF-8 form.
LONE = "left\udcffright"

#: (tool, arguments, the field the refusal must name)
CALLS = [
    ("memory_author", {"content": "Tagged.", "tags": [NUL]}, "tags"),
    ("memory_author", {"content": "With people.", "entities": [NUL]}, "entities"),
    ("memory_author", {"content": "Titled.", "title": NUL}, "title"),
    ("memory_author", {"content": "Placed.", "place_or_task": NUL}, "place_or_task"),
    ("memory_author", {"content": NUL}, "content"),
    (
        "memory_author",
        {"content": "Pointed.", "references": [f"url:https://x.org/{NUL}"]},
        "references",
    ),
    (
        "memory_author",
        {"content": "Cued.", "type": "intent", "trigger": {"cue": NUL}},
        "trigger.cue",
    ),
    ("todo", {"action": "add", "content": "A todo.", "tags": [NUL]}, "tags"),
    ("todo", {"action": "add", "content": "A titled todo.", "title": NUL}, "title"),
    ("intent", {"action": "add", "content": "Remind me.", "cue": NUL}, "cue"),
    ("intent", {"action": "check", "text": NUL}, "text"),
    ("memory_recall", {"query": NUL}, "query"),
]


async def _total(client: Client) -> int:
    contents = (await client.read_resource("memory://stats")).contents
    return json.loads(contents[0].text)["total"]


@pytest.mark.parametrize(("tool", "args", "field"), CALLS, ids=[f"{c[0]}-{c[2]}" for c in CALLS])
async def test_a_nul_in_a_text_field_is_refused_naming_the_field_and_nothing_is_written(
    store_target, tool: str, args: dict, field: str
) -> None:
    settings = Settings(store=store_target, owner="alice")
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as client:
        before = await _total(client)
        result = await client.call_tool(tool, args)
        after = await _total(client)
    text = result.content[0].text
    assert result.is_error, text
    assert f"{field}: contains a NUL byte." in text, text
    assert after == before


async def test_a_nul_in_an_updated_tag_is_refused_and_the_tags_stay(store_target) -> None:
    settings = Settings(store=store_target, owner="alice")
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as client:
        made = await client.call_tool("memory_author", {"content": "Kept.", "tags": ["ops"]})
        ident = made.structured_content["id"]
        result = await client.call_tool("memory_update", {"memory_id": ident, "tags": [NUL]})
        view = json.loads(
            (await client.read_resource(f"memory://memories/{ident}")).contents[0].text
        )
    assert result.is_error and "tags: contains a NUL byte." in result.content[0].text
    assert view["tags"] == ["ops"]


async def test_a_hook_prompt_holding_a_nul_is_answered_on_postgres(postgres) -> None:
    settings = Settings(store=postgres, owner="alice")
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as client:
        await client.call_tool(
            "memory_author", {"content": "Deploy the billing service with the release script."}
        )
    server = build_http_server(settings, embedder=HashEmbedder())
    app = http_app(server, host="127.0.0.1", max_sessions_per_client=64)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    userver = uvicorn.Server(server_config(app, log_level="warning", lifespan="on"))
    body = {
        "hook_event_name": "UserPromptSubmit",
        "prompt": "deploy the\x00 billing service",
        "session_id": "s\x00s",
        "cwd": "/tmp",
    }
    async with anyio.create_task_group() as tg:
        tg.start_soon(userver.serve, [sock])
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            with anyio.fail_after(30):
                while not userver.started:
                    await anyio.sleep(0.05)
                statuses = []
                for _ in range(2):  # the first may find the engine still opening (503)
                    response = await http.post("/hooks", json=body)
                    statuses.append(response.status_code)
                    while response.status_code == 503:
                        await anyio.sleep(0.1)
                        response = await http.post("/hooks", json=body)
                    statuses[-1] = response.status_code
        userver.should_exit = True
    assert statuses == [200, 200]
    assert "release script" in response.text  # the memory was injected (and logged)


# --------------------------------------------------------------------------- migrate


async def _store_with_a_nul_row(path: Path, bad_tag: str = NUL) -> tuple[str, list[str]]:
    """An SQLite store (written below today's validation, as an older release could) with a
    memory holding a NUL (or `bad_tag`) in its tags, an edge and an access of it, and two
    clean memories."""
    store = await open_store(path)
    try:
        bad = Record(content="The bad one.", owner="alice", tags=[bad_tag])
        good = [Record(content=f"Clean memory {i}.", owner="alice") for i in range(2)]
        vector = HashEmbedder().embed(["x"])[0]
        async with store.transaction():
            for record in [bad, *good]:
                await store.insert(record, vector)
            from nooa_mcp.domain.schema import AccessRecord, Channel, EdgeType, now

            await store.append_accesses(
                [(bad.id, AccessRecord(ts=now(), channel=Channel.created, reader_owner="alice"))]
            )
            await store.add_edge(good[0].id, bad.id, EdgeType.related, 1.0)
    finally:
        await store.close()
    return bad.id, [g.id for g in good]


@pytest.mark.parametrize("bad_tag", [NUL, LONE], ids=["nul", "lone-surrogate"])
def test_migrate_into_postgres_replaces_a_nul_and_copies_every_memory(
    tmp_path, postgres, bad_tag
) -> None:
    """A NUL PostgreSQL cannot hold (or a lone surrogate, which has no UTF-8 form) becomes
    U+FFFD, named on stderr: the memory, its edge and its access are copied (they were left
    out, a whole memory dropped for one character)."""
    source = tmp_path / "old.sqlite"
    bad, good = anyio.run(_store_with_a_nul_row, source, bad_tag)
    result = CliRunner().invoke(cli.main, ["migrate", str(source), postgres, "--json"])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    report = json.loads(result.stdout)
    assert report["copied"]["memories"] == 3 and report["copied"]["edges"] == 1
    (line,) = report["replaced"]
    assert line.startswith(f"memories {bad}: a NUL character or a lone surrogate in tags"), report
    assert bad in result.stderr

    async def copied() -> dict[str, list[str]]:
        store = await open_store(postgres)
        try:
            found = await store.list_memories(Scope(roles=None), archived=None)
            return {m.id: m.tags for m in found}
        finally:
            await store.close()

    tags = anyio.run(copied)
    assert set(tags) == {bad, *good}
    assert tags[bad] == ["left\ufffdright"]


@pytest.mark.parametrize("bad_tag", [NUL, LONE], ids=["nul", "lone-surrogate"])
def test_an_export_of_a_store_holding_a_nul_imports_whole(tmp_path, bad_tag) -> None:
    """Import refuses a line holding a NUL (or bytes that are not UTF-8, as a lone surrogate
    was written), and with it the whole file: the export writes the replacement character
    instead, so a store of an earlier release moves whole."""
    source = tmp_path / "old.sqlite"
    bad, good = anyio.run(_store_with_a_nul_row, source, bad_tag)
    runner = CliRunner()
    exported = runner.invoke(
        cli.main, ["--store", str(source), "--owner", "alice", "export", "--include-archived"]
    )
    assert exported.exit_code == 0, exported.output
    assert "\\u0000" not in exported.stdout
    exported.stdout_bytes.decode("utf-8")  # strict: every byte UTF-8
    (tmp_path / "moved.jsonl").write_bytes(exported.stdout_bytes)
    target = str(tmp_path / "new.sqlite")
    moved = runner.invoke(
        cli.main, ["--store", target, "--owner", "alice", "import", str(tmp_path / "moved.jsonl")]
    )
    assert moved.exit_code == 0, moved.output
    again = runner.invoke(cli.main, ["--store", target, "--owner", "alice", "export"]).stdout
    assert {json.loads(line)["id"] for line in again.splitlines()} == {bad, *good}
