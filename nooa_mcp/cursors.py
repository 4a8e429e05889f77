"""Paging cursors that say nothing about the store (DESIGN.md §10, §13.2).

A listing pages by the store's insertion or stream sequence number, which counts every role's
rows. Handed to a client as it is, the number a page ends at told a role how many memories and
accesses other roles had written since its last page (and so that they exist), and the number
of one access in a shared memory's log where another role's hidden read had ranked. A cursor
is therefore a random token this process maps back to the position it stands for. A token
this process never gave out, or let go of, is no cursor: the caller starts from the first
page again. The resources and the console page with them; the CLI, which only the store's
owner runs, prints its positions as they are.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict

from .errors import InvalidInput

__all__ = ["CURSORS", "KEPT", "Cursors"]

#: Cursors one process remembers; the oldest is let go first (a client pages on, it does not
#: keep a cursor for later).
KEPT = 10_000


class Cursors:
    """Positions behind opaque tokens, the newest `kept` of them."""

    def __init__(self, kept: int = KEPT) -> None:
        self._positions: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._kept = kept
        self._lock = threading.Lock()

    def issue(self, listing: str, position: str) -> str:
        """A new token for `position` in `listing` (a listing's name: its base URI)."""
        token = secrets.token_urlsafe(12)
        with self._lock:
            self._positions[token] = (listing, position)
            while len(self._positions) > self._kept:
                self._positions.popitem(last=False)
        return token

    def position(self, listing: str, token: str) -> str | None:
        """The position `token` was given for in `listing`, or None when this process gave no
        such token for it (a token of another listing stands for another kind of position)."""
        with self._lock:
            found = self._positions.get(token)
        return found[1] if found is not None and found[0] == listing else None

    def resume(self, listing: str, token: str, field: str, fix: str) -> str | None:
        """The position `token` stands for in `listing`; None for no token (the first page).

        Raises:
            InvalidInput: naming `field`, when this process gave no such token for `listing`.
        """
        if not token:
            return None
        position = self.position(listing, token)
        if position is None:
            raise InvalidInput(
                field,
                f"'{token[:40]}' is not a cursor this server gave for this listing (or kept).",
                fix,
            )
        return position


#: The process's cursors, shared by the MCP resources and the console.
CURSORS = Cursors()
