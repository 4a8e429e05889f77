"""Cross-site request forgery protection for the console's forms.

Every write is a POST that must carry a token bound to this browser and to the owner it acts
as, and must come from the console's own origin. The browser's nonce lives in an HttpOnly,
SameSite=Strict cookie; the form token is an HMAC of (owner, nonce) under a per-process
secret, so nothing is stored on the server and a token taken from one owner's page is
useless for another owner or another browser.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Mapping

COOKIE = "nooa_csrf"
FIELD = "csrf"


def new_secret() -> bytes:
    return secrets.token_bytes(32)


def new_nonce() -> str:
    return secrets.token_urlsafe(24)


def form_token(secret: bytes, owner: str, nonce: str) -> str:
    """The token a form carries: HMAC-SHA256(secret, owner ‖ nonce)."""
    mac = hmac.new(secret, f"{owner}\x00{nonce}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).decode().rstrip("=")


def token_ok(secret: bytes, owner: str, nonce: str | None, token: str | None) -> bool:
    """Whether `token` was issued for this owner and this browser's nonce."""
    if not nonce or not token:
        return False
    return hmac.compare_digest(form_token(secret, owner, nonce), token)


def origin_ok(headers: Mapping[str, str], own_origin: str) -> bool:
    """A write must come from a page of the console itself.

    Browsers send `Origin` on every POST and `Sec-Fetch-Site` on every request; a client that
    sends neither (curl with the cookies stolen would still need the token) is judged by the
    token alone.
    """
    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    return origin.rstrip("/") == own_origin.rstrip("/")
