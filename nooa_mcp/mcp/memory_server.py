"""The SDK's MCPServer, as nooa-mcp serves it: refusals told in one sentence, tools built late.

What differs from the SDK's server, each for what a client sees:

- Arguments the SDK refuses are told as `field: problem; got value. Fix.` (see
  `validation.argument_sentence`), not as pydantic's multi-line report.
- Tools, resources and prompts are registered by `register_handlers` when something first
  needs them, not when the server is built: until then `tools/list` is answered from the
  listing generated ahead of time (`catalog`). A stdio client spawns the server and waits for
  that listing, and building the handlers first made it wait longer.
- Over stdio every malformed line is answered with a JSON-RPC error, and the requests taken
  in before their replies are written are bounded (`stdio.bounded_stdio`).
- A tool or prompt argument the tool or prompt does not take is refused by name; an unknown
  prompt, an unknown resource and a listing cursor this server never gave out are invalid
  params (-32602), each refusal naming what there is.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, Tool
from pydantic import ValidationError

from .validation import argument_sentence

__all__ = ["MemoryServer"]


class MemoryServer(MCPServer):
    """MCPServer with one-sentence argument refusals and handlers registered on first need."""

    _register: Callable[[], None] | None = None
    _listing: list[Tool] | None = None
    #: The engine once the lifespan has opened it (None before): for routes beside /mcp.
    engine_now: Callable[[], Any] = staticmethod(lambda: None)

    def register_later(self, register: Callable[[], None], listing: list[Tool] | None) -> None:
        """Run `register` (tools, resources, prompts) when first needed; `listing` answers
        `tools/list` until then (None: register now)."""
        self._register, self._listing = register, listing
        if listing is None:
            self.register_handlers()

    def register_handlers(self) -> None:
        """Register what `register_later` deferred (once; later calls do nothing)."""
        register, self._register, self._listing = self._register, None, None
        if register is not None:
            register()

    async def list_tools(self) -> list[Tool]:
        if self._register is not None and self._listing is not None:
            return list(self._listing)
        return await super().list_tools()

    def _tool_input_schema(self, name: str) -> dict[str, Any] | None:
        self.register_handlers()
        return super()._tool_input_schema(name)

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        self.register_handlers()
        _refuse_unknown_arguments(self._tool_manager.get_tool(name), name, arguments)
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise  # a crash (even a reply that failed its own schema) stays hidden
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(
                    f"Error executing tool {name}: {argument_sentence(cause)}"
                ) from cause
            raise

    async def run_stdio_async(self) -> None:
        """Serve over stdio, every malformed line answered and the requests taken in
        bounded (see `stdio`)."""
        from .stdio import bounded_stdio

        plain_log_lines()
        try:
            async with bounded_stdio() as (read_stream, write_stream):
                await self._lowlevel_server.run(
                    read_stream,
                    write_stream,
                    self._lowlevel_server.create_initialization_options(),
                )
        except* BrokenPipeError:
            # The client stopped reading (it quit, or closed the pipe first): the end of the
            # session, said in one line, not a traceback in the client's log.
            logging.getLogger(__name__).info("the client closed stdout; the server stops")

    async def list_resources(self) -> Any:
        self.register_handlers()
        return await super().list_resources()

    async def list_resource_templates(self) -> Any:
        self.register_handlers()
        return await super().list_resource_templates()

    async def read_resource(self, uri: Any, context: Any = None) -> Any:
        self.register_handlers()
        _refuse_unknown_resource(self._resource_manager, str(uri))
        return await super().read_resource(uri, context)

    async def list_prompts(self) -> Any:
        self.register_handlers()
        return await super().list_prompts()

    async def get_prompt(self, name: str, arguments: Any = None, context: Any = None) -> Any:
        self.register_handlers()
        if self._prompt_manager.get_prompt(name) is None:
            known = ", ".join(p.name for p in self._prompt_manager.list_prompts())
            raise MCPError(
                code=INVALID_PARAMS, message=f"Unknown prompt: {name}. The prompts are {known}."
            )
        _refuse_unknown_prompt_arguments(self._prompt_manager.get_prompt(name), arguments or {})
        return await super().get_prompt(name, arguments, context)

    # Every listing fits one page, so no cursor was ever given out: one that comes back is
    # not this server's, and answering it with the first page again would loop a client.
    async def _handle_list_tools(self, ctx: Any, params: Any) -> Any:
        _refuse_cursor(params)
        return await super()._handle_list_tools(ctx, params)

    async def _handle_list_prompts(self, ctx: Any, params: Any) -> Any:
        _refuse_cursor(params)
        return await super()._handle_list_prompts(ctx, params)

    async def _handle_list_resources(self, ctx: Any, params: Any) -> Any:
        _refuse_cursor(params)
        return await super()._handle_list_resources(ctx, params)

    async def _handle_list_resource_templates(self, ctx: Any, params: Any) -> Any:
        _refuse_cursor(params)
        return await super()._handle_list_resource_templates(ctx, params)


def plain_log_lines() -> None:
    """nooa-mcp's own log records, one line each on stderr, for a server process.

    The SDK logs through rich, which boxes a traceback over dozens of lines and wraps even a
    one-line warning at 80 columns; a client keeping a server's stderr (and a person reading
    it) gets one line per record from nooa-mcp instead. Installed once, by a serving process.
    """
    log = logging.getLogger("nooa_mcp")
    if any(getattr(h, "_nooa_plain", False) for h in log.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s nooa-mcp %(levelname)s %(message)s"))
    handler._nooa_plain = True  # type: ignore[attr-defined]
    log.addHandler(handler)
    log.setLevel(logging.WARNING)
    log.propagate = False


def _refuse_cursor(params: Any) -> None:
    cursor = getattr(params, "cursor", None)
    if cursor is not None:
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"Invalid cursor {cursor[:40]!r}: this server lists everything in one page "
            "and gives no cursor. Ask without one.",
        )


def _refuse_unknown_resource(resources: Any, uri: str) -> None:
    """A URI no resource or template matches is refused naming what can be read (the SDK's
    "Unknown resource: X" leaves the client to list them). A URI a template matches goes on:
    its handler says whether that memory exists."""
    if any(r.uri == uri for r in resources.list_resources()):
        return
    for template in resources.list_templates():
        try:
            if template.matches(uri) is not None:
                return
        except Exception:  # the template's own refusal (a path trick): the SDK reports it
            return
    names = [str(r.uri) for r in resources.list_resources()]
    # A template that only pages a listed resource (`memory://todos{?cursor,limit}`) is said
    # once, by the resource.
    names += [
        t.uri_template
        for t in resources.list_templates()
        if t.uri_template.split("{?")[0] not in names
    ]
    raise MCPError(
        code=INVALID_PARAMS,
        message=f"Unknown resource: {uri[:200]}. The resources are {', '.join(names)}.",
    )


def _refuse_unknown_prompt_arguments(prompt: Any, arguments: dict[str, Any]) -> None:
    """A prompt argument the prompt does not take is refused by name, as a tool's is: the SDK
    answered it with an internal error (-32603) and logged a traceback."""
    known = [a.name for a in prompt.arguments or []]
    unknown = [key for key in arguments if key not in known]
    if unknown:
        names = ", ".join(k if k.isidentifier() else repr(k[:40]) for k in unknown[:5])
        takes = f"its arguments are {', '.join(known)}" if known else "it takes no arguments"
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"{names}: not an argument of prompt {prompt.name}; {takes}. "
            "Ask again without it.",
        )


def _refuse_unknown_arguments(tool: Any, name: str, arguments: dict[str, Any]) -> None:
    """An argument the tool does not take is refused by name: silently dropping it would let
    a caller believe it had an effect (a misspelt `scope`, an `owner` that is never read)."""
    if tool is None:
        return
    known = list((tool.parameters or {}).get("properties", {}))
    unknown = [key for key in arguments if key not in known]
    if unknown:
        names = [k if k.isidentifier() else repr(k[:40]) for k in unknown[:5]]
        others = f", nor {'is' if len(names) == 2 else 'are'} {', '.join(names[1:])}"
        raise ToolError(
            f"Error executing tool {name}: {names[0]}: is not an argument of {name}"
            f"{others if len(names) > 1 else ''}; nothing was done. "
            f"Its arguments are {', '.join(known)}."
        )
