"""A server holds the vectors of the roles it serves (DESIGN.md §15), on both backends.

A role's rows are loaded before any search whose scope can see them (its own recall, a grant
reaching it, a write's near-duplicate check); changes are pulled only for roles held; idle
roles are let go and come back whole; nothing outside a scope ever appears.
"""

from __future__ import annotations

import anyio
import numpy as np
import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.engine import Engine
from nooa_mcp.storage.base import VectorRow
from nooa_mcp.storage.residency import Residency
from nooa_mcp.storage.vectors import VectorIndex

pytestmark = pytest.mark.anyio

# Texts with no word in common, so only their own vectors can find them by meaning.
TEXTS = {
    "alice": "alpine meadow orchids bloom each june",
    "bob": "bob keeps the quarterly invoices in the blue binder",
    "dave": "dave prefers tabs over spaces in makefiles",
    "eve": "eve stores the vpn recovery codes offline",
}


def _held_roles(engine: Engine) -> set[str]:
    index = engine.index
    names = {code: role for role, code in index._roles.items()}
    return {names[c] for c in np.unique(index.role_code[: index.size]).tolist()}


def _held_ids(engine: Engine) -> set[str]:
    index = engine.index
    return {index.ids[r] for r in range(index.size) if index.has_vector[r]}


async def _fill(target) -> dict[str, str]:
    """One memory per role (and one shared), written by a server of its own; their ids."""
    ids = {}
    async with Engine.open(Settings(store=target), HashEmbedder()) as engine:
        for role, text in TEXTS.items():
            ids[role] = (await Memory(engine, role).author(text)).id
        ids[""] = (await Memory(engine, "").author("shared handbook of team rituals")).id
    return ids


async def test_a_server_loads_its_owner_at_start_and_other_roles_on_first_search(store_target):
    ids = await _fill(store_target)
    settings = Settings(store=store_target, owner="alice@laptop")
    async with Engine.open(settings, HashEmbedder()) as engine:
        # Its own role and the shared one from the start, nothing else.
        assert _held_roles(engine) == {"alice", ""}
        assert _held_ids(engine) == {ids["alice"], ids[""]}

        bob = Memory(engine, "bob@desk")
        found = await bob.recall(TEXTS["bob"])
        assert [r.id for r in found.hits][:1] == [ids["bob"]]
        assert _held_roles(engine) == {"alice", "bob", ""}
        # Bob's recall never shows another role's memory, held or not.
        assert {r.id for r in found.hits} <= {ids["bob"], ids[""]}


async def test_a_grant_loads_the_granted_role_and_nothing_outside_the_scope(store_target):
    ids = await _fill(store_target)
    async with Engine.open(Settings(store=store_target, owner="alice"), HashEmbedder()) as engine:
        carol = Memory(engine, "carol", grants=["dave"])
        # By meaning alone (no word shared with the query), dave's memory is found: the
        # granted role's vectors were loaded before the search.
        explained = await carol.explain("dave tabs spaces makefiles", scope="*")
        by_id = {r.id: r for r in explained.rows}
        assert ids["dave"] in by_id
        assert _held_roles(engine) >= {"dave"}
        assert "eve" not in _held_roles(engine) and "bob" not in _held_roles(engine)
        visible = {ids["dave"], ids[""]}
        assert set(by_id) <= visible
        # Eve's text asked for by carol: eve is neither loaded nor shown.
        other = await carol.recall(TEXTS["eve"], scope="*")
        assert {r.id for r in other.hits} <= visible
        assert "eve" not in _held_roles(engine)


async def test_a_write_checks_near_duplicates_among_a_role_not_loaded_yet(store_target):
    ids = await _fill(store_target)
    async with Engine.open(Settings(store=store_target, owner="alice"), HashEmbedder()) as engine:
        assert "bob" not in _held_roles(engine)
        again = await Memory(engine, "bob").author(TEXTS["bob"] + " today")
        assert again.status == "created"
        assert again.similar_to is not None and again.similar_to.id == ids["bob"]
        assert "bob" in _held_roles(engine)


async def test_changes_are_pulled_for_roles_held_and_read_whole_when_a_role_loads(store_target):
    await _fill(store_target)
    settings = Settings(store=store_target, owner="alice")
    async with (
        Engine.open(settings, HashEmbedder()) as server,
        Engine.open(Settings(store=store_target), HashEmbedder()) as other,
    ):
        # Another server writes to a role this one holds and to one it does not.
        before = await server.store.change_token()
        mine = (await Memory(other, "alice").author("alice tunes the cello on sundays")).id
        theirs = (await Memory(other, "eve").author("eve rotates the api keys monthly")).id
        # PostgreSQL hears another server's commits over LISTEN, without a round trip: on a
        # loaded machine the notification can come after the commit returns (seen under load,
        # 2026-12-05), so wait for it, as a server's next recall would see it.
        with anyio.fail_after(10):
            while await server.store.change_token() == before:
                await anyio.sleep(0.01)
        await server.sync_vectors(frozenset({"alice"}))
        assert mine in _held_ids(server)
        assert theirs not in server.index.ids  # not even its id: eve is not held
        # Eve's first recall on this server reads eve's rows as they are now.
        found = await Memory(server, "eve").recall("eve rotates the api keys monthly")
        assert theirs in {r.id for r in found.hits}
        assert theirs in _held_ids(server)


