"""Recall answers first and logs what it returned right after.

The client waits for the ranking, not for the log: the accesses are written behind the reply,
in order, and every other verb waits for them, so a caller always reads its own recalls.
"""

from __future__ import annotations

import anyio
import pytest

from nooa_mcp import Memory
from nooa_mcp.engine import WRITE_BEHIND_LIMIT
from nooa_mcp.errors import StoreConflict

pytestmark = pytest.mark.anyio


async def test_recall_replies_before_its_accesses_are_written(mem: Memory) -> None:
    wanted = (await mem.author("The deploy key lives in the vault.")).id
    gate = anyio.Event()
    log = mem.engine.store.log_uses

    async def held(ids, apply):
        await gate.wait()
        return await log(ids, apply)

    mem.engine.store.log_uses = held  # type: ignore[method-assign]
    with anyio.fail_after(5):
        result = await mem.recall("where is the deploy key")
    assert [h.id for h in result.hits] == [wanted]
    assert (await mem.engine.store.fetch(wanted)).channels.get("recalled", 0) == 0
    gate.set()
    log = await mem.access_log(wanted)  # waits for the write behind the reply
    assert [a.channel.value for _, a in log][:2] == ["recalled", "created"]
    assert (await mem.engine.store.fetch(wanted)).channels["recalled"] == 1


async def test_every_other_verb_sees_the_callers_earlier_recalls(mem: Memory) -> None:
    wanted = (await mem.author("Backups run at 02:00 on web-01.")).id
    for _ in range(3):
        await mem.recall("when do backups run")
    assert (await mem.get(wanted)).channels.get("recalled") == 3
    assert [a.channel.value for _, a in await mem.access_log(wanted)].count("recalled") == 3


async def test_closing_writes_what_was_answered(settings, embedder) -> None:
    async with Memory.open(settings=settings, embedder=embedder) as m:
        wanted = (await m.author("The staging database is db-07.")).id
        await m.recall("which database is staging")
    async with Memory.open(settings=settings, embedder=embedder) as m:
        log = await m.access_log(wanted)
        assert [a.channel.value for _, a in log][:2] == ["recalled", "created"]


async def test_a_backlog_makes_the_next_recall_wait(mem: Memory) -> None:
    await mem.author("The cache TTL is 300 seconds.")
    gate = anyio.Event()
    log = mem.engine.store.log_uses

    async def held(ids, apply):
        await gate.wait()
        return await log(ids, apply)

    mem.engine.store.log_uses = held  # type: ignore[method-assign]
    flush = mem.engine.flush
    waiting = anyio.Event()  # a recall waits for the queued logs (or every recall returned)

    async def watched_flush() -> None:
        waiting.set()
        await flush()

    mem.engine.flush = watched_flush  # type: ignore[method-assign]
    done = 0

    async def recall_many() -> None:
        nonlocal done
        for _ in range(WRITE_BEHIND_LIMIT + 5):
            await mem.recall("cache TTL")
            done += 1
        waiting.set()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(recall_many)
        with anyio.fail_after(60):  # a hung job's guard, not a timing
            await waiting.wait()
        # The queue holds at most WRITE_BEHIND_LIMIT logs; the next recall waits for them.
        assert done == WRITE_BEHIND_LIMIT
        gate.set()
    assert done == WRITE_BEHIND_LIMIT + 5
    await mem.engine.flush()
    stored = await mem.engine.store.fetch((await mem.recall("cache TTL")).hits[0].id)
    assert stored is not None


