"""Lean tool schemas: what every client puts in the model's context on every turn.

Pydantic writes JSON schemas for machines that read everything: a title on every property,
`$ref`s into `$defs`, `anyOf [X, null]` with `default: null` for each optional argument. A
model reads the tool list on every turn, and some clients reject `$ref`, so the schemas the
server lists are rewritten: references inlined, titles dropped, optional arguments stated
once. Arguments are still validated by the tools' own pydantic models, not by these schemas.
"""

from __future__ import annotations

import copy
from typing import Any

from mcp.server.mcpserver import MCPServer

__all__ = ["lean_input", "lean_output", "lean_tools"]


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            target = copy.deepcopy(defs[ref.removeprefix("#/$defs/")])
            # A model's docstring is written for developers; the field's own description is
            # what the model needs.
            target.pop("description", None)
            merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
            return _inline(merged, defs)
        return {k: _inline(v, defs) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def _drop_titles(node: Any) -> Any:
    """Titles (pydantic's restatement of each name) and empty descriptions go."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "title" and isinstance(value, str):
                continue
            if key == "description" and value == "":
                continue
            if key == "properties" and isinstance(value, dict):
                out[key] = {name: _drop_titles(v) for name, v in value.items()}
            else:
                out[key] = _drop_titles(value)
        return out
    if isinstance(node, list):
        return [_drop_titles(v) for v in node]
    return node


def _not_null(node: Any) -> Any:
    """`anyOf [X, {type: null}]` → X and empty or false defaults dropped: an argument is
    optional by not being required, and saying so twice costs every turn. `anyOf` of plain
    types becomes one `type` list."""
    if isinstance(node, dict):
        node = {k: _not_null(v) for k, v in node.items()}
        options = node.get("anyOf")
        if isinstance(options, list):
            kept = [o for o in options if o != {"type": "null"}]
            rest = {k: v for k, v in node.items() if k != "anyOf"}
            if len(kept) == 1:
                node = {**kept[0], **rest}
            elif all(set(o) == {"type"} and isinstance(o["type"], str) for o in kept):
                node = {"type": [o["type"] for o in kept], **rest}
            elif len(kept) < len(options):
                node = {**rest, "anyOf": kept}
        if node.get("default", 0) in (None, "", []) or node.get("default", True) is False:
            node = {k: v for k, v in node.items() if k != "default"}
        return node
    if isinstance(node, list):
        return [_not_null(v) for v in node]
    return node


def lean_input(schema: dict[str, Any]) -> dict[str, Any]:
    """An input schema without $ref/$defs, titles, or null-variants of optional arguments."""
    return _not_null(_drop_titles(_inline(schema, schema.get("$defs", {}))))


def lean_output(schema: dict[str, Any]) -> dict[str, Any]:
    """An output schema without $ref/$defs or titles; nullable fields stay nullable (clients
    may validate replies against it)."""
    return _drop_titles(_inline(schema, schema.get("$defs", {})))


def lean_tools(server: MCPServer) -> None:
    """Rewrite the schemas of every tool registered on `server` (call after registering)."""
    for tool in server._tool_manager.list_tools():
        tool.parameters = lean_input(tool.parameters)
        output = tool.fn_metadata.output_schema
        if output is not None:
            tool.fn_metadata.output_schema = lean_output(output)
