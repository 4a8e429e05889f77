"""Shared fixtures: a fresh store file per test, a fast deterministic embedder, the real one."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
from suite_marks import needed_marks

from nooa_mcp import Memory, Settings, startup_gc
from nooa_mcp.embeddings import HashEmbedder, MiniLMEmbedder


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def collector_restored() -> Iterator[None]:
    """The collector as it was, for a test that pauses it as a server's start does
    (`nooa_mcp.startup_gc`): resumed, unfrozen, enabled or not as before."""
    was = gc.isenabled()
    yield
    startup_gc.resume()
    gc.unfreeze()
    if was:
        gc.enable()
    else:
        gc.disable()


@pytest.fixture
def store_path(tmp_path):
    return tmp_path / "memory.sqlite"


@pytest.fixture
def settings(store_path) -> Settings:
    return Settings(store=store_path, owner="coder@laptop")


@pytest.fixture
def embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture
async def mem(settings, embedder):
    async with Memory.open(settings=settings, embedder=embedder) as m:
        yield m


@pytest.fixture
async def rooted(tmp_path, root):
    """A store whose references resolve under `root` (each module defines its own root)."""
    settings = Settings(store=tmp_path / "m.sqlite", owner="coder@laptop", reference_root=root)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        yield mem


@pytest.fixture(scope="session")
def minilm() -> MiniLMEmbedder:
    """The real bundled model, loaded once per test session (offline)."""
    return MiniLMEmbedder()


# --------------------------------------------------------------------------- PostgreSQL
# The Postgres tests run against NOOA_TEST_POSTGRES (default: the local cluster, trust auth,
# database `test`), each in a fresh schema dropped afterwards. Without a reachable server they
# skip and the summary says why; NOOA_REQUIRE_POSTGRES=1 (CI) turns that skip into a failure.

PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"
_pg_state: dict[str, str | None] = {}


def pg_base_url() -> str:
    return os.environ.get("NOOA_TEST_POSTGRES", PG_DEFAULT)


def _pg_unreachable() -> str | None:
    """Why the test PostgreSQL cannot be used, or None when it can (checked once per run)."""
    if "reason" not in _pg_state:
        try:
            import psycopg

            with psycopg.connect(pg_base_url(), connect_timeout=3, autocommit=True) as conn:
                conn.execute("SELECT 1")
            _pg_state["reason"] = None
        except ImportError:
            _pg_state["reason"] = "psycopg is not installed (pip install -e '.[test]')"
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            _pg_state["reason"] = f"no PostgreSQL at {pg_base_url()} ({first})"
    return _pg_state["reason"]


def require_postgres() -> None:
    """Skip (or, with NOOA_REQUIRE_POSTGRES=1, fail) when the test PostgreSQL is unreachable."""
    reason = _pg_unreachable()
    if reason is None:
        return
    if os.environ.get("NOOA_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"NOOA_REQUIRE_POSTGRES=1 but {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL tests skipped: {reason}")


def pg_schema_url(schema: str) -> str:
    """The test server's URL with `schema` as the store's schema (libpq options)."""
    sep = "&" if "?" in pg_base_url() else "?"
    return f"{pg_base_url()}{sep}options=-csearch_path%3D{schema}"


def drop_pg_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(pg_base_url(), autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def postgres():
    """A store URL on a fresh, empty schema of the test PostgreSQL, dropped after the test."""
    require_postgres()
    import uuid

    schema = f"nooa_test_{uuid.uuid4().hex[:12]}"
    try:
        yield pg_schema_url(schema)
    finally:
        drop_pg_schema(schema)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_target(request, tmp_path):
    """A store location on each backend: a fresh SQLite file, a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        return tmp_path / "memory.sqlite"
    return request.getfixturevalue("postgres")


@pytest.fixture
async def store(store_target):
    """An open store on each backend (`store_target`), closed after the test."""
    from nooa_mcp.storage import open_store

    s = await open_store(store_target)
    try:
        yield s
    finally:
        await s.close()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    reason = _pg_state.get("reason")
    if reason:
        terminalreporter.write_line(f"PostgreSQL tests were skipped: {reason}.", yellow=True)


# --------------------------------------------------------------------------- markers
# One command runs every test; `-m` picks a suite or leaves one out (tests/suite_marks.py says
# which test gets which marker; pyproject.toml declares them).


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        present = {mark.name for mark in item.iter_markers()}
        for name in sorted(needed_marks(item) - present):
            item.add_marker(name)