async def test_logging_starts_after_the_delay_unless_a_caller_waits_for_it(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log waits `AFTER_REPLY_DELAY` so the reply leaves first; `flush` does not wait."""
    monkeypatch.setattr("nooa_mcp.engine.AFTER_REPLY_DELAY", 0.3)
    started: list[float] = []
    ran = anyio.Event()

    async def work() -> None:
        started.append(anyio.current_time())
        ran.set()

    queued = anyio.current_time()
    await mem.engine.after_reply(work)
    assert started == []  # the reply's moment: nothing of the log has run
    with anyio.fail_after(60):  # a hung job's guard, not a timing
        await ran.wait()
    assert len(started) == 1 and started[0] - queued >= 0.3

    # A delay no test run reaches: a log that runs now runs because `flush` asked for it.
    monkeypatch.setattr("nooa_mcp.engine.AFTER_REPLY_DELAY", 3600)
    await mem.engine.after_reply(work)
    with anyio.fail_after(60):
        await mem.engine.flush()
    assert len(started) == 2
    # With nobody waiting any more, the next log waits again.
    await mem.engine.after_reply(work)
    await anyio.sleep(0.1)
    assert len(started) == 2
    with anyio.fail_after(60):
        await mem.engine.flush()
    assert len(started) == 3


async def test_a_flush_waits_for_the_logs_queued_before_it_not_after(mem: Memory) -> None:
    """A client recalling back to back keeps the queue from ever being empty: a write that
    waited for an empty queue waited for every log queued after it too."""
    order: list[str] = []
    gates = [anyio.Event() for _ in range(3)]

    def log(i: int):
        async def work() -> None:
            await gates[i].wait()
            order.append(f"log {i}")

        return work

    await mem.engine.after_reply(log(0))

    flushing, flushed = anyio.Event(), anyio.Event()

    async def writer() -> None:
        flushing.set()  # flush notes what it waits for before it first yields
        await mem.engine.flush()
        order.append("flushed")
        flushed.set()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(writer)
        await flushing.wait()
        await mem.engine.after_reply(log(1))  # queued after the flush began
        await mem.engine.after_reply(log(2))
        gates[0].set()
        with anyio.fail_after(30):  # a flush that waits for logs 1 and 2 too never ends here
            await flushed.wait()
        assert order == ["log 0", "flushed"]
        gates[1].set()
        gates[2].set()
    await mem.engine.flush()
    assert order == ["log 0", "flushed", "log 1", "log 2"]


async def test_an_access_log_the_database_aborted_is_written_again(mem: Memory) -> None:
    """Written after the reply, no caller is there to retry a log a deadlock aborted."""
    wanted = (await mem.author("The release train leaves on Thursdays.")).id
    store = mem.engine.store
    real = store.log_uses
    attempts = 0

    async def conflicted(ids, apply):
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise StoreConflict(store.label, "deadlock detected; nothing was written.")
        return await real(ids, apply)

    store.log_uses = conflicted  # type: ignore[method-assign]
    await mem.recall("when does the release train leave")
    await mem.engine.flush()
    store.log_uses = real  # type: ignore[method-assign]
    assert attempts == 2
    assert (await store.fetch(wanted)).channels["recalled"] == 1


async def test_the_log_waits_while_a_call_is_served_unless_a_caller_waits_for_it(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log run beside the next call's query embedding slowed that call (~1 ms of the
    model's two cores at 1k): it waits for a moment between calls (`Engine.serving`), or
    `BETWEEN_CALLS_AT_MOST`, or a caller's `flush`."""
    monkeypatch.setattr("nooa_mcp.engine.BETWEEN_CALLS_AT_MOST", 3600)
    ran: list[int] = []

    async def work() -> None:
        ran.append(1)

    with mem.engine.serving():
        await mem.engine.after_reply(work)
        await anyio.sleep(0.1)
        assert ran == []  # a call is being served: not now
    with anyio.fail_after(60):  # a hung job's guard, not a timing
        while not ran:
            await anyio.sleep(0.01)
    with mem.engine.serving():
        await mem.engine.after_reply(work)
        with anyio.fail_after(60):
            await mem.engine.flush()  # a caller waits for it: it runs inside the call
        assert ran == [1, 1]
    monkeypatch.setattr("nooa_mcp.engine.BETWEEN_CALLS_AT_MOST", 0.05)
    with mem.engine.serving():  # a server never idle still logs
        await mem.engine.after_reply(work)
        with anyio.fail_after(60):
            while len(ran) < 3:
                await anyio.sleep(0.01)


async def test_reads_back_to_back_are_logged_together_each_as_its_reader_counts(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The logs of recalls made while calls are served are written by one `log_uses` (one
    transaction), in the order of the recalls, and each access as its own reader counts it:
    a reader of another role (a read grant) is logged on the memory without aging it."""
    monkeypatch.setattr("nooa_mcp.engine.BETWEEN_CALLS_AT_MOST", 3600)
    wanted = (await mem.author("The cache TTL is 300 seconds.")).id
    await mem.engine.flush()
    before = await mem.engine.store.fetch(wanted)
    reviewer = Memory(mem.engine, "reviewer@desk", grants=["coder"])
    store = mem.engine.store
    real = store.log_uses
    logged: list[list[str]] = []

    async def counted(ids, apply):
        logged.append(list(ids))
        return await real(ids, apply)

    store.log_uses = counted  # type: ignore[method-assign]
    with mem.engine.serving():  # calls back to back: the log waits for a moment between
        for reader in (mem, reviewer, mem):
            assert (await reader.recall("cache TTL", scope="coder")).hits[0].id == wanted
        await anyio.sleep(0.05)
        assert logged == []
    await mem.engine.flush()
    assert logged == [[wanted]]
    after = await store.fetch(wanted)
    assert after.channels["recalled"] == before.channels.get("recalled", 0) + 3
    assert after.access_count == before.access_count + 2  # the reviewer's read ages nothing
    assert [a.reader_owner for a in after.access_log[:3]] == [
        "coder@laptop",
        "reviewer@desk",
        "coder@laptop",
    ]
