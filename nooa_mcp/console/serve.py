"""`nooa-mcp ui`: serve the console on its own, on loopback unless tokens are configured."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import uvicorn

from .. import InvalidInput, Settings
from ..engine import Engine
from ..hosts import bind, forwarding, is_loopback, parse_allowed_hosts, server_config
from .app import Console, standalone_app
from .auth import Authenticator, LoopbackOnly, TokenLogin


def allowed_hosts(host: str, extra: Iterable[str] = ()) -> list[str]:
    """The Host names the console answers: loopback, the bound host and those the operator
    allowed (`--allow-host`, NOOA_ALLOWED_HOSTS)."""
    names = {"127.0.0.1", "localhost", host, *(h.strip("[]") for h in extra)}
    return sorted(names)


async def serve(
    settings: Settings,
    *,
    host: str = "127.0.0.1",
    port: int = 8766,
    tokens: Mapping[str, object] | None = None,
    embedder: object | None = None,
    announce: Callable[[str], None] = print,
) -> None:
    """Serve the console until cancelled.

    Raises:
        InvalidInput: a non-loopback host without tokens, or the port is busy.
        NooaError: the store cannot be opened (checked before the first request).
    """
    if not tokens and not is_loopback(host):
        raise InvalidInput(
            "host",
            f"{host} is reachable from other machines and no tokens file is configured.",
            "Pass --tokens FILE (token → owner), or serve on 127.0.0.1.",
        )
    authenticator: Authenticator = (
        TokenLogin(tokens) if tokens else LoopbackOnly(settings.owner, settings.read)
    )
    extra = parse_allowed_hosts(settings.allowed_hosts)
    sock = bind(host, port)
    try:
        # The engine opens the store now: a bad file is reported before anyone opens the page.
        async with Engine.open(settings, embedder) as engine:  # type: ignore[arg-type]
            console = Console.for_engine(engine, authenticator)
            app = standalone_app(console, allowed_hosts(host, extra))
            shown = f"[{host}]" if ":" in host else host
            bound = sock.getsockname()[1]
            announce(
                f"nooa-mcp console on http://{shown}:{bound}/ · store {settings.store} · "
                + ("sign in with a token" if tokens else f"owner {settings.owner or '(shared)'}")
            )
            # Forwarded headers are believed inside, with the peer kept (`hosts.forwarding`).
            config = server_config(
                forwarding(app), log_level="warning", lifespan="on", proxy_headers=False
            )
            try:
                await uvicorn.Server(config).serve(sockets=[sock])
            finally:
                await engine.settle()
    finally:
        sock.close()
