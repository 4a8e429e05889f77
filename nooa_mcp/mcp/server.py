"""The MCP server: thin tools, resources and prompts over the Memory facade (SPEC §10, §12).

`build_server(settings)` returns an `MCPServer`; `run(settings, transport=...)` serves it over
stdio (the default) or streamable HTTP. The lifespan starts the embedding model loading in a
worker thread and returns at once, so `initialize` is answered before the model is ready.
"""

import functools
import importlib.metadata
import ipaddress
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from pydantic import AnyHttpUrl

from ..config import Settings
from ..domain.scope import parse_roles
from ..embeddings import Embedder, default_embedder
from ..errors import InvalidInput
from .handlers import Owners, bind_owner
from .identity import TokenEntry, TokenFileVerifier, load_tokens
from .notifications import Subscribers
from .prompting import register_prompts
from .rendering import REPLY_TOKENS
from .resources import register_resources
from .tools import register_tools

__all__ = ["build_server", "run"]

# --------------------------------------------------------------------------- the server

_INSTRUCTIONS = (
    "Long-term memory for this agent. Recall (memory_recall) before acting on a subject you may "
    "have met before; author (memory_author) what you would want next time; keep commitments "
    "with todo and future reminders with intent. Read the memory_guide prompt for the details."
)


def build_server(
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    tokens: dict[str, TokenEntry] | dict[str, str] | None = None,
    http_url: str = "http://127.0.0.1:8765",
) -> MCPServer:
    """Build the nooa-mcp server for `settings`.

    Args:
        settings: store path, configured owner and model constants.
        embedder: the embedding model; None loads the bundled MiniLM in a worker thread.
        tokens: bearer token → owner (or TokenEntry with read grants); when given, HTTP
            requests without a valid token are refused.
        http_url: the server's own base URL (only used to describe it to OAuth-aware clients).

    Returns:
        An MCPServer whose lifespan opens the store and closes it on shutdown.
    """

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[Owners]:
        # The model loads beside the server: initialize is answered before it is ready (SPEC §4).
        model = embedder or default_embedder(settings.model_cache_dir)
        async with Owners.running(settings, model) as owners:
            yield owners

    auth = None
    verifier = None
    if tokens:
        verifier = TokenFileVerifier(tokens)
        auth = AuthSettings(issuer_url=AnyHttpUrl(http_url), resource_server_url=None)

    server = MCPServer(
        "nooa-mcp",
        title="NOOA long-term memory",
        version=_version(),
        instructions=_INSTRUCTIONS,
        lifespan=lifespan,
        log_level="WARNING",
        token_verifier=verifier,
        auth=auth,
    )
    server.middleware.append(bind_owner(settings.owner, parse_roles(settings.read)))
    budget = REPLY_TOKENS
    subscribers = Subscribers()
    subscribers.install(server)
    register_tools(server, budget, subscribers, reflect=settings.reflect_tool)
    register_resources(server, budget)
    register_prompts(server)
    return server


def _version() -> str:
    try:
        return importlib.metadata.version("nooa-mcp")
    except importlib.metadata.PackageNotFoundError:
        return "0"


# --------------------------------------------------------------------------- running


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(
    settings: Settings,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    tokens_file: Path | None = None,
) -> None:
    """Serve nooa-mcp until the client disconnects (stdio) or the process is stopped (http).

    Raises:
        InvalidInput: unknown transport, a bad tokens file, or a non-loopback host without tokens.
    """
    if transport == "stdio":
        anyio.run(build_server(settings).run_stdio_async)
        return
    if transport != "http":
        raise InvalidInput("transport", f"'{transport}' is not a transport.", "Use stdio or http.")
    tokens = load_tokens(tokens_file) if tokens_file is not None else None
    if tokens is not None and settings.owner:
        raise InvalidInput(
            "owner",
            f"--owner/NOOA_OWNER ({settings.owner}) and --tokens ({tokens_file}) both say whose "
            "memory a request is.",
            "Drop --owner (each token names its owner), or serve without --tokens.",
        )
    if tokens is None and not _is_loopback(host):
        raise InvalidInput(
            "host",
            f"{host} is reachable from other machines and no tokens file is configured.",
            "Pass --tokens FILE (token → owner), or serve on 127.0.0.1.",
        )
    shown = f"[{host}]" if ":" in host else host
    server = build_server(settings, tokens=tokens, http_url=f"http://{shown}:{port}")
    anyio.run(functools.partial(server.run_streamable_http_async, host=host, port=port))
