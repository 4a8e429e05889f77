"""How one access changes a memory: ring, stream record, counters, base-level history (SPEC §2).

Pure. A service applies `apply_access` to the record, then saves it and appends the access to
the stream.
"""

from __future__ import annotations

from .schema import ACTR_CHANNELS, TOUCH_CHANNELS, AccessRecord, Channel, Memory


def apply_access(
    memory: Memory,
    record: AccessRecord,
    *,
    ring_size: int = 64,
    exact_k: int = 16,
    bump_strength: bool = True,
    count_for_owner: bool = True,
    grain: float = 0.0,
) -> None:
    """Record `record` on `memory` in place.

    - Every access goes on the ring (newest `ring_size`) and into the per-channel counters.
    - ACT-R channels (created, recalled, searched, reinforced, deref) add to the base-level
      history: the count, the first time, and the newest `exact_k` times kept exactly.
      Injected, reflected and shown accesses never do: what the server showed is not use.
    - Uses closer than `grain` seconds to the newest counted one are one use (massed
      repetition is not spaced practice): the newest time moves forward, the count does not
      grow. Recalling a memory five times in a minute says little about needing it next week,
      and counting each one made whatever was shown once rank higher next time (SPEC §5 fix 9).
    - Touching channels (recalled, searched, reinforced, deref) also move last_accessed,
      access_count and strength; an update logs `reinforced` with `bump_strength=False`.
    - `count_for_owner=False` (a reader from another role) logs the access without touching:
      someone else's reads must not change how this owner's memory ages.
    """
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
    return AccessRecord(
        ts=memory.created_at,
        channel=Channel.created,
        reader_owner=reader,
        session_ref=session_ref,
        trace_ref=trace_ref,
    )
