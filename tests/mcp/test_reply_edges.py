"""Edges of what the MCP front end says: paging cursors, refusals that name the field, clip
markers at a zero budget, a memory's state in its access history. Each was a place where a
changed line went unnoticed by every other test."""

from __future__ import annotations

import json
from pathlib import Path
from uuid import UUID

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from nooa_mcp import Memory
from nooa_mcp.config import Settings
from nooa_mcp.cursors import CURSORS, KEPT, Cursors
from nooa_mcp.domain.replies import ExplainResult
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp.rendering import clip, render_explain
from nooa_mcp.mcp.server import build_server
from nooa_mcp.mcp.validation import argument_sentence

pytestmark = pytest.mark.anyio


@pytest.fixture
async def client(tmp_path: Path):
    settings = Settings(store=tmp_path / "memory.sqlite", owner="tester")
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as c:
        yield c


async def read_json(client: Client, uri: str) -> dict:
    return json.loads((await client.read_resource(uri)).contents[0].text)  # type: ignore[union-attr]


async def test_todo_pages_follow_open_then_done_behind_cursors_that_say_no_position(
    client,
) -> None:
    heads = ["Rotate the deploy key", "Renew the TLS cert", "Archive old logs", "Fix the pager"]
    ids = []
    for head in heads:
        reply = await client.call_tool("todo", {"action": "add", "content": head})
        ids.append(reply.structured_content["id"])
    await client.call_tool("todo", {"action": "done", "memory_id": ids[1]})

    pages, uri = [], "memory://todos?limit=2"
    while uri:
        page = await read_json(client, uri)
        pages.append([(i["head"], i["status"]) for i in page["items"]])
        uri = page["next_uri"] and f"{page['next_uri']}&limit=2"
    assert pages == [
        [("Rotate the deploy key", "open"), ("Archive old logs", "open")],
        [("Fix the pager", "open"), ("Renew the TLS cert", "done")],
        [],  # a full page always offers a next one
    ]
    # The cursor continues the open todos after the first, then the rest; it is a token, not
    # the store's sequence number (which counts every role's rows: DESIGN.md §10), and a
    # position written by hand is no cursor.
    first = await read_json(client, "memory://todos?limit=1")
    cursor = first["next_cursor"]
    assert not any(c in cursor for c in ".") and not cursor.isdigit()
    after = await read_json(client, f"memory://todos?cursor={cursor}&limit=10")
    assert [i["head"] for i in after["items"]] == [
        "Archive old logs",
        "Fix the pager",
        "Renew the TLS cert",
    ]
    for forged in ("1", "open.1"):
        with pytest.raises(MCPError, match="cursor"):
            await read_json(client, f"memory://todos?cursor={forged}&limit=10")
    # A cursor stands for a position in its own listing only: another listing refuses it
    # (a todo's position is no sequence number of the access stream, nor of the archive).
    for other in ("memory://access-log", "memory://archived"):
        with pytest.raises(MCPError, match="cursor"):
            await read_json(client, f"{other}?cursor={cursor}&limit=10")
    stream = await read_json(client, "memory://access-log?limit=1")
    with pytest.raises(MCPError, match="cursor"):
        await read_json(client, f"memory://todos?cursor={stream['next_cursor']}&limit=10")


async def test_a_cursor_is_its_owners_and_another_roles_paging_never_lets_it_go(
    tmp_path: Path,
) -> None:
    """Cursors were one list for the process, the newest 10,000: a role paging heavily let go
    of every other role's cursors, and any role could resume with one another role was given.
    Now each owner keeps its own, and another owner's is refused."""
    store = tmp_path / "memory.sqlite"
    alice = Settings(store=store, owner="alice")
    async with Client(build_server(alice, embedder=HashEmbedder()), cache=None) as c:
        for head in ("Rotate the deploy key", "Renew the TLS cert", "Archive old logs"):
            await c.call_tool("todo", {"action": "add", "content": head})
        cursor = (await read_json(c, "memory://todos?limit=1"))["next_cursor"]
    # Bob pages far more than any one owner's cursors are kept.
    for n in range(KEPT * 11):
        CURSORS.issue("bob", "memory://todos", f"open.{n}")
    bob = Settings(store=store, owner="bob")
    async with Client(build_server(bob, embedder=HashEmbedder()), cache=None) as c:
        with pytest.raises(MCPError, match="cursor"):
            await read_json(c, f"memory://todos?cursor={cursor}&limit=10")
    async with Client(build_server(alice, embedder=HashEmbedder()), cache=None) as c:
        after = await read_json(c, f"memory://todos?cursor={cursor}&limit=10")
    assert [i["head"] for i in after["items"]] == ["Renew the TLS cert", "Archive old logs"]


