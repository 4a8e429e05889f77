"""A process holds the edges of the roles it holds, not every edge of the store (DESIGN.md §15),
on both backends.

An edge is usable only when both its ends are memories of roles the vector index holds, so a
role's edges are read when the role loads, pulled while it is held and dropped when it goes;
the held edges still answer as the store does for every scope whose roles are held, and as an
index holding the whole store does.
"""

from __future__ import annotations

import numpy as np
import pytest
from held_edges import held_edges

from nooa_mcp.domain.schema import EdgeType, Memory
from nooa_mcp.domain.scope import Scope, owner_role
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.storage import Store, open_store
from nooa_mcp.storage.base import EdgeRow
from nooa_mcp.storage.links import HeldLinks, _key
from nooa_mcp.storage.residency import Residency
from nooa_mcp.storage.vectors import VectorIndex

pytestmark = pytest.mark.anyio

EMBED = HashEmbedder()
RELATIONS = ["refines", "contradicts"]
OWNERS = {"a1": "ann", "a2": "ann", "a3": "ann", "b1": "bo", "b2": "bo", "c1": "cy", "s1": ""}
#: Each memory's role, as `put` made it.
ROLE_OF: dict[str, str] = {}


async def put(store: Store, content: str, owner: str) -> str:
    memory = Memory(content=content, owner=owner)
    async with store.transaction():
        await store.insert(memory, EMBED.embed([content])[0])
    ROLE_OF[memory.id] = owner_role(owner)
    return memory.id


async def fill(store: Store) -> dict[str, str]:
    """Memories of three roles and a shared one, linked within and across roles."""
    ids = {name: await put(store, f"memory {name}", owner) for name, owner in OWNERS.items()}
    kinds = list(EdgeType)
    names = list(ids)
    edges = [
        (ids[x], ids[y], kinds[(i + 3 * j) % len(kinds)], 0.1 + 0.05 * (i + j))
        for i, x in enumerate(names)
        for j, y in enumerate(names)
        if x != y and (i + j) % 2 == 0
    ]
    edges.append((ids["a2"], ids["a1"], EdgeType.refines, 0.9))
    async with store.transaction():
        await store.add_edges(edges)
    return ids


async def within(store: Store, roles: set[str]) -> int:
    """How many of the store's edges have both ends in `roles`."""
    every = await store.edge_pairs(None, live_only=False)
    return sum(ROLE_OF[e.src] in roles and ROLE_OF[e.dst] in roles for e in every)


def seen(ids: list[str], scope: Scope) -> list[str]:
    """Of `ids`, the memories `scope` sees."""
    return [i for i in ids if scope.roles is None or ROLE_OF[i] in {*scope.roles, ""}]


def key(edges: list[EdgeRow]) -> list[tuple[str, str, str, float]]:
    return sorted((e.src, e.dst, e.type, e.weight) for e in edges)


async def assert_same(store: Store, index: VectorIndex, scope: Scope, ids: list[str]) -> int:
    """The index's held edges answer as the store for `scope` about the memories of `ids`
    it sees (ranking asks of no other: its rows are inside the scope); how many edges they
    gave."""
    ids = seen(ids, scope)
    want = key(await store.out_edges(ids, scope))
    assert key(index.links.out_edges(ids, scope, index)) == want
    into = key(await store.successors(ids, RELATIONS, scope))
    assert key(index.links.successors(ids, RELATIONS, scope, index)) == into
    return len(want) + len(into)


async def test_a_role_held_brings_only_the_edges_between_roles_held(store: Store) -> None:
    ids = await fill(store)
    every = list(ids.values())
    total = len(await store.edge_pairs(None, live_only=False))
    index = VectorIndex(EMBED.dim, Residency())
    await index.ensure(store, frozenset({"ann"}))
    assert len(index.links) == await within(store, {"ann", ""}) < total
    ann = Scope(roles=frozenset({"ann"}))
    assert await assert_same(store, index, ann, every) > 5
    # A grant: both roles load before the scope is searched, with the edges between them.
    granted = Scope(roles=frozenset({"ann", "bo"}))
    await index.ensure(store, granted.visible_roles)
    assert len(index.links) == await within(store, {"ann", "bo", ""}) < total
    assert await assert_same(store, index, granted, every) > 5
    # An index of the whole store answers the same; it holds every edge.
    whole = VectorIndex(EMBED.dim)
    await whole.ensure(store, None)
    assert len(whole.links) == total
    for scope in (ann, granted):
        mine, held = seen(every, scope), index.links
        assert held.out_edges(mine, scope, index) == whole.links.out_edges(mine, scope, whole)
        into = whole.links.successors(mine, RELATIONS, scope, whole)
        assert held.successors(mine, RELATIONS, scope, index) == into
    # Every role asked for (a scope that sees everyone): every edge.
    await index.ensure(store, None)
    assert len(index.links) == total
    assert await assert_same(store, index, Scope(roles=None), every) > 15


