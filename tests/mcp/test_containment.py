"""Containment: references stay inside the root; HTTP stays on loopback and behind tokens
(DESIGN.md §10, §11)."""

from __future__ import annotations

import inspect
import os
import socket
from pathlib import Path

import anyio
import httpx
import pytest
import uvicorn

from nooa_mcp import Memory, Settings
from nooa_mcp.cli import serve
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.errors import InvalidInput
from nooa_mcp.hosts import server_config
from nooa_mcp.mcp.server import build_server
from nooa_mcp.serving import run

pytestmark = pytest.mark.anyio

ESCAPES = [
    "file:../secret.txt",
    "file:docs/../../secret.txt",
    "file:/etc/passwd",
    "file://etc/passwd",
    "file:~/secret.txt",
    "file:docs\u2215..\u2215..\u2215secret.txt",  # division slash
    "file:docs\u2044..\u2044secret.txt",  # fraction slash
    "file:\uff0e\uff0e/secret.txt",  # fullwidth dots
    "file:\u2024\u2024/secret.txt",  # one-dot leaders
    "file:docs/..\\..\\secret.txt",
    "file:docs/%2e%2e/%2e%2e/secret.txt",
    "file:docs/\x00/../../secret.txt",
    "file:link-out/secret.txt",
    "file:link-file",
]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "notes.md").write_text("inside the root\n")
    (tmp_path / "secret.txt").write_text("TOPSECRET outside the root\n")
    os.symlink(tmp_path, root / "link-out")
    os.symlink(tmp_path / "secret.txt", root / "link-file")
    return root


@pytest.mark.parametrize("reference", ESCAPES)
async def test_a_reference_cannot_escape_the_root(tree: Path, reference: str) -> None:
    settings = Settings(store=tree.parent / "m.sqlite", owner="coder", reference_root=tree)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        with pytest.raises(InvalidInput) as refused:
            await mem.author("A note with a reference.", references=[reference])
    assert refused.value.field == "references"
    assert "TOPSECRET" not in str(refused.value)


async def test_a_file_swapped_for_a_symlink_after_capture_is_not_read(tree: Path) -> None:
    settings = Settings(store=tree.parent / "m.sqlite", owner="coder", reference_root=tree)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        written = await mem.author("See the notes.", references=["file:docs/notes.md"])
        (tree / "docs" / "notes.md").unlink()
        os.symlink(tree.parent / "secret.txt", tree / "docs" / "notes.md")
        recalled = await mem.recall("see the notes")
        view = await mem.get(written.id)
    assert "TOPSECRET" not in recalled.model_dump_json()
    assert "TOPSECRET" not in view.model_dump_json()


def test_http_binds_loopback_by_default() -> None:
    assert inspect.signature(run).parameters["host"].default == "127.0.0.1"
    host = next(p for p in serve.params if p.name == "host")
    assert host.default == "127.0.0.1"


def test_http_on_another_interface_without_tokens_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as refused:
        run(Settings(store=tmp_path / "m.sqlite"), transport="http", host="0.0.0.0")
    assert refused.value.field == "host"


async def test_http_refuses_missing_and_wrong_tokens_and_accepts_the_right_one(
    tmp_path: Path,
) -> None:
    right = "right-token-0123456789abcdef"
    tokens = {right: "coder@laptop"}
    settings = Settings(store=tmp_path / "m.sqlite")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    host, port = sock.getsockname()
    app = build_server(settings, embedder=HashEmbedder(), tokens=tokens).streamable_http_app(
        host="127.0.0.1"
    )
    userver = uvicorn.Server(server_config(app, log_level="warning", lifespan="on"))
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "containment-test", "version": "0"},
        },
    }
    headers = {"accept": "application/json, text/event-stream"}
    replies: list[httpx.Response] = []
    # No token, a wrong one, the right one cut by one character (a prefix is no match), the
    # right one.
    attempts = (None, "wrong-token-0123456789abcdef", right[:-1], right)
    async with anyio.create_task_group() as tg:
        tg.start_soon(userver.serve, [sock])
        async with httpx.AsyncClient() as http:
            for token in attempts:
                sent = dict(headers)
                if token:
                    sent["authorization"] = f"Bearer {token}"
                replies.append(
                    await http.post(f"http://{host}:{port}/mcp", json=body, headers=sent)
                )
        userver.should_exit = True
    assert [r.status_code for r in replies] == [401, 401, 401, 200]
    assert '"serverInfo"' in replies[-1].text and '"nooa-mcp"' in replies[-1].text
