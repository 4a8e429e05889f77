"""Shared fixtures: a fresh store file per test, a fast deterministic embedder, the real one."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder, MiniLMEmbedder


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


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


@pytest.fixture(scope="session")
def minilm() -> MiniLMEmbedder:
    """The real bundled model, loaded once per test session (offline)."""
    return MiniLMEmbedder()
