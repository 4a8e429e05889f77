"""Incremental reflection planning (services/planning.py): what a pass compares, on a store.

A completed pass records what its pair steps planned over; the next pass compares only the
memories changed or new since against all, and with nothing changed compares nothing. The
report says which sweep ran, how many memories it compared against the role, and how many
cosines that took.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import timedelta

import anyio
import numpy as np
import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.domain import similarity
from nooa_mcp.domain.reflection import MAX_NEW_LINKS, Rows
from nooa_mcp.domain.schema import now as utc_now
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.errors import StoreUnavailable
from nooa_mcp.memory import maintain
from nooa_mcp.services import consolidation, planning
from nooa_mcp.services.planning import Record, record_key
from nooa_mcp.storage.base import RowChanges

pytestmark = pytest.mark.anyio

SUBJECTS = [
    "deploy script tools vpn",
    "billing cron invoices stripe",
    "staging database password vault",
    "frontend build webpack cache",
    "oncall rotation pager schedule",
    "backup snapshots bucket retention",
]
NOW = utc_now()


def base(subject: str) -> str:
    return f"the {subject} notes say check it carefully every single time"


def settings(path, **extra) -> Settings:
    # Dedup off, so a near-duplicate reaches the store and reflection has to fold it.
    return Settings(store=path, owner="coder@laptop", dedup_similarity=1.01, **extra)


async def fill(mem: Memory) -> list[str]:
    """The memories every test starts from; returns the ids of the subjects' notes."""
    recent = utc_now() - timedelta(days=1)
    made = await mem.author_many(
        [
            {"content": base(s), "created_at": recent + i * timedelta(minutes=1)}
            for i, s in enumerate(SUBJECTS)
        ]
        + [{"content": f"unrelated fact number {i} about {s}"} for i, s in enumerate(SUBJECTS)]
        + [{"content": "a scratch note that never pairs", "type": "scratch"}]
    )
    return [r.id for r in made[: len(SUBJECTS)]]


@asynccontextmanager
async def opened(store_path, **extra) -> AsyncIterator[Memory]:
    """A filled store (SQLite here, PostgreSQL in test_postgres_suite); `mem.notes` holds the
    ids of the subjects' notes."""
    async with Memory.open(settings=settings(store_path, **extra), embedder=HashEmbedder()) as m:
        m.notes = await fill(m)  # type: ignore[attr-defined]
        yield m


PAIRED = 2 * len(SUBJECTS)  # live memories that can pair (scratch never does)


async def test_a_second_pass_with_nothing_changed_compares_and_plans_nothing(store_path):
    async with opened(store_path) as mem:
        first = await mem.reflect(now=NOW)
        assert (first.sweep, first.changed) == ("full", PAIRED)
        assert first.compared > 0
        second = await mem.reflect(now=NOW)
        assert second.status == "completed"
        assert (second.sweep, second.changed, second.compared) == ("changed", 0, 0)
        assert [s.planned for s in second.steps] == [0] * len(second.steps)


async def test_a_memory_written_after_a_pass_is_merged_into_an_old_one_next_pass(store_path):
    async with opened(store_path) as mem:
        await mem.reflect(now=NOW)
        old = mem.notes[2]
        copy = await mem.author(base(SUBJECTS[2]).upper() + "!")  # cosine 1 to the old one
        report = await mem.reflect(now=NOW)
        # One memory compared against every memory that can pair (itself included): k × n.
        assert (report.sweep, report.changed) == ("changed", 1)
        assert report.compared == PAIRED + 1
        merge = report.steps[0]
        assert (merge.step, merge.planned, merge.applied) == ("merge", 1, 1)
        assert merge.details == [f"{copy.id[:8]} → {old[:8]}"]
        assert (await mem.get(copy.id)).archived
        again = await mem.reflect(now=NOW)
        assert (again.changed, again.compared, again.applied) == (0, 0, 0)


async def test_a_memory_written_after_a_pass_is_linked_with_an_old_one_next_pass(store_path):
    async with opened(store_path) as mem:
        await mem.reflect(now=NOW)
        old = mem.notes[0]
        near = await mem.author(base(SUBJECTS[0]) + " before every release to production")
        report = await mem.reflect(now=NOW)
        link = next(s for s in report.steps if s.step == "link")
        assert (report.changed, link.planned, link.applied) == (1, 1, 1)
        edges = {(e["target"], e["type"]) for e in (await mem.get(near.id)).edges}
        assert (old, "related") in edges


