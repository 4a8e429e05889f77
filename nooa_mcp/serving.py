"""Serving a process: MCP at /mcp, with the web console at /ui and the hooks' route at /hooks
beside it over HTTP (DESIGN.md §13).

The front ends never import one another (`tests/package/test_architecture.py`); this module
is where they are put together, as the CLI is: `mcp.server.build_server` builds the MCP server
alone, and the routes and apps that share its engine are added here.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import anyio

from . import startup_gc
from .config import Settings
from .errors import InvalidInput
from .hosts import bind, is_loopback, parse_allowed_hosts, server_config, shown, shown_store
from .mcp.identity import TokenEntry, load_tokens
from .mcp.server import build_server, single_threaded_blas

if TYPE_CHECKING:  # a stdio server starts without the HTTP stack, the console or the hooks
    from .console.app import Console
    from .mcp.memory_server import MemoryServer
    from .memory import Memory

__all__ = ["build_http_server", "run", "shown_store", "single_threaded_blas"]


def build_http_server(
    settings: Settings,
    *,
    tokens: dict[str, TokenEntry] | dict[str, str] | None = None,
    http_url: str = "http://127.0.0.1:8765",
    console: Console | None = None,
    **options: object,
) -> MemoryServer:
    """`build_server` with what an HTTP server serves beside /mcp: Claude Code's
    `"type": "http"` hooks POST to /hooks (same tokens, same owner rules, the same engine; see
    `hooks/http.py`), and `console` at /ui when given."""
    from .hooks.http import hook_route
    from .mcp.http import protection

    server = build_server(
        settings,
        tokens=tokens,
        http_url=http_url,
        console=console,
        **options,  # type: ignore[arg-type]
    )
    host = urlsplit(http_url).hostname or "127.0.0.1"
    hooks = hook_route(
        server.engine_now,
        owner=settings.owner,
        tokens=bool(tokens),
        allowed_hosts=protection(host, settings.allowed_hosts).allowed_hosts,
    )
    server.custom_route(hooks.path, methods=["POST"], name="hooks")(hooks.endpoint)
    return server


def run(
    settings: Settings,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    tokens_file: Path | None = None,
) -> None:
    """Serve nooa-mcp until the client disconnects (stdio) or the process is stopped (http).

    Raises:
        InvalidInput: unknown transport, --tokens with stdio, a bad tokens file, --owner or
            --read with --tokens, a non-loopback host without tokens, or a port that is in use.
    """
    single_threaded_blas()
    if transport != "stdio":
        # Only a stdio server restarts it once warm (`build_server(open_when_needed=True)`).
        startup_gc.resume()
    if transport == "stdio":
        if tokens_file is not None:
            raise InvalidInput(
                "tokens",
                "--tokens only applies to --transport http (a stdio server has one client, "
                "the process that started it).",
                "Drop --tokens, or serve with --transport http.",
            )
        anyio.run(build_server(settings, open_when_needed=True).run_stdio_async)
        return
    if transport != "http":
        raise InvalidInput("transport", f"'{transport}' is not a transport.", "Use stdio or http.")
    settings = settings.model_copy(
        update={"allowed_hosts": parse_allowed_hosts(settings.allowed_hosts)}
    )
    tokens = load_tokens(tokens_file) if tokens_file is not None else None
    if tokens_file is not None:  # a file: reference under the root must not read it back
        settings = settings.model_copy(
            update={"private_files": [*settings.private_files, tokens_file]}
        )
    if tokens is not None and settings.owner:
        raise InvalidInput(
            "owner",
            f"--owner/NOOA_OWNER ({settings.owner}) and --tokens ({tokens_file}) both say whose "
            "memory a request is.",
            "Drop --owner (each token names its owner), or serve without --tokens.",
        )
    if tokens is not None and settings.read:
        raise InvalidInput(
            "read",
            f"--read/NOOA_READ ({','.join(settings.read)}) does not apply with --tokens "
            f"({tokens_file}): each token reads what its own entry's read list grants.",
            "Drop --read and list the roles in each token's read entry, or serve without --tokens.",
        )
    if tokens is None and not is_loopback(host):
        raise InvalidInput(
            "host",
            f"{host} is reachable from other machines and no tokens file is configured.",
            "Pass --tokens FILE (token → owner), or serve on 127.0.0.1.",
        )
    sock = bind(host, port)
    bound = sock.getsockname()[1]
    base = f"http://{shown(host)}:{bound}"
    from .console.app import Console  # the web console at /ui: only the HTTP transport
    from .console.auth import LoopbackOnly, TokenLogin
    from .mcp.http import http_app
    from .mcp.memory_server import plain_log_lines

    login = TokenLogin(tokens) if tokens else LoopbackOnly(settings.owner, settings.read)
    console = Console(_no_engine, login)
    server = build_http_server(settings, tokens=tokens, http_url=base, console=console)
    app = http_app(
        server,
        host=host,
        max_sessions_per_client=settings.max_sessions_per_client,
        ui=console.app(),
        tokens=bool(tokens),
        allowed_hosts=settings.allowed_hosts,
        wrong_tokens=login if isinstance(login, TokenLogin) else None,
    )
    state = f"tokens on ({len(tokens)} from {tokens_file})" if tokens else "tokens off (loopback)"
    if settings.allowed_hosts:
        state += f" · also answers Host {', '.join(settings.allowed_hosts)}"
    print(
        f"nooa-mcp serving {base}/mcp (console {base}/ui) · store {shown_store(settings.store)}"
        f" · {state}",
        file=sys.stderr,
    )
    import uvicorn  # only the HTTP transport needs it; stdio start-up stays lean

    plain_log_lines()

    # Forwarded headers are applied inside the app, behind the session cap (see http_app).
    config = server_config(app, log_level="warning", lifespan="on", proxy_headers=False)
    anyio.run(functools.partial(uvicorn.Server(config).serve, sockets=[sock]))


def _no_engine(_: object) -> Memory:
    raise RuntimeError("the console's engine is set when the server's lifespan opens it")
