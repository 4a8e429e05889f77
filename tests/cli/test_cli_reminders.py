"""The CLI prints every reminder it fires: firing spends a one-shot intent, so an intent fired
by a command whose table did not show it was lost to the person and to the next session."""

import json
from pathlib import Path

import pytest
from writes_support import Cli, hash_cli


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    return hash_cli(tmp_path, monkeypatch)


def fired_counts(cli: Cli) -> dict[str, int]:
    lines = [json.loads(x) for x in cli("export").stdout.splitlines()]
    lines = [x for x in lines if "maintenance" not in x]  # the log's lines name no memory
    return {x["content"]: (x.get("trigger") or {}).get("fired_count", 0) for x in lines}


def test_the_author_that_fires_a_due_intent_prints_it(cli: Cli) -> None:
    made = cli(
        "author", "Pay the tax bill", "--type", "intent", "--fire-at", "2020-01-01T00:00:00Z"
    )
    assert made.exit_code == 0 and "Reminder" not in made.output  # an intent never cues itself
    out = cli("author", "The staging cluster has three worker nodes")
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0].startswith("created")
    assert lines[1].startswith("Reminder (time, due 2020-01-01 00:00 UTC, ")
    assert "day(s) late, intent " in lines[1] and lines[1].endswith("Pay the tax bill")
    assert fired_counts(cli)["Pay the tax bill"] == 1
    # Spent: the next command neither fires nor prints it again.
    assert "Pay the tax bill" not in cli("author", "Lunch is at noon").output


def test_the_recall_that_fires_a_due_intent_prints_it_under_the_table(cli: Cli) -> None:
    cli("author", "The staging cluster has three worker nodes")
    cli("author", "Renew the TLS certificate", "--type", "intent", "--fire-at", "2020-01-01T00:00Z")
    out = cli("recall", "staging cluster")
    assert out.exit_code == 0, out.output
    assert out.output.splitlines()[-1].endswith("): Renew the TLS certificate")
    assert "staging cluster" in out.output  # and the hits are there too
    as_json = cli("recall", "staging cluster", "--json")
    assert json.loads(as_json.stdout)["reminders"] == []  # fired once, by the first recall


def test_an_empty_recall_still_prints_the_reminder_it_fired(cli: Cli) -> None:
    cli("author", "Renew the TLS certificate", "--type", "intent", "--fire-at", "2020-01-01T00:00Z")
    out = cli("recall", "zebra", "--scope", "instance")
    assert "Renew the TLS certificate" in out.output


def test_an_import_fires_no_intent_and_the_next_command_shows_it(cli: Cli, tmp_path: Path) -> None:
    cli("author", "Pay the tax bill", "--type", "intent", "--fire-at", "2020-01-01T00:00:00Z")
    # Imported content about the tax bill would cue it too: an import is nobody's turn.
    (tmp_path / "dump.jsonl").write_text(
        '{"content": "The tax bill is paid from the business account"}\n'
        '{"content": "The staging cluster has three worker nodes"}\n'
    )
    imported = cli("import", str(tmp_path / "dump.jsonl"))
    assert imported.exit_code == 0 and "Reminder" not in imported.output
    assert fired_counts(cli)["Pay the tax bill"] == 0  # not spent by the import
    out = cli("author", "Lunch is at noon")
    assert out.output.splitlines()[1].endswith("Pay the tax bill")


@pytest.mark.parametrize(
    ("typed", "stored"),
    [
        ("2030-01-01T09:00", "2030-01-01T14:00:00+00:00"),  # New York's 9 am
        ("2030-07-01T09:00:00", "2030-07-01T13:00:00+00:00"),  # summer time
        ("2030-01-01T09:00Z", "2030-01-01T09:00:00+00:00"),
        ("2030-01-01T09:00+02:00", "2030-01-01T07:00:00+00:00"),
    ],
)
def test_a_time_typed_without_an_offset_is_the_machines_local_time(
    cli: Cli, typed: str, stored: str
) -> None:
    """A person typing 9:00 means their clock's 9:00; the store reads a time with no offset
    as UTC (a model's argument), so the CLI makes the local one explicit first."""
    import time

    with pytest.MonkeyPatch.context() as local:
        local.setenv("TZ", "America/New_York")
        time.tzset()
        out = cli("author", "Call the bank", "--type", "intent", "--fire-at", typed)
    time.tzset()
    assert out.exit_code == 0, out.output
    [line] = cli("export").stdout.splitlines()
    assert json.loads(line)["trigger"]["fire_at"] in (stored, stored.replace("+00:00", "Z"))


def test_a_time_that_is_no_time_is_refused_naming_the_flag(cli: Cli) -> None:
    out = cli("author", "Call the bank", "--type", "intent", "--fire-at", "tomorrow")
    assert out.exit_code == 2 and "--fire-at" in out.output
    assert "'tomorrow' is not an ISO 8601 time" in out.output
