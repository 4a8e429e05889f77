"""The `nooa-mcp` command (and `python -m nooa_mcp`).

`nooa-mcp hook session-start|user-prompt` runs before every Claude Code prompt, in a fresh
process, with a budget of ~150 ms; importing the click CLI and the Memory facade costs more than
that. So a hook invocation is recognised here from the plain argument list and answered by the
standard-library hook path; everything else (and a hook with options this reading does not
know, such as --help) goes to the click CLI in `nooa_mcp.cli`, which runs the same hook code.
"""

from __future__ import annotations

import itertools
import sys

__all__ = ["main"]

#: Options before `hook` that take a value, and the keyword they fill.
_GLOBAL = {"--store": "store", "--owner": "owner"}
#: Global options a hook ignores (they change nothing a hook prints).
_IGNORED_VALUE = {"--reference-root", "--read"}
_IGNORED_FLAG = {"--json"}
_HOOK = {"--url": "url", "--deadline": "deadline"}


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


def hook_event(argv: list[str]) -> str | None:
    """The event of anything that looks like a hook invocation (`hook <event>` anywhere)."""
    for here, after in itertools.pairwise(argv):
        if here == "hook" and after in ("session-start", "user-prompt"):
            return after
    return None


def guarded(argv: list[str], event: str) -> int:
    """Run the click CLI for a hook it must parse itself, never failing the prompt.

    Claude Code reads exit code 2 from a UserPromptSubmit hook as "block this prompt", and 2
    is what click exits with on a usage error (a mistyped option in the settings file). So a
    hook invocation's errors are logged and it exits 0, whatever happened.
    """
    import click

    from .cli import main as cli
    from .hooks.run import log

    try:
        cli.main(args=argv, prog_name="nooa-mcp", standalone_mode=False)
    except click.exceptions.Exit:
        pass
    except click.ClickException as exc:
        log(event, f"the hook command is wrong: {exc.format_message()}")
    except Exception as exc:
        log(event, f"{type(exc).__name__}: {exc}")
    return 0


def main() -> None:
    argv = sys.argv[1:]
    found = hook_arguments(argv)
    if found is not None:
        from .hooks.run import hard_deadline, run

        hard_deadline()  # this process answers one hook: it ends at the hook's deadline
        event = found.pop("event")
        sys.exit(run(event, **found))
    event = hook_event(argv)
    if event is not None:
        from .hooks.run import hard_deadline

        hard_deadline()
        sys.exit(guarded(argv, event))
    # Before the CLI and the MCP SDK are imported: collections during a server's start-up
    # imports cost a third of its time to the first answer (`startup_gc`). A command that
    # is not a stdio server restarts the collector as soon as it is known (`cli.main`).
    from . import startup_gc

    startup_gc.pause()
    from .cli import main as cli

    cli()


if __name__ == "__main__":
    main()
