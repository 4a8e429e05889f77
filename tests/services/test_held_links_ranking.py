"""Ranking reads its links from the edges the vector index holds (`storage.links`), not the store.

Spreading and supersession used to read out-edges and superseding links from the store, two or
three reads per recall. From held edges (and the held facts, `storage.facts`) a recall reads
only the keyword search's ids and the rows it shows, ranks exactly as from the store's reads,
and follows a link another process writes once the index syncs — on both backends.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest
from loading_model import loading

from nooa_mcp import Memory
from nooa_mcp.domain.schema import EdgeType, now as utc_now
from nooa_mcp.domain.scope import Scope
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.services.ranking import SUPERSEDING_RELATIONS, rank
from nooa_mcp.services.recall import ranking_for
from nooa_mcp.storage.base import EdgeRow

pytestmark = pytest.mark.anyio


async def _graph(mem: Memory) -> dict[str, str]:
    """Keyword hits for "harbour crane" linked to memories the keywords miss, and back."""
    texts = {
        "seed": "harbour crane inspection is due on Friday",
        "seed2": "the harbour crane operator is Dana",
        "cause": "a storm bent the jib last winter",
        "part": "the jib bolts come from Malmo",
        "old": "harbour crane limit was 40 tonnes",
        "other": "parking permits renew in March",
        "new": "the quay limit was raised to 55 tonnes",
    }
    made = {name: (await mem.author(text)).id for name, text in texts.items()}
    links = [
        ("seed", "cause", EdgeType.causes),
        ("seed2", "part", EdgeType.part_of),
        ("cause", "part", EdgeType.causes),
        ("part", "seed", EdgeType.related),
        ("other", "cause", EdgeType.causes),
    ]
    store = mem.engine.store
    async with store.transaction():
        for src, dst, relation in links:
            await store.add_edge(made[src], made[dst], relation, 0.9)
        await store.add_edge(made["new"], made["old"], EdgeType.refines, 1.0)
    mem.engine.index.mark_dirty()
    return made


def _trips(mem: Memory) -> list[str]:
    """Record each read of rows or links ranking makes of the store."""
    store = mem.engine.store
    trips: list[str] = []
    for name in ("scoring_rows", "out_edges", "successors"):
        real = getattr(store, name)

        def recording(*args, _real=real, _name=name, **kwargs):
            trips.append(_name)
            return _real(*args, **kwargs)

        setattr(store, name, recording)
    return trips


def _view(ranking) -> list[tuple]:
    return [
        (r.id, r.source, round(r.score, 9), round(r.spread, 9), r.superseded_by, r.path)
        for r in ranking.rows
    ]


class _StoreReads:
    """The links as the store returns them (read for every memory beforehand, in the store's
    order), served where ranking asks the held edges: the reference ranking."""

    def __init__(self, out: list[EdgeRow], into: list[EdgeRow]) -> None:
        self.out, self.into = out, into
        self.mark = "read"  # what `VectorIndex.holds` asks of held edges

    def out_edges(self, sources: Sequence[str], scope: Scope, index) -> list[EdgeRow]:
        wanted = set(sources)
        return [e for e in self.out if e.src in wanted]

    def successors(self, targets, relations, scope: Scope, index) -> list[EdgeRow]:
        wanted = set(targets)
        return [e for e in self.into if e.dst in wanted and e.type in relations]


@pytest.mark.parametrize("hops", [1, 2])
async def test_a_recall_reads_rows_only_and_spreads_over_held_links(mem: Memory, hops) -> None:
    made = await _graph(mem)
    c = mem._caller
    trips = _trips(mem)
    ranking = await ranking_for(c, "harbour crane", c.scope("mine"), None, hops)
    # Scored on the facts the index holds (`storage.facts`): no row and no link is read.
    assert trips == []
    await ranking.fill(c.store, 5)
    # Then the rows of the five a reply shows, in one read.
    assert trips == ["scoring_rows"]
    assert all(r.full.content for r in ranking.rows[:5])
    by_id = {r.id: r for r in ranking.rows}
    assert by_id[made["cause"]].spread > 0 and by_id[made["part"]].spread > 0
    assert by_id[made["old"]].superseded_by == made["new"]


async def test_held_links_rank_as_the_stores_reads_on_both_backends(store_target) -> None:
    async with Memory.open(store_target, owner="me", embedder=HashEmbedder()) as mem:
        made = await _graph(mem)
        c = mem._caller
        scope = c.scope("mine")
        held = await ranking_for(c, "harbour crane", scope, None, 2)
        ids = list(made.values())
        index = c.index
        kept = index.links
        index.links = _StoreReads(  # type: ignore[assignment]
            await c.store.out_edges(ids, scope),
            await c.store.successors(ids, SUPERSEDING_RELATIONS, scope),
        )
        try:
            reference = await rank(
                "harbour crane",
                store=c.store,
                index=index,
                query_vector=await c.engine.query_vector("harbour crane", c.role),
                scope=scope,
                settings=c.settings.recall,
                now=utc_now().timestamp(),
                hops=2,
            )
        finally:
            index.links = kept
        assert _view(held) == _view(reference)
        assert sum(r.spread > 0 for r in held.rows) >= 2


async def test_a_server_of_one_role_ranks_as_a_server_of_the_whole_store(store_target) -> None:
    """A server with an owner holds the edges of its roles only; one serving everyone holds
    every edge. Their rankings for the owner are the same to the last bit."""
    from nooa_mcp import Settings
    from nooa_mcp.engine import Engine

    async with Memory.open(store_target, owner="me", embedder=HashEmbedder()) as mem:
        made = await _graph(mem)
    async with Memory.open(store_target, owner="them", embedder=HashEmbedder()) as them:
        theirs = await _graph(them)
        async with them.engine.store.transaction():
            await them.engine.store.add_edge(theirs["seed"], made["cause"], EdgeType.causes, 0.8)
    async with (
        Memory.open(store_target, owner="me", embedder=HashEmbedder()) as mine,
        Engine.open(Settings(store=store_target), HashEmbedder(), every_role_first=True) as all_,
    ):
        whole = Memory(all_, "me")
        views = []
        for mem in (mine, whole):
            c = mem._caller
            ranking = await ranking_for(c, "harbour crane", c.scope("mine"), None, 2)
            assert sum(r.spread > 0 for r in ranking.rows) >= 2
            assert {r.id: r for r in ranking.rows}[made["old"]].superseded_by == made["new"]
            views.append(_view(ranking))
        assert views[0] == views[1]
        every = len(await all_.store.edge_pairs(None, live_only=False))
        assert len(mine.engine.index.links) == 6 < len(all_.index.links) == every == 13


async def test_a_link_another_process_writes_changes_the_ranking_after_sync(store_target):
    """A refinement linked by another server (no row of either memory changes) marks the
    older memory superseded in this server's next recall."""
    async with (
        Memory.open(store_target, owner="me", embedder=HashEmbedder()) as here,
        Memory.open(store_target, owner="me", embedder=HashEmbedder()) as there,
    ):
        old = await here.author("harbour crane limit was 40 tonnes")
        new = await here.author("the quay crane limit was raised to 55 tonnes")
        c = here._caller
        before = await ranking_for(c, "harbour crane limit", c.scope("mine"), None, 1)
        assert {r.id: r for r in before.rows}[old.id].superseded_by is None
        token = await c.store.change_token()
        async with there.engine.store.transaction():
            await there.engine.store.add_edge(new.id, old.id, EdgeType.refines, 1.0)
        wait = getattr(c.store, "wait_changed", None)
        if wait is not None:
            # PostgreSQL: writing an edge notifies (no row changed), so this server wakes.
            with anyio.fail_after(5):
                await wait(token)
        after = await ranking_for(c, "harbour crane limit", c.scope("mine"), None, 1)
        by_id = {r.id: r for r in after.rows}
        assert by_id[old.id].superseded_by == new.id
        assert after.rank_of(new.id) < after.rank_of(old.id)


