"""Where a hook finds its store, its project and its log (standard library only).

The store, in order: `--store`/`NOOA_STORE`; else `.nooa/memory.sqlite` in the project (the
folder holding `.nooa/` or `.git`, from the hook's `cwd` upward), the layout the README's "A
store per project" sets up; else the default store in the user data directory. The project's
folder name is the project's label: memories tagged with it (or naming it as an entity or
place) lead the session-start block.

`platformdirs` and `pathlib` cost a fresh process tens of milliseconds, so the user data
directory is worked out here with platformdirs' rules for the three platforms (the tests check
it equals `config.default_store_path()`).
"""

from __future__ import annotations

import os
import sys

__all__ = ["PROJECT_STORE", "data_dir", "default_store", "find_project", "log_file"]

#: A project's own store, relative to its root (README "A store per project").
PROJECT_STORE = os.path.join(".nooa", "memory.sqlite")
_MARKERS = (".nooa", ".git")


def data_dir() -> str:
    """`<user data dir>/nooa-mcp`, as `platformdirs.user_data_dir("nooa-mcp", appauthor=False)`."""
    home = os.path.expanduser("~")
    if sys.platform == "darwin":
        base = os.path.join(home, "Library", "Application Support")
    elif sys.platform == "win32":
        import platformdirs

        return platformdirs.user_data_dir("nooa-mcp", appauthor=False)
    else:
        base = os.environ.get("XDG_DATA_HOME", "").strip() or os.path.join(home, ".local", "share")
    return os.path.join(base, "nooa-mcp")


def default_store() -> str:
    return os.path.join(data_dir(), "memory.sqlite")


def log_file() -> str:
    """Where a hook that failed says why (it never prints an error into the prompt)."""
    return os.path.join(data_dir(), "hooks.log")


def find_project(cwd: str | None) -> tuple[str, str]:
    """(project root, project label) for a working directory; ("", "") when there is none.

    The root is the nearest folder from `cwd` upward holding `.nooa/` or `.git`; without one,
    `cwd` itself, unless it is the home directory or the filesystem root (not a project).
    """
    if not cwd or not os.path.isabs(cwd) or not os.path.isdir(cwd):
        return "", ""
    home = os.path.realpath(os.path.expanduser("~"))
    here = os.path.realpath(cwd)
    folder = here
    while True:
        if folder == home:
            break
        if any(os.path.exists(os.path.join(folder, m)) for m in _MARKERS):
            return folder, os.path.basename(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    if here == home or os.path.dirname(here) == here:
        return "", ""
    return here, os.path.basename(here)
