"""Edges held in memory (`storage.links`) answer as the store does, on both backends.

Spreading and supersession read out-edges to live targets in the reader's scope and
superseding links from live sources in it (`Store.out_edges`, `Store.successors`); the held
edges must give the same edges with the same weights for every scope, and follow another
connection's links (through `Store.ranking_changes`) and archivals (through the vector index's
revision pull) once synced.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from held_edges import held_edges

from nooa_mcp.domain.schema import EdgeType, Memory
from nooa_mcp.domain.scope import Scope
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.storage import Store, open_store
from nooa_mcp.storage.base import EdgeRow
from nooa_mcp.storage.ids import IdTable
from nooa_mcp.storage.links import HeldLinks, _key
from nooa_mcp.storage.vectors import VectorIndex

pytestmark = pytest.mark.anyio

EMBED = HashEmbedder()
SCOPES = {
    "coder": Scope(roles=frozenset({"coder"})),
    "coder and writer": Scope(roles=frozenset({"coder", "writer"})),
    "writer's owner": Scope(owner="writer@desk"),
    "everyone": Scope(roles=None),
    "nobody named": Scope(roles=frozenset({"ghost"})),
}
RELATIONS = ["refines", "contradicts"]


async def put(
    store: Store, content: str, owner: str, archived: bool = False, faded: bool = False
) -> str:
    memory = Memory(content=content, owner=owner)
    async with store.transaction():
        await store.insert(memory, EMBED.embed([content])[0])
        if archived or faded:
            await store.set_archived(memory.id, True, memory.created_at, faded=faded)
    return memory.id


def key(edges: list[EdgeRow]) -> list[tuple[str, str, str, float]]:
    return sorted((e.src, e.dst, e.type, e.weight) for e in edges)


async def fill(store: Store) -> dict[str, str]:
    """Memories of two roles, a shared one and an archived one, linked every way."""
    ids = {
        "c1": await put(store, "coder one", "coder@laptop"),
        "c2": await put(store, "coder two", "coder@laptop"),
        "w1": await put(store, "writer one", "writer@desk"),
        "s1": await put(store, "shared one", ""),
        "gone": await put(store, "archived coder", "coder@laptop", archived=True),
    }
    kinds = list(EdgeType)
    edges = []
    for i, a in enumerate(ids.values()):
        for j, b in enumerate(ids.values()):
            if a != b:
                edges.append((a, b, kinds[(i + 2 * j) % len(kinds)], 0.1 + 0.07 * (i + j)))
    edges.append((ids["c2"], ids["c1"], EdgeType.refines, 0.9))
    edges.append((ids["w1"], ids["c1"], EdgeType.contradicts, 0.8))
    edges.append((ids["s1"], ids["c1"], EdgeType.refines, 1 / 3))
    async with store.transaction():
        await store.add_edges(edges)
    return ids


async def assert_same(store: Store, held: HeldLinks, index: VectorIndex, ids: list[str]) -> int:
    """Held reads, by id and by the index's rows, equal store reads for every scope; how many
    edges they returned."""
    seen = 0
    rows = index.ids.rows_of(ids)
    by_row = bool((rows >= 0).all())  # not when a memory asked for is no row yet
    for name, scope in SCOPES.items():
        want = key(await store.out_edges(ids, scope))
        assert key(held.out_edges(ids, scope, index)) == want, name
        assert not by_row or key(held.out_edges_at(rows, scope, index)) == want, name
        into = key(await store.successors(ids, RELATIONS, scope))
        assert key(held.successors(ids, RELATIONS, scope, index)) == into, name
        assert not by_row or key(held.successors_at(rows, RELATIONS, scope, index)) == into, name
        seen += len(want) + len(into)
    assert_row_ends(held, index)
    return seen


def assert_row_ends(held: HeldLinks, index: VectorIndex) -> None:
    """The end code kept for each row of the index (made once, then extended as ends and
    rows come) is the one its id has now."""
    every = [index.ids[row] for row in range(len(index.ids))]
    assert held._row_ends(index).tolist() == held.ends.rows_of(every).tolist()


async def test_held_edges_answer_as_the_store_for_every_scope(store: Store) -> None:
    ids = await fill(store)
    index, held = VectorIndex(EMBED.dim), HeldLinks()
    await index.sync(store)
    await held.sync(store)
    assert len(held) == len(await store.edge_pairs(None, live_only=False)) == 22
    seen = await assert_same(store, held, index, list(ids.values()))
    assert seen > 20  # the comparison is not between empty lists
    # A shared source is seen by every scope; a writer's source by no coder scope.
    shared = held.out_edges([ids["s1"]], SCOPES["coder"], index)
    assert {e.dst for e in shared} == {ids["c1"], ids["c2"]}
    assert held.out_edges([ids["c1"]], SCOPES["nobody named"], index) == [
        e for e in held.out_edges([ids["c1"]], SCOPES["everyone"], index) if e.dst == ids["s1"]
    ]


async def test_a_faded_correction_supersedes_from_the_held_edges_as_from_the_store(
    store: Store,
) -> None:
    """`successors` takes faded sources (maintenance faded them; their user did not forget
    them) and leaves forgotten ones, held or read; spreading's out-edges stay live only."""
    ids = await fill(store)
    faded = await put(store, "faded coder", "coder@laptop", faded=True)
    async with store.transaction():
        await store.add_edge(faded, ids["c1"], EdgeType.contradicts, 0.7)
        await store.add_edge(ids["gone"], ids["c2"], EdgeType.refines, 0.6)
        await store.add_edge(ids["c2"], faded, EdgeType.related, 0.4)
    index, held = VectorIndex(EMBED.dim), HeldLinks()
    await index.sync(store)
    await held.sync(store)
    await assert_same(store, held, index, [*ids.values(), faded])
    into = key(held.successors([ids["c1"], ids["c2"]], RELATIONS, SCOPES["coder"], index))
    assert (faded, ids["c1"], "contradicts", 0.7) in into
    assert ids["gone"] not in {src for src, *_ in into}
    assert faded not in {e.dst for e in held.out_edges([ids["c2"]], SCOPES["coder"], index)}


