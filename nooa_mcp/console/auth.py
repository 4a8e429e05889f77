"""Who is looking: the seam that maps a request to the viewer the console acts as.

The console never takes the owner from a form or a query string (SPEC §10). An `Authenticator`
answers `viewer(request)` with a `Viewer` (an owner and its read grants), or None to refuse.
Two ship:

- `LoopbackOnly(owner, read)`: no tokens; the configured owner and grants, and only for
  requests from the loopback interface (the person at this machine).
- `TokenLogin(tokens)`: the same token map as the HTTP transport (token → owner, or an entry
  with `owner` and `read`). A token arrives once through the login page and is kept in an
  HttpOnly, SameSite=Strict cookie; an `Authorization: Bearer` header works as well.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from starlette.requests import HTTPConnection

COOKIE = "nooa_console"


@dataclass(frozen=True)
class Viewer:
    """Whose memory a request sees and writes: an owner and the roles it may also read."""

    owner: str
    read: frozenset[str] = frozenset()


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

    async def viewer(self, request: HTTPConnection) -> Viewer | None:
        raise NotImplementedError

    def viewer_of_token(self, token: str) -> Viewer | None:
        return None


class LoopbackOnly(Authenticator):
    """The configured owner (and grants) for requests from loopback; others are refused."""

    def __init__(self, owner: str, read: Iterable[str] = ()) -> None:
        self._viewer = Viewer(owner, frozenset(read))

    async def viewer(self, request: HTTPConnection) -> Viewer | None:
        client = request.client
        return self._viewer if client is not None and is_loopback(client.host) else None


class TokenLogin(Authenticator):
    """Bearer tokens mapped to viewers; the token is compared in constant time."""

    login = True

    def __init__(self, tokens: Mapping[str, object]) -> None:
        if not tokens:
            raise ValueError("TokenLogin needs at least one token")
        self._tokens = {token: as_viewer(token, entry) for token, entry in tokens.items()}

    def viewer_of_token(self, token: str) -> Viewer | None:
        found = None
        # Compare against every token so that timing says nothing about near misses.
        for known, viewer in self._tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                found = viewer
        return found

    async def viewer(self, request: HTTPConnection) -> Viewer | None:
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        token = value.strip() if scheme.lower() == "bearer" else request.cookies.get(COOKIE)
        return self.viewer_of_token(token) if token else None


def as_viewer(token: str, entry: object) -> Viewer:
    """A tokens-file entry (an owner, a mapping or an object with `owner` and `read`)."""
    if isinstance(entry, str):
        return Viewer(entry)
    get = entry.get if isinstance(entry, Mapping) else lambda name: getattr(entry, name, None)
    owner, read = get("owner"), get("read") or ()
    if not isinstance(owner, str):
        raise ValueError(f"the tokens entry for {token[:4]}… names no owner")
    return Viewer(owner, frozenset(read))
