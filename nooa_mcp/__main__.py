"""The `nooa-mcp` command (and `python -m nooa_mcp`).

`nooa-mcp hook session-start|user-prompt` runs before every Claude Code prompt, in a fresh
process, with a budget of ~150 ms; importing the click CLI and the Memory facade costs more than
that. So a hook invocation is recognised here from the plain argument list and answered by the
standard-library hook path; everything else (and a hook with options this reading does not
know, such as --help) goes to the click CLI in `nooa_mcp.cli`, which runs the same hook code.
"""

from __future__ import annotations

import sys

__all__ = ["main"]

#: Options before `hook` that take a value, and the keyword they fill.
_GLOBAL = {"--store": "store", "--owner": "owner"}
#: Global options a hook ignores (they change nothing a hook prints).
_IGNORED_VALUE = {"--reference-root", "--read"}
_IGNORED_FLAG = {"--json"}
_HOOK = {"--url": "url"}


def hook_arguments(argv: list[str]) -> dict | None:
    """The keywords of `hooks.run.run` for a plain hook invocation, else None."""
    found: dict = {}
    args = list(argv)
    while args and args[0] != "hook":
        head = args.pop(0)
        name, eq, value = head.partition("=")
        if name in _IGNORED_FLAG and not eq:
            continue
        if name not in _GLOBAL and name not in _IGNORED_VALUE:
            return None
        if not eq:
            if not args:
                return None
            value = args.pop(0)
        if name in _GLOBAL:
            found[_GLOBAL[name]] = value
    if len(args) < 2 or args[0] != "hook" or args[1] not in ("session-start", "user-prompt"):
        return None
    found["event"] = args[1]
    rest = args[2:]
    while rest:
        name, eq, value = rest.pop(0).partition("=")
        if name not in _HOOK:
            return None
        if not eq:
            if not rest:
                return None
            value = rest.pop(0)
        found[_HOOK[name]] = value
    return found


def main() -> None:
    found = hook_arguments(sys.argv[1:])
    if found is not None:
        from .hooks.run import run

        event = found.pop("event")
        sys.exit(run(event, **found))
    from .cli import main as cli

    cli()


if __name__ == "__main__":
    main()
