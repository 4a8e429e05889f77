"""Resource-updated notifications, only to subscribers who may read what changed.

Clients of the 2026-07-28 protocol open a `subscriptions/listen` stream, which the SDK serves
from a subscription bus; clients of the 2025 protocols (Claude Desktop, Claude Code and Codex
today) send `resources/subscribe`, which `MCPServer` does not serve, so `Subscribers` keeps
those per connection. Either way a subscription remembers who subscribed, and an update about
a memory reaches only the subscribers whose read scope shows that memory's owner: Alice hears
nothing when Bob writes (DESIGN.md §10).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.session import ServerSession
from mcp.shared.subscriptions import ResourceUpdated, ServerEvent
from mcp_types import EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams

from ..domain.scope import Actor, Scope
from .handlers import current_identity

__all__ = ["ScopedBus", "Subscribers"]

Listener = Callable[[ServerEvent], None]
logger = logging.getLogger(__name__)


def _reader_scope() -> Scope | None:
    """What the subscriber of the message being handled may read (None: no identity)."""
    identity = current_identity()
    if identity is None:
        return None
    return Actor(identity.owner, identity.grants).effective()


class ScopedBus:
    """A subscription bus (the SDK's `SubscriptionBus` seam) that remembers who listens.

    `subscribe` runs inside the `subscriptions/listen` request, so the subscriber's identity
    is known then and kept beside its listener; `publish_about` delivers an event only to the
    streams whose scope shows the owner of the row that changed. `publish` (the SDK's own
    list-changed events) reaches every stream. Fan-out is synchronous, in subscription order,
    and one failing listener never starves the others.
    """

    def __init__(self) -> None:
        self._listeners: dict[object, tuple[Listener, Scope | None]] = {}

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        token = object()
        self._listeners[token] = (listener, _reader_scope())

        def unsubscribe() -> None:
            self._listeners.pop(token, None)

        return unsubscribe

    async def publish(self, event: ServerEvent) -> None:
        await self._deliver(event, None)

    async def publish_about(self, event: ServerEvent, owner: str) -> None:
        """Publish `event` to the streams that may read rows of `owner`."""
        await self._deliver(event, owner)

    async def _deliver(self, event: ServerEvent, owner: str | None) -> None:
        for listener, scope in list(self._listeners.values()):
            if owner is not None and (scope is None or not scope.allows(owner)):
                continue
            try:
                listener(event)
            except Exception:  # fan-out boundary: isolate listeners from each other
                logger.exception("subscription listener raised; continuing")
        # Let listen streams drain between events of a burst.
        await anyio.lowlevel.checkpoint()


def _connection_key(session: ServerSession) -> int:
    # ctx.session is a per-request proxy; its connection is the thing a subscription belongs to.
    return id(getattr(session, "_connection", session))


class Subscribers:
    """Who asked to hear about which resource URI, on either protocol era, and as whom."""

    def __init__(self, bus: ScopedBus) -> None:
        self.bus = bus
        self._by_uri: dict[str, dict[int, tuple[ServerSession, Scope | None]]] = {}

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
        key = _connection_key(ctx.session)
        self._by_uri.setdefault(str(params.uri), {})[key] = (ctx.session, _reader_scope())
        return EmptyResult()

    async def _unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams
    ) -> EmptyResult:
        self._by_uri.get(str(params.uri), {}).pop(_connection_key(ctx.session), None)
        return EmptyResult()

    async def publish(self, owner: str, *uris: str) -> None:
        """Tell the subscribers of either era who may read `owner`'s rows that these changed."""
        for uri in uris:
            await self.bus.publish_about(ResourceUpdated(uri=uri), owner)
            sessions = self._by_uri.get(uri, {})
            for key, (session, scope) in list(sessions.items()):
                if scope is None or not scope.allows(owner):
                    continue
                try:
                    await session.send_resource_updated(uri)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    # The client went away without unsubscribing.
                    sessions.pop(key, None)