async def test_held_edges_follow_another_connections_links_and_archivals(store_target) -> None:
    """Another process links, strengthens and archives; after a sync of the index and the held
    edges, they answer as the store does (a held copy that missed the feed would not)."""
    a, b = await open_store(store_target), await open_store(store_target)
    try:
        ids = await fill(a)
        index, held = VectorIndex(EMBED.dim), HeldLinks()
        await index.sync(b)
        await held.sync(b)
        await assert_same(b, held, index, list(ids.values()))  # the rows' ends kept from here
        late = await put(a, "coder three", "coder@laptop")
        async with a.transaction():
            await a.add_edge(ids["c1"], late, EdgeType.causes, 0.95)
            await a.add_edge(ids["c1"], ids["c2"], EdgeType.refines, 0.99)
            await a.add_edge(late, ids["c2"], EdgeType.refines, 0.5)
            await a.set_archived(ids["s1"], True, Memory(content="x").created_at)
        index.mark_dirty()
        await index.sync(b)
        await held.sync(b)
        every = [*ids.values(), late]
        await assert_same(b, held, index, every)
        out = held.out_edges([ids["c1"]], SCOPES["coder"], index)
        assert (ids["c1"], late, "causes", 0.95) in key(out)
        assert ids["s1"] not in {e.dst for e in out}
        into = held.successors([ids["c2"]], RELATIONS, SCOPES["coder"], index)
        assert (late, ids["c2"], "refines", 0.5) in key(into)
    finally:
        await a.close()
        await b.close()


def test_held_edges_cost_a_few_dozen_bytes_each() -> None:
    """21 bytes of arrays an edge (two int32 ends, a float64 weight, a uint8 relation, an
    int32 place in the order by target), where an `EdgeRow` object took about 100."""
    held = HeldLinks()
    ends = [f"{i:032x}" for i in range(1000)]
    rng = np.random.default_rng(0)
    pairs = rng.integers(0, 1000, (5000, 2)).tolist()
    held.apply([EdgeRow(ends[s], ends[d], "related", 0.5) for s, d in pairs])
    assert len(held) == len({(s, d) for s, d in pairs})
    assert held.nbytes == len(held) * 21


async def test_an_edge_rolled_back_is_never_held_and_the_next_edge_is(store: Store) -> None:
    """A sync inside a transaction leaves the edges alone: read there, an edge that then rolls
    back would stay held, and on SQLite the next edge, given the same number, would be
    missed. The first sync after the transaction reads what committed."""
    ids = await fill(store)
    index = VectorIndex(EMBED.dim)
    await index.sync(store)
    held = index.links
    before = len(held)
    with pytest.raises(RuntimeError):
        async with store.transaction():
            await store.add_edge(ids["c1"], ids["w1"], EdgeType.precedes, 0.6)
            await index.sync(store)
            raise RuntimeError("rolled back")
    async with store.transaction():
        await store.add_edge(ids["c2"], ids["w1"], EdgeType.precedes, 0.4)
    await index.sync(store)
    assert len(held) == before + 1
    found = key(held.out_edges([ids["c1"], ids["c2"]], SCOPES["everyone"], index))
    assert (ids["c2"], ids["w1"], "precedes", 0.4) in found
    assert (ids["c1"], ids["w1"], "precedes", 0.6) not in found
    assert found == key(await store.out_edges([ids["c1"], ids["c2"]], SCOPES["everyone"]))


