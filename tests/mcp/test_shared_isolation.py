"""A shared server keeps owners apart: cross-role reads only by a server-side grant.

DESIGN.md §10: a scope is a model-filled argument, so it may narrow what a connection
reads, never widen it. Reading another role needs a grant from the server's configuration
(`--read`, `NOOA_READ`, or a `read` list on a token's entry). Redaction, notifications and
statistics follow what the caller may read, not the scope word it sent. The owner comes from
exactly one place, and owner names are plain ASCII so one owner cannot display as another.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from http_serving import connect
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import ResourceUpdatedNotification
from shared_support import (
    HANG_GUARD,
    MCP_HEADERS,
    OWNER_RE,
    REFUSE_GUARD,
    call,
    cli,
    exited_cleanly,
    hash_server,
    http_server,
    initialize_body,
    named,
    nooa_argv,
    process_env,
    read_json,
    reply_text,
    run_to_exit,
    serve_args,
)

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder

pytestmark = pytest.mark.anyio

SECRET = "The vault passphrase hint is the name of the first ferry Bob sailed on."
ALICE_NOTE = "Alice keeps the vault passphrase hint card in the blue folder."
QUERY = "vault passphrase hint"

ALICE_TOKEN = "alice-token-0123456789abcdef"
BOB_TOKEN = "bob-token-0123456789abcdef"
CAROL_TOKEN = "carol-token-0123456789abcdef"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def shared_settings(tmp_path: Path) -> Settings:
    """No configured owner: each in-memory client is the owner its name slugs to."""
    return Settings(store=tmp_path / "shared.sqlite", owner="")


async def seed_two_roles(server: Any) -> tuple[str, str]:
    """Bob's secret and Alice's own note on the same subject; their ids."""
    async with named(server, "bob") as bob:
        secret = (await call(bob, "memory_author", {"content": SECRET}))["id"]
    async with named(server, "alice") as alice:
        own = (await call(alice, "memory_author", {"content": ALICE_NOTE}))["id"]
    return secret, own


# --------------------------------------------------------------------------- §1 scope never widens


async def test_scope_star_without_a_grant_returns_only_my_role_and_shared_rows(
    shared_settings: Settings,
) -> None:
    server = hash_server(shared_settings)
    _, own = await seed_two_roles(server)
    async with named(server, "alice") as alice:
        reply = await call(alice, "memory_recall", {"query": QUERY, "scope": "*", "k": 10})
    assert [h["id"] for h in reply["hits"]] == [own]


async def test_naming_another_role_as_scope_without_a_grant_returns_only_my_role_and_shared_rows(
    shared_settings: Settings,
) -> None:
    server = hash_server(shared_settings)
    _, own = await seed_two_roles(server)
    async with named(server, "alice") as alice:
        reply = await call(alice, "memory_recall", {"query": QUERY, "scope": "bob", "k": 10})
    assert [h["id"] for h in reply["hits"]] == [own]


async def test_a_widened_scope_never_shows_the_other_roles_text_anywhere_in_the_reply(
    shared_settings: Settings,
) -> None:
    server = hash_server(shared_settings)
    await seed_two_roles(server)
    async with named(server, "alice") as alice:
        result = await alice.call_tool("memory_recall", {"query": QUERY, "scope": "*", "k": 10})
    assert "first ferry" not in reply_text(result)


async def test_recall_without_a_grant_says_which_roles_it_searched(
    shared_settings: Settings,
) -> None:
    server = hash_server(shared_settings)
    await seed_two_roles(server)
    async with named(server, "alice") as alice:
        reply = await call(alice, "memory_recall", {"query": QUERY, "scope": "*"})
    assert reply.get("roles_searched") == ["alice", "(shared)"]
    assert "alice" in reply["note"]


def test_a_read_grant_on_the_command_line_lets_scope_name_the_granted_role(
    tmp_path: Path,
) -> None:
    store = str(tmp_path / "granted.sqlite")
    authored = cli(["--store", store, "--owner", "bob", "author", SECRET, "--json"])
    assert authored.exit_code == 0, authored.output
    secret = json.loads(authored.stdout)["id"]
    granted = ["--store", store, "--owner", "alice", "--read", "bob"]
    result = cli([*granted, "recall", QUERY, "--scope", "bob", "--json"])
    assert result.exit_code == 0, result.output
    reply = json.loads(result.stdout)
    assert [h["id"] for h in reply["hits"]] == [secret]
    assert set(reply.get("roles_searched") or []) == {"bob", "(shared)"}


def test_NOOA_READ_grants_scope_star_the_named_role(tmp_path: Path) -> None:
    store = str(tmp_path / "granted.sqlite")
    authored = cli(["--store", store, "--owner", "bob", "author", SECRET, "--json"])
    secret = json.loads(authored.stdout)["id"]
    result = cli(
        ["--store", store, "--owner", "alice", "recall", QUERY, "--scope", "*", "--json"],
        NOOA_READ="bob",
    )
    assert result.exit_code == 0, result.output
    reply = json.loads(result.stdout)
    assert secret in [h["id"] for h in reply["hits"]]
    assert set(reply.get("roles_searched") or []) == {"alice", "bob", "(shared)"}


def _tokens_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.json"
    path.write_text(
        json.dumps(
            {
                ALICE_TOKEN: {"owner": "alice@laptop", "read": ["bob"]},
                BOB_TOKEN: "bob@ci",
                CAROL_TOKEN: "carol@desk",
            }
        )
    )
    return path


@pytest.mark.processes
async def test_a_token_entry_with_a_read_list_reads_the_granted_role_over_http(
    tmp_path: Path,
) -> None:
    args = serve_args(tmp_path / "http.sqlite", "--tokens", str(_tokens_file(tmp_path)))
    async with http_server(args) as proc:
        async with connect(proc.url, BOB_TOKEN) as bob:
            secret = (await call(bob, "memory_author", {"content": SECRET}))["id"]
        async with connect(proc.url, ALICE_TOKEN) as alice:
            reply = await call(alice, "memory_recall", {"query": QUERY, "scope": "bob"})
    assert [h["id"] for h in reply["hits"]] == [secret]


@pytest.mark.processes
async def test_a_token_without_a_read_list_cannot_widen_its_scope_over_http(
    tmp_path: Path,
) -> None:
    args = serve_args(tmp_path / "http.sqlite", "--tokens", str(_tokens_file(tmp_path)))
    async with http_server(args) as proc:
        async with connect(proc.url, BOB_TOKEN) as bob:
            await call(bob, "memory_author", {"content": SECRET})
        async with connect(proc.url, CAROL_TOKEN) as carol:
            reply = await call(carol, "memory_recall", {"query": QUERY, "scope": "*"})
    assert reply["hits"] == []


# --------------------------------------------------------------------------- §2 explain redaction

BOB_QUERY = "quarterly ledger bobsprivatequestion"
SHARED_FACT = "The quarterly ledger is kept in the finance share."


async def _shared_row_read_by_bob(settings: Settings) -> tuple[Any, str]:
    async with Memory.open(settings=settings.model_copy(), embedder=HashEmbedder()) as shared:
        fact = (await shared.author(SHARED_FACT)).id
    server = hash_server(settings)
    async with named(server, "bob") as bob:
        reply = await call(bob, "memory_recall", {"query": BOB_QUERY})
    assert [h["id"] for h in reply["hits"]] == [fact]
    return server, fact


async def test_explaining_a_shared_memory_with_scope_bob_hides_bobs_queries_from_alice(
    shared_settings: Settings,
) -> None:
    server, fact = await _shared_row_read_by_bob(shared_settings)
    async with named(server, "alice") as alice:
        result = await alice.call_tool("memory_explain", {"memory_id": fact, "scope": "bob"})
    assert not result.is_error, result.content
    assert "bobsprivatequestion" not in reply_text(result)


async def test_explaining_bobs_own_memory_with_scope_bob_shows_alice_none_of_his_queries(
    shared_settings: Settings,
) -> None:
    server = hash_server(shared_settings)
    async with named(server, "bob") as bob:
        secret = (await call(bob, "memory_author", {"content": SECRET}))["id"]
        await call(bob, "memory_recall", {"query": "vault passphrase bobsprivatequestion"})
    async with named(server, "alice") as alice:
        result = await alice.call_tool("memory_explain", {"memory_id": secret, "scope": "bob"})
    assert "bobsprivatequestion" not in reply_text(result)


# --------------------------------------------------------------------------- §3 notifications


class Heard:
    """Resource-updated URIs one legacy client heard, and a sentinel that ends the listening."""

    def __init__(self, sentinel: str = "") -> None:
        self.sentinel = sentinel
        self.uris: list[str] = []
        self.done = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))
            if str(message.params.uri) == self.sentinel:
                self.done.set()

    def before_sentinel(self) -> list[str]:
        return self.uris[: self.uris.index(self.sentinel)]


async def _subscribe(client: Client, *uris: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        for uri in uris:
            await client.subscribe_resource(uri)


async def _heard_by_alice_while_bob(settings: Settings, uris: list[str], bob_acts: Any) -> Heard:
    """What Alice (legacy subscriber of `uris`) hears before her own change, while Bob acts.

    Notifications on one connection arrive in order, so anything Bob's writes sent Alice comes
    before the notification of her own later update (the sentinel).
    """
    server = hash_server(settings)
    heard = Heard()
    async with (
        named(server, "alice", mode="legacy", message_handler=heard) as alice,
        named(server, "bob") as bob,
    ):
        mine = (await call(alice, "memory_author", {"content": "Alice's sentinel note."}))["id"]
        heard.sentinel = f"memory://memories/{mine}"
        await _subscribe(alice, *[u.format(bob=await bob_id(bob)) for u in uris], heard.sentinel)
        await bob_acts(bob)
        await call(alice, "memory_update", {"memory_id": mine, "content": "Alice changed it."})
        with anyio.fail_after(HANG_GUARD):
            await heard.done.wait()
    return heard


async def bob_id(bob: Client) -> str:
    """Bob's one memory (authored on first use), so Alice can subscribe to its URI."""
    found = await call(bob, "memory_recall", {"query": "bob harbour ledger", "k": 1})
    if found["hits"]:
        return found["hits"][0]["id"]
    return (await call(bob, "memory_author", {"content": "Bob's harbour ledger note."}))["id"]


