"""Who is looking: the seam that maps a request to the viewer the console acts as.

The console never takes the owner from a form or a query string (DESIGN.md §10). An `Authenticator`
answers `viewer(request)` with a `Viewer` (an owner and its read grants), or None to refuse.
Two ship:

- `LoopbackOnly(owner, read)`: no tokens; the configured owner and grants, and only for
  requests from the loopback interface (the person at this machine).
- `TokenLogin(tokens)`: the same token map as the HTTP transport (token → owner, or an entry
  with `owner` and `read`). A token arrives once through the login page; the cookie then
  holds a random session id the server maps to the viewer (never the token itself, which
  also opens /mcp and cannot be revoked by signing out), in an HttpOnly, SameSite=Strict
  cookie. An `Authorization: Bearer` header works as well. Failed sign-ins (and wrong
  bearer tokens) are limited per client address: past `FAILURES` in `FAILURE_WINDOW`
  seconds, that address is refused until the window has passed, without a token check.
  The address a trusted proxy forwards (X-Forwarded-For) names the client to blame, but
  whoever connects from the proxy's address can send one, a new one with every guess: so a
  wrong token whose address was forwarded also counts against the connecting peer, which
  may get `PROXY_FAILURES` wrong (its clients' together) in the window. One client behind
  an honest proxy is stopped at `FAILURES` and the others still sign in; a caller forging
  the header gets `PROXY_FAILURES` guesses a minute, not unlimited (DESIGN.md §10).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from starlette.requests import HTTPConnection

from ..hosts import is_loopback, peer

COOKIE = "nooa_console"
#: Failed sign-ins an address may make in FAILURE_WINDOW seconds before it must wait.
FAILURES = 5
FAILURE_WINDOW = 60.0
#: Failed sign-ins in FAILURE_WINDOW from the clients one proxy forwards, all together (the
#: budget of whoever connects from its address, whatever X-Forwarded-For it sends).
PROXY_FAILURES = 30
#: A session ends after this long unused, and this long after sign-in in any case.
SESSION_IDLE = 12 * 3600.0
SESSION_MAX_AGE = 7 * 24 * 3600.0
#: Sessions (and addresses with recent failures) kept; the least recently used go first.
MAX_SESSIONS = 10_000
MAX_ADDRESSES = 10_000


@dataclass(frozen=True)
class Viewer:
    """Whose memory a request sees and writes: an owner and the roles it may also read."""

    owner: str
    read: frozenset[str] = frozenset()


class Authenticator:
    """Base of the seam: `login` says whether a login page exists."""

    login = False

    async def viewer(self, request: HTTPConnection) -> Viewer | None:
        raise NotImplementedError

    def viewer_of_token(self, token: str) -> Viewer | None:
        return None

    def wait_seconds(self, request: HTTPConnection) -> float:
        """How long this request's address must wait before it may try a token again."""
        return 0.0

    def sign_in(self, request: HTTPConnection, token: str) -> str | None:
        """A new session id for a valid token (the cookie's value), else None."""
        return None

    def sign_out(self, request: HTTPConnection) -> None:
        """End the session the request's cookie names."""