async def test_an_edited_memory_is_compared_again(store_path):
    async with opened(store_path) as mem:
        await mem.reflect(now=NOW)
        first = (await mem.list_memories(limit=1))[0][1]
        await mem.update(first.id, content="an entirely different subject: garden hoses")
        report = await mem.reflect(now=NOW)
        assert (report.sweep, report.changed) == ("changed", 1)


async def test_a_pass_over_some_steps_leaves_the_rest_to_a_full_sweep(store_path):
    async with opened(store_path) as mem:
        assert (await mem.reflect(["merge"], now=NOW)).sweep == "full"
        assert (await mem.reflect(["merge"], now=NOW)).changed == 0
        # The record covers merge only: link has never seen these pairs.
        assert (await mem.reflect(now=NOW)).sweep == "full"
        assert (await mem.reflect(now=NOW)).changed == 0
        # A pass that needs no pairs sweeps nothing.
        rescore = await mem.reflect(["rescore", "prune"], now=NOW)
        assert (rescore.sweep, rescore.compared) == ("", 0)


async def test_an_unreadable_record_or_one_from_another_model_means_a_full_sweep(store_path):
    async with opened(store_path) as mem:
        await mem.reflect(now=NOW)
        store, key = mem.engine.store, record_key(mem.role)
        raw = json.loads(await store.get_meta(key))
        async with store.transaction():
            await store.set_meta(key, json.dumps({**raw, "basis": raw["basis"] + "|other model"}))
        assert (await mem.reflect(now=NOW)).sweep == "full"
        async with store.transaction():
            await store.set_meta(key, "{not json")
        assert (await mem.reflect(now=NOW)).sweep == "full"
        assert (await mem.reflect(now=NOW)).sweep == "changed"


async def test_unsettled_memories_are_compared_again(store_path):
    """An item skipped because a memory vanished meanwhile leaves its ends unsettled."""
    async with opened(store_path) as mem:
        await mem.reflect(now=NOW)
        store, key = mem.engine.store, record_key(mem.role)
        record = Record.decode(await store.get_meta(key))
        some = (await mem.list_memories(limit=2))[0][1].id
        async with store.transaction():
            await store.set_meta(
                key,
                Record(
                    record.basis, record.steps, record.seqs, record.prints, frozenset({some})
                ).encode(),
            )
        report = await mem.reflect(now=NOW)
        assert (report.sweep, report.changed) == ("changed", 1)
        assert (await mem.reflect(now=NOW)).changed == 0


async def test_an_interrupted_pass_keeps_the_record_of_the_last_completed_one(store_path):
    async with opened(store_path) as mem:
        await mem.reflect(now=NOW)
        await mem.author(base(SUBJECTS[1]).upper() + "!")
        with anyio.CancelScope() as scope:

            async def stop(done: int, total: int, message: str) -> None:
                scope.cancel()

            await mem.reflect(progress=stop, now=NOW)
        await mem.author(base(SUBJECTS[3]).upper() + "!")
        report = await mem.reflect(now=NOW)
        # The interrupted pass merged the first copy before it stopped: only the second is new.
        assert (report.sweep, report.changed) == ("changed", 1)
        assert report.steps[0].applied == 1


async def test_a_record_round_trips_and_names_what_changed():
    seqs = np.array([3, 7, 9, 12], dtype=np.int64)
    prints = np.array([1, 2, 3, 4], dtype=np.uint32)
    record = Record.decode(Record("b", frozenset({"merge"}), seqs, prints).encode())
    assert record.seqs.tolist() == [3, 7, 9, 12] and record.prints.tolist() == [1, 2, 3, 4]
    now = record.changed(np.array([3, 7, 10, 12, 20]), np.array([1, 9, 3, 4, 5], np.uint32))
    assert now.tolist() == [False, True, True, False, True]
    assert Record.decode("") is None and Record.decode('{"basis": 1}') is None


