"""Signing in to the console with a token (`nooa-mcp ui --tokens`, a real server process over
HTTP): wrong tokens are limited per address, the cookie holds a server-side session id (never
the token), signing out ends that session, and no token is taken over plain HTTP from
another machine.

Before: 300 wrong tokens at full speed were all checked (no limit), the cookie held the raw
bearer token (which also opens /mcp and survived signing out), and over plain HTTP from
another machine the token was taken and its cookie set without `Secure`.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import httpx2
import pytest
from machine import machine_lacks
from shared_support import created_store, http_server, serve_args

from nooa_mcp.console.auth import PROXY_FAILURES

pytestmark = [pytest.mark.anyio, pytest.mark.processes]

TOKEN = "alice-console-token-0123456789"


def _ui_args(tmp_path: Path, *extra: str, host: str = "127.0.0.1") -> list[str]:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(f'{{"{TOKEN}": "alice"}}')
    return [
        "--store",
        str(created_store(tmp_path / "m.sqlite")),
        "ui",
        "--host",
        host,
        "--port",
        "0",
        "--tokens",
        str(tokens),
        *extra,
    ]


async def _login_form(http: httpx2.AsyncClient, base: str) -> str:
    page = await http.get(f"{base}/login")
    return re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)


async def _sign_in(http: httpx2.AsyncClient, base: str, csrf: str, token: str) -> httpx2.Response:
    return await http.post(f"{base}/login", data={"csrf": csrf, "token": token})


def _client(source: str = "127.0.0.1") -> httpx2.AsyncClient:
    transport = httpx2.AsyncHTTPTransport(local_address=source)
    return httpx2.AsyncClient(transport=transport, timeout=30)


async def test_wrong_tokens_are_limited_per_address_and_others_still_sign_in(
    tmp_path: Path,
) -> None:
    async with http_server(_ui_args(tmp_path)) as proc:
        base = f"http://127.0.0.1:{proc.port}"
        async with _client() as http:
            csrf = await _login_form(http, base)
            statuses = [
                (await _sign_in(http, base, csrf, f"wrong-{i:04d}-0123456789abcdef")).status_code
                for i in range(300)
            ]
            right_but_blocked = await _sign_in(http, base, csrf, TOKEN)
            bearer = await http.get(f"{base}/stats", headers={"authorization": f"Bearer {TOKEN}"})
        async with _client("127.0.0.2") as other:  # another client address, same console
            other_csrf = await _login_form(other, base)
            elsewhere = await _sign_in(other, base, other_csrf, TOKEN)
    print(f"300 wrong tokens: {statuses.count(401)} checked, {statuses.count(429)} refused")
    assert (statuses.count(401), statuses.count(429)) == (5, 295)
    assert statuses[:5] == [401] * 5
    assert (
        right_but_blocked.status_code == 429 and int(right_but_blocked.headers["retry-after"]) > 0
    )
    assert "try again in" in right_but_blocked.text
    assert bearer.status_code == 429
    assert elsewhere.status_code == 303  # another address is not locked out


async def test_a_forwarded_address_narrows_who_is_blamed_but_never_resets_the_budget(
    tmp_path: Path,
) -> None:
    """X-Forwarded-For is believed from loopback (a TLS proxy on this machine). A caller on
    loopback sending a new one with every guess was checked every time (300 of 300: the limit
    counted only the forwarded address); the connecting peer now has its own budget for
    the addresses it forwards. An honest proxy's one guesser is still stopped at 5 while
    its other clients sign in."""
    async with http_server(_ui_args(tmp_path)) as proc:
        base = f"http://127.0.0.1:{proc.port}"
        async with _client() as http:  # a proxy on loopback: one guesser, then another client
            csrf = await _login_form(http, base)
            guesser = {"x-forwarded-for": "203.0.113.7"}
            guessed = [
                (
                    await http.post(
                        f"{base}/login", data={"csrf": csrf, "token": f"no-{i}"}, headers=guesser
                    )
                ).status_code
                for i in range(6)
            ]
            honest = await http.post(
                f"{base}/login",
                data={"csrf": csrf, "token": TOKEN},
                headers={"x-forwarded-for": "203.0.113.8"},
            )
        async with _client() as http:  # a caller on loopback forging a new address each time
            csrf = await _login_form(http, base)
            forged = [
                (
                    await http.post(
                        f"{base}/login",
                        data={"csrf": csrf, "token": f"wrong-{i:04d}-0123456789abcdef"},
                        headers={"x-forwarded-for": f"10.9.{i // 250}.{i % 250 + 1}"},
                    )
                ).status_code
                for i in range(300)
            ]
            right_but_blocked = await http.post(
                f"{base}/login",
                data={"csrf": csrf, "token": TOKEN},
                headers={"x-forwarded-for": "10.99.0.1"},
            )
    print(f"300 forged addresses: {forged.count(401)} checked, {forged.count(429)} refused")
    assert guessed == [401] * 5 + [429]
    assert honest.status_code == 303  # the proxy's other clients still sign in
    # The peer's budget is the proxy's: the guesser's 5 came out of it already.
    checked = PROXY_FAILURES - 5
    assert (forged.count(401), forged.count(429)) == (checked, 300 - checked)
    assert forged[:checked] == [401] * checked
    assert right_but_blocked.status_code == 429


async def test_wrong_bearer_tokens_at_mcp_share_the_consoles_limit(tmp_path: Path) -> None:
    """/mcp checked every wrong bearer token (300 of 300) while the console beside it stopped
    at 5: a guesser simply went to /mcp. Now both count against one budget per address."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(f'{{"{TOKEN}": "alice"}}')
    args = serve_args(created_store(tmp_path / "m.sqlite"), "--tokens", str(tokens))
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    async with http_server(args) as proc:
        base = f"http://127.0.0.1:{proc.port}"
        async with _client() as http:

            async def post(token: str, **headers: str) -> int:
                sent = {"authorization": f"Bearer {token}", **headers}
                return (await http.post(f"{base}/mcp", json=ping, headers=sent)).status_code

            guessed = [await post(f"wrong-{i:04d}-0123456789abcdef") for i in range(300)]
            right_but_blocked = await post(TOKEN)
            console = await http.get(
                f"{base}/ui/stats", headers={"authorization": f"Bearer {TOKEN}"}
            )
        async with _client("127.0.0.2") as other:
            elsewhere = await other.post(
                f"{base}/mcp/",
                json=ping,
                headers={"authorization": f"Bearer {TOKEN}", "accept": "application/json"},
            )
    print(f"300 wrong tokens at /mcp: {guessed.count(401)} checked, {guessed.count(429)} refused")
    assert (guessed.count(401), guessed.count(429)) == (5, 295)
    assert right_but_blocked == 429 and console.status_code == 429
    assert elsewhere.status_code != 429 and elsewhere.status_code != 401