async def test_alice_hears_nothing_on_memory_stats_when_bob_writes(
    shared_settings: Settings,
) -> None:
    async def bob_writes(bob: Client) -> None:
        await call(bob, "memory_author", {"content": "Bob's new private fact."})

    heard = await _heard_by_alice_while_bob(shared_settings, ["memory://stats"], bob_writes)
    assert heard.before_sentinel() == []


async def test_alice_hears_nothing_on_her_todos_when_bob_adds_a_todo(
    shared_settings: Settings,
) -> None:
    async def bob_adds_a_todo(bob: Client) -> None:
        await call(bob, "todo", {"action": "add", "content": "Bob must rotate the key."})

    heard = await _heard_by_alice_while_bob(shared_settings, ["memory://todos"], bob_adds_a_todo)
    assert heard.before_sentinel() == []


async def test_alice_hears_nothing_about_bobs_memory_when_he_changes_it(
    shared_settings: Settings,
) -> None:
    async def bob_changes_his_memory(bob: Client) -> None:
        target = await bob_id(bob)
        await call(bob, "memory_update", {"memory_id": target, "content": "Bob's ledger moved."})

    heard = await _heard_by_alice_while_bob(
        shared_settings, ["memory://memories/{bob}"], bob_changes_his_memory
    )
    assert heard.before_sentinel() == []


