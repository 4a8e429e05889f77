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

import numpy as np

from ..domain.reflection import Node
from ..domain.schema import AccessRecord, Edge, Memory
from ..domain.scope import Scope
from .base import EdgeRow, KpiRaw, MaintenanceEntry, RankingReads, ScoringRow, Tombstone
from .rows import (
    SCORING_COLUMNS,
    TODO_ORDER,
    Row,
    access_from_row,
    edge_from_row,
    epoch,
    memory_from_row,
    scoring_from_row,
    time_from_epoch,
    tombstone_from_row,
    vector_of,
)

__all__ = ["POSTGRES", "SQLITE", "Dialect", "SqlVerbs", "scope_where"]


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
    #: The byte length of a blob.
    blob_length: str
    #: The role of an owner column `{c}`: the part before the `@`.
    role_of: str
    #: "the JSON array `tags` holds the text `{name}`, ASCII case folded" (both fold ASCII
    #: only: SQLite's lower(), PostgreSQL's under the C collation).
    has_tag: str

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
    blob_length="length",
    role_of="CASE WHEN instr({c}, '@') > 0 THEN substr({c}, 1, instr({c}, '@') - 1) ELSE {c} END",
    has_tag="EXISTS (SELECT 1 FROM json_each(tags) WHERE lower(value) = lower({name}))",
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

    async def fetch_many(self, ids: Sequence[str]) -> dict[str, Memory]:
        raise NotImplementedError

    async def _blob_rows(self, sql: str, params: Any = ()) -> Sequence[Row]:
        """`_rows` for a read that returns embeddings (PostgreSQL fetches them in binary)."""
        return await self._rows(sql, params)

    # ------------------------------------------------------------------ memories by id

    async def owners_of(self, ids: Sequence[str]) -> dict[str, str]:
        """Owner of each existing memory among `ids`."""
        d = self.dialect
        rows = await self._rows(
            f"SELECT id, owner FROM memories WHERE {d.one_of('id', 'ids')}",
            {"ids": d.values(ids)},
        )
        return {r["id"]: r["owner"] for r in rows}

    async def live_ids(self, ids: Sequence[str]) -> set[str]:
        d = self.dialect
        rows = await self._rows(
            f"SELECT id FROM memories WHERE {d.one_of('id', 'ids')} AND archived = {d.false}",
            {"ids": d.values(ids)},
        )
        return {r["id"] for r in rows}

    async def unembedded(self, dim: int, limit: int) -> list[tuple[str, str, str]]:
        d = self.dialect
        rows = await self._rows(
            "SELECT id, title, content FROM memories WHERE embedding IS NULL "
            f"OR {d.blob_length}(embedding) != {d.p('n')} ORDER BY seq LIMIT {d.p('l')}",
            {"n": dim * 4, "l": limit},
        )
        return [(r["id"], r["title"], r["content"]) for r in rows]

    # ------------------------------------------------------------------ listings

    def _list_where(
        self,
        scope: Scope,
        archived: bool | None,
        type: str | None,
        status: str | None,
        owner: str | None = None,
        tag: str | None = None,
    ) -> tuple[list[str], dict[str, Any]]:
        d = self.dialect
        where, params = scope_where(scope, d, "")
        clauses = [where]
        for column, value in (
            ("archived", archived),
            ("type", type),
            ("status", status),
            ("owner", owner),
        ):
            if value is not None:
                clauses.append(f"{column} = {d.p(column)}")
                params[column] = value
        if tag is not None:
            clauses.append(d.has_tag.format(name=d.p("tag")))
            params["tag"] = tag
        return clauses, params

    async def list_memories(
        self,
        scope: Scope,
        *,
        archived: bool | None = False,
        type: str | None = None,
        status: str | None = None,
        owner: str | None = None,
        tag: str | None = None,
        after_seq: int | None = None,
        limit: int = 50,
    ) -> list[Memory]:
        """Memories in insertion order, for listings and exports (cursor = last seq)."""
        d = self.dialect
        clauses, params = self._list_where(scope, archived, type, status, owner, tag)
        if after_seq is not None:
            clauses.append(f"seq > {d.p('after')}")
            params["after"] = after_seq
        params["limit"] = limit
        rows = await self._rows(
            f"SELECT * FROM memories WHERE {' AND '.join(clauses)} "
            f"ORDER BY seq LIMIT {d.p('limit')}",
            params,
        )
        return [memory_from_row(r) for r in rows]

    async def count_memories(
        self, scope: Scope, *, type: str | None = None, status: str | None = None
    ) -> int:
        clauses, params = self._list_where(scope, False, type, status)
        return await self._scalar(
            f"SELECT count(*) FROM memories WHERE {' AND '.join(clauses)}", params
        )

    async def todo_rows(self, scope: Scope, status: str | None, limit: int) -> list[Memory]:
        """Live todos in todo order: open first, then by importance, then oldest first."""
        clauses, params = self._list_where(scope, False, "todo", status)
        # Order the narrow columns and fetch whole rows only for the ones kept.
        picked = await self._rows(
            f"SELECT id FROM memories WHERE {' AND '.join(clauses)} "
            f"ORDER BY {TODO_ORDER} LIMIT {self.dialect.p('limit')}",
            {**params, "limit": limit},
        )
        order = [r["id"] for r in picked]
        found = await self.fetch_many(order)
        return [found[i] for i in order if i in found]

    async def intents(self, role: str) -> list[Memory]:
        d = self.dialect
        rows = await self._rows(
            f"SELECT * FROM memories WHERE type = 'intent' AND archived = {d.false} "
            f"AND role = {d.p('r')} AND trigger IS NOT NULL ORDER BY seq",
            {"r": role},
        )
        return [memory_from_row(r) for r in rows]

    async def count_accesses(self, memory_id: str) -> int:
        return await self._scalar(
            f"SELECT count(*) FROM accesses WHERE memory_id = {self.dialect.p('m')}",
            {"m": memory_id},
        )

    async def embeddings_of(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        d = self.dialect
        rows = await self._blob_rows(
            f"SELECT id, embedding FROM memories WHERE {d.one_of('id', 'ids')} "
            "AND embedding IS NOT NULL",
            {"ids": d.values(ids)},
        )
        return {r["id"]: vector_of(r["embedding"]) for r in rows}

    def scoring_rows_statement(self, ids: Sequence[str]) -> tuple[str, Any]:
        """The statement of `scoring_rows`, for a backend that sends several in one trip."""
        d = self.dialect
        return (
            f"SELECT {SCORING_COLUMNS} FROM memories m WHERE {d.one_of('m.id', 'ids')}",
            {"ids": d.values(ids)},
        )

    async def scoring_rows(self, ids: Sequence[str]) -> list[ScoringRow]:
        if not ids:
            return []
        rows = await self._rows(*self.scoring_rows_statement(ids))
        return [scoring_from_row(r) for r in rows]

    # ------------------------------------------------------------------ edges

    async def edge_pairs(self, role: str | None, live_only: bool = True) -> list[EdgeRow]:
        """Edges leaving a role's memories (every role for None), by default only between
        live memories."""
        d = self.dialect
        clauses, params = [d.true], dict[str, Any]()
        if role is not None:
            clauses.append(f"a.role = {d.p('role')}")
            params["role"] = role
        if live_only:
            clauses.append(f"a.archived = {d.false} AND b.archived = {d.false}")
        rows = await self._rows(
            "SELECT e.src, e.dst, e.type, e.weight FROM edges e "
            "JOIN memories a ON a.id = e.src JOIN memories b ON b.id = e.dst "
            f"WHERE {' AND '.join(clauses)}",
            params,
        )
        return [edge_from_row(r) for r in rows]

    async def links_of(self, ids: Sequence[str], scope: Scope) -> list[EdgeRow]:
        """Edges with either end in `ids` whose other end is inside `scope`, archived or not."""
        d = self.dialect
        where, params = scope_where(scope, d)
        rows = await self._rows(
            "SELECT e.src, e.dst, e.type, e.weight FROM edges e JOIN memories m ON m.id = e.dst "
            f"WHERE {d.one_of('e.src', 'ids')} AND {where} "
            "UNION SELECT e.src, e.dst, e.type, e.weight FROM edges e "
            f"JOIN memories m ON m.id = e.src WHERE {d.one_of('e.dst', 'ids')} AND {where}",
            {**params, "ids": d.values(ids)},
        )
        return [edge_from_row(r) for r in rows]

    async def edges_of(self, memory_id: str) -> list[Edge]:
        rows = await self._rows(
            f"SELECT dst, type, weight, created_at FROM edges WHERE src = {self.dialect.p('s')} "
            "ORDER BY created_at, dst, type",
            {"s": memory_id},
        )
        return [
            Edge(
                target=r["dst"],
                type=r["type"],
                weight=r["weight"],
                created_at=time_from_epoch(r["created_at"]),
            )
            for r in rows
        ]

    def out_edges_statement(self, sources: Sequence[str], scope: Scope) -> tuple[str, Any]:
        """The statement of `out_edges`, for a backend that sends several in one trip."""
        d = self.dialect
        where, params = scope_where(scope, d)
        return (
            "SELECT e.src, e.dst, e.type, e.weight FROM edges e JOIN memories m ON m.id = e.dst "
            f"WHERE {d.one_of('e.src', 'ids')} AND m.archived = {d.false} AND {where}",
            {**params, "ids": d.values(sources)},
        )

    async def out_edges(self, sources: Sequence[str], scope: Scope) -> list[EdgeRow]:
        """Outgoing edges of `sources` whose targets are live and inside `scope`: archived
        targets and targets outside the reader's scope are dropped here, before spreading
        ever sees them, so they neither appear nor relay (DESIGN §5.6)."""
        rows = await self._rows(*self.out_edges_statement(sources, scope))
        return [edge_from_row(r) for r in rows]

    def successors_statement(
        self, targets: Sequence[str], relations: Sequence[str], scope: Scope
    ) -> tuple[str, Any]:
        """The statement of `successors`, for a backend that sends several in one trip."""
        d = self.dialect
        where, params = scope_where(scope, d)
        return (
            "SELECT e.src, e.dst, e.type, e.weight FROM edges e JOIN memories m ON m.id = e.src "
            f"WHERE {d.one_of('e.dst', 'ids')} AND {d.one_of('e.type', 'rel')} "
            f"AND m.archived = {d.false} AND {where}",
            {**params, "ids": d.values(targets), "rel": d.values(relations)},
        )

    async def successors(
        self, targets: Sequence[str], relations: Sequence[str], scope: Scope
    ) -> list[EdgeRow]:
        """Live, visible memories that point at `targets` with one of `relations`."""
        rows = await self._rows(*self.successors_statement(targets, relations, scope))
        return [edge_from_row(r) for r in rows]

    async def ranking_reads(
        self,
        ids: Sequence[str],
        scope: Scope,
        relations: Sequence[str],
        *,
        rows: bool,
        out: bool,
        into: bool,
        links: Sequence[str] | None = None,
    ) -> RankingReads:
        """See `Store.ranking_reads`: one read after another. SQLite reads on the event
        loop's thread, so there is no trip to save; PostgreSQL pipelines them instead."""
        around = ids if links is None else links
        return RankingReads(
            await self.scoring_rows(ids) if rows and ids else [],
            await self.out_edges(around, scope) if out and around else [],
            await self.successors(around, relations, scope) if into and around else [],
        )

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

    def _stone_by_hash_sql(self) -> str:
        """`tombstone_by_hash`'s statement (parameters h, r): PostgreSQL also sends it ahead,
        in `find_by_hash`'s pipeline."""
        d = self.dialect
        return (
            "SELECT t.* FROM tombstones t JOIN memories m ON m.id = t.memory_id "
            f"WHERE t.content_hash = {d.p('h')} AND t.role = {d.p('r')} "
            f"AND t.lifted_at IS NULL AND m.archived = {d.true} "
            "ORDER BY t.ts DESC, t.seq DESC LIMIT 1"
        )

    async def tombstone_by_hash(self, content_hash: str, role: str) -> Tombstone | None:
        """The newest standing tombstone of this role with exactly this content."""
        rows = await self._rows(self._stone_by_hash_sql(), {"h": content_hash, "r": role})
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

    # ------------------------------------------------------------------ reflection, stats

    async def reflection_nodes(self, role: str | None) -> tuple[list[Node], np.ndarray]:
        """Live rows reflection plans over (one role, or every role) and their vectors."""
        d = self.dialect
        where, params = d.true, dict[str, Any]()
        if role is not None:
            where, params = f"role = {d.p('role')}", {"role": role}
        rows = await self._blob_rows(
            "SELECT id, type, owner, status, importance, authored_importance, salience, "
            "confidence, strength, reinforcement_count, created_at, last_accessed_at, archived, "
            f"embedding FROM memories WHERE archived = {d.false} AND {where} ORDER BY seq",
            params,
        )
        dim = next((len(r["embedding"]) // 4 for r in rows if r["embedding"] is not None), 0)
        vectors = np.zeros((len(rows), dim), dtype=np.float32)
        nodes = []
        for i, r in enumerate(rows):
            blob = r["embedding"]
            if blob is not None and len(blob) == dim * 4:
                vectors[i] = np.frombuffer(blob, dtype=np.float32)
            authored = r["authored_importance"]
            nodes.append(
                Node(
                    id=r["id"],
                    type=r["type"],
                    owner=r["owner"],
                    created_at=time_from_epoch(r["created_at"]),
                    last_accessed_at=time_from_epoch(r["last_accessed_at"]),
                    importance=r["importance"],
                    authored_importance=r["importance"] if authored is None else authored,
                    salience=r["salience"],
                    confidence=r["confidence"],
                    strength=r["strength"],
                    reinforcement_count=r["reinforcement_count"],
                    status=r["status"],
                    archived=bool(r["archived"]),
                    row=i,
                )
            )
        return nodes, vectors

    async def access_stream(
        self,
        memory_id: str | None,
        limit: int,
        before_seq: int | None = None,
        scope: Scope | None = None,
    ) -> list[tuple[int, str, AccessRecord]]:
        """Newest-first accesses of one memory, or of every memory in `scope`."""
        d = self.dialect
        clauses, params = [d.true], dict[str, Any](limit=limit)
        if memory_id is not None:
            clauses.append(f"a.memory_id = {d.p('mid')}")
            params["mid"] = memory_id
        if before_seq is not None:
            clauses.append(f"a.seq < {d.p('before')}")
            params["before"] = before_seq
        join = ""
        if scope is not None:
            where, visible = scope_where(scope, d)
            join = "JOIN memories m ON m.id = a.memory_id"
            clauses.append(where)
            params.update(visible)
        rows = await self._rows(
            f"SELECT a.* FROM accesses a {join} WHERE {' AND '.join(clauses)} "
            f"ORDER BY a.seq DESC LIMIT {d.p('limit')}",
            params,
        )
        return [(r["seq"], r["memory_id"], access_from_row(r)) for r in rows]

    async def kpi_rows(self, scope: Scope, reads: Sequence[str]) -> KpiRaw:
        """Raw numbers for the KPIs in stats, every one of them inside `scope`."""
        d = self.dialect
        where, params = scope_where(scope, d)
        params = {**params, "reads": d.values(reads)}
        live = f"m.archived = {d.false}"
        counts = {
            r["memory_id"]: r["n"]
            for r in await self._rows(
                "SELECT a.memory_id, count(*) AS n FROM accesses a JOIN memories m "
                f"ON m.id = a.memory_id WHERE {d.one_of('a.channel', 'reads')} "
                f"AND {live} AND {where} GROUP BY a.memory_id",
                params,
            )
        }
        derived = {
            r["src"]
            for r in await self._rows(
                "SELECT DISTINCT e.src FROM edges e JOIN memories m ON m.id = e.src "
                f"WHERE e.type = 'derived_from' AND {live} AND {where}",
                params,
            )
        }
        per_memory = [
            (r["id"], r["type"], r["id"] in derived, counts.get(r["id"], 0))
            for r in await self._rows(
                f"SELECT m.id, m.type FROM memories m WHERE {live} AND {where} ORDER BY m.seq",
                params,
            )
        ]
        todos = await self._rows(
            f"SELECT status, created_at FROM memories m WHERE m.type = 'todo' AND {where} "
            f"AND {live} ORDER BY m.seq",
            params,
        )
        # A read is cross-owner when the reader's role differs from the memory's (shared rows
        # and unnamed readers never count).
        cross = await self._scalar(
            "SELECT count(*) FROM accesses a JOIN memories m ON m.id = a.memory_id "
            f"WHERE {d.one_of('a.channel', 'reads')} AND m.owner != '' "
            f"AND a.reader_owner != '' AND m.role != {d.role_of.format(c='a.reader_owner')} "
            f"AND {where}",
            params,
        )
        tombstones = await self._scalar(
            "SELECT count(*) FROM tombstones t JOIN memories m ON m.id = t.memory_id "
            f"WHERE t.lifted_at IS NULL AND {where}",
            params,
        )
        # Edges and accesses the scope can see: both ends visible, the accessed memory visible.
        b_where, b_params = scope_where(scope, d, "b", "dst")
        edges = await self._scalar(
            "SELECT count(*) FROM edges e JOIN memories m ON m.id = e.src "
            f"JOIN memories b ON b.id = e.dst WHERE {where} AND {b_where}",
            {**params, **b_params},
        )
        accesses = await self._scalar(
            f"SELECT count(*) FROM accesses a JOIN memories m ON m.id = a.memory_id WHERE {where}",
            params,
        )
        return KpiRaw(
            per_memory=per_memory,
            todos=[(r["status"], time_from_epoch(r["created_at"])) for r in todos],
            cross_owner_reads=cross,
            tombstones=tombstones,
            edges=edges,
            accesses=accesses,
        )