def test_edges_put_in_place_one_by_one_equal_a_sort_of_them_all() -> None:
    """A sync's edges (or a role's, fewer than a quarter of those held) are inserted where the
    two orders put them, without a sort of them all: the arrays must come out as a whole sort
    of every edge would make them."""
    rng = np.random.default_rng(1)
    ends = [f"{i:032x}" for i in range(300)]
    kinds = ["related", "causes", "refines"]

    def some(n: int) -> list[EdgeRow]:
        picks = rng.integers(0, 300, (n, 2)).tolist()
        return [
            EdgeRow(ends[s], ends[d], kinds[(s + d) % 3], float(rng.random())) for s, d in picks
        ]

    held, everything = HeldLinks(), some(2000)
    held.apply(everything)
    for i in range(60):
        # Batches of 0 to 2 new edges, then (every third) of up to 400, beside a rewritten
        # weight and a repeated edge whose last weight wins.
        n = int(rng.integers(0, 400 if i % 3 == 0 else 3))
        batch = [*some(n), everything[int(rng.integers(0, 2000))]]
        batch[-1] = EdgeRow(batch[-1].src, batch[-1].dst, batch[-1].type, 2.0 + i)
        if n:
            batch.append(EdgeRow(batch[0].src, batch[0].dst, batch[0].type, 3.0 + i))
        held.apply(batch)
        everything += batch
    whole = HeldLinks()
    whole.apply(everything)
    assert len(held) == len(whole) < len(everything)
    for name in ("src", "dst", "kind", "weight"):
        mine = [held.ends[c] for c in getattr(held, name)] if name in ("src", "dst") else None
        theirs = [whole.ends[c] for c in getattr(whole, name)] if name in ("src", "dst") else None
        if mine is None:
            mine, theirs = getattr(held, name).tolist(), getattr(whole, name).tolist()
        assert mine == theirs, name
    by_dst = [(held.ends[held.dst[i]], held.ends[held.src[i]]) for i in held.by_dst]
    assert by_dst == [(whole.ends[whole.dst[i]], whole.ends[whole.src[i]]) for i in whole.by_dst]


def _same_edges(held: HeldLinks, whole: HeldLinks) -> None:
    """The two hold the same edges with the same weights, `held`'s arrays are in its two
    orders (its ends' codes number them as they came, so the orders are its own), and its
    kept keys are those of its arrays."""
    assert held_edges(held) == held_edges(whole)
    source, target = held._keys()
    assert np.array_equal(source, _key(held.src, held.dst, held.kind))
    b = held.by_dst
    assert np.array_equal(target, _key(held.dst[b], held.src[b], held.kind[b], target=True))
    assert (np.diff(source) > 0).all() and (np.diff(target) > 0).all()
    assert np.array_equal(np.sort(b), np.arange(len(held)))


def test_the_keys_kept_between_inserts_follow_drops_and_many_small_batches() -> None:
    """A write brings a few edges at a time: they go in place against keys kept from the last
    insert (not made again from every edge), and a drop renumbers the ends under them."""
    rng = np.random.default_rng(7)
    ends = [f"{i:032x}" for i in range(200)]

    def some(n: int) -> list[EdgeRow]:
        picks = rng.integers(0, 200, (n, 2)).tolist()
        return [EdgeRow(ends[s], ends[d], "related", float(rng.random())) for s, d in picks]

    held, everything = HeldLinks(), some(1500)
    held.apply(everything)
    for round_ in range(3):
        # -1: more than a quarter of the edges held, merged and sorted whole (new keys).
        for n in (1, 5, -1, 16, 17, 40, 0, 2):
            if n < 0:
                n = len(held) // 3
            batch = [*some(n), everything[int(rng.integers(0, len(everything)))]]
            held.apply(batch)
            everything += batch
        whole = HeldLinks()
        whole.apply(everything)
        _same_edges(held, whole)
        gone = set(ends[round_ * 7 : round_ * 7 + 7])
        assert held.drop(sorted(gone)) > 0
        everything = [e for e in everything if e.src not in gone and e.dst not in gone]


