"""Owner isolation as a property (DESIGN.md §10, §11).

Hypothesis draws graphs of memories spread over owners of two roles plus shared rows, with
random typed edges (added straight into the store, so edges that cross roles exist too, as after
an import) and memory: references. Every owner, and the reader, then recalls with a query and
a session of its own, so access logs hold queries to leak. For a random reader and every scope,
nothing the reader may not see reaches it through recall, explain, spreading, references,
resources or stats: no id, no 8-character prefix, no content, no other role's query or session.
And everything it may see is there: recall returns every visible memory (they all match), and
the reader's own query shows in its access logs. Writes across roles are always refused and
change nothing.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings, strategies as st
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import TextResourceContents

from nooa_mcp import Memory
from nooa_mcp.config import Settings
from nooa_mcp.domain.schema import EdgeType
from nooa_mcp.domain.scope import Actor
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.engine import Engine
from nooa_mcp.mcp.server import build_server
from nooa_mcp.services import provenance

OWNERS = ["alice@a", "alice@b", "bob@x", "bob@y", "carol", ""]
READERS = ["alice@a", "alice@b", "bob@x", "carol"]
SCOPES = ["mine", "instance", "*", "alice", "alice@b", "bob", "bob@x", "carol"]
# ci: 50 examples, about 0.6 s of CPU each (28 s in all; 2 min of wall time at load 15 on two
# cores). The build shares one engine (it opened one per memory before). long: 200.
EXAMPLES = {"ci": 50, "long": 200}.get(os.environ.get("NOOA_FUZZ_PROFILE", "ci"), 50)


def visible(reader: str, scope: str, owner: str) -> bool:
    """DESIGN.md §10, written out independently of the code under test: no reader here
    has a read grant, so `*` and another role's name narrow to the reader's own role."""
    role = reader.partition("@")[0]
    if owner == "":
        return True
    if scope == "instance":
        return owner == reader
    if scope in ("mine", "*") or scope.partition("@")[0] != role:
        return owner.partition("@")[0] == role
    if "@" in scope:
        return owner == scope
    return owner.partition("@")[0] == scope


MARKERS = [f"zq{n}mark" for n in range(12)]
#: A query marker and a session per owner (and per reader): what each one asked, and where.
ASKERS = sorted(set(OWNERS) | set(READERS))
QUERY_MARKS = {o: f"qy{n}ask" for n, o in enumerate(ASKERS)}
SESSION_MARKS = {o: f"ss{n}sess" for n, o in enumerate(ASKERS)}

graphs = st.integers(3, 9).flatmap(
    lambda n: st.tuples(
        st.lists(st.sampled_from(OWNERS), min_size=n, max_size=n),
        st.lists(
            st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.sampled_from(EdgeType)),
            max_size=2 * n,
        ),
        st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3),
        st.sampled_from(READERS),
    )
)


async def build(store: Path, owners: list[str], edges: list, refs: list, reader: str) -> list[str]:
    """Author memory i as owners[i]; then refs (i → memory:j) and edges straight into the
    store; then every owner, and last the reader, recalls with its own query and session."""
    ids: list[str] = []
    async with Engine.open(Settings(store=store), HashEmbedder()) as engine:
        for i, owner in enumerate(owners):
            content = f"Harbor topic note {MARKERS[i]} about the relay station and its crew."
            kind = "todo" if i % 4 == 3 else "info"
            written = await Memory(engine, owner).author(content, type=kind, title=f"T{MARKERS[i]}")
            ids.append(written.id)
        async with engine.store.transaction():
            for src, dst, relation in edges:
                if src != dst:
                    await engine.store.add_edge(ids[src], ids[dst], relation, 1.0)
        for asker in [*(o for o in dict.fromkeys(owners) if o != reader), reader]:
            with provenance.session(SESSION_MARKS[asker]):
                await Memory(engine, asker).recall(
                    f"harbor relay crew {QUERY_MARKS[asker]}", k=50, hops=0
                )
    conn = sqlite3.connect(store)
    for src, dst in refs:
        # A memory: reference with its snapshot, to any owner's memory: whatever the writer
        # could see then, a reader's scope decides what the reference shows now.
        ref = {"kind": "memory", "target": ids[dst], "preview": f"snapshot {MARKERS[dst]}"}
        conn.execute("UPDATE memories SET refs = ? WHERE id = ?", (json.dumps([ref]), ids[src]))
    conn.commit()
    conn.close()
    return ids


def hidden_tokens(ids: list[str], owners: list[str], reader: str, scope: str) -> list[str]:
    """What must not reach the reader: hidden memories (id prefix, marker) and the queries and
    sessions of every other role (no reader here has a grant: only its own role is readable)."""
    tokens = []
    for i, (ident, owner) in enumerate(zip(ids, owners, strict=True)):
        if not visible(reader, scope, owner):
            tokens += [ident[:8], MARKERS[i]]
    role = reader.partition("@")[0]
    for asker in set(owners) - {reader, ""}:  # the shared owner's reads are everyone's
        if asker.partition("@")[0] != role:
            tokens += [QUERY_MARKS[asker], SESSION_MARKS[asker]]
    return tokens


def shown(ids: list[str], owners: list[str], reader: str, scope: str) -> set[str]:
    return {i for i, o in zip(ids, owners, strict=True) if visible(reader, scope, o)}


def leaked(reply: Any, tokens: list[str]) -> list[str]:
    text = reply if isinstance(reply, str) else json.dumps(reply, default=str)
    return [t for t in tokens if t in text]


async def read(client: Client, uri: str) -> str:
    content = (await client.read_resource(uri)).contents[0]
    assert isinstance(content, TextResourceContents)
    return content.text


async def check_reader(store: Path, ids: list[str], owners: list[str], reader: str) -> None:
    # The reply echoes the query, so it holds no marker: markers only come from memories.
    query = "harbor topic relay station crew"
    own_query = QUERY_MARKS[reader]
    server = build_server(Settings(store=store, owner=reader), embedder=HashEmbedder())
    async with Client(server, cache=None) as client:
        # Resources answer at the reader's own scope (mine); read before the reader's own
        # wider-scope reads put their notes in its access log.
        tokens = hidden_tokens(ids, owners, reader, "mine")
        mine = shown(ids, owners, reader, "mine")
        for uri in ("memory://access-log", "memory://todos", "memory://stats", "memory://context"):
            text = await read(client, uri)
            assert leaked(text, tokens) == [], uri
            if uri == "memory://access-log" and mine:
                assert own_query in text  # the reader's own query is not redacted
        stats = json.loads(await read(client, "memory://stats"))
        assert set(stats["by_owner"]) <= {o for o in OWNERS if visible(reader, "mine", o)}
        assert stats["active"] == len(mine)
        for i, ident in enumerate(ids):
            if ident in mine:
                assert MARKERS[i] in await read(client, f"memory://memories/{ident}")
                log = await read(client, f"memory://memories/{ident}/access-log")
                assert leaked(log, tokens) == [] and own_query in log, owners[i]
                replay = await client.call_tool("memory_explain", {"memory_id": ident})
                assert leaked([replay.structured_content, replay.content[0].text], tokens) == []
            else:
                for uri in (f"memory://memories/{ident}", f"memory://memories/{ident}/access-log"):
                    with pytest.raises(MCPError):
                        await read(client, uri)
        for scope in SCOPES:
            tokens = hidden_tokens(ids, owners, reader, scope)
            expected = shown(ids, owners, reader, scope)
            for hops in (0, 3):
                recalled = await client.call_tool(
                    "memory_recall", {"query": query, "k": 50, "scope": scope, "hops": hops}
                )
                assert not recalled.is_error, recalled.content
                replied = [recalled.structured_content, recalled.content[0].text]
                assert leaked(replied, tokens) == [], (scope, hops)
                # Every memory matches the query: what the scope shows is all there.
                got = {h["id"] for h in recalled.structured_content["hits"]}
                assert got == expected, (scope, hops)
            explained = await client.call_tool(
                "memory_explain", {"query": query, "k": 50, "scope": scope, "hops": 3}
            )
            assert leaked([explained.structured_content, explained.content[0].text], tokens) == []
            assert {r["id"] for r in explained.structured_content["rows"]} == expected, scope
            for i, ident in enumerate(ids):
                if not visible(reader, scope, owners[i]):
                    why = await client.call_tool(
                        "memory_explain", {"query": query, "memory_id": ident, "scope": scope}
                    )
                    assert why.is_error, (scope, owners[i])
                    assert MARKERS[i] not in why.content[0].text
        await check_writes(client, store, ids, owners, reader)


async def check_writes(
    client: Client, store: Path, ids: list[str], owners: list[str], reader: str
) -> None:
    """Every write to a memory of another role (or a shared one) is refused and changes nothing."""
    role = reader.partition("@")[0]
    mine = [i for i, o in enumerate(ids) if owners[i] and owners[i].partition("@")[0] == role]
    before = _snapshot(store)
    for i, ident in enumerate(ids):
        if owners[i] and owners[i].partition("@")[0] == role:
            continue
        attempts: list[tuple[str, dict[str, Any]]] = [
            ("memory_update", {"memory_id": ident, "content": "overwritten"}),
            ("memory_update", {"memory_id": ident[:8], "forget": True}),
            ("memory_update", {"memory_id": ident, "importance": "CRITICAL"}),
            ("todo", {"action": "done", "memory_id": ident}),
        ]
        if mine and owners[i]:  # a link to a shared memory is no write to it: allowed
            link = {"target": ident, "relation": "related"}
            attempts.append(("memory_update", {"memory_id": ids[mine[0]], "links": [link]}))
        for tool, args in attempts:
            result = await client.call_tool(tool, args)
            assert result.is_error, (tool, args, owners[i])
    assert _snapshot(store) == before


def _snapshot(store: Path) -> tuple[list, list]:
    conn = sqlite3.connect(store)
    rows = conn.execute(
        "SELECT id, content, importance, archived, status FROM memories ORDER BY id"
    ).fetchall()
    edges = conn.execute("SELECT src, dst, type FROM edges ORDER BY src, dst, type").fetchall()
    conn.close()
    return rows, edges


#: Known cases, run first and every time: each is a way a memory could leak that a random
#: draw may miss (a fixed set of such cases caught a scope bug the random draws did not).
KNOWN = [
    # Spreading relayed through another role's memory: A (mine) -> X (bob's) -> B (mine).
    (
        ["alice@a", "bob@x", "alice@a"],
        [(0, 1, EdgeType.causes), (1, 2, EdgeType.causes)],
        [],
        "alice@a",
    ),
    # A reference's snapshot across instances of one role, read with scope `instance`.
    (["bob@y", "bob@x", "alice@a"], [], [(1, 0)], "bob@x"),
    # A shared memory referencing and linking another role's memory.
    (["", "bob@x", "alice@a"], [(0, 1, EdgeType.related)], [(0, 1)], "alice@a"),
    # Supersession across the reader's two instances, and a todo of another role linked in.
    (
        ["alice@a", "alice@b", "carol", "bob@x"],
        [(0, 1, EdgeType.refines), (1, 0, EdgeType.contradicts), (0, 3, EdgeType.related)],
        [(3, 0)],
        "alice@a",
    ),
    # Every owner once, the reader the shared-row-free role, edges both ways across roles.
    (
        ["alice@a", "alice@b", "bob@x", "bob@y", "carol", ""],
        [(2, 0, EdgeType.supports), (0, 2, EdgeType.part_of), (5, 4, EdgeType.triggers)],
        [(4, 2), (0, 3)],
        "carol",
    ),
]


def _with_known(test):
    for case in reversed(KNOWN):
        test = example(graph=case)(test)
    return test


# Seeded (derandomize): every run draws the same examples, so a pass or a failure is the same
# on any machine and in a mutation run. No shrinking: an example is 3-9 memories, readable as
# drawn, and shrinking one failure took minutes.
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],
)
@given(graph=graphs)
@_with_known
def test_no_scope_reveals_or_relays_a_memory_outside_it(graph: tuple) -> None:
    owners, edges, refs, reader = graph

    async def run() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            store = Path(tmp) / "memory.sqlite"
            ids = await build(store, owners, edges, refs, reader)
            await check_reader(store, ids, owners, reader)

    anyio.run(run)


def test_the_scope_rule_in_this_file_matches_the_code() -> None:
    # The oracle above is written independently; make sure it agrees with Actor.scope.
    for reader in READERS:
        for owner in OWNERS:
            for word in ("mine", "instance", "*", *OWNERS[1:]):
                assert visible(reader, word, owner) == Actor(reader).scope(word).allows(owner)


# --------------------------------------------------------------------------- no relay


@pytest.mark.anyio
async def test_spreading_never_passes_through_a_hidden_memory(tmp_path: Path) -> None:
    """A (mine, matches) → X (bob's) → B (mine, matches nothing): B must not be reached."""
    store = tmp_path / "memory.sqlite"
    embedder = HashEmbedder()
    async with Memory.open(store, owner="alice@a", embedder=embedder) as alice:
        a = (await alice.author("The harbor crane schedule changed on Monday.")).id
        b = (await alice.author("Quarterly tax filing needs the blue folder.")).id
    async with Memory.open(store, owner="bob@x", embedder=embedder) as bob:
        x = (await bob.author("Bob's private note about nothing in particular.")).id
        async with bob.engine.store.transaction():
            await bob.engine.store.add_edge(a, x, EdgeType.causes, 1.0)
            await bob.engine.store.add_edge(x, b, EdgeType.causes, 1.0)
    async with Memory.open(store, owner="alice@a", embedder=embedder) as alice:
        recalled = await alice.recall("harbor crane schedule", k=10, hops=3)
        explained = await alice.explain("harbor crane schedule", k=10, hops=3)
        why = await alice.explain("harbor crane schedule", memory_id=b, k=10, hops=3)
    async with Memory.open(store, owner="alice@a", read=["bob"], embedder=embedder) as alice:
        everyone = await alice.recall("harbor crane schedule", k=10, hops=3, scope="*")
    assert [h.id for h in recalled.hits] == [a]
    assert x not in {r.id for r in explained.rows} and b not in {r.id for r in explained.rows}
    # Asked about B by id, explain ranks it, but with no activation relayed through X.
    assert why.why_not is not None
    assert why.why_not.components is None or why.why_not.components.spread == 0
    # Granted bob's role, scope * sees the chain, and B is reached through X: the gate is the
    # scope.
    assert b in {h.id for h in everyone.hits}


@pytest.mark.anyio
async def test_a_reference_snapshot_does_not_relay_a_memory_the_scope_hides(
    tmp_path: Path,
) -> None:
    """Found by the property above: bob@x references bob@y's memory (same role, allowed);
    alice reading bob@x's memory with scope bob@x must not get bob@y's snapshot or id."""
    store = tmp_path / "memory.sqlite"
    embedder = HashEmbedder()
    async with Memory.open(store, owner="bob@y", embedder=embedder) as bob_y:
        hidden = (await bob_y.author("Bob y's zqsecret plan for the harbor.")).id
    async with Memory.open(store, owner="bob@x", embedder=embedder) as bob_x:
        await bob_x.author("Harbor crane notes.", references=[f"memory:{hidden}"])
    async with Memory.open(store, owner="alice@a", read=["bob"], embedder=embedder) as alice:
        recalled = await alice.recall("harbor crane notes", scope="bob@x", hops=0)
        listed = [view for _, view in await alice.list_memories(scope="bob@x")]
    assert [r.state for v in listed for r in v.references] == ["HIDDEN"]
    assert "zqsecret" not in str([v.model_dump_json() for v in listed])
    assert "zqsecret" not in recalled.model_dump_json()
    assert hidden[:8] not in recalled.model_dump_json()
    assert [r.state for r in recalled.hits[0].references] == ["HIDDEN"]