async def test_a_role_let_go_takes_its_edges_with_it(store: Store) -> None:
    ids = await fill(store)
    now = [0.0]
    index = VectorIndex(EMBED.dim, Residency(idle_seconds=60, clock=lambda: now[0]))
    await index.ensure(store, frozenset({"ann"}))
    alone = len(index.links)
    ends = len(index.links.ends)
    now[0] = 30.0
    await index.ensure(store, frozenset({"bo"}))
    assert len(index.links) == await within(store, {"ann", "bo", ""}) > alone
    now[0] = 70.0  # ann idle 70 s, bo 40 s: ann goes as the hold ends
    with index.held():
        pass
    assert len(index.links) == await within(store, {"bo", ""})
    assert await assert_same(store, index, Scope(roles=frozenset({"bo"})), list(ids.values())) > 0
    # Ann comes back with her edges; the ends let go were not kept meanwhile.
    now[0] = 80.0
    await index.ensure(store, frozenset({"ann"}))
    assert len(index.links) == await within(store, {"ann", "bo", ""})
    assert len(index.links.ends) >= ends
    # Everyone held, then only named roles again: every edge, then theirs.
    await index.ensure(store, None)
    assert len(index.links) == len(await store.edge_pairs(None, live_only=False))
    now[0] = 200.0
    await index.ensure(store, frozenset({"cy"}))
    with index.held():
        pass
    assert len(index.links) == await within(store, {"cy", ""})


async def test_edges_another_process_writes_arrive_for_the_roles_held_only(store_target) -> None:
    """Another process links memories of a role held (one of them new: its edge comes with
    the links, before its row comes with the rows) and of a role not held."""
    a, b = await open_store(store_target), await open_store(store_target)
    try:
        ids = await fill(a)
        index = VectorIndex(EMBED.dim, Residency())
        await index.ensure(b, frozenset({"ann"}))
        before = len(index.links)
        late = await put(a, "memory a4", "ann")
        async with a.transaction():
            await a.add_edge(ids["a1"], late, EdgeType.causes, 0.95)
            await a.add_edge(ids["a3"], ids["a1"], EdgeType.refines, 0.99)
            await a.add_edge(ids["b1"], ids["b2"], EdgeType.refines, 0.7)
            await a.add_edge(ids["b1"], ids["a1"], EdgeType.refines, 0.7)
        ann = Scope(roles=frozenset({"ann"}))
        # The links first, as a sync pulls them: the new memory's edge is held before its row,
        # and used only once the row is.
        await index.links.sync(b, index.residency.filter())
        assert len(index.links) == before + 2
        assert late not in {e.dst for e in index.links.out_edges([ids["a1"]], ann, index)}
        index.mark_dirty()
        await index.ensure(b, ann.visible_roles)
        assert len(index.links) == before + 2 == await within(a, {"ann", ""})
        out = key(index.links.out_edges([ids["a1"]], ann, index))
        assert (ids["a1"], late, "causes", 0.95) in out
        await assert_same(b, index, ann, [*ids.values(), late])
    finally:
        await a.close()
        await b.close()


async def test_an_edge_a_sync_passed_over_while_its_role_loaded_is_read_by_the_load(
    store_target,
) -> None:
    """A sync that began before a role's load asked no edge of that role, and may have read
    past an edge written while the load read the role's edges: the load reads the edges
    changed since its own mark, taken before its read, again."""
    a, b = await open_store(store_target), await open_store(store_target)
    try:
        ids = await fill(a)
        index = VectorIndex(EMBED.dim, Residency())
        await index.ensure(b, frozenset({"bo"}))
        read = b.role_edges

        async def then_a_write_and_a_sync(roles, among):
            got = await read(roles, among)
            async with a.transaction():
                await a.add_edge(ids["a3"], ids["a2"], EdgeType.refines, 0.97)
            await index.links.sync(b, ["bo", ""])  # a sync begun before the load
            return got

        b.role_edges = then_a_write_and_a_sync  # type: ignore[method-assign]
        await index.ensure(b, frozenset({"ann"}))
        b.role_edges = read  # type: ignore[method-assign]
        ann = Scope(roles=frozenset({"ann"}))
        out = key(index.links.out_edges([ids["a3"]], ann, index))
        assert (ids["a3"], ids["a2"], "refines", 0.97) in out
        assert len(index.links) == await within(a, {"ann", "bo", ""})
    finally:
        await a.close()
        await b.close()


def test_dropping_edges_leaves_the_rest_in_both_orders() -> None:
    """What `drop` leaves is the rest of the edges, in the order by source and by target that
    lookups and in-place inserts search, with the ends no edge uses let go."""
    rng = np.random.default_rng(2)
    ends = [f"{i:032x}" for i in range(200)]
    kinds = ["related", "causes", "refines"]
    picks = rng.integers(0, 200, (1500, 2)).tolist()
    edges = [EdgeRow(ends[s], ends[d], kinds[(s * d) % 3], float(rng.random())) for s, d in picks]
    held = HeldLinks()
    held.apply(edges)
    going = set(ends[::3])
    assert held.drop(sorted(going)) > 0
    rest = HeldLinks()
    rest.apply([e for e in edges if e.src not in going and e.dst not in going])
    assert len(held) == len(rest) > 0
    assert len(held.ends) == len(rest.ends) == len({*ends} - going)
    assert held.nbytes == len(held) * 21

    assert held_edges(held) == held_edges(rest)
    by_src = _key(held.src, held.dst, held.kind)
    assert (np.diff(by_src) > 0).all()
    at = held.by_dst
    by_dst = _key(held.dst[at], held.src[at], held.kind[at], target=True)
    assert (np.diff(by_dst) > 0).all()
    # Edges put in place after the drop land where a whole sort puts them.
    more = [EdgeRow(ends[1], ends[2], "causes", 0.5), EdgeRow(ends[4], ends[199], "refines", 0.25)]
    held.apply(more)
    rest.apply(more)
    assert held_edges(held) == held_edges(rest)
    assert (np.diff(_key(held.src, held.dst, held.kind)) > 0).all()
    at = held.by_dst
    assert (np.diff(_key(held.dst[at], held.src[at], held.kind[at], target=True)) > 0).all()
