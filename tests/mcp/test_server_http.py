"""Streamable HTTP with a tokens file: tokens decide who you are and whether you get in
(DESIGN.md §10).

The app is the one `run(transport="http")` serves, run by uvicorn on a socket bound before the
server starts, so clients can connect at once and no test waits on a timer.
"""

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest
from http_serving import connect, serving
from mcp import Client

from nooa_mcp.config import Settings
from nooa_mcp.errors import InvalidInput
from nooa_mcp.mcp.identity import TokenEntry, load_tokens

pytestmark = pytest.mark.anyio

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def url(tmp_path: Path) -> AsyncIterator[str]:
    settings = Settings(store=tmp_path / "shared.sqlite", owner="")
    async with serving(settings, {ALICE: "agent@alice", BOB: "agent@bob"}) as u:
        yield u


async def _author(client: Client, content: str) -> str:
    result = await client.call_tool("memory_author", {"content": content})
    assert not result.is_error, result.content
    return result.structured_content["id"]


async def test_a_valid_token_reaches_its_own_memories(url: str) -> None:
    async with connect(url, ALICE) as alice:
        wanted = await _author(alice, "Alice keeps the deploy key in the vault.")
        result = await alice.call_tool("memory_recall", {"query": "deploy key vault"})
    assert result.structured_content["hits"][0]["id"] == wanted


async def test_the_token_decides_the_owner_of_a_write(url: str) -> None:
    async with connect(url, ALICE) as alice:
        wanted = await _author(alice, "Alice's fact.")
        record = await alice.read_resource(f"memory://memories/{wanted}")
    assert json.loads(record.contents[0].text)["owner"] == "agent@alice"


async def test_a_request_without_a_token_is_refused(url: str) -> None:
    async with httpx2.AsyncClient() as http:
        response = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 401


async def test_a_request_with_a_wrong_token_is_refused(url: str) -> None:
    async with httpx2.AsyncClient(headers={"Authorization": "Bearer not-a-known-token"}) as http:
        response = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 401


async def test_a_missing_or_wrong_token_is_told_what_to_send_alike(url: str) -> None:
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    async with httpx2.AsyncClient() as http:
        missing = await http.post(url, json=ping)
        wrong = await http.post(url, json=ping, headers={"Authorization": "Bearer not-a-token"})
    assert missing.status_code == wrong.status_code == 401
    # One sentence naming the fix; the same bytes either way, so it tells nothing of tokens.
    assert missing.content == wrong.content
    said = missing.json()["error_description"]
    assert said.startswith("Send the header `Authorization: Bearer <token>` with a token from")
    assert "Authentication required" not in missing.text
    assert int(missing.headers["content-length"]) == len(missing.content)
    assert "Authorization: Bearer <token>" in missing.headers["www-authenticate"]
    assert missing.headers["www-authenticate"] == wrong.headers["www-authenticate"]


async def test_another_owner_cannot_read_instance_scoped_memories(url: str) -> None:
    async with connect(url, ALICE) as alice:
        await _author(alice, "Alice's private note about the deploy key.")
    async with connect(url, BOB) as bob:
        result = await bob.call_tool("memory_recall", {"query": "deploy key", "scope": "instance"})
    assert result.structured_content["hits"] == []


async def test_another_owner_cannot_update_a_memory_of_another_role(tmp_path: Path) -> None:
    settings = Settings(store=tmp_path / "roles.sqlite", owner="")
    async with serving(settings, {ALICE: "alice", BOB: "bob"}) as u:
        async with connect(u, ALICE) as alice:
            wanted = await _author(alice, "Alice's role fact.")
        async with connect(u, BOB) as bob:
            result = await bob.call_tool("memory_update", {"memory_id": wanted, "forget": True})
    assert result.is_error and "memory_id" in result.content[0].text


async def test_without_tokens_loopback_http_needs_no_token(tmp_path: Path) -> None:
    settings = Settings(store=tmp_path / "open.sqlite", owner="solo")
    async with serving(settings, None) as u, Client(u, cache=None) as client:
        wanted = await _author(client, "Solo fact.")
        record = await client.read_resource(f"memory://memories/{wanted}")
    assert json.loads(record.contents[0].text)["owner"] == "solo"


def test_tokens_file_as_json_maps_tokens_to_owners(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({ALICE: "agent@alice"}))
    assert load_tokens(path) == {ALICE: TokenEntry("agent@alice")}


def test_tokens_file_as_lines_maps_tokens_to_owners(tmp_path: Path) -> None:
    path = tmp_path / "tokens.txt"
    path.write_text(f"# team tokens\n{ALICE} agent@alice\n\n{BOB} agent@bob\n")
    assert load_tokens(path) == {ALICE: TokenEntry("agent@alice"), BOB: TokenEntry("agent@bob")}


def test_tokens_file_with_a_short_token_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"short": "agent"}))
    with pytest.raises(InvalidInput) as exc:
        load_tokens(path)
    assert exc.value.field == "tokens"


@pytest.mark.parametrize(
    ("entry", "named", "hint"),
    [
        # An expiry already past: accepted and ignored, the token stayed valid for good.
        ({"owner": "agent@alice", "expires": "2020-01-01T00:00:00Z"}, "expires", None),
        ({"owner": "agent@alice", "disabled": True}, "disabled", None),
        # A misspelt grant was dropped without a word.
        ({"owner": "agent@alice", "raed": ["reviewer"]}, "raed", "Did you mean read?"),
    ],
)
def test_tokens_file_entry_with_an_unknown_key_is_refused_by_name(
    tmp_path: Path, entry: dict, named: str, hint: str | None
) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({ALICE: entry}))
    with pytest.raises(InvalidInput) as exc:
        load_tokens(path)
    assert exc.value.field == "tokens"
    assert repr(named) in exc.value.problem
    assert "do not expire" in exc.value.problem
    if hint:
        assert hint in exc.value.fix


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        # JSON keeps the last of a repeated key: the token stood for bob, alice's entry gone.
        ("tokens.json", f'{{"{ALICE}": "alice", "{ALICE}": "bob"}}', "a token is listed twice"),
        (
            "tokens.json",
            f'{{"{ALICE}": {{"owner": "alice", "read": ["ops"], "read": []}}}}',
            "'read' is given twice in one token's entry",
        ),
        ("tokens.txt", f"{ALICE} alice\n{ALICE} bob\n", "line 2 lists a token listed before"),
    ],
)
def test_tokens_file_listing_a_token_twice_differently_is_refused(
    tmp_path: Path, name: str, text: str, said: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InvalidInput) as exc:
        load_tokens(path)
    assert exc.value.field == "tokens"
    assert said in exc.value.problem
    assert ALICE not in str(exc.value)  # a token is never echoed


def test_tokens_file_repeating_a_token_the_same_way_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "tokens.txt"
    path.write_text(f"{ALICE} alice\n{ALICE} alice\n")
    assert load_tokens(path)[ALICE].owner == "alice"


def test_tokens_file_with_an_invalid_owner_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({ALICE: "bad_owner"}))
    with pytest.raises(InvalidInput) as exc:
        load_tokens(path)
    assert exc.value.field == "tokens"
