"""The console as a Starlette application that can run alone or be mounted beside `/mcp`.

    console = Console.for_engine(engine, LoopbackOnly(owner))   # or TokenLogin(tokens)
    async with console.running():                              # reflection passes run here
        app = console.app()                                    # serve it, or Mount("/ui", app)

The console asks `memory_for(viewer)` for the Memory of each request's viewer (an owner and
its read grants); with the process's engine that is `Memory(engine, owner, read)`. Every path
is relative to where the app is mounted.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlencode

import anyio
import jinja2
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import Memory
from ..engine import Engine
from . import actions, auth, csrf, pages
from .auth import Viewer
from .runs import Runs
from .web import (
    SECURITY_HEADERS,
    Handler,
    endpoint,
    in_the_clear,
    own_origin,
    plain,
    set_cookie,
    too_many_failures,
)

HERE = Path(__file__).parent
#: Why a sign-in over plain HTTP from another machine is refused.
CLEAR_TEXT = (
    "This console is reached over plain HTTP from another machine: a token typed here would "
    'cross the network in the clear. Serve it behind TLS (see the README, "Running the '
    'console behind TLS"), or open it on this machine.'
)
MemoryFor = Callable[[Viewer], Memory | Awaitable[Memory]]


class Console:
    """The console's state: who may look, where memories come from, and running passes."""

    def __init__(
        self,
        memory_for: MemoryFor,
        authenticator: auth.Authenticator,
        *,
        secret: bytes | None = None,
    ) -> None:
        self.memory_for = memory_for
        self.auth = authenticator
        self.secret = secret or csrf.new_secret()
        self.runs = Runs()
        # Static files are cached by browsers; their URLs change when their bytes do.
        digest = hashlib.sha256()
        for path in sorted((HERE / "static").iterdir()):
            digest.update(path.read_bytes())
        self.static_version = digest.hexdigest()[:12]
        env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        env.filters.update(when=_when, num=_num, pct=_pct)
        self.templates = Jinja2Templates(env=env)

    @classmethod
    def for_engine(cls, engine: Engine, authenticator: auth.Authenticator) -> Console:
        """A console over the process's engine: each viewer gets a Memory of its own."""
        return cls(lambda v: Memory(engine, v.owner, v.read), authenticator)

    async def memory(self, viewer: Viewer) -> Memory:
        found = self.memory_for(viewer)
        return await found if inspect.isawaitable(found) else found

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Console]:
        """Run reflection passes started from the console until the host shuts down."""
        async with anyio.create_task_group() as tasks:
            self.runs.attach(tasks)
            try:
                yield self
            finally:
                self.runs.attach(None)
                tasks.cancel_scope.cancel()

    def app(self, *, middleware: Sequence[Middleware] = ()) -> Starlette:
        def read(handler: Handler) -> Callable:
            return endpoint(self, handler)

        def write(handler: Handler) -> Callable:
            return endpoint(self, handler, write=True)

        routes = [
            Route("/", read(pages.search)),
            Route("/why", read(pages.why)),
            Route("/memories", read(pages.memories)),
            Route("/memory/{memory_id}", read(pages.memory)),
            Route("/memory/{memory_id}/graph", read(pages.graph)),
            Route("/memory/{memory_id}/edit", write(actions.edit), methods=["POST"]),
            Route("/memory/{memory_id}/forget", write(actions.forget), methods=["POST"]),
            Route("/memory/{memory_id}/revive", write(actions.revive), methods=["POST"]),
            Route("/memory/{memory_id}/status", write(actions.todo_status), methods=["POST"]),
            Route("/memory/{memory_id}/cancel", write(actions.cancel_intent), methods=["POST"]),
            Route("/todos", read(pages.todos)),
            Route("/intents", read(pages.intents)),
            Route("/stats", read(pages.stats)),
            Route("/reflect", write(actions.reflect), methods=["POST"]),
            Route("/reflect/{run_id}", read(actions.reflect_page)),
            Route("/reflect/{run_id}/events", read(actions.reflect_events)),
            Route("/login", self._login, methods=["GET", "POST"]),
            Route("/logout", self._logout, methods=["POST"]),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ]
        return Starlette(routes=routes, middleware=[*middleware, Middleware(_SecurityHeaders)])

    # ------------------------------------------------------------------ login (tokens only)

    async def _login(self, request: Request) -> Response:
        if not self.auth.login:
            return RedirectResponse(_base(request) + "/", 303)
        nonce = request.cookies.get(csrf.COOKIE) or csrf.new_nonce()
        target = _safe_next(request.query_params.get("next", "/"))
        error = ""
        status = 200
        if request.method == "POST":
            form = await request.form()
            token = form.get("token")
            fresh = form.get(csrf.FIELD)
            if not csrf.origin_ok(request.headers, own_origin(request)) or not csrf.token_ok(
                self.secret,
                "(login)",
                request.cookies.get(csrf.COOKIE),
                fresh if isinstance(fresh, str) else None,
            ):
                return plain(
                    self, request, 403, "This form expired: reload the page and try again."
                )
            if in_the_clear(request):
                return plain(self, request, 403, CLEAR_TEXT)
            wait = self.auth.wait_seconds(request)
            if wait:
                return too_many_failures(self, request, wait)
            token = token.strip() if isinstance(token, str) else ""
            session = self.auth.sign_in(request, token) if token else None
            if session is not None:
                response = RedirectResponse(_base(request) + target, 303)
                set_cookie(response, request, auth.COOKIE, session)
                return response
            error, status = "That token is not in the tokens file.", 401
        elif in_the_clear(request):
            error = CLEAR_TEXT
        html = self.templates.get_template("login.html").render(
            base=_base(request),
            csrf=csrf.form_token(self.secret, "(login)", nonce),
            action=_base(request) + "/login?" + urlencode({"next": target}),
            error=error,
        )
        page = Response(html, status_code=status, media_type="text/html")
        if csrf.COOKIE not in request.cookies:
            set_cookie(page, request, csrf.COOKIE, nonce)
        return page

    async def _logout(self, request: Request) -> Response:
        viewer = await self.auth.viewer(request)
        form = await request.form()
        token = form.get(csrf.FIELD)
        if viewer is None or not csrf.token_ok(
            self.secret,
            viewer.owner,
            request.cookies.get(csrf.COOKIE),
            token if isinstance(token, str) else None,
        ):
            return plain(self, request, 403, "This form expired: reload the page and try again.")
        self.auth.sign_out(request)
        response = RedirectResponse(_base(request) + "/login", 303)
        response.delete_cookie(auth.COOKIE, path=request.scope.get("root_path", "") or "/")
        return response


def standalone_app(console: Console, hosts: Sequence[str]) -> Starlette:
    """The console served on its own: runs passes in its lifespan, answers only to `hosts`.

    The Host check keeps a web page on another site from reaching the console through DNS
    rebinding (its requests would carry that site's host name).
    """

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with console.running():
            yield

    inner = console.app()
    return Starlette(
        routes=[Mount("/", app=inner)],
        middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=list(hosts))],
        lifespan=lifespan,
    )


class _SecurityHeaders:
    """Adds the console's CSP and friends to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        extra = dict(SECURITY_HEADERS)
        if "/static/" in scope["path"]:
            extra["cache-control"] = "public, max-age=604800, immutable"

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {k.lower() for k, _ in headers}
                for name, value in extra.items():
                    if name.encode() not in present:
                        headers.append((name.encode(), value.encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _base(request: Request) -> str:
    return request.scope.get("root_path", "").rstrip("/")


def _safe_next(target: str) -> str:
    """Only a path inside the console: never another host (`//evil`) or a scheme."""
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def _when(value: datetime | None) -> str:
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


def _num(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _pct(value: float | int | str | None) -> str:
    return "—" if not isinstance(value, int | float) else f"{100 * value:.1f}%"
