"""References: parsing `file:`, `memory:` and `url:` pointers and checking file paths.

Pure: the text rules a reference must pass (DESIGN.md §11) before anything touches the disk or
the store. Capturing previews and resolving references live in `services/references.py`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Any

from ..errors import InvalidInput, ReferenceOutsideRoot
from .schema import Reference, refuse_unstorable

__all__ = [
    "MAX_REFERENCES",
    "PREVIEW_CHARS",
    "check_relative",
    "clip",
    "memory_targets",
    "parse_reference",
    "parse_references",
]

PREVIEW_CHARS = 200
MAX_REFERENCES = 20
MAX_URI_CHARS = 2000

_FIX = "Use file:<relative path>, memory:<id> or url:<address>."
_PATH_FIX = "Use a plain relative path inside the reference root, e.g. file:docs/notes.md."
# Characters that render as a dot or a slash but are not one: refused so a path reads as it is.
_LOOKALIKES = frozenset("\u2044\u2215\u29f8\u29f9\u2571\u2572\u3002\uff61\u2024\u2027\u00b7")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://\S+$")


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
        for part in ("preview", "root"):
            if isinstance(value.get(part), str):
                refuse_unstorable(value[part], f"{field}.{part}")
        try:
            return Reference.model_validate({**value, "target": checked.target})
        except ValueError:
            raise InvalidInput(field, f"{value!r} is not a reference.", _FIX) from None
    if not isinstance(value, str):
        raise InvalidInput(field, f"{value!r} is not a reference.", _FIX)
    text = refuse_unstorable(value, field).strip()
    if len(text) > MAX_URI_CHARS:
        raise InvalidInput(field, f"a reference of {len(text)} characters is too long.", _FIX)
    if re.match(r"^https?://", text, re.IGNORECASE):
        text = "url:" + text
    kind, sep, target = text.partition(":")
    kind = kind.strip().lower()
    if not sep or kind not in {"file", "memory", "url"}:
        raise InvalidInput(field, f"'{clip(text, 60)}' has no known kind.", _FIX)
    if kind == "file":
        return Reference(kind="file", target=check_relative(target, field))
    if kind == "memory":
        ident = target.strip().lower()
        if not re.fullmatch(r"[0-9a-f]{6,32}", ident):
            raise InvalidInput(
                field,
                f"'memory:{clip(target, 40)}' does not name a memory id.",
                "Use memory:<id> with at least 6 hex characters of the id.",
            )
        return Reference(kind="memory", target=ident)
    address = target.strip()
    if not _SCHEME.match(address) or _has_control(address):
        raise InvalidInput(
            field,
            f"'url:{clip(target, 60)}' is not an address.",
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


def memory_targets(refs: Iterable[Reference]) -> list[str]:
    """The memory ids (or prefixes) the references point at, in order, without repeats."""
    out: list[str] = []
    for ref in refs:
        if ref.kind == "memory" and ref.target not in out:
            out.append(ref.target)
    return out


def _has_control(text: str) -> bool:
    return any(unicodedata.category(c) in {"Cc", "Cf", "Zl", "Zp"} for c in text)


def clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"