def test_cursors_are_bounded_per_owner_and_in_owners() -> None:
    cursors = Cursors(kept=3, owners=2)
    mine = cursors.issue("alice", "memory://todos", "open.1")
    theirs = [cursors.issue("bob", "memory://todos", f"open.{n}") for n in range(10)]
    assert cursors.position("alice", "memory://todos", mine) == "open.1"
    assert cursors.position("bob", "memory://todos", mine) is None
    # Bob keeps his newest three.
    assert [cursors.position("bob", "memory://todos", t) for t in theirs] == [None] * 7 + [
        "open.7",
        "open.8",
        "open.9",
    ]
    # A third owner lets go of the owner unused the longest (bob: alice was just read).
    cursors.position("alice", "memory://todos", mine)
    cursors.issue("carol", "memory://todos", "open.1")
    assert cursors.position("alice", "memory://todos", mine) == "open.1"
    assert cursors.position("bob", "memory://todos", theirs[-1]) is None


async def test_an_offset_outside_the_content_is_refused_naming_offset(client) -> None:
    reply = await client.call_tool("memory_author", {"content": "The VPN gateway is vpn-2."})
    memory_id = reply.structured_content["id"]
    with pytest.raises(MCPError) as refused:
        await client.read_resource(f"memory://memories/{memory_id}?offset=999")
    assert str(refused.value).startswith("offset: '999' is not a character offset")


async def test_an_argument_name_that_is_not_an_identifier_is_quoted_and_cut(client) -> None:
    odd = "not a name! " * 10
    reply = await client.call_tool("memory_recall", {"query": "vpn", odd: 1})
    text = reply.content[0].text
    assert reply.is_error
    assert f"{odd[:40]!r}: is not an argument of memory_recall" in text
    assert odd[:41] not in text


def test_a_budget_of_zero_or_less_keeps_nothing_and_says_where_the_rest_is() -> None:
    marker = "… [clipped: 5 of 5 characters left out; read memory://x]"
    assert clip("abcde", 0, "memory://x") == marker
    assert clip("abcde", -3, "memory://x") == marker
    assert clip("abcde", 2, "memory://x").startswith("ab… [clipped: 3 of 5")


@pytest.mark.parametrize(("state", "shown"), [("faded", " (faded)"), ("live", ""), (None, "")])
def test_an_access_history_names_a_memory_that_is_not_live(state, shown) -> None:
    result = ExplainResult(mode="replay", memory_id="0123456789abcdef", state=state)
    first = render_explain(result).splitlines()[0]
    assert first.startswith(f"Access history of 01234567{shown}: 0 access(es)")


async def test_explain_keeps_to_the_scope_it_is_given(tmp_path: Path) -> None:
    store = tmp_path / "memory.sqlite"
    async with Memory.open(store, owner="coder@laptop", embedder=HashEmbedder()) as other:
        await other.author("The staging database password rotates every Monday.")
    settings = Settings(store=store, owner="coder@desktop")
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as client:
        mine = "The staging database lives in eu-west."
        await client.call_tool("memory_author", {"content": mine})
        query = {"query": "staging database"}
        role = await client.call_tool("memory_explain", query)
        instance = await client.call_tool("memory_explain", {**query, "scope": "instance"})
    assert len(role.structured_content["rows"]) == 2
    assert [r["head"] for r in instance.structured_content["rows"]] == [mine]


async def test_a_listing_of_every_todo_says_how_many_without_a_status(client) -> None:
    await client.call_tool("todo", {"action": "add", "content": "Rotate the deploy key"})
    listing = await client.call_tool("todo", {"action": "list", "status": "all"})
    assert listing.content[0].text.splitlines()[0] == "1 todo(s):"


def test_a_validation_problem_without_a_sentence_of_ours_drops_pydantics_input() -> None:
    class Arguments(BaseModel):
        ticket: UUID

    with pytest.raises(ValidationError) as refused:
        Arguments(ticket="not-a-uuid")  # type: ignore[arg-type]
    assert argument_sentence(refused.value).startswith("ticket: should be a valid UUID")
