"""Rows to domain records and back, for both backends (no backend owns them).

Both store the same columns the same way: times as epoch seconds, JSON columns as their text
(PostgreSQL's loaders hand JSON back as text too), embeddings as float32 bytes. What differs
is how a flag is stored (SQLite's 0/1, PostgreSQL's boolean): `memory_values` takes the
backend's `flag`. A row is anything indexable by column name: an `sqlite3.Row`, a dict.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import numpy as np
from pydantic import TypeAdapter

from ..domain.accesses import AccessState
from ..domain.epoch import from_epoch
from ..domain.schema import (
    AccessRecord,
    Components,
    Memory,
    Reference,
    Trigger,
    cue_set,
)
from ..domain.scope import Scope
from ..domain.text import holds_unstorable, without_unstorable
from .base import EdgeRow, RankFacts, ScoringRow, Tombstone, UseState, VectorRow
from .keywords import row_stems

__all__ = [
    "FACT_COLUMNS",
    "HIT_COLUMNS",
    "MIN_PREFIX",
    "RING",
    "SCORING_COLUMNS",
    "TODO_ORDER",
    "USE_COLUMNS",
    "Decode",
    "KeywordAsk",
    "Row",
    "access_from_row",
    "access_state_from_row",
    "access_values",
    "epoch",
    "epoch_or_none",
    "facts_from_row",
    "facts_of",
    "hit_from_row",
    "memory_from_row",
    "memory_values",
    "scoring_from_row",
    "time_or_none",
    "tombstone_from_row",
    "use_from_row",
    "uses_of",
    "values_of",
    "vector_from_blob",
    "vector_of",
    "vector_row_from",
]


class Row(Protocol):
    """A row as a backend's driver returns it (an `sqlite3.Row`, a dict): read by column."""

    def __getitem__(self, key: str, /) -> Any: ...


#: The shortest id prefix a caller may use for a memory.
MIN_PREFIX = 6

#: The access ring (newest 64 records) is parsed and written on every logged read: one
#: adapter call in pydantic-core instead of a json round trip and a model per record.
RING = TypeAdapter(list[AccessRecord])

#: Columns recall needs for scoring, without the heavy ring and embedding.
SCORING_COLUMNS = (
    "m.seq, m.id, m.type, m.owner, m.title, m.content, m.tags, m.entities, m.place_or_task, "
    "m.importance, m.strength, m.status, m.archived, m.faded, m.created_at, m.last_accessed_at, "
    "m.valid_from, m.valid_to, m.actr_count, m.first_access_at, m.actr_times, m.refs, m.trigger"
)

#: What a keyword search reads when ranking holds the rest (`hit_from_row`; archived for the
#: search over every match, which ranks each tier by it).
HIT_COLUMNS = "m.seq, m.id, m.archived"

#: A memory's use history as the base-level reads it (`use_from_row`).
USE_COLUMNS = "m.actr_count, m.first_access_at, m.actr_times"

#: The columns ranking holds beside each vector (`facts_from_row`).
FACT_COLUMNS = (
    "m.importance, m.created_at, m.valid_from, m.valid_to, m.tags, m.entities, m.place_or_task, "
    f"{USE_COLUMNS}"
)

#: How a keyword search makes its result of a row and the row's keyword score (None: a row
#: asked for by id that the search did not find).
Decode = Callable[[Row, "float | None"], Any]

#: `domain.prospective.todo_order` in SQL (ties in insertion order); both backends use it.
TODO_ORDER = (
    "CASE coalesce(status, 'open') WHEN 'open' THEN 0 WHEN 'done' THEN 1 "
    "WHEN 'dropped' THEN 2 ELSE 3 END, importance DESC, created_at, seq"
)


def epoch(value: datetime) -> float:
    """A time as the stores keep it: epoch seconds."""
    return value.timestamp()


def epoch_or_none(value: datetime | None) -> float | None:
    """`epoch` of an optional time."""
    return None if value is None else value.timestamp()


