"""A forget keeps the words a revive brings back: no new text in the call that forgets.

`memory_update(forget=true, content="…")` rewrote the content and archived it in one
transaction: the user's text was gone from the row, the tombstone and the file, and a revive
brought back the new words (an auditor's find; the tool has no reason field, so a model put
its reason in `content`). On SQLite and PostgreSQL, through the tool.
"""

from __future__ import annotations

import pytest
from mcp import Client

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp.server import build_server

pytestmark = pytest.mark.anyio

WORDS = "The staging database host is db-stage-3.internal"


@pytest.mark.parametrize("field", ["content", "title"])
async def test_a_forget_with_new_words_is_refused_and_changes_nothing(store_target, field):
    settings = Settings(store=store_target, owner="alice")
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        memory_id = (await mem.author(WORDS, title="Staging host")).id
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as client:
        reply = await client.call_tool(
            "memory_update", {"memory_id": memory_id, "forget": True, field: "both at once"}
        )
        assert reply.is_error
        text = reply.content[0].text
        assert f"{field}: cannot be changed in the call that forgets" in text, text
        assert "Send forget alone" in text
        alone = await client.call_tool("memory_update", {"memory_id": memory_id, "forget": True})
        assert not alone.is_error
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        view = await mem.get(memory_id)
        assert (view.content, view.title, view.archived) == (WORDS, "Staging host", True)
        revived = await mem.revive(memory_id)
        assert revived.id == memory_id
        assert (await mem.get(memory_id)).content == WORDS
