"""A listening socket is bound before a server starts, and a port in use or an address that
cannot be bound is one sentence (the CLI's `serve` and `console` say it); the facade's scope
words resolve as DESIGN.md §10 says. Both run here in process, where mutation testing sees
them, besides the server processes that use them."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from nooa_mcp import InvalidInput, Memory
from nooa_mcp.domain.scope import Scope
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.hosts import bind


def test_a_bound_socket_listens_and_a_second_bind_of_its_port_is_one_sentence() -> None:
    first = bind("127.0.0.1", 0)
    try:
        port = first.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port), timeout=10)
        client.close()
        with pytest.raises(InvalidInput) as refused:
            bind("127.0.0.1", port)
        assert str(refused.value) == (
            f"port: {port} on 127.0.0.1 is already in use by another process. "
            "Pass another --port, or stop the process that listens there."
        )
    finally:
        first.close()


def test_an_address_this_machine_does_not_have_is_refused_naming_host() -> None:
    with pytest.raises(InvalidInput) as refused:
        bind("192.0.2.1", 0)  # TEST-NET-1: never an address of this machine
    assert str(refused.value).startswith("host: cannot listen on 192.0.2.1:0 (")
    assert str(refused.value).endswith("Check --host.")


@pytest.mark.anyio
async def test_scope_words_resolve_for_the_owner(tmp_path: Path) -> None:
    async with Memory.open(tmp_path / "s.sqlite", owner="me@desk", embedder=HashEmbedder()) as mem:
        assert mem.scope() == Scope(roles=frozenset({"me"}))
        assert mem.scope("instance") == Scope(roles=frozenset(), owner="me@desk")
        # A word that would reach further (another role, every role) reaches only as far as
        # a server-side grant: this owner has none.
        assert mem.scope("ops") == mem.scope("*") == Scope(roles=frozenset({"me"}))
