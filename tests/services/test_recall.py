"""Recall (DESIGN.md §5) and its departures from NOOA (§16.1-16.7), each under its own test."""

import threading
from datetime import UTC, datetime, timedelta

import pytest
from loading_model import loading

from nooa_mcp import Memory, RecallSettings, Settings
from nooa_mcp.domain.accesses import apply_access
from nooa_mcp.domain.schema import AccessRecord, Channel, EdgeType
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.storage.postings import HeldKeywords

pytestmark = pytest.mark.anyio


async def edge(mem, src, dst, relation=EdgeType.related, weight=1.0):
    async with mem.engine.store.transaction():
        await mem.engine.store.add_edge(src, dst, relation, weight)
    mem.engine.index.mark_dirty()


async def set_owner(mem, memory_id, owner):
    async with mem.engine.store.transaction():
        await mem.engine.store.conn.execute(
            "UPDATE memories SET owner = ?, role = ?, rev = rev + 100000 WHERE id = ?",
            (owner, owner.partition("@")[0], memory_id),
        )
    mem.engine.index.mark_dirty()


async def ids(mem, text):
    return (await mem.author(text)).id


async def test_the_relevant_memory_ranks_first_and_shows_its_components(mem):
    target = await ids(mem, "The staging database password rotates every Monday")
    for text in ["Lunch is at noon", "The cat likes tuna", "Trains leave from platform 4"]:
        await mem.author(text)
    result = await mem.recall("when does the staging database password rotate")
    top = result.hits[0]
    assert top.id == target
    assert top.components.source == "both"
    assert top.components.cos > 0.3
    # rel = λ·cos + (1−λ)·lex + μ·overlap; the best BM25 hit has lex 1 and there are no cues.
    assert top.components.rel == pytest.approx(0.5 * top.components.cos + 0.5, abs=1e-3)
    assert top.score > result.hits[1].score


async def test_every_returned_memory_gets_an_access_record_on_the_ring_and_in_the_stream(mem):
    for text in ["alpha report due", "alpha budget approved", "beta launch slipped"]:
        await mem.author(text)
    result = await mem.recall("alpha", k=2)
    assert len(result.hits) == 2
    for hit in result.hits:
        view = await mem.get(hit.id)
        assert view.channels["recalled"] == 1
        log = await mem.access_log(hit.id)
        newest = log[0][1]
        assert newest.channel is Channel.recalled
        assert newest.query == "alpha"
        assert newest.rank == hit.rank
        assert newest.score == pytest.approx(hit.score)
        assert newest.components.source == hit.components.source
        ring = (await mem.engine.store.fetch(hit.id)).access_log
        assert ring[0].rank == hit.rank


async def test_a_search_with_no_hops_is_logged_as_searched(mem):
    await mem.author("gamma ray burst")
    result = await mem.recall("gamma ray", hops=0)
    log = await mem.access_log(result.hits[0].id)
    assert log[0][1].channel is Channel.searched


async def backdate(mem, memory_id, ages_seconds, channel=Channel.recalled):
    """Give a memory accesses at the given ages, as if they had happened then."""
    now = datetime.now(UTC)
    async with mem.engine.store.transaction():
        memory = await mem.engine.store.fetch(memory_id)
        memory.created_at = memory.last_accessed_at = now - timedelta(seconds=max(ages_seconds))
        memory.first_access_at, memory.actr_count, memory.actr_times = None, 0, []
        for age in sorted(ages_seconds, reverse=True):
            record = AccessRecord(ts=now - timedelta(seconds=age), channel=channel)
            apply_access(memory, record)
        await mem.engine.store.save(memory)


async def test_a_memory_read_20_times_a_week_ago_and_one_read_once_an_hour_ago_differ(mem):
    """DESIGN.md §16.1: base-level sums every past access, explainably."""
    week = 7 * 86400
    busy = await ids(mem, "kappa notes from the planning week")
    fresh = await ids(mem, "kappa notes from this morning")
    await backdate(mem, busy, [week + i * 60 for i in range(20)])
    await backdate(mem, fresh, [3600])
    rows = {r.id: r for r in (await mem.explain("kappa notes")).rows}
    # B(busy) = ln(20 · week^-0.5) ≈ -3.66; B(fresh) = ln(3600^-0.5) ≈ -4.09
    assert rows[busy].rec == pytest.approx(0.0251, abs=0.001)
    assert rows[fresh].rec == pytest.approx(0.0164, abs=0.001)
    assert rows[busy].rec != rows[fresh].rec


