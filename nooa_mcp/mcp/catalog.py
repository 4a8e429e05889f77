"""The tool list written ahead of time, so `tools/list` is answered before the tools are built.

Registering the seven tools imports the pydantic reply models and has pydantic build an input
and an output schema for each: much of a stdio server's start, which a client pays on every
spawn before it sees a tool. The listing those
registrations produce is the same on every start, so it is generated once into `tools.json`
beside this module, and a server answers `tools/list` from it until the first message that
needs a tool (or the warm-up after the listing) registers them for real.

The file is derived, never edited: `python -m nooa_mcp.mcp.write_catalog` rewrites it from
the registered tools, and a test fails when it differs from what registration lists now. A file
that is missing or unreadable only costs the time it saves: the server registers at once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcp_types import Tool

__all__ = ["CATALOG", "listed", "load"]

#: The generated listing: every tool, `memory_reflect` included (dropped when it is off).
CATALOG = Path(__file__).with_name("tools.json")
#: The tool a server lists only when `reflect_tool` is on.
OPTIONAL = "memory_reflect"


def listed(tools: list[Tool]) -> list[dict[str, Any]]:
    """Tools as `tools/list` puts them on the wire (camelCase, no empty fields)."""
    return [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools]


def load(reflect: bool, path: Path = CATALOG) -> list[Tool] | None:
    """The listing of a server whose `reflect_tool` is `reflect`; None without a usable file."""
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
        tools = [Tool.model_validate(entry) for entry in entries]
    except (OSError, ValueError):
        return None
    return [tool for tool in tools if reflect or tool.name != OPTIONAL]
