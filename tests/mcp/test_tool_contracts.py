"""Each tool's parameters, pinned in one place (DESIGN.md §13.1).

A tool's parameters are spelled once (its signature) and validated once (pydantic); this test
is the one place that says what the model is offered. Changing a tool's surface means changing
this table, the tool description, prompts/ and the README together. No tool takes an owner
(DESIGN.md §10: the owner comes from configuration, a token or the client's name).
"""

from __future__ import annotations

import pytest
from mcp import Client

from nooa_mcp import Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp.server import build_server

pytestmark = pytest.mark.anyio

CONTRACTS: dict[str, set[str]] = {
    "memory_author": {
        "content",
        "type",
        "title",
        "importance",
        "salience",
        "confidence",
        "tags",
        "entities",
        "place_or_task",
        "references",
        "links",
        "valid_from",
        "valid_to",
        "trigger",
        "revive",
    },
    "memory_recall": {"query", "k", "scope", "types", "hops", "include_archived"},
    "memory_explain": {"query", "memory_id", "k", "scope", "hops"},
    "memory_update": {
        "memory_id",
        "content",
        "title",
        "importance",
        "tags",
        "status",
        "links",
        "valid_to",
        "forget",
    },
    "todo": {"action", "content", "memory_id", "title", "importance", "tags", "status", "limit"},
    "intent": {
        "action",
        "content",
        "fire_at",
        "cue",
        "every_hours",
        "memory_id",
        "text",
        "importance",
    },
    "memory_reflect": {"steps"},
}
REQUIRED: dict[str, set[str]] = {
    "memory_author": {"content"},
    "memory_recall": {"query"},
    "memory_update": {"memory_id"},
    "todo": {"action"},
    "intent": {"action"},
}


@pytest.fixture
async def tools(tmp_path):
    settings = Settings(store=tmp_path / "m.sqlite", owner="tester")
    async with Client(build_server(settings, embedder=HashEmbedder())) as client:
        yield {t.name: t for t in (await client.list_tools()).tools}


async def test_the_server_offers_exactly_the_pinned_tools(tools):
    assert set(tools) == set(CONTRACTS)


@pytest.mark.parametrize("name", sorted(CONTRACTS))
async def test_each_tool_takes_exactly_its_pinned_parameters(tools, name):
    schema = tools[name].input_schema
    assert set(schema["properties"]) == CONTRACTS[name]
    assert set(schema.get("required", [])) == REQUIRED.get(name, set())
    assert "owner" not in schema["properties"]


async def test_the_tool_list_stays_under_6_kb_with_no_refs(tools):
    """Every client puts name + description + inputSchema of every tool in the
    model's context on every turn; some clients reject $ref/$defs."""
    import json

    listed = [
        {"name": t.name, "description": t.description, "inputSchema": t.input_schema}
        for t in tools.values()
    ]
    text = json.dumps(listed, separators=(",", ":"), ensure_ascii=False)
    assert len(text.encode()) <= 6 * 1024
    assert "$ref" not in text and "$defs" not in text
    assert "SPEC" not in text  # the model cannot read the spec
    outputs = json.dumps([t.output_schema for t in tools.values()])
    assert "$ref" not in outputs and "$defs" not in outputs


async def test_lean_schemas_still_validate_what_the_tools_accept(tmp_path):
    """The listed schema is rewritten for the model; arguments are still validated by the
    tool's own model (an unknown relation is refused naming the field)."""
    settings = Settings(store=tmp_path / "m.sqlite", owner="tester")
    async with Client(build_server(settings, embedder=HashEmbedder())) as client:
        first = await client.call_tool("memory_author", {"content": "the harbour crane"})
        bad = await client.call_tool(
            "memory_author",
            {
                "content": "x",
                "links": [{"target": first.structured_content["id"], "relation": "x"}],
            },
        )
    assert bad.is_error and "relation" in bad.content[0].text
