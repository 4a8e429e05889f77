"""Paging cursors that say nothing about the store (DESIGN.md §10, §13.2).

A listing pages by the store's insertion or stream sequence number, which counts every role's
rows. Handed to a client as it is, the number a page ends at told a role how many memories and
accesses other roles had written since its last page (and so that they exist), and the number
of one access in a shared memory's log where another role's hidden read had ranked. A cursor
is therefore a random token this process maps back to the position it stands for. A token
this process never gave out, or let go of, is no cursor: the caller starts from the first
page again. The resources and the console page with them; the CLI, which only the store's
owner runs, prints its positions as they are.

Cursors are kept per owner, the one that was given them: another owner's token is no cursor
for it, and one owner paging heavily lets go of its own oldest cursors, never another's (one
list for the process let a role's paging evict every other role's cursors). The owners kept
are bounded too; the one unused the longest is let go first, all its cursors with it.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict

from .errors import InvalidInput

__all__ = ["CURSORS", "KEPT", "OWNERS", "Cursors"]

#: Cursors one owner keeps; its oldest is let go first (a client pages on, it does not keep a
#: cursor for later).
KEPT = 1_000
#: Owners whose cursors one process keeps; the one unused the longest is let go first.
OWNERS = 256


class Cursors:
    """Positions behind opaque tokens: per owner, the newest `kept` of its own, for the
    `owners` that issued or used one most recently."""

    def __init__(self, kept: int = KEPT, owners: int = OWNERS) -> None:
        #: owner → token → (listing, position)
        self._owners: OrderedDict[str, OrderedDict[str, tuple[str, str]]] = OrderedDict()
        self._kept = kept
        self._max_owners = owners
        self._lock = threading.Lock()

    def issue(self, owner: str, listing: str, position: str) -> str:
        """A new token for `position` in `listing` (a listing's name: its base URI), good for
        `owner` only."""
        token = secrets.token_urlsafe(12)
        with self._lock:
            positions = self._owners.setdefault(owner, OrderedDict())
            self._owners.move_to_end(owner)
            positions[token] = (listing, position)
            while len(positions) > self._kept:
                positions.popitem(last=False)
            while len(self._owners) > self._max_owners:
                self._owners.popitem(last=False)
        return token

    def position(self, owner: str, listing: str, token: str) -> str | None:
        """The position `token` was given to `owner` for in `listing`, or None when this
        process gave `owner` no such token for it (a token of another listing stands for
        another kind of position; another owner's is not this owner's to resume)."""
        with self._lock:
            positions = self._owners.get(owner)
            if positions is None:
                return None
            self._owners.move_to_end(owner)
            found = positions.get(token)
        return found[1] if found is not None and found[0] == listing else None

    def resume(self, owner: str, listing: str, token: str, field: str, fix: str) -> str | None:
        """The position `token` stands for in `listing` for `owner`; None for no token (the
        first page).

        Raises:
            InvalidInput: naming `field`, when this process gave `owner` no such token for
            `listing`.
        """
        if not token:
            return None
        position = self.position(owner, listing, token)
        if position is None:
            raise InvalidInput(
                field,
                f"'{token[:40]}' is not a cursor this server gave for this listing (or kept).",
                fix,
            )
        return position


#: The process's cursors, shared by the MCP resources and the console.
CURSORS = Cursors()
