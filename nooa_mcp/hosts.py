"""Hosts and listening sockets, shared by the HTTP front ends (the MCP server, the console).

Which addresses are this machine only, which host names an operator may allow in the Host
header (never a port or a wildcard: those would widen what DNS rebinding can reach), and a
socket bound before anything starts, so a port in use is one sentence, not a traceback, and
the one way an app is handed to uvicorn (`server_config`), behind the one way forwarded
headers are believed (`forwarding`), which keeps the connecting peer beside them.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import re
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .errors import InvalidInput

if TYPE_CHECKING:  # a stdio server starts without the HTTP stack
    import uvicorn

__all__ = [
    "PEER",
    "bind",
    "forwarded_allow_ips",
    "forwarding",
    "is_loopback",
    "parse_allowed_hosts",
    "peer",
    "server_config",
    "shown",
    "shown_store",
]

#: The scope key that keeps the address of the connection's other end (the socket's peer)
#: once X-Forwarded-For from a trusted proxy has replaced the scope's client.
PEER = "nooa.peer"


def is_loopback(host: str | None) -> bool:
    """Whether `host` (a name or an address) is this machine only."""
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def shown(host: str) -> str:
    """An address as a Host header writes it (IPv6 in brackets)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


#: A host name or an IP address as an operator may name one (no port, no wildcard).
_HOST_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?(?:\.[A-Za-z0-9-]{1,63})*")


def parse_allowed_hosts(values: Iterable[str] | str | None, field: str = "allow-host") -> list[str]:
    """Host names or IP addresses the operator allows in the Host header, besides the bound
    host and the loopback names (e.g. the machine's address, when serving on 0.0.0.0).

    Raises:
        InvalidInput: a value is not a host name or an IP address (a port or a wildcard
            would widen what DNS rebinding could reach).
    """
    items = values.split(",") if isinstance(values, str) else list(values or [])
    out: list[str] = []
    for item in items:
        name = item.strip()
        if not name:
            continue
        bare = name.strip("[]")
        try:
            ipaddress.ip_address(bare)
            name = shown(bare)
        except ValueError:
            if not _HOST_NAME.fullmatch(name):
                raise InvalidInput(
                    field,
                    f"{name!r} is not a host name or an IP address.",
                    "Name the host as clients write it, e.g. 192.0.2.10 or memory.internal "
                    "(no port, no wildcard).",
                ) from None
            name = name.lower()
        if name not in out:
            out.append(name)
    return out


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, bound before anything starts.

    Raises:
        InvalidInput: the port is in use, or the address cannot be bound (one sentence).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise InvalidInput(
                "port",
                f"{port} on {host} is already in use by another process.",
                "Pass another --port, or stop the process that listens there.",
            ) from None
        raise InvalidInput(
            "host", f"cannot listen on {host}:{port} ({exc.strerror}).", "Check --host."
        ) from None
    return sock


def server_config(app: Any, **options: Any) -> uvicorn.Config:
    """uvicorn's configuration for `app`, an ASGI 3 application, with `options` beside.

    uvicorn looks at what it is given: it calls it with no arguments to see whether it is a
    factory, and guesses ASGI 2 or 3 from whether its `__call__` is a coroutine function. A
    wrapper around `__call__` (mutation testing puts one on every method) fools both guesses:
    the wrapper called bare returns a coroutine, which uvicorn then serves as the app. So the
    app is handed over as a factory and the interface is named.
    """
    import uvicorn  # only the HTTP transport needs it

    return uvicorn.Config(lambda: app, factory=True, interface="asgi3", **options)


def forwarded_allow_ips() -> str:
    """The proxies whose X-Forwarded-* headers are believed: uvicorn's own default."""
    return os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1,::1")


def forwarding(app: Any) -> Any:
    """`app` behind uvicorn's X-Forwarded-For/-Proto handling (from `forwarded_allow_ips`),
    with the socket's peer kept in the scope under `PEER` first: a forwarded address may say
    which client behind a proxy to blame, but whoever connects can send one, so what must not
    be dodged by changing a header (wrong tokens, DESIGN.md §10) also counts the peer. Serve
    it with uvicorn's own proxy_headers off."""
    from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware  # HTTP only

    believed = ProxyHeadersMiddleware(app, trusted_hosts=forwarded_allow_ips())

    async def keep_peer(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            client = scope.get("client")
            scope[PEER] = client[0] if client else "?"
        await believed(scope, receive, send)

    return keep_peer


def peer(scope: Any) -> str | None:
    """The socket's peer `forwarding` kept for this request (None when it did not run)."""
    found = scope.get(PEER)
    return found if isinstance(found, str) else None


def shown_store(store: Path | str) -> str:
    """The store as a line on a terminal (or a log) may name it: a PostgreSQL URL without its
    password."""
    text = str(store)
    parts = urlsplit(text)
    if parts.scheme.startswith("postgres") and parts.password is not None:
        host = parts.netloc.rpartition("@")[2]
        user = f"{parts.username}@" if parts.username else ""
        return parts._replace(netloc=user + host).geturl()
    return text
