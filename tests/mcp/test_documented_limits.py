"""The documented limits, at their edges, with the numbers written here (DESIGN §17.1, §13.4).

Each bound is stated as the design doc states it, never imported from the module it bounds: a
test that reads the limit from the code passes whatever the code says.
"""

from __future__ import annotations

import json
import math

import pytest
from mcp import Client

from nooa_mcp import Memory
from nooa_mcp.domain.replies import UpdateResult
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.errors import InvalidInput
from nooa_mcp.mcp.rendering import tool_result
from nooa_mcp.mcp.server import build_server

pytestmark = pytest.mark.anyio

#: DESIGN §17.1: content holds up to 100,000 characters.
MAX_CONTENT = 100_000
#: DESIGN §13.4: a reply's default budget and the cap no budget passes, in tokens.
REPLY_TOKENS, HARD_CAP_TOKENS = 8_000, 20_000


def tokens(text: str, chars_per_token: int) -> int:
    """DESIGN §13.4's count: ASCII at `chars_per_token` characters a token (prose 4, JSON 2),
    every other character a token of its own."""
    ascii_chars = len(text.encode("ascii", "ignore"))
    return math.ceil(ascii_chars / chars_per_token) + len(text) - ascii_chars


def text_of(n: int) -> str:
    """`n` characters of words, ending in a letter (nothing to strip)."""
    words = "".join(f"relay{i} " for i in range(n // 6 + 2))
    return words[: n - 1] + "x"


async def test_content_of_exactly_the_limit_is_stored_and_one_more_is_refused(mem: Memory) -> None:
    at_limit = text_of(MAX_CONTENT)
    assert len(at_limit) == 100_000
    written = await mem.author(at_limit)
    assert written.status == "created"
    assert (await mem.get(written.id)).content == at_limit
    with pytest.raises(InvalidInput) as refused:
        await mem.author(text_of(MAX_CONTENT + 1))
    assert str(refused.value).startswith("content: is 100001 characters; the limit is 100000.")
    assert len(await mem.list_memories()) == 1


async def test_over_mcp_the_limit_holds_and_the_refusal_names_the_field(settings) -> None:
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as client:
        ok = await client.call_tool("memory_author", {"content": text_of(100_000)})
        over = await client.call_tool("memory_author", {"content": text_of(100_001)})
    assert not ok.is_error, ok.content[0].text[:300]
    assert over.is_error
    assert "content" in over.content[0].text and "100000" in over.content[0].text


def _reply_tokens(reply) -> int:
    text = reply.content[0].text
    return tokens(text, 4) + tokens(json.dumps(reply.structured_content), 2)


PROSE = "The staging database restarts at midnight and the backups run after it. " * 8_000


def test_a_long_summary_fills_the_default_budget_of_8000_tokens_and_no_more() -> None:
    reply = tool_result(UpdateResult(id="0" * 32, changed=[]), PROSE)
    assert REPLY_TOKENS - 50 <= _reply_tokens(reply) <= REPLY_TOKENS
    assert reply.content[0].text.endswith(
        "[summary clipped; the structured result has every field]"
    )


def test_no_budget_a_caller_passes_lets_a_reply_past_20000_tokens() -> None:
    for budget in (HARD_CAP_TOKENS + 1, 10**7):
        reply = tool_result(UpdateResult(id="0" * 32, changed=[]), PROSE, budget_tokens=budget)
        assert HARD_CAP_TOKENS - 50 <= _reply_tokens(reply) <= HARD_CAP_TOKENS, budget
    # Under the cap, the caller's budget is the bound.
    reply = tool_result(UpdateResult(id="0" * 32, changed=[]), PROSE, budget_tokens=12_000)
    assert 12_000 - 50 <= _reply_tokens(reply) <= 12_000


def test_a_summary_that_fits_is_left_whole() -> None:
    text = "x" * (4 * (REPLY_TOKENS - 100))
    reply = tool_result(UpdateResult(id="0" * 32, changed=[]), text)
    assert reply.content[0].text == text
