"""Owners and read scopes: who a memory belongs to and who may see it (DESIGN.md §10).

Pure. An owner is `role[@instance]`; `""` is the shared owner, whose rows every scope sees.
A `Scope` is the set of owners a reader sees. It is resolved from the scope word a tool
argument carries *and* the grants the server configured: the word can narrow what the caller
sees, never widen it (a model-filled argument is not an authority).

The visibility rule lives here once (`Scope.allows`); storage renders the same rule as SQL and
the vector index as a mask.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..errors import InvalidInput

__all__ = [
    "ALL_ROLES",
    "OTHER_READER",
    "Actor",
    "Scope",
    "owner_from_client_name",
    "owner_role",
    "parse_owner",
    "parse_roles",
]

#: A grant that lets a connection read every role.
ALL_ROLES = "*"

#: The reader of an imported access that another reader than the memory's owner made in the
#: store it came from: an export says only that it was another reader, never its name. Not a
#: valid owner, so no scope but every role's reads it (`Scope.allows`), no owner can be it,
#: and stats counts its reads of a role's memory as another role's (`cross_owner_reads`).
OTHER_READER = "(another reader)"

# ASCII letters, digits, dot and hyphen: no zero-width, right-to-left, NUL or look-alike
# characters, so one owner can never display as another.
_OWNER_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]{0,63}$")
_OWNER_FIX = (
    "Use role or role@instance; each part is 1–64 ASCII letters, digits, '.' or '-', "
    "starting with a letter or digit."
)


def parse_owner(owner: str, field: str = "owner") -> tuple[str, str]:
    """Split `role[@instance]` into (role, instance); `""` is the shared owner.

    Raises:
        InvalidInput: a part is empty or holds anything outside the owner alphabet.
    """
    if not isinstance(owner, str):
        raise InvalidInput(field, f"{owner!r} is not an owner.", _OWNER_FIX)
    if owner == "":
        return "", ""
    role, at, instance = owner.partition("@")
    if not _OWNER_PART.fullmatch(role) or (at and not _OWNER_PART.fullmatch(instance)):
        raise InvalidInput(field, f"{owner!r} is not a valid owner.", _OWNER_FIX)
    return role, instance


def owner_role(owner: str) -> str:
    return owner.partition("@")[0]


def owner_from_client_name(name: str | None) -> str:
    """Derive an owner from an MCP client's name ("Claude Desktop" → "claude-desktop")."""
    slug = re.sub(r"[^a-z0-9.-]+", "-", (name or "").lower()).strip("-.")
    return slug[:64].strip("-.") or "agent"


def parse_roles(value: str | Iterable[str] | None, field: str = "read") -> frozenset[str]:
    """Read grants from configuration: roles (or `*`), comma-separated or as a list.

    Raises:
        InvalidInput: a role is not a valid owner role.
    """
    if value is None:
        return frozenset()
    items = value.split(",") if isinstance(value, str) else list(value)
    roles: set[str] = set()
    for item in items:
        if not isinstance(item, str):
            raise InvalidInput(field, f"{item!r} is not a role.", "List role names, or '*'.")
        role = item.strip()
        if not role:
            continue
        if role != ALL_ROLES:
            parsed, instance = parse_owner(role, field)
            if instance:
                raise InvalidInput(
                    field, f"'{role}' names an instance.", "Grant roles (no @instance), or '*'."
                )
            role = parsed
        roles.add(role)
    return frozenset(roles)


@dataclass(frozen=True)
class Scope:
    """The owners a reader sees. Shared rows (owner "") are visible to every scope.

    - `owner` set: exactly that owner (plus shared).
    - otherwise `roles` set: every owner of those roles (plus shared).
    - otherwise (`roles is None`): every owner.
    """

    roles: frozenset[str] | None = frozenset()
    owner: str | None = None

    def allows(self, owner: str) -> bool:
        if owner == "":
            return True
        if self.owner is not None:
            return owner == self.owner
        return self.roles is None or owner_role(owner) in self.roles

    def shows_reads_of(self, reader: str) -> bool:
        """Whether a read by `reader` shows to this scope with its reader, query and score.

        As `allows`, except for the shared owner: its rows are every role's, but its reads
        are the user's own (a CLI recall without --owner) and show
        only to the shared owner itself, or to a reader granted every role.
        """
        if reader != "":
            return self.allows(reader)
        if self.owner is not None:
            return self.owner == ""
        return self.roles is None or "" in self.roles

    @property
    def visible_roles(self) -> frozenset[str] | None:
        """The roles whose rows this scope may see besides the shared ones (None: every
        role): what a cache holding only some roles must hold before it searches."""
        if self.owner is not None:
            return frozenset({owner_role(self.owner)})
        return self.roles

    @property
    def everyone(self) -> bool:
        return self.owner is None and self.roles is None

    def describe(self) -> list[str]:
        """The roles searched, for a reply: e.g. ["alice", "(shared)"]. The shared role is
        named "(shared)", never "" (an empty name reads as nothing searched)."""
        if self.owner is not None:
            return [self.owner, "(shared)"] if self.owner else ["(shared)"]
        if self.roles is None:
            return ["*"]
        return [*sorted(r for r in self.roles if r), "(shared)"]


@dataclass(frozen=True)
class Actor:
    """Who is asking: an owner and the roles the server granted it read access to.

    `scope(word)` turns the model-filled scope word into what the caller may actually read:
    `mine` (own role + shared, the default), `instance` (exactly this owner + shared), `*`
    (own role + granted roles), or a role / owner, which is honoured only when it is the
    caller's own role or a granted one and otherwise falls back to `mine`.
    """

    owner: str
    grants: frozenset[str] = field(default_factory=frozenset)

    @property
    def role(self) -> str:
        return owner_role(self.owner)

    @property
    def own(self) -> Scope:
        """The caller's own role and shared rows (writes, dedup, reflection, injection)."""
        return Scope(frozenset({self.role}))

    def readable_roles(self) -> frozenset[str] | None:
        """Every role this caller may read (None: all)."""
        if ALL_ROLES in self.grants:
            return None
        return frozenset({self.role}) | self.grants

    def may_read_role(self, role: str) -> bool:
        roles = self.readable_roles()
        return roles is None or role in roles

    def effective(self) -> Scope:
        """Everything this caller may read: for redaction and notifications."""
        return Scope(self.readable_roles())

    def scope(self, word: str | None = "mine") -> Scope:
        """Resolve a scope word (DESIGN.md §10).

        Raises:
            InvalidInput: the word is neither mine, instance, * nor a valid owner.
        """
        value = (word or "mine").strip()
        if value == "mine":
            return self.own
        if value == "instance":
            return Scope(owner=self.owner) if self.owner else self.own
        if value == ALL_ROLES:
            return Scope(self.readable_roles())
        try:
            role, instance = parse_owner(value, "scope")
        except InvalidInput:
            raise InvalidInput(
                "scope",
                f"{word!r} is not a scope.",
                "Use mine, instance, * or an owner such as role or role@instance.",
            ) from None
        if not self.may_read_role(role):
            # A model-filled argument narrows, never widens: without a grant, fall back.
            return self.own
        return Scope(owner=value) if instance else Scope(frozenset({role}))
