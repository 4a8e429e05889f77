"""`nooa-mcp todo` and `nooa-mcp intent`: the tools' actions at the terminal, as the CLI's
owner. Without --owner the CLI is the user, the shared owner, who closes shared todos and
cancels shared intents (as the console without an owner does); a role is refused them."""

from pathlib import Path

import pytest
from writes_support import Cli, hash_cli


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    return hash_cli(tmp_path, monkeypatch)


def test_a_shared_todo_is_added_listed_closed_and_reopened_by_the_user(cli: Cli) -> None:
    added = cli("todo", "add", "Rotate the staging keys", "--importance", "HIGH")
    assert added.exit_code == 0, added.output
    status, todo_id = added.output.splitlines()[0].split()
    assert status == "created" and len(todo_id) == 32
    assert "1 open." in added.output
    listed = cli("todo", "list").output
    assert listed.splitlines()[0].split() == ["id", "status", "imp", "created", "todo"]
    assert todo_id[:8] in listed and "HIGH" in listed
    done = cli("todo", "done", todo_id[:8])
    assert done.exit_code == 0, done.output
    assert done.output.splitlines() == [f"done  {todo_id}", "0 open."]
    assert cli("todo", "done", todo_id[:8]).output.startswith(f"already done  {todo_id}")
    assert cli("todo", "list").output.splitlines() == ["No open todos."]
    assert todo_id[:8] in cli("todo", "list", "--status", "done").output
    data = cli.json("todo", "reopen", todo_id, "--json")
    assert data["status"] == "open" and data["open_count"] == 1
    dropped = cli.json("--json", "todo", "drop", todo_id[:8])
    assert dropped["outcome"] == "dropped" and dropped["todos"] == []
    every = cli.json("todo", "list", "--status", "all", "--json")["todos"]
    assert [t["status"] for t in every] == ["dropped"]


def test_a_role_is_refused_a_shared_todo_and_intent_and_closes_its_own(cli: Cli) -> None:
    shared = cli("todo", "add", "Renew the domain").output.split()[1]
    intent = cli("intent", "add", "Call the bank", "--fire-at", "2099-01-01").output.split()[1]
    # Listed to the role marked as the user's to close; to the user, as their own.
    assert (
        "Renew the domain (shared: the user closes it)"
        in cli("--owner", "billing@code", "todo", "list").output
    )
    assert "(shared" not in cli("todo", "list").output
    refused = cli("--owner", "billing@code", "todo", "done", shared[:8])
    assert refused.exit_code == 1
    assert "may not write a shared memory" in refused.output
    assert "nooa-mcp todo done ID" in refused.output and "Traceback" not in refused.output
    assert cli.json("todo", "list", "--json")["todos"][0]["status"] == "open"
    refused = cli("--owner", "billing@code", "intent", "cancel", intent[:8])
    assert refused.exit_code == 1 and "may not write a shared memory" in refused.output
    assert intent[:8] in cli("intent", "list").output
    own = cli("--owner", "billing@code", "todo", "add", "Send the invoices").output.split()[1]
    closed = cli("--owner", "billing@code", "todo", "done", own[:8])
    assert closed.exit_code == 0 and closed.output.startswith(f"done  {own}")


def test_intents_are_added_listed_checked_and_cancelled(cli: Cli) -> None:
    added = cli("intent", "add", "Pay the tax bill", "--fire-at", "2020-01-01T00:00Z")
    assert added.exit_code == 0, added.output
    first, note = added.output.splitlines()[:2]
    status, intent_id = first.split()
    assert status == "created"
    assert note.startswith("--fire-at 2020-01-01 00:00 UTC has passed")
    listed = cli("intent", "list")
    assert listed.output.splitlines()[0].split() == [
        "id", "state", "fire", "at", "cue", "every", "h", "intent"
    ]  # fmt: skip
    assert "armed" in listed.output and "Reminder" not in listed.output  # listing fires none
    checked = cli("intent", "check")
    assert checked.exit_code == 0, checked.output
    assert checked.output.startswith("1 fired")
    assert f"intent {intent_id[:8]}): Pay the tax bill" in checked.output
    assert "fired" in cli("intent", "list").output.splitlines()[2]
    cued = cli("intent", "add", "Mention the rollback plan", "--cue", "deploy billing")
    cue_id = cued.output.split()[1]
    fired = cli("intent", "check", "--text", "we deploy billing today")
    assert f"intent {cue_id[:8]})" in fired.output
    cancelled = cli("intent", "cancel", intent_id[:8])
    assert cancelled.exit_code == 0 and cancelled.output.startswith(f"cancelled  {intent_id}")
    # Again: nothing changes, and it says so (exit 0, as forget of a forgotten memory).
    again = cli("intent", "cancel", intent_id[:8])
    assert again.exit_code == 0 and again.output.startswith(f"already cancelled  {intent_id}")
    assert intent_id[:8] not in cli("intent", "list").output


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["todo", "done", "zzzzzzzz"], "ID: 'zzzzzzzz' is not a memory id"),
        (["todo", "done", "abcdef12"], "ID: no memory with id 'abcdef12'"),
        (["intent", "add", "x", "--fire-at", "soon"], "--fire-at: 'soon' is not an ISO 8601"),
        (["intent", "add", "Stretch"], "--fire-at/--cue"),
        (["todo", "add", " "], "TEXT: is empty"),
        (["todo", "list", "--status", "closed"], "'closed' is not one of"),
    ],
)
def test_bad_input_names_the_argument_and_exits_non_zero(
    cli: Cli, args: list[str], words: str
) -> None:
    cli("author", "The store exists")
    result = cli(*args)
    assert result.exit_code != 0
    assert words in result.output and "Traceback" not in result.output


def test_closing_a_memory_that_is_not_a_todo_or_intent_says_so(cli: Cli) -> None:
    info = cli("author", "The backup job runs at 3am").output.split()[1]
    wrong = cli("todo", "done", info[:8])
    assert wrong.exit_code == 1
    assert f"ID: {info[:8]} is an info, not a todo. List todos to find the id." in wrong.output
    wrong = cli("intent", "cancel", info[:8])
    assert wrong.exit_code == 1 and "not an intent" in wrong.output


def test_todo_and_intent_commands_refuse_a_missing_store(cli: Cli) -> None:
    for args in (["todo", "list"], ["todo", "done", "abcdef12"], ["intent", "cancel", "abc123"]):
        result = cli(*args)
        assert result.exit_code == 1 and "No store at" in result.output
    assert not cli.store.exists()


def test_a_person_listing_closing_or_cancelling_spends_no_reminder(cli: Cli) -> None:
    """A person's command is not the agent's turn (as in the console): a due intent stays
    armed through todo list/done/reopen and intent list/cancel, and `intent check` fires it."""
    todo_id = cli("todo", "add", "Rotate the keys").output.split()[1]
    other = cli("intent", "add", "Water the plants", "--fire-at", "2099-01-01").output.split()[1]
    due = cli("intent", "add", "Pay the tax bill", "--fire-at", "2020-01-01T00:00Z")
    due_id = due.output.split()[1]
    for args in (
        ["todo", "list"],
        ["todo", "done", todo_id[:8]],
        ["todo", "reopen", todo_id[:8]],
        ["intent", "list"],
        ["intent", "cancel", other[:8]],
    ):
        result = cli(*args)
        assert result.exit_code == 0, result.output
        assert "Reminder" not in result.output, args
    assert "Reminder (time" in cli("intent", "check").output
    assert f"{due_id[:8]}  fired" in cli("intent", "list").output
