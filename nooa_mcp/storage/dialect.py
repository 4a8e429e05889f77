"""How each backend spells the SQL written once, and the statements the hooks share.

Standard library only, and not even `typing` or `dataclasses`: the hook's fast path
(`storage.quick`) builds its reads from this module, in a process with ~150 ms to answer, and
the async core (`storage.sql_core`) builds the same statements from it for both stores.

SQLite and PostgreSQL differ here only in spelling: placeholders (`:name`, `%(name)s`),
booleans (0/1, false/true), reading a JSON field, a list parameter (`json_each` over a JSON
array, `= ANY` over an array), the larger of two values, an index hint, and how a row's
revision moves (SQLite's statements set it; PostgreSQL's trigger does).
"""

from __future__ import annotations

import json

#: False when run; a type checker reads it as true (pyproject's [tool.mypy] always_true):
#: `typing` costs the hook's fast path, so these imports are for the checker alone.
FOR_TYPE_CHECKERS = False
if FOR_TYPE_CHECKERS:
    from collections.abc import Callable, Sequence
    from typing import Any

    from ..domain.scope import Scope

__all__ = [
    "COMMON_FLOOR",
    "COMMON_SHARE",
    "NEXT_REV",
    "POSTGRES",
    "SQLITE",
    "Dialect",
    "intents_sql",
    "reflection_columns",
    "role_where",
    "scope_where",
]

#: A keyword in at least max(COMMON_FLOOR, COMMON_SHARE·rows) memories is too common to
#: generate candidates: its IDF is near zero, so it hardly moves the ranking, and ranking it
#: costs as much as the rows it matches (a "max_df" cut-off). Both backends and the hooks
#: apply it.
COMMON_FLOOR = 1000
COMMON_SHARE = 0.01

#: SQLite's store-wide next revision as an SQL expression (memories_rev index: O(log n)).
#: Every write bumps it inside its own statement, so a vector cache in any process can pull
#: exactly the rows that changed since it last looked, without an extra round trip per write.
#: Writers are serialised by the file's write lock, so revisions commit in order.
NEXT_REV = "(SELECT coalesce(max(rev), 0) + 1 FROM memories)"


class Dialect:
    """How one backend spells what the shared verbs need."""

    __slots__ = (
        "blob_length",
        "false",
        "flag",
        "greatest",
        "has_tag",
        "hints",
        "json_text",
        "member",
        "name",
        "placeholder",
        "rev",
        "role_of",
        "true",
    )

    def __init__(
        self,
        *,
        name: str,
        true: str,
        false: str,
        placeholder: str,
        json_text: str,
        member: str,
        blob_length: str,
        role_of: str,
        has_tag: str,
        greatest: str,
        flag: Callable[[bool], Any],
        rev: str | None,
        hints: bool,
    ) -> None:
        self.name = name
        #: The boolean literals.
        self.true = true
        self.false = false
        #: A named placeholder, with `{}` for the name.
        self.placeholder = placeholder
        #: A JSON object column's text field, with `{column}` and `{key}`.
        self.json_text = json_text
        #: "`{column}` is one of the list parameter `{name}`" (see `values`).
        self.member = member
        #: The byte length of a blob.
        self.blob_length = blob_length
        #: The role of an owner column `{c}`: the part before the `@`.
        self.role_of = role_of
        #: "the JSON array `tags` holds the text `{name}`, ASCII case folded" (both fold
        #: ASCII only: SQLite's lower(), PostgreSQL's under the C collation).
        self.has_tag = has_tag
        #: The larger of two values (an upsert keeps an edge's larger weight).
        self.greatest = greatest
        #: A flag as a parameter (SQLite's 0/1, PostgreSQL's boolean).
        self.flag = flag
        #: The next revision, set by every statement that changes what vector caches hold;
        #: None where the database sets it itself (PostgreSQL's trigger).
        self.rev = rev
        #: Whether `INDEXED BY` hints are spelled (SQLite's planner, without statistics,
        #: picks a worse index on some reads; PostgreSQL has statistics and no hints).
        self.hints = hints

    def p(self, name: str) -> str:
        """The placeholder of the parameter `name`."""
        return self.placeholder.format(name)

    def field(self, column: str, key: str) -> str:
        """The text of `key` in the JSON object of `column`."""
        return self.json_text.format(column=column, key=key)

    def one_of(self, column: str, name: str) -> str:
        """The condition "`column` is in the list parameter `name`"."""
        return self.member.format(column=column, name=self.p(name))

    def values(self, values: Sequence[Any]) -> Any:
        """A list parameter as the backend takes it (see `one_of`): SQLite reads a JSON
        array with json_each (one parameter, however long the list); PostgreSQL an array."""
        return json.dumps(list(values)) if self.name == "sqlite" else list(values)

    def indexed(self, index: str) -> str:
        """` INDEXED BY index` where the backend takes hints, else nothing."""
        return f" INDEXED BY {index}" if self.hints else ""

    def set_rev(self) -> str:
        """`, rev = <next>` for an UPDATE's SET where statements move the revision."""
        return "" if self.rev is None else f", rev = {self.rev}"


