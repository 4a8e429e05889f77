"""A write PostgreSQL aborts for a concurrent one is run again by the server, not handed back
as "retry the call" (`services.transactions`), and an attempt run again writes what the call
was given, not what the aborted attempt made of it."""

from __future__ import annotations

import asyncio
import contextlib

import anyio
import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.errors import StoreConflict
from nooa_mcp.services import transactions

pytestmark = pytest.mark.anyio

OWNER = "coder@laptop"


def _conflict() -> StoreConflict:
    return StoreConflict("test store", "aborted for a concurrent transaction.", "Retry the call.")


async def test_two_servers_linking_two_memories_to_each_other_at_once_both_succeed(postgres):
    """Each update locks its memory, then the other as a link target: in the opposite order
    from the other server's, a deadlock PostgreSQL ends by aborting one of them."""
    settings = Settings(store=postgres, owner=OWNER)
    async with (
        Memory.open(settings=settings, embedder=HashEmbedder()) as one,
        Memory.open(settings=settings, embedder=HashEmbedder()) as two,
    ):
        failures: list[BaseException] = []
        for round_ in range(12):
            a = (await one.author(f"Round {round_}: the billing queue drains at night.")).id
            b = (await one.author(f"Round {round_}: the invoices export runs at noon.")).id

            async def link(mem: Memory, src: str, dst: str) -> None:
                try:
                    await mem.link(src, dst, "related")
                except StoreConflict as exc:  # pragma: no cover - the defect
                    failures.append(exc)

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(link, one, a, b)
                tasks.start_soon(link, two, b, a)
            assert b in {e["target"] for e in (await one.get(a)).edges}
            assert a in {e["target"] for e in (await one.get(b)).edges}
        assert failures == []


async def test_an_aborted_attempt_leaves_no_trace_in_the_memory_written(store_target, monkeypatch):
    """The first attempt logs the memory's first use on the record it writes; aborted, the
    next attempt starts from the record as built: one use, one `created` access."""
    settings = Settings(store=store_target, owner=OWNER)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        store = mem.engine.store
        real = store.append_accesses
        calls = []

        async def abort_once(records):
            calls.append(len(records))
            await real(records)
            if len(calls) == 1:
                raise _conflict()

        monkeypatch.setattr(store, "append_accesses", abort_once)
        written = await mem.author("The staging database is rebuilt every Sunday.")
        monkeypatch.undo()
        view = await mem.get(written.id)
        stored = await store.fetch(written.id)
        history = await mem.access_log(written.id)
        listed = await mem.list_memories()
    assert written.status == "created" and len(calls) == 2
    assert [a.channel.value for _, a in history].count("created") == 1
    assert view.channels == {"created": 1} and stored.actr_count == 1
    assert [v.id for _, v in listed] == [written.id]


async def test_a_conflict_every_time_reaches_the_caller_after_the_last_attempt(
    store_target, monkeypatch
):
    settings = Settings(store=store_target, owner=OWNER)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        first = (await mem.author("The VPN endpoint is vpn-2.")).id
        store = mem.engine.store
        attempts = []

        async def always(*args, **kwargs):
            attempts.append(1)
            raise _conflict()

        monkeypatch.setattr(store, "add_edge", always)
        with pytest.raises(StoreConflict):
            await mem.author(
                "The VPN moved to vpn-3.", links=[{"target": first, "relation": "refines"}]
            )
        monkeypatch.undo()
        listed = await mem.list_memories()
    assert len(attempts) == transactions.CONFLICT_ATTEMPTS
    assert [v.id for _, v in listed] == [first]  # nothing of the aborted write is there


async def test_three_servers_saying_merged_statements_again_at_once_all_succeed(postgres):
    """Reflection merged three wordings of each statement into one; three servers then say
    them again at once. Each write looks at the merged copies to find the one it repeats:
    locking each candidate it looked at, in its own order, deadlocked them again on every
    attempt. A candidate is locked only once it is the one the write takes."""
    settings = Settings(store=postgres, owner=OWNER)
    async with (
        Memory.open(settings=settings, embedder=HashEmbedder()) as one,
        Memory.open(settings=settings, embedder=HashEmbedder()) as two,
        Memory.open(settings=settings, embedder=HashEmbedder()) as three,
    ):
        servers = (one, two, three)
        failures: list[BaseException] = []

        async def say(mem: Memory, text: str) -> None:
            try:
                await mem.author(text)
            except StoreConflict as exc:  # pragma: no cover - the defect
                failures.append(exc)

        for round_ in range(3):
            for _ in range(2):  # said, merged; said again over the merged copies
                async with anyio.create_task_group() as tasks:
                    for group in range(4):
                        base = f"Round {round_} group {group}: the ledger export writes to bucket"
                        wordings = (base, f"The {base.upper()}!", f"{base.lower()}.")
                        for mem, text in zip(servers, wordings, strict=True):
                            tasks.start_soon(say, mem, text)
                await one.reflect(["merge"])
        assert failures == []
        live = [v for _, v in await one.list_memories(limit=500)]
    assert len(live) == 12  # one memory per statement