async def test_a_listen_stream_of_alice_hears_nothing_when_bob_writes(
    shared_settings: Settings,
) -> None:
    # The 2026-07-28 era: subscriptions/listen streams instead of resources/subscribe.
    server = hash_server(shared_settings)
    async with named(server, "alice") as alice, named(server, "bob") as bob:
        mine = (await call(alice, "memory_author", {"content": "Alice's sentinel note."}))["id"]
        sentinel = f"memory://memories/{mine}"
        heard: list[str] = []
        async with alice.listen(resource_subscriptions=["memory://stats", sentinel]) as events:
            await call(bob, "memory_author", {"content": "Bob's new private fact."})
            await call(alice, "memory_update", {"memory_id": mine, "content": "Changed."})
            with anyio.fail_after(HANG_GUARD):
                async for event in events:
                    if event.uri == sentinel:
                        break
                    heard.append(event.uri)
    assert heard == []


# --------------------------------------------------------------------------- §4 statistics


async def _bob_busy_alice_idle(settings: Settings) -> Any:
    """Bob writes, links, recalls and reflects; Alice owns nothing. The server."""
    server = hash_server(settings)
    async with named(server, "bob") as bob:
        first = (await call(bob, "memory_author", {"content": "Bob's harbour ledger note."}))["id"]
        second = (
            await call(
                bob,
                "memory_author",
                {
                    "content": "Bob's crane schedule for the night ferry.",
                    "links": [{"target": first, "relation": "supports"}],
                },
            )
        )["id"]
        assert first != second
        await call(bob, "memory_recall", {"query": "harbour ledger"})
        await call(bob, "memory_reflect", {"steps": ["rescore"]})
    return server


