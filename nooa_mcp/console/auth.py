"""Who is looking: the seam that maps a request to the owner the console acts as.

The console never takes the owner from a form or a query string (SPEC §10). An `Authenticator`
answers `owner(request)` with an owner, or None to refuse. Two ship:

- `LoopbackOnly(owner)`: no tokens; the configured owner, and only for requests from the
  loopback interface (the person at this machine).
- `TokenLogin(tokens)`: the same token → owner map as the HTTP transport. A token arrives
  once through the login page and is kept in an HttpOnly, SameSite=Strict cookie; an
  `Authorization: Bearer` header works as well (scripts, the MCP server's own clients).
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Mapping

from starlette.requests import HTTPConnection

COOKIE = "nooa_console"


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Authenticator:
    """Base of the seam: `login` says whether a login page exists."""

    login = False

    async def owner(self, request: HTTPConnection) -> str | None:
        raise NotImplementedError

    def owner_of_token(self, token: str) -> str | None:
        return None


class LoopbackOnly(Authenticator):
    """The configured owner for requests from loopback; everyone else is refused."""

    def __init__(self, owner: str) -> None:
        self._owner = owner

    async def owner(self, request: HTTPConnection) -> str | None:
        client = request.client
        return self._owner if client is not None and is_loopback(client.host) else None


class TokenLogin(Authenticator):
    """Bearer tokens mapped to owners; the token is compared in constant time."""

    login = True

    def __init__(self, tokens: Mapping[str, str]) -> None:
        if not tokens:
            raise ValueError("TokenLogin needs at least one token")
        self._tokens = dict(tokens)

    def owner_of_token(self, token: str) -> str | None:
        found = None
        # Compare against every token so that timing says nothing about near misses.
        for known, owner in self._tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                found = owner
        return found

    async def owner(self, request: HTTPConnection) -> str | None:
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        token = value.strip() if scheme.lower() == "bearer" else request.cookies.get(COOKIE)
        return self.owner_of_token(token) if token else None


def token_owners(entries: Mapping[str, object]) -> dict[str, str]:
    """token → owner from a loaded tokens file, whose entries are an owner or carry `.owner`."""
    out = {}
    for token, entry in entries.items():
        owner = entry if isinstance(entry, str) else getattr(entry, "owner", None)
        if owner is None and isinstance(entry, Mapping):
            owner = entry.get("owner")
        if not isinstance(owner, str):
            raise ValueError(f"tokens entry for {token[:4]}… names no owner")
        out[token] = owner
    return out