SQLITE = Dialect(
    name="sqlite",
    true="1",
    false="0",
    placeholder=":{}",
    json_text="json_extract({column}, '$.{key}')",
    member="{column} IN (SELECT value FROM json_each({name}))",
    blob_length="length",
    role_of="CASE WHEN instr({c}, '@') > 0 THEN substr({c}, 1, instr({c}, '@') - 1) ELSE {c} END",
    has_tag="EXISTS (SELECT 1 FROM json_each(tags) WHERE lower(value) = lower({name}))",
    greatest="max",
    flag=int,
    rev=NEXT_REV,
    hints=True,
)
POSTGRES = Dialect(
    name="postgresql",
    true="true",
    false="false",
    placeholder="%({})s",
    json_text="{column}->>'{key}'",
    member="{column} = ANY({name})",
    blob_length="octet_length",
    role_of="split_part({c}, '@', 1)",
    has_tag=(
        "EXISTS (SELECT 1 FROM jsonb_array_elements_text(tags) t "
        'WHERE lower(t COLLATE "C") = lower({name}::text COLLATE "C"))'
    ),
    greatest="greatest",
    flag=bool,
    rev=None,
    hints=False,
)


def scope_where(
    scope: Scope, d: Dialect, alias: str = "m", name: str = "scope"
) -> tuple[str, dict[str, Any]]:
    """The visibility rule of `Scope.allows` as an SQL condition and its named parameters
    (`name` prefixes them, so one statement can hold two scopes)."""
    p = f"{alias}." if alias else ""
    if scope.owner is not None:
        return f"({p}owner = '' OR {p}owner = {d.p(name + '_owner')})", {
            f"{name}_owner": scope.owner
        }
    if scope.roles is None:
        return d.true, {}
    roles = f"{name}_roles"
    return (
        f"({p}owner = '' OR {d.one_of(p + 'role', roles)})",
        {roles: d.values(sorted(scope.roles))},
    )


def role_where(role: str, d: Dialect, alias: str = "m", name: str = "role") -> tuple[str, dict]:
    """What one role sees (`Actor.own`: its rows and the shared ones), as `scope_where` of
    that scope but with the role compared, not looked up in a list: the hook's reads."""
    return f"({alias}.owner = '' OR {alias}.role = {d.p(name)})", {name: role}


def intents_sql(d: Dialect, columns: str = "*") -> str:
    """Live intents of the role `role` and shared ones that carry a trigger, oldest first (the
    store's `intents` and the hook's). A shared intent (owner "", set from the CLI or an
    import) fires for whichever role's call meets it first, as its shared todos show to
    every role at session start."""
    where, _ = role_where("", d)
    return (
        f"SELECT {columns} FROM memories m WHERE m.type = 'intent' AND m.archived = {d.false} "
        f"AND {where} AND m.trigger IS NOT NULL ORDER BY m.seq"
    )


def reflection_columns(d: Dialect) -> str:
    """What a reflection pass reads of a row (`domain.reflection.Rows`), in its order; an
    intent's status is `domain.forgetting.intent_status` of its trigger (spent: fired once,
    never re-armed), read here so the prune rule sees it without the trigger's JSON; its last
    use is where forgetting's clock starts (a later `valid_from` starts it)."""
    from ..domain.forgetting import SPENT  # here: the hook's fast path never reads it

    fired = f"CAST({d.field('trigger', 'fired_count')} AS INTEGER)"
    spent = (
        f"CASE WHEN type = 'intent' AND {d.field('trigger', 'every_hours')} IS NULL "
        f"AND coalesce({fired}, 0) > 0 THEN '{SPENT}' ELSE status END"
    )
    # Forgetting's clock (`domain.forgetting.fading_since`): a later valid_from starts it.
    clock = f"{d.greatest}(last_accessed_at, coalesce(valid_from, last_accessed_at))"
    return (
        f"seq, id, type, owner, {spent} AS status, importance, authored_importance, salience, "
        f"confidence, strength, reinforcement_count, created_at, {clock}, "
        "coalesce(first_access_at, created_at)"
    )
