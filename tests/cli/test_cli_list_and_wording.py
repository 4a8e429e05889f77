"""`nooa-mcp list` (the console's filters) and what the CLI and MCP say when there is little
to say: one sentence for an empty recall, the references' state in the table, a reflect
without a client that does not blame a client."""

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
import time_machine
from loading_model import loading
from mcp import Client
from writes_support import Cli, hash_cli

from nooa_mcp import Memory
from nooa_mcp.config import Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp.server import build_server


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    return hash_cli(tmp_path, monkeypatch)


def ids_of(out: str) -> list[str]:
    return [line.split()[0] for line in out.splitlines()[2:] if line and line[0] != "M"]


def test_list_filters_by_type_owner_tag_and_state(cli: Cli) -> None:
    ops = cli("author", "The backup job runs at 3am", "--tag", "ops").output.split()[1]
    todo = cli("author", "Rotate the keys", "--type", "todo").output.split()[1]
    mine = cli("--owner", "me@code", "author", "Deploys go out on Tuesdays").output.split()[1]
    gone = cli("author", "The old office is on Main Street").output.split()[1]

    async def forget() -> None:
        async with Memory.open(cli.store, owner="", embedder=HashEmbedder()) as mem:
            await mem.forget(gone)

    anyio.run(forget)
    listed = cli("list")
    assert listed.exit_code == 0, listed.output
    assert listed.output.splitlines()[0].split() == [
        "id", "type", "owner", "state", "imp", "tags", "created", "memory"
    ]  # fmt: skip
    assert ids_of(listed.output) == [ops[:8], todo[:8]]  # shared scope, live, written order
    assert ids_of(cli("list", "--type", "todo").output) == [todo[:8]]
    assert ids_of(cli("list", "--tag", "OPS").output) == [ops[:8]]
    archived = cli("list", "--state", "archived").output
    assert ids_of(archived) == [gone[:8]]
    (row,) = [line for line in archived.splitlines() if line.startswith(gone[:8])]
    assert row.split()[3] == "forgotten"  # by its user; reflection's would read "faded"
    assert ids_of(cli("list", "--state", "all").output) == [ops[:8], todo[:8], gone[:8]]
    assert ids_of(cli("--owner", "me", "list", "--by", "me@code").output) == [mine[:8]]
    assert ids_of(cli("--owner", "me", "list", "--by", "(shared)").output) == [ops[:8], todo[:8]]
    data = cli.json("list", "--json", "--limit", "1")
    assert [m["id"] for m in data["memories"]] == [ops]
    after = cli.json("list", "--json", "--after", str(data["next_after"]))
    assert [m["id"] for m in after["memories"]] == [todo] and after["next_after"] is None
    more = cli("list", "--limit", "1").output
    assert f"More: nooa-mcp list --after {data['next_after']}" in more
    bad = cli("list", "--type", "note")
    assert bad.exit_code == 2 and "'note' is not a memory type" in bad.output


def test_list_says_which_intents_have_fired(cli: Cli) -> None:
    """A one-shot intent that fired stays live but will not fire again: `list` says "fired"
    where it said "live"; a recurring one says it is armed and how often it fired; an armed
    one stays "live"."""
    once = cli("author", "Pay the tax bill", "--type", "intent", "--fire-at", "2020-01-01T00:00Z")
    every = cli(
        "author", "Stretch", "--type", "intent", "--fire-at", "2020-01-01T00:00Z",
        "--every-hours", "24",
    )  # fmt: skip
    armed = cli("author", "Renew the domain", "--type", "intent", "--fire-at", "2099-01-01")
    assert cli("author", "The staging cluster has three worker nodes").exit_code == 0  # fires
    listed = cli("list", "--type", "intent").output
    states = {line[:8]: line.split("  ")[3].strip() for line in listed.splitlines()[2:]}
    assert states == {
        once.output.split()[1][:8]: "fired",
        every.output.split()[1][:8]: "armed, fired 1x",
        armed.output.split()[1][:8]: "live",
    }


