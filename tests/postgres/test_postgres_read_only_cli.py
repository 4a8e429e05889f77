"""A command that only reads, pointed at a PostgreSQL schema that holds no store, is refused
naming it, and leaves no schema behind: opening the store creates a missing schema, so a
mistyped schema name in --store silently made a new, empty store (a mistyped file name has
long been refused the same way)."""

from __future__ import annotations

import anyio
import psycopg
import pytest
from click.testing import CliRunner

from nooa_mcp import Memory, cli
from nooa_mcp.embeddings import HashEmbedder


def _schema_exists(url: str) -> bool:
    schema = url.rsplit("%3D", 1)[1]
    with psycopg.connect(url, autocommit=True) as conn:  # any search_path will do
        row = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    return row is not None


@pytest.mark.parametrize("command", [["list"], ["stats"], ["recall", "anything"]])
def test_a_read_of_a_schema_with_no_store_is_refused_and_creates_nothing(
    postgres: str, command: list[str]
) -> None:
    out = CliRunner().invoke(cli.main, ["--store", postgres, *command])
    assert out.exit_code == 1
    schema = postgres.rsplit("%3D", 1)[1]
    assert "No store at postgresql://" in out.output and f"schema {schema}:" in out.output
    assert "Traceback" not in out.output
    assert not _schema_exists(postgres)


def test_a_read_of_a_schema_holding_a_store_goes_on(postgres: str) -> None:
    async def write() -> None:
        async with Memory.open(postgres, owner="", embedder=HashEmbedder()) as mem:
            await mem.author("The staging database is db-7")

    anyio.run(write)
    out = CliRunner().invoke(cli.main, ["--store", postgres, "list"])
    assert out.exit_code == 0, out.output
    assert "The staging database is db-7" in out.output


def test_the_console_refuses_a_schema_with_no_store_and_creates_nothing(
    postgres: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def served(settings: object, **_: object) -> None:
        # Served, the console opens (creates) the schema and runs until killed: stand in.
        async with Memory.open(postgres, owner="", embedder=HashEmbedder()):
            pass

    monkeypatch.setattr("nooa_mcp.console.serve.serve", served)
    out = CliRunner().invoke(cli.main, ["--store", postgres, "ui", "--port", "0"])
    assert out.exit_code == 1, out.output
    schema = postgres.rsplit("%3D", 1)[1]
    assert "No store at postgresql://" in out.output and f"schema {schema}:" in out.output
    assert "the console opens an existing store" in out.output
    assert "nooa-mcp author` creates a store" in out.output
    assert "Traceback" not in out.output
    assert not _schema_exists(postgres)
