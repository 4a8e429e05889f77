"""The MCP server end to end on PostgreSQL: tests/mcp/test_server.py's tests, on a fresh schema.

Every test of test_server.py that takes only the `client` or `settings` fixture runs here
again, with the store on PostgreSQL instead of a SQLite file (the lifespan, tools, resources,
prompts and notifications are the same; only `--store` differs).
"""

from __future__ import annotations

import inspect

import pytest
import test_server
from mcp import Client

from nooa_mcp.config import Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp.server import build_server

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def settings(postgres: str) -> Settings:
    return Settings(store=postgres, owner="tester")


@pytest.fixture
async def client(settings: Settings):
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as c:
        yield c


#: Not about the store: it waits ~15 s for a model that is still loading, on any backend.
_NOT_STORE = {"test_recall_answers_while_the_model_loads_and_says_so"}


def _server_tests() -> dict[str, object]:
    out = {}
    for name, fn in vars(test_server).items():
        if not name.startswith("test_") or name in _NOT_STORE or not inspect.isfunction(fn):
            continue
        if set(inspect.signature(fn).parameters) <= {"client", "settings"}:
            out[name] = fn
    return out


globals().update(_server_tests())
