"""The `nooa-mcp` entry point (`nooa_mcp.__main__.main`) in process: a hook invocation the
light reader does not know still never fails the prompt, and every other command reaches the
click CLI with the garbage collector running again (`startup_gc`)."""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path

import anyio
import pytest

from nooa_mcp import Memory, __main__ as entry
from nooa_mcp.embeddings import HashEmbedder


def test_a_hook_with_an_option_it_does_not_know_exits_0_not_click_s_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This process is no hook: the watchdog that would end it at the hook's deadline stays off.
    monkeypatch.setattr("nooa_mcp.hooks.run.hard_deadline", lambda: None)
    monkeypatch.setattr("nooa_mcp.hooks.run.log", lambda event, message: None)
    argv = ["nooa-mcp", "--store", str(tmp_path / "s.sqlite"), "hook", "user-prompt", "--bogus"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as ended:
        entry.main()
    assert ended.value.code == 0  # click says 2 for a usage error: "block this prompt"


def test_a_command_reaches_the_cli_with_collection_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s.sqlite"

    async def one_memory() -> None:
        async with Memory.open(store, owner="", embedder=HashEmbedder()) as mem:
            await mem.author("The VPN gateway is vpn-2.")

    anyio.run(one_memory)  # the CLI runs its own event loop: none may be running here
    monkeypatch.setattr(sys, "argv", ["nooa-mcp", "--store", str(store), "--json", "stats"])
    try:
        with pytest.raises(SystemExit) as ended:
            entry.main()
        assert ended.value.code == 0
        assert gc.isenabled()
    finally:
        gc.enable()
    assert json.loads(capsys.readouterr().out)["total"] == 1