def time_or_none(value: float | None) -> datetime | None:
    """`domain.epoch.from_epoch` of an optional stored time."""
    return None if value is None else from_epoch(value)


def vector_from_blob(blob: bytes | None) -> np.ndarray | None:
    """A stored embedding (float32 bytes) as an array, or None."""
    return None if blob is None else np.frombuffer(blob, dtype=np.float32)


def vector_of(blob: bytes) -> np.ndarray:
    """A stored embedding (float32 bytes) as an array."""
    return np.frombuffer(blob, dtype=np.float32)


def values_of(row: Any) -> tuple[Any, ...]:
    """A row's values in column order: an `sqlite3.Row` is a sequence, a dict row a mapping."""
    return tuple(row.values()) if isinstance(row, dict) else tuple(row)


def vector_row_from(row: Row) -> VectorRow:
    """A row as the vector cache keeps it (seq, id, role, owner, type, flags, embedding, and
    the `FACT_COLUMNS` ranking scores on)."""
    return VectorRow(
        seq=row["seq"],
        id=row["id"],
        role=row["role"],
        owner=row["owner"],
        type=row["type"],
        archived=bool(row["archived"]),
        faded=bool(row["faded"]),
        embedding=vector_from_blob(row["embedding"]),
        facts=facts_from_row(row),
    )


def use_from_row(row: Row) -> UseState:
    """The `USE_COLUMNS` of a row."""
    return UseState(row["actr_count"], row["first_access_at"], _loaded(row["actr_times"]))


def _loaded(value: Any) -> Any:
    """A JSON column's value: decoded from its text, or as a binary read already hands it."""
    return json.loads(value) if isinstance(value, str) else value


def stored_json(text: Any) -> Any:
    """A JSON column's text as the readers take it: a store of a release before lone
    surrogates and NULs were refused may hold one as a `\\u` escape, which Python decodes
    but pydantic refuses and no UTF-8 output can write (a list, an export, the access log of a
    recall failed on it). Such a text comes back with each written as U+FFFD, as an export
    writes it (DESIGN.md §4.1); any other text comes back as it is, unparsed."""
    if not isinstance(text, str) or "\\u" not in text:
        return text
    value = json.loads(text)
    if not holds_unstorable(value):
        return text
    return json.dumps(without_unstorable(value), ensure_ascii=False)


def _stored(value: Any) -> Any:
    """`_loaded` of `stored_json`: a JSON column decoded, with what no output can write
    replaced."""
    return _loaded(stored_json(value))


def _text(value: Any) -> str:
    """A JSON column's text (a binary read hands the value decoded)."""
    return value if isinstance(value, str) else json.dumps(value)


def facts_from_row(row: Row) -> RankFacts:
    """The `FACT_COLUMNS` of a row, as ranking holds them."""
    return RankFacts(
        importance=row["importance"],
        created_at=row["created_at"],
        valid_to=row["valid_to"],
        valid_from=row["valid_from"],
        cues=_cues(_text(row["tags"]), _text(row["entities"]), row["place_or_task"]),
        uses=use_from_row(row),
    )


def facts_of(memory: Memory) -> RankFacts:
    """`facts_from_row` of the row `memory_values` writes for `memory` (a write's own row,
    held before any sync reads it back)."""
    return RankFacts(
        importance=memory.importance,
        created_at=epoch(memory.created_at),
        valid_to=epoch_or_none(memory.valid_to),
        valid_from=epoch_or_none(memory.valid_from),
        cues=frozenset(memory.cue_set),
        uses=uses_of(memory),
    )


def uses_of(memory: Memory | AccessState) -> UseState:
    """`use_from_row` of the row `memory_values` (or `access_values`) writes for `memory`."""
    return UseState(
        memory.actr_count,
        epoch_or_none(memory.first_access_at),
        [round(t, 3) for t in memory.actr_times],
    )


def hit_from_row(row: Row, bm25: float | None) -> tuple[str, float | None]:
    """A keyword hit as ranking reads it when it holds the rest: (id, keyword score)."""
    return (row["id"], bm25)


