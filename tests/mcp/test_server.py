"""Wiring of the MCP server, driven through the SDK's in-memory Client (DESIGN.md §13).

Behaviour of recall, explain and the store is tested on the facade; here each test checks one
thing the server adds: schemas, annotations, structured replies, bounds, errors, resources,
prompts, identity and notifications. The lifespan runs as in production, with HashEmbedder.
"""

import json
import threading
import warnings
from datetime import timedelta
from pathlib import Path

import anyio
import pytest
from loading_model import loading
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types import Implementation, ResourceUpdatedNotification, TextResourceContents

from nooa_mcp.config import Settings
from nooa_mcp.domain.schema import now
from nooa_mcp.embeddings import HashEmbedder, WarmingEmbedder
from nooa_mcp.mcp.server import build_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(store=tmp_path / "memory.sqlite", owner="tester")


@pytest.fixture
async def client(settings: Settings):
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as c:
        yield c


async def author(client: Client, content: str, **fields) -> str:
    result = await client.call_tool("memory_author", {"content": content, **fields})
    assert not result.is_error, result.content
    return result.structured_content["id"]


async def read_json(client: Client, uri: str) -> dict:
    result = await client.read_resource(uri)
    content = result.contents[0]
    assert isinstance(content, TextResourceContents)
    return json.loads(content.text)


async def read_text(client: Client, uri: str) -> str:
    content = (await client.read_resource(uri)).contents[0]
    assert isinstance(content, TextResourceContents)
    return content.text


# --------------------------------------------------------------------------- tools: schemas


async def test_tools_list_offers_the_memory_tools(client: Client) -> None:
    names = {t.name for t in (await client.list_tools()).tools}
    assert names == {
        "memory_author",
        "memory_recall",
        "memory_explain",
        "memory_update",
        "todo",
        "intent",
        "memory_reflect",
    }


async def test_memory_reflect_can_be_switched_off_by_configuration(settings: Settings) -> None:
    """DESIGN.md §13.1: memory_reflect is optional, off by configuration if unwanted."""
    settings = settings.model_copy(update={"reflect_tool": False})
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as c:
        names = {t.name for t in (await c.list_tools()).tools}
    assert "memory_reflect" not in names and "memory_recall" in names


async def test_no_tool_takes_an_owner_argument(client: Client) -> None:
    # DESIGN.md §10: the owner comes from configuration or the client, never from the model.
    for tool in (await client.list_tools()).tools:
        assert not any("owner" in name for name in tool.input_schema["properties"]), tool.name


