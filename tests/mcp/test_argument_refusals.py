"""Tool arguments a tool or the SDK refuses, each told in one sentence that names the field
and the fix: a bad choice lists the allowed values, a malformed argument says what it must
be, a missing reference root names the option and the variable, an intent without a trigger
names `fire_at` and `cue`; never pydantic's report or a traceback.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from mcp import Client

from nooa_mcp import Settings
from nooa_mcp.cli import main
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


async def refused(client: Client, tool: str, args: dict) -> str:
    is_error, text, _ = await call(client, tool, args)
    assert is_error, text
    return text


# --------------------------------------------------------------------------- reference root


@pytest.mark.anyio
async def test_the_mcp_reference_root_error_names_the_global_option_and_the_variable(
    client: Client,
) -> None:
    text = await refused(
        client, "memory_author", {"content": "See notes", "references": ["file:notes.txt"]}
    )
    assert "--reference-root" in text and "NOOA_REFERENCE_ROOT" in text
    # The option it names is a real one.
    assert "--reference-root" in CliRunner().invoke(main, ["--help"]).output


# --------------------------------------------------------------------------- intents need triggers


@pytest.mark.anyio
async def test_memory_author_refuses_an_intent_without_a_trigger(client: Client) -> None:
    intent = {"content": "Call the landlord about the heating", "type": "intent"}
    text = await refused(client, "memory_author", intent)
    assert "trigger" in text and "fire_at" in text and "cue" in text
    _, _, listed = await call(client, "intent", {"action": "list"})
    assert listed["intents"] == []
    stats = json.loads((await client.read_resource("memory://stats")).contents[0].text)
    assert stats["total"] == 0


@pytest.mark.anyio
async def test_an_intent_without_a_time_or_cue_names_the_tool_arguments(client: Client) -> None:
    text = await refused(client, "intent", {"action": "add", "content": "Water the plants"})
    assert "fire_at" in text and "cue" in text
    assert "{" not in text, text


@pytest.mark.anyio
async def test_memory_author_refuses_a_cue_of_only_stop_words_like_the_intent_tool(
    client: Client,
) -> None:
    args = {"content": "Mention the rollback script", "type": "intent", "trigger": {"cue": "the"}}
    text = await refused(client, "memory_author", args)
    assert "trigger.cue" in text and "would never fire" in text, text
    listed = await call(client, "intent", {"action": "list"})
    assert "rollback" not in listed[1]


# --------------------------------------------------------------------------- error wording


@pytest.mark.anyio
async def test_errors_say_an_info_not_a_info(client: Client) -> None:
    _, _, info = await call(client, "memory_author", {"content": "Paris is the capital of France"})
    status = await refused(client, "memory_update", {"memory_id": info["id"], "status": "done"})
    closing = await refused(client, "todo", {"action": "done", "memory_id": info["id"]})
    for text in (status, closing):
        assert "an info" in text and "a info" not in text, text


@pytest.mark.anyio
async def test_explain_without_arguments_names_both_fields_in_a_sentence(client: Client) -> None:
    text = await refused(client, "memory_explain", {})
    assert "query: and memory_id" not in text
    assert "query" in text and "memory_id" in text


BAD_ENUMS = [
    ("todo", {"action": "frobnicate"}, "action", ["add", "list", "done", "drop", "reopen"]),
    (
        "todo",
        {"action": "list", "status": "frobnicate"},
        "status",
        ["open", "done", "dropped", "all"],
    ),
    ("intent", {"action": "frobnicate"}, "action", ["add", "list", "check", "cancel"]),
    (
        "memory_author",
        {"content": "x", "type": "frobnicate"},
        "type",
        ["info", "skill", "episode", "intent", "todo", "reflection", "scratch"],
    ),
    (
        "memory_recall",
        {"query": "x", "types": ["frobnicate"]},
        "types",
        ["info", "skill", "episode", "intent", "todo", "reflection", "scratch"],
    ),
    (
        "memory_update",
        {"memory_id": "<a todo>", "status": "frobnicate"},
        "status",
        ["open", "done", "dropped"],
    ),
    (
        "memory_reflect",
        {"steps": ["frobnicate"]},
        "steps",
        ["merge", "reconcile", "link", "rescore", "abstract", "prune"],
    ),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("tool", "args", "field", "allowed"), BAD_ENUMS)
async def test_a_bad_choice_names_the_field_and_the_allowed_values_without_pydantic_text(
    client: Client, tool: str, args: dict, field: str, allowed: list[str]
) -> None:
    if args.get("memory_id") == "<a todo>":
        _, _, todo = await call(client, "todo", {"action": "add", "content": "Water the plants"})
        args = {**args, "memory_id": todo["id"]}
    text = await refused(client, tool, args)
    assert re.search(rf"\b{field}\b", text), text
    for value in allowed:
        assert re.search(rf"\b{value}\b", text), (value, text)
    for noise in ("http", "pydantic", "validation error", "input_value", "literal_error"):
        assert noise not in text.lower(), text


BAD_SHAPES = [
    ("memory_recall", {"query": "x", "k": 500}, "k: must be at most 50; got 500."),
    ("memory_recall", {"query": "x", "k": "many"}, 'k: must be a whole number; got "many".'),
    # Values read as the JSON sent, not as Python shows them (got None, got True).
    ("memory_recall", {"query": "x", "k": None}, "k: must be a whole number; got null."),
    ("memory_recall", {"query": True}, "query: must be text; got true."),
    # Strict: a JSON value of another type is refused, not converted (k true ran as k=1).
    ("memory_recall", {"query": "x", "k": True}, "k: must be a whole number; got true."),
    ("memory_recall", {"query": "x", "k": "3"}, 'k: must be a whole number; got "3".'),
    ("memory_recall", {"query": "x", "hops": False}, "hops: must be a whole number; got false."),
    (
        "memory_recall",
        {"query": "x", "include_archived": "yes"},
        'include_archived: must be true or false; got "yes".',
    ),
    ("memory_explain", {"query": "x", "memory_id": "ab", "k": 2.5}, "k: must be a whole number"),
    ("memory_recall", {"query": "x", "k": 1e300}, "k: must be a whole number; got 1e+300."),
    ("memory_update", {"memory_id": "ab", "forget": 1}, "forget: must be true or false; got 1."),
    ("memory_author", {"content": "x", "revive": "false"}, "revive: must be true or false"),
    ("todo", {"action": "list", "limit": "20"}, 'limit: must be a whole number; got "20".'),
    ("intent", {"action": "add", "every_hours": "24"}, 'every_hours: must be a number; got "24".'),
    (
        "memory_author",
        {"content": "x", "type": "intent", "trigger": {"cue": "standup", "every_hours": True}},
        "trigger.every_hours: must be a number; got true.",
    ),
    ("memory_recall", {"query": "x", "hops": -1}, "hops: must be at least 0; got -1."),
    ("memory_recall", {"k": 3}, "query: is required. Pass it."),
    ("memory_author", {"content": "x", "salience": [1]}, "salience: must be text or a number"),
    ("memory_author", {"content": "x", "links": [{"relation": "related"}]}, "links.0.target:"),
    ("memory_author", {"content": "x", "valid_from": "yesterday"}, "valid_from: must be an ISO"),
    ("intent", {"action": "add", "every_hours": -1}, "every_hours: must be above 0"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("tool", "args", "sentence"), BAD_SHAPES)
async def test_an_argument_the_schema_refuses_is_told_in_one_sentence_naming_it(
    client: Client, tool: str, args: dict, sentence: str
) -> None:
    """The SDK refuses these before a tool runs; its report was pydantic's, four lines a
    field with a documentation link. Now one line: the field, what it must be, the fix."""
    text = await refused(client, tool, args)
    assert sentence in text, text
    assert len(text.splitlines()) == 1, text
    for noise in ("http", "pydantic", "validation error", "input_value", "type="):
        assert noise not in text.lower(), text


@pytest.mark.anyio
async def test_a_whole_number_written_with_a_point_is_taken(client: Client) -> None:
    """JSON has one kind of number and the listed schema's "integer" takes 5.0: a client
    that writes k as 5.0 (Python's json does for a float) was refused "must be a whole
    number; got 5.0". 2.5 is still refused (BAD_SHAPES)."""
    await call(client, "memory_author", {"content": "The billing service runs Postgres 16"})
    for args in ({"k": 5.0}, {"k": 1.0, "hops": 0.0}):
        is_error, text, reply = await call(client, "memory_recall", {"query": "billing", **args})
        assert not is_error, text
        assert reply is not None and len(reply["hits"]) == 1
    is_error, text, _ = await call(client, "todo", {"action": "list", "limit": 20.0})
    assert not is_error, text


@pytest.mark.anyio
async def test_an_update_that_names_no_change_is_refused(client: Client) -> None:
    """Only an id (or an empty list of links) changes nothing; answering "Updated" would let
    the model believe a change it never sent."""
    _, _, made = await call(client, "memory_author", {"content": "Standup is at nine"})
    memory_id = made["id"]
    for args in ({"memory_id": memory_id}, {"memory_id": memory_id, "links": []}):
        text = await refused(client, "memory_update", args)
        assert "memory_update: memory_id: only the id was given" in text
        assert "content, title, importance" in text
    is_error, _, changed = await call(
        client, "memory_update", {"memory_id": memory_id, "importance": "HIGH"}
    )
    assert not is_error and changed["changed"] == ["importance"]
    # An unknown id alone is named as unknown (auditor: it said "nothing to change").
    unknown = await refused(client, "memory_update", {"memory_id": "deadbeef"})
    assert "deadbeef" in unknown and "only the id was given" not in unknown


# --------------------------------------------------------------------------- dates past UTC's range

PAST_UTC = [
    (
        "memory_author",
        {"content": "Ends late.", "valid_to": "9999-12-31T23:59:59-05:00"},
        "valid_to",
    ),
    (
        "memory_author",
        {"content": "Starts early.", "valid_from": "0001-01-01T00:00:00+05:00"},
        "valid_from",
    ),
    (
        "intent",
        {"action": "add", "content": "Ping me.", "fire_at": "9999-12-31T23:00:00-05:00"},
        "fire_at",
    ),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("tool", "args", "field"), PAST_UTC, ids=[p[2] for p in PAST_UTC])
async def test_a_date_outside_utcs_years_is_refused_naming_the_field(
    client: Client, tool: str, args: dict, field: str
) -> None:
    """A valid ISO time whose offset moves it past year 9999 (or before year 1) in UTC: the
    reply was "Error executing tool memory_author" (an OverflowError in the server's log)."""
    text = await refused(client, tool, args)
    assert f"{tool}: {field}: " in text, text  # the SDK puts "Error executing tool X: " first
    assert "falls outside 0001-01-02 to 9999-12-30 in UTC" in text and "Pass a date between" in text
    stats = json.loads((await client.read_resource("memory://stats")).contents[0].text)
    assert stats["total"] == 0


def test_the_cli_refuses_a_date_past_utcs_years_naming_the_option(tmp_path: Path) -> None:
    store = str(tmp_path / "cli.sqlite")
    result = CliRunner().invoke(
        main, ["--store", store, "author", "x", "--valid-to", "9999-12-31T23:59:59-05:00"]
    )
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "--valid-to: '9999-12-31T23:59:59-05:00' falls outside 0001-01-02 to 9999-12-30" in (
        result.output
    )


@pytest.mark.anyio
@pytest.mark.parametrize("tool", ["memory_author", "memory_update"])
async def test_true_is_no_importance(client: Client, tool: str) -> None:
    """Lax validation made JSON true importance 1 (and false 0 on an update)."""
    made = await client.call_tool("memory_author", {"content": "A note to rate."})
    args = (
        {"content": "Rated."}
        if tool == "memory_author"
        else {"memory_id": made.structured_content["id"]}
    )
    text = await refused(client, tool, {**args, "importance": True})
    assert "importance" in text, text
    note = await client.call_tool("memory_recall", {"query": "note to rate"})
    assert note.structured_content["hits"][0]["importance"] == 5.0


@pytest.mark.anyio
@pytest.mark.parametrize("field", ["tags", "entities"])
async def test_memory_author_refuses_a_blank_label_and_writes_nothing(
    client: Client, field: str
) -> None:
    """A blank tag or entity was dropped without a word; it is refused naming the field."""
    args = {"content": "The VPN needs a reconnect after sleep", field: ["vpn", " "]}
    text = await refused(client, "memory_author", args)
    assert text.endswith(f"{field}: ' ' (item 2) is blank. Give it a word or leave it out.")
    stats = json.loads((await client.read_resource("memory://stats")).contents[0].text)
    assert stats["total"] == 0
    todo = {"action": "add", "content": "Reconnect the VPN", "tags": [""]}
    assert "tags: '' (item 1) is blank." in await refused(client, "todo", todo)


@pytest.mark.anyio
async def test_memory_update_refuses_a_blank_tag_rather_than_removing_every_tag(
    client: Client,
) -> None:
    """tags=[""] replaced the tags with none (the blank one dropped); it is refused and the
    tags kept, and the fix names tags=[], which still removes them all."""
    made = await client.call_tool("memory_author", {"content": "VPN note", "tags": ["vpn"]})
    memory_id = made.structured_content["id"]
    text = await refused(client, "memory_update", {"memory_id": memory_id, "tags": [""]})
    assert text.endswith(
        "tags: '' (item 1) is blank. Give it a word or leave it out; tags=[] removes them all."
    )
    shown = json.loads(
        (await client.read_resource(f"memory://memories/{memory_id}")).contents[0].text
    )
    assert shown["tags"] == ["vpn"]
    _, _, cleared = await call(client, "memory_update", {"memory_id": memory_id, "tags": []})
    assert cleared is not None and cleared["changed"] == ["tags"]
