"""CSRF tokens and the origin rule, and the token/loopback seam, without a browser."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from nooa_mcp.console import LoopbackOnly, TokenLogin, csrf
from nooa_mcp.console.auth import Viewer, as_viewer

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
    auth = LoopbackOnly("alice@laptop", ["bob"])
    alice = Viewer("alice@laptop", frozenset({"bob"}))
    assert await auth.viewer(request("127.0.0.1")) == alice
    assert await auth.viewer(request("::1")) == alice
    assert await auth.viewer(request("192.168.1.20")) is None
    assert await LoopbackOnly("").viewer(request("127.0.0.1")) == Viewer("")


async def test_a_token_maps_to_its_viewer_by_header_or_session_cookie_and_a_wrong_one_to_nobody():
    auth = TokenLogin({"t" * 32: "alice@laptop"})
    alice = Viewer("alice@laptop")
    assert await auth.viewer(request("10.0.0.1", {"authorization": "Bearer " + "t" * 32})) == alice
    session = auth.sign_in(request("10.0.0.1"), "t" * 32)
    assert session is not None and "t" * 8 not in session
    assert await auth.viewer(request("10.0.0.1", {"cookie": f"nooa_console={session}"})) == alice
    # The cookie holds a session id, never the token: the token itself is no cookie.
    assert await auth.viewer(request("10.0.0.1", {"cookie": "nooa_console=" + "t" * 32})) is None
    assert await auth.viewer(request("127.0.0.1", {"cookie": "nooa_console=" + "u" * 32})) is None
    assert await auth.viewer(request("127.0.0.1")) is None
    auth.sign_out(request("10.0.0.1", {"cookie": f"nooa_console={session}"}))
    assert await auth.viewer(request("10.0.0.1", {"cookie": f"nooa_console={session}"})) is None


def test_tokens_file_entries_may_be_owners_or_carry_an_owner_and_grants():
    assert as_viewer("x", "alice") == Viewer("alice")
    assert as_viewer("y", {"owner": "bob", "read": ["alice"]}) == Viewer(
        "bob", frozenset({"alice"})
    )
    with pytest.raises(ValueError, match="names no owner"):
        as_viewer("zzzz", {"read": []})
