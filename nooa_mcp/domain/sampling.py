"""What can go wrong when reflection asks the client's model (DESIGN.md §8.3).

Kept apart from `generative` (which needs numpy) so the MCP front end can name these errors
without loading the numeric stack before the handshake is answered.
"""

from __future__ import annotations

__all__ = ["MalformedReply", "SamplingUnavailable"]


class SamplingUnavailable(RuntimeError):
    """The client cannot (or will not) sample now; generative steps stop for this pass."""


class MalformedReply(ValueError):
    """The model's reply is not the JSON asked for; the item is skipped, the pass goes on."""
