"""References at write and read time: previews captured, targets resolved (DESIGN.md §11).

A reference points at something instead of copying it. At write time a preview (≤ 200 chars) is
captured; at read time the reference is resolved against the live target: LIVE with the current
value, DANGLING with the snapshot and its date, or OPAQUE for a URL (never fetched). File paths
are confined to a configured root (see `domain/references.py` for the text rules).

Memory targets are resolved through a `lookup` callable the caller passes in (id → content, or
None when missing, archived or outside the reader's scope), so this module never touches the store.
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from ..config import Settings
from ..domain.references import PREVIEW_CHARS, check_relative, clip, memory_targets
from ..domain.replies import ResolvedReference
from ..domain.schema import Memory, Reference, now
from ..domain.scope import Scope
from ..errors import InvalidInput, NooaError, ReferenceOutsideRoot
from .caller import Caller

__all__ = [
    "capture",
    "capture_all",
    "confine",
    "private_files",
    "resolve",
    "resolve_all",
    "visible_contents",
]

#: Bytes read from a file for its preview: enough for 200 characters of any UTF-8 text.
_READ_BYTES = PREVIEW_CHARS * 4 + 4

MemoryLookup = Callable[[str], str | None]
T = TypeVar("T")


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


#: The files SQLite keeps beside a store: its write-ahead log, shared memory and rollback journal.
_STORE_SIBLINGS = ("", "-wal", "-shm", "-journal")


def private_files(settings: Settings) -> tuple[str, ...]:
    """The server's own files, which no `file:` reference reads, as configured: the store
    file and `settings.private_files` (the tokens file). No file system here: it is read in
    the worker thread that reads the reference (`_is_private`)."""
    paths = [str(p) for p in settings.private_files]
    if isinstance(settings.store, Path):
        paths.append(str(settings.store))
    return tuple(paths)


def _is_private(real: Path, private: Collection[str]) -> bool:
    """Whether `real` (a resolved path) is one of `private` or a file SQLite keeps beside one
    (`_STORE_SIBLINGS`, beside the real file when a link names it), by real path or by file
    identity (a hard link to the tokens file under another name is still the tokens file)."""
    if not private:
        return False
    try:
        info = os.stat(real)
    except OSError:
        info = None
    for path in private:
        base = os.path.realpath(path)
        for suffix in _STORE_SIBLINGS:
            for own in dict.fromkeys((base + suffix, os.path.realpath(path + suffix))):
                if own == str(real):
                    return True
                if info is not None:
                    try:
                        other = os.stat(own)
                    except OSError:
                        continue
                    if (other.st_dev, other.st_ino) == (info.st_dev, info.st_ino):
                        return True
    return False


#: A directory preview lists at most this many entries and never scans more than DIR_SCAN.
DIR_ENTRIES = 50
DIR_SCAN = 5_000
#: How long a read may take before the reference shows as DANGLING (a slow or hung mount).
READ_SECONDS = 2.0


class NotARegularFile(OSError):
    """A path that is neither a regular file nor a directory (a pipe, socket or device)."""


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _file_preview(real: Path) -> str:
    """The first PREVIEW_CHARS characters of a file, or a bounded listing of a directory.

    Only regular files are read, opened without blocking and checked again on the open
    descriptor, so a pipe or device (even one swapped in after the path was checked) is never
    read; a directory is scanned for at most DIR_SCAN entries. Blocking: run it off the loop.

    Raises:
        NotARegularFile: the path is a pipe, socket or device.
        OSError: the path cannot be read.
    """
    info = os.stat(real)
    if stat.S_ISDIR(info.st_mode):
        return _directory_preview(real)
    if not stat.S_ISREG(info.st_mode):
        raise NotARegularFile(0, _kind(info.st_mode))
    fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            raise NotARegularFile(0, _kind(opened.st_mode))
        data = os.read(fd, _READ_BYTES)
    finally:
        os.close(fd)
    if b"\x00" in data:
        return f"binary file, {opened.st_size} bytes"
    return clip(data.decode("utf-8", errors="replace"), PREVIEW_CHARS)


def _directory_preview(real: Path) -> str:
    """The names of at most DIR_ENTRIES entries that fit the preview, and how many more."""
    names: list[str] = []
    total = 0
    with os.scandir(real) as entries:
        for entry in entries:
            total += 1
            if len(names) < DIR_ENTRIES:
                names.append(entry.name + ("/" if entry.is_dir(follow_symlinks=False) else ""))
            if total >= DIR_SCAN:
                break
    names.sort()
    more = "more than " if total >= DIR_SCAN else ""

    def text(shown: list[str]) -> str:
        rest = total - len(shown)
        return "directory: " + ", ".join(shown) + (f" … and {more}{rest} more" if rest else "")

    shown: list[str] = []
    for name in names:
        if len(text([*shown, name])) > PREVIEW_CHARS:
            break
        shown.append(name)
    return text(shown)


def capture(
    ref: Reference,
    *,
    root: Path | str | None,
    lookup: MemoryLookup | None = None,
    at: datetime | None = None,
    field: str = "references",
    private: Collection[str] = (),
) -> Reference:
    """The reference with its preview captured now (write time).

    `lookup` maps a full memory id to its content, or None when it is missing or not visible;
    the caller resolves prefixes to full ids before calling. `private` are the server's own
    files (`private_files`), never read.

    Raises:
        InvalidInput: a file reference without a configured root, a file or memory that does
            not exist, an unreadable file, or one of the server's own files.
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
        return ref.model_copy(update={"preview": clip(content, PREVIEW_CHARS), "captured_at": at})
    if root is None:
        raise InvalidInput(
            field,
            f"file:{ref.target} needs a reference root, and none is configured.",
            "Start nooa-mcp with --reference-root DIR, or set NOOA_REFERENCE_ROOT.",
        )
    real = confine(root, ref.target, field)
    if _is_private(real, private):
        raise InvalidInput(
            field,
            f"file:{ref.target} is one of this server's own files (its store or tokens file), "
            "which references never read.",
            "Reference a project file, or keep the server's files out of the reference root.",
        )
    if not real.exists():
        raise InvalidInput(
            field, f"file:{ref.target} does not exist under {root}.", "Check the relative path."
        )
    try:
        preview = _file_preview(real)
    except NotARegularFile as exc:
        raise InvalidInput(
            field,
            f"file:{ref.target} is {exc.strerror}, not a file or folder.",
            "Reference a regular file or a folder.",
        ) from None
    except OSError as exc:
        raise InvalidInput(field, f"file:{ref.target} cannot be read ({exc.strerror}).") from None
    root_real = os.path.realpath(root)
    return ref.model_copy(update={"preview": preview, "captured_at": at, "root": root_real})


