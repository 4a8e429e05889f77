"""`python -m nooa_mcp.mcp.write_catalog`: rewrite `tools.json` from the registered tools.

Apart from `catalog`, which the server reads at start: generating the listing needs the server,
and the server must not import what imports it back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio

from ..config import Settings
from .catalog import CATALOG, listed
from .server import build_server

__all__ = ["write"]


def write(path: Path = CATALOG) -> list[dict[str, Any]]:
    """Register the tools on a fresh server (reflect on) and write their listing to `path`."""
    server = build_server(Settings(reflect_tool=True))
    server.register_handlers()
    entries = listed(anyio.run(server.list_tools))
    path.write_text(json.dumps(entries, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return entries


if __name__ == "__main__":
    written = write()
    print(f"{CATALOG}: {len(written)} tools")
