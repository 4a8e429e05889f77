"""A memory whose --valid-to has passed: `list` shows it stale (as recall flags it), and
`author` says, when it is written, that the time given has already passed."""

from datetime import UTC, datetime
from pathlib import Path

import pytest
import time_machine
from writes_support import Cli, hash_cli


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    return hash_cli(tmp_path, monkeypatch)


def states(out: str) -> dict[str, str]:
    return {line[:8]: line.split("  ")[3].strip() for line in out.splitlines()[2:]}


def test_list_shows_a_memory_whose_validity_ended_as_stale(cli: Cli) -> None:
    old = cli("author", "Builds run on the old CI host", "--valid-to", "2020-01-31T00:00Z")
    new = cli("author", "Builds run on the new CI host", "--valid-to", "2099-01-31T00:00Z")
    old_id, new_id = old.stdout.split()[1], new.stdout.split()[1]
    assert states(cli("list").output) == {old_id[:8]: "stale since 2020-01-31", new_id[:8]: "live"}
    with time_machine.travel(datetime(2099, 2, 1, tzinfo=UTC)):
        assert states(cli("list").output)[new_id[:8]] == "stale since 2099-01-31"
    flags = {m["id"]: m["flags"]["stale"] for m in cli.json("list", "--json")["memories"]}
    assert flags == {old_id: True, new_id: False}


def test_author_notes_a_valid_to_already_past_and_stores_it(cli: Cli) -> None:
    past = cli("author", "The VPN gateway is vpn1", "--valid-to", "2020-01-31T00:00Z")
    assert past.exit_code == 0, past.output
    assert past.stdout.split()[0] == "created"  # stored, and stdout is the reply alone
    assert (
        "Note: --valid-to 2020-01-31 00:00 UTC has already passed, so recall flags this memory "
        "stale" in past.stderr
    )
    listed = cli.json("list", "--json")["memories"]
    assert [m["content"] for m in listed] == ["The VPN gateway is vpn1"]
    later = cli("author", "The VPN gateway is vpn2", "--valid-to", "2099-01-31")
    assert later.exit_code == 0 and "Note" not in later.output
    data = cli("--json", "author", "The mail relay is mx1", "--valid-to", "2021-01-01T00:00Z")
    assert data.stdout.lstrip().startswith("{") and "already passed" in data.stderr