async def test_one_export_imported_by_three_servers_at_once_is_stored_once(tmp_path, postgres):
    """Each import looks for the line's id, finds none and inserts it: the id is held while
    it is looked for, so the second waits and finds the first's row (it raised psycopg's
    UniqueViolation with a traceback)."""
    source = tmp_path / "source.sqlite"
    async with Memory.open(source, owner=OWNER, embedder=HashEmbedder()) as mem:
        for n in range(6):
            await mem.author(f"Fact {n} about the billing ledger.")
        lines = list(enumerate([r async for r in mem.export_records()], 1))
    settings = Settings(store=postgres, owner=OWNER)
    async with (
        Memory.open(settings=settings, embedder=HashEmbedder()) as one,
        Memory.open(settings=settings, embedder=HashEmbedder()) as two,
        Memory.open(settings=settings, embedder=HashEmbedder()) as three,
    ):
        counts: list[dict[str, int]] = []

        async def run(mem: Memory) -> None:
            counts.append((await mem.import_records(lines)).counts)

        async with anyio.create_task_group() as tasks:
            for mem in (one, two, three):
                tasks.start_soon(run, mem)
        listed = await one.list_memories()
    assert len(listed) == 6
    assert sum(c.get("created", 0) for c in counts) == 6
    assert sum(c.get("exists", 0) for c in counts) == 12


async def test_a_forgotten_text_said_again_while_another_server_revives_it_stays_one_memory(
    postgres, monkeypatch
):
    """The write finds the forgotten memory (read unlocked); before it locks it, another
    server sets out to revive it. Looked past, the write stored a second live copy beside the
    revived one. The revival holds the memory's words first, as the write does: it waits for
    the write, which finds the memory forgotten (refused), and then revives it: one memory."""
    settings = Settings(store=postgres, owner=OWNER)
    text = "The staging database password rotates every 30 days."
    async with (
        Memory.open(settings=settings, embedder=HashEmbedder()) as one,
        Memory.open(settings=settings, embedder=HashEmbedder()) as two,
    ):
        forgotten = (await one.author(text)).id
        await one.forget(forgotten)
        store = one.engine.store
        looked = store.fetch_many
        reviving: list[asyncio.Task] = []

        async def revived_meanwhile(ids, *, lock=True):
            rows = await looked(ids, lock=lock)
            if not lock and forgotten in ids and not reviving:
                reviving.append(asyncio.create_task(two.revive(forgotten)))
                await asyncio.sleep(0.3)  # time enough to commit, were it not held
                assert not reviving[0].done()  # it waits for this write's words
            return rows

        monkeypatch.setattr(store, "fetch_many", revived_meanwhile)
        written = await one.author(text)
        monkeypatch.undo()
        revived = await reviving[0]
        listed = [v for _, v in await one.list_memories()]
    assert revived.changed == ["revived"]
    assert written.status == "blocked-by-tombstone" and written.tombstone.memory_id == forgotten
    assert [v.id for v in listed] == [forgotten]


async def test_two_batches_of_the_same_words_in_other_orders_take_turns(postgres, monkeypatch):
    """Each item's lookup holds its words until the commit: a batch [A, B] beside a batch
    [B, A] on another server held A and B each and waited for the other's (a deadlock, run
    again; under load a batch failed after every attempt). Now a batch holds its words in one
    order before any lookup: the second waits for the first, once, with no conflict."""
    monkeypatch.setattr(transactions, "CONFLICT_ATTEMPTS", 1)
    settings = Settings(store=postgres, owner=OWNER)
    a, b = "The cache warms at 06:00 every weekday.", "Cold starts page the on-call engineer."
    async with (
        Memory.open(settings=settings, embedder=HashEmbedder()) as one,
        Memory.open(settings=settings, embedder=HashEmbedder()) as two,
    ):
        looked = {one: asyncio.Event(), two: asyncio.Event()}

        def meeting(mem: Memory, other: Memory) -> None:
            store = mem.engine.store
            find = store.find_by_hash

            async def first_waits_for_the_other(*args, **kwargs):
                rows = await find(*args, **kwargs)
                if not looked[mem].is_set():
                    looked[mem].set()  # this batch holds its first item's words now
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(looked[other].wait(), 1.0)
                return rows

            monkeypatch.setattr(store, "find_by_hash", first_waits_for_the_other)

        meeting(one, two)
        meeting(two, one)
        first, second = await asyncio.gather(
            one.author_many([{"content": a}, {"content": b}]),
            two.author_many([{"content": b}, {"content": a}]),
        )
        monkeypatch.undo()
        listed = await one.list_memories()
    statuses = sorted(r.status for r in [*first, *second])
    assert statuses == ["created", "created", "exists", "exists"]
    assert len(listed) == 2
