"""MCP sampling as a `Sampler`: reflection asks the connected client's own model (DESIGN.md §8.3).

Front-end tier (it speaks MCP). The server builds one per request from the request's session
when the client declared the sampling capability and generative reflection is switched on; no
API key is involved anywhere.
"""

from __future__ import annotations

import warnings
from typing import Any

from mcp import MCPDeprecationWarning, MCPError, types

from ..domain.sampling import MalformedReply, SamplingUnavailable
from ..services.sampler import Sampler

__all__ = ["session_sampler"]


def session_sampler(session: Any, *, temperature: float = 0.2) -> Sampler | None:
    """A Sampler over `session.create_message`, or None when the client cannot sample.

    Failures of the client (refusal, no back-channel on this transport, an error reply) raise
    `SamplingUnavailable`, which ends the generative steps of the pass and nothing else.
    """
    wanted = types.ClientCapabilities(sampling=types.SamplingCapability())
    if not session.check_client_capability(wanted):
        return None

    async def sample(*, system: str, prompt: str, max_tokens: int) -> str:
        message = types.SamplingMessage(
            role="user", content=types.TextContent(type="text", text=prompt)
        )
        # sampling/createMessage is deprecated in the 2026-07-28 protocol but is what clients
        # on the handshake protocol (every desktop client today) implement.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            try:
                result = await session.create_message(
                    [message], max_tokens=max_tokens, system_prompt=system, temperature=temperature
                )
            except MCPError as exc:
                raise SamplingUnavailable(f"the client did not sample ({exc})") from None
        blocks = result.content if isinstance(result.content, list) else [result.content]
        texts = [b.text for b in blocks if getattr(b, "type", None) == "text"]
        if not texts:
            raise MalformedReply("the client's model returned no text")
        return "\n".join(texts)

    return sample