async def test_the_pass_every_n_writes_compares_only_those_writes(store_path):
    """A pass triggered by writes costs (writes × memories), not memories²."""
    async with opened(store_path, reflect_every_writes=3, reflect_idle_seconds=0) as mem:
        await mem.reflect(now=NOW)
        state = mem.engine.role_state(mem.role)
        async with anyio.create_task_group() as tg:
            tg.start_soon(maintain, mem.engine)
            with anyio.fail_after(10):
                await state.pass_done.wait()  # the pass the fill's writes asked for
            done = state.pass_done
            for i in range(3):
                await mem.author(f"a new note number {i} about the build farm {i * 7}")
            with anyio.fail_after(10):
                await done.wait()
            tg.cancel_scope.cancel()
        report = mem.engine.role_state(mem.role).last_report
        assert (report.trigger, report.sweep, report.changed) == ("after-writes", "changed", 3)
        assert report.compared == 3 * (PAIRED + 3)


async def test_a_background_pass_keeps_the_rows_only_while_writes_go_on(store_path, monkeypatch):
    """The rows a pass read are kept for the next pass (a full read of 100k rows costs most
    of an incremental pass) while writes go on; once a pass ends with no write made while it
    ran, the writes have paused and the rows go (13 MB at 100k, resident until the next
    pass), and the next pass reads them afresh."""
    async with opened(store_path, reflect_every_writes=3, reflect_idle_seconds=0) as mem:
        await mem.reflect(now=NOW)
        state = mem.engine.role_state(mem.role)
        real = consolidation.reflect
        during: list[str] = []
        landed: list[str] = []

        async def a_write_lands_while_it_runs(caller, **kwargs):
            if during:
                landed.append((await mem.author(during.pop())).id)
            return await real(caller, **kwargs)

        monkeypatch.setattr(consolidation, "reflect", a_write_lands_while_it_runs)
        async with anyio.create_task_group() as tg:
            tg.start_soon(maintain, mem.engine)
            with anyio.fail_after(10):
                await state.pass_done.wait()  # the pass the fill's writes asked for
            assert state.rows is None  # nothing written while it ran
            during.append("the deploy freeze starts on friday at noon")
            done = state.pass_done
            for i in range(3):
                await mem.author(f"a new note number {i} about the build farm {i * 7}")
            with anyio.fail_after(10):
                await done.wait()
            assert state.last_report.status == "completed"
            assert state.rows is not None  # a write came while it ran: kept
            assert landed[0].encode() in state.rows[1].ids
            tg.cancel_scope.cancel()


async def test_a_store_failure_during_a_pass_reaches_the_caller_as_it_is(store_path, monkeypatch):
    """The lease is renewed beside the pass; an error of the pass is not wrapped in a group."""
    async with opened(store_path) as mem:

        async def gone(*args, **kwargs):
            raise StoreUnavailable("memory.sqlite", "the file was deleted.")

        monkeypatch.setattr(mem.engine.store, "reflection_rows", gone)
        with pytest.raises(StoreUnavailable, match="deleted"):
            await mem.reflect(now=NOW)
        monkeypatch.undo()
        assert (await mem.reflect(now=NOW)).status == "completed"  # the lease was released


@contextmanager
def counting_transactions(store) -> Iterator[list[int]]:
    """Count the transactions opened on `store` (on its instance: both backends)."""
    opened_ = [0]
    real = store.transaction

    def counted():
        opened_[0] += 1
        return real()

    store.transaction = counted
    try:
        yield opened_
    finally:
        del store.transaction


async def add_variants(mem: Memory) -> None:
    """Per subject, two memories to link with its note and a shouted copy to merge into it."""
    await mem.author_many(
        [
            {"content": text}
            for s in SUBJECTS
            for text in (
                base(s) + " before every release to production",
                base(s) + " and once more on fridays",
                base(s).upper() + "!",
            )
        ]
    )


async def test_a_pass_applies_its_items_in_fewer_transactions_than_items(store_path):
    """A commit costs more than a link: items share transactions (up to APPLY_BATCH items or
    APPLY_SECONDS of work each), and with no time to spare each item gets its own."""
    async with opened(store_path) as mem:
        await add_variants(mem)
        saved = consolidation.APPLY_SECONDS
        consolidation.APPLY_SECONDS = 60.0  # a loaded machine must not split the steps here
        try:
            with counting_transactions(mem.engine.store) as opened_:
                report = await mem.reflect(now=NOW)
        finally:
            consolidation.APPLY_SECONDS = saved
        applied = sum(s.applied + s.skipped for s in report.steps)
        assert applied >= 20
        # Take the lease, record the plan, log the report: 3; one per step that had items.
        assert opened_[0] <= 3 + sum(1 for s in report.steps if s.planned)


