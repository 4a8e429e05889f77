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
    """Record the ids each call of the store's `name` asks about."""
    store = mem.engine.store
    real = getattr(store, name)
    calls: list[list[str]] = []

    async def recording(ids, *args, **kwargs):
        calls.append(list(ids))
        return await real(ids, *args, **kwargs)

    setattr(store, name, recording)
    return calls


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

    ahead = await ranking_for(c, "harbour crane", scope, None, hops)
    keyword = {r.row.id for r in ahead.rows if r.row.bm25 is not None}
    assert {made["seed"], made["seed2"], made["old"]} <= keyword
    # Read ahead: the keyword hits, each once; after the search: only what it added.
    assert set(out_calls[0]) == keyword and set(successor_calls[0]) == keyword
    assert not keyword & set(out_calls[1]) and not keyword & set(successor_calls[1])
    assert len(out_calls) == 1 + hops and len(successor_calls) == 2

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