def test_list_says_which_memory_replaced_one(cli: Cli) -> None:
    """A memory a newer one refines is listed as superseded by it, as recall flags it."""
    old = cli.json("author", "The staging cluster has three worker nodes", "--json")["id"]
    new = cli.json(
        "author", "The staging cluster has five worker nodes", "--link", f"{old[:8]}:refines",
        "--json",
    )["id"]  # fmt: skip
    listed = cli("list").output
    states = {line[:8]: line.split("  ")[3].strip() for line in listed.splitlines()[2:]}
    assert states == {old[:8]: f"superseded by {new[:8]}", new[:8]: "live"}
    shown = {m["id"]: m["flags"]["superseded_by"] for m in cli.json("list", "--json")["memories"]}
    assert shown == {old: new, new: None}


def test_an_unknown_id_points_at_list_which_finds_it(cli: Cli) -> None:
    made = cli("author", "The backup job runs at 3am").output.split()[1]
    out = cli("explain", "--id", "deadbeef")
    assert out.exit_code == 1 and "Recall or list to find the id" in out.output
    assert made[:8] in cli("list").output


def test_an_empty_store_recall_is_one_sentence(cli: Cli) -> None:
    cli("reflect")  # creates the store, empty
    out = cli("recall", "anything at all")
    assert out.output.strip().splitlines() == ["Nothing stored matches this query."]


def test_the_recall_table_shows_each_reference_live_or_dangling(cli: Cli, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "keys.md").write_text("Rotate monthly.")
    root = ["--reference-root", str(tmp_path)]
    cli(*root, "author", "How to rotate the keys", "--ref", "file:docs/keys.md")
    live = cli(*root, "recall", "rotate the keys").output
    assert "1  ref file:docs/keys.md: LIVE" in live.splitlines()
    (docs / "keys.md").unlink()
    dangling = cli(*root, "recall", "rotate the keys").output
    assert "1  ref file:docs/keys.md: DANGLING" in dangling.splitlines()


def test_reflect_from_the_cli_does_not_blame_a_client(cli: Cli) -> None:
    out = cli("reflect")
    assert out.exit_code == 0
    assert "client does not offer" not in out.output
    notes = [json.loads(cli("reflect", "--json").stdout)["steps"][i]["note"] for i in (1, 4)]
    why = (
        "skipped: it asks the client's model (MCP sampling), so only a server "
        "with NOOA_GENERATIVE_REFLECTION=1 whose client offers sampling runs it"
    )
    assert notes == [why, why]


@pytest.mark.anyio
async def test_an_mcp_recall_says_nothing_once(tmp_path: Path) -> None:
    settings = Settings(store=tmp_path / "mcp.sqlite", owner="tester")
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as client:
        empty = await client.call_tool("memory_recall", {"query": "zebra"})
    text = empty.content[0].text
    assert text.splitlines() == [
        '0 result(s) for "zebra" (scope mine):',
        "Nothing stored matches this query.",
    ]


@pytest.mark.anyio
async def test_an_mcp_recall_while_the_model_loads_says_keyword_only_once(
    tmp_path: Path,
) -> None:
    settings = Settings(store=tmp_path / "mcp.sqlite", owner="tester")
    with loading(HashEmbedder()) as (warming, gate):
        async with Client(build_server(settings, embedder=warming), cache=None) as client:
            result = await client.call_tool("memory_recall", {"query": "zebra"})
            gate.set()
    assert result.structured_content["embeddings"] == "warming"
    assert result.content[0].text.count("keyword matches only") == 1


def test_reflect_from_the_cli_names_what_it_faded(cli: Cli) -> None:
    for i in range(12):
        cli("author", f"Widget {i} of the plant turns on gear number {i * 7}.")
    with time_machine.travel(datetime.now(UTC) + timedelta(days=400), tick=False):
        out = cli("reflect", "--step", "prune").output
    pruned = [line for line in out.splitlines() if line.startswith("prune: ")]
    assert len(pruned) == 11 and all("Widget " in line for line in pruned[:10])
    assert pruned[10] == "prune: … and 2 more (`list --state archived` lists what faded)"
