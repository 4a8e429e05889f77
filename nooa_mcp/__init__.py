"""nooa-mcp: long-term memory for agents over MCP, on the NOOA memory model.

The public surface is small: open a `Memory` over a store file and call its verbs.

    async with Memory.open("memory.sqlite", owner="coder@laptop") as mem:
        await mem.author("The deploy key lives in 1Password", importance="HIGH")
        result = await mem.recall("where is the deploy key?")
"""

from .config import RecallSettings, Settings
from .domain.schema import Channel, EdgeType, MemoryType
from .errors import (
    AmbiguousId,
    InvalidInput,
    NooaError,
    NotFound,
    OwnerForbidden,
    ReferenceOutsideRoot,
    StoreTooNew,
)
from .memory import Memory

__all__ = [
    "AmbiguousId",
    "Channel",
    "EdgeType",
    "InvalidInput",
    "Memory",
    "MemoryType",
    "NooaError",
    "NotFound",
    "OwnerForbidden",
    "RecallSettings",
    "ReferenceOutsideRoot",
    "Settings",
    "StoreTooNew",
]
__version__ = "0.1.0"
