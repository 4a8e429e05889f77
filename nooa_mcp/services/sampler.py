"""The Sampler contract: how generative reflection asks a language model (DESIGN.md §8.3).

The model is never ours: the MCP front end backs a Sampler with the connected client's own
model (`sampling/createMessage`), so no API key is needed anywhere.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["Sampler"]


class Sampler(Protocol):
    """Asks a language model for one completion."""

    async def __call__(self, *, system: str, prompt: str, max_tokens: int) -> str: ...
