"""Memories of other roles do not look like no memories to the person holding the store.

`hooks install --owner me@code`, then a plain `nooa-mcp stats`: the store holds memories, all
of role `me`, and the CLI (no --owner: shared memories only) sees none. The CLI says so, with
the roles and their counts and the flag that reaches them, never their content. An MCP client
is never told that other roles exist.
"""

import json
from pathlib import Path

import pytest
from mcp import Client
from writes_support import Cli, hash_cli

from nooa_mcp import Memory
from nooa_mcp.config import Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp.server import build_server

SECRET = "The production SSH keys are in the team vault"


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    out = hash_cli(tmp_path, monkeypatch)
    for text in (SECRET, "Deploys go out on Tuesdays", "The staging cluster has three nodes"):
        assert out("--owner", "me@code", "author", text).exit_code == 0
    assert out("--owner", "ops", "author", "Pager rota is in the wiki").exit_code == 0
    return out


HINT = "this store holds 4 live memories of other roles (me: 3, ops: 1)"


@pytest.mark.parametrize("command", [["stats"], ["recall", "SSH keys"], ["list"]], ids=" ".join)
def test_the_cli_names_the_roles_and_the_flag_without_their_content(
    cli: Cli, command: list[str]
) -> None:
    out = cli(*command)
    assert out.exit_code == 0, out.output
    assert HINT in out.output
    assert "without --owner (shared memories only)" in out.output
    assert "--owner me" in out.output
    assert "vault" not in out.output and "SSH keys are" not in out.output


@pytest.mark.parametrize("flags", [[], ["--json"]], ids=["jsonl", "json"])
def test_an_export_that_holds_nothing_says_why_on_stderr(cli: Cli, flags: list[str]) -> None:
    """A backup of an empty scope would be an empty file and exit 0: the sentence goes to
    stderr, and stdout stays a valid (empty) export."""
    out = cli("export", *flags)
    assert out.exit_code == 0, out.output
    assert out.stdout.strip() in ("", "[]")
    assert "Exported no memory." in out.stderr and HINT in out.stderr
    assert "--owner me" in out.stderr and "vault" not in out.stderr
    full = cli("--owner", "me@code", "export", *flags)
    assert SECRET in full.stdout and full.stderr == ""


def test_stats_json_carries_the_counts_and_the_sentence(cli: Cli) -> None:
    data = cli.json("stats", "--json")
    assert data["total"] == 0
    assert data["other_roles"] == {"me": 3, "ops": 1}
    assert "--owner" in data["note"]


def test_another_owner_with_an_empty_role_is_told_too(cli: Cli) -> None:
    out = cli("--owner", "billing@code", "stats")
    assert "No memory here is visible to --owner billing@code" in out.output
    assert HINT in out.output


def test_no_hint_once_the_scope_holds_memories(cli: Cli) -> None:
    out = cli("--owner", "me@laptop", "recall", "SSH keys")
    assert "other roles" not in out.output and "vault" in out.output
    assert "other roles" not in cli("--owner", "me", "stats").output
    # A shared memory makes the plain CLI's scope non-empty: nothing to explain then.
    cli("author", "The office closes at six")
    assert "other roles" not in cli("stats").output


def test_recall_names_the_shared_role_it_searched(cli: Cli) -> None:
    shared = cli.json("recall", "SSH keys", "--json")
    assert shared["roles_searched"] == ["(shared)"]
    mine = cli.json("--owner", "me@code", "recall", "SSH keys", "--json")
    assert mine["roles_searched"] == ["me", "(shared)"]


@pytest.mark.anyio
async def test_an_mcp_client_is_never_told_about_other_roles(tmp_path: Path) -> None:
    store = tmp_path / "mcp.sqlite"
    async with Memory.open(store, owner="me@code", embedder=HashEmbedder()) as mem:
        await mem.author(SECRET)
    settings = Settings(store=store, owner="stranger")
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as client:
        recalled = await client.call_tool("memory_recall", {"query": "SSH keys"})
        stats = await client.read_resource("memory://stats")
    text = recalled.content[0].text + json.dumps(recalled.structured_content)
    assert recalled.structured_content["hits"] == []
    assert "me" not in recalled.structured_content["roles_searched"]
    assert "other roles" not in text and "--owner" not in text
    assert '"me"' not in stats.contents[0].text and "other_roles" not in stats.contents[0].text
