"""Concurrency inside one server: no half-writes, no lost updates (DESIGN.md §15).

Many tool calls run at once on one connection (the in-memory client) and across HTTP clients
(uvicorn on a loopback socket). Afterwards the store must read as if the calls had run one at a
time: each memory holds the last acknowledged value of every field, its embedding is the
embedding of its current text, and its per-channel counters agree with the access stream.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import anyio
import numpy as np
import pytest
from http_serving import connect, serving
from mcp import Client
from mcp_types import TextResourceContents

from nooa_mcp.config import Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp.server import build_server

pytestmark = pytest.mark.anyio

MEMORIES = 8
ROUNDS = 8
TOKENS = {
    "token-for-coder-laptop-0123456789": "coder@laptop",
    "token-for-coder-desktop-0123456789": "coder@desktop",
    "token-for-coder-server-0123456789": "coder@server",
}


def text_of(title: str, content: str) -> str:
    return f"{title}. {content}" if title else content


def check_store(store: Path, expected: dict[str, dict[str, object]]) -> None:
    """Every memory holds its last acknowledged fields, a matching vector and true counters."""
    embedder = HashEmbedder()
    conn = sqlite3.connect(store)
    conn.row_factory = sqlite3.Row
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('integrity-check')")
        for row in conn.execute("SELECT * FROM memories"):
            want = expected.get(row["id"], {})
            for name, value in want.items():
                assert row[name] == value, f"{row['id'][:8]}.{name} lost its last update"
            vector = np.frombuffer(row["embedding"], dtype=np.float32)
            fresh = embedder.embed([text_of(row["title"], row["content"])])[0]
            assert np.allclose(vector, fresh, atol=1e-6), (
                f"{row['id'][:8]}'s embedding is not of its text {row['title']!r}"
            )
            stream = dict(
                conn.execute(
                    "SELECT channel, count(*) FROM accesses WHERE memory_id = ? GROUP BY channel",
                    (row["id"],),
                ).fetchall()
            )
            assert json.loads(row["channels"]) == stream, f"{row['id'][:8]}'s counters drifted"
    finally:
        conn.close()


async def hammer(clients: list[Client], ids: list[str]) -> dict[str, dict[str, object]]:
    """Run updates, renames, todo flips, recalls and context reads all at once.

    Each memory's content is changed by one task and its title by another, so the two race on
    the same row; the last value each task got acknowledged is what must remain.
    """
    expected: dict[str, dict[str, object]] = {i: {} for i in ids}

    async def contents(k: int) -> None:
        client = clients[k % len(clients)]
        for r in range(ROUNDS):
            value = f"Content {r} of {SUBJECTS[k]}: the relay station {r} restarts after {k} beats."
            result = await client.call_tool(
                "memory_update", {"memory_id": ids[k], "content": value, "tags": [f"c{r}"]}
            )
            assert not result.is_error, result.content
            expected[ids[k]]["content"] = value
            expected[ids[k]]["tags"] = json.dumps([f"c{r}"])

    async def titles(k: int) -> None:
        client = clients[(k + 1) % len(clients)]
        for r in range(ROUNDS):
            value = f"Title {r} for {k}"
            result = await client.call_tool("memory_update", {"memory_id": ids[k], "title": value})
            assert not result.is_error, result.content
            expected[ids[k]]["title"] = value

    async def readers(k: int) -> None:
        client = clients[k % len(clients)]
        for r in range(ROUNDS):
            recalled = await client.call_tool("memory_recall", {"query": f"relay station {r}"})
            assert not recalled.is_error, recalled.content
            context = (await client.read_resource("memory://context")).contents[0]
            assert isinstance(context, TextResourceContents)

    async with anyio.create_task_group() as tg:
        for k in range(len(ids)):
            tg.start_soon(contents, k)
            tg.start_soon(titles, k)
        for k in range(4):
            tg.start_soon(readers, k)
    return expected


SUBJECTS = ("harbor", "glacier", "orchard", "falcon", "tundra")
SUBJECTS += ("walnut", "beacon", "cobalt", "marble", "canyon")


async def seed(client: Client) -> list[str]:
    ids = []
    for k in range(MEMORIES):
        subject = SUBJECTS[k]
        result = await client.call_tool(
            "memory_author",
            {"content": f"The {subject} {subject} log keeps {subject} restarts.", "title": "s"},
        )
        assert result.structured_content["status"] == "created", result.content
        ids.append(result.structured_content["id"])
    return ids


async def test_concurrent_calls_on_one_connection_never_mix_writes(tmp_path: Path) -> None:
    settings = Settings(store=tmp_path / "memory.sqlite", owner="coder@laptop")
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as client:
        ids = await seed(client)
        expected = await hammer([client], ids)
    check_store(settings.store, expected)


async def test_concurrent_todo_changes_keep_the_last_acknowledged_status(tmp_path: Path) -> None:
    settings = Settings(store=tmp_path / "memory.sqlite", owner="coder@laptop")
    final: dict[str, str] = {}
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as client:
        todos = []
        for k in range(6):
            added = await client.call_tool("todo", {"action": "add", "content": f"Ship {k}"})
            todos.append(added.structured_content["id"])

        async def flip(todo_id: str, actions: list[str]) -> None:
            for action in actions:
                result = await client.call_tool("todo", {"action": action, "memory_id": todo_id})
                assert not result.is_error, result.content
                final[todo_id] = {"done": "done", "drop": "dropped"}.get(action, "open")

        async with anyio.create_task_group() as tg:
            for n, todo_id in enumerate(todos):
                tg.start_soon(flip, todo_id, ["done", "reopen", "drop", "reopen", "done"][n % 5 :])
                tg.start_soon(client.call_tool, "memory_reflect", {})
    conn = sqlite3.connect(settings.store)
    statuses = dict(conn.execute("SELECT id, status FROM memories WHERE type = 'todo'"))
    conn.close()
    assert statuses == final
    check_store(settings.store, {})


async def test_the_same_author_call_at_once_on_one_connection_makes_one_memory(
    tmp_path: Path,
) -> None:
    settings = Settings(store=tmp_path / "memory.sqlite", owner="coder@laptop")
    args = {"content": "Deploys freeze on Fridays after 15:00.", "tags": ["deploy"]}
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as client:
        replies = []

        async def author() -> None:
            replies.append(await client.call_tool("memory_author", args))

        async with anyio.create_task_group() as tg:
            for _ in range(12):
                tg.start_soon(author)
        stats = await client.call_tool("memory_recall", {"query": "deploy freeze"})
    assert len({r.structured_content["id"] for r in replies}) == 1
    assert sorted(r.structured_content["status"] for r in replies) == ["created"] + ["exists"] * 11
    assert len(stats.structured_content["hits"]) == 1


# --------------------------------------------------------------------------- across HTTP clients


async def test_concurrent_http_clients_never_mix_writes(tmp_path: Path) -> None:
    # Three instances of one role, each with its own token and Memory, on one server.
    settings = Settings(store=tmp_path / "memory.sqlite")
    tokens = list(TOKENS)
    with anyio.fail_after(120):  # a hang guard, not a speed assertion
        async with (
            serving(settings, TOKENS) as url,
            connect(url, tokens[0]) as a,
            connect(url, tokens[1]) as b,
            connect(url, tokens[2]) as c,
        ):
            ids = await seed(a)
            expected = await hammer([a, b, c], ids)
    check_store(settings.store, expected)
