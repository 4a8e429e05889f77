"""`nooa-mcp ui`: the command people run, with the real model, and its refusals."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
from pathlib import Path

import anyio
import httpx
import pytest
from click.testing import CliRunner

from nooa_mcp import Memory
from nooa_mcp.cli import main

pytestmark = pytest.mark.anyio


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def store_path(store_path: Path) -> Path:
    """The store file, created empty: `ui` refuses a store that is not there."""
    from nooa_mcp.embeddings import HashEmbedder

    async def create() -> None:
        async with Memory.open(store_path, owner="", embedder=HashEmbedder()):
            pass

    anyio.run(create)
    return store_path


def test_ui_refuses_another_interface_without_tokens(store_path):
    result = invoke("--store", str(store_path), "ui", "--host", "0.0.0.0")
    assert result.exit_code == 1
    assert "0.0.0.0 is reachable from other machines" in result.output
    assert "Traceback" not in result.output


def test_ui_reports_a_busy_port_in_one_sentence(store_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        result = invoke("--store", str(store_path), "ui", "--port", str(port))
    assert result.exit_code == 1
    assert f"port: {port} on 127.0.0.1 is already in use" in result.output


@pytest.mark.parametrize(
    ("option", "refusal"),
    [
        ("--owner", "--owner and --tokens"),
        # Accepted and ignored before: no token read what --read granted.
        ("--read", "--read/NOOA_READ (bob) does not apply with --tokens"),
    ],
)
def test_ui_refuses_an_owner_or_a_read_grant_beside_a_tokens_file(
    store_path, tmp_path, option, refusal
):
    tokens = tmp_path / "tokens.json"
    tokens.write_text('{"%s": "alice@laptop"}' % ("t" * 32))
    result = invoke("--store", str(store_path), option, "bob", "ui", "--tokens", str(tokens))
    assert result.exit_code == 1
    assert refusal in result.output


@pytest.mark.real_model
async def test_ui_serves_the_store_and_ranks_with_the_real_model(store_path, minilm):
    async with Memory.open(store_path, owner="", embedder=minilm) as mem:
        keys = await mem.author("The production SSH keys are in the team vault")
        await mem.author("Lunch orders are due by 11am on Fridays")
        await mem.author("The staging cluster has three worker nodes")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    beside = Path(sys.executable).parent / "nooa-mcp"
    program = str(beside) if beside.exists() else shutil.which("nooa-mcp")
    assert program, "the nooa-mcp command is not installed (pip install -e .)"
    command = [program, "--store", str(store_path), "ui", "--port", "0"]
    async with await anyio.open_process(command, env=env) as process:
        try:
            line = b""
            with anyio.fail_after(60):
                while not line.endswith(b"\n"):
                    line += await process.stdout.receive(1)
            announced = line.decode()
            url = announced.split(" on ", 1)[1].split(" ", 1)[0]
            assert url.startswith("http://127.0.0.1:") and "owner (shared)" in announced
            # The first search may wait for the model to load (up to `model_wait_seconds`,
            # 10 s): the client waits longer than that.
            async with httpx.AsyncClient(base_url=url.rstrip("/"), timeout=30) as http:
                page = await http.get(
                    "/", params={"q": "where do we keep credentials for prod servers?"}
                )
                stats = await http.get("/stats")
            process.send_signal(signal.SIGINT)
            with anyio.fail_after(30):
                code = await process.wait()
        finally:
            if process.returncode is None:
                process.kill()  # a failed test must not leave the server running
    assert page.status_code == 200 and "keyword matches only" not in page.text
    first = page.text.index('data-rank="1"')
    assert page.text.rfind('data-id="', 0, first) == page.text.rfind(
        f'data-id="{keys.id}"', 0, first
    )
    assert "3</span> live memories" in stats.text
    assert code == 0
