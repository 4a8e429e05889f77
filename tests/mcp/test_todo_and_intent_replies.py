"""What the todo and intent tools say back: a listing names the status it lists, done todos
stay out of the session start and the context block, `memory://todos` lists open todos before
done ones, and no reply has a double space.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client

from nooa_mcp import Settings
from nooa_mcp.domain.injection import SHARED_TODO
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp.server import build_server


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(store=tmp_path / "mcp.sqlite", owner="tester")


@pytest.fixture
async def client(settings: Settings):
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as c:
        yield c


async def call(client: Client, tool: str, args: dict) -> tuple[bool, str, dict | None]:
    result = await client.call_tool(tool, args)
    return result.is_error, result.content[0].text, result.structured_content


async def _todos(client: Client) -> None:
    """One todo written first and then done, two open ones written after it."""
    ids = []
    for content in (
        "Renew the TLS certificate",
        "Write the quarterly report",
        "Book the team offsite venue",
    ):
        _, _, added = await call(client, "todo", {"action": "add", "content": content})
        ids.append(added["id"])
    is_error, text, _ = await call(client, "todo", {"action": "done", "memory_id": ids[0]})
    assert not is_error, text


@pytest.mark.anyio
async def test_todo_list_names_the_status_it_lists(client: Client) -> None:
    await _todos(client)
    _, done_text, done_list = await call(client, "todo", {"action": "list", "status": "done"})
    assert [t["content"] for t in done_list["todos"]] == ["Renew the TLS certificate"]
    assert "1 done todo(s):" in done_text
    assert "open todo(s):" not in done_text
    _, open_text, _ = await call(client, "todo", {"action": "list"})
    assert "2 open todo(s):" in open_text


@pytest.mark.anyio
async def test_done_todos_stay_out_of_session_start_and_the_context_block(client: Client) -> None:
    await _todos(client)
    prompt = await client.get_prompt("session_start")
    start = "\n".join(m.content.text for m in prompt.messages)
    context = (await client.read_resource("memory://context")).contents[0].text
    for shown in (start, context):
        assert "Write the quarterly report" in shown
        assert "Renew the TLS certificate" not in shown


@pytest.mark.anyio
async def test_memory_todos_lists_open_todos_before_done_ones(client: Client) -> None:
    await _todos(client)
    page = json.loads((await client.read_resource("memory://todos")).contents[0].text)
    statuses = [item["status"] for item in page["items"]]
    assert sorted(statuses) == ["done", "open", "open"]
    assert statuses == ["open", "open", "done"]


@pytest.mark.anyio
async def test_todo_and_intent_replies_have_no_double_spaces(client: Client) -> None:
    texts = []
    for tool, args in (
        ("intent", {"action": "add", "content": "Mention the RFC", "cue": "database migration"}),
        ("intent", {"action": "check"}),
        ("intent", {"action": "check", "text": "planning the database migration"}),
        ("intent", {"action": "list"}),
        ("todo", {"action": "add", "content": "Write the quarterly report"}),
        ("todo", {"action": "list"}),
        ("todo", {"action": "list", "status": "done"}),
    ):
        is_error, text, _ = await call(client, tool, args)
        assert not is_error, text
        texts.append(text)
    # Without text only times are checked, and the reply says how to check a cue.
    assert texts[1].startswith("check: 0 fired (times only: pass text to check cues against it).")
    assert texts[2].startswith("check: 1 fired.")
    for text in texts:
        assert "  " not in text, repr(text)


FOREIGN = [
    ("todo", {"action": "add", "content": "Rotate keys.", "memory_id": "abc12345"}, "memory_id"),
    ("todo", {"action": "list", "content": "stray"}, "content"),
    ("todo", {"action": "done", "memory_id": "abc12345", "content": "x"}, "content"),
    ("intent", {"action": "list", "memory_id": "abc12345"}, "memory_id"),
    ("intent", {"action": "check", "cue": "deploy"}, "cue"),
    ("intent", {"action": "cancel", "memory_id": "abc12345", "text": "now"}, "text"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool", "args", "field"), FOREIGN, ids=[f"{t}-{a['action']}" for t, a, _ in FOREIGN]
)
async def test_an_argument_of_another_action_is_refused_naming_it(client, tool, args, field):
    """`todo add` with memory_id stored a todo tied to nothing and said nothing (auditor): a
    model believed the link it never got."""
    reply = await client.call_tool(tool, args)
    assert reply.is_error, reply.content[0].text
    assert f"{field}: is not used by {args['action']}." in reply.content[0].text
    listed = await client.call_tool("todo", {"action": "list"})
    assert listed.structured_content["todos"] == []


@pytest.mark.anyio
async def test_todo_list_marks_a_shared_todo_as_the_users_to_close(settings: Settings) -> None:
    """Before: `- [022fd8ed] [open] MEDIUM Renew the TLS certificate`, and `done` on it was
    refused (a role may not write a shared memory); session start notes it, so does the list."""
    from nooa_mcp import Memory

    async with Memory.open(settings.store, owner="", embedder=HashEmbedder()) as shared:
        everyone = (await shared.todo("add", content="Renew the TLS certificate")).id
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as client:
        _, _, own = await call(client, "todo", {"action": "add", "content": "Tidy the fixtures"})
        _, text, listed = await call(client, "todo", {"action": "list"})
        lines = {line[3:11]: line for line in text.splitlines() if line.startswith("- [")}
        assert lines[everyone[:8]].endswith(f"({SHARED_TODO})"), text
        assert "shared" not in lines[own["id"][:8]]
        assert {t["id"]: t["shared"] for t in listed["todos"]} == {
            everyone: True,
            own["id"]: False,
        }
        is_error, refused, _ = await call(client, "todo", {"action": "done", "memory_id": everyone})
        assert is_error and "shared" in refused


@pytest.mark.anyio
async def test_an_empty_listing_says_so_once(client: Client) -> None:
    """ "0 open todo(s):" over "No open todos." (and "Intents:" over "None.") said it twice."""
    assert (await call(client, "todo", {"action": "list"}))[1] == "No open todos."
    assert (await call(client, "intent", {"action": "list"}))[1] == "No intents."
