"""What one access does to a memory's use history, number by number (DESIGN §3.2, §14).

`apply_access` keeps the count of counted uses (`actr_count`) and the newest use times
(`actr_times`) that the base-level activation is computed from; `restore_history` puts an
exported history back. Each value below is worked out by hand from the rules, not read back
from the code: a line or branch that runs is not a line whose result is checked.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from nooa_mcp.domain.accesses import History, apply_access, history_record, restore_history
from nooa_mcp.domain.schema import AccessRecord, Channel, Memory

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def fresh() -> Memory:
    return Memory(content="x", created_at=T0, last_accessed_at=T0)


def use(m: Memory, when: datetime, channel: Channel = Channel.recalled, **kw) -> None:
    apply_access(m, AccessRecord(ts=when, channel=channel), **kw)


def ts(*hours: float) -> list[float]:
    return [(T0 + h * HOUR).timestamp() for h in hours]


def test_each_use_apart_counts_once_and_its_time_is_kept_newest_first() -> None:
    m = fresh()
    for h in (0, 2, 5):
        use(m, T0 + h * HOUR, grain=3600.0)
    assert (m.actr_count, m.actr_times) == (3, ts(5, 2, 0))


def test_a_use_exactly_one_grain_after_the_newest_is_a_use_of_its_own() -> None:
    m = fresh()
    use(m, T0, grain=3600.0)
    use(m, T0 + HOUR, grain=3600.0)  # |t - newest| == grain: not closer than the grain
    assert (m.actr_count, m.actr_times) == (2, ts(1, 0))


def test_a_use_inside_the_grain_moves_the_newest_time_and_keeps_the_count() -> None:
    m = fresh()
    use(m, T0, grain=3600.0)
    use(m, T0 + 3 * HOUR, grain=3600.0)
    use(m, T0 + 3.5 * HOUR, grain=3600.0)
    assert (m.actr_count, m.actr_times) == (2, ts(3.5, 0))


def test_an_older_use_inside_the_grain_arriving_late_keeps_the_newest_time() -> None:
    """Accesses can arrive out of order (a log written behind a reply): an earlier use inside
    the grain leaves the newest time where it is, and the older times untouched."""
    m = fresh()
    for h in (0, 3):
        use(m, T0 + h * HOUR, grain=3600.0)
    use(m, T0 + 2.5 * HOUR, grain=3600.0)
    assert (m.actr_count, m.actr_times) == (2, ts(3, 0))
    assert m.last_accessed_at == T0 + 3 * HOUR  # the newest touch stays the last


def test_without_a_grain_every_use_counts_even_at_the_same_moment() -> None:
    m = fresh()
    use(m, T0)
    use(m, T0)
    assert (m.actr_count, m.actr_times) == (2, ts(0, 0))


def test_only_the_newest_exact_k_times_are_kept_while_the_count_goes_on() -> None:
    m = fresh()
    for h in range(6):
        use(m, T0 + 2 * h * HOUR, grain=3600.0, exact_k=3)
    assert (m.actr_count, m.actr_times) == (6, ts(10, 8, 6))
    use(m, T0 + 10.5 * HOUR, grain=3600.0, exact_k=3)  # folded: still three times
    assert (m.actr_count, m.actr_times) == (6, ts(10.5, 8, 6))


def test_shown_injected_and_reflected_are_logged_but_never_counted_as_use() -> None:
    m = fresh()
    for channel in (Channel.shown, Channel.injected, Channel.reflected):
        use(m, T0 + HOUR, channel)
    assert (m.actr_count, m.actr_times, m.first_access_at) == (0, [], None)
    assert (m.access_count, m.strength, m.last_accessed_at) == (0, 1, T0)
    assert m.channels == {"shown": 1, "injected": 1, "reflected": 1}


def test_created_counts_as_use_but_does_not_touch() -> None:
    m = fresh()
    use(m, T0, Channel.created)
    assert (m.actr_count, m.actr_times, m.first_access_at) == (1, ts(0), T0)
    assert (m.access_count, m.strength) == (0, 1)


def test_the_first_use_is_the_earliest_whatever_order_they_arrive_in() -> None:
    m = fresh()
    use(m, T0 + 5 * HOUR)
    use(m, T0 + 2 * HOUR)
    use(m, T0 + 9 * HOUR)
    assert m.first_access_at == T0 + 2 * HOUR
    assert m.actr_times == ts(9, 5, 2)


def test_an_update_reinforces_without_strength_and_another_roles_read_changes_nothing() -> None:
    m = fresh()
    use(m, T0 + HOUR, Channel.reinforced, bump_strength=False)
    assert (m.actr_count, m.access_count, m.strength) == (1, 1, 1)
    use(m, T0 + 4 * HOUR, count_for_owner=False)
    assert (m.actr_count, m.actr_times, m.access_count) == (1, ts(1), 1)
    assert m.last_accessed_at == T0 + HOUR and m.channels == {"reinforced": 1, "recalled": 1}
    assert [a.ts for a in m.access_log] == [T0 + 4 * HOUR, T0 + HOUR]


def test_the_exported_history_is_the_count_and_times_and_restores_to_them() -> None:
    m = fresh()
    use(m, T0, Channel.created, grain=3600.0)
    for h in (3, 6):
        use(m, T0 + h * HOUR, grain=3600.0)
    record = history_record(m)
    assert record["uses"] == 3
    assert record["use_times"] == [(T0 + h * HOUR).isoformat() for h in (6, 3, 0)]
    assert record["strength"] == 3 and record["access_count"] == 2

    copy = fresh()
    restore_history(
        copy,
        History(
            learned_at=T0,
            last_used_at=T0 + 6 * HOUR,
            uses=record["uses"],
            use_times=tuple(ts(6, 3, 0)),
            strength=3,
            access_count=2,
            reinforcements=0,
            channels={"created": 1, "recalled": 2},
        ),
        now=T0 + 24 * HOUR,
    )
    assert (copy.actr_count, copy.actr_times) == (m.actr_count, m.actr_times)
    assert (copy.first_access_at, copy.last_accessed_at) == (T0, T0 + 6 * HOUR)


def test_a_restored_history_from_a_clock_ahead_stops_at_now_and_counts_every_time() -> None:
    now = T0 + 10 * HOUR
    m = fresh()
    restore_history(
        m,
        History(
            learned_at=T0 + 30 * HOUR,  # learned "after" the import: now
            last_used_at=T0 + 40 * HOUR,
            uses=1,  # fewer than its times: the times count
            use_times=tuple(ts(50, 2, 1)),
            strength=4,
            access_count=3,
            reinforcements=1,
        ),
        now=now,
        exact_k=2,
    )
    assert m.actr_times == ts(10, 2)  # 50 h cut to now, then the newest two
    assert m.actr_count == 2
    assert (m.first_access_at, m.last_accessed_at) == (now, now)
    assert (m.strength, m.access_count, m.reinforcement_count) == (4, 3, 1)


def test_a_restored_history_naming_no_use_counts_learning_it_as_the_one() -> None:
    m = fresh()
    restore_history(
        m,
        History(
            learned_at=T0 + HOUR,
            last_used_at=T0,  # before it was learned: the learning is the last use
            uses=0,
            use_times=(),
            strength=1,
            access_count=0,
            reinforcements=0,
        ),
        now=T0 + 5 * HOUR,
    )
    assert (m.actr_count, m.actr_times) == (1, ts(1))
    assert m.last_accessed_at == T0 + HOUR


def test_the_exported_history_carries_reinforcements_and_only_the_ring_fields() -> None:
    """The reader, session and trace name things of the exporting store: an export leaves
    them out of each access (DESIGN §4.7), and keeps the update count under its name."""
    m = fresh()
    use(m, T0 + HOUR, Channel.reinforced, bump_strength=False)
    m.reinforcement_count = 2
    m.access_log[0] = m.access_log[0].model_copy(
        update={"reader_owner": "bob@x", "session_ref": "s-1", "trace_ref": "t-1", "query": "q"}
    )
    record = history_record(m)
    assert record["reinforcements"] == 2
    assert record["accesses"] == [
        {
            "ts": (T0 + HOUR).isoformat().replace("+00:00", "Z"),
            "channel": "reinforced",
            "query": "q",
        }
    ]


def test_a_restored_history_keeps_16_use_times_and_a_ring_of_64_by_default() -> None:
    """DESIGN §17.1: `exact_accesses` 16 and `ring_size` 64."""
    m = fresh()
    restore_history(
        m,
        History(
            learned_at=T0,
            last_used_at=T0 + 99 * HOUR,
            uses=100,
            use_times=tuple(ts(*range(100))),
            strength=100,
            access_count=100,
            reinforcements=0,
            accesses=tuple(
                AccessRecord(ts=T0 + h * HOUR, channel=Channel.recalled) for h in range(100)
            ),
        ),
        now=T0 + 200 * HOUR,
    )
    assert m.actr_times == ts(*range(99, 83, -1))  # the newest 16
    assert len(m.access_log) == 64 and m.access_log[0].ts == T0 + 99 * HOUR
    assert m.actr_count == 100
