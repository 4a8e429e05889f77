"""`nooa-mcp hooks install|uninstall`: nooa's entries in Claude Code's settings file.

Claude Code reads hooks from `~/.claude/settings.json` (user), `.claude/settings.json`
(project, shared with the team) and `.claude/settings.local.json` (project, this machine):

    {"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "...",
                                            "timeout": 10}]}],
               "UserPromptSubmit": [...]}}

Install merges: every other hook and every other setting stays as it was; an earlier nooa entry
is replaced, never duplicated. Uninstall removes nooa's entries and only the groups, events and
`hooks` key that removing them left empty. A nooa entry is recognised by what it is — a command
running `nooa-mcp … hook session-start|user-prompt`, or an http hook carrying the
`X-Nooa-Hook` header — so uninstall finds it even after the options changed.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .remote import hook_url

__all__ = ["MARK_HEADER", "SCOPES", "InstallError", "apply", "handlers", "is_ours", "settings_path"]

#: Which command answers which Claude Code event.
EVENTS = {"SessionStart": "session-start", "UserPromptSubmit": "user-prompt"}
SCOPES = ("user", "project", "local")
#: Claude Code kills a hook after this many seconds; ours ends itself at its deadline (2 s unless
#: --deadline / NOOA_HOOK_SECONDS says otherwise).
TIMEOUT = 10
#: The header that marks an http hook as nooa's (the server ignores it).
MARK_HEADER = "X-Nooa-Hook"
_OURS = re.compile(
    r"(^|[\s/\\\"'])nooa-mcp(\.exe)?[\"']?\s.*\bhook\s+(session-start|user-prompt)\b"
)


class InstallError(Exception):
    """The settings file cannot be merged (the message names it and the fix)."""


def settings_path(scope: str, cwd: Path | None = None) -> Path:
    """The settings file Claude Code reads for a scope."""
    here = cwd or Path.cwd()
    if scope == "user":
        return Path.home() / ".claude" / "settings.json"
    if scope == "project":
        return here / ".claude" / "settings.json"
    if scope == "local":
        return here / ".claude" / "settings.local.json"
    raise InstallError(f"scope: {scope!r} is not a scope. Use user, project or local.")


def default_command(scope: str) -> str:
    """`nooa-mcp` for a shared project file; this installation's absolute path otherwise, so
    Claude Code finds it whatever its PATH (a virtualenv is not on it)."""
    if scope == "project":
        return "nooa-mcp"
    here = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if here is not None and here.name.startswith("nooa-mcp") and here.exists():
        return str(here.resolve())
    return shutil.which("nooa-mcp") or "nooa-mcp"


def _http_url(url: str) -> bool:
    """An http(s) URL with a host, and a port a socket can have."""
    try:
        parts = urlsplit(url)
        return (
            parts.scheme in ("http", "https")
            and bool(parts.hostname)
            and (parts.port is None or parts.port > 0)
            and " " not in url
        )
    except ValueError:  # a port past 65535, or not a number
        return False


def handlers(
    *,
    command: str,
    owner: str | None = None,
    store: str | None = None,
    url: str | None = None,
    http: bool = False,
    token_env: str | None = None,
    deadline: float | None = None,
) -> dict[str, dict[str, Any]]:
    """The handler nooa installs for each event.

    A command hook by default (the keyword path, or the server at `url` when given); with
    `http`, Claude Code posts straight to the server's /hooks route (`url` required), with the
    bearer token read from the environment variable `token_env` when given. `deadline` is the
    command hook's whole-hook deadline in seconds (`--deadline`; without it, 2 s).
    """
    if url and not _http_url(url):
        # Written into both hooks as given, "notaurl" failed only at the first prompt.
        raise InstallError(
            f"url: {url!r} is not an http(s) URL. Pass the server's address, e.g. "
            "http://127.0.0.1:8765."
        )
    out: dict[str, dict[str, Any]] = {}
    for event, name in EVENTS.items():
        if http:
            if not url:
                raise InstallError("url: --http needs the server's --url.")
            headers = {MARK_HEADER: "1"}
            handler: dict[str, Any] = {"type": "http", "url": hook_url(url), "timeout": TIMEOUT}
            if token_env:
                headers["Authorization"] = f"Bearer ${token_env}"
                handler["allowedEnvVars"] = [token_env]
            handler["headers"] = headers
        else:
            parts = [shlex.quote(command)]
            if owner:
                parts += ["--owner", shlex.quote(owner)]
            if store:
                parts += ["--store", shlex.quote(store)]
            parts += ["hook", name]
            if url:
                parts += ["--url", shlex.quote(url)]
            if deadline is not None:
                parts += ["--deadline", f"{deadline:g}"]
            handler = {"type": "command", "command": " ".join(parts), "timeout": TIMEOUT}
        out[event] = handler
    return out


def is_ours(handler: Any) -> bool:
    """Whether a handler is one nooa installed (whatever options it was installed with)."""
    if not isinstance(handler, dict):
        return False
    if handler.get("type") == "http":
        headers = handler.get("headers")
        return isinstance(headers, dict) and MARK_HEADER in headers
    command = handler.get("command")
    return (
        handler.get("type") == "command"
        and isinstance(command, str)
        and bool(_OURS.search(command))
    )


def _load(path: Path) -> tuple[str, dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return "", {}
    except OSError as exc:
        raise InstallError(f"{path}: cannot read it ({exc.strerror}).") from None
    if not text.strip():
        return text, {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InstallError(
            f"{path} is not valid JSON (line {exc.lineno}: {exc.msg}). Fix it first; nothing "
            "was changed."
        ) from None
    if not isinstance(data, dict):
        raise InstallError(f"{path} does not hold a JSON object. Nothing was changed.")
    hooks = data.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise InstallError(f"{path}: 'hooks' is not an object. Nothing was changed.")
    for event in EVENTS:
        groups = (hooks or {}).get(event)
        if groups is not None and not (
            isinstance(groups, list) and all(isinstance(g, dict) for g in groups)
        ):
            raise InstallError(
                f"{path}: hooks.{event} is not a list of matcher groups. Nothing was changed."
            )
    return text, data


def _without_ours(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with every nooa handler gone, and what that removal left empty."""
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return dict(data)
    new_hooks = dict(hooks)
    for event in EVENTS:
        groups = hooks.get(event)
        if not isinstance(groups, list):
            continue
        kept_groups = []
        for group in groups:
            inner = group.get("hooks")
            if not isinstance(inner, list) or not any(is_ours(h) for h in inner):
                kept_groups.append(group)
                continue
            kept = [h for h in inner if not is_ours(h)]
            if kept:
                kept_groups.append({**group, "hooks": kept})
        if kept_groups:
            new_hooks[event] = kept_groups
        else:
            del new_hooks[event]
    out = dict(data)
    if new_hooks:
        out["hooks"] = new_hooks
    else:
        del out["hooks"]
    return out


def _with(data: dict[str, Any], wanted: dict[str, dict[str, Any]]) -> dict[str, Any]:
    out = _without_ours(data)
    hooks = dict(out.get("hooks") or {})
    for event, handler in wanted.items():
        hooks[event] = [*hooks.get(event, []), {"hooks": [handler]}]
    out["hooks"] = hooks
    return out


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _write(path: Path, text: str) -> None:
    """Replace the file atomically: Claude Code never reads half a settings file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=".settings-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def apply(
    path: Path, wanted: dict[str, dict[str, Any]] | None, *, dry_run: bool = False
) -> tuple[bool, str]:
    """Install `wanted` (or uninstall, with None) in the settings file at `path`.

    Returns (changed, unified diff of the file). With `dry_run` nothing is written.

    Raises:
        InstallError: the file is not valid JSON or not shaped like Claude Code settings.
    """
    before, data = _load(path)
    after_data = _without_ours(data) if wanted is None else _with(data, wanted)
    if after_data == data:
        return False, ""
    after = _dump(after_data)
    diff = "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"{path} (now)",
            tofile=f"{path} (after)",
        )
    )
    if not dry_run:
        _write(path, after)
    return True, diff
