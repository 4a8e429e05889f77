"""A write to a memory of a role the caller may only read (a server-side grant) is refused as
read-only, not answered "no memory with id" (recall shows it); an id the caller cannot read
stays plainly not found (DESIGN.md §4.6, §10)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from shared_support import call, hash_server, named, reply_text

from nooa_mcp import Settings

pytestmark = pytest.mark.anyio

BOB_NOTE = "Bob parks the blue bicycle behind the library on Tuesdays."
CAROL_NOTE = "Carol waters the office fern every Friday morning."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _seed(settings: Settings) -> tuple[Any, str, str]:
    server = hash_server(settings)
    async with named(server, "bob") as bob:
        bob_id = (await call(bob, "memory_author", {"content": BOB_NOTE}))["id"]
    async with named(server, "carol") as carol:
        carol_id = (await call(carol, "memory_author", {"content": CAROL_NOTE}))["id"]
    return server, bob_id, carol_id


@pytest.mark.parametrize(
    ("tool", "extra"),
    [("memory_update", {"title": "Bicycle"}), ("memory_update", {"forget": True})],
)
async def test_a_write_to_a_granted_roles_memory_says_it_is_read_only(
    tmp_path: Path, tool: str, extra: dict[str, Any]
) -> None:
    settings = Settings(store=tmp_path / "s.sqlite", owner="", read=["bob"])
    server, bob_id, carol_id = await _seed(settings)
    async with named(server, "alice") as alice:
        seen = await call(alice, "memory_recall", {"query": "blue bicycle", "scope": "bob"})
        assert bob_id in [h["id"] for h in seen["hits"]]
        refused = await alice.call_tool(tool, {"memory_id": bob_id[:8], **extra})
        ungranted = await alice.call_tool(tool, {"memory_id": carol_id[:8], **extra})
    text = reply_text(refused)
    assert refused.is_error
    assert "role 'bob', which this server lets you read but not change" in text
    assert "no memory with id" not in text
    # Carol's memory is unreadable to alice: plainly not found, her role never named.
    assert ungranted.is_error
    assert f"no memory with id '{carol_id[:8]}'" in reply_text(ungranted)
    assert "carol" not in reply_text(ungranted)
    async with named(server, "bob") as bob:
        still = await call(bob, "memory_recall", {"query": "blue bicycle"})
    assert [h["id"] for h in still["hits"]][:1] == [bob_id]


async def test_a_link_to_a_granted_roles_memory_says_it_is_read_only(tmp_path: Path) -> None:
    """A link is a write too: to a memory recall shows from a granted role it answered "no
    memory with id" (the update's finding, left on links); nothing is written either way."""
    settings = Settings(store=tmp_path / "s.sqlite", owner="", read=["bob"])
    server, bob_id, carol_id = await _seed(settings)
    async with named(server, "alice") as alice:
        links = [{"target": bob_id[:8], "relation": "supports"}]
        refused = await alice.call_tool(
            "memory_author", {"content": "Alice rides to the library too.", "links": links}
        )
        links = [{"target": carol_id[:8], "relation": "supports"}]
        ungranted = await alice.call_tool(
            "memory_author", {"content": "Alice waters plants as well.", "links": links}
        )
        mine = await call(alice, "memory_recall", {"query": "Alice library plants"})
    assert refused.is_error
    text = reply_text(refused)
    assert "role 'bob', which this server lets you read but not link to" in text
    assert ungranted.is_error
    assert f"no memory with id '{carol_id[:8]}'" in reply_text(ungranted)
    assert "carol" not in reply_text(ungranted)
    assert mine["hits"] == []


@pytest.mark.parametrize(
    ("tool", "args", "action"),
    [
        ("todo", {"action": "done"}, "mark done"),
        ("todo", {"action": "drop"}, "drop"),
        ("todo", {"action": "reopen"}, "reopen"),
        ("intent", {"action": "cancel"}, "cancel"),
    ],
)
async def test_closing_a_granted_roles_todo_or_intent_says_it_is_read_only(
    tmp_path: Path, tool: str, args: dict[str, Any], action: str
) -> None:
    """The todo and intent tools answered "no memory with id" for a todo or intent recall
    had just shown from a granted role (the update's finding, left on them); an unreadable
    one stays plainly not found, and nothing changes either way."""
    settings = Settings(store=tmp_path / "s.sqlite", owner="", read=["bob"])
    server = hash_server(settings)
    kind = "todo" if tool == "todo" else "intent"
    extra = {} if tool == "todo" else {"cue": "bicycle"}
    ids = {}
    for who in ("bob", "carol"):
        async with named(server, who) as client:
            made = await call(client, tool, {"action": "add", "content": f"{who} {kind}", **extra})
            ids[who] = made["id"]
    async with named(server, "alice") as alice:
        seen = await call(alice, "memory_recall", {"query": f"bob {kind}", "scope": "bob"})
        assert ids["bob"] in [h["id"] for h in seen["hits"]]
        refused = await alice.call_tool(tool, {**args, "memory_id": ids["bob"][:8]})
        ungranted = await alice.call_tool(tool, {**args, "memory_id": ids["carol"][:8]})
    assert refused.is_error
    text = reply_text(refused)
    assert f"role 'bob', which this server lets you read but not {action}" in text
    assert "no memory with id" not in text
    assert ungranted.is_error
    assert f"no memory with id '{ids['carol'][:8]}'" in reply_text(ungranted)
    assert "carol" not in reply_text(ungranted)
    async with named(server, "bob") as bob:
        listed = await call(bob, tool, {"action": "list"})
    items = listed["todos"] if tool == "todo" else listed["intents"]
    assert [i["id"] for i in items] == [ids["bob"]]


async def test_a_reference_to_a_granted_roles_memory_says_it_is_read_only(
    tmp_path: Path,
) -> None:
    """A `memory:` reference captures the target's words into the new memory: to a granted
    role's memory it answered "no memory with id" though recall shows it; it is refused as
    a link to one is. An unreadable target stays plainly not found; nothing is written."""
    settings = Settings(store=tmp_path / "s.sqlite", owner="", read=["bob"])
    server, bob_id, carol_id = await _seed(settings)
    async with named(server, "alice") as alice:
        refused = await alice.call_tool(
            "memory_author",
            {"content": "Alice rides to the library too.", "references": [f"memory:{bob_id[:8]}"]},
        )
        ungranted = await alice.call_tool(
            "memory_author",
            {"content": "Alice waters plants as well.", "references": [f"memory:{carol_id}"]},
        )
        mine = await call(alice, "memory_recall", {"query": "Alice library plants"})
    assert refused.is_error
    text = reply_text(refused)
    assert "role 'bob', which this server lets you read but not reference" in text
    assert "no memory with id" not in text
    assert ungranted.is_error
    assert f"no memory with id '{carol_id}'" in reply_text(ungranted)
    assert "carol" not in reply_text(ungranted)
    assert mine["hits"] == []