async def test_accesses_beyond_the_ring_still_count_toward_base_level(mem):
    """DESIGN.md §16.1: 1,000 accesses raise base-level far above what the 64-entry ring shows."""
    many = await ids(mem, "lambda calculus notes")
    few = await ids(mem, "lambda expressions notes")
    ages = [3600 + i * 600 for i in range(1000)]
    await backdate(mem, many, ages)
    await backdate(mem, few, ages[:64])
    assert len((await mem.engine.store.fetch(many)).access_log) == 64
    rows = {r.id: r for r in (await mem.explain("lambda notes")).rows}
    assert rows[many].rec > rows[few].rec + 0.05


async def test_injected_reads_never_change_strength_or_base_level(mem):
    # HIGH: the session-start block shows the most important memories only.
    target = (await mem.author("the injected memory", importance="HIGH")).id
    before = await mem.get(target)
    actr_before = (await mem.engine.store.fetch(target)).actr_times
    for _ in range(3):
        block = await mem.context()
        assert target[:8] in block
    after = await mem.get(target)
    assert after.strength == before.strength
    assert after.access_count == before.access_count
    assert after.last_accessed_at == before.last_accessed_at
    assert (await mem.engine.store.fetch(target)).actr_times == actr_before
    assert after.channels["injected"] == 3
    assert [a.channel for _, a in await mem.access_log(target)][:3] == [Channel.injected] * 3


async def test_spreading_brings_in_a_linked_memory_the_query_does_not_match(mem):
    seed = await ids(mem, "omega deployment checklist")
    linked = await ids(mem, "rollback runbook kept in the wiki")
    await edge(mem, seed, linked, EdgeType.causes)
    result = await mem.recall("omega deployment checklist", k=5)
    by_id = {h.id: h for h in result.hits}
    assert by_id[linked].components.source == "spread"
    assert by_id[linked].components.spread > 0
    assert by_id[linked].path[0] == seed[:8]


async def test_two_hops_apply_delta_once_per_hop(mem):
    """DESIGN.md §16.2: the second hop receives act·δ² (times weights), not δ³."""
    mem.settings.recall.gamma = 1.0
    a = await ids(mem, "sigma origin node text")
    b = await ids(mem, "blue marble harbour")
    c = await ids(mem, "quiet lantern orchard")
    await edge(mem, a, b, EdgeType.causes)
    await edge(mem, b, c, EdgeType.causes)
    rows = {r.id: r for r in (await mem.explain("sigma origin node", hops=2)).rows}
    act_a = rows[a].score - rows[a].spread
    act_b_received = rows[b].spread
    assert act_b_received == pytest.approx(0.6 * act_a, rel=1e-3)
    assert rows[c].spread == pytest.approx(0.36 * act_a, rel=1e-3)


async def test_spreading_relays_nothing_between_near_identical_memories(mem):
    """DESIGN.md §16.14: what similarity already explains is in each memory's own relevance, so an
    edge between near-duplicates relays no activation (their 1 - cos novelty is 0), while the
    same edge to a dissimilar memory relays in full."""
    mem.settings.recall.gamma = 1.0
    a = await ids(mem, "the omega relay station log")
    twin = await ids(mem, "the omega relay station log!")
    other = await ids(mem, "blue marble harbour")
    await edge(mem, a, twin, EdgeType.causes)
    await edge(mem, a, other, EdgeType.causes)
    rows = {r.id: r for r in (await mem.explain("omega relay station", hops=1)).rows}
    assert rows[twin].spread == 0
    assert rows[other].spread == pytest.approx(0.6 * (rows[a].score - rows[a].spread), rel=1e-3)


async def test_spreading_never_reaches_an_archived_memory(mem):
    """DESIGN.md §16.3: merge leaves refines edges to archived duplicates; they stay out."""
    seed = await ids(mem, "tau pipeline notes")
    archived = await ids(mem, "old copy of something else")
    beyond = await ids(mem, "another different thing")
    await edge(mem, seed, archived, EdgeType.refines)
    await edge(mem, archived, beyond, EdgeType.refines)
    await mem.forget(archived)
    rows = {r.id for r in (await mem.explain("tau pipeline", hops=2)).rows}
    assert archived not in rows
    assert beyond not in rows


async def test_a_foreign_memory_neither_appears_nor_relays_activation(mem):
    """DESIGN.md §16.4: own → foreign → own; the foreign node is gated before the frontier."""
    own_a = await ids(mem, "rho incident summary")
    foreign = await ids(mem, "someone else's private note")
    own_c = await ids(mem, "unrelated own follow up")
    await edge(mem, own_a, foreign, EdgeType.causes)
    await edge(mem, foreign, own_c, EdgeType.causes)
    control = {r.id: r for r in (await mem.explain("rho incident", hops=2)).rows}
    assert control[own_c].spread > 0  # same graph, all visible: C is reached

    await set_owner(mem, foreign, "reviewer@desk")
    gated = {r.id: r for r in (await mem.explain("rho incident", hops=2)).rows}
    assert foreign not in gated
    assert own_c not in gated or gated[own_c].spread == 0
    assert all(foreign[:8] not in r.path for r in gated.values())


