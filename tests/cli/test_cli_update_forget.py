"""`nooa-mcp update`, `forget` and `revive`: the memory_update tool's changes and the facade's
forget and revive at the terminal, as the CLI's owner (refused across roles as the tools are)."""

from pathlib import Path

import pytest
from writes_support import Cli, hash_cli


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    return hash_cli(tmp_path, monkeypatch)


def test_update_changes_only_what_is_given(cli: Cli) -> None:
    memory = cli("author", "The staging cluster has three nodes", "--tag", "old").output.split()[1]
    other = cli("author", "Staging runs on the blue cloud account").output.split()[1]
    done = cli(
        "update", memory[:8], "--content", "The staging cluster has five nodes",
        "--importance", "HIGH", "--tag", "ops", "--tag", "staging", "--link", other[:8],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert done.output.splitlines() == [
        f"updated  {memory}",
        f"changed: content, importance, tags, link:related->{other[:8]}",
    ]
    data = cli.json("list", "--json")["memories"][0]
    assert data["content"] == "The staging cluster has five nodes"
    assert data["tags"] == ["ops", "staging"] and data["importance_label"] == "HIGH"
    again = cli("update", memory[:8], "--importance", "HIGH")
    assert again.output.splitlines() == [f"unchanged  {memory}"]
    titled = cli.json("update", memory, "--title", "Staging size", "--json")
    assert titled["changed"] == ["title"]


@pytest.mark.parametrize("blank", ["", "  "])
def test_an_empty_tag_is_refused_and_no_tags_removes_them(cli: Cli, blank: str) -> None:
    memory = cli("author", "The VPN needs a reconnect after sleep", "--tag", "vpn").output.split()[
        1
    ]
    refused = cli("update", memory[:8], "--tag", blank)
    assert refused.exit_code == 2
    assert "--tag" in refused.output and "pass --no-tags to remove them all" in refused.output
    assert cli.json("list", "--json")["memories"][0]["tags"] == ["vpn"]
    both = cli("update", memory[:8], "--tag", "net", "--no-tags")
    assert both.exit_code == 2 and "pass one of them" in both.output
    cleared = cli("update", memory[:8], "--no-tags")
    assert cleared.exit_code == 0, cleared.output
    assert cleared.output.splitlines() == [f"updated  {memory}", "changed: tags"]
    assert cli.json("list", "--json")["memories"][0]["tags"] == []


@pytest.mark.parametrize(
    ("args", "refusal"),
    [
        (["author", "The VPN drops", "--tag", "vpn", "--tag", ""], "--tag: '' (item 2)"),
        (["author", "The VPN drops", "--entity", "  "], "--entity: '  ' (item 1)"),
        (["todo", "add", "Reconnect the VPN", "--tag", " "], "--tag: ' ' (item 1)"),
    ],
)
def test_a_blank_tag_or_entity_is_refused_when_authoring(
    cli: Cli, args: list[str], refusal: str
) -> None:
    """As update's --tag "": a blank label was dropped without a word; it is refused naming
    the flag, and nothing is written."""
    refused = cli(*args)
    assert refused.exit_code == 1
    assert refused.output.strip() == (f"Error: {refusal} is blank. Give it a word or leave it out.")
    cli("author", "A first memory, so the store exists")
    assert cli(*args).exit_code == 1
    assert len(cli.json("list", "--json")["memories"]) == 1


def test_forget_archives_with_its_reason_and_revive_restores(cli: Cli) -> None:
    memory = cli("author", "The old office is on Main Street").output.split()[1]
    gone = cli("forget", memory[:8], "--reason", "we moved")
    assert gone.exit_code == 0, gone.output
    assert gone.output.splitlines() == [f"forgotten  {memory}"]
    assert cli("forget", memory[:8]).output.startswith(f"already forgotten  {memory}")
    assert memory[:8] not in cli("list").output
    assert memory[:8] in cli("list", "--state", "archived").output
    blocked = cli("author", "The old office is on Main Street")
    assert "we moved" in blocked.output  # the tombstone keeps the reason given
    back = cli("revive", memory[:8])
    assert back.exit_code == 0 and back.output.splitlines() == [f"revived  {memory}"]
    assert memory[:8] in cli("list").output
    assert cli.json("revive", memory, "--json")["changed"] == []


def test_a_role_may_not_update_or_forget_a_shared_memory(cli: Cli) -> None:
    memory = cli("author", "Deploys go out on Tuesdays").output.split()[1]
    for args in (["update", memory[:8], "--title", "x"], ["forget", memory[:8]]):
        refused = cli("--owner", "billing@code", *args)
        assert refused.exit_code == 1 and "may not write a shared memory" in refused.output
    assert cli.json("list", "--json")["memories"][0]["title"] == ""
    assert memory[:8] in cli("list").output


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["update", "{id}"], "Nothing to change: pass at least one of --content"),
        (["update", "{id}", "--content", " "], "--content: is empty."),
        (["update", "{id}", "--importance", "42"], "--importance: '42' is outside 0–10."),
        (["update", "{id}", "--valid-to", "soon"], "--valid-to: 'soon' is not an ISO 8601"),
        (["update", "{id}", "--link", "abcdef12"], "--link: no memory with id 'abcdef12'"),
        (["update", "zzzzzzzz", "--title", "x"], "ID: 'zzzzzzzz' is not a memory id"),
        (["forget", "abcdef12"], "ID: no memory with id 'abcdef12'"),
        (["forget", "{id}", "--reason", " "], "--reason: an empty reason"),
        (["revive", "zzzzzzzz"], "ID: 'zzzzzzzz' is not a memory id"),
    ],
)
def test_bad_input_names_the_option_and_exits_non_zero(
    cli: Cli, args: list[str], words: str
) -> None:
    memory = cli("author", "The backup job runs at 3am").output.split()[1]
    result = cli(*[a.replace("{id}", memory[:8]) for a in args])
    assert result.exit_code != 0
    assert words in " ".join(result.output.split()) and "Traceback" not in result.output
    assert cli.json("list", "--json")["memories"][0]["content"] == "The backup job runs at 3am"
