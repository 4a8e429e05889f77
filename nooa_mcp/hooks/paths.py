"""Where a hook finds its store, its project and its log (standard library only).

The store, in order: `--store`/`NOOA_STORE`; else `.nooa/memory.sqlite` in the project (the
folder holding `.nooa/` or `.git`, from the hook's `cwd` upward), the layout the README's "A
store per project" sets up, but only when the user trusted that file (`nooa-mcp hooks trust`,
which writes its real path into `<user config dir>/nooa-mcp/trusted-stores`); else the default
store in the user data directory. A project store nobody trusted came with the checkout (a
cloned repository can ship one), so the hook neither reads nor writes it (docs/DESIGN.md §12).
The project's folder name is the project's label: memories tagged with it (or naming it as an
entity or place) lead the session-start block.

`platformdirs` and `pathlib` cost a fresh process tens of milliseconds, so the user data
directory is worked out here with platformdirs' rules for the three platforms (the tests check
it equals `config.default_store_path()`).
"""

from __future__ import annotations

import os
import re
import sys

__all__ = [
    "PROJECT_STORE",
    "config_dir",
    "data_dir",
    "default_store",
    "find_project",
    "is_trusted",
    "label_of",
    "log_file",
    "set_trusted",
    "trust_file",
    "trusted_stores",
]

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


def config_dir() -> str:
    """`<user config dir>/nooa-mcp`, as platformdirs.user_config_dir gives it (no app author)."""
    home = os.path.expanduser("~")
    if sys.platform == "darwin":
        base = os.path.join(home, "Library", "Application Support")
    elif sys.platform == "win32":
        import platformdirs

        return platformdirs.user_config_dir("nooa-mcp", appauthor=False)
    else:
        base = os.environ.get("XDG_CONFIG_HOME", "").strip() or os.path.join(home, ".config")
    return os.path.join(base, "nooa-mcp")


def trust_file() -> str:
    """The user's list of trusted project stores: one real path a line, `#` comments."""
    return os.path.join(config_dir(), "trusted-stores")


def _real(path: str) -> str:
    return os.path.realpath(os.path.abspath(os.path.expanduser(path)))


def trusted_stores() -> list[str]:
    """The trusted project stores, as written (real paths); [] without the file."""
    try:
        with open(trust_file(), encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def is_trusted(path: str) -> bool:
    """Whether the user trusted this store file (its real path is on the list)."""
    # The entries are compared as written (real paths when trusted), never resolved again: a
    # link put later where a trusted store was to be must not carry the trust elsewhere.
    return _real(path) in trusted_stores()


def set_trusted(path: str, trusted: bool = True) -> tuple[str, bool]:
    """Add (or remove) a store file to the user's trusted list; (its real path, changed).

    A folder stands for the project store inside it (`<folder>/.nooa/memory.sqlite`). The list
    is replaced atomically, so a hook never reads half of it.
    """
    target = _real(path)
    if os.path.isdir(target):
        target = _real(os.path.join(target, PROJECT_STORE))
    entries = trusted_stores()
    kept = [e for e in entries if e != target]
    if (len(kept) < len(entries)) == trusted:
        return target, False  # already as asked
    after = [*kept, target] if trusted else kept
    folder = config_dir()
    os.makedirs(folder, exist_ok=True)
    tmp = trust_file() + f".{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("# Project stores the nooa-mcp hooks may read (nooa-mcp hooks trust PATH).\n")
        f.writelines(entry + "\n" for entry in after)
    os.replace(tmp, trust_file())
    return target, True


def default_store() -> str:
    return os.path.join(data_dir(), "memory.sqlite")


def log_file() -> str:
    """Where a hook that failed says why (it never prints an error into the prompt)."""
    return os.path.join(data_dir(), "hooks.log")


def label_of(cwd: str | None) -> str:
    """A project label from a working directory's name alone, reading no disk: what a server
    answering another machine's hook (or anyone's, with a token) may use. Resolving a
    client's path on the server's disk told the client which folders exist there."""
    if not cwd or not cwd.startswith("/"):
        return ""
    folder = os.path.normpath(re.sub("/+", "/", cwd))
    # A home folder is not a project (as `find_project` says on its own disk): by its shape.
    if _HOME_SHAPE.fullmatch(folder):
        return ""
    return os.path.basename(folder.rstrip("/"))


_HOME_SHAPE = re.compile(r"/|/root|(?:/[^/]+)?/home/[^/]+|/Users/[^/]+")


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
