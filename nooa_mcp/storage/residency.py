"""Which roles' vectors a process holds (DESIGN.md §15).

A server in front of a shared database serves a few roles; holding every role's vectors made
each of N servers pay for the whole store. The vector index (`storage.vectors`) asks this
object which roles it holds, loads a role's rows the first time a scope that can see it is
searched, pulls changes only for the roles it holds, and lets go of the roles idle longer
than `idle_seconds`, or the least recently used beyond `max_roles`.

Pure bookkeeping: no rows, no store. The shared role `""` (owner `""`) is visible to every
scope, so it is held whenever any role is, and never let go on its own.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

__all__ = ["Residency"]

#: The shared owner's role: every scope sees it.
SHARED = ""


class Residency:
    """The roles held, each with when it was last used (least recent first)."""

    def __init__(
        self,
        idle_seconds: float = 600.0,
        max_roles: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        #: Roles unused this long are let go (0: never for idleness).
        self.idle_seconds = idle_seconds
        #: At most this many roles besides the shared one (0: no bound).
        self.max_roles = max_roles
        self.clock = clock
        #: Every role is held (a scope that sees every role was searched): changes are pulled
        #: for all, and nothing is let go until a release drops back to named roles.
        self.everything = False
        self._all_used = 0.0
        self._used: OrderedDict[str, float] = OrderedDict()
        #: Roles being loaded (None: every role): their changes are pulled already, so none
        #: made while the load reads is missed, but no search counts on them yet.
        self.loading: set[str] | None = set()

    @property
    def roles(self) -> list[str]:
        """The roles held, the shared one included, in no particular order."""
        return list(self._used)

    def holds(self, role: str) -> bool:
        return self.everything or role in self._used

    def missing(self, roles: frozenset[str] | None) -> list[str] | None:
        """Of the roles a scope sees (None: every role), those not held; None means "every
        role", still to be loaded; [] means nothing to load."""
        if roles is None:
            return [] if self.everything else None
        if self.everything:
            return []
        return sorted(r for r in {*roles, SHARED} if r not in self._used)

    def filter(self) -> list[str] | None:
        """The roles whose changes a sync pulls (None: every role's): those held and those
        being loaded."""
        if self.everything or self.loading is None:
            return None
        return sorted({*self._used, *self.loading})

    def add(self, roles: Iterable[str] | None) -> None:
        """These roles' rows are now loaded (None: every role's)."""
        now = self.clock()
        if roles is None:
            self.everything = True
            self._all_used = now
            return
        for role in {*roles, SHARED}:
            self._used.setdefault(role, now)

    def touch(self, roles: Iterable[str] | None) -> None:
        """These roles were just used (None: every role). While every role is held, a named
        role used is remembered, so it stays when the whole store is let go."""
        now = self.clock()
        if roles is None:
            self._all_used = now
            return
        for role in {*roles, SHARED}:
            if self.everything or role in self._used:
                self._used[role] = now
                self._used.move_to_end(role)

    def keep(self) -> set[str] | None:
        """The roles to keep when some are due to go (None: none is): the named roles idle
        past `idle_seconds` go, then the least recently used beyond `max_roles`; every
        role not named goes when the whole store was held and no scope that sees every
        role was searched for `idle_seconds`. The shared role stays while any named one
        does."""
        now = self.clock()
        named = [r for r in self._used if r != SHARED]
        going = set()
        if self.idle_seconds > 0:
            going = {r for r in named if now - self._used[r] >= self.idle_seconds}
        kept = [r for r in named if r not in going]
        if self.max_roles > 0 and len(kept) > self.max_roles:
            going.update(kept[: len(kept) - self.max_roles])
            kept = kept[len(kept) - self.max_roles :]
        whole_idle = (
            self.everything and self.idle_seconds > 0 and now - self._all_used >= self.idle_seconds
        )
        if self.everything and not whole_idle:
            return None  # the whole store is in use: nothing goes
        if not going and not self.everything:
            return None
        return {*kept, SHARED} if kept else set()

    def keep_only(self, kept: set[str]) -> None:
        """The index now holds only these roles' rows."""
        self.everything = False
        self._used = OrderedDict((r, t) for r, t in self._used.items() if r in kept)
