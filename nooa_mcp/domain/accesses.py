"""How one access changes a memory: ring, stream record, counters, base-level history.

Pure. A service applies `apply_access` to the record, then saves it and appends the access to
the stream. An export carries the use history (`history_record`) and an import puts it back
(`restore_history`), so a copied store ranks and forgets as its source did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .epoch import from_epoch
from .schema import ACTR_CHANNELS, TOUCH_CHANNELS, AccessRecord, Channel, Memory
from .scope import OTHER_READER


@dataclass(slots=True)
class AccessState:
    """What an access changes of one memory, and nothing else of its row: the owner (whose
    role decides whether a read counts), the counters, the base-level history and the ring.

    Recall logs every hit behind its reply, five rows a call; the next call's query waits
    for the interpreter while that log runs. Decoding each row into a `Memory` (its ring of
    up to sixty-four records validated one by one) to put one record in front, then dumping
    it all back, was most of the log's time. Here the ring stays the JSON objects the store
    holds (`ring_entry` makes the new one the same way), so the log reads, changes and
    writes these columns alone (`Store.access_states`).
    """

    id: str
    owner: str
    strength: int
    access_count: int
    last_accessed_at: datetime
    actr_count: int
    first_access_at: datetime | None
    actr_times: list[float]
    channels: dict[str, int]
    ring: list[dict[str, Any]]


def ring_entry(record: AccessRecord) -> dict[str, Any]:
    """`record` as the stored ring holds it (a JSON object, no empty fields)."""
    return record.model_dump(mode="json", exclude_none=True)


def apply_access(
    memory: Memory | AccessState,
    record: AccessRecord,
    *,
    ring_size: int = 64,
    exact_k: int = 16,
    bump_strength: bool = True,
    count_for_owner: bool = True,
    grain: float = 0.0,
) -> None:
    """Record `record` on `memory` (a whole record, or its `AccessState`) in place.

    - Every access goes on the ring (newest `ring_size`) and into the per-channel counters.
    - ACT-R channels (created, recalled, searched, reinforced, deref) add to the base-level
      history: the count, the first time, and the newest `exact_k` times kept exactly.
      Injected, reflected and shown accesses never do: what the server showed is not use.
    - Uses closer than `grain` seconds to the newest counted one are one use (massed
      repetition is not spaced practice): the newest time moves forward, the count does not
      grow. Recalling a memory five times in a minute says little about needing it next week,
      and counting each one made whatever was shown once rank higher next time (DESIGN.md §3.2).
    - Touching channels (recalled, searched, reinforced, deref) also move last_accessed,
      access_count and strength; an update logs `reinforced` with `bump_strength=False`.
    - `count_for_owner=False` (a reader from another role) logs the access without touching:
      someone else's reads must not change how this owner's memory ages.
    """
    if isinstance(memory, AccessState):
        memory.ring = [ring_entry(record), *memory.ring][:ring_size]
    else:
        memory.access_log = [record, *memory.access_log][:ring_size]
    memory.channels[record.channel.value] = memory.channels.get(record.channel.value, 0) + 1
    if not count_for_owner:
        return
    t = record.ts.timestamp()
    if record.channel in ACTR_CHANNELS:
        newest = max(memory.actr_times, default=None)
        if newest is not None and abs(t - newest) < grain:
            memory.actr_times = sorted(
                [max(t, newest), *(x for x in memory.actr_times if x != newest)], reverse=True
            )[:exact_k]
        else:
            memory.actr_count += 1
            memory.actr_times = sorted([t, *memory.actr_times], reverse=True)[:exact_k]
        if memory.first_access_at is None or record.ts < memory.first_access_at:
            memory.first_access_at = record.ts
    if record.channel in TOUCH_CHANNELS:
        memory.last_accessed_at = max(memory.last_accessed_at, record.ts)
        memory.access_count += 1
        if bump_strength:
            memory.strength += 1


def created_record(
    memory: Memory, reader: str, session_ref: str | None = None, trace_ref: str | None = None
) -> AccessRecord:
    """The first access of a memory new to this store: when the store learned it (the record's
    `last_accessed_at` as built), which its base-level and retention count from. `created_at`
    is when it happened, and may be years earlier for an imported note."""
    return AccessRecord(
        ts=memory.last_accessed_at,
        channel=Channel.created,
        reader_owner=reader,
        session_ref=session_ref,
        trace_ref=trace_ref,
    )


@dataclass(frozen=True)
class History:
    """A memory's use history as an export line carries it (checked by `imports.carried`).

    Enough for the exact base-level the scorer computes (the count of counted uses, the first
    one, the newest `exact_k` times), for retention and the prune ETA (the last use and the
    strength), and for explain's replay (every access the exporting store kept: the newest
    on the line, older ones on `accesses_of` lines after it, joined by `imports.older_accesses`).
    """

    learned_at: datetime
    last_used_at: datetime
    uses: int
    use_times: tuple[float, ...]
    strength: int
    access_count: int
    reinforcements: int
    channels: dict[str, int] = field(default_factory=dict)
    accesses: tuple[AccessRecord, ...] = ()


#: What an export keeps of each access on the ring: the reader and the session or trace it
#: came from name things of the exporting store, so the importer's owner reads them instead;
#: an access the export marked another role's (`OTHER_READER`, `transfer._all_accesses`, which
#: knows the memory's role and the exporter's) says so (`"other_reader": true`, never who), and
#: the import keeps it another reader's.
RING_FIELDS = frozenset({"ts", "channel", "query", "score", "rank", "components"})


#: What an export keeps of another reader's access: when and how it was used, which is all
#: the base-level and the channel counts read. What that role asked (its query) and how well
#: it matched (score, rank, components) are its own, even in an export by a role that may
#: read it (`--read '*'`): the file leaves the store and the grant behind.
OTHER_READER_FIELDS = frozenset({"ts", "channel"})


def access_record(access: AccessRecord) -> dict[str, Any]:
    """One access as an export writes it (`RING_FIELDS`, and `other_reader` when the export
    marked its reader `OTHER_READER`, with its time and channel only; any other reader is the
    owner's, as before)."""
    other = access.reader_owner == OTHER_READER
    kept = OTHER_READER_FIELDS if other else RING_FIELDS
    record = access.model_dump(mode="json", include=set(kept), exclude_none=True)
    if other:
        record["other_reader"] = True
    return record


def history_record(
    memory: Memory, accesses: Sequence[AccessRecord] | None = None
) -> dict[str, Any]:
    """The JSON an export writes for `memory`'s use history: the newest `exact_k` use times
    (as the scorer bounds them) and `accesses` (oldest first; by default the ring)."""
    return {
        "learned_at": memory.learned_at.isoformat(),
        "last_used_at": memory.last_accessed_at.isoformat(),
        "uses": memory.actr_count,
        "use_times": [from_epoch(t).isoformat() for t in memory.actr_times],
        "strength": memory.strength,
        "access_count": memory.access_count,
        "reinforcements": memory.reinforcement_count,
        "channels": dict(memory.channels),
        "accesses": [
            access_record(a) for a in (memory.access_log if accesses is None else accesses)
        ],
    }


def restore_history(
    memory: Memory,
    history: History,
    *,
    now: datetime,
    exact_k: int = 16,
    ring_size: int = 64,
) -> list[AccessRecord]:
    """Give a memory new to this store the use history it had in the store it came from,
    in place of the single `created` access of a write; returns every access the history
    carries, oldest first, for the access stream (the ring keeps the newest `ring_size`).

    A time after `now` (a skewed clock) counts as now, so a line's times never reach past the
    import, and there are at least as many uses as times kept.
    """
    at = now.timestamp()
    times = sorted((min(t, at) for t in history.use_times), reverse=True)[:exact_k]
    learned = min(history.learned_at, now)
    if not times:  # a line that names no use: learning it was the one
        times = [learned.timestamp()]
    memory.first_access_at = learned
    memory.actr_times = times
    memory.actr_count = max(history.uses, len(times), 1)
    memory.last_accessed_at = max(min(history.last_used_at, now), learned)
    memory.strength = history.strength
    memory.access_count = history.access_count
    memory.reinforcement_count = history.reinforcements
    memory.channels = dict(history.channels)
    stream = sorted(
        (
            a.model_copy(
                update={
                    "ts": min(a.ts, now),
                    "reader_owner": OTHER_READER
                    if a.reader_owner == OTHER_READER
                    else memory.owner,
                }
            )
            for a in history.accesses
        ),
        key=lambda a: a.ts,
    )
    memory.access_log = stream[::-1][:ring_size]
    return stream
