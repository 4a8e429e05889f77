"""Protocol details a client author meets, over streamable HTTP on loopback: an unknown prompt,
an unknown resource, a prompt argument the prompt does not take and a listing cursor the
server never gave out are invalid params (-32602), and a tool argument the tool does not take
is refused by name (all also true over stdio, where the same server answers).

Before: `prompts/get` of an unknown prompt answered error code 0, a bogus `tools/list` cursor
returned the full list, and `memory_recall {"query": "x", "bogus": 1}` ran as if `bogus` had
not been sent; `prompts/get memory_guide {"topic": …}` was an internal error (-32603) with a
traceback in the server's log, and an unknown resource did not say which there are.
"""

from __future__ import annotations

import pytest
from http_serving import connect, serving
from mcp.shared.exceptions import MCPError

from nooa_mcp import Settings

pytestmark = pytest.mark.anyio

TOKEN = "protocol-token-0123456789abcdef"


@pytest.fixture
async def client(tmp_path):
    settings = Settings(store=tmp_path / "m.sqlite")
    async with serving(settings, {TOKEN: "alice"}) as url, connect(url, TOKEN) as c:
        yield c


async def test_an_unknown_prompt_is_invalid_params_naming_the_prompts(client) -> None:
    with pytest.raises(MCPError) as refused:
        await client.get_prompt("no_such_prompt")
    assert refused.value.error.code == -32602
    assert "Unknown prompt: no_such_prompt" in refused.value.error.message
    assert "memory_guide" in refused.value.error.message


@pytest.mark.parametrize("listing", ["list_tools", "list_prompts", "list_resources"])
async def test_a_cursor_the_server_never_gave_is_invalid_params(client, listing: str) -> None:
    first = await getattr(client, listing)()
    assert first.next_cursor is None  # one page: no cursor is ever given out
    with pytest.raises(MCPError) as refused:
        await getattr(client, listing)(cursor="bogus")
    assert refused.value.error.code == -32602
    assert "cursor" in refused.value.error.message


async def test_an_argument_the_tool_does_not_take_is_refused_by_name(client) -> None:
    result = await client.call_tool("memory_recall", {"query": "x", "bogus": 1})
    text = result.content[0].text
    assert result.is_error
    assert "bogus: is not an argument of memory_recall" in text and "query" in text
    written = await client.call_tool("memory_author", {"content": "Kept?", "owner": "bob"})
    assert written.is_error and "owner: is not an argument" in written.content[0].text
    stats = await client.call_tool("memory_recall", {"query": "Kept"})
    assert stats.structured_content["hits"] == []  # nothing was written


async def test_a_prompt_argument_the_prompt_does_not_take_is_refused_by_name(client) -> None:
    # Before: -32603 "Internal server error", and a traceback in the server's log.
    with pytest.raises(MCPError) as refused:
        await client.get_prompt("memory_guide", {"topic": "todos"})
    assert refused.value.error.code == -32602
    message = refused.value.error.message
    assert message.startswith("topic: not an argument of prompt memory_guide")
    assert "takes no arguments" in message
    guide = await client.get_prompt("memory_guide")  # without it, the prompt is given
    assert guide.messages


@pytest.mark.parametrize("uri", ["memory://nope", "nooa://stats"])
async def test_an_unknown_resource_is_refused_naming_the_resources(client, uri: str) -> None:
    with pytest.raises(MCPError) as refused:
        await client.read_resource(uri)
    assert refused.value.error.code == -32602
    message = refused.value.error.message
    assert message.startswith(f"Unknown resource: {uri}. The resources are memory://")
    assert "memory://stats" in message and "memory://memories/{memory_id}" in message
    assert "memory://todos{?cursor,limit}" not in message  # said once, by memory://todos


async def test_a_memory_that_does_not_exist_is_still_told_by_its_own_handler(client) -> None:
    # A URI a template matches is not "unknown": the handler names the memory.
    with pytest.raises(MCPError) as refused:
        await client.read_resource("memory://memories/0123456789abcdef")
    assert "The resources are" not in refused.value.error.message


async def test_every_listed_description_reads_as_prose_without_source_indentation(client) -> None:
    # Before: memory://context's description was its docstring, "\n        " and all.
    described = [
        *(r.description for r in (await client.list_resources()).resources),
        *(t.description for t in (await client.list_resource_templates()).resource_templates),
        *(p.description for p in (await client.list_prompts()).prompts),
        *(t.description for t in (await client.list_tools()).tools),
    ]
    assert described and all(d for d in described)
    assert [d for d in described if "\n " in (d or "")] == []


async def test_a_trigger_key_the_tool_does_not_know_is_refused_not_dropped(client) -> None:
    # Before: `every_hour` (a typo of every_hours) was dropped and the intent stored one-shot.
    sent = {"fire_at": "2030-01-01T09:00:00Z", "every_hour": 24}
    refused = await client.call_tool(
        "memory_author", {"content": "Water the plants", "type": "intent", "trigger": sent}
    )
    text = refused.content[0].text
    assert refused.is_error
    assert 'trigger: has no key "every_hour"' in text and "every_hours" in text
    assert "got" not in text
    listed = await client.call_tool("intent", {"action": "list"})
    assert "Water the plants" not in listed.content[0].text  # nothing was written
    sent = {"fire_at": "2030-01-01T09:00:00Z", "every_hours": 24}
    kept = await client.call_tool(
        "memory_author", {"content": "Water the plants", "type": "intent", "trigger": sent}
    )
    assert not kept.is_error


async def test_a_link_key_the_tool_does_not_know_is_refused_not_dropped(client) -> None:
    # Before: `wieght` (a typo of weight) was dropped and the link stored at the default weight.
    target = await client.call_tool("memory_author", {"content": "Deploys ride the train"})
    link = {"target": target.structured_content["id"], "relation": "related", "wieght": "STRONG"}
    refused = await client.call_tool(
        "memory_author", {"content": "The Friday freeze", "links": [link]}
    )
    text = refused.content[0].text
    assert refused.is_error
    assert 'links.0: has no key "wieght"' in text and "target, relation and weight" in text
    assert "got" not in text
    recalled = await client.call_tool("memory_recall", {"query": "Friday freeze"})
    assert "The Friday freeze" not in recalled.content[0].text  # nothing was written