class FailureLimit:
    """Wrong tokens per address: at most `limit` different ones in any `window` seconds.

    The same wrong token again is one guess, its time renewed: a guesser must try new
    tokens, while a client left with a stale one (a hook's old NOOA_TOKEN fires on every
    prompt) repeats it, and counting each repeat locked its user's own valid session at
    that address out of /mcp within a minute."""

    def __init__(
        self,
        limit: int = FAILURES,
        window: float = FAILURE_WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.window = window
        self.clock = clock
        #: address → (time, the wrong token's digest), oldest first
        self._failures: OrderedDict[str, deque[tuple[float, str]]] = OrderedDict()

    def wait_seconds(self, address: str) -> float:
        times = self._failures.get(address)
        if not times:
            return 0.0
        now = self.clock()
        while times and times[0][0] <= now - self.window:
            times.popleft()
        if len(times) < self.limit:
            return 0.0
        return times[0][0] + self.window - now

    def failed(self, address: str, token: str | None = None) -> None:
        """A wrong `token` from `address` (None: an attempt that counts every time)."""
        times = self._failures.setdefault(address, deque())
        self._failures.move_to_end(address)
        key = _digest(token) if token is not None else secrets.token_hex(16)
        for i, (_, seen) in enumerate(times):
            if seen == key:
                del times[i]
                break
        times.append((self.clock(), key))
        while len(times) > self.limit:
            times.popleft()
        while len(self._failures) > MAX_ADDRESSES:
            self._failures.popitem(last=False)


def _address(request: HTTPConnection) -> str:
    return request.client.host if request.client is not None else "?"


def _forwarded_by(request: HTTPConnection) -> str | None:
    """The connecting peer when the request's address was forwarded by it (a trusted proxy's
    X-Forwarded-For), else None: then the address is the peer and counts once."""
    connected = peer(request.scope)
    return connected if connected is not None and connected != _address(request) else None


def _digest(session: str) -> str:
    return hashlib.sha256(session.encode()).hexdigest()


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

    def __init__(
        self,
        tokens: Mapping[str, object],
        *,
        failures: FailureLimit | None = None,
        proxy_failures: FailureLimit | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not tokens:
            raise ValueError("TokenLogin needs at least one token")
        self._tokens = {token: as_viewer(token, entry) for token, entry in tokens.items()}
        self.failures = failures or FailureLimit(clock=clock)
        #: Per connecting peer, for requests whose address it forwarded (`_forwarded_by`).
        self.proxy_failures = proxy_failures or FailureLimit(PROXY_FAILURES, clock=clock)
        self.clock = clock
        #: sha256(session id) → (viewer, signed in at, last used at)
        self._sessions: OrderedDict[str, tuple[Viewer, float, float]] = OrderedDict()

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
        if scheme.lower() == "bearer" and value.strip():
            if self.wait_seconds(request):
                return None
            found = self.viewer_of_token(value.strip())
            if found is None:
                self.failed(request, value.strip())
            return found
        session = request.cookies.get(COOKIE)
        return self._session_viewer(session) if session else None

    def wait_seconds(self, request: HTTPConnection) -> float:
        wait = self.failures.wait_seconds(_address(request))
        proxy = _forwarded_by(request)
        return wait if proxy is None else max(wait, self.proxy_failures.wait_seconds(proxy))

    def failed(self, request: HTTPConnection, token: str | None = None) -> None:
        """A wrong `token`: against the request's address, and the proxy that forwarded it
        (one guess however often the same token is sent: `FailureLimit`)."""
        self.failures.failed(_address(request), token)
        proxy = _forwarded_by(request)
        if proxy is not None:
            self.proxy_failures.failed(proxy, token)

    def sign_in(self, request: HTTPConnection, token: str) -> str | None:
        """A session for a valid token; a wrong one counts against the request's address
        (and the proxy that forwarded it)."""
        viewer = self.viewer_of_token(token)
        if viewer is None:
            self.failed(request, token)
            return None
        session = secrets.token_urlsafe(32)
        now = self.clock()
        self._sessions[_digest(session)] = (viewer, now, now)
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)
        return session

    def sign_out(self, request: HTTPConnection) -> None:
        session = request.cookies.get(COOKIE)
        if session:
            self._sessions.pop(_digest(session), None)

    def _session_viewer(self, session: str) -> Viewer | None:
        key = _digest(session)
        found = self._sessions.get(key)
        if found is None:
            return None
        viewer, started, used = found
        now = self.clock()
        if now - used > SESSION_IDLE or now - started > SESSION_MAX_AGE:
            del self._sessions[key]
            return None
        self._sessions[key] = (viewer, started, now)
        self._sessions.move_to_end(key)
        return viewer


def as_viewer(token: str, entry: object) -> Viewer:
    """A tokens-file entry (an owner, a mapping or an object with `owner` and `read`)."""
    if isinstance(entry, str):
        return Viewer(entry)
    get = entry.get if isinstance(entry, Mapping) else lambda name: getattr(entry, name, None)
    owner, read = get("owner"), get("read") or ()
    if not isinstance(owner, str):
        raise ValueError(f"the tokens entry for {token[:4]}… names no owner")
    return Viewer(owner, frozenset(read))