async def test_a_single_candidate_keeps_its_raw_values_instead_of_zero(mem):
    """DESIGN.md §16.5: with one candidate, min-max would zero everything."""
    only = await ids(mem, "upsilon lone memory")
    result = await mem.recall("upsilon lone memory")
    hit = result.hits[0]
    assert hit.id == only
    expected = hit.components.rel + 0.5 * hit.components.rec + 0.5 * hit.components.imp
    assert hit.score == pytest.approx(expected, abs=1e-3)
    assert hit.score > 0.5


async def test_unrelated_results_are_marked_weak_and_the_reply_says_nothing_relevant(mem):
    """DESIGN.md §16.6: the tool's reply must not pass noise off as an answer."""
    await mem.author("chi squared test assumptions")
    result = await mem.recall("volcano eruption lava")
    assert result.hits and all(h.flags.weak for h in result.hits)
    assert result.nothing_relevant
    assert "Nothing relevant" in result.note


async def test_the_scorer_floor_returns_fewer_than_k(settings, embedder):
    settings.recall = RecallSettings(min_relevance=0.3)
    async with Memory.open(settings=settings, embedder=embedder) as mem:
        keep = await ids(mem, "psi signal processing filters")
        await mem.author("cooking pasta al dente")
        result = await mem.recall("psi signal processing filters", k=5)
        assert [h.id for h in result.hits] == [keep]


async def test_a_memory_past_its_valid_to_is_flagged_stale_and_ranked_lower(mem):
    """DESIGN.md §16.7: the drop (a_rec + a_imp) outweighs a higher importance.

    Min-max over two candidates stretches any difference to the full weight, so the store
    holds a few other memories, as a real one does.
    """
    for text in [
        "the office kitchen has a kettle",
        "floor plans are in the wiki",
        "the lift is out of order",
        "visitors sign in at reception",
    ]:
        await mem.author(text)
    old = (
        await mem.author("the office is on floor three", importance="HIGH", valid_to="2020-01-01")
    ).id
    current = (await mem.author("the office is on floor five")).id
    result = await mem.recall("which floor is the office on")
    by_id = {h.id: h for h in result.hits}
    assert by_id[old].flags.stale
    assert not by_id[current].flags.stale
    assert by_id[current].rank < by_id[old].rank


async def test_a_memory_replaced_via_refines_ranks_below_its_successor(mem):
    """DESIGN.md §16.7: a correction outranks what it corrects, even a more important original."""
    old = (await mem.author("the wifi password is tulip", importance="CRITICAL")).id
    new = (
        await mem.author(
            "wifi password changed to orchid", links=[{"target": old[:8], "relation": "refines"}]
        )
    ).id
    result = await mem.recall("wifi password tulip")
    by_id = {h.id: h for h in result.hits}
    assert by_id[old].flags.superseded_by == new
    assert by_id[new].rank < by_id[old].rank


async def test_a_contradicting_successor_is_pulled_in_even_when_the_query_misses_it(mem):
    old = (await mem.author("phi server runs ubuntu 18")).id
    new = (
        await mem.author(
            "migrated everything to debian", links=[{"target": old, "relation": "contradicts"}]
        )
    ).id
    mem.settings.recall.hops = 0
    result = await mem.recall("phi server operating system")
    ranks = {h.id: h.rank for h in result.hits}
    assert new in ranks and ranks[new] < ranks[old]


async def test_while_embeddings_warm_recall_runs_on_keywords_and_says_so(store_path, embedder):
    async with Memory.open(store_path, owner="a", embedder=embedder) as mem:
        target = await ids(mem, "xylophone lessons on tuesday")
        await mem.author("grocery list for the weekend")
    # A recall waits for a loading model at most model_wait_seconds; with none, it answers
    # at once on keywords (what it falls back to when the model cannot load in time).
    impatient = Settings(store=store_path, owner="a", model_wait_seconds=0)
    with loading(embedder, wait=10) as (warming, gate):
        async with Memory.open(settings=impatient, embedder=warming) as mem:
            assert mem.embeddings_state == "warming"
            result = await mem.recall("xylophone lessons")
            assert result.embeddings == "warming"
            assert "warming" in result.note
            assert result.hits[0].id == target
            assert result.hits[0].components.source == "sparse"
            gate.set()
            await mem.wait_ready()
            assert (await mem.recall("xylophone lessons")).embeddings == "ready"