def test_each_rows_end_is_kept_as_ends_and_rows_come_and_go() -> None:
    """Ranking asks for its candidates' edges by row: the end code kept for each row follows
    rows added after their edges, edges added after their rows, a drop that renumbers the
    ends and an index made anew (a role let go), as a lookup of every id would."""
    rng = np.random.default_rng(11)
    names = [f"{i:032x}" for i in range(300)]

    def among(lo: int, hi: int, n: int) -> list[EdgeRow]:
        picks = rng.integers(lo, hi, (n, 2)).tolist()
        return [EdgeRow(names[s], names[d], "related", 0.5) for s, d in picks]

    index = SimpleNamespace(ids=IdTable())
    for name in names[:100]:
        index.ids.append(name)
    held = HeldLinks()
    held.apply(among(50, 150, 80))  # ends of which half are no row yet
    assert_row_ends(held, index)
    for name in names[100:200]:  # rows that were ends already, and rows that are not
        index.ids.append(name)
    assert_row_ends(held, index)
    held.apply(among(150, 260, 60))  # new ends: rows, and not rows yet
    assert_row_ends(held, index)
    assert held.drop(names[60:75]) > 0  # the ends renumbered
    assert_row_ends(held, index)
    kept = IdTable()  # the index made anew with some of its rows (`VectorIndex.release_idle`)
    for name in names[::3]:
        kept.append(name)
    kept.settle()
    index.ids = kept
    assert_row_ends(held, index)
    assert (held._row_ends(index) >= 0).sum() > 20  # the comparisons are not of -1s alone


async def test_edges_a_sync_reads_go_in_place_at_the_next_read_or_past_a_bound(
    store: Store, monkeypatch
) -> None:
    """Each write brings a few edges; putting them in place moves every array, so syncs keep
    them until the edges are next read (a recall), which then answers as the store does."""
    from nooa_mcp.storage import links

    ids = await fill(store)
    index, held = VectorIndex(EMBED.dim), HeldLinks()
    await index.sync(store)
    await held.sync(store)
    assert held.out_edges([ids["c1"]], SCOPES["everyone"], index)
    arrays = held.src
    extra = [await put(store, f"extra {i}", "coder@laptop") for i in range(4)]
    for i, new in enumerate(extra):
        async with store.transaction():
            await store.add_edges([(new, ids["c1"], EdgeType.related, 0.5 + i / 10)])
        await held.sync(store)
    assert held.src is arrays  # nothing moved yet: four syncs, no insert
    await index.sync(store)
    assert await assert_same(store, held, index, [*ids.values(), *extra]) > 20
    assert held.src is not arrays and len(held) == 26
    # Past the bound, a sync puts them in place itself.
    monkeypatch.setattr(links, "PENDING_AT_MOST", 1)
    arrays = held.src
    async with store.transaction():
        await store.add_edges([(extra[0], ids["c2"], EdgeType.related, 0.4)])
    await held.sync(store)
    assert held.src is arrays
    async with store.transaction():
        await store.add_edges([(extra[1], ids["c2"], EdgeType.related, 0.4)])
    await held.sync(store)
    assert held.src is not arrays and held.src.shape[0] == 28


async def test_edges_left_pending_go_before_a_drop_and_before_what_a_load_reads(
    store: Store,
) -> None:
    """A drop lets go of a pending edge too (it must not come back once put in place), and an
    edge a role's load reads again keeps the load's weight, which is the later one."""
    ids = await fill(store)
    index, held = VectorIndex(EMBED.dim), HeldLinks()
    await index.sync(store)
    await held.sync(store)
    a, b = [await put(store, f"pending {i}", "coder@laptop") for i in range(2)]
    async with store.transaction():
        await store.add_edges([(a, ids["c1"], EdgeType.related, 0.5)])
        await store.add_edges([(b, ids["c1"], EdgeType.related, 0.25)])
    await held.sync(store)
    held.apply([EdgeRow(b, ids["c1"], "related", 0.75)])  # as a load reads it, later
    async with store.transaction():
        await store.add_edges([(a, ids["c2"], EdgeType.related, 0.5)])
    await held.sync(store)
    assert held.drop([a]) == 2
    await index.sync(store)
    ends = {held.ends[c] for c in held.src.tolist()}
    assert a not in ends and b in ends
    into = held.out_edges([b], SCOPES["everyone"], index)
    assert [(e.dst, e.weight) for e in into] == [(ids["c1"], 0.75)]
