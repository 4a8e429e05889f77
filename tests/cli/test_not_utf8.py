"""Bytes that are not UTF-8 in a command line (Python reads them as lone surrogates) are
refused naming the argument, and nothing is written.

Before: `author`, `recall` and `explain` ended in the model's TypeError traceback; a tag was
stored, and then `export` wrote a raw 0xff byte that `import` refuses, and `list --tag`
ended in a UnicodeEncodeError traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from writes_support import Cli, hash_cli

LONE = "argv \udcff"


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    return hash_cli(tmp_path, monkeypatch)


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["author", LONE], "TEXT"),
        (["author", "A clean note.", "--tag", LONE], "--tag"),
        (["recall", LONE], "QUERY"),
        (["explain", LONE], "QUERY"),
        (["list", "--tag", LONE], "tag"),
    ],
    ids=["author", "author-tag", "recall", "explain", "list-tag"],
)
def test_a_lone_surrogate_is_refused_naming_the_argument(cli: Cli, args, field) -> None:
    first = cli("author", "The first note.").output.split()[1]
    result = cli(*args)
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    (message,) = [line for line in result.output.splitlines() if line.strip()]
    assert message.startswith(f"Error: {field}: is not valid text"), message
    assert "lone surrogate" in message and message.endswith("Pass UTF-8 text.")
    assert [m["id"] for m in cli.json("list", "--json")["memories"]] == [first]