async def test_with_no_time_to_spare_each_item_gets_its_own_transaction(store_path):
    async with opened(store_path) as mem:
        await add_variants(mem)
        saved = consolidation.APPLY_SECONDS
        consolidation.APPLY_SECONDS = 0.0
        try:
            with counting_transactions(mem.engine.store) as opened_:
                report = await mem.reflect(now=NOW)
        finally:
            consolidation.APPLY_SECONDS = saved
        # Link items share a transaction anyway (one read, one write): the others do not.
        items = sum(s.applied + s.skipped for s in report.steps if s.step != "link")
        assert items >= len(SUBJECTS)
        assert opened_[0] >= items + 3


async def test_a_failing_item_in_a_batch_loses_none_of_the_items_before_it(store_path):
    """The batch is rolled back and redone one item per transaction: the links before the
    failing one are kept, the merges of the step before stand, the error reaches the caller."""
    async with opened(store_path) as mem:
        await add_variants(mem)
        store = mem.engine.store
        real, real_many = store.add_edge, store.add_edges
        links: list[frozenset[str]] = []  # in the order of the plan

        async def add_edges(edges):
            for src, dst, type, _ in edges:
                if type == "related" and frozenset((src, dst)) not in links:
                    links.append(frozenset((src, dst)))
            if len(links) > 2:
                raise RuntimeError("the third link fails")
            await real_many(edges)

        async def add_edge(src, dst, type, weight):
            if type == "related" and frozenset((src, dst)) == links[2]:
                raise RuntimeError("the third link fails")
            await real(src, dst, type, weight)

        store.add_edge, store.add_edges = add_edge, add_edges
        try:
            with pytest.raises(RuntimeError, match="third link"):
                await mem.reflect(now=NOW)
        finally:
            del store.add_edge, store.add_edges
        related = {
            frozenset((m.id, e["target"]))
            for _, m in await mem.list_memories(limit=500)
            for e in (await mem.get(m.id)).edges
            if e["type"] == "related"
        }
        assert related == set(links[:2])
        assert len(await mem.list_memories(limit=500, archived=True)) == len(SUBJECTS)


async def test_a_large_roles_first_sweep_goes_through_clusters_and_still_merges(
    store_path,
):
    """From CLUSTERED_FROM rows a first sweep without reconcile compares each memory with its
    nearest clusters; the merges are found all the same, and the next pass is incremental."""
    saved = planning.CLUSTERED_FROM, similarity.FALLBACK_SHARE
    # A store this small saves nothing through clusters: make it take them all the same.
    planning.CLUSTERED_FROM, similarity.FALLBACK_SHARE = 4, 10.0
    try:
        async with opened(store_path) as mem:
            await add_variants(mem)
            first = await mem.reflect(now=NOW)
            assert (first.sweep, first.changed) == ("clustered", PAIRED + 3 * len(SUBJECTS))
            merge = first.steps[0]
            assert (merge.step, merge.applied) == ("merge", len(SUBJECTS))
            again = await mem.reflect(now=NOW)
            assert (again.sweep, again.changed, again.applied) == ("changed", 0, 0)
    finally:
        planning.CLUSTERED_FROM, similarity.FALLBACK_SHARE = saved


async def test_a_transaction_that_cannot_begin_ends_the_pass_with_its_error(store_path):
    """Nothing to redo item by item: the store's error reaches the caller (no retry loop)."""
    async with opened(store_path) as mem:
        await add_variants(mem)
        store = mem.engine.store
        real = store.transaction
        opened_ = [0]

        def failing():
            opened_[0] += 1
            if opened_[0] == 2:  # the first item transaction (after the lease)
                raise StoreUnavailable("memory.sqlite", "the file was deleted.")
            return real()

        store.transaction = failing
        try:
            with anyio.fail_after(30), pytest.raises(StoreUnavailable, match="deleted"):
                await mem.reflect(now=NOW)
        finally:
            del store.transaction
        assert (await mem.reflect(now=NOW)).status == "completed"


