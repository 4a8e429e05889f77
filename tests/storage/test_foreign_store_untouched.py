"""Another application's SQLite file is refused before anything changes in it, even when it
has a table called `memories` (through the CLI and a stdio server).

Before: a notes app's database with a `memories` table passed the first look, was switched to
WAL (bytes 18–19 of its header went from 01 01 to 02 02) and only then refused, with
"failed: table memories already exists".
"""

from __future__ import annotations

import hashlib
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from mcp import Client
from shared_support import cli, error_lines, exited_cleanly, stdio_params

from nooa_mcp import Settings

pytestmark = pytest.mark.anyio


def _notes_app(tmp_path: Path, version: int = 0) -> tuple[Path, str]:
    path = tmp_path / "notes.sqlite"
    with closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE memories (id INTEGER PRIMARY KEY, note TEXT, day TEXT)")
        db.execute("INSERT INTO memories (note, day) VALUES ('Dinner with Ada', '2026-03-01')")
        db.execute(f"PRAGMA user_version = {version}")
        db.commit()
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def _untouched(tmp_path: Path, path: Path, digest: str) -> None:
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert path.read_bytes()[18:20] == b"\x01\x01"  # still a rollback-journal database
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.sqlite"]  # no -wal, no -shm


@pytest.mark.parametrize("version", [0, 3])
def test_a_notes_apps_memories_table_is_refused_by_the_cli_and_left_byte_for_byte(
    tmp_path: Path, version: int
) -> None:
    path, digest = _notes_app(tmp_path, version)
    result = cli(["--store", str(path), "--owner", "alice", "stats"])
    assert result.exit_code == 1 and exited_cleanly(result), repr(result.exception)
    (line,) = error_lines(result)
    assert "notes.sqlite" in line and "another application's database" in line, line
    write = cli(["--store", str(path), "--owner", "alice", "author", "A fact for the wrong file."])
    assert write.exit_code == 1
    _untouched(tmp_path, path, digest)


async def test_a_stdio_server_on_a_notes_apps_file_refuses_a_call_and_leaves_it(
    tmp_path: Path,
) -> None:
    path, digest = _notes_app(tmp_path)
    async with Client(stdio_params(Settings(store=path, owner="alice")), cache=None) as client:
        result = await client.call_tool("memory_recall", {"query": "dinner"})
    assert result.is_error and "another application's database" in result.content[0].text
    _untouched(tmp_path, path, digest)
