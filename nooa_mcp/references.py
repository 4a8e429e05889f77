"""References: file:, memory: and url: pointers, captured at write, resolved at read (SPEC §11).

A reference points at something instead of copying it. At write time a preview (≤ 200 chars) is
captured; at read time the reference is resolved against the live target: LIVE with the current
value, DANGLING with the snapshot and its date, or OPAQUE for a URL (never fetched). File paths
are confined to a configured root: relative only, no `..`, no symlink leaving the root, and no
look-alike characters that a human would read as a dot or a slash.

Memory targets are resolved through a `lookup` callable the caller passes in (id → content, or
None when missing, archived or outside the reader's scope), so this module never touches the store.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from .errors import InvalidInput, ReferenceOutsideRoot
from .replies import ResolvedReference
from .schema import Reference, now

__all__ = [
    "MAX_REFERENCES",
    "PREVIEW_CHARS",
    "capture",
    "confine",
    "memory_targets",
    "parse_reference",
    "parse_references",
    "resolve",
]

PREVIEW_CHARS = 200
MAX_REFERENCES = 20
MAX_URI_CHARS = 2000
#: Bytes read from a file for its preview: enough for 200 characters of any UTF-8 text.
_READ_BYTES = PREVIEW_CHARS * 4 + 4

_FIX = "Use file:<relative path>, memory:<id> or url:<address>."
_PATH_FIX = "Use a plain relative path inside the reference root, e.g. file:docs/notes.md."
# Characters that render as a dot or a slash but are not one: refused so a path reads as it is.
_LOOKALIKES = frozenset("\u2044\u2215\u29f8\u29f9\u2571\u2572\u3002\uff61\u2024\u2027\u00b7")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://\S+$")

MemoryLookup = Callable[[str], str | None]


def parse_reference(value: Any, field: str = "references") -> Reference:
    """Turn `file:<path>`, `memory:<id>` or `url:<address>` into a Reference without a preview.

    A bare `http(s)://` address is taken as a `url:`. A `Reference` passes through unchanged, and
    a dict `{kind, target, preview?, captured_at?}` (an export) keeps its snapshot.

    Raises:
        InvalidInput: the value is not text, has no known kind, or its target is malformed
            (`field` names the argument).
        ReferenceOutsideRoot: a file path is absolute or climbs out with `..`.
    """
    if isinstance(value, Reference):
        return value
    if isinstance(value, dict) and {"kind", "target"} <= value.keys():
        # An exported reference keeps its snapshot; its target is checked like any other.
        checked = parse_reference(f"{value['kind']}:{value['target']}", field)
        try:
            return Reference.model_validate({**value, "target": checked.target})
        except ValueError:
            raise InvalidInput(field, f"{value!r} is not a reference.", _FIX) from None
    if not isinstance(value, str):
        raise InvalidInput(field, f"{value!r} is not a reference.", _FIX)
    text = value.strip()
    if len(text) > MAX_URI_CHARS:
        raise InvalidInput(field, f"a reference of {len(text)} characters is too long.", _FIX)
    if re.match(r"^https?://", text, re.IGNORECASE):
        text = "url:" + text
    kind, sep, target = text.partition(":")
    kind = kind.strip().lower()
    if not sep or kind not in {"file", "memory", "url"}:
        raise InvalidInput(field, f"'{_clip(text, 60)}' has no known kind.", _FIX)
    if kind == "file":
        return Reference(kind="file", target=check_relative(target, field))
    if kind == "memory":
        ident = target.strip().lower()
        if not re.fullmatch(r"[0-9a-f]{6,32}", ident):
            raise InvalidInput(
                field,
                f"'memory:{_clip(target, 40)}' does not name a memory id.",
                "Use memory:<id> with at least 6 hex characters of the id.",
            )
        return Reference(kind="memory", target=ident)
    address = target.strip()
    if not _SCHEME.match(address) or _has_control(address):
        raise InvalidInput(
            field,
            f"'url:{_clip(target, 60)}' is not an address.",
            "Use url:<scheme>://<host>/..., e.g. url:https://example.org/page.",
        )
    return Reference(kind="url", target=address)


def parse_references(values: Iterable[Any] | None, field: str = "references") -> list[Reference]:
    """Parse a list of references, dropping exact repeats (same kind and target).

    Raises:
        InvalidInput: any element is malformed, or more than MAX_REFERENCES are given.
        ReferenceOutsideRoot: a file path is absolute or climbs out with `..`.
    """
    if values is None:
        return []
    if isinstance(values, str | Reference):
        values = [values]
    out: list[Reference] = []
    seen: set[str] = set()
    for value in values:
        ref = parse_reference(value, field)
        if ref.uri not in seen:
            seen.add(ref.uri)
            out.append(ref)
    if len(out) > MAX_REFERENCES:
        raise InvalidInput(
            field, f"{len(out)} references given.", f"Pass at most {MAX_REFERENCES}."
        )
    return out


def check_relative(path: str, field: str = "references") -> str:
    """Check the text of a file path before it touches the disk; return it normalised.

    Refused: empty, NUL or other control/format characters, backslashes, look-alike dots and
    slashes (full-width and friends), absolute paths, drive letters and `..` components.

    Raises:
        InvalidInput: the path is empty or holds characters that are not allowed.
        ReferenceOutsideRoot: the path is absolute or climbs out of the root.
    """
    if not path or not path.strip():
        raise InvalidInput(field, "file: needs a path.", _PATH_FIX)
    for char in path:
        category = unicodedata.category(char)
        if category in {"Cc", "Cf", "Zl", "Zp"}:
            raise InvalidInput(
                field, f"the path holds the control character U+{ord(char):04X}.", _PATH_FIX
            )
        folded = unicodedata.normalize("NFKC", char)
        if (
            char == "\\"
            or char in _LOOKALIKES
            or (folded != char and any(c in folded for c in "./\\"))
        ):
            raise InvalidInput(
                field,
                f"the path holds '{char}' (U+{ord(char):04X}), which reads as a dot or a slash.",
                _PATH_FIX,
            )
    if path.startswith(("/", "~")) or re.match(r"^[a-zA-Z]:", path):
        raise ReferenceOutsideRoot(path, "(relative paths only)", field)
    parts = [p for p in path.split("/") if p not in {"", "."}]
    if not parts:
        raise InvalidInput(field, f"file:{path} names no file.", _PATH_FIX)
    if ".." in parts:
        raise ReferenceOutsideRoot(path, "(relative paths only)", field)
    return "/".join(parts)


def confine(root: Path | str, path: str, field: str = "references") -> Path:
    """The real path of `path` under `root`, after following every symlink.

    Raises:
        InvalidInput: the path text is not allowed (see `check_relative`).
        ReferenceOutsideRoot: the path, or a symlink on it, leads outside the root.
    """
    rel = check_relative(path, field)
    real_root = Path(os.path.realpath(root))
    real = Path(os.path.realpath(real_root / rel))
    if real != real_root and real_root not in real.parents:
        raise ReferenceOutsideRoot(rel, str(real_root), field)
    return real


def _file_preview(real: Path) -> str:
    """The first PREVIEW_CHARS characters of a file, or a listing of a directory."""
    if real.is_dir():
        names = sorted(p.name + ("/" if p.is_dir() else "") for p in real.iterdir())
        return _clip("directory: " + ", ".join(names), PREVIEW_CHARS)
    with real.open("rb") as fh:
        data = fh.read(_READ_BYTES)
    if b"\x00" in data:
        return f"binary file, {real.stat().st_size} bytes"
    return _clip(data.decode("utf-8", errors="replace"), PREVIEW_CHARS)


def capture(
    ref: Reference,
    *,
    root: Path | str | None,
    lookup: MemoryLookup | None = None,
    at: datetime | None = None,
    field: str = "references",
) -> Reference:
    """The reference with its preview captured now (write time).

    `lookup` maps a full memory id to its content, or None when it is missing or not visible;
    the caller resolves prefixes to full ids before calling.

    Raises:
        InvalidInput: a file reference without a configured root, a file or memory that does
            not exist, or an unreadable file.
        ReferenceOutsideRoot: the file path leaves the root.
    """
    at = at or now()
    if ref.kind == "url":
        return ref.model_copy(update={"preview": "", "captured_at": at})
    if ref.kind == "memory":
        content = lookup(ref.target) if lookup is not None else None
        if content is None:
            raise InvalidInput(
                field,
                f"memory:{ref.target[:8]} does not exist or is not visible to you.",
                "Recall or list to find the id.",
            )
        return ref.model_copy(update={"preview": _clip(content, PREVIEW_CHARS), "captured_at": at})
    if root is None:
        raise InvalidInput(
            field,
            f"file:{ref.target} needs a reference root, and none is configured.",
            "Start the server with --reference-root DIR (or NOOA_REFERENCE_ROOT).",
        )
    real = confine(root, ref.target, field)
    if not real.exists():
        raise InvalidInput(
            field, f"file:{ref.target} does not exist under {root}.", "Check the relative path."
        )
    try:
        preview = _file_preview(real)
    except OSError as exc:
        raise InvalidInput(field, f"file:{ref.target} cannot be read ({exc.strerror}).") from None
    return ref.model_copy(update={"preview": preview, "captured_at": at})


def resolve(
    ref: Reference, *, root: Path | str | None, lookup: MemoryLookup | None = None
) -> ResolvedReference:
    """Resolve a stored reference against its live target (read time); never raises.

    LIVE carries the current preview; DANGLING the snapshot captured at write time and its date
    (the target is gone, unreadable, no longer visible, or a symlink now leads out of the root);
    OPAQUE is a URL, shown with its snapshot (URLs are never fetched).
    """
    dangling = ResolvedReference(
        uri=ref.uri, state="DANGLING", value=ref.preview, snapshot_at=ref.captured_at
    )
    if ref.kind == "url":
        return ResolvedReference(
            uri=ref.uri, state="OPAQUE", value=ref.preview, snapshot_at=ref.captured_at
        )
    if ref.kind == "memory":
        content = lookup(ref.target) if lookup is not None else None
        if content is None:
            return dangling
        return ResolvedReference(uri=ref.uri, state="LIVE", value=_clip(content, PREVIEW_CHARS))
    if root is None:
        return dangling
    try:
        real = confine(root, ref.target)
        if not real.exists():
            return dangling
        value = _file_preview(real)
    except (InvalidInput, OSError):
        return dangling
    return ResolvedReference(uri=ref.uri, state="LIVE", value=value)


def memory_targets(refs: Iterable[Reference]) -> list[str]:
    """The memory ids (or prefixes) the references point at, in order, without repeats."""
    out: list[str] = []
    for ref in refs:
        if ref.kind == "memory" and ref.target not in out:
            out.append(ref.target)
    return out


def _has_control(text: str) -> bool:
    return any(unicodedata.category(c) in {"Cc", "Cf", "Zl", "Zp"} for c in text)


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"
