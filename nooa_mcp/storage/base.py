"""The Store contract: what every storage backend offers, with typed, already-decoded rows.

Services speak only this protocol; `storage/sqlite.py` and `storage/postgres.py` implement it,
and one contract test suite runs against both. No SQL leaves the storage package, and no row
leaves it undecoded: JSON columns arrive as lists and dicts, times as datetimes or epoch
seconds as the row type says.

Every method that writes runs inside `async with store.transaction():`; reads may run inside or
outside one. Inside a transaction, the rows `fetch`, `fetch_many`, `context_rows` and `lock_meta`
return are locked until it ends (SQLite takes the whole file's write lock up front; PostgreSQL
locks those rows, FOR UPDATE), so a row read to be rewritten cannot lose another server's
update meanwhile. Calls are shaped for the paths that matter: recall gets its candidates with
everything scoring needs in one call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from types import SimpleNamespace
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..domain.accesses import AccessState
from ..domain.archive import FADED_REASONS
from ..domain.forgetting import intent_status
from ..domain.reflection import Node, Rows
from ..domain.schema import AccessRecord, Edge, EdgeType, Memory, Reference
from ..domain.scope import Scope
from ..domain.text import head
from .dialect import COMMON_FLOOR, COMMON_SHARE

#: What `Store.log_uses` runs between its read and its writes (see there).
UsesApplier = Callable[[dict[str, AccessState]], Sequence[tuple[str, AccessRecord]]]

__all__ = [
    "ACCESS_COLUMNS",
    "COMMON_FLOOR",
    "COMMON_SHARE",
    "DUMP_COLUMNS",
    "DUMP_JSON",
    "DUMP_KEYS",
    "DUMP_TABLES",
    "HASH_MATCHES",
    "Counts",
    "EdgeRow",
    "KpiRaw",
    "KpiTotals",
    "MaintenanceEntry",
    "RankFacts",
    "RowChanges",
    "ScoringRow",
    "Store",
    "Tombstone",
    "UseState",
    "UsesApplier",
    "VectorRow",
    "tell_faded_sql",
]

#: The columns an access changes (see `domain.accesses.apply_access`): `save_accesses` writes
#: only these.
ACCESS_COLUMNS = (
    "strength",
    "access_count",
    "last_accessed_at",
    "actr_count",
    "first_access_at",
    "actr_times",
    "ring",
    "channels",
)

#: What a dump carries, table by table, in the order `load` needs them (memories before the
#: rows that name them). A dumped row holds every column below and nothing backend-specific:
#: JSON columns decoded, times as epoch seconds, `archived` and `faded` bools, embeddings as
#: float32 bytes.
#: Revisions and search indexes are not carried: the destination makes its own.
DUMP_COLUMNS: dict[str, tuple[str, ...]] = {
    "meta": ("key", "value"),
    "memories": (
        "seq",
        "id",
        "type",
        "owner",
        "role",
        "title",
        "content",
        "content_hash",
        "tags",
        "entities",
        "place_or_task",
        "importance",
        "salience",
        "confidence",
        "strength",
        "reinforcement_count",
        "access_count",
        "status",
        "archived",
        "archived_at",
        "faded",
        "created_at",
        "last_accessed_at",
        "valid_from",
        "valid_to",
        "actr_count",
        "first_access_at",
        "actr_times",
        "refs",
        "trigger",
        "ring",
        "channels",
        "embedding",
        "authored_importance",
    ),
    "edges": ("src", "dst", "type", "weight", "created_at"),
    "accesses": (
        "seq",
        "memory_id",
        "ts",
        "channel",
        "reader_owner",
        "session_ref",
        "trace_ref",
        "query",
        "score",
        "rank",
        "components",
    ),
    "tombstones": (
        "seq",
        "memory_id",
        "owner",
        "role",
        "type",
        "content_hash",
        "embedding",
        "reason",
        "ts",
        "lifted_at",
    ),
    "maintenance_log": ("seq", "ts", "kind", "report"),
}
DUMP_TABLES = tuple(DUMP_COLUMNS)

#: Live memories of one text `Store.find_by_hash` returns at most: the same text may be held
#: apart for other places, validity windows or event times (`domain.repeats`), and a write
#: is a repeat of the newest of them that is one memory with it.
HASH_MATCHES = 8


def tell_faded_sql(archived: str, true: str) -> str:
    """The statement that sets `faded` on every archived row whose standing tombstones (not
    lifted) all give a reason of maintenance (`domain.archive.standing_fade`), in SQL both
    backends run; `archived` is the condition for an archived row, `true` the flag's true
    value. A store written before the flag existed is upgraded with it."""
    match = " OR ".join(
        f"substr(t.reason, 1, {len(prefix)}) = '{prefix}'" for prefix in FADED_REASONS
    )
    standing = "FROM tombstones t WHERE t.memory_id = memories.id AND t.lifted_at IS NULL"
    return (
        f"UPDATE memories SET faded = {true} WHERE {archived} "
        f"AND EXISTS (SELECT 1 {standing}) "
        f"AND NOT EXISTS (SELECT 1 {standing} AND NOT ({match}))"
    )


#: The key a dump pages by (and the order rows come in).
DUMP_KEYS: dict[str, tuple[str, ...]] = {
    "meta": ("key",),
    "memories": ("seq",),
    "edges": ("src", "dst", "type"),
    "accesses": ("seq",),
    "tombstones": ("seq",),
    "maintenance_log": ("seq",),
}
#: Columns stored as JSON text, decoded in a dump.
DUMP_JSON: dict[str, frozenset[str]] = {
    "memories": frozenset(
        {"tags", "entities", "actr_times", "refs", "trigger", "ring", "channels"}
    ),
    "accesses": frozenset({"components"}),
    "maintenance_log": frozenset({"report"}),
}


@dataclass(slots=True)
class ScoringRow:
    """The light columns recall scores on (no ring, no embedding)."""

    seq: int
    id: str
    type: str
    owner: str
    title: str
    content: str
    cues: frozenset[str]
    importance: float
    strength: int
    status: str | None
    archived: bool
    #: Archived by maintenance, not by its user (`domain.archive`): recall may return it.
    faded: bool
    created_at: float
    last_accessed_at: float
    valid_from: float | None
    valid_to: float | None
    actr_count: int
    first_access_at: float | None
    actr_times: list[float]
    #: The keyword score when the full-text search returned this row (higher is better).
    bm25: float | None = None
    #: The stored references as JSON text, decoded only for the rows a reply shows.
    refs_json: str = "[]"
    #: Where or for what task it holds ("" for none): one text for two places is two memories.
    place: str = ""
    #: The stored tags and entities as JSON text, decoded only where their words are compared
    #: (`storage.keywords.indexed_stems`).
    tags_json: str = "[]"
    entities_json: str = "[]"
    #: An intent's trigger as stored (JSON text, or the value a binary read decodes): whether
    #: it is spent decides whether it may be pruned.
    trigger: Any = None

    @property
    def prune_status(self) -> str | None:
        """The status the prune rule reads, as `Memory.prune_status` gives it: a todo's, or
        whether an intent is spent (a recall showed a spent one-shot intent as never
        pruned while its view gave a prune date)."""
        if self.type != "intent":
            return self.status
        trigger = json.loads(self.trigger) if isinstance(self.trigger, str) else self.trigger
        return intent_status(SimpleNamespace(**trigger) if isinstance(trigger, dict) else None)

    @property
    def head(self) -> str:
        return head(self.title or self.content)

    def references(self) -> list[Reference]:
        if self.refs_json in ("[]", ""):
            return []
        return [Reference.model_validate(r) for r in json.loads(self.refs_json)]


@dataclass(slots=True)
class UseState:
    """A memory's use history as the base-level reads it (`domain.scoring.base_levels`): the
    count of counted uses, the first one and the newest times kept exactly. Uses only add, so
    of two states of one memory the one with more uses (then the newer newest use) is the
    later (`VectorIndex.note_uses`)."""

    actr_count: int
    first_access_at: float | None
    actr_times: list[float]

    @property
    def key(self) -> tuple[int, float]:
        return (self.actr_count, max(self.actr_times, default=float("-inf")))


@dataclass(slots=True)
class RankFacts:
    """What ranking reads of a row besides its vector (DESIGN.md §5.12): held as columns beside
    the matrix, so a recall scores its candidates without reading their rows."""

    importance: float
    created_at: float
    valid_to: float | None
    cues: frozenset[str]
    uses: UseState
    #: Not valid before this time (None: always): a memory not valid yet ranks below.
    valid_from: float | None = None


@dataclass(slots=True)
class VectorRow:
    """A row of the in-process vector cache: identity, masks, the embedding and the columns
    ranking scores on (`facts`)."""

    seq: int
    id: str
    role: str
    owner: str
    type: str
    archived: bool
    embedding: np.ndarray | None
    #: Archived by maintenance (`domain.archive`): searched as the faded tier.
    faded: bool = False
    facts: RankFacts | None = None


@dataclass(slots=True)
class RowChanges:
    """Rows rewritten since a revision (`Store.reflection_changes`): their columns as a pass
    reads them, each one's role and archived flag, and the revision the read reached."""

    rows: Rows
    roles: list[str]
    archived: np.ndarray
    upto: int


