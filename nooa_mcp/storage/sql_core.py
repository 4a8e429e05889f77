"""The Store verbs that are the same SQL on both backends, written once over a dialect.

SQLite and PostgreSQL differ in these only in spelling (`storage.dialect`: placeholders,
booleans, JSON fields, list parameters, the larger of two values, index hints, how a row's
revision moves). `SqlVerbs` holds the verbs and runs them through a few primitives each
backend has, all with named parameters: `_rows`, `_scalar`, `_exec`, `_exec_many`,
`_insert_row`, and, where a backend does better than the default, `_bulk_rows`,
`_blob_rows`. What a backend does its own way stays in its module behind hooks
the verbs call: keyword search (`_keyword_candidates`: FTS5 against the SQL BM25), change
tracking (WAL and revisions against snapshots and LISTEN: `_moving`), locks (`_lock`,
`_lock_key`: SQLite's file-wide write lock against row and advisory locks; `_locked_read`,
`_read_ahead`: PostgreSQL sends a lock and the reads behind it in one round trip),
connections.
No backend imports the other. The verbs that report on a whole store or role (KPIs, the
maintenance log, reflection pages, dump and load) are in `sql_reports`, over the same
primitives.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any

import numpy as np

from ..domain.accesses import AccessState
from ..domain.epoch import from_epoch
from ..domain.schema import AccessRecord, Edge, EdgeType, Memory
from ..domain.scope import Scope
from ..errors import AmbiguousId, NotFound
from .base import (
    ACCESS_COLUMNS,
    HASH_MATCHES,
    EdgeRow,
    ScoringRow,
    Tombstone,
    UsesApplier,
    VectorRow,
)
from .dialect import POSTGRES, SQLITE, Dialect, intents_sql, scope_where
from .keywords import query_stems
from .rows import (
    FACT_COLUMNS,
    HIT_COLUMNS,
    MIN_PREFIX,
    SCORING_COLUMNS,
    TODO_ORDER,
    KeywordAsk,
    Row,
    access_state_from_row,
    access_values,
    edge_from_row,
    epoch,
    hit_from_row,
    memory_from_row,
    memory_values,
    scoring_from_row,
    tombstone_from_row,
    vector_of,
    vector_row_from,
)

__all__ = [
    "POSTGRES",
    "SQLITE",
    "Dialect",
    "SqlPrimitives",
    "SqlVerbs",
    "access_states_sql",
    "append_accesses_sql",
    "apply_uses",
    "save_accesses_sql",
    "scope_where",
]


# The access log's statements, shared by the verbs below and SQLite's one-hop `log_uses`.


def access_states_sql(d: Dialect, ids: Sequence[str], lock: str) -> tuple[str, dict[str, Any]]:
    """The read of `Store.access_states` (`lock`: what locks the rows, `SqlVerbs._lock`)."""
    return (
        f"SELECT id, owner, {', '.join(ACCESS_COLUMNS)} FROM memories "
        f"WHERE {d.one_of('id', 'ids')} ORDER BY id{lock}",
        {"ids": d.values(sorted(set(ids)))},
    )


def save_accesses_sql(
    d: Dialect, memories: Sequence[Memory | AccessState]
) -> tuple[str, list[dict[str, Any]]]:
    """The write of `Store.save_accesses`: only what an access moves (`memory_values` would
    stem the whole text again for each memory a recall logged, behind every reply)."""
    sets = ", ".join(f"{k} = {d.p(k)}" for k in ACCESS_COLUMNS)
    return (
        f"UPDATE memories SET {sets} WHERE id = {d.p('id')}",
        [access_values(memory) for memory in memories],
    )


def apply_uses(
    states: dict[str, AccessState], apply: UsesApplier
) -> tuple[dict[str, AccessState], Sequence[tuple[str, AccessRecord]]]:
    """`Store.log_uses`' middle step: the states `apply` changed (by id, in its order) and the
    records it applied."""
    logged = apply(states)
    return {i: states[i] for i in dict.fromkeys(i for i, _ in logged)}, logged


def append_accesses_sql(
    d: Dialect, records: Sequence[tuple[str, AccessRecord]]
) -> tuple[str, list[dict[str, Any]]]:
    """The write of `Store.append_accesses`."""
    p = d.p
    return (
        "INSERT INTO accesses(memory_id, ts, channel, reader_owner, session_ref, trace_ref, "
        f"query, score, rank, components) VALUES ({p('m')}, {p('ts')}, {p('ch')}, "
        f"{p('ro')}, {p('sr')}, {p('tr')}, {p('q')}, {p('sc')}, {p('rk')}, {p('co')})",
        [
            {
                "m": mid,
                "ts": r.ts.timestamp(),
                "ch": r.channel.value,
                "ro": r.reader_owner,
                "sr": r.session_ref,
                "tr": r.trace_ref,
                "q": r.query,
                "sc": r.score,
                "rk": r.rank,
                "co": r.components.model_dump_json() if r.components else None,
            }
            for mid, r in records
        ],
    )


def _text_key(content_hash: str, role: str, type: str) -> str:
    """The lock a role's words of one type are held by (`find_by_hash`, `hold_texts`)."""
    return f"hash/{role}/{type}/{content_hash}"