@pytest.mark.parametrize(
    ("field", "path"),
    [
        ("edges", ("edges",)),
        ("accesses", ("accesses",)),
        ("reflection passes", ("extra", "reflection_passes")),
        ("memories", ("total",)),
    ],
)
async def test_memory_stats_counts_nothing_of_another_role_for_a_caller_who_owns_nothing(
    shared_settings: Settings, field: str, path: tuple[str, ...]
) -> None:
    server = await _bob_busy_alice_idle(shared_settings)
    async with named(server, "alice") as alice:
        stats = await read_json(alice, "memory://stats")
    value: Any = stats
    for key in path:
        value = value[key]
    assert value == 0, f"{field}: {value}"


async def test_memory_stats_never_shows_the_absolute_store_path(
    shared_settings: Settings,
) -> None:
    server = await _bob_busy_alice_idle(shared_settings)
    async with named(server, "alice") as alice:
        text = (await alice.read_resource("memory://stats")).contents[0].text
    store = json.loads(text)["store"]
    assert str(shared_settings.store.parent) not in text
    assert "shared.sqlite" in store and "/" not in store


# --------------------------------------------------------------------------- §5 one owner source


def _plain_tokens(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({ALICE_TOKEN: "alice@laptop", BOB_TOKEN: "bob@ci"}))
    return path


@pytest.mark.processes
async def test_starting_with_owner_and_tokens_is_refused_naming_both(tmp_path: Path) -> None:
    argv = nooa_argv(
        *serve_args(
            tmp_path / "s.sqlite",
            "--tokens",
            str(_plain_tokens(tmp_path)),
            glob=["--owner", "admin"],
        )
    )
    done = await run_to_exit(argv, process_env(), REFUSE_GUARD)
    assert not done.still_running, "nooa-mcp started serving with both --owner and --tokens"
    assert done.returncode != 0
    assert "--owner" in done.stderr and "--tokens" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.processes