async def test_recall_is_not_read_only_because_it_logs_accesses(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert tools["memory_recall"].annotations.read_only_hint is False


async def test_explain_is_a_read_only_dry_run(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert tools["memory_explain"].annotations.read_only_hint is True


async def test_update_is_marked_destructive(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert tools["memory_update"].annotations.destructive_hint is True


async def test_recall_publishes_an_output_schema_of_the_reply_model(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert {"hits", "reminders", "embeddings"} <= set(
        tools["memory_recall"].output_schema["properties"]
    )


async def test_tool_schemas_name_the_importance_ladder(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    importance = tools["memory_author"].input_schema["properties"]["importance"]
    assert "CRITICAL" in importance["description"] and "TRIVIAL" in importance["description"]


# --------------------------------------------------------------------------- tools: author


async def test_author_replies_with_the_new_id_and_created(client: Client) -> None:
    result = await client.call_tool(
        "memory_author", {"content": "The billing service runs on Fly."}
    )
    assert result.structured_content["status"] == "created"
    assert len(result.structured_content["id"]) == 32


async def test_author_text_summary_names_the_short_id(client: Client) -> None:
    result = await client.call_tool("memory_author", {"content": "Staging resets every Monday."})
    assert result.structured_content["id"][:8] in result.content[0].text


async def test_author_with_unknown_importance_label_lists_the_ladder(client: Client) -> None:
    result = await client.call_tool("memory_author", {"content": "x", "importance": "HUGE"})
    assert result.is_error and "importance" in result.content[0].text
    assert "CRITICAL" in result.content[0].text


async def test_author_with_unknown_type_is_refused_naming_the_field(client: Client) -> None:
    result = await client.call_tool("memory_author", {"content": "x", "type": "opinion"})
    assert result.is_error and "type" in result.content[0].text


async def test_author_of_an_exact_repeat_reports_exists(client: Client) -> None:
    # Pinned facade behaviour: an exact repeat is idempotent (retries never duplicate).
    await author(client, "Deploys need two approvals.")
    again = await client.call_tool("memory_author", {"content": "Deploys need two approvals."})
    assert again.structured_content["status"] == "exists"


async def test_author_link_to_a_missing_memory_names_links_target(client: Client) -> None:
    result = await client.call_tool(
        "memory_author",
        {"content": "y", "links": [{"target": "abcdef12", "relation": "refines"}]},
    )
    assert result.is_error and "links.target" in result.content[0].text


async def test_author_with_unknown_relation_lists_the_relations(client: Client) -> None:
    result = await client.call_tool(
        "memory_author", {"content": "y", "links": [{"target": "abcdef12", "relation": "likes"}]}
    )
    assert result.is_error and "refines" in result.content[0].text


# --------------------------------------------------------------------------- tools: recall


async def test_recall_ranks_the_matching_memory_first(client: Client) -> None:
    await author(client, "The cat is called Miso.")
    wanted = await author(client, "The deploy key lives in the team vault.")
    result = await client.call_tool("memory_recall", {"query": "where is the deploy key"})
    assert result.structured_content["hits"][0]["id"] == wanted


async def test_recall_text_lists_ranked_hits_with_short_ids(client: Client) -> None:
    wanted = await author(client, "The deploy key lives in the team vault.")
    result = await client.call_tool("memory_recall", {"query": "deploy key vault"})
    assert f"1. [{wanted[:8]}]" in result.content[0].text


async def test_recall_clips_long_content_with_the_resource_uri(client: Client) -> None:
    wanted = await author(client, "deploy key " + "lorem ipsum " * 1000)
    result = await client.call_tool("memory_recall", {"query": "deploy key"})
    content = result.structured_content["hits"][0]["content"]
    assert len(content) < 2_200 and f"memory://memories/{wanted}" in content


async def test_recall_reply_stays_within_the_reply_budget(client: Client) -> None:
    for i in range(20):
        await author(client, f"deploy note {i} " + f"word{i} " * 3000)
    result = await client.call_tool("memory_recall", {"query": "deploy note", "k": 20})
    size = len(result.content[0].text) + len(json.dumps(result.structured_content))
    assert size / 4 <= 8_000


async def test_recall_with_unknown_scope_is_refused_naming_scope(client: Client) -> None:
    result = await client.call_tool("memory_recall", {"query": "x", "scope": "ev il"})
    assert result.is_error and result.content[0].text.count("scope") >= 1


async def test_recall_with_k_over_fifty_is_refused_naming_k(client: Client) -> None:
    result = await client.call_tool("memory_recall", {"query": "x", "k": 500})
    text = result.content[0].text
    assert result.is_error
    prefix = "Error executing tool memory_recall: "
    assert text == prefix + "k: must be at most 50; got 500. Pass a value that fits."


async def test_recall_logs_an_access_on_the_returned_memory(client: Client) -> None:
    wanted = await author(client, "The deploy key lives in the team vault.")
    await client.call_tool("memory_recall", {"query": "deploy key"})
    page = await read_json(client, f"memory://memories/{wanted}/access-log")
    assert [a["channel"] for a in page["items"]] == ["recalled", "created"]


# --------------------------------------------------------------------------- tools: explain


async def test_explain_query_logs_nothing(client: Client) -> None:
    # DESIGN.md §6: explain is a dry run.
    wanted = await author(client, "The deploy key lives in the team vault.")
    await client.call_tool("memory_explain", {"query": "deploy key"})
    page = await read_json(client, f"memory://memories/{wanted}/access-log")
    assert [a["channel"] for a in page["items"]] == ["created"]


async def test_explain_query_returns_component_rows(client: Client) -> None:
    wanted = await author(client, "The deploy key lives in the team vault.")
    result = await client.call_tool("memory_explain", {"query": "deploy key"})
    assert result.structured_content["rows"][0]["id"] == wanted


async def test_explain_memory_id_replays_its_recalls(client: Client) -> None:
    wanted = await author(client, "The deploy key lives in the team vault.")
    await client.call_tool("memory_recall", {"query": "deploy key"})
    result = await client.call_tool("memory_explain", {"memory_id": wanted[:8]})
    assert [a["query"] for a in result.structured_content["accesses"]] == ["deploy key", None]


async def test_explain_without_query_or_id_is_refused_naming_query(client: Client) -> None:
    result = await client.call_tool("memory_explain", {})
    assert result.is_error and "query" in result.content[0].text


# --------------------------------------------------------------------------- tools: update


async def test_update_forget_moves_the_memory_to_archived(client: Client) -> None:
    wanted = await author(client, "An obsolete fact.")
    await client.call_tool("memory_update", {"memory_id": wanted[:8], "forget": True})
    page = await read_json(client, "memory://archived")
    assert [item["id"] for item in page["items"]] == [wanted]


async def test_update_reports_the_changed_fields(client: Client) -> None:
    wanted = await author(client, "A fact.")
    result = await client.call_tool("memory_update", {"memory_id": wanted, "importance": "HIGH"})
    assert result.structured_content["changed"] == ["importance"]


async def test_update_of_an_unknown_id_names_memory_id(client: Client) -> None:
    result = await client.call_tool("memory_update", {"memory_id": "abcdef12", "title": "t"})
    assert result.is_error and "memory_id" in result.content[0].text


# --------------------------------------------------------------------------- tools: todo, intent


async def test_todo_add_then_list_shows_it_open(client: Client) -> None:
    await client.call_tool("todo", {"action": "add", "content": "Rotate the deploy key"})
    result = await client.call_tool("todo", {"action": "list"})
    assert [(t["content"], t["status"]) for t in result.structured_content["todos"]] == [
        ("Rotate the deploy key", "open")
    ]


async def test_todo_done_closes_it_and_hides_it_from_the_open_list(client: Client) -> None:
    added = await client.call_tool("todo", {"action": "add", "content": "Rotate the key"})
    todo_id = added.structured_content["id"]
    result = await client.call_tool("todo", {"action": "done", "memory_id": todo_id[:8]})
    assert result.structured_content["todos"] == []


async def test_todo_list_of_all_statuses_shows_done_after_open(client: Client) -> None:
    first = await client.call_tool("todo", {"action": "add", "content": "First task"})
    await client.call_tool("todo", {"action": "add", "content": "Second task"})
    await client.call_tool("todo", {"action": "done", "memory_id": first.structured_content["id"]})
    result = await client.call_tool("todo", {"action": "list", "status": "all"})
    assert [t["status"] for t in result.structured_content["todos"]] == ["open", "done"]


async def test_todo_list_orders_open_todos_by_importance(client: Client) -> None:
    await client.call_tool("todo", {"action": "add", "content": "Low task", "importance": "LOW"})
    await client.call_tool("todo", {"action": "add", "content": "Urgent", "importance": "CRITICAL"})
    result = await client.call_tool("todo", {"action": "list"})
    assert [t["content"] for t in result.structured_content["todos"]] == ["Urgent", "Low task"]


async def test_todo_done_on_a_non_todo_names_memory_id(client: Client) -> None:
    fact = await author(client, "Just a fact.")
    result = await client.call_tool("todo", {"action": "done", "memory_id": fact})
    assert result.is_error and "memory_id" in result.content[0].text


async def test_todo_add_without_content_names_content(client: Client) -> None:
    result = await client.call_tool("todo", {"action": "add"})
    assert result.is_error and "content" in result.content[0].text


async def test_intent_with_a_past_fire_at_fires_as_a_reminder_on_check(client: Client) -> None:
    past = (now() - timedelta(hours=1)).isoformat()
    await client.call_tool(
        "intent", {"action": "add", "content": "Ask about the audit", "fire_at": past}
    )
    result = await client.call_tool("intent", {"action": "check"})
    assert [r["content"] for r in result.structured_content["reminders"]] == ["Ask about the audit"]


async def test_reminders_show_in_the_text_summary(client: Client) -> None:
    past = (now() - timedelta(hours=1)).isoformat()
    await client.call_tool("intent", {"action": "add", "content": "Ask about it", "fire_at": past})
    result = await client.call_tool("intent", {"action": "check"})
    assert "Reminders" in result.content[0].text and "Ask about it" in result.content[0].text


async def test_intent_with_a_future_fire_at_does_not_fire(client: Client) -> None:
    later = (now() + timedelta(days=1)).isoformat()
    await client.call_tool("intent", {"action": "add", "content": "Later", "fire_at": later})
    result = await client.call_tool("intent", {"action": "check"})
    assert result.structured_content["reminders"] == []


async def test_an_intents_time_is_shown_as_the_utc_it_was_read_as(client: Client) -> None:
    """A time with no offset is read as UTC: the reply says UTC, so a model that meant its
    user's local time sees the difference."""
    added = await client.call_tool(
        "intent", {"action": "add", "content": "Call the bank", "fire_at": "2030-01-01T09:00"}
    )
    assert not added.is_error
    listed = await client.call_tool("intent", {"action": "list"})
    assert "(at 2030-01-01 09:00 UTC)" in listed.content[0].text
    offset = await client.call_tool(
        "intent", {"action": "add", "content": "Call Paris", "fire_at": "2030-01-01T09:00+01:00"}
    )
    assert "at 2030-01-01 08:00 UTC" in offset.content[0].text


async def test_intent_without_a_trigger_is_refused_naming_trigger(client: Client) -> None:
    result = await client.call_tool("intent", {"action": "add", "content": "Sometime"})
    assert result.is_error and "trigger" in result.content[0].text


async def test_intent_cancel_removes_it_from_the_armed_list(client: Client) -> None:
    added = await client.call_tool(
        "intent", {"action": "add", "content": "When billing comes up", "cue": "billing"}
    )
    intent_id = added.structured_content["id"]
    result = await client.call_tool("intent", {"action": "cancel", "memory_id": intent_id})
    assert result.structured_content["intents"] == []


# --------------------------------------------------------------------------- resources


async def test_resource_templates_are_listed(client: Client) -> None:
    templates = {
        t.uri_template for t in (await client.list_resource_templates()).resource_templates
    }
    assert {
        "memory://memories/{memory_id}{?offset}",
        "memory://memories/{memory_id}/access-log{?cursor,limit}",
        "memory://archived/{memory_id}",
        "memory://archived{?cursor,limit}",
        "memory://access-log{?cursor,limit}",
        "memory://todos{?cursor,limit}",
    } <= templates


async def test_fixed_resources_are_listed(client: Client) -> None:
    uris = {str(r.uri) for r in (await client.list_resources()).resources}
    assert uris == {
        "memory://stats",
        "memory://context",
        "memory://todos",
        "memory://archived",
        "memory://access-log",
    }


async def test_memory_resource_accepts_an_eight_character_prefix(client: Client) -> None:
    wanted = await author(client, "The deploy key lives in the team vault.")
    record = await read_json(client, f"memory://memories/{wanted[:8]}")
    assert record["content"] == "The deploy key lives in the team vault."


async def test_memory_resource_of_an_unknown_id_is_an_error_naming_memory_id(
    client: Client,
) -> None:
    with pytest.raises(MCPError, match="memory_id"):
        await client.read_resource("memory://memories/abcdef12")


async def test_reading_a_memory_resource_logs_no_access(client: Client) -> None:
    wanted = await author(client, "A fact.")
    await read_json(client, f"memory://memories/{wanted}")
    page = await read_json(client, f"memory://memories/{wanted}/access-log")
    assert len(page["items"]) == 1


async def test_stats_resource_counts_memories(client: Client) -> None:
    await author(client, "One.")
    await author(client, "Two things.")
    assert (await read_json(client, "memory://stats"))["total"] == 2


async def test_context_resource_logs_injected(client: Client) -> None:
    wanted = await author(client, "The deploy key lives in the team vault.", importance="HIGH")
    await read_text(client, "memory://context")
    record = await read_json(client, f"memory://memories/{wanted}")
    assert record["channels"].get("injected") == 1


async def test_context_resource_never_reinforces(client: Client) -> None:
    # DESIGN.md §3.1: injected never counts toward strength or base-level.
    wanted = await author(client, "The deploy key lives in the team vault.")
    before = (await read_json(client, f"memory://memories/{wanted}"))["strength"]
    await read_text(client, "memory://context")
    assert (await read_json(client, f"memory://memories/{wanted}"))["strength"] == before


async def test_context_resource_shows_what_the_session_start_hook_shows(client: Client) -> None:
    """The hook's selection (`services.injection.at_session_start`): the important memories,
    none superseded; and, unlike the session_start prompt, it fires no intent (a client may
    read a resource on its own, and firing spends a one-shot)."""
    old = await author(client, "The deploy key lives in the team vault.", importance="HIGH")
    new = (
        await client.call_tool(
            "memory_author",
            {
                "content": "The deploy key moved to the release vault.",
                "importance": "HIGH",
                "links": [{"target": old, "relation": "refines"}],
            },
        )
    ).structured_content["id"]
    due = await client.call_tool(
        "intent", {"action": "add", "content": "Rotate the deploy key", "fire_at": "2020-01-01"}
    )
    block = await read_text(client, "memory://context")
    assert new[:8] in block and old[:8] not in block
    assert "Rotate the deploy key" not in block
    fired = (await client.call_tool("intent", {"action": "check"})).content[0].text
    assert (
        fired.startswith("check: 1 fired (times only: pass text to check cues against it).")
        and f"- [{due.structured_content['id'][:8]}] (time, due 2020-01-01 00:00 UTC, " in fired
    )


async def test_archived_listing_pages_with_a_cursor(client: Client) -> None:
    ids = [await author(client, f"Obsolete fact number {i}.") for i in range(3)]
    for memory_id in ids:
        await client.call_tool("memory_update", {"memory_id": memory_id, "forget": True})
    first = await read_json(client, "memory://archived?limit=2")
    second = await read_json(client, f"memory://archived?cursor={first['next_cursor']}&limit=2")
    assert [i["id"] for i in first["items"] + second["items"]] == ids


async def test_last_page_has_no_next_cursor(client: Client) -> None:
    wanted = await author(client, "Obsolete.")
    await client.call_tool("memory_update", {"memory_id": wanted, "forget": True})
    assert (await read_json(client, "memory://archived?limit=2"))["next_cursor"] is None


async def test_a_malformed_cursor_is_an_error_naming_cursor(client: Client) -> None:
    with pytest.raises(MCPError, match="cursor"):
        await client.read_resource("memory://archived?cursor=zzz")


async def test_archived_record_of_an_active_memory_is_not_found(client: Client) -> None:
    wanted = await author(client, "Still active.")
    with pytest.raises(MCPError, match="archived memory"):
        await client.read_resource(f"memory://archived/{wanted}")


async def test_archived_record_shows_a_forgotten_memory(client: Client) -> None:
    wanted = await author(client, "Forget me.")
    await client.call_tool("memory_update", {"memory_id": wanted, "forget": True})
    assert (await read_json(client, f"memory://archived/{wanted[:8]}"))["archived"] is True


async def test_store_access_log_lists_the_newest_access_first(client: Client) -> None:
    wanted = await author(client, "The deploy key lives in the team vault.")
    await client.call_tool("memory_recall", {"query": "deploy key"})
    page = await read_json(client, "memory://access-log")
    assert (page["items"][0]["memory_id"], page["items"][0]["channel"]) == (wanted, "recalled")


async def test_memory_access_log_pages_with_a_cursor(client: Client) -> None:
    wanted = await author(client, "The deploy key lives in the team vault.")
    for _ in range(2):
        await client.call_tool("memory_recall", {"query": "deploy key"})
    first = await read_json(client, f"memory://memories/{wanted}/access-log?limit=2")
    rest = await read_json(
        client, f"memory://memories/{wanted}/access-log?cursor={first['next_cursor']}&limit=2"
    )
    assert [a["channel"] for a in first["items"] + rest["items"]] == [
        "recalled",
        "recalled",
        "created",
    ]


async def test_todos_resource_lists_todos_with_status(client: Client) -> None:
    await client.call_tool("todo", {"action": "add", "content": "Write the runbook"})
    page = await read_json(client, "memory://todos")
    assert [(i["head"], i["status"]) for i in page["items"]] == [("Write the runbook", "open")]


# --------------------------------------------------------------------------- prompts


async def test_prompts_list_offers_guide_session_start_and_reflect(client: Client) -> None:
    names = {p.name for p in (await client.list_prompts()).prompts}
    assert names == {"memory_guide", "session_start", "reflect"}


async def test_memory_guide_prompt_teaches_the_ladders(client: Client) -> None:
    prompt = await client.get_prompt("memory_guide")
    assert "CRITICAL" in prompt.messages[0].content.text


async def test_session_start_prompt_shows_open_todos(client: Client) -> None:
    await client.call_tool("todo", {"action": "add", "content": "Rotate the deploy key"})
    prompt = await client.get_prompt("session_start")
    assert "Rotate the deploy key" in prompt.messages[0].content.text


async def test_session_start_prompt_shows_due_intents(client: Client) -> None:
    past = (now() - timedelta(minutes=5)).isoformat()
    await client.call_tool(
        "intent", {"action": "add", "content": "Ask for the audit", "fire_at": past}
    )
    prompt = await client.get_prompt("session_start")
    assert "Ask for the audit" in prompt.messages[0].content.text


async def test_session_start_prompt_leaves_no_placeholders(client: Client) -> None:
    prompt = await client.get_prompt("session_start")
    assert "$" not in prompt.messages[0].content.text


async def session_start_text(client: Client) -> str:
    prompt = await client.get_prompt("session_start")
    return prompt.messages[0].content.text


async def test_session_start_prompt_leaves_out_a_superseded_memory(client: Client) -> None:
    # What the session-start hook shows (services.injection.at_session_start), never a
    # second selection: the README says superseded memories are never shown.
    old = await author(client, "The user lives in Lisbon, Portugal.", importance="HIGH")
    await author(
        client,
        "The user moved to Berlin, Germany in December 2026.",
        importance="HIGH",
        links=[{"target": old, "relation": "refines"}],
    )
    text = await session_start_text(client)
    assert "moved to Berlin" in text
    assert "Lisbon" not in text
    assert old[:8] not in text


async def test_session_start_prompt_leaves_out_a_memory_past_its_valid_to(client: Client) -> None:
    stale = await author(client, "The office wifi password is tulip-42.", importance="HIGH")
    past = (now() - timedelta(minutes=5)).isoformat()
    result = await client.call_tool("memory_update", {"memory_id": stale, "valid_to": past})
    assert not result.is_error, result.content
    await author(client, "The user prefers metric units.", importance="HIGH")
    text = await session_start_text(client)
    assert "metric units" in text
    assert "tulip-42" not in text


async def test_session_start_prompt_shows_a_due_intent_once_and_never_an_armed_one(
    client: Client,
) -> None:
    past = (now() - timedelta(minutes=5)).isoformat()
    later = (now() + timedelta(days=2)).isoformat()
    # The armed one first: a later tool call would fire (and deliver) the due one itself.
    for content, fire_at in (
        ("Ask about the Munich trip", later),
        ("Ask how the Berlin move went", past),
    ):
        result = await client.call_tool(
            "intent", {"action": "add", "content": content, "fire_at": fire_at}
        )
        assert not result.is_error, result.content
    first = await session_start_text(client)
    assert first.count("Ask how the Berlin move went") == 1
    assert "Munich trip" not in first
    # It fired with the first prompt: a one-shot intent that fired is not shown again.
    second = await session_start_text(client)
    assert "Berlin move" not in second
    assert "Munich trip" not in second


async def test_session_start_prompt_shows_an_open_todo_exactly_once(client: Client) -> None:
    await client.call_tool(
        "todo", {"action": "add", "content": "Renew the TLS certificate", "importance": "HIGH"}
    )
    done = await client.call_tool(
        "todo", {"action": "add", "content": "Archive the old logs", "importance": "HIGH"}
    )
    await client.call_tool("todo", {"action": "done", "memory_id": done.structured_content["id"]})
    text = await session_start_text(client)
    assert text.count("Renew the TLS certificate") == 1
    todos = text.split("## Open todos", 1)[1].split("##", 1)[0]
    assert "Renew the TLS certificate" in todos
    assert "Archive the old logs" not in text


async def test_reflect_prompt_lists_recent_episodes(client: Client) -> None:
    await author(client, "Migrated the billing DB; the lock timeout bit us.", type="episode")
    prompt = await client.get_prompt("reflect")
    assert "lock timeout" in prompt.messages[0].content.text


# --------------------------------------------------------------------------- identity


async def test_owner_comes_from_client_name_when_none_is_configured(tmp_path: Path) -> None:
    settings = Settings(store=tmp_path / "m.sqlite", owner="")
    server = build_server(settings, embedder=HashEmbedder())
    info = Implementation(name="Claude Desktop", version="1.0")
    async with Client(server, client_info=info, cache=None) as c:
        wanted = await author(c, "Desktop fact.")
        assert (await read_json(c, f"memory://memories/{wanted}"))["owner"] == "claude-desktop"


async def test_configured_owner_wins_over_client_name(tmp_path: Path) -> None:
    settings = Settings(store=tmp_path / "m.sqlite", owner="coder@laptop")
    server = build_server(settings, embedder=HashEmbedder())
    info = Implementation(name="Claude Desktop", version="1.0")
    async with Client(server, client_info=info, cache=None) as c:
        wanted = await author(c, "Configured fact.")
        assert (await read_json(c, f"memory://memories/{wanted}"))["owner"] == "coder@laptop"


async def test_two_clients_have_separate_instance_scopes(tmp_path: Path) -> None:
    settings = Settings(store=tmp_path / "m.sqlite", owner="")
    server = build_server(settings, embedder=HashEmbedder())
    alpha = Implementation(name="alpha", version="1")
    beta = Implementation(name="beta", version="1")
    async with Client(server, client_info=alpha, cache=None) as a:
        await author(a, "Alpha secret about the deploy key.")
    async with Client(server, client_info=beta, cache=None) as b:
        result = await b.call_tool("memory_recall", {"query": "deploy key", "scope": "instance"})
    assert result.structured_content["hits"] == []


# --------------------------------------------------------------------------- notifications


async def test_author_notifies_stats_subscribers(client: Client) -> None:
    with anyio.fail_after(5):
        async with client.listen(resource_subscriptions=["memory://stats"]) as subscription:
            await author(client, "Something new.")
            event = await subscription.__anext__()
    assert event.uri == "memory://stats"


async def test_owner_comes_from_client_name_over_the_legacy_handshake(tmp_path: Path) -> None:
    # Clients of the 2025 protocol name themselves in initialize, not per request.
    settings = Settings(store=tmp_path / "m.sqlite", owner="")
    server = build_server(settings, embedder=HashEmbedder())
    info = Implementation(name="claude-code", version="2.0")
    async with Client(server, client_info=info, mode="legacy", cache=None) as c:
        wanted = await author(c, "Code fact.")
        assert (await read_json(c, f"memory://memories/{wanted}"))["owner"] == "claude-code"


async def test_tool_descriptions_carry_no_source_indentation(client: Client) -> None:
    for tool in (await client.list_tools()).tools:
        assert "\n    " not in tool.description, tool.name


async def test_a_long_memory_resource_is_clipped_with_the_offset_of_the_rest(
    client: Client,
) -> None:
    wanted = await author(client, "x" * 60_000)
    record = await read_json(client, f"memory://memories/{wanted}")
    assert f"memory://memories/{wanted}?offset=" in record["content"][-200:]


async def test_reading_on_from_the_offset_returns_the_rest_of_the_content(
    client: Client,
) -> None:
    content = "".join(f"{i:06d}" for i in range(6_000))
    wanted = await author(client, content)
    first = (await read_json(client, f"memory://memories/{wanted}"))["content"]
    kept = first[: first.index("… [clipped")]
    rest = (await read_json(client, f"memory://memories/{wanted}?offset={len(kept)}"))["content"]
    assert kept + rest == content


async def test_todo_list_of_many_long_todos_stays_within_the_budget(client: Client) -> None:
    for i in range(60):
        words = " ".join(f"w{i}x{j}" for j in range(60))
        await client.call_tool("todo", {"action": "add", "content": f"Task {i}: {words}"})
    result = await client.call_tool("todo", {"action": "list", "limit": 100})
    size = len(result.content[0].text) + len(json.dumps(result.structured_content))
    assert size / 4 <= 8_000 and "more not shown" in result.content[0].text


async def test_legacy_subscribers_hear_that_a_memory_changed(settings: Settings) -> None:
    # 2025-era clients subscribe with resources/subscribe and get notifications/resources/updated.
    updated = anyio.Event()
    seen: list[str] = []

    async def on_message(message) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            seen.append(message.params.uri)
            updated.set()

    server = build_server(settings, embedder=HashEmbedder())
    async with Client(server, mode="legacy", message_handler=on_message, cache=None) as c:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await c.subscribe_resource("memory://stats")
        await author(c, "Something new.")
        with anyio.fail_after(5):
            await updated.wait()
    assert seen == ["memory://stats"]


async def test_the_handshake_advertises_resource_subscriptions(settings: Settings) -> None:
    server = build_server(settings, embedder=HashEmbedder())
    async with Client(server, mode="legacy", cache=None) as c:
        assert c.server_capabilities.resources.subscribe is True


async def test_recall_answers_while_the_model_loads_and_says_so(settings: Settings) -> None:
    # DESIGN.md §5.11: the server answers at once; until the model is ready recall uses FTS only.
    # Answer at once instead of waiting model_wait_seconds (10 s) for a model that cannot load.
    settings.model_wait_seconds = 0
    with loading(HashEmbedder()) as (warming, gate):
        async with Client(build_server(settings, embedder=warming), cache=None) as c:
            result = await c.call_tool("memory_recall", {"query": "deploy key"})
            # Let the load finish before the server shuts down: shutdown waits up to 15 s for a
            # loading model (onnxruntime aborts a process that exits mid-load).
            gate.set()
    assert result.structured_content["embeddings"] == "warming"
    assert "keyword matches only" in result.content[0].text


async def test_prompt_descriptions_come_from_the_file_header(client: Client) -> None:
    prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    assert prompts["memory_guide"].description.startswith("How to use this long-term memory")


async def test_prompt_text_drops_the_description_header(client: Client) -> None:
    prompt = await client.get_prompt("memory_guide")
    assert not prompt.messages[0].content.text.startswith("<!--")


async def test_author_of_forgotten_content_is_blocked_and_says_how_to_revive(
    client: Client,
) -> None:
    # DESIGN.md §4.4: the reply says it was forgotten and that revive=true restores it.
    wanted = await author(client, "The deploy key lives in the vault.")
    await client.call_tool("memory_update", {"memory_id": wanted, "forget": True})
    again = await client.call_tool(
        "memory_author", {"content": "The deploy key lives in the vault."}
    )
    assert again.structured_content["status"] == "blocked-by-tombstone"
    assert "revive=true" in again.content[0].text


async def test_author_with_revive_restores_the_forgotten_memory(client: Client) -> None:
    wanted = await author(client, "The deploy key lives in the vault.")
    await client.call_tool("memory_update", {"memory_id": wanted, "forget": True})
    revived = await client.call_tool(
        "memory_author", {"content": "The deploy key lives in the vault.", "revive": True}
    )
    assert (revived.structured_content["status"], revived.structured_content["id"]) == (
        "revived",
        wanted,
    )


async def test_model_load_waits_until_the_client_has_its_tool_list(settings: Settings) -> None:
    # Loading the model beside the handshake made tools/list ~1.5x slower than on
    # a bare server. The load begins after the listing, or before a call that needs it.
    warming = WarmingEmbedder(HashEmbedder, "hash-384", 384, start=False)
    async with Client(build_server(settings, embedder=warming), cache=None) as c:
        await c.list_prompts()
        await c.list_resources()
        assert not warming.started
        await c.list_tools()
        assert not warming.started  # the reply comes first
        result = await c.call_tool("memory_recall", {"query": "deploy key"})
        assert warming.started
        assert not result.is_error
        assert result.structured_content["embeddings"] == "ready"


async def test_model_load_begins_after_the_listing_on_its_own(settings: Settings) -> None:
    warming = WarmingEmbedder(HashEmbedder, "hash-384", 384, start=False)
    async with Client(build_server(settings, embedder=warming), cache=None) as c:
        await c.list_tools()
        with anyio.fail_after(60):  # a hung job's guard, not a timing
            while not warming.started:
                await anyio.sleep(0.05)
    assert warming.ready


async def test_a_stdio_server_opens_its_store_when_first_needed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `nooa-mcp serve` answers the handshake before it opens the store (numpy,
    # the vector cache); the first call that needs a Memory opens it.
    from nooa_mcp.mcp.handlers import Owners
    from nooa_mcp.mcp.identity import Identity
    from nooa_mcp.storage.sqlite import SQLiteStore

    opened: list[Path] = []
    real_open = SQLiteStore.open.__func__  # type: ignore[attr-defined]

    async def noted(cls, path):
        opened.append(Path(path))
        return await real_open(cls, path)

    monkeypatch.setattr(SQLiteStore, "open", classmethod(noted))
    store = tmp_path / "later.sqlite"
    settings = Settings(store=store, owner="tester")
    async with Owners.when_needed(settings, HashEmbedder) as owners:
        # Every task the server started has run until it waits: none of them opened the store.
        await anyio.wait_all_tasks_blocked()
        assert opened == [] and owners.engine is None and not store.exists()
        memory = await owners.memory(Identity(owner="tester", source="settings"))
        assert store.exists() and opened == [store]
        assert (await memory.author("The deploy key lives in the vault.")).status == "created"
    async with Owners.when_needed(settings, HashEmbedder) as owners:
        pass  # closed before anything needed it: nothing opened, nothing raised
    assert owners.engine is None


async def test_a_stdio_server_loads_its_model_before_it_reads_the_stored_vectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model load's transient memory comes and goes before the matrix is read, instead
    of on top of it (a 100k store's server peaked at 418 MiB, 392 this way); and calls are
    served while the model loads: recall on keywords, which reads no vectors."""
    from nooa_mcp.mcp.handlers import Owners
    from nooa_mcp.mcp.identity import Identity
    from nooa_mcp.storage.vectors import VectorIndex

    events: list[str] = []
    gate = threading.Event()

    def load() -> HashEmbedder:
        gate.wait(30)
        events.append("model loaded")
        return HashEmbedder()

    sync = VectorIndex.sync

    async def recorded(self, store) -> None:
        events.append("vectors read")
        await sync(self, store)

    monkeypatch.setattr(VectorIndex, "sync", recorded)
    settings = Settings(store=tmp_path / "order.sqlite", owner="tester")
    model = WarmingEmbedder(load, "hash", 64, start=False)
    try:
        async with Owners.when_needed(settings, lambda: model) as owners:
            memory = await owners.memory(Identity(owner="tester", source="settings"))
            assert not model.ready
            warming = await memory.recall("deploy key")
            assert warming.embeddings == "warming" and events == []
            gate.set()
            assert (await memory.author("The deploy key lives in the vault.")).status == "created"
            assert model.ready
    finally:
        gate.set()
    assert events[:2] == ["model loaded", "vectors read"]


async def test_a_tool_call_is_served_as_one_call_for_the_background_reads(
    client: Client, monkeypatch
) -> None:
    """The engine's background reads wait for a moment between calls (`Engine.serving`):
    every message the server handles counts as a call while it runs."""
    from nooa_mcp.memory import Memory

    await author(client, "the harbour crane was serviced on Tuesday")
    seen: list[tuple[object, int]] = []
    original = Memory.recall

    async def watched(self, *args, **kwargs):
        seen.append((self.engine, self.engine._serving))
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(Memory, "recall", watched)
    result = await client.call_tool("memory_recall", {"query": "harbour crane"})
    assert not result.is_error
    [(engine, serving)] = seen
    assert serving == 1
    assert engine._serving == 0  # idle again once the call is answered


async def test_an_update_that_replaces_tags_says_what_they_are_now(client: Client) -> None:
    """`tags` replaces the list (the description says so); the reply shows the result, so a
    model that meant to add one tag sees the others went."""
    wanted = await author(client, "Atlas v1.0 ships by January.", tags=["atlas", "deadline"])
    result = await client.call_tool("memory_update", {"memory_id": wanted, "tags": ["urgent"]})
    assert result.content[0].text.startswith(f"Updated {wanted[:8]}: tags. Tags now: urgent.")
    assert result.structured_content["tags"] == ["urgent"]
    again = await client.call_tool("memory_update", {"memory_id": wanted, "title": "Atlas"})
    assert "Tags now" not in again.content[0].text and again.structured_content["tags"] is None
