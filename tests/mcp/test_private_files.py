"""The server's own files under the reference root: a `file:` reference never reads the tokens
file or the store (and the files SQLite keeps beside it), by any name (DESIGN.md §11)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from nooa_mcp import Memory, Settings, serving
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.errors import InvalidInput

pytestmark = pytest.mark.anyio

TOKEN = "tok-SECRET-0123456789abcdef"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "shared"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "notes.md").write_text("inside the root\n")
    (root / "tokens.json").write_text(f'{{"{TOKEN}": "alice@a"}}\n')
    os.symlink(root / "tokens.json", root / "docs" / "link-to-tokens")
    os.link(root / "tokens.json", root / "docs" / "hard-tokens")
    return root


def _settings(tree: Path) -> Settings:
    return Settings(
        store=tree / "m.sqlite",
        owner="bob@b",
        reference_root=tree,
        private_files=[tree / "tokens.json"],
    )


@pytest.mark.parametrize(
    "reference",
    [
        "file:tokens.json",
        "file:docs/link-to-tokens",
        "file:docs/hard-tokens",
        "file:m.sqlite",
        "file:m.sqlite-wal",
        "file:m.sqlite-shm",
    ],
)
async def test_a_reference_to_the_servers_own_files_is_refused(tree: Path, reference: str):
    async with Memory.open(settings=_settings(tree), embedder=HashEmbedder()) as mem:
        await mem.author("a first write makes the store's -wal and -shm files")
        with pytest.raises(InvalidInput) as refused:
            await mem.author("A note with a reference.", references=[reference])
        listed = await mem.list_memories()
    assert refused.value.field == "references"
    assert "this server's own files" in str(refused.value)
    assert TOKEN not in str(refused.value)
    assert len(listed) == 1  # the first write only: nothing half-written


async def test_a_file_swapped_for_a_link_to_the_tokens_file_is_not_read(tree: Path):
    async with Memory.open(settings=_settings(tree), embedder=HashEmbedder()) as mem:
        written = await mem.author("See the notes.", references=["file:docs/notes.md"])
        (tree / "docs" / "notes.md").unlink()
        os.symlink(tree / "tokens.json", tree / "docs" / "notes.md")
        view = await mem.get(written.id)
    (ref,) = view.references
    assert ref.state == "DANGLING"
    assert TOKEN not in view.model_dump_json()


async def test_a_snapshot_of_the_tokens_file_taken_without_the_rule_is_never_shown(tree: Path):
    """A stdio server or the CLI knows no tokens file: a reference it captured holds the
    file's first bytes. The server that does know it shows neither the file nor that copy."""
    unaware = _settings(tree).model_copy(update={"private_files": []})
    async with Memory.open(settings=unaware, embedder=HashEmbedder()) as mem:
        written = await mem.author("Auth notes.", references=["file:tokens.json"])
        assert TOKEN in (await mem.get(written.id)).references[0].value
    async with Memory.open(settings=_settings(tree), embedder=HashEmbedder()) as mem:
        view = await mem.get(written.id)
        recalled = await mem.recall("auth notes")
    (ref,) = view.references
    assert (ref.state, ref.value, ref.snapshot_at) == ("DANGLING", "", None)
    assert TOKEN not in view.model_dump_json()
    assert TOKEN not in recalled.model_dump_json()


async def test_a_store_opened_through_a_link_keeps_its_journal_files_private(tree: Path):
    """SQLite writes -wal and -shm beside the real file, not beside the link it was opened by."""
    (tree / "data").mkdir()
    elsewhere = tree.parent / "elsewhere"
    elsewhere.mkdir()
    async with Memory.open(
        tree / "data" / "real.sqlite", owner="bob@b", embedder=HashEmbedder()
    ) as mem:
        await mem.author("a first write")
    os.symlink(tree / "data" / "real.sqlite", elsewhere / "link.sqlite")
    settings = _settings(tree).model_copy(update={"store": elsewhere / "link.sqlite"})
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        await mem.author("a second write keeps the -wal there")
        assert (tree / "data" / "real.sqlite-wal").exists()
        for name in ("real.sqlite", "real.sqlite-wal", "real.sqlite-shm"):
            with pytest.raises(InvalidInput, match="this server's own files"):
                await mem.author("See it.", references=[f"file:data/{name}"])


async def test_an_ordinary_file_beside_them_is_still_read(tree: Path):
    async with Memory.open(settings=_settings(tree), embedder=HashEmbedder()) as mem:
        written = await mem.author("See the notes.", references=["file:docs/notes.md"])
        view = await mem.get(written.id)
    assert [(r.state, r.value) for r in view.references] == [("LIVE", "inside the root\n")]


def test_an_http_server_counts_its_tokens_file_among_its_own(tree: Path, monkeypatch):
    seen: list[Settings] = []

    class Stop(Exception):
        pass

    def fake_build(settings: Settings, **_: object) -> None:
        seen.append(settings)
        raise Stop

    sock = socket.socket()
    monkeypatch.setattr(serving, "bind", lambda host, port: sock)
    monkeypatch.setattr(serving, "build_http_server", fake_build)
    with sock, pytest.raises(Stop):
        serving.run(
            Settings(store=tree / "m.sqlite", reference_root=tree),
            transport="http",
            port=0,
            tokens_file=tree / "tokens.json",
        )
    assert seen[0].private_files == [tree / "tokens.json"]