async def test_idle_roles_are_let_go_only_when_no_caller_holds_the_index(store_target):
    ids = await _fill(store_target)
    now = [0.0]
    settings = Settings(store=store_target, owner="alice", vector_idle_seconds=60)
    async with Engine.open(settings, HashEmbedder()) as engine:
        engine.index.residency.clock = lambda: now[0]
        await Memory(engine, "bob").recall(TEXTS["bob"])
        assert _held_roles(engine) == {"alice", "bob", ""}
        now[0] = 30.0
        await Memory(engine, "alice").recall(TEXTS["alice"])
        now[0] = 70.0  # bob idle 70 s, alice 40 s
        with engine.index.held():
            assert engine.index.release_idle() == 0  # row numbers are held: nothing goes
        # Leaving the last hold let bob go.
        assert _held_roles(engine) == {"alice", ""}
        assert _held_ids(engine) == {ids["alice"], ids[""]}
        assert engine.index.ids.get(ids["bob"]) is None
        # Searches after the release answer from the rows kept, row numbers renewed.
        found = await Memory(engine, "alice").recall(TEXTS["alice"])
        assert found.hits[0].id == ids["alice"]
        # Bob's next recall reads his rows again.
        back = await Memory(engine, "bob").recall(TEXTS["bob"])
        assert back.hits[0].id == ids["bob"]
        assert _held_roles(engine) == {"alice", "bob", ""}


async def test_the_role_bound_lets_the_least_recently_used_go(store_target):
    await _fill(store_target)
    settings = Settings(store=store_target, owner="alice", vector_max_roles=2)
    async with Engine.open(settings, HashEmbedder()) as engine:
        for role in ("bob", "dave", "eve"):
            await Memory(engine, role).recall(TEXTS[role])
        assert _held_roles(engine) == {"dave", "eve", ""}


async def test_a_row_that_left_a_held_role_leaves_its_searches(tmp_path):
    target = tmp_path / "m.sqlite"
    ids = await _fill(target)
    async with Engine.open(Settings(store=target, owner="bob"), HashEmbedder()) as engine:
        assert ids["bob"] in _held_ids(engine)
        async with engine.store.transaction():
            await engine.store.conn.execute(
                "UPDATE memories SET owner = 'zed', role = 'zed', rev = rev + 100000 WHERE id = ?",
                (ids["bob"],),
            )
        engine.index.mark_dirty()
        found = await Memory(engine, "bob").explain(TEXTS["bob"])
        assert ids["bob"] not in {r.id for r in found.rows}
        assert ids["bob"] not in _held_ids(engine)


def _row(i: int, role: str) -> VectorRow:
    vector = np.zeros(8, dtype=np.float32)
    vector[i % 8] = 1.0
    return VectorRow(i + 1, f"m{i}", role, role, "info", False, vector)


def test_a_release_keeps_every_per_row_array_aligned_with_its_ids():
    index = VectorIndex(8, Residency(idle_seconds=0, max_roles=1))
    index.residency.add(["a", "b"])
    rows = [_row(i, "ab"[i % 2]) for i in range(40)]
    index._apply(rows)
    index.residency.touch(["b"])  # a is the least recently used
    assert index.release_idle() == 20
    assert index.size == 20
    for r in range(index.size):
        i = int(index.ids[r][1:])
        assert i % 2 == 1 and index.seqs[r] == i + 1
        assert index.matrix[r, i % 8] == 1.0 and index.matrix[r].sum() == 1.0
        assert index.ids.get(f"m{i}") == r


async def test_a_server_without_an_owner_that_serves_one_client_holds_every_role_first(tmp_path):
    """A stdio server learns its owner from its one client only when it calls: it reads
    every role up front, as before; with a configured owner, that owner's roles only."""
    target = tmp_path / "m.sqlite"
    ids = await _fill(target)
    async with Engine.open(Settings(store=target), HashEmbedder(), every_role_first=True) as e:
        assert _held_ids(e) == set(ids.values())
    settings = Settings(store=target, owner="eve")
    async with Engine.open(settings, HashEmbedder(), every_role_first=True) as e:
        assert _held_ids(e) == {ids["eve"], ids[""]}


async def test_a_role_loads_a_page_of_rows_at_a_time_into_the_same_index(store_target):
    """A page of rows read while a role loads (their vectors as blobs, their row objects) is
    freed once applied, but the heap it took stays and later allocations make it resident
    again: pages of 5,000 rows left a 100k server ~13 MiB larger than pages of 2,000
    (BENCHMARKS.md, "Resident memory (RSS)"). Every read asks at most SYNC_PAGE = 2,000 rows,
    and the paged load holds what one read of every row holds."""
    from nooa_mcp.storage import vectors

    page = vectors.SYNC_PAGE
    assert page <= 2000
    count = page + 300
    async with Engine.open(Settings(store=store_target), HashEmbedder()) as engine:
        writer = Memory(engine, "alice")
        words = [f"w{i:05d}" for i in range(2 * count)]
        stored = await writer.author_many(
            [{"content": f"{words[2 * i]} {words[2 * i + 1]} entry"} for i in range(count)]
        )
        store = engine.store
        asked: list[int] = []
        rows_of, changes_of = store.vector_rows, store.vector_changes

        async def vector_rows(roles, after, limit):
            asked.append(limit)
            return await rows_of(roles, after, limit)

        async def vector_changes(mark, limit, roles=None):
            asked.append(limit)
            return await changes_of(mark, limit, roles)

        store.vector_rows, store.vector_changes = vector_rows, vector_changes
        paged = VectorIndex(engine.index.dim, Residency())
        await paged.ensure(store, frozenset({"alice"}))
        store.vector_rows, store.vector_changes = rows_of, changes_of
        whole = VectorIndex(engine.index.dim)
        await whole.sync(store)
    n = paged.size
    assert n == whole.size > page and len(stored) == count
    assert asked and max(asked) <= page and len(asked) >= 2
    assert list(paged.ids) == list(whole.ids)
    assert np.array_equal(paged.matrix[:n], whole.matrix[:n])
