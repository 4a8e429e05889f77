"""The MCP front end: server, tools, resources, prompts and the wiring between them."""