@dataclass(slots=True)
class EdgeRow:
    src: str
    dst: str
    type: str
    weight: float = 1.0


@dataclass(slots=True)
class Tombstone:
    """What was archived and why (DESIGN.md §2.6, §4.4): the value a later write is checked
    against."""

    memory_id: str
    owner: str
    role: str
    type: str
    content_hash: str
    reason: str
    ts: datetime
    lifted_at: datetime | None = None
    embedding: np.ndarray | None = None


@dataclass(slots=True)
class MaintenanceEntry:
    seq: int
    ts: datetime
    kind: str
    report: dict[str, Any]


@dataclass(slots=True)
class Counts:
    total: int
    archived: int
    by_type: dict[str, int]
    by_owner: dict[str, int]


@dataclass(slots=True)
class KpiRaw:
    """Raw numbers for the KPIs in stats, all inside one scope, in their plain form.

    One row per live memory and counts taken from the access stream itself: the definition
    `KpiTotals` must agree with (the contract tests compare them), not what stats reads.
    """

    #: (id, type, derived by reflection?, deliberate reads) per live memory.
    per_memory: list[tuple[str, str, bool, int]]
    todos: list[tuple[str | None, datetime]]
    cross_owner_reads: int
    tombstones: int
    edges: int
    accesses: int