async def test_scope_gates_candidates(settings, embedder):
    async with Memory.open(settings=settings, embedder=embedder) as mine:
        own = await ids(mine, "nu shared topic from coder")
    settings2 = Settings(store=settings.store, owner="reviewer@desk")
    async with Memory.open(settings=settings2, embedder=embedder) as other:
        theirs = await ids(other, "nu shared topic from reviewer")
        seen = {h.id for h in (await other.recall("nu shared topic")).hits}
        assert seen == {theirs}
        # DESIGN.md §10: the model's scope word cannot widen what it reads.
        for word in ("*", "coder", "coder@laptop"):
            hits = {h.id for h in (await other.recall("nu shared topic", scope=word)).hits}
            assert hits == {theirs}
    granted = Settings(store=settings.store, owner="reviewer@desk", read=["coder"])
    async with Memory.open(settings=granted, embedder=embedder) as other:
        everyone = {h.id for h in (await other.recall("nu shared topic", scope="*")).hits}
        assert everyone == {own, theirs}
        named = {h.id for h in (await other.recall("nu shared topic", scope="coder")).hits}
        assert named == {own}


# ------------------------------------------------------------ the read beside the embedding


class _GatedEmbedder(HashEmbedder):
    """Embeds a query only once the store's keyword read has begun (or fails, when told to)."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.keyword_started = threading.Event()
        self.saw_keyword: list[bool] = []
        self.fail = fail
        self.armed = False

    def embed(self, texts):
        if self.armed:
            self.saw_keyword.append(self.keyword_started.wait(5))
            if self.fail:
                raise RuntimeError("the model broke")
        return super().embed(texts)


async def _gated(settings, embedder):
    mem_cm = Memory.open(settings=settings, embedder=embedder)
    mem = await mem_cm.__aenter__()
    store = mem.engine.store
    # The keyword read is `keyword_hits` once the index holds the scope, `candidates` before.
    for name in ("candidates", "keyword_hits"):
        real = getattr(store, name)

        async def read(*args, _real=real, **kwargs):
            embedder.keyword_started.set()
            return await _real(*args, **kwargs)

        setattr(store, name, read)
    return mem_cm, mem


async def _postings_not_held(mem: Memory) -> None:
    """As before the process first loads the keyword postings (`storage.postings`): the
    store searches. (Held, the search runs in the process after the embedding.)"""
    await mem.engine.keywords_loaded()  # not read back over this by the background load
    mem.engine.index.keywords = HeldKeywords()


async def test_the_keyword_read_runs_while_the_query_is_embedded(settings):
    embedder = _GatedEmbedder()
    mem_cm, mem = await _gated(settings, embedder)
    try:
        target = await ids(mem, "The staging database password rotates every Monday")
        await _postings_not_held(mem)
        embedder.armed = True
        result = await mem.recall("staging database password")
    finally:
        await mem_cm.__aexit__(None, None, None)
    assert embedder.saw_keyword == [True], "the keyword read waited for the embedding"
    assert result.hits[0].id == target


async def test_an_embedding_failure_beside_the_keyword_read_reaches_the_caller_as_itself(
    settings,
):
    embedder = _GatedEmbedder(fail=True)
    mem_cm, mem = await _gated(settings, embedder)
    try:
        await ids(mem, "The staging database password rotates every Monday")
        await _postings_not_held(mem)
        embedder.armed = True
        with pytest.raises(RuntimeError, match="the model broke"):
            await mem.recall("staging database password")
        embedder.armed = False
        # The store is still usable: the abandoned read left nothing half-done.
        assert (await mem.recall("staging database password")).hits
    finally:
        await mem_cm.__aexit__(None, None, None)


# --------------------------------------------------------------------------- type filter


async def test_a_type_filter_also_holds_for_memories_reached_by_spreading(mem: Memory) -> None:
    """Catches: the type filter skipped for memories reached by spreading (`types=["todo"]`
    returned an info memory through an edge)."""
    todo = (await mem.todo("add", content="Rotate the harbor crane keys.")).id
    info = (await mem.author("Quarterly tax filing needs the blue folder.")).id
    assert todo is not None
    await mem.link(todo, info, "causes")
    everything = await mem.recall("harbor crane keys", k=10, hops=1)
    only_todos = await mem.recall("harbor crane keys", k=10, hops=1, types=["todo"])
    # Without the filter, spreading does reach the info memory through the edge...
    reached = {h.id: h.components.source for h in everything.hits}
    assert reached.get(info) == "spread"
    # ...and with it, nothing but todos comes back, by any route.
    assert [h.id for h in only_todos.hits] == [todo]
    assert {h.type.value for h in only_todos.hits} == {"todo"}
