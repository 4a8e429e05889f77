"""A command that only reads refuses a store file that is not there, naming it: a mistyped
--store must not create folders and an empty store and then answer "nothing stored"."""

import subprocess
from pathlib import Path

import anyio
import pytest
from writes_support import Cli, console_script, hash_cli

from nooa_mcp.cli import undone_if_refused
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.memory import Memory
from nooa_mcp.storage import file_holds_memories

READ_ONLY = [
    ["recall", "hi"],
    ["explain", "hi"],
    ["explain", "--id", "deadbeef"],
    ["stats"],
    ["stats", "--json"],
    ["export"],
    ["list"],
]


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    return hash_cli(tmp_path, monkeypatch)


@pytest.mark.parametrize("command", READ_ONLY, ids=" ".join)
def test_a_read_only_command_refuses_a_missing_store_and_creates_nothing(
    cli: Cli, tmp_path: Path, command: list[str]
) -> None:
    typo = tmp_path / "typo" / "a" / "x.sqlite"
    out = cli("--store", str(typo), *command)
    assert out.exit_code == 1
    assert f"No store at {typo}" in out.output and "--store" in out.output
    assert "Traceback" not in out.output
    assert not (tmp_path / "typo").exists()


def test_a_write_creates_the_store_then_reads_work(cli: Cli, tmp_path: Path) -> None:
    new = tmp_path / "new" / "memory.sqlite"
    assert cli("--store", str(new), "author", "The staging cluster has three nodes").exit_code == 0
    assert new.exists()
    out = cli("--store", str(new), "recall", "staging cluster")
    assert out.exit_code == 0 and "three nodes" in out.output


@pytest.mark.parametrize("command", [["recall", "hi"], ["ui", "--port", "0"]], ids=" ".join)
def test_the_installed_command_refuses_a_typo_in_one_sentence(
    tmp_path: Path, command: list[str]
) -> None:
    typo = tmp_path / "typo" / "x.sqlite"
    # A console that served the typo would run until killed: the timeout fails the test.
    done = subprocess.run(
        [console_script(), "--store", str(typo), *command],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "HOME": str(tmp_path)},
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith(f"Error: No store at {typo}:")
    assert len(done.stderr.strip().splitlines()) == 1
    assert not typo.parent.exists()


REFUSED_WRITES = [
    (["author", ""], "TEXT: is empty"),
    (["author", "Deploys go out on Tuesdays", "--link", "abcdef12:refines"], "--link"),
    (["import", "{old}"], "needs a reference root"),
]


@pytest.mark.parametrize(("command", "said"), REFUSED_WRITES, ids=lambda c: str(c)[:30])
def test_a_write_refused_after_it_opened_a_new_store_leaves_no_store_and_no_folders(
    cli: Cli, tmp_path: Path, command: list[str], said: str
) -> None:
    # An export of before references carried their snapshot: a plain file: uri is captured
    # on import, which needs a reference root this command has not got.
    old = tmp_path / "old.jsonl"
    old.write_text('{"content": "See the notes", "references": ["file:notes.txt"]}\n')
    new = tmp_path / "fresh" / "deeper" / "memory.sqlite"
    out = cli("--store", str(new), *[part.format(old=old) for part in command])
    assert out.exit_code == 1 and said in out.output and "Traceback" not in out.output
    assert not (tmp_path / "fresh").exists()


def test_a_failure_after_a_new_store_took_a_memory_keeps_the_store(tmp_path: Path) -> None:
    """What a user wrote is never deleted: only a store that holds no memory is undone."""
    new = tmp_path / "fresh" / "memory.sqlite"

    async def write_then_fail() -> None:
        with undone_if_refused(new):
            async with Memory.open(new, embedder=HashEmbedder()) as mem:
                await mem.author("Deploys go out on Tuesdays")
            raise RuntimeError("the reply could not be printed")

    with pytest.raises(RuntimeError):
        anyio.run(write_then_fail)
    assert new.exists() and file_holds_memories(new)


def test_a_new_store_another_process_has_open_is_never_undone(tmp_path: Path) -> None:
    """A server that opened the same new store at the same moment may write into it next:
    deleting the file under it would lose what it writes. Its open connection keeps it."""
    new = tmp_path / "fresh" / "memory.sqlite"

    async def refused_beside_a_server() -> None:
        server = Memory.open(new, embedder=HashEmbedder())
        with pytest.raises(RuntimeError), undone_if_refused(new):
            async with Memory.open(new, embedder=HashEmbedder()):
                mem = await server.__aenter__()  # the server opens it too
            raise RuntimeError("TEXT: is empty.")
        await mem.author("Written by the server after the refusal")
        await server.__aexit__(None, None, None)

    anyio.run(refused_beside_a_server)
    assert file_holds_memories(new)


@pytest.mark.parametrize("command", [["author", "hi"], ["import", "ONE"]], ids=" ".join)
def test_a_store_in_a_read_only_folder_is_refused_in_one_sentence(
    tmp_path: Path, command: list[str]
) -> None:
    """Through the real process: after the sentence came two tracebacks from aiosqlite's
    thread reporting into the closed event loop (auditor). Root writes through a folder's
    mode, so it runs without that capability (as any other user would)."""
    import os
    import shutil

    from shared_support import process_env

    folder = tmp_path / "ro"
    folder.mkdir()
    (tmp_path / "one.jsonl").write_text('{"content": "A line."}\n')
    folder.chmod(0o555)
    args = [a.replace("ONE", str(tmp_path / "one.jsonl")) for a in command]
    argv = [console_script(), "--store", str(folder / "x.sqlite"), *args]
    if os.geteuid() == 0:
        assert shutil.which("setpriv"), "util-linux's setpriv drops root's override"
        caps = "-dac_override,-dac_read_search"
        argv = ["setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}", *argv]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, env=process_env(), timeout=60)
    finally:
        folder.chmod(0o755)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"Error: {folder / 'x.sqlite'}: cannot be created (its folder is read-only). "
        "Pick a writable folder."
    ]
    assert list(folder.iterdir()) == []
