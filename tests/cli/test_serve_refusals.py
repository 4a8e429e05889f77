"""`nooa-mcp serve` refuses what it cannot serve before it binds or opens anything, one sentence
each (run here in process, beside the server processes other tests start)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nooa_mcp import InvalidInput
from nooa_mcp.config import Settings
from nooa_mcp.hosts import bind
from nooa_mcp.serving import run


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"alpha-token-0123456789abcdef": "alice"}))
    return path


def refusal(tmp_path: Path, **options) -> str:
    settings = Settings(store=tmp_path / "m.sqlite", **options.pop("settings", {}))
    with pytest.raises(InvalidInput) as refused:
        run(settings, **options)
    assert not (tmp_path / "m.sqlite").exists()  # refused before the store was opened
    return str(refused.value)


def test_tokens_with_stdio(tmp_path: Path, tokens: Path) -> None:
    assert refusal(tmp_path, tokens_file=tokens).startswith(
        "tokens: --tokens only applies to --transport http"
    )


def test_an_unknown_transport(tmp_path: Path) -> None:
    assert refusal(tmp_path, transport="sse") == (
        "transport: 'sse' is not a transport. Use stdio or http."
    )


def test_an_owner_beside_a_tokens_file(tmp_path: Path, tokens: Path) -> None:
    said = refusal(tmp_path, transport="http", tokens_file=tokens, settings={"owner": "bob"})
    assert said.startswith(f"owner: --owner/NOOA_OWNER (bob) and --tokens ({tokens}) both say")


def test_a_read_grant_beside_a_tokens_file(tmp_path: Path, tokens: Path) -> None:
    # It was accepted and ignored: an operator who granted every token a role by --read saw
    # nothing refused and no token reading it.
    said = refusal(tmp_path, transport="http", tokens_file=tokens, settings={"read": ["bob"]})
    assert said.startswith(f"read: --read/NOOA_READ (bob) does not apply with --tokens ({tokens})")


def test_another_machines_reach_without_tokens(tmp_path: Path) -> None:
    assert refusal(tmp_path, transport="http", host="0.0.0.0", port=0).startswith(
        "host: 0.0.0.0 is reachable from other machines and no tokens file is configured."
    )


def test_a_port_in_use(tmp_path: Path) -> None:
    taken = bind("127.0.0.1", 0)
    try:
        port = taken.getsockname()[1]
        said = refusal(tmp_path, transport="http", port=port)
    finally:
        taken.close()
    assert said.startswith(f"port: {port} on 127.0.0.1 is already in use")
