"""Whose memory a connection uses: owner from settings, bearer token or client name (DESIGN.md §10).

The owner is never a tool argument. It is, in order: the configured owner (`--owner`,
`NOOA_OWNER`), the owner a bearer token maps to (HTTP with a tokens file), or a slug of the
client's `clientInfo.name`. `resolve_identity` works it out for one inbound message.
"""

from __future__ import annotations

import difflib
import hmac
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.context import ServerRequestContext

from ..domain.scope import owner_from_client_name, parse_owner, parse_roles
from ..errors import InvalidInput

__all__ = [
    "Identity",
    "TokenEntry",
    "TokenFileVerifier",
    "load_tokens",
    "resolve_identity",
]

Source = Literal["settings", "token", "client"]


#: How a token's read grants travel in the SDK's AccessToken: one scope per granted role.
READ_SCOPE = "read:"


@dataclass(frozen=True)
class Identity:
    """The owner of one inbound message, its read grants, and where that answer came from."""

    owner: str
    source: Source
    client_name: str | None = None
    session_ref: str | None = None
    grants: frozenset[str] = frozenset()


@dataclass(frozen=True)
class TokenEntry:
    """What a bearer token stands for: an owner and the roles it may also read."""

    owner: str
    read: frozenset[str] = frozenset()


def _token(request: Any) -> AccessToken | None:
    """The verified bearer token of this message, if any."""
    scope = getattr(request, "scope", None)
    user = scope.get("user") if isinstance(scope, dict) else None
    if isinstance(user, AuthenticatedUser):
        return user.access_token
    return get_access_token()


def resolve_identity(
    configured_owner: str,
    ctx: ServerRequestContext[Any, Any],
    configured_grants: frozenset[str] = frozenset(),
) -> Identity:
    """Work out the owner and grants of one inbound message (in DESIGN.md §10's order).

    A token's own owner and grants come from the tokens file; the server refuses to start
    with both a configured owner and a tokens file, so the two never compete.
    """
    client_params = ctx.session.client_params
    client_name = client_params.client_info.name if client_params is not None else None
    session_ref = None
    headers = getattr(ctx.request, "headers", None)
    if headers is not None:
        session_ref = headers.get("mcp-session-id")
    token = _token(ctx.request)
    if token is not None and token.client_id:
        grants = frozenset(s[len(READ_SCOPE) :] for s in token.scopes if s.startswith(READ_SCOPE))
        return Identity(token.client_id, "token", client_name, session_ref, grants)
    if configured_owner:
        return Identity(configured_owner, "settings", client_name, session_ref, configured_grants)
    owner = owner_from_client_name(client_name)
    return Identity(owner, "client", client_name, session_ref, configured_grants)


