"""The rough edges a new user hits (issue 13 item 4), each through the CLI or MCP."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
from pathlib import Path

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from click.testing import CliRunner
from mcp import Client
from writes_support import Cli, console_script, hash_cli, model_cli

from nooa_mcp import Settings
from nooa_mcp.cli import main
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp.server import build_server


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    return hash_cli(tmp_path, monkeypatch)


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


def env_without_nooa(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOOA_")}
    env.update(HF_HUB_OFFLINE="1", **extra)
    return env


# --------------------------------------------------------------------------- reference root


def test_the_reference_root_error_names_an_option_that_exists_and_the_option_works(
    cli: Cli, tmp_path: Path
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "runbook.md").write_text("Restart the queue workers before the database.\n")
    missing = cli("author", "How to restart the stack", "--ref", "file:runbook.md")
    assert missing.exit_code == 1, missing.output
    assert "--reference-root" in missing.output and "NOOA_REFERENCE_ROOT" in missing.output
    assert "Traceback" not in missing.output
    written = cli(
        "--reference-root",
        str(root),
        "author",
        "How to restart the stack",
        "--ref",
        "file:runbook.md",
    )
    assert written.exit_code == 0, written.output
    recalled = cli.json("--reference-root", str(root), "recall", "restart the stack", "--json")
    refs = recalled["hits"][0]["references"]
    assert [(r["uri"], r["state"]) for r in refs] == [("file:runbook.md", "LIVE")]
    assert "Restart the queue workers" in refs[0]["value"]


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


# --------------------------------------------------------------------------- eval replay


def _store_with_three_recalls(cli: Cli, path: Path) -> None:
    for text in (
        "The deploy key lives in the 1Password vault",
        "The staging database restarts at midnight",
        "Team lunch is on Fridays at noon",
    ):
        assert cli("--store", str(path), "author", text).exit_code == 0
    for query in ("deploy key", "staging database", "team lunch"):
        assert cli("--store", str(path), "recall", query, "-k", "2").exit_code == 0


def test_eval_replay_replays_the_store_named_by_the_global_option_or_the_environment(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = tmp_path / "mine.sqlite"
    _store_with_three_recalls(cli, mine)
    by_option = cli.json("--store", str(mine), "eval", "replay", "--json")
    assert by_option["events"] == 3, by_option
    monkeypatch.setenv("NOOA_STORE", str(mine))
    by_env = cli.json("eval", "replay", "--json")
    assert by_env["events"] == 3


def test_the_synthetic_replay_workload_needs_the_synthetic_flag(cli: Cli) -> None:
    synthetic = cli.json(
        "eval", "replay", "--synthetic", "--sessions", "2", "--embedder", "hash", "--json"
    )
    assert synthetic["events"] > 0


# --------------------------------------------------------------------------- author from stdin


def test_author_dash_reads_long_text_from_stdin(cli: Cli) -> None:
    text = "\n".join(f"Line {i}: the release checklist step number {i}." for i in range(120))
    written = cli("author", "-", input=text + "\n")
    assert written.exit_code == 0, written.output
    exported = [json.loads(line) for line in cli("export").stdout.splitlines()]
    assert [m["content"] for m in exported] == [text]


# --------------------------------------------------------------------------- --json everywhere


def test_json_is_accepted_as_a_global_option(cli: Cli) -> None:
    assert cli("author", "The backup runs at 3am").exit_code == 0
    stats = cli.json("--json", "stats")
    assert stats["total"] == 1
    recalled = cli.json("--json", "recall", "backup")
    assert recalled["hits"][0]["content"] == "The backup runs at 3am"


def test_export_json_prints_one_json_array(cli: Cli) -> None:
    for text in ("first memory to move", "second memory to move"):
        assert cli("author", text).exit_code == 0
    exported = cli.json("export", "--json")
    assert isinstance(exported, list)
    assert [m["content"] for m in exported] == ["first memory to move", "second memory to move"]


def test_every_memory_command_takes_json(cli: Cli) -> None:
    commands = ["author", "recall", "explain", "stats", "import", "export", "reflect"]
    without = [c for c in commands if "--json" not in cli(c, "--help").output]
    assert without == []


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


def test_the_cli_refuses_an_intent_without_a_trigger(cli: Cli) -> None:
    out = cli("author", "Call the landlord about the heating", "--type", "intent")
    assert out.exit_code != 0
    assert "trigger" in out.output and re.search(r"fire[_-]at", out.output), out.output
    assert "cue" in out.output and "Traceback" not in out.output
    assert cli.json("stats", "--json")["total"] == 0


# --------------------------------------------------------------------------- todos


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


# --------------------------------------------------------------------------- stats and explain


@pytest.mark.real_model
def test_cli_stats_never_says_the_model_is_warming(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = model_cli(tmp_path, monkeypatch)
    assert cli("reflect").exit_code == 0  # a write: creates the store, empty
    table = cli("stats")
    assert table.exit_code == 0, table.output
    assert "warming" not in table.output
    assert "warming" not in json.dumps(cli.json("stats", "--json"))


def test_explain_on_an_empty_store_prints_a_sentence(cli: Cli) -> None:
    assert cli("reflect").exit_code == 0  # a write: creates the store, empty
    out = cli("explain", "x")
    assert out.exit_code == 0, out.output
    text = out.output.strip()
    assert text and text.endswith("."), repr(out.output)
    assert "score" not in text


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


@pytest.mark.anyio
async def test_an_intent_without_a_time_or_cue_names_the_tool_arguments(client: Client) -> None:
    text = await refused(client, "intent", {"action": "add", "content": "Water the plants"})
    assert "fire_at" in text and "cue" in text
    assert "{" not in text, text


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
    assert "1 fired" in texts[2]
    for text in texts:
        assert "  " not in text, repr(text)


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
    ("memory_recall", {"query": "x", "k": "many"}, "k: must be a whole number; got 'many'."),
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


# --------------------------------------------------------------------------- serving


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.anyio
@pytest.mark.processes
async def test_http_serve_prints_one_line_with_the_url_the_store_and_the_token_state(
    tmp_path: Path,
) -> None:
    store = tmp_path / "served.sqlite"
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    command = [console_script(), "--store", str(store), "serve", "--transport", "http"]
    process = await anyio.open_process(
        [*command, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        # Unbuffered: the line must reach the pipe when printed, as it reaches a terminal.
        env=env_without_nooa(PYTHONUNBUFFERED="1"),
    )
    lines: list[str] = []
    try:
        reader = BufferedByteReceiveStream(process.stdout)
        with anyio.fail_after(30):  # a guard against a hang, not a timing assertion
            while not any(url in line for line in lines):
                try:
                    lines.append((await reader.receive_until(b"\n", 65536)).decode())
                except (anyio.EndOfStream, anyio.IncompleteRead):
                    break
    finally:
        process.terminate()
        with anyio.CancelScope(shield=True):
            await process.wait()
            await process.aclose()
    started = [line for line in lines if url in line]
    assert len(started) == 1, lines
    assert store.name in started[0]
    assert re.search(r"token", started[0], re.I), started[0]


@pytest.mark.processes
def test_a_busy_port_is_one_sentence_naming_the_port(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        out = subprocess.run(
            [
                console_script(),
                "--store",
                str(tmp_path / "served.sqlite"),
                "serve",
                "--transport",
                "http",
                "--port",
                str(port),
            ],
            capture_output=True,
            text=True,
            env=env_without_nooa(),
            timeout=120,
        )
    text = out.stdout + out.stderr
    assert out.returncode != 0
    assert "Errno" not in text and "Traceback" not in text and "ERROR:" not in text, text
    said = [line for line in text.splitlines() if str(port) in line]
    assert any(re.search(r"in use|busy|taken", line) for line in said), text


@pytest.mark.processes
def test_tokens_with_the_stdio_transport_are_refused_in_one_sentence(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"a-long-random-token": "alice"}))
    out = subprocess.run(
        [console_script(), "--store", str(tmp_path / "s.sqlite"), "serve", "--tokens", str(tokens)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env_without_nooa(),
        timeout=120,
    )
    assert out.returncode != 0
    assert "--tokens" in out.stderr and "http" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