def memory_from_row(row: Row) -> Memory:
    """A full `memories` row as the domain record."""
    trigger = stored_json(row["trigger"])
    authored = row["authored_importance"]
    return Memory(
        id=row["id"],
        type=row["type"],
        title=row["title"],
        content=row["content"],
        owner=row["owner"],
        importance=row["importance"],
        salience=row["salience"],
        confidence=row["confidence"],
        strength=row["strength"],
        reinforcement_count=row["reinforcement_count"],
        access_count=row["access_count"],
        tags=json.loads(stored_json(row["tags"])),
        entities=json.loads(stored_json(row["entities"])),
        place_or_task=row["place_or_task"],
        created_at=from_epoch(row["created_at"]),
        last_accessed_at=from_epoch(row["last_accessed_at"]),
        valid_from=time_or_none(row["valid_from"]),
        valid_to=time_or_none(row["valid_to"]),
        references=[Reference.model_validate(r) for r in json.loads(stored_json(row["refs"]))],
        archived=bool(row["archived"]),
        faded=bool(row["faded"]),
        status=row["status"],
        trigger=Trigger.model_validate_json(trigger) if trigger else None,
        access_log=RING.validate_json(stored_json(row["ring"])),
        channels=json.loads(stored_json(row["channels"])),
        actr_count=row["actr_count"],
        first_access_at=time_or_none(row["first_access_at"]),
        actr_times=json.loads(row["actr_times"]),
        authored_importance=row["importance"] if authored is None else authored,
        seq=row["seq"],
    )


@functools.lru_cache(maxsize=16384)
def _cues(tags: str, entities: str, place_or_task: str) -> frozenset[str]:
    """A row's cue words from its stored JSON text; rows share labels, and recall reads ~100
    rows per query, so each distinct label set is parsed once per process."""
    return frozenset(cue_set(json.loads(tags), json.loads(entities), place_or_task))


def edge_from_row(row: Row) -> EdgeRow:
    """An edge as the ranking and maintenance reads select it (src, dst, type, weight)."""
    return EdgeRow(row["src"], row["dst"], row["type"], row["weight"])


def scoring_from_row(row: Row, bm25: float | None = None) -> ScoringRow:
    """The `SCORING_COLUMNS` of a row (and its keyword score) as recall scores them."""
    return ScoringRow(
        seq=row["seq"],
        id=row["id"],
        type=row["type"],
        owner=row["owner"],
        title=row["title"],
        content=row["content"],
        cues=_cues(row["tags"], row["entities"], row["place_or_task"]),
        importance=row["importance"],
        strength=row["strength"],
        status=row["status"],
        archived=bool(row["archived"]),
        faded=bool(row["faded"]),
        created_at=row["created_at"],
        last_accessed_at=row["last_accessed_at"],
        valid_from=row["valid_from"],
        valid_to=row["valid_to"],
        actr_count=row["actr_count"],
        first_access_at=row["first_access_at"],
        actr_times=json.loads(row["actr_times"]),
        bm25=bm25,
        refs_json=stored_json(row["refs"]),
        place=row["place_or_task"] or "",
        tags_json=stored_json(row["tags"]),
        entities_json=stored_json(row["entities"]),
        trigger=row["trigger"],
    )


def tombstone_from_row(row: Row) -> Tombstone:
    """A `tombstones` row as the record a later write is checked against."""
    return Tombstone(
        memory_id=row["memory_id"],
        owner=row["owner"],
        role=row["role"],
        type=row["type"],
        content_hash=row["content_hash"],
        reason=row["reason"],
        ts=from_epoch(row["ts"]),
        lifted_at=time_or_none(row["lifted_at"]),
        embedding=vector_from_blob(row["embedding"]),
    )