def load_tokens(path: Path) -> dict[str, TokenEntry]:
    """Read a tokens file: token → owner and read grants.

    Either a JSON object whose values are an owner (`{"<token>": "role@instance"}`) or an entry
    (`{"<token>": {"owner": "role@instance", "read": ["other-role"]}}`), or lines
    `<token> <owner>` (blank lines and `#` comments ignored).

    Raises:
        InvalidInput: the file is missing, empty, malformed, or names an invalid owner or role.
    """
    field = "tokens"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(
            field, f"cannot read {path}: {exc.strerror}.", "Pass an existing file."
        ) from None
    raw: dict[str, Any] = {}
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            loaded = json.loads(stripped, object_pairs_hook=_once_each)
        except json.JSONDecodeError as exc:
            raise InvalidInput(
                field, f"{path} is not valid JSON ({exc.msg}).", _TOKENS_FIX
            ) from None
        except _GivenTwice as exc:
            # JSON keeps the last of a repeated key: the first grant or owner was dropped.
            what = (
                f"{exc.key!r} is given twice in one token's entry"
                if exc.key in ENTRY_FIELDS
                else "a token is listed twice, with different entries"
            )
            raise InvalidInput(
                field,
                f"{path}: {what}; only the last would be obeyed.",
                "Keep one entry per token (and one owner and read list in it).",
            ) from None
        raw = dict(loaded)
    else:
        for number, line in enumerate(text.splitlines(), start=1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2:
                raise InvalidInput(
                    field, f"{path} line {number} is not '<token> <owner>'.", _TOKENS_FIX
                )
            if raw.get(parts[0], parts[1]) != parts[1]:
                # The last line would win: the owner the earlier line names was dropped.
                raise InvalidInput(
                    field,
                    f"{path} line {number} lists a token listed before, for another owner.",
                    "Keep one line per token.",
                )
            raw[parts[0]] = parts[1]
    if not raw:
        raise InvalidInput(field, f"{path} holds no tokens.", _TOKENS_FIX)
    mapping: dict[str, TokenEntry] = {}
    for token, value in raw.items():
        entry = _entry(path, value)
        if len(token) < 16:
            raise InvalidInput(
                field,
                f"a token for {entry.owner!r} is shorter than 16 characters.",
                "Use long random tokens, e.g. from `openssl rand -hex 32`.",
            )
        mapping[token] = entry
    return mapping


class _GivenTwice(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _once_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are each given once (or repeated with the same value).

    Raises:
        _GivenTwice: a key is given twice with different values (the token is not named).
    """
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen and seen[key] != value:
            raise _GivenTwice(key)
        seen[key] = value
    return seen


def _entry(path: Path, value: Any) -> TokenEntry:
    field = "tokens"
    read: list[Any]
    if isinstance(value, str):
        owner, read = value, []
    elif isinstance(value, dict) and isinstance(value.get("owner"), str):
        _refuse_unknown_keys(path, value)
        owner, read = value["owner"], value.get("read") or []
        if not isinstance(read, list):
            raise InvalidInput(field, f"{path}: 'read' must be a list of roles.", _TOKENS_FIX)
    else:
        raise InvalidInput(
            field, f"{path} must map each token to an owner or an entry.", _TOKENS_FIX
        )
    if not owner:
        raise InvalidInput(
            field, "a token maps to an empty owner.", "Name an owner role[@instance]."
        )
    parse_owner(owner, field)
    return TokenEntry(owner, parse_roles(read, field))


#: The keys of a token's entry. Nothing else is obeyed, so nothing else is accepted.
ENTRY_FIELDS = ("owner", "read")


def _refuse_unknown_keys(path: Path, entry: dict[str, Any]) -> None:
    """Refuse a key a token's entry does not have, naming it (and the key it resembles).

    Dropped without a word, `"expires": "2020-01-01"` or `"disabled": true` left a token its
    operator believed ended valid for good, and `"raed": [...]` left a grant unmade.

    Raises:
        InvalidInput: the first unknown key is named.
    """
    unknown = [key for key in entry if key not in ENTRY_FIELDS]
    if not unknown:
        return
    key = str(unknown[0])[:64]
    close = difflib.get_close_matches(key.lower(), list(ENTRY_FIELDS), n=1, cutoff=0.6)
    raise InvalidInput(
        "tokens",
        f"{path}: {key!r} is not a field of a token's entry (only owner and read are); "
        "tokens do not expire and cannot be disabled in the file.",
        (f"Did you mean {close[0]}? " if close else "")
        + "To end a token, delete its entry and restart the server.",
    )


_TOKENS_FIX = (
    'Write {"<token>": "role@instance"} or {"<token>": {"owner": "role@instance", '
    '"read": ["role"]}} as JSON, or one "<token> <owner>" per line.'
)


class TokenFileVerifier(TokenVerifier):
    """Accepts exactly the bearer tokens of a tokens file; the token's owner becomes client_id
    and its read grants become `read:<role>` scopes."""

    def __init__(self, tokens: dict[str, TokenEntry] | dict[str, str]) -> None:
        self._tokens = {
            token: entry if isinstance(entry, TokenEntry) else TokenEntry(entry)
            for token, entry in tokens.items()
        }

    async def verify_token(self, token: str) -> AccessToken | None:
        # Compare every token in constant time, so timing says nothing about near misses.
        found = None
        for known, entry in self._tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                found = entry
        if found is None:
            return None
        scopes = [f"{READ_SCOPE}{role}" for role in sorted(found.read)]
        return AccessToken(token=token, client_id=found.owner, scopes=scopes, subject=found.owner)
