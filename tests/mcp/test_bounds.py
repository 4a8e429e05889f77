"""Bounded replies whatever the store holds (DESIGN.md §13.4).

A store of large memories (100k characters each, long titles, many todos and intents) is read
through every tool, resource and prompt; no reply passes the 25k tokens clients refuse,
counted with the bundled MiniLM tokenizer (tests/tokens_support.py), not with the product's
own estimate.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client
from mcp_types import TextResourceContents
from tokens_support import CLIENT_CAP, real_tokens

from nooa_mcp import Memory
from nooa_mcp.config import Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp.server import build_server

pytestmark = pytest.mark.anyio

WORDS = [
    "harbor",
    "crane",
    "relay",
    "station",
    "tide",
    "ledger",
    "folder",
    "quarry",
    "beacon",
    "lantern",
]


def big(n: int) -> str:
    words = [f"{WORDS[(n * 7 + i) % len(WORDS)]}{n}q{i % 40}" for i in range(16_000)]
    return f"Entry {n}: " + " ".join(words)[:99_000]


async def test_no_reply_passes_the_cap_on_a_store_of_large_memories(tmp_path: Path) -> None:
    settings = Settings(store=tmp_path / "memory.sqlite", owner="coder@laptop")
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        specs = [{"content": big(n), "title": f"T{n} " + "t" * 400} for n in range(40)]
        specs += [{"content": big(100 + n), "type": "todo"} for n in range(30)]
        ids = [r.id for r in await mem.author_many(specs)]
        assert len(set(ids)) == len(ids)
        for n in range(10):
            await mem.intent("add", content=big(200 + n), cue=f"harbor{n}")
        await mem.update(ids[0], links=[{"target": i, "relation": "related"} for i in ids[1:30]])
    sizes: dict[str, int] = {}
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as client:
        calls = [
            ("memory_recall", {"query": "harbor crane relay station", "k": 50, "hops": 3}),
            ("memory_explain", {"query": "harbor crane relay station", "k": 50}),
            ("memory_explain", {"memory_id": ids[0]}),
            ("memory_explain", {"query": "harbor", "memory_id": ids[5], "k": 50}),
            ("todo", {"action": "list"}),
            ("intent", {"action": "list"}),
            ("memory_author", {"content": big(999)}),
            ("memory_update", {"memory_id": ids[1], "content": big(998)}),
        ]
        for tool, args in calls:
            result = await client.call_tool(tool, args)
            assert not result.is_error, (tool, result.content[0].text[:300])
            text = result.content[0].text
            sizes[tool + json.dumps(sorted(args))[:40]] = real_tokens(text) + real_tokens(
                json.dumps(result.structured_content, ensure_ascii=False)
            )
        uris = [
            f"memory://memories/{ids[0]}",
            f"memory://memories/{ids[0]}?offset=50000",
            f"memory://memories/{ids[0]}/access-log",
            "memory://access-log",
            "memory://todos",
            "memory://archived",
            "memory://stats",
            "memory://context",
        ]
        for uri in uris:
            for content in (await client.read_resource(uri)).contents:
                assert isinstance(content, TextResourceContents)
                sizes[uri] = real_tokens(content.text)
        for name in ("memory_guide", "session_start", "reflect"):
            prompt = await client.get_prompt(name)
            sizes[f"prompt {name}"] = sum(
                real_tokens(json.dumps(m.model_dump(mode="json"))) for m in prompt.messages
            )
    over = {k: v for k, v in sizes.items() if v > CLIENT_CAP}
    assert over == {}
    assert len(sizes) == len(calls) + len(uris) + 3


@pytest.mark.parametrize(
    ("tool", "args", "field"),
    [
        ("memory_author", {"content": "a note", "title": "w " * 300}, "title"),
        ("memory_author", {"content": "a note", "place_or_task": "w " * 300}, "place_or_task"),
        ("memory_author", {"content": "a note", "place_or_task": "desk\x00"}, "place_or_task"),
        ("memory_update", {"title": "w " * 300}, "title"),
        ("memory_update", {"title": "a\x00b"}, "title"),
        ("todo", {"action": "add", "content": "a task", "title": "w " * 300}, "title"),
    ],
)
async def test_titles_and_places_are_labels_not_a_second_content_field(
    tmp_path: Path, tool: str, args: dict[str, str], field: str
) -> None:
    """A 600k-character title once slipped in through memory_update (and place_or_task
    through memory_author), and every later read of that memory passed the reply cap."""
    settings = Settings(store=tmp_path / "memory.sqlite", owner="coder@laptop")
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as client:
        seed = await client.call_tool("memory_author", {"content": "The relay is in bay 4."})
        memory_id = seed.structured_content["id"]
        if tool == "memory_update":
            args = {"memory_id": memory_id, **args}
        result = await client.call_tool(tool, args)
        assert result.is_error
        assert result.content[0].text.split(": ", 1)[1].startswith(f"{field}: ")
        shown = await client.read_resource(f"memory://memories/{memory_id}")
        text = shown.contents[0].text
        assert "w w w" not in text and len(text) < 2_000
        listed = await client.call_tool("memory_recall", {"query": "relay bay", "k": 50})
        assert [h["id"] for h in listed.structured_content["hits"]] == [memory_id]
