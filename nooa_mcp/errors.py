"""Every exception nooa-mcp raises on purpose.

    NooaError
    ├── InvalidInput(ValueError)          .field .problem .fix — bad label, unknown edge, bad scope
    │   ├── AmbiguousId                   an id prefix matches several memories
    │   └── ReferenceOutsideRoot          a file: reference escapes the configured root
    ├── NotFound(LookupError)             no such id or prefix (under 6 characters counts as none)
    ├── OwnerForbidden(PermissionError)   a write across roles, or a read outside the scope
    ├── StoreTooNew(RuntimeError)         the file was written by a newer nooa-mcp
    └── StoreUnavailable(RuntimeError)    the store is gone, read-only, full or not a store
        ├── StoreConflict                 the database aborted the transaction for a
        │                                 concurrent one (a deadlock): retrying can succeed
        └── CommitUnknown                 the connection was lost while the database
                                          committed: the call may have been written

Each class builds its message from structured arguments and keeps them as attributes, so a
front end can show the message as it is and a test can assert on `exc.field`.
"""

from __future__ import annotations

__all__ = [
    "AmbiguousId",
    "CommitUnknown",
    "InvalidInput",
    "NooaError",
    "NotFound",
    "OwnerForbidden",
    "ReferenceOutsideRoot",
    "StoreConflict",
    "StoreTooNew",
    "StoreUnavailable",
]


class NooaError(Exception):
    """Base of every error nooa-mcp raises on purpose."""

    #: Which of several items written together was refused (`authoring.author_many`), so an
    #: import names the file's line.
    item: int | None = None


class InvalidInput(NooaError, ValueError):
    """An argument is not acceptable; the message names the field and the fix."""

    def __init__(self, field: str, problem: str, fix: str = "") -> None:
        self.field = field
        self.problem = problem
        self.fix = fix
        message = f"{field}: {problem}"
        if fix:
            message += f" {fix}"
        super().__init__(message)


class AmbiguousId(InvalidInput):
    """An id prefix matches more than one memory."""

    def __init__(self, prefix: str, candidates: list[str], field: str = "memory_id") -> None:
        self.prefix = prefix
        self.candidates = candidates
        shown = ", ".join(c[:12] for c in candidates[:5])
        super().__init__(
            field,
            f"'{prefix}' matches {len(candidates)} memories ({shown}).",
            "Pass more characters of the id.",
        )


class ReferenceOutsideRoot(InvalidInput):
    """A file: reference would leave the configured reference root."""

    def __init__(self, path: str, root: str, field: str = "references") -> None:
        self.path = path
        self.root = root
        super().__init__(
            field,
            f"file:{path} is outside the reference root {root}.",
            "Use a relative path without '..' that stays inside the root.",
        )


class NotFound(NooaError, LookupError):
    """No memory has that id or prefix (prefixes shorter than 6 characters never match)."""

    def __init__(
        self, ident: str, field: str = "memory_id", what: str = "memory", granted: str = ""
    ) -> None:
        self.ident = ident
        self.field = field
        hint = " Ids are 32 hex characters; a prefix of at least 6 (8 is usual) works."
        if len(ident) >= 6:
            hint = " Recall or list to find the id."
        if granted:
            # A role this connection was granted to read holds it: the scope word reaches it.
            hint = f" It is in role '{granted}', which you may read: pass the scope '{granted}'."
        where = " in this scope" if granted else ""
        super().__init__(f"{field}: no {what} with id '{ident}'{where}.{hint}")


class OwnerForbidden(NooaError, PermissionError):
    """The connection's owner may not do this to that memory."""

    def __init__(
        self,
        owner: str,
        target_owner: str,
        action: str = "write",
        granted: bool = False,
        field: str = "owner",
    ) -> None:
        self.owner = owner
        self.target_owner = target_owner
        self.action = action
        if granted:
            # `target_owner` is a role (never role@instance) this server grants `owner` to read:
            # recall shows its memories, so "no memory with id" would be a falsehood. `field`:
            # the argument that named that memory.
            super().__init__(
                f"{field}: that memory is of role '{target_owner}', which this server lets you "
                f"read but not {action}; writes and links stay inside your own role."
            )
            return
        fix = (
            "shared memories are the user's: ask them to change it (without --owner: the "
            "console, `nooa-mcp ui`, or the CLI, e.g. `nooa-mcp todo done ID`)."
            if target_owner == ""
            else "writes stay inside your own role."
        )
        whose = "a shared memory" if target_owner == "" else f"a memory of '{target_owner}'"
        super().__init__(f"owner: '{owner}' may not {action} {whose}; {fix}")


class StoreTooNew(NooaError, RuntimeError):
    """The store's schema version is newer than this code understands."""

    def __init__(self, path: str, found: int, supported: int, what: str = "file") -> None:
        self.path = path
        self.found = found
        self.supported = supported
        super().__init__(
            f"{path} has schema version {found}, but this nooa-mcp reads up to {supported}. "
            f"Upgrade nooa-mcp (pip install -U nooa-mcp) to open it; the {what} was not changed."
        )


class StoreUnavailable(NooaError, RuntimeError):
    """The store cannot do what was asked: the file is gone, read-only, full or not a store.

    The message names the store and the fix; nothing was written.
    """

    def __init__(self, store: str, problem: str, fix: str = "") -> None:
        self.store = store
        self.problem = problem
        self.fix = fix
        message = f"{store}: {problem}"
        if fix:
            message += f" {fix}"
        super().__init__(message)


class StoreConflict(StoreUnavailable):
    """The database rolled this transaction back to let a concurrent one finish (a deadlock,
    a serialization failure): nothing of it was written, and running it again can succeed."""


class CommitUnknown(StoreUnavailable):
    """The connection was lost while the database committed this call's transaction: it may
    have been written or not, and nothing here can tell which. Retrying is safe (an exact
    repeat is idempotent), and the retry's reply says what is there."""
