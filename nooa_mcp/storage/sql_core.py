"""The Store verbs that are the same SQL on both backends, written once over a dialect.

SQLite and PostgreSQL differ here only in spelling: placeholders (`:name`, `%(name)s`),
booleans (0/1, false/true), reading a JSON field, and a list parameter (`json_each` over a
JSON array, `= ANY` over an array). `Dialect` spells those; `SqlVerbs` holds the verbs and
runs them through three primitives each backend has (`_rows`, `_scalar`, `_exec`, all with
named parameters). What a backend does its own way — keyword search (FTS5 against the SQL
BM25), change tracking (WAL and revisions against snapshots and LISTEN), locks, connections
— stays in its module.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .base import MaintenanceEntry, Tombstone
from .rows import Row, epoch, time_from_epoch, tombstone_from_row

__all__ = ["POSTGRES", "SQLITE", "Dialect", "SqlVerbs"]


@dataclass(frozen=True)
class Dialect:
    """How one backend spells what the shared verbs need."""

    name: str
    #: The boolean literals.
    true: str
    false: str
    #: A named placeholder, with `{}` for the name.
    placeholder: str
    #: A JSON object column's text field, with `{column}` and `{key}`.
    json_text: str
    #: "`{column}` is one of the list parameter `{name}`" (see `values`).
    member: str

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


SQLITE = Dialect(
    name="sqlite",
    true="1",
    false="0",
    placeholder=":{}",
    json_text="json_extract({column}, '$.{key}')",
    member="{column} IN (SELECT value FROM json_each({name}))",
)
POSTGRES = Dialect(
    name="postgresql",
    true="true",
    false="false",
    placeholder="%({})s",
    json_text="{column}->>'{key}'",
    member="{column} = ANY({name})",
)


class SqlVerbs:
    """Store verbs written once (see the module's docstring); a backend's store class
    inherits them and provides `dialect` and the primitives."""

    dialect: Dialect

    async def _rows(self, sql: str, params: Any = ()) -> Sequence[Row]:
        raise NotImplementedError

    async def _scalar(self, sql: str, params: Any = ()) -> Any:
        raise NotImplementedError

    async def _exec(self, sql: str, params: Any = ()) -> Any:
        raise NotImplementedError

    # ------------------------------------------------------------------ meta

    async def get_meta(self, key: str) -> str | None:
        p = self.dialect.p
        return await self._scalar(f"SELECT value FROM meta WHERE key = {p('k')}", {"k": key})

    async def set_meta(self, key: str, value: str) -> None:
        p = self.dialect.p
        await self._exec(
            f"INSERT INTO meta(key, value) VALUES ({p('k')}, {p('v')}) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            {"k": key, "v": value},
        )

    # ------------------------------------------------------------------ tombstones

    async def add_tombstone(self, memory_id: str, reason: str, when: datetime) -> None:
        """Record what was archived and why, from the memory's own row (DESIGN §2.6)."""
        p = self.dialect.p
        await self._exec(
            "INSERT INTO tombstones(memory_id, owner, role, type, content_hash, embedding, "
            f"reason, ts) SELECT id, owner, role, type, content_hash, embedding, {p('r')}, "
            f"{p('t')} FROM memories WHERE id = {p('i')}",
            {"r": reason, "t": epoch(when), "i": memory_id},
        )

    async def lift_tombstones(self, memory_id: str, when: datetime) -> None:
        p = self.dialect.p
        await self._exec(
            f"UPDATE tombstones SET lifted_at = {p('t')} "
            f"WHERE memory_id = {p('i')} AND lifted_at IS NULL",
            {"t": epoch(when), "i": memory_id},
        )

    async def tombstone_by_hash(self, content_hash: str, role: str) -> Tombstone | None:
        """The newest standing tombstone of this role with exactly this content."""
        d = self.dialect
        rows = await self._rows(
            "SELECT t.* FROM tombstones t JOIN memories m ON m.id = t.memory_id "
            f"WHERE t.content_hash = {d.p('h')} AND t.role = {d.p('r')} "
            f"AND t.lifted_at IS NULL AND m.archived = {d.true} "
            "ORDER BY t.ts DESC, t.seq DESC LIMIT 1",
            {"h": content_hash, "r": role},
        )
        return tombstone_from_row(rows[0]) if rows else None

    async def tombstones_of(self, memory_ids: Sequence[str]) -> dict[str, Tombstone]:
        """Standing tombstones (newest per memory) of archived memories among `memory_ids`."""
        d = self.dialect
        rows = await self._rows(
            "SELECT t.* FROM tombstones t JOIN memories m ON m.id = t.memory_id "
            f"WHERE {d.one_of('t.memory_id', 'ids')} AND t.lifted_at IS NULL "
            f"AND m.archived = {d.true} ORDER BY t.ts, t.seq",
            {"ids": d.values(memory_ids)},
        )
        return {r["memory_id"]: tombstone_from_row(r) for r in rows}

    async def all_tombstones(self, memory_ids: Sequence[str]) -> dict[str, list[Tombstone]]:
        """Every tombstone (lifted ones too) of these memories, oldest first: for export."""
        d = self.dialect
        rows = await self._rows(
            f"SELECT * FROM tombstones WHERE {d.one_of('memory_id', 'ids')} ORDER BY ts, seq",
            {"ids": d.values(memory_ids)},
        )
        out: dict[str, list[Tombstone]] = {}
        for r in rows:
            out.setdefault(r["memory_id"], []).append(tombstone_from_row(r))
        return out

    # ------------------------------------------------------------------ maintenance log

    async def log_maintenance(self, kind: str, report: dict[str, Any]) -> None:
        p = self.dialect.p
        await self._exec(
            f"INSERT INTO maintenance_log(ts, kind, report) VALUES ({p('t')}, {p('k')}, {p('r')})",
            {
                "t": datetime.now(UTC).timestamp(),
                "k": kind,
                "r": json.dumps(report, default=str),
            },
        )

    async def maintenance_entries(
        self, kind: str | None = None, limit: int = 20, role: str | None = None
    ) -> list[MaintenanceEntry]:
        d = self.dialect
        clauses, params = [d.true], dict[str, Any](limit=limit)
        if kind is not None:
            clauses.append(f"kind = {d.p('kind')}")
            params["kind"] = kind
        if role is not None:
            clauses.append(f"{d.field('report', 'role')} = {d.p('role')}")
            params["role"] = role
        rows = await self._rows(
            f"SELECT seq, ts, kind, report FROM maintenance_log WHERE {' AND '.join(clauses)} "
            f"ORDER BY seq DESC LIMIT {d.p('limit')}",
            params,
        )
        return [
            MaintenanceEntry(r["seq"], time_from_epoch(r["ts"]), r["kind"], json.loads(r["report"]))
            for r in rows
        ]

    async def count_maintenance(self, kind: str, role: str | None = None) -> int:
        d = self.dialect
        where, params = f"kind = {d.p('k')}", {"k": kind}
        if role is not None:
            where += f" AND {d.field('report', 'role')} = {d.p('r')}"
            params["r"] = role
        return await self._scalar(f"SELECT count(*) FROM maintenance_log WHERE {where}", params)