async def test_a_stale_token_sent_again_and_again_is_one_guess_and_locks_no_one_out(
    tmp_path: Path,
) -> None:
    """A client left with an old token (a hook's NOOA_TOKEN fires on every prompt) sends the
    same wrong token over and over: counted each time, it locked its user's valid session at
    that address out of /mcp and /hooks within a minute. The same token again is one guess;
    five different ones still stop a guesser."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(f'{{"{TOKEN}": "alice"}}')
    args = serve_args(created_store(tmp_path / "m.sqlite"), "--tokens", str(tokens))
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    async with http_server(args) as proc:
        base = f"http://127.0.0.1:{proc.port}"
        async with _client() as http:

            async def post(token: str) -> int:
                sent = {"authorization": f"Bearer {token}"}
                return (await http.post(f"{base}/mcp", json=ping, headers=sent)).status_code

            stale = [await post("stale-token-from-last-month-0123") for _ in range(20)]
            valid = await post(TOKEN)
            guesses = [await post(f"guess-{i:02d}-0123456789abcdef") for i in range(6)]
            after = await post(TOKEN)
    assert stale == [401] * 20
    assert valid not in (401, 429)
    # The stale token was one of the five: four new guesses are checked, then refused.
    assert guesses == [401] * 4 + [429] * 2
    assert after == 429


async def test_the_cookie_is_a_session_that_signing_out_ends(tmp_path: Path) -> None:
    async with http_server(_ui_args(tmp_path)) as proc:
        base = f"http://127.0.0.1:{proc.port}"
        async with _client() as http:
            csrf = await _login_form(http, base)
            signed_in = await _sign_in(http, base, csrf, TOKEN)
            session = http.cookies.get("nooa_console")
            before = await http.get(f"{base}/stats")
            page = await http.get(f"{base}/stats")
            out = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
            await http.post(f"{base}/logout", data={"csrf": out})
        async with _client() as replay:  # the old cookie, sent again after signing out
            replay.cookies.set("nooa_console", session or "")
            after = await replay.get(f"{base}/stats", headers={"accept": "text/html"})
    assert signed_in.status_code == 303
    assert session and TOKEN not in session and TOKEN not in signed_in.headers["set-cookie"]
    assert before.status_code == 200
    assert after.status_code == 303 and "/login" in after.headers["location"]


def _machine_address() -> str:
    for target in ("10.255.255.255", "198.51.100.1"):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            try:
                probe.connect((target, 9))
                address = probe.getsockname()[0]
            except OSError:
                continue
            if not address.startswith("127."):
                return address
    machine_lacks("this machine has no address besides loopback")


async def test_no_token_is_taken_over_plain_http_from_another_machine(tmp_path: Path) -> None:
    address = _machine_address()
    args = _ui_args(tmp_path, "--allow-host", address, host="0.0.0.0")
    async with http_server(args, host=address) as proc:
        base = f"http://{address}:{proc.port}"
        async with httpx2.AsyncClient(timeout=30) as http:
            form = await http.get(f"{base}/login")
            csrf = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)
            # A client that is no browser sends the form's cookie back even without TLS:
            # what stops the token then is the console itself.
            nonce = re.search(r"nooa_csrf=([^;]+)", form.headers["set-cookie"]).group(1)
            posted = await http.post(
                f"{base}/login",
                data={"csrf": csrf, "token": TOKEN},
                headers={"cookie": f"nooa_csrf={nonce}"},
            )
    assert "behind TLS" in form.text
    assert posted.status_code == 403 and "nooa_console=" not in posted.headers.get("set-cookie", "")
    assert "behind TLS" in posted.text
    # Every cookie the console sets there is Secure: a browser keeps none over plain HTTP.
    assert "secure" in form.headers["set-cookie"].lower()
