"""The caller of a service: one owner's view of the shared engine (DESIGN.md §10).

Every service function takes a `Caller`. It resolves scope words against the caller's grants,
resolves ids inside a scope, refuses writes across roles, and stamps accesses with the owner,
the client session and the trace span. Services share these rules through it instead of
through each other's private helpers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..config import Settings
from ..domain.accesses import AccessState, apply_access
from ..domain.schema import AccessRecord, Channel, Memory, normalise_id, now as utc_now
from ..domain.scope import Actor, Scope, owner_role
from ..engine import Engine
from ..errors import AmbiguousId, InvalidInput, NotFound, OwnerForbidden
from ..storage import Store
from ..storage.vectors import VectorIndex
from . import provenance

__all__ = ["Caller"]


class Caller:
    """An owner (and its read grants) acting on the engine."""

    def __init__(self, engine: Engine, actor: Actor) -> None:
        self.engine = engine
        self.actor = actor

    @property
    def store(self) -> Store:
        return self.engine.store

    @property
    def index(self) -> VectorIndex:
        return self.engine.index

    @property
    def settings(self) -> Settings:
        return self.engine.settings

    @property
    def owner(self) -> str:
        return self.actor.owner

    @property
    def role(self) -> str:
        return self.actor.role

    def scope(self, word: str | None = "mine") -> Scope:
        """The scope a scope word resolves to for this caller (see `Actor.scope`).

        Raises:
            InvalidInput: the word is not a scope.
        """
        return self.actor.scope(word)

    def narrowed(self, word: str | None, scope: Scope, done: str = "Searched") -> str:
        """The sentence a read's reply carries when its scope word asked for roles this
        connection has no grant for (`scope` is what it resolved to): the word cannot widen
        what the connection reads (DESIGN.md §10), and the reader is told. "" otherwise."""
        asked = (word or "mine").strip()
        if asked in ("mine", "instance", self.role) or scope != self.actor.own:
            return ""
        searched = f"{self.role} and shared" if self.role else "shared"
        return f"{done} only {searched} memories: this connection has no read grant for {asked!r}."

    async def resolve(self, ident: Any, scope: Scope, field: str = "memory_id") -> str:
        """Full id of a visible memory; a memory outside the scope does not exist here.

        Raises:
            InvalidInput / AmbiguousId / NotFound: as the id rules say (DESIGN.md §2.5).
        """
        if not isinstance(ident, str):
            raise InvalidInput(field, f"{ident!r} is not an id.", "Pass an id or 8-char prefix.")
        # Resolved inside the scope: another owner's id prefixes are neither a match nor
        # an ambiguity, and never listed.
        try:
            memory_id = await self.store.resolve_id(normalise_id(ident, field), field, scope)
        except AmbiguousId as several:
            # Nor are another role's forgotten memories (`withdrawn`).
            gone = await self.withdrawn_among(several.candidates)
            kept = [c for c in several.candidates if c not in gone]
            if len(kept) > 1:
                raise AmbiguousId(several.prefix, kept, field) from None
            if not kept:
                raise NotFound(ident, field) from None
            memory_id = kept[0]
        owner = (await self.store.owners_of([memory_id])).get(memory_id)
        if owner is None or not scope.allows(owner) or await self.withdrawn(memory_id, owner):
            raise NotFound(ident, field)
        return memory_id

    async def withdrawn(self, memory_id: str, owner: str | None = None) -> bool:
        """Whether `memory_id` is a memory another role forgot, or the user a shared one: a
        read grant, and the shared memories every role sees, reach live and faded memories,
        never what their owner withdrew (DESIGN.md §10). A forgotten memory stays readable by
        id to its own role (the shared owner for a shared one): they may revive it."""
        if owner is not None and owner_role(owner) == self.role:
            return False  # its own role's: no read needed
        return memory_id in await self.withdrawn_among([memory_id])

    async def withdrawn_among(self, memory_ids: Iterable[str]) -> set[str]:
        """Those of `memory_ids` that are `withdrawn` for this caller, in one store read: for
        a view that reaches memories through another (links, the access log)."""
        wanted = list(dict.fromkeys(memory_ids))
        if not wanted:
            return set()
        found = await self.store.fetch_many(wanted)
        return {
            memory_id
            for memory_id, memory in found.items()
            if owner_role(memory.owner) != self.role and memory.archived and not memory.faded
        }

    async def resolve_in_scope(self, ident: Any, scope: Scope, field: str = "memory_id") -> str:
        """`resolve`, for a read that takes a scope word (explain): an id not in `scope` but in
        a role granted to this caller is not found, and the error names that role as the
        scope to pass (a recall with that scope showed it; the default scope does not reach
        it). An ungranted role's id stays plainly not found.

        Raises:
            InvalidInput / AmbiguousId / NotFound: as `resolve`.
        """
        try:
            return await self.resolve(ident, scope, field)
        except NotFound as missing:
            role = await self._granted_role_of(str(ident), field, scope)
            if role is None:
                raise
            raise NotFound(str(ident), field, granted=role) from missing

    async def resolve_writable(
        self, ident: Any, field: str = "memory_id", action: str = "change"
    ) -> str:
        """`resolve` in the caller's own scope, for a write: an id of a role a server-side grant
        lets this caller read (recall shows it) is refused as read-only, naming only that role;
        an id the caller cannot read stays plainly not found (no existence oracle, §10).

        Raises:
            InvalidInput / AmbiguousId / NotFound: as `resolve`.
            OwnerForbidden: the memory is of a role this caller may read but not change.
        """
        try:
            return await self.resolve(ident, self.actor.own, field)
        except NotFound as missing:
            role = await self._granted_role_of(str(ident), field, self.actor.own)
            if role is None:
                raise
            raise OwnerForbidden(self.owner, role, action, granted=True, field=field) from missing

    async def _granted_role_of(self, ident: str, field: str, scope: Scope) -> str | None:
        """The role of a memory outside `scope` that a server-side grant lets this caller read,
        or None."""
        readable = self.actor.effective()
        if readable == scope or not self.actor.grants:
            return None
        try:
            memory_id = await self.store.resolve_id(normalise_id(ident, field), field, readable)
        except (NotFound, AmbiguousId, InvalidInput):
            return None
        owner = (await self.store.owners_of([memory_id])).get(memory_id)
        if owner is None or owner == "" or not readable.allows(owner):
            return None
        if await self.withdrawn(memory_id, owner):
            return None  # forgotten by its role: not there for this caller, by any scope
        return owner_role(owner)

    async def fetch(self, memory_id: str) -> Memory:
        found = await self.store.fetch(memory_id)
        if found is None:
            raise NotFound(memory_id)
        return found

    def may_write(self, owner: str) -> bool:
        """Writes stay inside the writer's role; shared rows belong to the shared owner only."""
        if owner == self.owner:
            return True
        return owner != "" and owner_role(owner) == self.role

    def writable(self, memory: Memory) -> None:
        """Refuse a write the rule of `may_write` does not allow.

        Raises:
            OwnerForbidden: the memory belongs to another role.
        """
        if not self.may_write(memory.owner):
            raise OwnerForbidden(self.owner, memory.owner)

    def access(self, channel: Channel, **fields: Any) -> AccessRecord:
        """An access by this owner now, linked to the client session and the trace span."""
        session_ref, trace_ref = provenance.access_refs()
        return AccessRecord(
            ts=utc_now(),
            channel=channel,
            reader_owner=self.owner,
            session_ref=session_ref,
            trace_ref=trace_ref,
            **fields,
        )

    def uses_count(self, owner: str) -> bool:
        """Whether this reader's use of a memory of `owner` changes it (its age, its strength,
        a faded state): a shared memory counts every role's reads; another role's memory,
        read through a grant, is only logged (DESIGN.md §3.2)."""
        return owner == "" or owner_role(owner) == self.role

    def apply(
        self, memory: Memory | AccessState, access: AccessRecord, bump_strength: bool = True
    ) -> None:
        """Record `access` on `memory`; another role's reads never age this owner's memory."""
        apply_access(
            memory,
            access,
            ring_size=self.settings.ring_size,
            exact_k=self.settings.recall.exact_accesses,
            bump_strength=bump_strength,
            count_for_owner=self.uses_count(memory.owner),
            grain=self.settings.recall.time_grain,
        )

    def note_activity(self, writes: int = 0) -> None:
        self.engine.note_activity(self.role, self.owner, writes)