async def test_starting_with_NOOA_OWNER_and_tokens_is_refused_naming_both(tmp_path: Path) -> None:
    argv = nooa_argv(*serve_args(tmp_path / "s.sqlite", "--tokens", str(_plain_tokens(tmp_path))))
    done = await run_to_exit(argv, process_env(NOOA_OWNER="admin"), REFUSE_GUARD)
    assert not done.still_running, "nooa-mcp started serving with both NOOA_OWNER and --tokens"
    assert done.returncode != 0
    assert "--tokens" in done.stderr
    assert "NOOA_OWNER" in done.stderr or "--owner" in done.stderr
    assert "Traceback" not in done.stderr


# --------------------------------------------------------------------------- §6 owner alphabet

UNSAFE_OWNERS = {
    "zero-width space": "ali\u200bce",
    "right-to-left override": "alice\u202eecila",
    "NUL": "ali\x00ce",
    "Cyrillic look-alike": "\u0430lice",
    "accented letter": "alic\u00e9",
    "zero-width joiner in the instance": "alice@lap\u200dtop",
    "role of 65 characters": "a" * 65,
}


@pytest.mark.parametrize("owner", list(UNSAFE_OWNERS.values()), ids=list(UNSAFE_OWNERS))
def test_an_owner_outside_the_safe_alphabet_is_refused_by_the_cli(
    tmp_path: Path, owner: str
) -> None:
    result = cli(["--store", str(tmp_path / "s.sqlite"), "--owner", owner, "stats", "--json"])
    assert result.exit_code != 0
    assert exited_cleanly(result), repr(result.exception)
    assert "owner" in result.stderr


def test_an_owner_outside_the_safe_alphabet_in_NOOA_OWNER_is_refused(tmp_path: Path) -> None:
    result = cli(["--store", str(tmp_path / "s.sqlite"), "stats", "--json"], NOOA_OWNER="b\u200bob")
    assert result.exit_code != 0
    assert exited_cleanly(result), repr(result.exception)
    assert "NOOA_OWNER" in result.stderr or "owner" in result.stderr


@pytest.mark.processes
async def test_a_tokens_file_naming_an_unsafe_owner_is_refused_at_start(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({ALICE_TOKEN: "alice", BOB_TOKEN: "alice\u202eecila"}))
    argv = nooa_argv(*serve_args(tmp_path / "s.sqlite", "--tokens", str(tokens)))
    done = await run_to_exit(argv, process_env(), REFUSE_GUARD)
    assert not done.still_running, "nooa-mcp started serving a tokens file with an unsafe owner"
    assert done.returncode != 0
    assert "tokens" in done.stderr  # names the --tokens field or its file
    assert "Traceback" not in done.stderr


async def test_a_long_client_name_becomes_an_owner_inside_the_safe_alphabet(
    shared_settings: Settings,
) -> None:
    server = hash_server(shared_settings)
    async with named(server, "Claude " + "Desktop" * 30) as client:
        wanted = (await call(client, "memory_author", {"content": "A named client's fact."}))["id"]
        owner = (await read_json(client, f"memory://memories/{wanted}"))["owner"]
    assert OWNER_RE.fullmatch(owner), owner


# --------------------------------------------------------------------------- §7 every bound host


@pytest.mark.processes
async def test_a_foreign_host_header_gets_421_on_127_0_0_2(tmp_path: Path) -> None:
    args = serve_args(tmp_path / "s.sqlite", host="127.0.0.2")
    async with http_server(args, host="127.0.0.2") as proc, httpx2.AsyncClient() as http:
        response = await http.post(
            proc.url,
            json=initialize_body(),
            headers={**MCP_HEADERS, "Host": f"attacker.example:{proc.port}"},
        )
    assert response.status_code == 421


@pytest.mark.processes
async def test_a_foreign_origin_gets_403_on_127_0_0_2(tmp_path: Path) -> None:
    args = serve_args(tmp_path / "s.sqlite", host="127.0.0.2")
    async with http_server(args, host="127.0.0.2") as proc, httpx2.AsyncClient() as http:
        response = await http.post(
            proc.url,
            json=initialize_body(),
            headers={**MCP_HEADERS, "Origin": "http://attacker.example"},
        )
    assert response.status_code == 403
