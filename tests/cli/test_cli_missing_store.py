"""A command that only reads refuses a store file that is not there, naming it: a mistyped
--store must not create folders and an empty store and then answer "nothing stored"."""

import subprocess
from pathlib import Path

import pytest
from writes_support import Cli, console_script, hash_cli

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
