"""Reflection planning (DESIGN.md §8): merge, link, rescore and prune plans over vectors, no
store."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
import time_machine

from nooa_mcp.domain.reflection import (
    MERGE_SIMILARITY,
    Node,
    among,
    merged_fields,
    plan_links,
    plan_merges,
    plan_prune,
    plan_rescore,
    rescore,
    similar_pairs,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
H = timedelta(hours=1)


def at_cos(base: np.ndarray, other: np.ndarray, cos: float) -> np.ndarray:
    """A unit vector at exactly `cos` from `base`, in the plane of base and other."""
    ortho = other - np.dot(other, base) * base
    ortho /= np.linalg.norm(ortho)
    return (cos * base + np.sqrt(1 - cos**2) * ortho).astype(np.float32)


def basis(dim: int = 16) -> np.ndarray:
    return np.eye(dim, dtype=np.float32)


def node(ident: str, row: int, *, hours: float = 0, **kw) -> Node:
    values = {
        "id": ident,
        "type": "info",
        "owner": "dev@a",
        "created_at": T0 + hours * H,
        "last_accessed_at": T0 + hours * H,
        "importance": 5.0,
        "authored_importance": 5.0,
        "row": row,
    }
    values.update(kw)
    return Node(**values)


def test_similar_pairs_respects_both_bounds_across_blocks():
    e = basis()
    vecs = np.stack([e[0], at_cos(e[0], e[1], 0.9), at_cos(e[0], e[2], 0.97), e[3]])
    pairs = similar_pairs(vecs, [0, 1, 2, 3], 0.8, 0.95, block=1)
    assert {(i, j) for i, j, _ in pairs} == {(0, 1), (1, 2)}


def test_similar_pairs_of_two_rows_and_of_a_crowd_keep_every_pair():
    e = basis()
    assert [(i, j) for i, j, _ in similar_pairs(np.stack([e[0], e[0]]), [0, 1], 0.9)] == [(0, 1)]
    assert similar_pairs(np.stack([e[0]]), [0], 0.9) == []
    # 70 rows that are all one another's neighbours: more than a sweep keeps per row by
    # default (64), and still every pair.
    crowd = np.stack([e[0]] * 70)
    assert len(similar_pairs(crowd, list(range(70)), 0.9)) == 70 * 69 // 2


def test_links_never_cross_roles_nor_reach_an_archived_or_excluded_memory():
    e = basis()
    close = at_cos(e[0], e[1], 0.85)
    vecs = np.stack([e[0], close, close, close])
    nodes = [
        node("a", 0),
        node("b", 1, owner="ops@a"),  # another role
        node("c", 2, archived=True),
        node("d", 3, type="scratch"),
    ]
    assert plan_links(nodes, vecs) == []
    nodes[1] = node("b", 1)
    assert [(x.a, x.b) for x in plan_links(nodes, vecs)] == [("a", "b")]
    assert plan_links(nodes, vecs, linked={frozenset(("a", "b"))}) == []


def test_a_pair_excluded_as_versions_is_never_merged():
    e = basis()
    vecs = np.stack([e[0], e[0]])
    nodes = [node("old", 0), node("new", 1, hours=1)]
    assert [(m.anchor, m.dup) for m in plan_merges(nodes, vecs)] == [("old", "new")]
    assert plan_merges(nodes, vecs, exclude={frozenset(("old", "new"))}) == []


def test_merge_takes_the_oldest_as_anchor_and_all_its_near_duplicates():
    e = basis()
    vecs = np.stack([e[0], at_cos(e[0], e[1], 0.98), at_cos(e[0], e[1], 0.99), e[3]])
    nodes = [node("new", 0, hours=5), node("old", 1, hours=1), node("mid", 2, hours=3)]
    nodes.append(node("other", 3))
    items = plan_merges(nodes, vecs)
    assert {(m.anchor, m.dup) for m in items} == {("old", "new"), ("old", "mid")}


def test_merge_never_crosses_type_role_and_skips_scratch_todos_and_intents():
    e = basis()
    vecs = np.stack([e[0]] * 11)
    nodes = [
        node("a", 0),
        node("b", 1, type="skill"),
        node("c", 2, owner="ops@a"),
        node("d", 3, type="todo", status="open"),
        node("e", 4, type="todo", status="done"),
        node("f", 5, type="scratch"),
        node("g", 6, type="scratch", hours=1),
        node("h", 7, owner="dev@b", hours=1),  # same role, another instance: merged
        node("i", 8, type="todo", status="open", hours=1),  # two open todos alike: two errands
        node("j", 9, type="intent"),
        node("k", 10, type="intent", hours=1),
    ]
    assert [(m.anchor, m.dup) for m in plan_merges(nodes, vecs)] == [("a", "h")]


def test_a_duplicate_never_becomes_an_anchor_so_chains_stay_stable():
    """A ~ B and B ~ C but not A ~ C: B joins A, C stays; replanning after the merge agrees."""
    e = basis()
    a = e[0]
    b = at_cos(a, e[1], 0.85)
    c = at_cos(b, e[2], 0.85)
    assert float(a @ c) < MERGE_SIMILARITY <= 0.85
    vecs = np.stack([a, b, c])
    nodes = [node("A", 0), node("B", 1, hours=1), node("C", 2, hours=2)]
    assert [(m.anchor, m.dup) for m in plan_merges(nodes, vecs)] == [("A", "B")]
    after = [nodes[0], dataclasses.replace(nodes[1], archived=True), nodes[2]]
    assert plan_merges(after, vecs) == []


def test_merged_fields_follow_the_spec():
    anchor = node("a", 0, strength=2, reinforcement_count=1, salience=0.3, confidence=0.5)
    dup = node("d", 1, strength=3, reinforcement_count=2, importance=8, salience=1.0)
    assert merged_fields(anchor, dup) == {
        "reinforcement_count": 4,
        "strength": 5,
        "importance": 8,
        "authored_importance": 5.0,
        "salience": 1.0,
        "confidence": 0.75,
    }


def test_links_use_the_band_weight_cosine_and_skip_linked_pairs():
    e = basis()
    vecs = np.stack([e[0], at_cos(e[0], e[1], 0.85), at_cos(e[0], e[2], 0.82), e[3]])
    nodes = [node(x, i) for i, x in enumerate("abcd")]
    items = plan_links(nodes, vecs, linked={frozenset(("a", "c"))})
    assert [(i.a, i.b, i.weight) for i in items] == [("a", "b", pytest.approx(0.85, abs=1e-4))]


def test_links_cap_new_related_edges_per_node_counting_existing_ones():
    """DESIGN.md §8.4: ≤ 5 new edges per node per pass; the hub takes its 5 strongest neighbours."""
    e = basis()
    hub = e[0]
    spokes = [at_cos(hub, e[i + 1], 0.80 + i / 100) for i in range(8)]
    # Spoke–spoke cosines are products (≤ 0.87² < 0.80): only hub–spoke pairs are in the band.
    vecs = np.stack([hub, *spokes])
    nodes = [node("hub", 0)] + [node(f"s{i}", i + 1) for i in range(8)]
    items = plan_links(nodes, vecs)
    assert sorted(i.b for i in items) == ["s3", "s4", "s5", "s6", "s7"]
    resumed = plan_links(nodes, vecs, related={"hub": {"s7", "s6"}})
    assert len(resumed) == 3


def test_a_resumed_link_plan_adds_exactly_the_rest():
    rng = np.random.default_rng(1)
    base = rng.normal(size=(1, 32)).astype(np.float32)
    vecs = base + 0.35 * rng.normal(size=(30, 32)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    nodes = [node(f"n{i:02d}", i) for i in range(30)]
    full = plan_links(nodes, vecs)
    assert full, "the fixture must produce links"
    for cut in (1, len(full) // 2, len(full) - 1):
        related: dict[str, set[str]] = {}
        linked: set[frozenset[str]] = set()
        for item in full[:cut]:
            related.setdefault(item.a, set()).add(item.b)
            related.setdefault(item.b, set()).add(item.a)
            linked.add(frozenset((item.a, item.b)))
        assert plan_links(nodes, vecs, related, linked) == full[cut:]


def test_rescore_is_idempotent_and_never_promotes_what_the_author_set():
    """DESIGN.md §8.5, §16.12 (stable, unlike NOOA): HIGH and CRITICAL stay as authored; anything
    else moves with salience and deliberate repeats, never past 7 (below HIGH)."""
    assert rescore(5, 0.3, 0) == 5.0
    assert rescore(5, 1.0, 0) == 6.4
    assert rescore(5, 0.3, 16) == 7.0
    assert rescore(5, 1.0, 16) == 7.0
    assert rescore(3, 0.0, 0) == 2.4
    assert rescore(8, 0.0, 5) == 8.0
    assert rescore(8, 1.0, 100) == 8.0
    assert rescore(10, 0.0, 0) == 10.0
    nodes = [
        node("a", 0, authored_importance=5, importance=9, salience=0.0, reinforcement_count=3),
        node("b", 1, authored_importance=9, importance=3, salience=0.0),
        node("c", 2, authored_importance=3, importance=3),
    ]
    items = plan_rescore(nodes)
    assert [(i.id, i.new) for i in items] == [("a", 5.4), ("b", 9.0)]
    applied = [
        dataclasses.replace(
            n, importance=rescore(n.authored_importance, n.salience, n.reinforcement_count)
        )
        for n in nodes
    ]
    assert plan_rescore(applied) == []


def test_prune_plan_orders_by_retention_and_skips_archived():
    now = T0 + 200 * 24 * H
    nodes = [
        node("older", 0),
        node("newer", 1, hours=24),
        node("gone", 2, archived=True),
        node("fresh", 3, hours=200 * 24 - 1),
    ]
    assert [p.id for p in plan_prune(nodes, now)] == ["older", "newer"]


# --------------------------------------------------------------------------- passes over a store

import shutil  # noqa: E402
import sqlite3  # noqa: E402

import anyio  # noqa: E402

from nooa_mcp import Memory, Settings  # noqa: E402
from nooa_mcp.domain.schema import now as utc_now  # noqa: E402
from nooa_mcp.embeddings import HashEmbedder  # noqa: E402
from nooa_mcp.memory import maintain  # noqa: E402
from nooa_mcp.services import consolidation  # noqa: E402

SUBJECTS = [
    "deploy script tools vpn",
    "billing cron invoices stripe",
    "staging database password vault",
    "frontend build webpack cache",
    "oncall rotation pager schedule",
    "backup snapshots bucket retention",
    "kubernetes ingress certificates renewal",
    "analytics dashboard weekly metrics",
]


def topic_texts(subject: str) -> list[str]:
    base = f"the {subject} notes say check it carefully every single time"
    return [
        base,
        base.upper() + "!",  # same words: cosine 1, different hash
        f"The {subject} notes say: check it carefully, every single time.",  # same words
        base + " always",  # one more content word: a different statement, kept and linked
        f"the {subject} owner is the platform team",  # related, below the merge band
    ]


def relaxed(path) -> Settings:
    # Dedup off (threshold above 1) so near-duplicates reach the store, as they do when
    # several processes write at once; reflection must then clean them up.
    return Settings(store=path, owner="coder@laptop", dedup_similarity=1.01)


async def build_store(path) -> None:
    old = utc_now() - timedelta(days=200)
    recent = utc_now() - timedelta(days=2)
    async with Memory.open(settings=relaxed(path), embedder=HashEmbedder()) as mem:
        specs = []
        for i, subject in enumerate(SUBJECTS):
            for j, text in enumerate(topic_texts(subject)):
                specs.append(
                    {"content": text, "created_at": recent + (i * 10 + j) * timedelta(minutes=1)}
                )
        await mem.author_many(specs)
        # Learned 200 days ago (a date given to a memory is when it happened, not when the
        # store learned it: only the clock makes a memory old).
        with time_machine.travel(old):
            await mem.author_many(
                [
                    {"content": "an old scratch note about lunch plans"},
                    {"content": "an old fact nobody read about fax machines"},
                    {"content": "an old skill: restart the fax daemon", "type": "skill"},
                    {"content": "an old open todo: shred the fax archive", "type": "todo"},
                    {
                        "content": "an old critical fact: the fax line is 555",
                        "importance": "CRITICAL",
                    },
                ]
            )


def snapshot(path) -> dict:
    with sqlite3.connect(path) as db:
        memories = db.execute(
            "SELECT id, type, archived, importance, authored_importance, salience, confidence, "
            "strength, reinforcement_count, status FROM memories ORDER BY id"
        ).fetchall()
        edges = db.execute(
            "SELECT src, dst, type, round(weight, 4) FROM edges ORDER BY src, dst, type"
        ).fetchall()
        stones = db.execute(
            "SELECT memory_id, reason, lifted_at IS NULL FROM tombstones ORDER BY memory_id"
        ).fetchall()
    return {"memories": memories, "edges": edges, "tombstones": stones}


@pytest.fixture
async def base_store(tmp_path):
    path = tmp_path / "base.sqlite"
    await build_store(path)
    return path


PASS_NOW = utc_now()


async def reflect_on(path, stop_after: int | None = None):
    async with Memory.open(settings=relaxed(path), embedder=HashEmbedder()) as mem:
        with anyio.CancelScope() as scope:

            async def progress(done: int, total: int, message: str) -> None:
                if stop_after is not None and done >= stop_after:
                    scope.cancel()

            return await mem.reflect(progress=progress, now=PASS_NOW)
    return None


@pytest.mark.anyio
async def test_a_pass_merges_links_rescores_and_prunes(base_store):
    report = await reflect_on(base_store)
    steps = {s.step: s for s in report.steps}
    assert report.status == "completed"
    # Per subject the shouted copy and the re-punctuated one say the same thing in the same
    # words and fold into the base; "... always" adds a word, so it stays (and is linked).
    assert steps["merge"].applied == 2 * len(SUBJECTS)
    assert steps["link"].applied >= len(SUBJECTS)
    assert steps["prune"].applied == 2  # the old scratch note and the old unread fact
    assert steps["reconcile"].note.startswith("skipped")
    snap = snapshot(base_store)
    archived = [m for m in snap["memories"] if m[2]]
    assert len(archived) == 2 * len(SUBJECTS) + 2
    assert len(snap["tombstones"]) == len(archived)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "stop_after, batch",
    # merge … link … rescore … prune, one item per transaction; then with items sharing
    # transactions, stopped after the first one (all merges) and inside link.
    [(1, 1), (5, 1), (16, 1), (20, 1), (28, 1), (33, 1), (1, 200), (16, 3)],
)
async def test_an_interrupted_pass_converges_to_the_uninterrupted_store(
    base_store, tmp_path, stop_after, batch, monkeypatch
):
    """DESIGN.md §8.1: stopped between transactions, a later full pass reaches the same store.

    Progress goes out after each commit, so the stop lands after the transaction holding
    item `stop_after`: with one item per transaction that is between any two items."""
    monkeypatch.setattr(consolidation, "APPLY_BATCH", batch)
    straight = tmp_path / "straight.sqlite"
    stopped = tmp_path / "stopped.sqlite"
    shutil.copy(base_store, straight)
    shutil.copy(base_store, stopped)
    await reflect_on(straight)
    interrupted = await reflect_on(stopped, stop_after=stop_after)
    assert interrupted is None or interrupted.status == "interrupted"
    assert snapshot(stopped) != snapshot(straight)
    await reflect_on(stopped)
    assert snapshot(stopped) == snapshot(straight)


@pytest.mark.anyio
async def test_a_second_pass_changes_nothing(base_store):
    """Rescore is stable (unlike NOOA's halving), and every other step has converged."""
    await reflect_on(base_store)
    first = snapshot(base_store)
    report = await reflect_on(base_store)
    assert report.applied == 0
    assert snapshot(base_store) == first


@pytest.mark.anyio
async def test_prune_spares_every_protected_class_in_a_real_store(base_store):
    await reflect_on(base_store)
    with sqlite3.connect(base_store) as db:
        rows = dict(
            db.execute(
                "SELECT content, archived FROM memories WHERE content LIKE 'an old%'"
            ).fetchall()
        )
    assert rows == {
        "an old scratch note about lunch plans": 1,
        "an old fact nobody read about fax machines": 1,
        "an old skill: restart the fax daemon": 0,
        "an old open todo: shred the fax archive": 0,
        "an old critical fact: the fax line is 555": 0,
    }


@pytest.mark.anyio
async def test_merge_folds_counters_and_edges_into_the_oldest_anchor(tmp_path):
    async with Memory.open(settings=relaxed(tmp_path / "m.sqlite"), embedder=HashEmbedder()) as m:
        other = await m.author("unrelated note on coffee grinders")
        anchor = await m.author("the vpn config lives in the ops repo", created_at=T0)
        dup = await m.author(
            "the vpn config lives in the ops repo!",
            importance="HIGH",
            salience="PIVOTAL",
            links=[{"target": other.id, "relation": "supports"}],
            created_at=T0 + H,
        )
        await m.recall("vpn config ops repo")
        report = await m.reflect(["merge"])
        assert report.steps[0].details == [f"{dup.id[:8]} → {anchor.id[:8]}"]
        view = await m.get(anchor.id)
        assert view.importance == 8 and view.salience == 1.0
        assert view.reinforcement_count == 1
        edges = {(e["target"], e["type"]) for e in view.edges}
        assert (other.id, "supports") in edges and (dup.id, "refines") in edges
        assert (await m.get(dup.id)).archived
        assert view.channels["reflected"] == 1
        # The merged-away wording is tombstoned: writing it again is blocked.
        assert (await m.author("the VPN config lives in the ops repo")).status != "created"


@pytest.mark.anyio
async def test_writes_made_during_a_pass_are_never_lost(base_store):
    async with Memory.open(settings=relaxed(base_store), embedder=HashEmbedder()) as mem:
        first = (await mem.list_memories(limit=1))[0][1]
        written: list[str] = []

        async def progress(done: int, total: int, message: str) -> None:
            if done == 2:
                await mem.update(first.id, tags=["edited-mid-pass"], importance="HIGH")
                written.append((await mem.author("a fact written while reflecting")).id)

        report = await mem.reflect(progress=progress, now=PASS_NOW)
        assert report.status == "completed"
        view = await mem.get(first.id)
        assert view.tags == ["edited-mid-pass"]
        assert view.importance >= 8
        assert not (await mem.get(written[0])).archived


@pytest.mark.anyio
async def test_never_two_passes_at_once(base_store):
    async with (
        Memory.open(settings=relaxed(base_store), embedder=HashEmbedder()) as a,
        Memory.open(settings=relaxed(base_store), embedder=HashEmbedder()) as b,
    ):
        started, release = anyio.Event(), anyio.Event()

        async def hold(done: int, total: int, message: str) -> None:
            started.set()
            await release.wait()

        reports = []
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:

                async def run_a() -> None:
                    reports.append(await a.reflect(progress=hold, now=PASS_NOW))

                tg.start_soon(run_a)
                await started.wait()
                assert (await a.reflect()).status == "already-running"  # same process
                assert (await b.reflect()).status == "already-running"  # another connection
                release.set()
        assert reports[0].status == "completed"
        assert (await b.reflect(now=PASS_NOW)).status == "completed"


@pytest.mark.anyio
async def test_the_report_goes_to_the_maintenance_log(base_store):
    report = await reflect_on(base_store)
    async with Memory.open(settings=relaxed(base_store), embedder=HashEmbedder()) as mem:
        (entry,) = await mem.engine.store.maintenance_entries("reflection")
        assert entry.report["status"] == "completed"
        assert entry.report["applied"] == report.applied
        assert (await mem.stats()).extra["reflection_passes"] == 1


@pytest.mark.anyio
async def test_a_pass_runs_by_itself_after_n_writes(tmp_path):
    settings = relaxed(tmp_path / "n.sqlite").model_copy(
        update={"reflect_every_writes": 3, "reflect_idle_seconds": 0}
    )
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        async with anyio.create_task_group() as tg:
            tg.start_soon(maintain, mem.engine)
            done = mem.engine.role_state(mem.role).pass_done
            for i in range(3):
                await mem.author(f"note number {i} about the build farm {i * 7}")
            with anyio.fail_after(5):
                await done.wait()
            tg.cancel_scope.cancel()
        assert mem.engine.role_state(mem.role).last_report.trigger == "after-writes"


@pytest.mark.anyio
async def test_a_pass_runs_by_itself_when_idle_after_writes(tmp_path):
    settings = relaxed(tmp_path / "i.sqlite").model_copy(
        update={"reflect_every_writes": 0, "reflect_idle_seconds": 0.01}
    )
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        async with anyio.create_task_group() as tg:
            done = mem.engine.role_state(mem.role).pass_done
            await mem.author("a single note before going quiet")
            tg.start_soon(maintain, mem.engine)
            with anyio.fail_after(5):
                await done.wait()
            tg.cancel_scope.cancel()
        assert mem.engine.role_state(mem.role).last_report.trigger == "idle"


@pytest.mark.anyio
async def test_the_idle_pass_comes_to_a_loop_already_waiting_when_writes_begin(tmp_path):
    """A server starts its loop before any write: with no writes pending it slept until woken,
    and the first write (short of reflect_every_writes) never woke it, so no idle pass ran
    until 200 writes had come (DESIGN 8.9 says idle after writes)."""
    settings = relaxed(tmp_path / "w.sqlite").model_copy(
        update={"reflect_every_writes": 200, "reflect_idle_seconds": 0.05}
    )
    async with (
        Memory.open(settings=settings, embedder=HashEmbedder()) as mem,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(maintain, mem.engine)
        await anyio.wait_all_tasks_blocked()
        state = mem.engine.role_state(mem.role)
        for round in range(2):
            done = state.pass_done
            await mem.author(f"a note before going quiet, round {round}")
            with anyio.fail_after(5):
                await done.wait()
            assert state.last_report.trigger == "idle" and state.writes == 0
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_the_idle_pass_is_timed_by_its_environment_variable(tmp_path, monkeypatch):
    """NOOA_REFLECT_IDLE_SECONDS sets the idle wait (it had no variable, so a server could
    not be driven to its idle pass under faketime); 0 turns the pass off, as the setting."""
    monkeypatch.setenv("NOOA_REFLECT_IDLE_SECONDS", " 0.01 ")
    settings = Settings.from_env(store=tmp_path / "e.sqlite", owner="coder@laptop")
    assert settings.reflect_idle_seconds == 0.01
    settings = settings.model_copy(update={"reflect_every_writes": 0})
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        async with anyio.create_task_group() as tg:
            done = mem.engine.role_state(mem.role).pass_done
            await mem.author("a single note before going quiet")
            tg.start_soon(maintain, mem.engine)
            with anyio.fail_after(5):
                await done.wait()
            tg.cancel_scope.cancel()
        assert mem.engine.role_state(mem.role).last_report.trigger == "idle"
    monkeypatch.setenv("NOOA_REFLECT_IDLE_SECONDS", "0")
    assert Settings.from_env().reflect_idle_seconds == 0
    monkeypatch.delenv("NOOA_REFLECT_IDLE_SECONDS")
    assert Settings.from_env().reflect_idle_seconds == 600


@pytest.mark.anyio
async def test_unknown_steps_are_refused(mem):
    from nooa_mcp.errors import InvalidInput

    with pytest.raises(InvalidInput) as exc:
        await mem.reflect(["merge", "dream"])
    assert exc.value.field == "steps"


def test_the_reflect_command_runs_a_pass_with_a_progress_bar(tmp_path, monkeypatch):
    import json as json_mod

    from click.testing import CliRunner

    from nooa_mcp import cli, engine as memory

    base_store = tmp_path / "cli.sqlite"
    anyio.run(build_store, base_store)
    monkeypatch.setenv("NOOA_STORE", str(base_store))
    monkeypatch.setenv("NOOA_OWNER", "coder@laptop")
    monkeypatch.setattr(memory, "default_embedder", lambda cache_dir=None: HashEmbedder())
    runner = CliRunner()
    out = runner.invoke(cli.main, ["reflect", "--step", "merge", "--json"], catch_exceptions=False)
    assert out.exit_code == 0
    report = json_mod.loads(out.stdout)
    assert [s["step"] for s in report["steps"]] == ["merge"]
    assert report["steps"][0]["applied"] == 2 * len(SUBJECTS)
    # Not a terminal (a pipe, a log): no bar, not even its label.
    assert "reflecting" not in out.stderr
    monkeypatch.setattr(cli, "stderr_is_terminal", lambda: True)
    table = runner.invoke(cli.main, ["reflect"], catch_exceptions=False)
    assert "completed" in table.stdout and "merge" in table.stdout
    assert "reflecting" in table.stderr


class TableEmbedder:
    """A test double of the Embedder contract with hand-placed vectors (unknown text → e15)."""

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table
        self.dim = 16
        self.name = "table-16"

    def embed(self, texts):
        fallback = np.eye(16, dtype=np.float32)[15]
        return np.stack([self.table.get(t, fallback) for t in texts]).astype(np.float32)


@pytest.mark.anyio
async def test_pruning_a_linked_memory_frees_no_link_budget(tmp_path):
    """A full pass is stable even when prune archives a node that link just connected."""
    e = basis()
    table = {"hub": e[0]}
    cosines = [0.90, 0.88, 0.86, 0.84, 0.82, 0.81]
    for i, c in enumerate(cosines):
        table[f"spoke {i}"] = at_cos(e[0], e[i + 1], c)
    old = utc_now() - timedelta(days=200)
    settings = relaxed(tmp_path / "hub.sqlite")
    async with Memory.open(settings=settings, embedder=TableEmbedder(table)) as mem:
        await mem.author("hub")
        with time_machine.travel(old):
            await mem.author("spoke 0")  # strongest neighbour, unread: pruned
        for i in range(1, 6):
            await mem.author(f"spoke {i}")
        first = await mem.reflect(["link", "prune"], now=PASS_NOW)
        assert [s.applied for s in first.steps] == [5, 1]
        second = await mem.reflect(["link", "prune"], now=PASS_NOW)
        assert second.applied == 0


def test_rescore_and_prune_over_columns_plan_exactly_what_they_plan_over_nodes():
    """Rows (columns) stand in for Nodes at scale: the same plans, item for item."""
    from nooa_mcp.domain.reflection import Rows, prune_rows, rescore_rows

    rng = np.random.default_rng(7)
    now = T0 + 400 * 24 * H
    records = []
    for i in range(600):
        created = T0 + float(rng.uniform(0, 399 * 24)) * H
        accessed = created + float(rng.uniform(0, 24 * 30)) * H
        records.append(
            (
                i + 1,
                f"m{i:04d}",
                str(rng.choice(["info", "skill", "todo", "episode", "scratch"])),
                "dev@a",
                str(rng.choice(["open", "done"])) if i % 3 == 0 else None,
                float(rng.choice([1, 3, 5, 5.4, 7, 8, 10])),
                None if i % 4 == 0 else float(rng.choice([1, 3, 5, 8, 10])),
                float(rng.choice([0.0, 0.3, 0.6, 1.0])),
                0.75,
                int(rng.integers(0, 6)),
                int(rng.integers(0, 20)),
                created.timestamp(),
                min(accessed, now).timestamp(),
            )
        )
    rows = Rows.from_records(records)
    nodes = [rows.node(p) for p in range(len(rows))]
    assert nodes[0].authored_importance == nodes[0].importance  # none recorded: importance
    expected_rescore = plan_rescore(nodes)
    expected_prune = plan_prune(nodes, now)
    assert expected_rescore and expected_prune, "the fixture must produce both kinds of item"
    assert rescore_rows(rows) == expected_rescore
    assert prune_rows(rows, now) == expected_prune


def test_among_marks_the_ids_in_a_set_or_a_list_in_order() -> None:
    ids = ["c3", "a1", "b2", "a1"]
    assert among(ids, {"a1"}).tolist() == [False, True, False, True]
    assert among(iter(ids), ["b2", "zz"]).tolist() == [False, False, True, False]
    assert among([], {"a1"}).tolist() == []
    assert among(ids, frozenset()).dtype == bool


def test_rows_packed_for_the_next_pass_come_back_equal_and_hold_no_id_strings():
    """A pass's rows are kept for the role's next pass packed: the ids as one UTF-8 buffer
    with end offsets (ids are any text: imports keep theirs), the columns as they are."""

    def record(seq: int, ident: str) -> tuple:
        return (seq, ident, "info", "r@a", None, 5.0, None, 0.3, 1.0, 1, 0, 1.0, 2.0)

    from nooa_mcp.domain.reflection import Rows

    ids = ["m1", "é-naïve-id", "", "id with spaces", "日本語", "m6"]
    rows = Rows.from_records([record(i + 1, ident) for i, ident in enumerate(ids)])
    packed = rows.packed()
    assert packed.columns.ids == [] and len(packed) == len(ids)
    assert packed.ids == "".join(ids).encode() and packed.ends.dtype == np.int64
    back = packed.rows()
    assert back.ids == ids and back.seq.tolist() == rows.seq.tolist()
    assert back.importance.tolist() == rows.importance.tolist() and back.types == rows.types
    assert Rows.from_records([]).packed().rows().ids == []
