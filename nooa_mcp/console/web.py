"""Per-request plumbing shared by the pages and the actions: who is asking, CSRF, rendering.

`endpoint` turns a handler `async (Page) -> Response` into a Starlette endpoint that resolves
the owner through the authenticator (never from the request's parameters), opens that owner's
Memory, checks the CSRF token on writes, and turns a NooaError into a page with its sentence.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

from .. import InvalidInput, Memory, NooaError, NotFound, OwnerForbidden
from ..hosts import is_loopback
from . import csrf

if TYPE_CHECKING:
    from .app import Console

Handler = Callable[["Page"], Awaitable[Response]]

SECURITY_HEADERS = {
    # Everything is served by the console itself: no CDN, no inline script, no framing.
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


@dataclass
class Page:
    """One request as a handler sees it: the owner, their Memory, and rendering helpers."""

    console: Console
    request: Request
    owner: str
    memory: Memory
    nonce: str
    form: FormData | None = None
    started: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def base(self) -> str:
        return self.request.scope.get("root_path", "").rstrip("/")

    def href(self, path: str, **query: Any) -> str:
        """A console path under wherever the console is mounted, with a query string."""
        pairs = {k: v for k, v in query.items() if v is not None and v != ""}
        return self.base + path + ("?" + urlencode(pairs) if pairs else "")

    @property
    def csrf(self) -> str:
        return csrf.form_token(self.console.secret, self.owner, self.nonce)

    def arg(self, name: str, default: str = "") -> str:
        return self.request.query_params.get(name, default).strip()

    def field(self, name: str, default: str = "") -> str:
        value = self.form.get(name) if self.form is not None else None
        return value if isinstance(value, str) else default

    def render(self, template: str, status: int = 200, **context: Any) -> Response:
        return self.console.templates.TemplateResponse(
            self.request, template, {"page": self, **context}, status_code=status
        )

    def redirect(self, path: str, **query: Any) -> Response:
        return RedirectResponse(self.href(path, **query), status_code=303)


def status_of(exc: NooaError) -> int:
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, OwnerForbidden):
        return 403
    return 400 if isinstance(exc, InvalidInput) else 500


def own_origin(request: Request) -> str:
    return f"{request.url.scheme}://{request.headers.get('host', '')}"


def endpoint(console: Console, handler: Handler, *, write: bool = False) -> Callable:
    async def run(request: Request) -> Response:
        wait = console.auth.wait_seconds(request)
        if wait and "authorization" in request.headers:
            return too_many_failures(console, request, wait)
        viewer = await console.auth.viewer(request)
        if viewer is None:
            return refuse(console, request)
        owner = viewer.owner
        nonce = request.cookies.get(csrf.COOKIE)
        fresh = nonce is None
        form = None
        if write:
            form = await request.form()
            token = form.get(csrf.FIELD)
            if not csrf.origin_ok(request.headers, own_origin(request)) or not csrf.token_ok(
                console.secret, owner, nonce, token if isinstance(token, str) else None
            ):
                return plain(
                    console,
                    request,
                    403,
                    "This form expired or came from another site: reload the page and try again.",
                )
        try:
            memory = await console.memory(viewer)
        except NooaError as exc:
            return plain(console, request, status_of(exc), str(exc))
        page = Page(console, request, owner, memory, nonce or csrf.new_nonce(), form)
        try:
            response = await handler(page)
        except NooaError as exc:
            response = page.render("error.html", status=status_of(exc), message=str(exc))
        if fresh:
            set_cookie(response, request, csrf.COOKIE, page.nonce)
        return response

    return run


def in_the_clear(request: Request) -> bool:
    """Whether this request crossed a network without TLS: plain HTTP to a host that is not
    loopback. (Behind a TLS proxy on this machine uvicorn takes the scheme from its
    X-Forwarded-Proto; FORWARDED_ALLOW_IPS names a proxy elsewhere.)"""
    return request.url.scheme != "https" and not is_loopback(request.url.hostname)


def set_cookie(response: Response, request: Request, name: str, value: str) -> None:
    # Secure unless the console is reached on this machine over plain HTTP: a cookie set
    # for an https console must never be sent to an http URL of the same host.
    response.set_cookie(
        name,
        value,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https" or not is_loopback(request.url.hostname),
        path=(request.scope.get("root_path", "") or "/"),
    )


def refuse(console: Console, request: Request) -> Response:
    """No owner for this request: the login page when tokens are on, else loopback only."""
    if console.auth.login:
        base = request.scope.get("root_path", "").rstrip("/")
        target = request.url.path[len(base) :] or "/"
        login = f"/login?{urlencode({'next': target})}"
        browser = "text/html" in request.headers.get("accept", "")
        if request.method == "GET" and browser:
            return RedirectResponse(base + login, 303)
        if not browser:
            # curl and scripts: a sentence, not a page whose only link led back to itself.
            return PlainTextResponse(
                f"Sign in with a token first: open {base}/login in a browser.", 401
            )
        return plain(console, request, 401, "Sign in with a token first.", (login, "Sign in"))
    return plain(
        console, request, 403, "The console answers only on this machine (loopback).", None
    )


def too_many_failures(console: Console, request: Request, wait: float) -> Response:
    seconds = max(1, math.ceil(wait))
    response = plain(
        console,
        request,
        429,
        f"Too many wrong tokens from your address: try again in {seconds} s.",
        None,
    )
    response.headers["retry-after"] = str(seconds)
    return response


def plain(
    console: Console,
    request: Request,
    status: int,
    message: str,
    link: tuple[str, str] | None = ("/", "Back to the console"),
) -> Response:
    """An error page that needs no owner (no Memory, no navigation); `link` is (a path under
    the console, its text), or None where the console itself would refuse again."""
    html = console.templates.get_template("bare.html").render(
        title="nooa-mcp",
        message=message,
        base=request.scope.get("root_path", "").rstrip("/"),
        link=link,
    )
    return HTMLResponse(html, status_code=status)
