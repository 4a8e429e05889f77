"""CSRF tokens and the origin rule, and the token/loopback seam, without a browser."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from nooa_mcp.console import LoopbackOnly, TokenLogin, csrf
from nooa_mcp.console.auth import token_owners

SECRET = b"s" * 32

pytestmark = pytest.mark.anyio


def test_a_token_is_valid_only_for_its_owner_and_browser():
    token = csrf.form_token(SECRET, "alice", "nonce-1")
    assert csrf.token_ok(SECRET, "alice", "nonce-1", token)
    assert not csrf.token_ok(SECRET, "bob", "nonce-1", token)
    assert not csrf.token_ok(SECRET, "alice", "nonce-2", token)
    assert not csrf.token_ok(b"t" * 32, "alice", "nonce-1", token)


def test_a_missing_nonce_or_token_is_refused():
    token = csrf.form_token(SECRET, "alice", "n")
    assert not csrf.token_ok(SECRET, "alice", None, token)
    assert not csrf.token_ok(SECRET, "alice", "n", None)
    assert not csrf.token_ok(SECRET, "alice", "n", "")


def test_an_owner_and_nonce_cannot_be_shifted_into_each_other():
    assert csrf.form_token(SECRET, "ab", "c") != csrf.form_token(SECRET, "a", "bc")


@pytest.mark.parametrize(
    ("headers", "ok"),
    [
        ({"origin": "http://127.0.0.1:8766", "sec-fetch-site": "same-origin"}, True),
        ({}, True),
        ({"origin": "http://evil.example"}, False),
        ({"origin": "http://127.0.0.1:8766", "sec-fetch-site": "cross-site"}, False),
        ({"sec-fetch-site": "same-site"}, False),
        ({"origin": "null"}, False),
    ],
)
def test_writes_must_come_from_the_consoles_own_origin(headers, ok):
    assert csrf.origin_ok(headers, "http://127.0.0.1:8766") is ok


def request(client: str, headers: dict[str, str] | None = None) -> Request:
    raw = [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    return Request({"type": "http", "client": (client, 5000), "headers": raw, "path": "/"})


async def test_loopback_only_answers_the_configured_owner_on_loopback_and_no_one_else():
    auth = LoopbackOnly("alice@laptop")
    assert await auth.owner(request("127.0.0.1")) == "alice@laptop"
    assert await auth.owner(request("::1")) == "alice@laptop"
    assert await auth.owner(request("192.168.1.20")) is None
    assert await LoopbackOnly("").owner(request("127.0.0.1")) == ""


async def test_a_token_maps_to_its_owner_by_header_or_cookie_and_a_wrong_one_to_nobody():
    auth = TokenLogin({"t" * 32: "alice@laptop"})
    assert await auth.owner(request("10.0.0.1", {"authorization": "Bearer " + "t" * 32})) == (
        "alice@laptop"
    )
    assert await auth.owner(request("10.0.0.1", {"cookie": "nooa_console=" + "t" * 32})) == (
        "alice@laptop"
    )
    assert await auth.owner(request("127.0.0.1", {"cookie": "nooa_console=" + "u" * 32})) is None
    assert await auth.owner(request("127.0.0.1")) is None


def test_tokens_file_entries_may_be_owners_or_carry_one():
    assert token_owners({"x": "alice", "y": {"owner": "bob", "read": ["alice"]}}) == {
        "x": "alice",
        "y": "bob",
    }
    with pytest.raises(ValueError, match="names no owner"):
        token_owners({"zzzz": {"read": []}})
