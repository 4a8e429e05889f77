"""nooa-mcp: long-term memory for agents over MCP, on the NOOA memory model.

The public surface is small: open a `Memory` over a store file and call its verbs.

    async with Memory.open("memory.sqlite", owner="coder@laptop") as mem:
        await mem.author("The deploy key lives in 1Password", importance="HIGH")
        result = await mem.recall("where is the deploy key?")

The names below are imported on first use (PEP 562): a Claude Code hook runs before every
prompt in a fresh process, and importing the facade (pydantic models, numpy, the store) would
cost it more than its whole time budget. `from nooa_mcp import Memory` works as before.
"""

from __future__ import annotations

import importlib
import typing

if typing.TYPE_CHECKING:  # what `__getattr__` loads on first use, as the type checker sees it
    from .config import RecallSettings as RecallSettings, Settings as Settings
    from .domain.schema import (
        Channel as Channel,
        EdgeType as EdgeType,
        MemoryType as MemoryType,
    )
    from .errors import (
        AmbiguousId as AmbiguousId,
        InvalidInput as InvalidInput,
        NooaError as NooaError,
        NotFound as NotFound,
        OwnerForbidden as OwnerForbidden,
        ReferenceOutsideRoot as ReferenceOutsideRoot,
        StoreTooNew as StoreTooNew,
    )
    from .memory import Memory as Memory

#: Public name → the module that defines it.
_EXPORTS = {
    "AmbiguousId": ".errors",
    "Channel": ".domain.schema",
    "EdgeType": ".domain.schema",
    "InvalidInput": ".errors",
    "Memory": ".memory",
    "MemoryType": ".domain.schema",
    "NooaError": ".errors",
    "NotFound": ".errors",
    "OwnerForbidden": ".errors",
    "RecallSettings": ".config",
    "ReferenceOutsideRoot": ".errors",
    "Settings": ".config",
    "StoreTooNew": ".errors",
}

__all__ = sorted(_EXPORTS)
__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'nooa_mcp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