def resolve(
    ref: Reference,
    *,
    root: Path | str | None,
    lookup: MemoryLookup | None = None,
    private: Collection[str] = (),
) -> ResolvedReference:
    """Resolve a stored reference against its live target (read time); never raises.

    LIVE carries the current preview; DANGLING the snapshot captured at write time and its date
    (the target is gone, unreadable, no longer visible, a symlink now leads out of the root, or
    it is one of the server's own files, `private`);
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
        return ResolvedReference(uri=ref.uri, state="LIVE", value=clip(content, PREVIEW_CHARS))
    if root is None:
        return dangling
    if ref.root is not None and ref.root != os.path.realpath(root):
        # The same relative path under another root is another project's file.
        return dangling.model_copy(
            update={"note": "captured under another root than this server's reference root"}
        )
    try:
        real = confine(root, ref.target)
        if _is_private(real, private):
            # Nor its snapshot: one captured before the rule, or by a process that did not
            # know the file (a stdio server, the CLI), is that file's first bytes.
            return ResolvedReference(
                uri=ref.uri, state="DANGLING", note="one of this server's own files: not read"
            )
        if not real.exists():
            return dangling
        value = _file_preview(real)
    except (InvalidInput, OSError):
        return dangling
    return ResolvedReference(uri=ref.uri, state="LIVE", value=value)


# --------------------------------------------------------------------------- service functions


async def _off_loop(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run file-system work in a worker thread, bounded by READ_SECONDS.

    Never block the event loop on the file system: one client's reference to a slow mount
    must not stall every other client. A thread that does not finish in time is abandoned.

    Raises:
        TimeoutError: the work did not finish in time.
    """
    with anyio.move_on_after(READ_SECONDS):
        return await anyio.to_thread.run_sync(
            functools.partial(fn, *args, **kwargs), abandon_on_cancel=True
        )
    raise TimeoutError


