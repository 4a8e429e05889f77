"""Whose memory a connection uses: owner from settings, bearer token or client name (SPEC §10).

The owner is never a tool argument. It is, in order: the configured owner (`--owner`,
`NOOA_OWNER`), the owner a bearer token maps to (HTTP with a tokens file), or a slug of the
client's `clientInfo.name`. `resolve_identity` works it out for one inbound message.
"""

from __future__ import annotations

import hmac
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.context import ServerRequestContext

from .errors import InvalidInput
from .schema import owner_from_client_name, parse_owner

__all__ = [
    "Identity",
    "TokenFileVerifier",
    "load_tokens",
    "resolve_identity",
]

Source = Literal["settings", "token", "client"]


@dataclass(frozen=True)
class Identity:
    """The owner of one inbound message and where that answer came from."""

    owner: str
    source: Source
    client_name: str | None = None
    session_ref: str | None = None


def _token_owner(request: Any) -> str | None:
    """The owner the HTTP bearer token of this message maps to, if any."""
    scope = getattr(request, "scope", None)
    user = scope.get("user") if isinstance(scope, dict) else None
    if isinstance(user, AuthenticatedUser):
        return user.access_token.client_id
    token = get_access_token()
    return token.client_id if token is not None else None


def resolve_identity(configured_owner: str, ctx: ServerRequestContext[Any, Any]) -> Identity:
    """Work out the owner of one inbound message (SPEC §10 order)."""
    client_params = ctx.session.client_params
    client_name = client_params.client_info.name if client_params is not None else None
    session_ref = None
    headers = getattr(ctx.request, "headers", None)
    if headers is not None:
        session_ref = headers.get("mcp-session-id")
    if configured_owner:
        return Identity(configured_owner, "settings", client_name, session_ref)
    token_owner = _token_owner(ctx.request)
    if token_owner:
        return Identity(token_owner, "token", client_name, session_ref)
    return Identity(owner_from_client_name(client_name), "client", client_name, session_ref)


def load_tokens(path: Path) -> dict[str, str]:
    """Read a tokens file: token → owner.

    Either a JSON object `{"<token>": "role@instance", ...}` or lines `<token> <owner>`
    (blank lines and `#` comments ignored).

    Raises:
        InvalidInput: the file is missing, empty, malformed, or names an invalid owner.
    """
    field = "tokens"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(
            field, f"cannot read {path}: {exc.strerror}.", "Pass an existing file."
        ) from None
    mapping: dict[str, str] = {}
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            loaded = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise InvalidInput(
                field, f"{path} is not valid JSON ({exc.msg}).", _TOKENS_FIX
            ) from None
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in loaded.items()):
            raise InvalidInput(
                field, f"{path} must map token strings to owner strings.", _TOKENS_FIX
            )
        mapping = dict(loaded)
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
            mapping[parts[0]] = parts[1]
    if not mapping:
        raise InvalidInput(field, f"{path} holds no tokens.", _TOKENS_FIX)
    for token, owner in mapping.items():
        if len(token) < 16:
            raise InvalidInput(
                field,
                f"a token for '{owner}' is shorter than 16 characters.",
                "Use long random tokens, e.g. from `openssl rand -hex 32`.",
            )
        if not owner:
            raise InvalidInput(
                field, "a token maps to an empty owner.", "Name an owner role[@instance]."
            )
        parse_owner(owner, field)
    return mapping


_TOKENS_FIX = 'Write {"<token>": "role@instance"} as JSON, or one "<token> <owner>" per line.'


class TokenFileVerifier(TokenVerifier):
    """Accepts exactly the bearer tokens of a tokens file; the token's owner becomes client_id."""

    def __init__(self, tokens: dict[str, str]) -> None:
        self._tokens = dict(tokens)

    async def verify_token(self, token: str) -> AccessToken | None:
        # Compare every token in constant time, so timing says nothing about near misses.
        owner = None
        for known, mapped in self._tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                owner = mapped
        if owner is None:
            return None
        return AccessToken(token=token, client_id=owner, scopes=[], subject=owner)
