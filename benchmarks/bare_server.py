"""The SDK's minimal MCP server with one tool: the floor for start-up and for a tool call.

bench_stdio.py spawns it beside nooa-mcp in the same run, so "nooa-mcp starts in 1.2x a bare
server" compares two processes started on the same machine, at the same load, by the same
client. It is the smallest thing the MCP Python SDK serves: one MCPServer, one tool, stdio.

    python benchmarks/bare_server.py
"""

from mcp.server.mcpserver import MCPServer

server = MCPServer("bare")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


if __name__ == "__main__":
    server.run()