async def test_a_clients_write_goes_between_the_transactions_of_a_pass(store_path):
    """Background maintenance never starves a client: the pass yields the write lock between
    its transactions, so a write that arrives mid-pass lands before the pass is over. The
    pass waits, before its fourth transaction, for the client's write: were the lock held
    across its transactions, the write could not land and the wait would time out (no race
    with the machine's speed either way)."""
    async with opened(store_path) as mem:
        await add_variants(mem)
        store = mem.engine.store
        real = store.transaction
        log: list[str] = []
        started, written = anyio.Event(), anyio.Event()
        in_client = contextvars.ContextVar("in_client", default=False)

        @asynccontextmanager
        async def logged() -> AsyncIterator[None]:
            if not in_client.get():
                if log.count("transaction") == 3:
                    # The fourth waits before it is logged: logged first, the client's write
                    # could land while it waited and follow it in the log (CI saw 4 before).
                    with anyio.fail_after(60):
                        await written.wait()
                log.append("transaction")
                if log.count("transaction") == 2:  # the pass's first item transaction
                    started.set()
            async with real():
                yield

        async def client() -> None:
            in_client.set(True)  # this task's own transactions are not the pass's
            await started.wait()
            await mem.author("a client's note written while reflection runs")
            log.append("client done")
            written.set()

        saved = consolidation.APPLY_BATCH
        consolidation.APPLY_BATCH = 2
        store.transaction = logged
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(client)
                await mem.reflect(now=NOW)
        finally:
            del store.transaction
            consolidation.APPLY_BATCH = saved
        # The client's write landed after the pass's second transaction and before its
        # fourth, and the pass went on for several more after it.
        done = log.index("client done")
        assert log[:done].count("transaction") in (2, 3), log
        assert log[done:].count("transaction") >= 5, log


class _Placed:
    """An embedder that puts each text where the test says (by its first word): exact ties."""

    name, dim = "placed-16", 16

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors

    def embed(self, texts):
        return np.stack([self.vectors[t.split()[0]] for t in texts]).astype(np.float32)


async def test_links_tied_on_cosine_go_to_the_smaller_ids_whatever_order_they_were_written(
    tmp_path,
):
    """A hub at exactly 0.85 from eight memories that are 0.72 from each other: eight tied
    candidates for five links, which go to the five smallest ids — written in another
    order, so neither rows' order nor its reverse gives that answer."""
    a = 0.85
    eye = np.eye(16, dtype=np.float32)
    placed = {"hub": eye[0]}
    for i in range(1, 9):
        placed[f"spoke{i}"] = a * eye[0] + np.sqrt(1 - a * a) * eye[i]
    ident = {"hub": "0" * 32, **{f"spoke{i}": f"{i:032x}" for i in range(1, 9)}}
    order = ["hub", *(f"spoke{i}" for i in (3, 7, 1, 8, 5, 2, 6, 4))]
    async with Memory.open(
        settings=settings(tmp_path / "m.sqlite"), embedder=_Placed(placed)
    ) as mem:
        for name in order:
            await mem.author_many([{"id": ident[name], "content": f"{name} is a memory"}])
        report = await mem.reflect(["link"])
        edges = await mem.engine.store.edges_touching([ident["hub"]])
        linked = {e.dst for e in edges if e.src == ident["hub"] and e.type == "related"}
    assert report.steps[0].applied == MAX_NEW_LINKS == 5
    assert linked == {ident[f"spoke{i}"] for i in range(1, 6)}


#: Columns only an access log changes: the kept rows may hold older values (see `_read`).
ACCESSED = ("last_accessed_at", "strength")


def _columns(rows) -> dict:
    out = {"seq": rows.seq.tolist(), "ids": list(rows.ids)}
    for name in ("type", "owner", "status"):
        names = getattr(rows, {"type": "types", "owner": "owners", "status": "statuses"}[name])
        out[name] = [names[c] for c in getattr(rows, f"{name}_code").tolist()]
    for name in (
        "created_at",
        "importance",
        "authored_importance",
        "salience",
        "confidence",
        "reinforcement_count",
        *ACCESSED,
    ):
        out[name] = getattr(rows, name).tolist()
    return out


