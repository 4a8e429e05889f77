"""Refusals name their field and their fix; the other-roles hint counts live memories only.
Each case was a line a changed value went through unnoticed."""

from __future__ import annotations

from pathlib import Path

import pytest

from nooa_mcp import InvalidInput, Memory
from nooa_mcp.embeddings import HashEmbedder

pytestmark = pytest.mark.anyio


async def test_an_id_that_is_not_text_is_refused_naming_memory_id(tmp_path: Path) -> None:
    async with Memory.open(tmp_path / "s.sqlite", owner="me", embedder=HashEmbedder()) as mem:
        with pytest.raises(InvalidInput) as refused:
            await mem.get(5)  # type: ignore[arg-type]
        assert str(refused.value) == "memory_id: 5 is not an id. Pass an id or 8-char prefix."


async def test_a_memory_linked_to_itself_is_refused_naming_links_target(tmp_path: Path) -> None:
    async with Memory.open(tmp_path / "s.sqlite", owner="me", embedder=HashEmbedder()) as mem:
        memory_id = (await mem.author("The VPN is vpn-2.")).id
        with pytest.raises(InvalidInput) as refused:
            await mem.update(memory_id, links=[{"target": memory_id, "relation": "related"}])
        assert str(refused.value).startswith("links.target: a memory cannot link to itself.")


async def test_an_intent_without_content_is_refused_with_what_to_write(tmp_path: Path) -> None:
    async with Memory.open(tmp_path / "s.sqlite", owner="me", embedder=HashEmbedder()) as mem:
        with pytest.raises(InvalidInput) as refused:
            await mem.intent("add", content="   ", cue="deploy")
        assert str(refused.value).startswith("content: is empty.")
        assert "Say what to do when it fires." in str(refused.value)


async def test_other_roles_are_named_when_every_memory_of_mine_is_archived(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    async with Memory.open(store, owner="ops@desk", embedder=HashEmbedder()) as ops:
        await ops.author("Pager rota is in the wiki.")
    async with Memory.open(store, owner="me@code", embedder=HashEmbedder()) as mem:
        mine = (await mem.author("Deploys go out on Tuesdays.")).id
        assert await mem.other_roles() == {}
        await mem.forget(mine)
        assert await mem.other_roles() == {"ops": 1}


async def test_a_prompt_gets_the_memory_it_is_about_and_not_an_unrelated_one(
    tmp_path: Path,
) -> None:
    async with Memory.open(tmp_path / "s.sqlite", owner="me", embedder=HashEmbedder()) as mem:
        about = (await mem.author("The staging database password rotates every Monday.")).id
        await mem.author("Lunch orders close at eleven on Fridays.")
        injected = await mem.inject_for_prompt("when does the staging database password rotate")
    assert [item[0] for item in injected.memories] == [about]


async def test_an_id_that_is_not_hex_a_validity_that_ends_before_it_starts_and_a_todo_without_id(
    tmp_path: Path,
) -> None:
    async with Memory.open(tmp_path / "s.sqlite", owner="me", embedder=HashEmbedder()) as mem:
        memory_id = (await mem.author("The VPN is vpn-2.", valid_from="2026-06-01T00:00:00Z")).id
        said = []
        for refused_call in (
            lambda: mem.get("zz!zz!zz"),
            lambda: mem.update(memory_id, valid_to="2026-01-01T00:00:00Z"),
            lambda: mem.todo("done"),
        ):
            with pytest.raises(InvalidInput) as refused:
                await refused_call()
            said.append(str(refused.value))
    assert said == [
        "memory_id: 'zz!zz!zz' is not a memory id. Ids are hex, e.g. '3f9a2c1d'.",
        "valid_to: is before valid_from. Pass a later date.",
        "memory_id: is missing. Pass the id of the todo to mark done (action=list shows the ids).",
    ]
