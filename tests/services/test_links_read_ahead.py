"""The links around the keyword candidates are read while the query is embedded.

Spreading and supersession then ask the store only about the memories the vector search
added, and rank exactly as they do when every link is read after the search.
"""

from __future__ import annotations

import pytest

from nooa_mcp import Memory
from nooa_mcp.domain.schema import EdgeType, now as utc_now
from nooa_mcp.services.ranking import Links, rank
from nooa_mcp.services.recall import ranking_for

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


def _asked(mem: Memory, name: str) -> list[list[str]]:
    """Record the ids each read of the store's `name` asks about, whether it is sent alone
    (`out_edges`) or with others in one trip (`ranking_reads`): both build its statement."""
    store = mem.engine.store
    real = getattr(store, f"{name}_statement")
    calls: list[list[str]] = []

    def recording(ids, *args, **kwargs):
        calls.append(list(ids))
        return real(ids, *args, **kwargs)

    setattr(store, f"{name}_statement", recording)
    return calls


def _trips(mem: Memory) -> list[str]:
    """Record each read ranking makes of rows and links: one `ranking_reads` (one round trip
    on PostgreSQL, whatever it reads), or one of the single reads called on their own."""
    store = mem.engine.store
    trips: list[str] = []
    inside = [False]

    def recorded(name: str) -> None:
        real = getattr(store, name)

        async def recording(*args, **kwargs):
            if inside[0]:
                return await real(*args, **kwargs)
            trips.append(name)
            inside[0] = name == "ranking_reads"
            try:
                return await real(*args, **kwargs)
            finally:
                inside[0] = False

        setattr(store, name, recording)

    for name in ("ranking_reads", "scoring_rows", "out_edges", "successors"):
        recorded(name)
    return trips


def _view(ranking) -> list[tuple]:
    return [
        (r.id, r.source, round(r.score, 9), round(r.spread, 9), r.superseded_by, r.path)
        for r in ranking.rows
    ]


@pytest.mark.parametrize("hops", [1, 2])
async def test_read_ahead_ranks_as_reading_every_link_after_the_search(mem: Memory, hops) -> None:
    made = await _graph(mem)
    c = mem._caller
    scope = c.scope("mine")
    out_calls, successor_calls = _asked(mem, "out_edges"), _asked(mem, "successors")
    trips = _trips(mem)

    ahead = await ranking_for(c, "harbour crane", scope, None, hops)
    keyword = {r.row.id for r in ahead.rows if r.row.bm25 is not None}
    assert {made["seed"], made["seed2"], made["old"]} <= keyword
    # Read ahead: the keyword hits, each once; after the search: only what it added.
    assert set(out_calls[0]) == keyword and set(successor_calls[0]) == keyword
    assert not keyword & set(out_calls[1]) and not keyword & set(successor_calls[1])
    # Rows and links in three trips: the keyword hits' links (beside the embedding), the
    # rows the vector search added with their links, the rows spreading reached with
    # theirs (here a second hop reaches nothing unread). Each read on its own took six.
    assert trips == ["ranking_reads"] * 3

    out_calls.clear()
    successor_calls.clear()
    after = await rank(
        "harbour crane",
        store=c.store,
        index=c.index,
        query_vector=await c.engine.query_vector("harbour crane"),
        scope=scope,
        settings=c.settings.recall,
        now=utc_now().timestamp(),
        hops=hops,
    )
    assert keyword <= set(out_calls[0])  # without read-ahead the hop asks about all of them
    assert _view(ahead) == _view(after)
    by_id = {r.id: r for r in ahead.rows}
    assert by_id[made["cause"]].spread > 0 and by_id[made["part"]].spread > 0
    assert by_id[made["old"]].superseded_by == made["new"]


async def test_links_answer_for_what_they_read_and_ask_the_store_for_the_rest(mem: Memory) -> None:
    made = await _graph(mem)
    store, scope = mem.engine.store, mem._caller.scope("mine")
    read = await Links.read(store, [made["seed"], made["other"]], scope, out=True, into=False)
    # Every source read has an entry, even one without edges.
    assert read.out == {
        made["seed"]: [e for e in await store.out_edges([made["seed"]], scope)],
        made["other"]: [e for e in await store.out_edges([made["other"]], scope)],
    }
    out_calls = _asked(mem, "out_edges")
    both = await read.out_edges(store, [made["seed"], made["cause"], made["other"]], scope)
    assert out_calls == [[made["cause"]]]
    assert sorted((e.src, e.dst) for e in both) == sorted(
        (e.src, e.dst)
        for e in await store.out_edges([made["seed"], made["cause"], made["other"]], scope)
    )
    assert await read.out_edges(store, [made["seed"]], scope) == read.out[made["seed"]]
    assert len(out_calls) == 2  # the line above asked nothing more (the check below did)


async def test_ranking_reads_answers_as_each_read_alone_on_both_backends(store_target) -> None:
    """`Store.ranking_reads` (one round trip on PostgreSQL) returns what `scoring_rows`,
    `out_edges` and `successors` return for the same memories, and recall ranks on it as on
    the single reads."""
    from nooa_mcp.embeddings import HashEmbedder
    from nooa_mcp.services.ranking import SUPERSEDING_RELATIONS

    async with Memory.open(store_target, owner="me", embedder=HashEmbedder()) as mem:
        made = await _graph(mem)
        store, scope = mem.engine.store, mem._caller.scope("mine")
        ids = [made[n] for n in ("seed", "cause", "old", "other", "part")]
        read = await store.ranking_reads(
            ids, scope, SUPERSEDING_RELATIONS, rows=True, out=True, into=True
        )

        def edges(found):
            return sorted((e.src, e.dst, e.type, e.weight) for e in found)

        assert sorted(r.id for r in read.rows) == sorted(ids)
        assert sorted(read.rows, key=lambda r: r.id) == sorted(
            await store.scoring_rows(ids), key=lambda r: r.id
        )
        assert edges(read.out) == edges(await store.out_edges(ids, scope))
        assert edges(read.into) == edges(await store.successors(ids, SUPERSEDING_RELATIONS, scope))
        assert read.out and read.into
        only = await store.ranking_reads(
            ids, scope, SUPERSEDING_RELATIONS, rows=False, out=False, into=True
        )
        assert (only.rows, only.out, edges(only.into)) == ([], [], edges(read.into))
        none = await store.ranking_reads(
            [], scope, SUPERSEDING_RELATIONS, rows=True, out=True, into=True
        )
        assert (none.rows, none.out, none.into) == ([], [], [])

        c = mem._caller
        trips = _trips(mem)
        ahead = await ranking_for(c, "harbour crane", scope, None, 1)
        # SQLite reads the keyword hits' links beside the embedding; PostgreSQL, where reads
        # made together cost one round trip, reads them after the vector search with the
        # rows it added: one trip, then one for the rows spreading reached.
        if store.batches_reads:
            assert trips == ["ranking_reads"] * 2
        else:
            assert trips == ["ranking_reads"] * 3
        trips.clear()
        after = await rank(
            "harbour crane",
            store=c.store,
            index=c.index,
            query_vector=await c.engine.query_vector("harbour crane"),
            scope=scope,
            settings=c.settings.recall,
            now=utc_now().timestamp(),
            hops=1,
        )
        assert _view(ahead) == _view(after)
        by_id = {r.id: r for r in ahead.rows}
        assert by_id[made["old"]].superseded_by == made["new"]