def memory_values(
    m: Memory, embedding: np.ndarray | None, flag: Callable[[bool], Any] = int
) -> dict[str, Any]:
    """The `memories` columns of a record, flags stored by `flag` (int for SQLite's 0/1,
    bool for PostgreSQL); `stems` is what keyword search indexes (`storage.keywords`)."""
    return {
        "id": m.id,
        "type": m.type.value,
        "owner": m.owner,
        "role": m.owner.partition("@")[0],
        "title": m.title,
        "content": m.content,
        "content_hash": m.content_hash,
        "tags": json.dumps(m.tags),
        "entities": json.dumps(m.entities),
        "place_or_task": m.place_or_task,
        "importance": m.importance,
        "salience": m.salience,
        "confidence": m.confidence,
        "strength": m.strength,
        "reinforcement_count": m.reinforcement_count,
        "access_count": m.access_count,
        "status": m.status,
        "archived": flag(m.archived),
        "faded": flag(m.archived and m.faded),
        "created_at": epoch(m.created_at),
        "last_accessed_at": epoch(m.last_accessed_at),
        "valid_from": epoch_or_none(m.valid_from),
        "valid_to": epoch_or_none(m.valid_to),
        "actr_count": m.actr_count,
        "first_access_at": epoch_or_none(m.first_access_at),
        "actr_times": json.dumps([round(t, 3) for t in m.actr_times]),
        "refs": json.dumps([r.model_dump(mode="json") for r in m.references]),
        "trigger": m.trigger.model_dump_json() if m.trigger else None,
        "ring": RING.dump_json(m.access_log, exclude_none=True).decode(),
        "channels": json.dumps(m.channels),
        "authored_importance": m.importance
        if m.authored_importance is None
        else m.authored_importance,
        "embedding": None if embedding is None else np.asarray(embedding, np.float32).tobytes(),
        "stems": row_stems(m.title, m.content, m.tags, m.entities),
    }


def access_state_from_row(row: Row) -> AccessState:
    """The owner and `ACCESS_COLUMNS` of a row, the ring left as its JSON objects."""
    return AccessState(
        id=row["id"],
        owner=row["owner"],
        strength=row["strength"],
        access_count=row["access_count"],
        last_accessed_at=from_epoch(row["last_accessed_at"]),
        actr_count=row["actr_count"],
        first_access_at=time_or_none(row["first_access_at"]),
        actr_times=_loaded(row["actr_times"]),
        channels=_stored(row["channels"]),
        ring=_stored(row["ring"]),
    )


def access_values(m: Memory | AccessState) -> dict[str, Any]:
    """The `ACCESS_COLUMNS` of `memory_values` and the id: what `save_accesses` writes."""
    if isinstance(m, AccessState):
        ring = json.dumps(m.ring, separators=(",", ":"), ensure_ascii=False)
    else:
        ring = RING.dump_json(m.access_log, exclude_none=True).decode()
    return {
        "id": m.id,
        "strength": m.strength,
        "access_count": m.access_count,
        "last_accessed_at": epoch(m.last_accessed_at),
        "actr_count": m.actr_count,
        "first_access_at": epoch_or_none(m.first_access_at),
        "actr_times": json.dumps([round(t, 3) for t in m.actr_times]),
        "ring": ring,
        "channels": json.dumps(m.channels),
    }


def access_from_row(row: Row) -> AccessRecord:
    """An `accesses` row as the record."""
    components = row["components"]
    return AccessRecord(
        ts=from_epoch(row["ts"]),
        channel=row["channel"],
        reader_owner=row["reader_owner"],
        session_ref=row["session_ref"],
        trace_ref=row["trace_ref"],
        query=row["query"],
        score=row["score"],
        rank=row["rank"],
        components=Components.model_validate_json(components) if components else None,
    )


@dataclass(frozen=True, slots=True)
class KeywordAsk:
    """What a backend's keyword search is asked (`SqlVerbs._keyword_candidates`): the query's
    stems inside a scope, the live top `limit` and the faded top `faded` (every row in one
    tier when `wide`), the rows `ids` beside them, and `columns` of each (with m.seq, m.id and
    m.archived), made into what `decode` makes of a row and its keyword score."""

    stems: list[str]
    scope: Scope
    limit: int
    ids: Sequence[str]
    faded: int
    wide: bool
    columns: str = SCORING_COLUMNS
    decode: Decode = scoring_from_row
