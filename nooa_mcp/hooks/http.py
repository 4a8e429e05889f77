"""The HTTP transport's hook route: Claude Code `"type": "http"` hooks, answered in-process.

`POST /hooks` takes the JSON Claude Code sends any hook (the same JSON a command hook reads on
stdin) and answers with the hook output, or an empty 200 when there is nothing to inject (which
Claude Code reads as "no output"). SessionStart and UserPromptSubmit are answered; any other
event gets the empty 200. The `nooa-mcp hook --url` command posts here too.

Same tokens and owner rules as /mcp: with a tokens file, a request without a valid bearer token
is refused (401) and the token's owner is the owner; without one, the server's configured owner,
else `claude-code`. The owner never comes from the request body. The server's engine does the
work, so the model and the warm vector index serve the hook.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..services import provenance
from .paths import label_of
from .remote import HOOK_PATH, PROJECT_FIELD
from .run import DEFAULT_OWNER, EVENTS, not_text, output, storable_input

if TYPE_CHECKING:  # the engine is the server's; importing it here would load numpy early
    from ..engine import Engine

__all__ = ["HOOK_SECONDS", "hook_route"]

#: A hook that takes longer than this answers with nothing: the prompt must never wait on it.
HOOK_SECONDS = 2.0
MAX_BODY = 1024 * 1024
_BY_NAME = {name: event for event, name in EVENTS.items()}


def _token_owner(request: Request) -> str | None:
    """The owner of the verified bearer token (the SDK's auth middleware put it in scope)."""
    user = request.scope.get("user")
    token = getattr(user, "access_token", None)
    return getattr(token, "client_id", None) or None


def _host_allowed(host: str, allowed: Sequence[str]) -> bool:
    """`host` (the Host header) against patterns as the SDK's transport security writes them:
    `name:port`, or `name:*` for any port."""
    name = host if host.endswith("]") or ":" not in host else host.rpartition(":")[0]
    for pattern in allowed:
        base, _, port = pattern.rpartition(":")
        if pattern == host or (port == "*" and base == name):
            return True
    return False


async def _body(request: Request) -> bytes | None:
    """The request body, or None once it passes MAX_BODY: the limit holds while reading, so a
    400 MB POST costs this process 1 MB, not 400 (a Content-Length over it is refused unread)."""
    declared = request.headers.get("content-length", "")
    if declared.strip().isdigit() and int(declared) > MAX_BODY:
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            return None
    return bytes(body)


def hook_route(
    engine: Callable[[], Engine | None],
    *,
    owner: str = "",
    tokens: bool = False,
    allowed_hosts: Sequence[str] | None = None,
    path: str = HOOK_PATH,
) -> Route:
    """The `POST /hooks` route for a server whose engine `engine()` returns once it runs.

    Args:
        engine: the server's engine (None until its lifespan has opened it: answered 503).
        owner: the server's configured owner (--owner / NOOA_OWNER), "" when none.
        tokens: whether the server has a tokens file: then a verified bearer token is required
            and names the owner (the SDK's AuthenticationMiddleware verifies it app-wide).
        allowed_hosts: the Host values /mcp accepts (e.g. `["127.0.0.1:*", "localhost:*"]`);
            any other Host gets 421, as on /mcp. None leaves Host checks to the server.
    """

    async def endpoint(request: Request) -> Response:
        host = request.headers.get("host", "")
        if allowed_hosts is not None and not _host_allowed(host, allowed_hosts):
            return JSONResponse({"error": f"Host {host!r} is not served here"}, 421)
        # Claude Code is not a browser: a request with an Origin header is a web page
        # (possibly through DNS rebinding) and gets nothing. JSON only, which a page cannot
        # send across origins without a preflight this route never answers.
        if "origin" in request.headers:
            return JSONResponse({"error": "hooks are not answered to web pages"}, 403)
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            return JSONResponse({"error": "send the hook JSON as application/json"}, 415)
        if tokens:
            who = _token_owner(request)
            if who is None:
                return JSONResponse(
                    {"error": "invalid_token", "error_description": "Authentication required"},
                    status_code=401,
                    headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
                )
        else:
            who = owner or DEFAULT_OWNER
        running = engine()
        if running is None:
            return JSONResponse({"error": "the server is still starting"}, status_code=503)
        body = await _body(request)
        if body is None:
            # Connection: close, so the server stops receiving the rest instead of discarding it.
            return JSONResponse(
                {"error": "the hook input is over 1 MB; send the hook JSON only"},
                status_code=413,
                headers={"Connection": "close"},
            )
        try:
            data = json.loads(body or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError):
            return JSONResponse({"error": "the hook input is not JSON"}, status_code=400)
        if not isinstance(data, dict):
            return JSONResponse({"error": "the hook input is not a JSON object"}, status_code=400)
        data = storable_input(data)
        problem = not_text(data)
        if problem is not None:
            return JSONResponse({"error": problem}, status_code=400)
        event = _BY_NAME.get(str(data.get("hook_event_name", "")))
        prompt = data["prompt"] if isinstance(data.get("prompt"), str) else ""
        if event is None or (event == "user-prompt" and not prompt.strip()):
            return Response(status_code=200)
        cwd = data.get("cwd") if isinstance(data.get("cwd"), str) else None
        session = data.get("session_id") if isinstance(data.get("session_id"), str) else None
        # The command hook found the project on its own disk; Claude Code's http hook sends
        # only the cwd, named by its last folder. The server's disk is never asked about a
        # client's path (a token holder could tell which folders exist here).
        sent = data.get(PROJECT_FIELD)
        project = sent.replace("\ufffd", "").strip()[:200] if isinstance(sent, str) else ""
        project = project or label_of(cwd)
        from .facade import injected_text

        text = ""
        with anyio.move_on_after(HOOK_SECONDS), provenance.session((session or "")[:200] or None):
            from ..memory import Memory

            text = await injected_text(Memory(running, who), event, project, prompt)
        shown = output(event, text)
        if not shown:
            return Response(status_code=200)
        return Response(shown, media_type="application/json")

    return Route(path, endpoint=endpoint, methods=["POST"], name="hooks")