class SqlPrimitives:
    """What the shared verbs run through: a backend's store class provides `dialect` and
    the primitives, and overrides the hooks where it does something of its own."""

    dialect: Dialect

    async def _rows(self, sql: str, params: Any = ()) -> Sequence[Row]:
        raise NotImplementedError

    async def _scalar(self, sql: str, params: Any = ()) -> Any:
        raise NotImplementedError

    async def _exec(self, sql: str, params: Any = ()) -> int:
        """Run a write; how many rows it changed."""
        raise NotImplementedError

    async def _exec_many(self, sql: str, rows: Sequence[dict[str, Any]]) -> None:
        """Run a write once per parameter set, in one hop (SQLite) or one pipeline."""
        raise NotImplementedError

    async def _insert_row(self, sql: str, params: dict[str, Any]) -> int:
        """Run an INSERT of one memory row; the row's new seq (`params["seq"]` when given)."""
        raise NotImplementedError

    def _reserved_seq(self) -> int | None:
        """A seq the backend took for the next inserted row ahead of its INSERT (PostgreSQL,
        in `_locked_read`'s round trip, so the INSERT need not wait for an answer); None:
        the INSERT numbers the row."""
        return None

    async def _blob_rows(self, sql: str, params: Any = ()) -> Sequence[Row]:
        """`_rows` for a read that returns embeddings (PostgreSQL fetches them in binary)."""
        return await self._rows(sql, params)

    async def _bulk_rows(self, sql: str, params: Any = ()) -> Sequence[Row]:
        """`_rows` for a read over a whole role or scope (SQLite runs it on a connection of
        its own, apart from the recalls and writes)."""
        return await self._rows(sql, params)

    #: Calls of this store that rewrote rows (moved their revision), committed or not: the
    #: vector cache pulls when it moves (`VectorIndex.sync`), as this process's own commits
    #: move no change token, and ranking scores on the columns it holds (`storage.facts`).
    row_writes = 0

    def _moving(self, noted: bool = False) -> AbstractAsyncContextManager[None]:
        """Around a write that changes what vector caches hold (PostgreSQL runs it in a
        transaction, the caller's or its own, and counts its commit as this process's own;
        SQLite's statements move the revision themselves, `Dialect.rev`). `noted`: a new row
        its writer notes in this process's cache itself (`VectorIndex.note`), so it moves no
        `row_writes`."""
        if not noted:
            self.row_writes += 1
        return contextlib.nullcontext()

    def _lock(self) -> str:
        """What a read of rows about to be rewritten adds to lock them (PostgreSQL's
        `FOR UPDATE` inside a transaction); SQLite's write lock covers the whole file."""
        return ""

    async def _lock_key(self, key: str) -> None:
        """Hold `key` until the transaction ends, whether a row exists or not (PostgreSQL's
        advisory locks); SQLite's BEGIN IMMEDIATE already holds the whole file."""

    async def _lock_keys(self, keys: Sequence[str]) -> None:
        """`_lock_key` for each of `keys`, in their order (a backend may take them in one
        statement)."""
        for key in keys:
            await self._lock_key(key)

    async def _locked_read(
        self, key: str, statement: tuple[str, Any], ahead: tuple[str, Any]
    ) -> Sequence[Row]:
        """`statement`'s rows, read once `key` is held (`_lock_key`). `ahead` is the read
        the caller is expected to make next: a backend that sends statements in one round
        trip (PostgreSQL) sends it along and keeps its answer for `_read_ahead`; by default
        it waits for its turn."""
        await self._lock_key(key)
        return await self._rows(*statement)

    def _read_ahead(self, statement: tuple[str, Any]) -> Sequence[Row] | None:
        """The answer to `statement` if `_locked_read` sent it ahead and nothing else ran
        since in this transaction; None (read it now) by default."""
        return None

    async def _after_load(self, table: str) -> None:
        """What a backend does once rows with their own seqs were copied into `table`."""


