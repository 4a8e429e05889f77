"""`memory://memories/{id}` opens what the connection may read: its role, shared memories and
the roles the server grants it (recall with a granted role's scope lists those ids); never
more, since the URI has no scope a model could widen (DESIGN.md §10, §13.2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError
from shared_support import call, hash_server, named

from nooa_mcp import Settings

pytestmark = pytest.mark.anyio

BOB_NOTE = "Bob parks the blue bicycle behind the library on Tuesdays."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _bobs(store: Path, read: list[str]) -> tuple[str, list[str]]:
    """Bob's memory's id; what alice reads of its record and access log (or the error)."""
    settings = Settings(store=store, owner="", read=read)
    server = hash_server(settings)
    async with named(server, "bob") as bob:
        bob_id = (await call(bob, "memory_author", {"content": BOB_NOTE}))["id"]
    texts: list[str] = []
    async with named(server, "alice") as alice:
        for uri in (f"memory://memories/{bob_id}", f"memory://memories/{bob_id}/access-log"):
            try:
                texts.append((await alice.read_resource(uri)).contents[0].text)
            except MCPError as exc:
                texts.append(f"error: {exc}")
    return bob_id, texts


async def test_a_granted_roles_memory_opens_as_a_resource(tmp_path: Path) -> None:
    _, (record, log) = await _bobs(tmp_path / "granted.sqlite", ["bob"])
    assert json.loads(record)["content"] == BOB_NOTE
    assert json.loads(record)["writable"] is False
    assert [a["channel"] for a in json.loads(log)["items"]] == ["created"]


async def test_without_a_grant_another_roles_memory_is_plainly_not_found(tmp_path: Path) -> None:
    bob_id, (record, log) = await _bobs(tmp_path / "alone.sqlite", [])
    for text in (record, log):
        assert text.startswith("error: ") and f"no memory with id '{bob_id}'" in text
        assert "bicycle" not in text