async def visible_contents(caller: Caller, ids: Sequence[str], scope: Scope | None = None) -> dict:
    """Content of live memories among `ids` that `scope` may read (default: the caller's own)."""
    scope = scope or caller.actor.own
    fetched = await caller.store.fetch_many(list(ids))
    return {i: m.content for i, m in fetched.items() if not m.archived and scope.allows(m.owner)}


async def capture_all(caller: Caller, records: Sequence[Memory]) -> None:
    """Resolve memory prefixes to full ids and capture every preview (write time).

    A reference that arrives with a preview (an import) keeps its snapshot untouched.

    Raises:
        InvalidInput / ReferenceOutsideRoot / NotFound: a reference cannot be captured; the
            error's `item` is the record's place among `records` (an import names its line).
        OwnerForbidden: a `memory:` target of a role a server-side grant lets the caller read.
    """
    private = private_files(caller.settings)
    for at, record in enumerate(records):
        if not record.references:
            continue
        try:
            record.references = await _captured(caller, record, private)
        except NooaError as exc:
            exc.item = at if exc.item is None else exc.item
            raise


async def _captured(caller: Caller, record: Memory, private: tuple[str, ...]) -> list[Reference]:
    """`record`'s references, each captured (`capture_all`)."""
    captured: list[Reference] = []
    for ref in record.references:
        if ref.preview:
            captured.append(ref)  # imported with its snapshot: keep it as it was
            continue
        if ref.kind == "memory":
            # A granted role's memory is read-only, said as such (recall shows it), as a
            # link to one is; an unreadable id stays plainly not found.
            full = await caller.resolve_writable(ref.target, "references", "reference")
            ref = ref.model_copy(update={"target": full})
        contents = await visible_contents(caller, memory_targets([ref]))
        root = caller.settings.reference_root
        if ref.kind != "file":
            captured.append(capture(ref, root=root, lookup=contents.get))
            continue
        try:
            captured.append(await _off_loop(capture, ref, root=root, private=private))
        except TimeoutError:
            raise InvalidInput(
                "references",
                f"file:{ref.target} did not answer within {READ_SECONDS:g} s.",
                "Reference a file on a responsive disk.",
            ) from None
    return captured


async def resolve_all(
    caller: Caller, references: Sequence[Reference], scope: Scope, *, own: bool = False
) -> tuple[list[ResolvedReference], list[str]]:
    """Resolve references now; also return the memory ids that resolved LIVE (for deref).

    A `memory:` target the reader's scope hides, or another role forgot (`Caller.withdrawn`;
    unless the reference is in a memory of the reader's `own` role), shows as HIDDEN,
    without its id or the snapshot captured at write time: a reference must not relay what
    the scope gates.
    """
    targets = memory_targets(references)
    contents = await visible_contents(caller, targets, scope)
    owners = await caller.store.owners_of(targets)
    # What another role forgot is hidden as an unreadable role's is: its snapshot is its words.
    # In the reader's `own` memory the snapshot is the reader's, taken when it could read it.
    gone = await caller.withdrawn_among(targets) if targets and not own else set()
    private = private_files(caller.settings)
    resolved = []
    for r in references:
        if r.kind == "memory" and (
            r.target in gone or (r.target in owners and not scope.allows(owners[r.target]))
        ):
            resolved.append(ResolvedReference(uri="memory:(hidden)", state="HIDDEN"))
        elif r.kind != "file":
            resolved.append(resolve(r, root=caller.settings.reference_root, lookup=contents.get))
        else:
            try:
                resolved.append(
                    await _off_loop(
                        resolve,
                        r,
                        root=caller.settings.reference_root,
                        private=private,
                    )
                )
            except TimeoutError:
                resolved.append(
                    ResolvedReference(
                        uri=r.uri,
                        state="DANGLING",
                        value=r.preview,
                        snapshot_at=r.captured_at,
                        note=f"the file did not answer within {READ_SECONDS:g} s",
                    )
                )
    live = [
        r.target
        for r, out in zip(references, resolved, strict=True)
        if r.kind == "memory" and out.state == "LIVE"
    ]
    return resolved, live
