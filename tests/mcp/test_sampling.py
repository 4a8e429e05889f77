"""Generative reflection through MCP sampling (DESIGN.md §8.3): a round trip with a client that
implements a sampling callback, over the SDK's in-memory client. The server here is a minimal
one built in the test: only the wiring from a request's session to `Memory.reflect` is under test.
"""

from __future__ import annotations

import json
import re

import pytest
from mcp import Client, types
from mcp.server.mcpserver import Context, MCPServer

from nooa_mcp import Memory, Settings
from nooa_mcp.domain.replies import ReflectReport
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp.sampling import session_sampler

pytestmark = pytest.mark.anyio

BASE = "the deploy script lives in tools deploy sh and needs the vpn connection first"
CLUSTER = [
    BASE,
    BASE.replace("vpn", "office network"),
    "the deploy script lives in tools and needs vpn",
]


def server_for(mem: Memory, steps: list[str]) -> MCPServer:
    server = MCPServer("reflect-test")

    @server.tool()
    async def reflect(ctx: Context) -> ReflectReport:
        return await mem.reflect(steps, sampler=session_sampler(ctx.session))

    return server


def reply_with(text: str):
    seen: list[str] = []

    async def callback(context, params: types.CreateMessageRequestParams):
        prompt = params.messages[0].content.text
        seen.append(prompt)
        ids = re.findall(r"\[([0-9a-f]{8})\]", prompt)
        body = text.replace("{FIRST}", ids[0]).replace("{SECOND}", ids[1] if len(ids) > 1 else "")
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=body), model="fake"
        )

    callback.seen = seen  # type: ignore[attr-defined]
    return callback


@pytest.fixture
async def clustered(tmp_path):
    # Dedup off: the cluster members are close (cosine 0.79–0.93) but distinct memories.
    settings = Settings(store=tmp_path / "s.sqlite", owner="coder@laptop", dedup_similarity=1.01)
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        labels = [
            (["ops"], ["deploy.sh"]),
            ([], ["deploy.sh", "office network"]),
            (["ops", "network"], ["vpn"]),
        ]
        ids = [
            (await mem.author(text, tags=tags, entities=entities)).id
            for text, (tags, entities) in zip(CLUSTER, labels, strict=True)
        ]
        yield mem, ids


async def call_reflect(mem, steps, callback, mode="legacy") -> dict:
    async with Client(server_for(mem, steps), sampling_callback=callback, mode=mode) as client:
        result = await client.call_tool("reflect", {})
    assert not result.is_error, result.content
    return result.structured_content


async def test_reconcile_round_trip_writes_the_consolidated_memory_with_provenance(clustered):
    mem, ids = clustered
    reply = json.dumps(
        {
            "title": "Deploy script",
            "content": "tools/deploy.sh deploys; it needs the VPN or the office network.",
            "supersedes": ["{FIRST}", "deadbeef", "0123456789abcdef"],
        }
    )
    callback = reply_with(reply)
    report = await call_reflect(mem, ["reconcile"], callback)
    (step,) = report["steps"]
    assert (step["planned"], step["applied"], step["failed"]) == (1, 1, 0)
    assert "ignored ids" in step["details"][0]
    assert "deadbeef" in step["details"][0]
    assert len(callback.seen) == 1
    product = next(v for _, v in await mem.list_memories() if v.title == "Deploy script")
    # It carries what its sources were labelled with, each label once, in their order.
    assert (product.tags, product.entities) == (
        ["ops", "network"],
        ["deploy.sh", "office network", "vpn"],
    )
    derived = {e["target"] for e in product.edges if e["type"] == "derived_from"}
    assert derived == set(ids)
    superseded = [e["target"] for e in product.edges if e["type"] == "refines"]
    assert len(superseded) == 1 and (await mem.get(superseded[0])).archived
    assert sum([(await mem.get(i)).archived for i in ids]) == 1
    # Settled: the next pass does not hand the same cluster back.
    again = await call_reflect(mem, ["reconcile"], reply_with(reply))
    assert again["steps"][0]["planned"] == 0


async def test_a_malformed_reply_is_contained(clustered):
    mem, _ = clustered
    before = await mem.stats()
    report = await call_reflect(mem, ["reconcile", "rescore"], reply_with("Sure! Here you go: {"))
    reconcile, rescore = report["steps"]
    assert report["status"] == "completed"
    assert (reconcile["applied"], reconcile["failed"]) == (0, 1)
    assert reconcile["details"][0].startswith("malformed reply")
    assert rescore["step"] == "rescore"
    after = await mem.stats()
    assert (after.total, after.archived) == (before.total, before.archived)


async def test_a_reply_that_changes_nothing_is_skipped(clustered):
    mem, _ = clustered
    report = await call_reflect(mem, ["reconcile"], reply_with('{"content": null}'))
    assert report["steps"][0]["skipped"] == 1


async def test_abstract_round_trip_writes_reflections_linked_to_episodes(tmp_path):
    settings = Settings(store=tmp_path / "a.sqlite", owner="coder@laptop")
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        for i, text in enumerate(
            [
                "the migration failed on a lock timeout",
                "retrying the migration at night worked",
                "the hotfix shipped after the tests were fixed",
            ]
        ):
            await mem.author(text, type="episode", created_at=f"2026-11-0{i + 1}T10:00:00Z")
        reply = json.dumps(
            {
                "reflections": [
                    {
                        "title": "Migrations",
                        "content": "Run migrations off-peak: locks time out by day.",
                        "sources": ["{FIRST}", "{SECOND}", "cafebabe"],
                    },
                    {"content": "An insight resting on nothing shown", "sources": ["feedface"]},
                ]
            }
        )
        report = await call_reflect(mem, ["abstract"], reply_with(reply))
        assert report["steps"][0]["applied"] == 1
        (view,) = [v for _, v in await mem.list_memories(type="reflection")]
        assert view.importance == 6
        assert len([e for e in view.edges if e["type"] == "derived_from"]) == 2
        # The batch is done: the same episodes are not sent again.
        again = await call_reflect(mem, ["abstract"], reply_with(reply))
        assert again["steps"][0]["planned"] == 0


async def test_without_a_sampling_client_the_generative_steps_are_skipped(clustered):
    mem, _ = clustered
    async with Client(server_for(mem, ["reconcile"]), mode="legacy") as client:
        result = await client.call_tool("reflect", {})
    assert result.structured_content["steps"][0]["note"].startswith("skipped")


async def test_a_transport_without_a_back_channel_stops_generative_steps_only(clustered):
    """On the 2026-07-28 protocol the server may not send requests: the pass still completes."""
    mem, _ = clustered
    report = await call_reflect(mem, ["reconcile", "rescore"], reply_with("{}"), mode="auto")
    assert report["status"] == "completed"
    note = report["steps"][0]["note"]
    assert note.startswith("stopped") or note.startswith("skipped")