async def test_while_the_model_loads_a_keyword_recall_still_sees_supersession(
    store_path, embedder
) -> None:
    """Before the first read of the vectors (it waits for the model) the index cannot check
    the held edges' ends: a keyword recall then reads its links from the store, and a
    replaced memory is flagged as it is once the model is ready."""
    from nooa_mcp import Settings
    from nooa_mcp.engine import Engine

    async with Memory.open(store_path, owner="a", embedder=embedder) as mem:
        old = (await mem.author("the wifi password is tulip")).id
        new = (
            await mem.author(
                "wifi password changed to orchid", links=[{"target": old, "relation": "refines"}]
            )
        ).id
    impatient = Settings(store=store_path, owner="a", model_wait_seconds=0)
    with loading(embedder, wait=10) as (warming, gate):
        # As a server opens (`vectors_later`): the vectors are read once the model loaded.
        async with Engine.open(impatient, warming, vectors_later=True) as engine:
            mem = Memory(engine, "a")
            assert engine.index.size == 0
            result = await mem.recall("wifi password tulip")
            assert result.embeddings == "warming"
            by_id = {h.id: h for h in result.hits}
            assert by_id[old].flags.superseded_by == new
            gate.set()
            await mem.wait_ready()
            ready = {h.id: h for h in (await mem.recall("wifi password tulip")).hits}
            assert ready[old].flags.superseded_by == new