async def test_a_pass_reads_only_the_rows_rewritten_since_the_last_and_plans_over_the_same(
    store_path,
):
    """The next pass in the same process takes the rows the last one read, brought up to
    date with the rows rewritten since: the same columns as reading every row again, for new,
    edited, repeated, forgotten, revived and todo rows and another process's writes. (On
    PostgreSQL, whose revision does not follow every column, every pass reads every row.)"""
    path = store_path
    async with Memory.open(settings=settings(path), embedder=HashEmbedder()) as mem:
        ids = await fill(mem)
        await mem.reflect()
        read: list[int] = []
        real = mem.engine.store.reflection_rows

        async def counted(role, after, limit):
            page = await real(role, after, limit)
            read.append(len(page))
            return page

        mem.engine.store.reflection_rows = counted
        await mem.author("a new fact about the nightly backup window")
        await mem.update(ids[0], importance=9)
        await mem.forget(ids[1])
        await mem.forget(ids[2])
        await mem.revive(ids[2])
        again = await mem.author(base(SUBJECTS[3]))  # an exact repeat: reinforced
        todo = await mem.todo("add", content="rotate the signing keys")
        await mem.todo("done", memory_id=todo.id)
        await mem.recall("deploy pipeline", k=3)  # access times only
        async with Memory.open(settings=settings(path), embedder=HashEmbedder()) as other:
            await other.author("another process wrote this one about the cache")
        planner = planning.Planner(mem._caller, mem.role, ["merge", "link"], False)
        kept = _columns(await planner.rows())
        caught_up_to = _kept_mark(mem)
        if mem.engine.store.kind == "sqlite":
            assert read == []  # nothing read in full: only the rows rewritten since
        else:
            assert sum(read) == len(kept["ids"])
            read.clear()
        mem.engine.role_state(mem.role).rows = None
        fresh = _columns(await planning.Planner(mem._caller, mem.role, [], False).rows())
        assert read and sum(read) == len(fresh["ids"])
        for name in ACCESSED:
            kept.pop(name), fresh.pop(name)
        assert kept == fresh
        assert ids[1] not in kept["ids"] and ids[2] in kept["ids"] and todo.id in kept["ids"]
        assert (
            again.status == "exists"
            and kept["reinforcement_count"][kept["ids"].index(again.id)] == 1
        )
        if mem.engine.store.kind == "sqlite":
            mark = await mem.engine.store.reflection_changes(None, 0)
            assert caught_up_to == mark.upto  # the next pass reads from here
            # Kept packed: no id string per row, the ids' bytes and an offset each instead.
            held = mem.engine.role_state(mem.role).rows[1]
            assert held.columns.ids == [] and len(held) == len(fresh["ids"])
            assert held.ids == "".join(fresh["ids"]).encode() and held.ends.nbytes == 8 * len(held)
            unpacked = _columns(held.rows())
            for name in ACCESSED:
                unpacked.pop(name)
            assert unpacked == fresh


def _kept_mark(mem: Memory) -> int:
    kept = mem.engine.role_state(mem.role).rows
    return -1 if kept is None else kept[0]


def test_a_row_rewritten_while_the_changes_were_read_keeps_its_latest_version():
    def row(seq: int, importance: float, owner: str = "r@a") -> tuple:
        return (seq, f"m{seq}", "info", owner, None, importance, None, 0.3, 1.0, 1, 0, 1.0, 2.0)

    kept = Rows.from_records([row(1, 5.0), row(2, 5.0), row(3, 5.0)])
    first = RowChanges(
        Rows.from_records([row(2, 6.0), row(4, 5.0)]), ["r", "r"], np.zeros(2, dtype=bool), 8
    )
    again = RowChanges(
        Rows.from_records([row(2, 7.0), row(3, 5.0, "s@b"), row(5, 5.0)]),
        ["r", "s", "r"],
        np.array([False, False, True]),
        11,
    )
    merged = planning._caught_up(kept.packed(), [first, again], "r")
    assert merged.seq.tolist() == [1, 2, 4]  # 3 went to another role, 5 was archived
    assert merged.importance.tolist() == [5.0, 7.0, 5.0]
