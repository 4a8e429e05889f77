"""Shared material for the Claude Code hook tests: recorded hook JSON, a scratch environment,
and the hook run as Claude Code runs it (the installed console script, stdin in, stdout out)."""

from __future__ import annotations

import io
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from writes_support import console_script

from nooa_mcp import Memory
from nooa_mcp.embeddings import HashEmbedder

DATA = Path(__file__).parent / "hooks_data"


def recorded(name: str, cwd: Path, **changes: str) -> dict:
    """A recorded hook input (tests/hooks_data), with `cwd` pointing at a scratch folder."""
    payload = json.loads((DATA / f"{name}.json").read_text())
    payload["cwd"] = str(cwd)
    payload.update(changes)
    return payload


def hook_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """No NOOA_* from the caller's shell; the user data and config dirs (default store, hook log,
    trusted stores) in tmp."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOOA_")}
    env.update(
        HF_HUB_OFFLINE="1",
        XDG_DATA_HOME=str(tmp_path / "data"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        HOME=str(tmp_path),
    )
    env.update(extra)
    return env


def log_lines(tmp_path: Path) -> list[str]:
    path = tmp_path / "data" / "nooa-mcp" / "hooks.log"
    return path.read_text().splitlines() if path.exists() else []


@dataclass
class Answer:
    code: int
    stdout: str
    stderr: str

    @property
    def context(self) -> str:
        """The injected text ("" when the hook printed nothing)."""
        if not self.stdout.strip():
            return ""
        return json.loads(self.stdout)["hookSpecificOutput"]["additionalContext"]

    @property
    def event(self) -> str:
        return json.loads(self.stdout)["hookSpecificOutput"]["hookEventName"]


def run_hook(
    event: str,
    payload: dict | str,
    env: dict[str, str],
    *args: str,
    after: tuple[str, ...] = (),
    command: str | None = None,
) -> Answer:
    """`nooa-mcp [args] hook <event> [after]` with the payload on stdin, as Claude Code runs
    it."""
    text = payload if isinstance(payload, str) else json.dumps(payload)
    argv = [command or console_script(), *args, "hook", event, *after]
    # The timeout guards the suite against a hang; it is not a measurement.
    done = subprocess.run(argv, input=text, capture_output=True, text=True, env=env, timeout=120)
    return Answer(done.returncode, done.stdout, done.stderr)


def open_memory(store: Path, owner: str):
    return Memory.open(store, owner=owner, embedder=HashEmbedder())


def run_hook_in_process(
    event: str,
    payload: dict | str,
    env: dict[str, str],
    *args: str,
    after: tuple[str, ...] = (),
    command: str | None = None,
) -> Answer:
    """The same invocation as `run_hook`, answered in this process: the console script's own
    argument reading (`__main__.hook_arguments`), then `hooks.run.run` with `env` as the whole
    environment, so coverage and mutation testing see the hook path. An invocation only click
    can read (--help, a mistyped option) still runs as a fresh process."""
    from nooa_mcp.__main__ import hook_arguments
    from nooa_mcp.hooks import run

    found = hook_arguments([*args, "hook", event, *after])
    if found is None or command is not None:
        return run_hook(event, payload, env, *args, after=after, command=command)
    text = payload if isinstance(payload, str) else json.dumps(payload)
    out = io.StringIO()
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        code = run.run(found.pop("event"), **found, stdin=io.StringIO(text), stdout=out)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return Answer(code, out.getvalue(), "")