class SqlVerbs(SqlPrimitives):
    """Store verbs written once (see the module's docstring): the ones recall, writes and
    the vector cache use; `sql_reports.SqlReports` holds the rest."""

    # ------------------------------------------------------------------ memories by id

    async def resolve_id(
        self, ident: str, field: str = "memory_id", scope: Scope | None = None
    ) -> str:
        """Full id of an id or unique prefix (≥ 6 characters) among the memories `scope`
        sees (every memory when None): a prefix is never ambiguous with, nor names, a
        memory outside it.

        Raises:
            NotFound: nothing matches, or the prefix is shorter than 6 characters.
            AmbiguousId: several memories share the prefix.
        """
        d = self.dialect
        where, params = scope_where(scope, d, "") if scope is not None else (d.true, {})
        if len(ident) == 32:
            found = await self._scalar(
                f"SELECT id FROM memories WHERE id = {d.p('lo')} AND {where}",
                {**params, "lo": ident},
            )
            if found is None:
                raise NotFound(ident, field)
            return found
        if len(ident) < MIN_PREFIX:
            raise NotFound(ident, field)
        upper = ident[:-1] + chr(ord(ident[-1]) + 1)
        rows = await self._rows(
            f"SELECT id FROM memories WHERE id >= {d.p('lo')} AND id < {d.p('hi')} "
            f"AND {where} ORDER BY id LIMIT 6",
            {**params, "lo": ident, "hi": upper},
        )
        matches = [r["id"] for r in rows]
        if not matches:
            raise NotFound(ident, field)
        if len(matches) > 1:
            raise AmbiguousId(ident, matches, field)
        return matches[0]

    async def insert(self, memory: Memory, embedding: np.ndarray | None) -> int:
        """Insert one memory row (inside a transaction); returns and sets its seq. The next
        revision, where statements set it, is computed inside the statement: one trip."""
        d = self.dialect
        values = memory_values(memory, embedding, d.flag)
        seq = self._reserved_seq()
        if seq is not None:
            values = {"seq": seq, **values}
        cols = ", ".join(values)
        marks = ", ".join(d.p(k) for k in values)
        if d.rev is not None:
            cols, marks = f"{cols}, rev", f"{marks}, {d.rev}"
        async with self._moving(noted=True):
            memory.seq = await self._insert_row(
                f"INSERT INTO memories ({cols}) VALUES ({marks})", values
            )
        return memory.seq

    async def save(self, memory: Memory, embedding: np.ndarray | None = None) -> None:
        """Rewrite a memory row from its record (inside a transaction).

        The embedding is only written when given, so callers that did not change the
        content never ship 1.5 kB of vector back and forth.
        """
        d = self.dialect
        values = memory_values(memory, embedding, d.flag)
        if embedding is None:
            values.pop("embedding")
        sets = ", ".join(f"{k} = {d.p(k)}" for k in values if k != "id")
        async with self._moving():
            await self._exec(
                f"UPDATE memories SET {sets}{d.set_rev()} WHERE id = {d.p('id')}", values
            )

    async def save_accesses(self, memories: Sequence[Memory | AccessState]) -> None:
        """See `Store.save_accesses`: access columns only, revision unchanged."""
        if memories:
            await self._exec_many(*save_accesses_sql(self.dialect, memories))

    async def set_embedding(self, memory_id: str, vector: np.ndarray) -> None:
        d = self.dialect
        async with self._moving():
            await self._exec(
                f"UPDATE memories SET embedding = {d.p('e')}{d.set_rev()} WHERE id = {d.p('i')}",
                {"e": np.asarray(vector, np.float32).tobytes(), "i": memory_id},
            )

    async def set_archived(
        self, memory_id: str, archived: bool, when: datetime, *, faded: bool = False
    ) -> None:
        d = self.dialect
        async with self._moving():
            await self._exec(
                f"UPDATE memories SET archived = {d.p('a')}, archived_at = {d.p('t')}, "
                f"faded = {d.p('f')}{d.set_rev()} WHERE id = {d.p('i')}",
                {
                    "a": d.flag(archived),
                    "t": epoch(when) if archived else None,
                    "f": d.flag(archived and faded),
                    "i": memory_id,
                },
            )

    async def set_importance(
        self, memory_id: str, importance: float | None = None, authored: float | None = None
    ) -> None:
        """Set importance (rescore) and/or the authored importance of one row."""
        d = self.dialect
        sets, params = list[str](), dict[str, Any](i=memory_id)
        if importance is not None:
            sets.append(f"importance = {d.p('imp')}")
            params["imp"] = importance
        if authored is not None:
            sets.append(f"authored_importance = {d.p('auth')}")
            params["auth"] = authored
        if sets:
            await self._exec(
                f"UPDATE memories SET {', '.join(sets)}{d.set_rev()} WHERE id = {d.p('i')}",
                params,
            )

    async def fetch(self, memory_id: str) -> Memory | None:
        rows = await self._rows(
            f"SELECT * FROM memories WHERE id = {self.dialect.p('i')}{self._lock()}",
            {"i": memory_id},
        )
        return memory_from_row(rows[0]) if rows else None

    async def claim_id(self, memory_id: str) -> Memory | None:
        """See `Store.claim_id`."""
        await self._lock_key(f"id/{memory_id}")
        return await self.fetch(memory_id)

    async def hold_texts(self, words: Sequence[tuple[str, str, str]]) -> None:
        """See `Store.hold_texts`: the keys `find_by_hash` takes, in sorted order."""
        await self._lock_keys(sorted({_text_key(*w) for w in words}))

    async def fetch_many(self, ids: Sequence[str], *, lock: bool = True) -> dict[str, Memory]:
        """The rows of `ids` that exist, read (and, to be rewritten, locked) in id order,
        so two transactions cannot deadlock on the rows of one call; `lock=False` reads
        them without a lock (`Store.fetch_many`)."""
        if not ids:
            return {}
        d = self.dialect
        locked = self._lock() if lock else ""
        rows = await self._rows(
            f"SELECT * FROM memories WHERE {d.one_of('id', 'ids')} ORDER BY id{locked}",
            {"ids": d.values(sorted(set(ids)))},
        )
        return {r["id"]: memory_from_row(r) for r in rows}

    async def access_states(self, ids: Sequence[str]) -> dict[str, AccessState]:
        """See `Store.access_states`: locked in id order, as `fetch_many` locks."""
        if not ids:
            return {}
        rows = await self._rows(*access_states_sql(self.dialect, ids, self._lock()))
        return {r["id"]: access_state_from_row(r) for r in rows}

    async def log_uses(self, ids: Sequence[str], apply: UsesApplier) -> dict[str, AccessState]:
        """See `Store.log_uses`: `access_states`, `apply`, `save_accesses` and
        `append_accesses` in one transaction (SQLite runs them in one hop of its thread)."""
        return (await self._log_rows(ids, apply))[0]

    async def _log_rows(
        self, ids: Sequence[str], apply: UsesApplier, lock: str | None = None
    ) -> tuple[dict[str, AccessState], set[str]]:
        """`log_uses` of `ids` in one transaction, their rows read with `lock` (by default
        as `access_states` locks them; PostgreSQL's log passes its own): the states written,
        and the ids whose rows were read (`apply` is not called without one)."""
        if not ids:
            return {}, set()
        async with self.transaction():  # type: ignore[attr-defined]
            read = self._lock() if lock is None else lock
            rows = await self._rows(*access_states_sql(self.dialect, ids, read))
            states = {r["id"]: access_state_from_row(r) for r in rows}
            if not states:
                return {}, set()
            written, logged = apply_uses(states, apply)
            await self.save_accesses(list(written.values()))
            await self.append_accesses(logged)
        return written, set(states)

    async def find_by_hash(self, content_hash: str, role: str, type: str) -> list[str]:
        """The live memories of this role and type with exactly this content, newest first, at
        most `HASH_MATCHES` (a repeat is most likely of the last time it was said; the same
        text may be held for other places or times, `domain.repeats`).

        Inside a transaction the (role, type, content) is held first, until the transaction
        ends (`_locked_read`): a second server authoring the same text waits, then finds this
        row. Authoring checks a new text for a tombstone next: that read goes along ahead
        (`tombstone_by_hash`). The index hint: without statistics SQLite's planner chose
        memories_type (type, archived) and scanned every live row of the type — 68 ms per
        write at 100k rows.
        """
        d = self.dialect
        found = await self._locked_read(
            _text_key(content_hash, role, type),
            (
                f"SELECT id FROM memories{d.indexed('memories_hash')} "
                f"WHERE content_hash = {d.p('h')} AND role = {d.p('r')} AND type = {d.p('t')} "
                f"AND archived = {d.false} ORDER BY created_at DESC, seq DESC LIMIT {HASH_MATCHES}",
                {"h": content_hash, "r": role, "t": type},
            ),
            self._stone_by_hash(content_hash, role),
        )
        return [row["id"] for row in found]

    async def folded_into(self, content_hash: str, role: str, note: str) -> str | None:
        """The memory of this role with exactly this content, live or archived (found by its
        tombstone), holding a `reinforced` access noted `note` (an import's fold of a line),
        or None. Looked up through the hash and tombstone indexes, then each candidate's
        accesses."""
        d = self.dialect
        return await self._scalar(
            "SELECT memory_id FROM accesses WHERE channel = 'reinforced' "
            f"AND query = {d.p('q')} AND memory_id IN ("
            f"SELECT id FROM memories WHERE content_hash = {d.p('h')} AND role = {d.p('r')} "
            f"AND archived = {d.false} UNION SELECT memory_id FROM tombstones "
            f"WHERE content_hash = {d.p('h')} AND role = {d.p('r')}) LIMIT 1",
            {"q": note, "h": content_hash, "r": role},
        )

    async def context_rows(self, scope: Scope, limit: int) -> list[Memory]:
        """What the context block shows: open todos first, then by importance and recency.
        Scratch notes and closed todos never appear (they are not worth the reader's context).

        The ids are picked first and their rows read by `fetch_many` (locked in id order
        inside a transaction, so this cannot deadlock with a recall logging the same rows).
        """
        d = self.dialect
        where, params = scope_where(scope, d, "")
        picked = await self._rows(
            f"SELECT id FROM memories WHERE {where} AND archived = {d.false} "
            "AND type != 'scratch' AND NOT (type = 'todo' AND status != 'open') "
            "ORDER BY (type = 'todo' AND status = 'open') DESC, importance DESC, "
            f"last_accessed_at DESC, seq LIMIT {d.p('limit')}",
            {**params, "limit": limit},
        )
        order = [r["id"] for r in picked]
        found = await self.fetch_many(order)
        return [found[i] for i in order if i in found]

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
        forgotten_of: str | None = None,
    ) -> list[Memory]:
        """Memories in insertion order, for listings and exports (cursor = last seq)."""
        d = self.dialect
        clauses, params = self._list_where(scope, archived, type, status, owner, tag)
        if forgotten_of is not None:
            clauses.append(
                f"(archived = {d.false} OR faded = {d.true} OR role = {d.p('forgotten_of')})"
            )
            params["forgotten_of"] = forgotten_of
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
        """Todos not forgotten, in todo order: open first, then by importance, then oldest
        first. A closed todo that reflection pruned (faded) is still listed: the user can
        still ask what was done."""
        clauses, params = self._list_where(scope, None, "todo", status)
        clauses.append(f"(archived = {self.dialect.false} OR faded = {self.dialect.true})")
        # Order the narrow columns and fetch whole rows only for the ones kept.
        picked = await self._rows(
            f"SELECT id FROM memories WHERE {' AND '.join(clauses)} "
            f"ORDER BY {TODO_ORDER} LIMIT {self.dialect.p('limit')}",
            {**params, "limit": limit},
        )
        order = [r["id"] for r in picked]
        found = await self.fetch_many(order)
        return [found[i] for i in order if i in found]

    async def vector_rows(self, roles: Sequence[str], after: int, limit: int) -> list[VectorRow]:
        """The current rows of these roles after seq `after`, in seq order (through the
        (role, owner) index: one role's rows, not a walk of the table)."""
        d = self.dialect
        rows = await self._blob_rows(
            f"SELECT seq, id, role, owner, type, archived, faded, embedding, {FACT_COLUMNS} "
            f"FROM memories m WHERE {d.one_of('role', 'roles')} AND seq > {d.p('after')} "
            f"ORDER BY seq LIMIT {d.p('limit')}",
            {"roles": d.values(sorted(roles)), "after": after, "limit": limit},
        )
        return [vector_row_from(r) for r in rows]

    async def intents(self, role: str) -> list[Memory]:
        rows = await self._rows(intents_sql(self.dialect), {"role": role})
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

    async def scoring_rows(self, ids: Sequence[str]) -> list[ScoringRow]:
        if not ids:
            return []
        d = self.dialect
        rows = await self._rows(
            f"SELECT {SCORING_COLUMNS} FROM memories m WHERE {d.one_of('m.id', 'ids')}",
            {"ids": d.values(ids)},
        )
        return [scoring_from_row(r) for r in rows]

    # ------------------------------------------------------------------ edges

    # Adding or copying an edge does not move its memories' revision: moving it rewrote each
    # linked row and its entry in SQLite's revision index (a quarter of a first pass at 100k),
    # and every other process's vector cache then read those rows again. The edges held for
    # ranking (`storage.links`) learn of edges through `ranking_changes` instead, asked when
    # another connection committed or this store wrote edges (`edge_writes`).

    #: Calls of this store that wrote edges (committed or not): the held edges sync when it
    #: moves, as this process's own commits may not move the change token (PostgreSQL).
    edge_writes = 0

    def _edge_upsert(self) -> str:
        """Insert an edge; an existing (src, dst, type) keeps the larger weight and its
        created_at."""
        d = self.dialect
        return (
            "INSERT INTO edges(src, dst, type, weight, created_at) "
            f"VALUES ({d.p('s')}, {d.p('d')}, {d.p('t')}, {d.p('w')}, {d.p('c')}) "
            "ON CONFLICT (src, dst, type) "
            f"DO UPDATE SET weight = {d.greatest}(edges.weight, excluded.weight)"
        )

    async def add_edge(
        self, src: str, dst: str, type: EdgeType, weight: float, at: datetime | None = None
    ) -> None:
        """Add an edge (made `at`, an import's, else now)."""
        when = (at or datetime.now(UTC)).timestamp()
        self.edge_writes += 1
        await self._exec(
            self._edge_upsert(),
            {"s": src, "d": dst, "t": EdgeType(type).value, "w": weight, "c": when},
        )

    async def add_new_edge(
        self, src: str, dst: str, type: EdgeType, weight: float, at: datetime | None = None
    ) -> bool:
        """`add_edge`, answering whether this call made the edge. The insert says so itself
        (a row it did not write is one the key already held, or one a concurrent transaction
        wrote, which the insert waits for): a read of the edges before, as an import counted
        them, had two imports of one file at once each count every edge."""
        d = self.dialect
        params = {
            "s": src,
            "d": dst,
            "t": EdgeType(type).value,
            "w": weight,
            "c": (at or datetime.now(UTC)).timestamp(),
        }
        self.edge_writes += 1
        made = await self._exec(
            "INSERT INTO edges(src, dst, type, weight, created_at) "
            f"VALUES ({d.p('s')}, {d.p('d')}, {d.p('t')}, {d.p('w')}, {d.p('c')}) "
            "ON CONFLICT (src, dst, type) DO NOTHING",
            params,
        )
        if made:
            return True
        # There already: the larger weight wins and its created_at stays, as `add_edge`.
        await self._exec(
            f"UPDATE edges SET weight = {d.greatest}(weight, {d.p('w')}) "
            f"WHERE src = {d.p('s')} AND dst = {d.p('d')} AND type = {d.p('t')}",
            params,
        )
        return False

    async def add_edges(self, edges: Sequence[tuple[str, str, EdgeType, float]]) -> None:
        """`add_edge` for each edge, in order: one statement run many times, in one hop."""
        if not edges:
            return
        self.edge_writes += 1
        when = datetime.now(UTC).timestamp()
        await self._exec_many(
            self._edge_upsert(),
            [
                {"s": src, "d": dst, "t": EdgeType(kind).value, "w": weight, "c": when}
                for src, dst, kind, weight in edges
            ],
        )

    async def edges_touching(self, ids: Sequence[str]) -> list[EdgeRow]:
        """Edges with `src` or `dst` among `ids` (each once), through both edge indexes."""
        d = self.dialect
        rows = await self._rows(
            f"SELECT src, dst, type, weight FROM edges WHERE {d.one_of('src', 'ids')} "
            f"UNION SELECT src, dst, type, weight FROM edges WHERE {d.one_of('dst', 'ids')}",
            {"ids": d.values(list(dict.fromkeys(ids)))},
        )
        return [edge_from_row(r) for r in rows]

    async def copy_edges(self, src: str, dst: str) -> int:
        """Copy `src`'s edges onto `dst`, leaving and arriving (larger weight wins; none
        between the two); returns how many."""
        d = self.dialect
        self.edge_writes += 1
        upsert = (
            "ON CONFLICT (src, dst, type) "
            f"DO UPDATE SET weight = {d.greatest}(edges.weight, excluded.weight)"
        )
        out = await self._exec(
            "INSERT INTO edges(src, dst, type, weight, created_at) "
            f"SELECT {d.p('d')}, dst, type, weight, created_at FROM edges "
            f"WHERE src = {d.p('s')} AND dst != {d.p('d')} {upsert}",
            {"s": src, "d": dst},
        )
        into = await self._exec(
            "INSERT INTO edges(src, dst, type, weight, created_at) "
            f"SELECT src, {d.p('d')}, type, weight, created_at FROM edges "
            f"WHERE dst = {d.p('s')} AND src != {d.p('d')} {upsert}",
            {"s": src, "d": dst},
        )
        return out + into

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

    async def role_edges(self, roles: Sequence[str], among: Sequence[str]) -> list[EdgeRow]:
        """Edges with both ends in roles `among` and at least one in `roles`, archived or not
        (`storage.links`: the edges a role being loaded brings to the roles held), each once:
        from the memories of `roles` through both edge indexes (SQLite's planner, told
        nothing of the lists' sizes, went from the memories of `among` into the edges by
        source: 10 ms for a role of 100 among 6 at 10k, 3 ms by target; at 100k, a role of
        1,000 memories and ~2,500 edges, 40 ms warm, 28 with the other end's role read from
        memories_kpi)."""
        d = self.dialect
        # The other end's role from memories_kpi (id, owner, role, …), not from its row.
        kpi = d.indexed("memories_kpi")
        rows = await self._rows(
            "SELECT e.src, e.dst, e.type, e.weight FROM memories a "
            f"JOIN edges e ON e.src = a.id JOIN memories b{kpi} ON b.id = e.dst "
            f"WHERE {d.one_of('a.role', 'roles')} AND {d.one_of('b.role', 'among')} "
            "UNION ALL SELECT e.src, e.dst, e.type, e.weight FROM memories b "
            f"JOIN edges e{d.indexed('edges_dst')} ON e.dst = b.id "
            f"JOIN memories a{kpi} ON a.id = e.src "
            f"WHERE {d.one_of('b.role', 'roles')} AND {d.one_of('a.role', 'among')} "
            f"AND NOT {d.one_of('a.role', 'roles')}",
            {"roles": d.values(sorted(set(roles))), "among": d.values(sorted(set(among)))},
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
                created_at=from_epoch(r["created_at"]),
            )
            for r in rows
        ]

    async def out_edges(self, sources: Sequence[str], scope: Scope) -> list[EdgeRow]:
        """Outgoing edges of `sources` whose targets are live and inside `scope`: archived
        targets and targets outside the reader's scope are dropped here, before spreading
        ever sees them, so they neither appear nor relay (DESIGN §5.6)."""
        d = self.dialect
        where, params = scope_where(scope, d)
        rows = await self._rows(
            "SELECT e.src, e.dst, e.type, e.weight FROM edges e JOIN memories m ON m.id = e.dst "
            f"WHERE {d.one_of('e.src', 'ids')} AND m.archived = {d.false} AND {where}",
            {**params, "ids": d.values(sources)},
        )
        return [edge_from_row(r) for r in rows]

    async def successors(
        self, targets: Sequence[str], relations: Sequence[str], scope: Scope
    ) -> list[EdgeRow]:
        """Visible memories, live or faded (not forgotten), that point at `targets` with one
        of `relations`."""
        d = self.dialect
        where, params = scope_where(scope, d)
        rows = await self._rows(
            "SELECT e.src, e.dst, e.type, e.weight FROM edges e JOIN memories m ON m.id = e.src "
            f"WHERE {d.one_of('e.dst', 'ids')} AND {d.one_of('e.type', 'rel')} "
            f"AND (m.archived = {d.false} OR m.faded = {d.true}) AND {where}",
            {**params, "ids": d.values(targets), "rel": d.values(relations)},
        )
        return [edge_from_row(r) for r in rows]

    # ------------------------------------------------------------------ keyword candidates

    async def candidates(
        self,
        text: str,
        scope: Scope,
        *,
        limit: int,
        ids: Sequence[str] = (),
        faded: int = 0,
        include_archived: bool = False,
    ) -> list[ScoringRow]:
        """See `Store.candidates`: with no words to search for (or no keyword places), the
        rows `ids` alone; else the backend's keyword search (FTS5 in SQLite, the SQL BM25 in
        PostgreSQL: both rank the stems of `storage.keywords` alike)."""
        stems = query_stems(text) if limit > 0 else []
        if not stems:
            return await self.scoring_rows(ids)
        return await self._keyword_candidates(
            KeywordAsk(stems, scope, limit, ids, faded, include_archived)
        )

    async def keyword_hits(
        self, text: str, scope: Scope, *, limit: int, faded: int = 0, include_archived: bool = False
    ) -> list[tuple[str, float]]:
        """See `Store.keyword_hits`: `candidates`' keyword search, reading only ids."""
        stems = query_stems(text) if limit > 0 else []
        if not stems:
            return []
        hits = await self._keyword_candidates(
            KeywordAsk(stems, scope, limit, (), faded, include_archived, HIT_COLUMNS, hit_from_row)
        )
        return [(memory_id, bm25) for memory_id, bm25 in hits if bm25 is not None]

    async def _keyword_candidates(self, ask: KeywordAsk) -> list[Any]:
        """`candidates` for the query's stems; `wide` is `include_archived` (every row,
        archived or not, in one tier). `columns` (with m.seq and m.id) and `decode` say what
        is read of each row and made of it (`keyword_hits`: the id alone)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ meta

    async def lock_meta(self, key: str) -> str | None:
        """The value, with the key held until the transaction ends — even a key that does
        not exist yet, so two servers cannot both see "no lease" and both take it."""
        await self._lock_key(f"meta/{key}")
        return await self.get_meta(key)

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

    def _stone_by_hash(self, content_hash: str, role: str) -> tuple[str, Any]:
        """`tombstone_by_hash`'s statement, also sent ahead by `find_by_hash`."""
        d = self.dialect
        return (
            "SELECT t.* FROM tombstones t JOIN memories m ON m.id = t.memory_id "
            f"WHERE t.content_hash = {d.p('h')} AND t.role = {d.p('r')} "
            f"AND t.lifted_at IS NULL AND m.archived = {d.true} "
            "ORDER BY t.ts DESC, t.seq DESC LIMIT 1",
            {"h": content_hash, "r": role},
        )

    async def tombstone_by_hash(self, content_hash: str, role: str) -> Tombstone | None:
        """The newest standing tombstone of this role with exactly this content (as read
        along by `find_by_hash` just before, where nothing ran since: `_read_ahead`)."""
        statement = self._stone_by_hash(content_hash, role)
        rows = self._read_ahead(statement)
        if rows is None:
            rows = await self._rows(*statement)
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

    # ------------------------------------------------------------------ accesses

    async def append_accesses(self, records: Sequence[tuple[str, AccessRecord]]) -> None:
        """Append to the access stream (inside a transaction); the stream is never rewritten."""
        await self._exec_many(*append_accesses_sql(self.dialect, records))
