"""The Store verbs written once that report on a whole store or role, beside `sql_core`'s.

The maintenance log, the rows a reflection pass plans over, the access stream, the KPIs of
stats, and whole-store copies (dump and load): the same SQL on both backends modulo the
dialect, run through `sql_core.SqlPrimitives`. Kept apart from the verbs recall and writes
use so neither module outgrows what one reader holds in mind.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from ..domain.epoch import from_epoch
from ..domain.reflection import Node, Rows
from ..domain.schema import AccessRecord
from ..domain.scope import Scope
from .base import (
    DUMP_COLUMNS,
    DUMP_JSON,
    DUMP_KEYS,
    DUMP_TABLES,
    KpiRaw,
    KpiTotals,
    MaintenanceEntry,
)
from .dialect import reflection_columns, scope_where
from .keywords import row_stems
from .rows import access_from_row, values_of
from .sql_core import SqlPrimitives

__all__ = ["SqlReports"]


class SqlReports(SqlPrimitives):
    """Reports and copies written once; a backend's store class inherits them beside
    `sql_core.SqlVerbs`."""

    # ------------------------------------------------------------------ maintenance log

    async def log_maintenance(
        self, kind: str, report: dict[str, Any], ts: datetime | None = None
    ) -> None:
        p = self.dialect.p
        await self._exec(
            f"INSERT INTO maintenance_log(ts, kind, report) VALUES ({p('t')}, {p('k')}, {p('r')})",
            {
                "t": (ts or datetime.now(UTC)).timestamp(),
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
            # By time: an import adds older entries after newer ones (`transfer`).
            f"SELECT seq, ts, kind, report FROM maintenance_log WHERE {' AND '.join(clauses)} "
            f"ORDER BY ts DESC, seq DESC LIMIT {d.p('limit')}",
            params,
        )
        return [
            MaintenanceEntry(r["seq"], from_epoch(r["ts"]), r["kind"], json.loads(r["report"]))
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
                    created_at=from_epoch(r["created_at"]),
                    last_accessed_at=from_epoch(r["last_accessed_at"]),
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
            todos=[(r["status"], from_epoch(r["created_at"])) for r in todos],
            cross_owner_reads=cross,
            tombstones=tombstones,
            edges=edges,
            accesses=accesses,
        )

    # ------------------------------------------------------------------ reflection pages, KPIs

    async def reflection_rows(
        self, role: str | None, after: tuple[str, int] | None, limit: int
    ) -> Rows:
        """A page of live rows after (owner, seq), no vectors. The key follows the role index
        (role, owner, seq): each page is one index range, no sort (paging by seq alone
        sorted the whole role for every page)."""
        d = self.dialect
        where = f"role = {d.p('role')}" if role is not None else d.true
        owner, seq = after or ("", 0)
        rows = await self._bulk_rows(
            f"SELECT {reflection_columns(d)} FROM memories WHERE {where} "
            f"AND (owner, seq) > ({d.p('owner')}, {d.p('seq')}) AND archived = {d.false} "
            f"ORDER BY owner, seq LIMIT {d.p('limit')}",
            {"role": role, "owner": owner, "seq": seq, "limit": limit},
        )
        return Rows.from_records(values_of(r) for r in rows)

    async def kpi_totals(self, scope: Scope, reads: Sequence[str]) -> KpiTotals:
        """`kpi_rows` summed here, from `access_counts`: one pass over the scope's memories."""
        d = self.dialect
        where, params = scope_where(scope, d)
        params = {**params, "reads": d.values(reads)}
        # SQLite's planner looks ids up in the unique index and reads each wide row for its
        # owner and role; memories_kpi holds both (3x faster at 10k).
        kpi = d.indexed("memories_kpi")
        # Per memory in the scope: is it a reflection (or derived by one), its accesses, its
        # deliberate reads, and those by a reader of another role (shared rows and unnamed
        # readers never count). Then memories are counted per (archived, reflective, reads).
        read = d.one_of("c.channel", "reads")
        per_memory = (
            "SELECT m.archived AS archived, (m.type = 'reflection' OR m.id IN "
            "(SELECT src FROM edges WHERE type = 'derived_from')) AS reflective, "
            "coalesce(sum(c.n), 0) AS accesses, "
            f"coalesce(sum(CASE WHEN {read} THEN c.n END), 0) AS reads, "
            f"coalesce(sum(CASE WHEN {read} AND m.owner != '' AND c.reader_owner != '' "
            f"AND m.role != {d.role_of.format(c='c.reader_owner')} THEN c.n END), 0) "
            "AS foreign_reads FROM memories m LEFT JOIN access_counts c ON c.memory_id = m.id "
            f"WHERE {where} GROUP BY m.id, m.owner, m.role, m.archived, m.type"
        )
        rows = await self._bulk_rows(
            "SELECT archived, reflective, CAST(reads AS BIGINT) AS reads, count(*) AS memories, "
            "CAST(sum(accesses) AS BIGINT) AS accesses, "
            "CAST(sum(foreign_reads) AS BIGINT) AS foreign_reads "
            f"FROM ({per_memory}) per GROUP BY archived, reflective, reads",
            params,
        )
        todos = await self._bulk_rows(
            f"SELECT status, created_at FROM memories m WHERE m.type = 'todo' AND {where} "
            f"AND m.archived = {d.false} ORDER BY m.seq",
            params,
        )
        # Tombstones not lifted, and edges with both ends visible, in one round trip.
        b_where, b_params = scope_where(scope, d, "b", "dst")
        rest = (
            await self._bulk_rows(
                f"SELECT (SELECT count(*) FROM tombstones t JOIN memories m{kpi} "
                f"ON m.id = t.memory_id WHERE t.lifted_at IS NULL AND {where}) AS tombstones, "
                f"(SELECT count(*) FROM edges e JOIN memories m{kpi} ON m.id = e.src "
                f"JOIN memories b{kpi} ON b.id = e.dst WHERE {where} AND {b_where}) AS edges",
                {**params, **b_params},
            )
        )[0]
        return KpiTotals(
            read_counts=[
                (bool(r["reflective"]), r["reads"], r["memories"])
                for r in rows
                if not r["archived"]
            ],
            todos=[(r["status"], from_epoch(r["created_at"])) for r in todos],
            cross_owner_reads=sum(r["foreign_reads"] for r in rows),
            tombstones=rest["tombstones"],
            edges=rest["edges"],
            accesses=sum(r["accesses"] for r in rows),
        )

    # ------------------------------------------------------------------ whole-store copies

    async def table_sizes(self) -> dict[str, int]:
        return {t: await self._scalar(f"SELECT count(*) FROM {t}") for t in DUMP_TABLES}

    async def dump(
        self, table: str, after: tuple[Any, ...] | None, limit: int
    ) -> tuple[list[dict[str, Any]], tuple[Any, ...] | None]:
        """A page of `table` in key order, JSON decoded, `archived` a bool (see DUMP_COLUMNS).
        Table and column names come from DUMP_COLUMNS, never from a caller."""
        d = self.dialect
        columns, keys = DUMP_COLUMNS[table], DUMP_KEYS[table]
        decode = DUMP_JSON.get(table, frozenset())
        where, params = d.true, dict[str, Any](limit=limit)
        if after is not None:
            marks = ", ".join(d.p(f"k{i}") for i in range(len(keys)))
            where = f"({', '.join(keys)}) > ({marks})"
            params.update({f"k{i}": v for i, v in enumerate(after)})
        rows = await self._rows(
            f"SELECT {', '.join(columns)} FROM {table} WHERE {where} "
            f"ORDER BY {', '.join(keys)} LIMIT {d.p('limit')}",
            params,
        )
        out = []
        for r in rows:
            row = {c: r[c] for c in columns}
            for name in decode:
                if row[name] is not None:
                    row[name] = json.loads(row[name])
            for flag in ("archived", "faded"):
                if flag in row:
                    row[flag] = bool(row[flag])
            out.append(row)
        return out, (tuple(out[-1][k] for k in keys) if len(out) >= limit else None)

    async def load(self, table: str, rows: Sequence[dict[str, Any]]) -> None:
        """Insert dumped rows as they are (inside a transaction); memories get fresh
        revisions and their stems, which a dump does not carry."""
        if not rows:
            return
        d = self.dialect
        columns = DUMP_COLUMNS[table]
        encode = DUMP_JSON.get(table, frozenset())
        names, marks = ", ".join(columns), ", ".join(d.p(c) for c in columns)
        if table == "memories":
            names, marks = f"{names}, stems", f"{marks}, {d.p('stems')}"
            if d.rev is not None:
                names, marks = f"{names}, rev", f"{marks}, {d.rev}"
        upsert = ""
        if table == "meta":
            upsert = " ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        values = []
        for row in rows:
            value = {c: row.get(c) for c in columns}
            for name in encode:
                if value[name] is not None:
                    value[name] = json.dumps(value[name])
            for flag in ("archived", "faded"):
                if flag in value:
                    value[flag] = d.flag(bool(value[flag]))
            if table == "memories":
                value["stems"] = row_stems(
                    row["title"], row["content"], row["tags"], row["entities"]
                )
            values.append(value)
        async with self._moving():
            await self._exec_many(f"INSERT INTO {table} ({names}) VALUES ({marks}){upsert}", values)
            await self._after_load(table)