@dataclass(slots=True)
class KpiTotals:
    """The numbers of `KpiRaw`, summed inside the store: what stats reads.

    A store of 100k memories has 100k rows of `KpiRaw.per_memory`; stats needs only how many
    live memories have each read count (the never-fetched share, the top tenth's share of
    reads and the reflection shares all follow from that), a few hundred rows at most.
    """

    #: (reflection or derived by reflection?, deliberate reads, live memories with exactly
    #: that many reads), one row per distinct pair, in no particular order.
    read_counts: list[tuple[bool, int, int]]
    todos: list[tuple[str | None, datetime]]
    cross_owner_reads: int
    tombstones: int
    edges: int
    accesses: int


@runtime_checkable
class Store(Protocol):
    """A store of memories: SQLite for one machine, PostgreSQL for several."""

    #: "sqlite" or "postgresql".
    kind: str
    #: What to show people: the file name or the database name, never a secret.
    label: str
    #: False when the store can only be read (a read-only file): reads work, logging is skipped.
    writable: bool

    async def close(self) -> None: ...

    def transaction(self) -> AbstractAsyncContextManager[None]:
        """One write transaction; the write lock is taken up front. Reads inside it see its
        writes; reads outside any transaction see only what was committed, never the rows of
        a transaction still open in another coroutine of the process."""
        ...

    async def check_writable(self) -> None:
        """Raise StoreUnavailable when writes would be lost (file gone, read-only)."""
        ...

    # ------------------------------------------------------------------ meta and leases

    async def get_meta(self, key: str) -> str | None: ...

    async def set_meta(self, key: str, value: str) -> None: ...

    async def lock_meta(self, key: str) -> str | None:
        """Inside a transaction: the value, with the row locked against other servers."""
        ...

    # ------------------------------------------------------------------ ids and memories

    async def resolve_id(
        self, ident: str, field: str = "memory_id", scope: Scope | None = None
    ) -> str:
        """Full id of an id or unique prefix (≥ 6 characters) among what `scope` sees
        (every memory when None): a prefix neither matches nor is ambiguous with, and an
        AmbiguousId never lists, a memory outside the scope."""
        ...

    async def owners_of(self, ids: Sequence[str]) -> dict[str, str]: ...

    async def live_ids(self, ids: Sequence[str]) -> set[str]:
        """Which of `ids` name a memory that exists and is not archived (no row is parsed:
        reflection checks a few hundred link ends per transaction)."""
        ...

    async def insert(self, memory: Memory, embedding: np.ndarray | None) -> int:
        """Insert a memory; returns its seq (and sets `memory.seq`)."""
        ...

    async def save(self, memory: Memory, embedding: np.ndarray | None = None) -> None: ...

    async def access_states(self, ids: Sequence[str]) -> dict[str, AccessState]:
        """What an access changes of each of `ids` that exists (`AccessState`: the owner and
        the `ACCESS_COLUMNS`, the ring as its JSON objects), read inside a transaction and
        locked as `fetch_many` locks: the access log rewrites these rows and nothing else, so
        it reads neither the text nor the vector, and decodes no record of the ring."""
        ...

    async def save_accesses(self, memories: Sequence[Memory | AccessState]) -> None:
        """Write what an access changes (`ACCESS_COLUMNS`) of several rows in one round trip.

        Recall logs accesses on every hit: this rewrites neither the text (no full-text
        re-index) nor anything the vector cache holds, and never moves the revision, so no
        other cache re-pulls a row because somebody read it.
        """
        ...

    async def log_uses(self, ids: Sequence[str], apply: UsesApplier) -> dict[str, AccessState]:
        """The access log of a read, in one transaction (PostgreSQL: the rows another
        transaction holds each in one of their own, after the rest): the `access_states`
        of `ids`; `apply`, which records accesses on them in place and returns the records
        it applied (memory id, record; none for an id that no longer exists); `save_accesses`
        of the states it changed and `append_accesses` of its records. Returns those states,
        by id. `apply` may be called once per transaction, each time with other rows.

        `apply` must not await, touch the store or read this task's context variables (make
        the records before): SQLite runs the whole log in one hop of its connection's
        thread (a recall's log was five: BEGIN, read, two writes, COMMIT).
        """
        ...

    async def fetch(self, memory_id: str) -> Memory | None: ...

    async def claim_id(self, memory_id: str) -> Memory | None:
        """Inside a transaction: the row of `memory_id`, read once the id is held until the
        transaction ends, whether a row exists or not, so two imports of one export line
        take turns and the second finds the first's row instead of inserting it again."""
        ...

    async def hold_texts(self, words: Sequence[tuple[str, str, str]]) -> None:
        """Inside a transaction: hold each (content hash, role, type) as `find_by_hash` holds
        it, until the transaction ends (nothing outside one), all in one fixed order. A
        revival takes its memories' before their rows, so a write of the same words waits for
        the revival and then finds the memory live, rather than reading it archived and its
        tombstone lifted; a batch of writes takes its own before any lookup, so two batches
        of the same words in other orders take turns instead of deadlocking."""
        ...

    async def fetch_many(self, ids: Sequence[str], *, lock: bool = True) -> dict[str, Memory]:
        """The rows of `ids` that exist; inside a transaction locked in id order, unless
        `lock` is False: rows only looked at to decide which one a write takes, which is
        then read again locked (locking every candidate, batch after batch, made writers
        that met the same rows in other orders deadlock)."""
        ...

    async def find_by_hash(self, content_hash: str, role: str, type: str) -> list[str]:
        """Live memories of this role and type with exactly this content, newest first (at
        most `HASH_MATCHES`)."""
        ...

    async def folded_into(self, content_hash: str, role: str, note: str) -> str | None:
        """The memory of this role with exactly this content, live or archived, holding a
        `reinforced` access noted `note` (an import's fold of a line: `authoring`), or None."""
        ...

    async def set_archived(
        self, memory_id: str, archived: bool, when: datetime, *, faded: bool = False
    ) -> None:
        """Archive a memory (forgotten by its user, or `faded`: by maintenance) or make it
        live again (`faded` is then cleared)."""
        ...

    async def set_embedding(self, memory_id: str, vector: np.ndarray) -> None: ...

    async def set_importance(
        self, memory_id: str, importance: float | None = None, authored: float | None = None
    ) -> None: ...

    async def unembedded(self, dim: int, limit: int) -> list[tuple[str, str, str]]:
        """(id, title, content) of rows without an embedding of `dim` floats."""
        ...

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
        """Memories inside `scope` in seq order after `after_seq`; `owner` keeps one owner's
        rows, `tag` those carrying the tag (case folded for ASCII letters only, alike on every
        backend); `forgotten_of`: forgotten rows (archived, not faded) only of that role (""
        for the shared owner's)."""
        ...

    async def count_memories(
        self, scope: Scope, *, type: str | None = None, status: str | None = None
    ) -> int: ...

    async def context_rows(self, scope: Scope, limit: int) -> list[Memory]:
        """Open todos first, then the most important and most recently used live memories
        (no scratch, no closed todos), for the context block."""
        ...

    async def todo_rows(self, scope: Scope, status: str | None, limit: int) -> list[Memory]:
        """At most `limit` todos inside `scope` that are not forgotten (live, or faded by
        reflection), of one status or any for None, in todo order: open first, then higher
        importance, then older first (DESIGN.md §9.1)."""
        ...

    async def intents(self, role: str) -> list[Memory]:
        """Live intents of a role that carry a trigger, oldest first."""
        ...

    async def embeddings_of(self, ids: Sequence[str]) -> dict[str, np.ndarray]: ...

    # ------------------------------------------------------------------ recall

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
        """In one call: the keyword top `limit` of live rows for `text` (with `bm25` set), the
        keyword top `faded` of faded rows (archived by maintenance; never a row its user
        forgot), and the rows `ids` (the dense candidates, in any state), inside `scope`.
        With `include_archived`, the top `limit` of every row, archived or not, in one tier
        (explain's "why not" of an archived memory)."""
        ...

    async def keyword_hits(
        self, text: str, scope: Scope, *, limit: int, faded: int = 0, include_archived: bool = False
    ) -> list[tuple[str, float]]:
        """`candidates`' keyword search alone, reading no column but the id: (id, keyword
        score) of each hit, in the order `candidates` gives them. For a ranking that holds
        what it scores (`VectorIndex`): it reads rows only for what it returns."""
        ...

    async def use_changes(self, mark: Any) -> tuple[dict[str, UseState], Any]:
        """The use history (`UseState`) of each memory with a use logged since `mark` (a
        `ranking_mark`, or the mark a previous call returned), and the mark to pass next
        time, in one statement. Never misses one, as `ranking_changes`."""
        ...

    async def scoring_rows(self, ids: Sequence[str]) -> list[ScoringRow]: ...

    async def vector_changes(
        self, mark: Any, limit: int, roles: Sequence[str] | None = None
    ) -> tuple[list[VectorRow], Any]:
        """Rows changed since `mark` (None: from the start), oldest change first, and the mark
        to pass next time. Never misses a row, whatever order transactions commit in. With
        `roles`, the embedding only of the rows of those roles: a server that holds some
        roles' vectors reads no other role's, yet learns of a row that left a role it holds
        (DESIGN.md §15)."""
        ...

    async def keyword_changes(self, mark: Any, limit: int) -> tuple[list[tuple[int, Any]], Any]:
        """Every row's (seq, stems) changed since `mark` (None: from the start), at most
        `limit`, and the mark to pass next time, as `vector_changes` (every role's rows: the
        keyword postings held in memory are the whole table's, `storage.postings`)."""
        ...

    async def vector_mark(self) -> Any:
        """A mark as of now, reading no row: `vector_changes` from it returns only what
        changes after this call (a cache that loads roles on first use starts here)."""
        ...

    async def vector_rows(self, roles: Sequence[str], after: int, limit: int) -> list[VectorRow]:
        """The current rows of these roles with a seq above `after`, in seq order, at most
        `limit` (a role's vectors loaded on first use, a page at a time)."""
        ...

    #: Calls that wrote edges so far (committed or not; see `storage.links`).
    edge_writes: int

    #: Keyword search's "too common" floor (`COMMON_FLOOR`; tests lower it).
    common_floor: int

    #: Calls that rewrote rows (moved their revision) so far, committed or not: a vector
    #: cache pulls when it moves (`VectorIndex.sync`).
    row_writes: int

    @property
    def in_transaction(self) -> bool:
        """Whether the caller is inside this store's transaction."""
        ...

    async def ranking_mark(self) -> Any:
        """A mark as of now for `ranking_changes`, reading no row."""
        ...

    async def ranking_changes(
        self, mark: Any, roles: Sequence[str] | None = None
    ) -> tuple[list[EdgeRow], Any]:
        """The edges added or strengthened since `mark` (`ranking_mark`, or the mark a
        previous call returned), with their weight now, and the mark to pass next time: links
        move no revision, so vector caches learn of them here (the uses, which move none
        either, come from `use_changes`). Never misses one, whatever order transactions
        commit in; one may come twice (a link of a transaction still running at the mark is
        read again after it commits). With `roles`,
        only the edges whose two ends are memories of those roles (the roles a server holds,
        `storage.links`); the mark moves past the others all the same."""
        ...

    async def change_token(self) -> Any:
        """Cheap: a value that differs once another connection may have committed since it was
        last read (SQLite's data_version); equal tokens mean nothing new from elsewhere."""
        ...

    async def row_count(self) -> int: ...

    # ------------------------------------------------------------------ edges

    async def add_edge(
        self, src: str, dst: str, type: EdgeType, weight: float, at: datetime | None = None
    ) -> None: ...

    async def add_new_edge(
        self, src: str, dst: str, type: EdgeType, weight: float, at: datetime | None = None
    ) -> bool:
        """`add_edge`, answering whether this call made the edge (False: it was there, or a
        concurrent transaction made it first), as the store's unique key decides it."""
        ...

    async def add_edges(self, edges: Sequence[tuple[str, str, EdgeType, float]]) -> None:
        """`add_edge` for each (src, dst, type, weight), in order, in one round trip or two:
        reflection links a few hundred pairs per transaction."""
        ...

    async def edges_of(self, memory_id: str) -> list[Edge]: ...

    async def out_edges(self, sources: Sequence[str], scope: Scope) -> list[EdgeRow]: ...

    async def successors(
        self, targets: Sequence[str], relations: Sequence[str], scope: Scope
    ) -> list[EdgeRow]:
        """Edges with one of `relations` into `targets` from memories inside `scope` that are
        not forgotten: live or faded (a correction maintenance faded still supersedes)."""
        ...

    async def links_of(self, ids: Sequence[str], scope: Scope) -> list[EdgeRow]:
        """Edges with either end in `ids` whose other end is inside `scope`, archived or not
        (a person looking at a neighbourhood sees what was forgotten); each edge once."""
        ...

    async def edge_pairs(self, role: str | None, live_only: bool = True) -> list[EdgeRow]: ...

    async def role_edges(self, roles: Sequence[str], among: Sequence[str]) -> list[EdgeRow]:
        """Every edge (archived ends too) whose two ends are memories of roles `among`, at
        least one of them of `roles`: what loading `roles` adds to the edges held for the
        roles `among` (`storage.links`), in one statement."""
        ...

    async def copy_edges(self, src: str, dst: str) -> int:
        """Copy `src`'s edges, leaving and arriving, onto `dst` (a merge: a correction that
        pointed at the duplicate corrects what it was merged into); the larger weight wins,
        and no edge between the two is copied. Returns how many."""
        ...

    async def edges_touching(self, ids: Sequence[str]) -> list[EdgeRow]:
        """Every edge (any type, either end archived or not) with `src` or `dst` among `ids`,
        each once: what reflection needs of the edges around the pairs it plans."""
        ...

    # ------------------------------------------------------------------ accesses

    async def append_accesses(self, records: Sequence[tuple[str, AccessRecord]]) -> None: ...

    async def access_stream(
        self,
        memory_id: str | None,
        limit: int,
        before_seq: int | None = None,
        scope: Scope | None = None,
    ) -> list[tuple[int, str, AccessRecord]]: ...

    async def count_accesses(self, memory_id: str) -> int: ...

    # ------------------------------------------------------------------ tombstones

    async def add_tombstone(self, memory_id: str, reason: str, when: datetime) -> None: ...

    async def lift_tombstones(self, memory_id: str, when: datetime) -> None: ...

    async def tombstone_by_hash(self, content_hash: str, role: str) -> Tombstone | None: ...

    async def tombstones_of(self, memory_ids: Sequence[str]) -> dict[str, Tombstone]: ...

    async def all_tombstones(self, memory_ids: Sequence[str]) -> dict[str, list[Tombstone]]:
        """Every tombstone (lifted ones too) of these memories, oldest first: for export."""
        ...

    # ------------------------------------------------------------------ maintenance

    async def log_maintenance(
        self, kind: str, report: dict[str, Any], ts: datetime | None = None
    ) -> None:
        """Append an entry, at `ts` (an imported entry keeps its time) or now."""
        ...

    async def maintenance_entries(
        self, kind: str | None = None, limit: int = 20, role: str | None = None
    ) -> list[MaintenanceEntry]: ...

    async def count_maintenance(self, kind: str, role: str | None = None) -> int: ...

    async def reflection_nodes(self, role: str | None) -> tuple[list[Node], np.ndarray]:
        """Live rows reflection plans over (one role, or every role) and their vectors."""
        ...

    async def reflection_rows(
        self, role: str | None, after: tuple[str, int] | None, limit: int
    ) -> Rows:
        """Up to `limit` live rows of a role (every role for None) as columns, without
        vectors, in (owner, seq) order after the key `after` (None: from the start): a pass
        reads 100k rows page by page through the role index (other calls run between pages)
        and takes vectors from the process's vector index. Never read inside a transaction:
        it sees what is committed (SQLite reads it on a second connection)."""
        ...

    async def reflection_changes(self, since: int | None, limit: int) -> RowChanges | None:
        """Up to `limit` rows of any role, live or archived, rewritten after the revision
        `since` (None: the store's current revision and no rows), oldest change first; None
        when this store cannot say. A pass keeps its role's rows between passes and reads
        only these. Only a store whose revision moves with every rewrite of what planning
        reads but access times (SQLite) can; PostgreSQL's moves only with what vector
        caches hold, so its passes read every row. Never inside a transaction."""
        ...

    # ------------------------------------------------------------------ statistics

    async def counts(self, scope: Scope) -> Counts:
        """Memories in the scope by owner and type. Like `kpi_totals` and `reflection_rows`,
        a read over a whole role, never inside a transaction: it sees what is committed
        (SQLite reads it on a second connection, so calls waiting on the first go first)."""
        ...

    async def kpi_rows(self, scope: Scope, reads: Sequence[str]) -> KpiRaw: ...

    async def kpi_totals(self, scope: Scope, reads: Sequence[str]) -> KpiTotals:
        """`kpi_rows` summed in the store, from per-memory access counts the store keeps."""
        ...

    # ------------------------------------------------------------------ whole-store copies

    async def table_sizes(self) -> dict[str, int]:
        """Rows per table of `DUMP_TABLES`."""
        ...

    async def dump(
        self, table: str, after: tuple[Any, ...] | None, limit: int
    ) -> tuple[list[dict[str, Any]], tuple[Any, ...] | None]:
        """Up to `limit` rows of `table` (see DUMP_COLUMNS) after the key `after`, in key
        order, and the key to pass next (None once the table is done)."""
        ...

    async def load(self, table: str, rows: Sequence[dict[str, Any]]) -> None:
        """Inside a transaction: insert dumped rows exactly as they are (seq kept; meta keys
        overwritten)."""
        ...
