"""The tool list generated ahead of time (nooa_mcp/mcp/catalog.py), so that a
stdio server answers its first calls before it has registered anything.

A stdio server answers `tools/list` from `nooa_mcp/mcp/tools.json` and registers its tools
when something first needs them. These tests keep the file equal to what registration lists,
and check that the deferral changes nothing a client can see except when the work happens.
"""

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from nooa_mcp.config import Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp import catalog, write_catalog
from nooa_mcp.mcp.memory_server import MemoryServer
from nooa_mcp.mcp.server import build_server

pytestmark = pytest.mark.anyio

REGENERATE = (
    "the tool list changed: run `python -m nooa_mcp.mcp.write_catalog` and commit tools.json"
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def server_for(tmp_path: Path, reflect: bool = True) -> MemoryServer:
    settings = Settings(store=tmp_path / "m.sqlite", owner="tester", reflect_tool=reflect)
    server = build_server(settings, embedder=HashEmbedder())
    assert isinstance(server, MemoryServer)
    return server


@pytest.mark.parametrize("reflect", [True, False])
async def test_the_generated_listing_is_what_registration_lists(
    tmp_path: Path, reflect: bool
) -> None:
    server = server_for(tmp_path, reflect)
    early = catalog.listed(await server.list_tools())
    assert server._tool_manager.list_tools() == [], "listing from the file registers nothing"
    server.register_handlers()
    assert len(server._tool_manager.list_tools()) == (7 if reflect else 6)
    assert early == catalog.listed(await server.list_tools()), REGENERATE


async def test_a_client_lists_then_calls_through_the_deferred_registration(
    tmp_path: Path,
) -> None:
    server = server_for(tmp_path)
    async with Client(server, cache=None) as client:
        listed = (await client.list_tools()).tools
        assert server._tool_manager.list_tools() == []
        stored = await client.call_tool("memory_author", {"content": "The deploy key rotates."})
        assert not stored.is_error, stored.content
        found = await client.call_tool("memory_recall", {"query": "deploy key"})
        assert found.structured_content["hits"][0]["id"] == stored.structured_content["id"]
        assert [t.name for t in (await client.list_tools()).tools] == [t.name for t in listed]


async def test_resources_and_prompts_register_the_handlers_first(tmp_path: Path) -> None:
    server = server_for(tmp_path)
    async with Client(server, cache=None) as client:
        prompts = (await client.list_prompts()).prompts
        assert "memory_guide" in {p.name for p in prompts}
        assert len(server._tool_manager.list_tools()) == 7


async def test_a_refused_argument_is_still_one_sentence_on_the_first_call(
    tmp_path: Path,
) -> None:
    async with Client(server_for(tmp_path), cache=None) as client:
        result = await client.call_tool("memory_recall", {"query": "x", "k": 500})
    assert result.is_error
    sentence = "k: must be at most 50; got 500. Pass a value that fits."
    assert result.content[0].text.endswith(sentence)


def test_an_unreadable_file_means_registering_at_once(tmp_path: Path) -> None:
    broken = tmp_path / "tools.json"
    broken.write_text('[{"name": ', encoding="utf-8")
    assert catalog.load(True, broken) is None
    assert catalog.load(True, tmp_path / "missing.json") is None
    calls: list[str] = []
    server = MemoryServer("x")
    server.register_later(lambda: calls.append("registered"), None)
    assert calls == ["registered"]
    server.register_handlers()
    assert calls == ["registered"], "registration runs once"


def test_the_file_lists_memory_reflect_only_when_it_is_on() -> None:
    names_on = [t.name for t in catalog.load(True) or []]
    names_off = [t.name for t in catalog.load(False) or []]
    assert "memory_reflect" in names_on and "memory_reflect" not in names_off
    assert [n for n in names_on if n != "memory_reflect"] == names_off
    entries = json.loads(catalog.CATALOG.read_text(encoding="utf-8"))
    assert all("$ref" not in json.dumps(e) and "$defs" not in json.dumps(e) for e in entries)


def test_the_handshake_imports_neither_numpy_nor_the_tools(tmp_path: Path) -> None:
    """What a client waits for after spawning the server: build it and list its tools."""
    script = (
        "import sys, anyio\n"
        "from nooa_mcp.config import Settings\n"
        "from nooa_mcp.mcp.server import build_server\n"
        f"s = build_server(Settings(store={str(tmp_path / 'm.sqlite')!r}), open_when_needed=True)\n"
        "tools = anyio.run(s.list_tools)\n"
        "heavy = ['numpy', 'nooa_mcp.mcp.tools', 'nooa_mcp.domain.replies', "
        "'nooa_mcp.domain.schema', 'nooa_mcp.embeddings', 'aiosqlite']\n"
        "print(len(tools), sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.split() == ["7", "[]"], out


async def test_the_writer_regenerates_the_committed_file(tmp_path: Path) -> None:
    written = tmp_path / "tools.json"
    entries = await anyio.to_thread.run_sync(write_catalog.write, written)
    assert written.read_text(encoding="utf-8") == catalog.CATALOG.read_text(encoding="utf-8"), (
        REGENERATE
    )
    assert len(entries) == 7


def test_what_the_model_reads_every_turn_stays_under_6_kib() -> None:
    """The README promises the tool list under 6 KB: names, descriptions and input schemas,
    as compact JSON. A word added to a description must be paid for by one taken out."""
    listed = json.loads((Path(catalog.__file__).parent / "tools.json").read_text())
    read = [{k: t[k] for k in ("name", "description", "inputSchema") if k in t} for t in listed]
    size = len(json.dumps(read, separators=(",", ":"), ensure_ascii=False).encode())
    assert 5_000 < size <= 6 * 1024, size
