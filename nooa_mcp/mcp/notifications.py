"""Resource-updated notifications to subscribers of both protocol eras (SPEC §12).

Clients of the 2026-07-28 protocol open a `subscriptions/listen` stream, which the SDK serves;
the server publishes to it with `Context.notify_resource_updated`. Clients of the 2025
protocols (Claude Desktop, Claude Code and Codex today) send `resources/subscribe` instead,
which `MCPServer` does not serve: `Subscribers` keeps those subscriptions per connection and
sends `notifications/resources/updated` on the connection's own stream.
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.session import ServerSession
from mcp_types import EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams

__all__ = ["Subscribers"]


def _connection_key(session: ServerSession) -> int:
    # ctx.session is a per-request proxy; its connection is the thing a subscription belongs to.
    return id(getattr(session, "_connection", session))


class Subscribers:
    """Which connection asked to hear about which resource URI (2025-era `resources/subscribe`)."""

    def __init__(self) -> None:
        self._by_uri: dict[str, dict[int, ServerSession]] = {}

    def install(self, server: MCPServer) -> None:
        """Serve resources/subscribe and resources/unsubscribe on `server`.

        MCPServer exposes no registration for these two methods, so they go on its low-level
        server; the handshake then advertises `resources.subscribe`.
        """
        lowlevel = server._lowlevel_server
        lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, self._subscribe)
        lowlevel.add_request_handler(
            "resources/unsubscribe", UnsubscribeRequestParams, self._unsubscribe
        )

    async def _subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams
    ) -> EmptyResult:
        self._by_uri.setdefault(str(params.uri), {})[_connection_key(ctx.session)] = ctx.session
        return EmptyResult()

    async def _unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams
    ) -> EmptyResult:
        self._by_uri.get(str(params.uri), {}).pop(_connection_key(ctx.session), None)
        return EmptyResult()

    async def publish(self, ctx: Context, *uris: str) -> None:
        """Tell every subscriber, of either era, that these resources changed."""
        for uri in uris:
            await ctx.notify_resource_updated(uri)
            sessions = self._by_uri.get(uri, {})
            for key, session in list(sessions.items()):
                try:
                    await session.send_resource_updated(uri)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    # The client went away without unsubscribing.
                    sessions.pop(key, None)
