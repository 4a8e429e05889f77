"""nooa-mcp: a long-term memory MCP server built on the NOOA memory model."""
