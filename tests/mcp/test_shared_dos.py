"""One client cannot deny the shared server to the others.

File references read only regular files and never block the event loop; per-owner state is
shared, not copied per client name; sessions are capped per token (or client address); a reply
carries a bounded number of reminders and never loses its hits to them; reflection leases are
per role and a dead holder is noticed at once.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import stat
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from machine import machine_lacks
from mcp import Client
from mcp_types import Implementation
from shared_support import (
    HANG_GUARD,
    MCP_HEADERS,
    call,
    hash_server,
    http_server,
    initialize_body,
    proc_fds,
    proc_status,
    process_env,
    reflection_holder,
    serve_args,
    stdio_params,
    stop,
)

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --------------------------------------------------------------------------- §8 file references


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


def ref_settings(tmp_path: Path, root: Path) -> Settings:
    return Settings(store=tmp_path / "refs.sqlite", owner="alice", reference_root=root)


@pytest.mark.processes
async def test_a_reference_to_a_named_pipe_is_refused_at_write_naming_the_path(
    tmp_path: Path, root: Path
) -> None:
    # In its own process: on today's code the open() of a pipe blocks the server for good.
    os.mkfifo(root / "queue")
    async with Client(stdio_params(ref_settings(tmp_path, root)), cache=None) as client:
        with anyio.fail_after(HANG_GUARD):
            result = await client.call_tool(
                "memory_author",
                {"content": "The job queue lives in the pipe.", "references": ["file:queue"]},
            )
    assert result.is_error
    assert "queue" in result.content[0].text


@pytest.mark.processes
async def test_a_referenced_file_later_replaced_by_a_named_pipe_is_dangling_at_recall(
    tmp_path: Path, root: Path
) -> None:
    notes = root / "notes.txt"
    notes.write_text("Deploy notes: run the migration first.")
    async with Client(stdio_params(ref_settings(tmp_path, root)), cache=None) as client:
        await call(
            client,
            "memory_author",
            {"content": "The deploy notes are in the project.", "references": ["file:notes.txt"]},
        )
        notes.unlink()
        os.mkfifo(notes)
        with anyio.fail_after(HANG_GUARD):
            reply = await call(client, "memory_recall", {"query": "deploy notes"})
    (reference,) = reply["hits"][0]["references"]
    assert (reference["state"], reference["value"]) == (
        "DANGLING",
        "Deploy notes: run the migration first.",
    )


async def test_a_reference_to_a_device_is_refused_at_write_naming_the_path(
    tmp_path: Path, root: Path
) -> None:
    try:
        os.mknod(root / "nulldev", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except OSError as exc:
        machine_lacks(f"cannot create a character device here ({exc.strerror})")
    async with Client(hash_server(ref_settings(tmp_path, root)), cache=None) as client:
        result = await client.call_tool(
            "memory_author",
            {"content": "The null device is referenced.", "references": ["file:nulldev"]},
        )
    assert result.is_error
    assert "nulldev" in result.content[0].text


async def test_a_directory_preview_names_at_most_50_entries_and_counts_the_rest(
    tmp_path: Path, root: Path
) -> None:
    folder = root / "big"
    folder.mkdir()
    names = [f"e{i:03d}" for i in range(120)]
    for name in names:
        (folder / name).touch()
    async with Client(hash_server(ref_settings(tmp_path, root)), cache=None) as client:
        await call(
            client,
            "memory_author",
            {"content": "The export folder holds the nightly dumps.", "references": ["file:big"]},
        )
        reply = await call(client, "memory_recall", {"query": "export folder nightly dumps"})
    value = reply["hits"][0]["references"][0]["value"]
    shown = [n for n in names if n in value]
    more = re.search(r"(?:…|\.\.\.) and (\d+) more", value)
    assert more is not None, value
    assert len(shown) <= 50
    # At most 50 listed (the 200-character preview may show fewer of them): N counts the rest.
    assert 120 - 50 <= int(more.group(1)) <= 120 - len(shown), value


# --------------------------------------------------------------------------- §9 per-name state

WARM_NAMES = 5
MORE_NAMES = 20


async def _call_as(url: str, name: str) -> None:
    info = Implementation(name=name, version="1")
    async with Client(url, client_info=info, cache=None) as client:
        await call(client, "memory_recall", {"query": "anything at all"})


@pytest.mark.processes
async def test_new_client_names_add_no_open_files_or_threads_to_an_http_server(
    tmp_path: Path,
) -> None:
    async with http_server(serve_args(tmp_path / "names.sqlite")) as proc:
        for i in range(WARM_NAMES):
            await _call_as(proc.url, f"warm-client-{i}")
        before = (proc_fds(proc.pid), proc_status(proc.pid, "Threads"))
        for i in range(MORE_NAMES):
            await _call_as(proc.url, f"new-client-{i}")
        after = (proc_fds(proc.pid), proc_status(proc.pid, "Threads"))
    grown = {"fds": after[0] - before[0], "threads": after[1] - before[1]}
    # Today every name keeps its own store connection and its worker thread: 20 more names =
    # +40 fds, +20 threads. Noise with one name repeated is 0-1 fd, 0-2 threads.
    assert grown["fds"] <= 4 and grown["threads"] <= 4, grown


# --------------------------------------------------------------------------- §10 sessions

TOKEN_A = "token-a-0123456789abcdef"
TOKEN_B = "token-b-0123456789abcdef"


def _tokens(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.json"
    path.write_text(f'{{"{TOKEN_A}": "alpha", "{TOKEN_B}": "beta"}}')
    return path


async def _sessions(url: str, count: int, token: str | None = None, source: str = "") -> list[int]:
    """Open `count` sessions (initialize, never closed); their HTTP statuses."""
    headers = {**MCP_HEADERS, **({"Authorization": f"Bearer {token}"} if token else {})}
    transport = httpx2.AsyncHTTPTransport(local_address=source) if source else None
    statuses = []
    async with httpx2.AsyncClient(transport=transport, headers=headers) as http:
        for _ in range(count):
            statuses.append((await http.post(url, json=initialize_body())).status_code)
    return statuses


@pytest.mark.processes
async def test_a_token_past_its_session_cap_gets_429(tmp_path: Path) -> None:
    args = serve_args(tmp_path / "s.sqlite", "--tokens", str(_tokens(tmp_path)))
    env = process_env(NOOA_MAX_SESSIONS_PER_CLIENT="3")
    async with http_server(args, env=env) as proc:
        statuses = await _sessions(proc.url, 4, TOKEN_A)
    assert statuses == [200, 200, 200, 429]


@pytest.mark.processes
async def test_another_token_still_opens_a_session_while_one_token_is_at_its_cap(
    tmp_path: Path,
) -> None:
    args = serve_args(tmp_path / "s.sqlite", "--tokens", str(_tokens(tmp_path)))
    env = process_env(NOOA_MAX_SESSIONS_PER_CLIENT="3")
    async with http_server(args, env=env) as proc:
        capped = await _sessions(proc.url, 4, TOKEN_A)
        other = await _sessions(proc.url, 1, TOKEN_B)
    assert (capped[-1], other) == (429, [200])


@pytest.mark.processes
async def test_without_tokens_the_session_cap_is_per_client_address(tmp_path: Path) -> None:
    env = process_env(NOOA_MAX_SESSIONS_PER_CLIENT="3")
    async with http_server(serve_args(tmp_path / "s.sqlite"), env=env) as proc:
        capped = await _sessions(proc.url, 4, source="127.0.0.1")
        other = await _sessions(proc.url, 1, source="127.0.0.3")
    assert (capped, other) == ([200, 200, 200, 429], [200])


@pytest.mark.processes
async def test_the_default_session_cap_per_token_is_64(tmp_path: Path) -> None:
    args = serve_args(tmp_path / "s.sqlite", "--tokens", str(_tokens(tmp_path)))
    async with http_server(args) as proc:
        statuses = await _sessions(proc.url, 65, TOKEN_A)
    assert (statuses[:64].count(200), statuses[64]) == (64, 429)


# --------------------------------------------------------------------------- §11 reminders

CUE = "deploy release"
INTENTS = 300
_WORDS = """harbor lantern quartz meadow copper violin glacier orchard falcon ember saddle prism
tundra walnut beacon cobalt marble canyon thistle plume anvil basalt cedar dune fjord garnet hazel
iris juniper kelp lagoon mosaic nectar onyx pebble quill raven sorrel tapestry umber velvet willow
yarrow zephyr almond bramble cinder drift estuary fennel""".split()  # noqa: SIM905


async def _crowd(store: Path) -> None:
    rng = random.Random(11)
    async with Memory.open(store, owner="alice", embedder=HashEmbedder()) as mem:
        facts = [
            {"content": f"Deploy release step {i}: {' '.join(rng.sample(_WORDS, 4))} checked."}
            for i in range(12)
        ]
        assert all(r.status == "created" for r in await mem.author_many(facts))
        intents = [
            {
                "content": f"Reminder {i}: bring the {' '.join(rng.sample(_WORDS, 5))}.",
                "type": "intent",
                "trigger": {"cue": CUE},
            }
            for i in range(INTENTS)
        ]
        results = await mem.author_many(intents)
        assert [r.status for r in results] == ["created"] * INTENTS


@pytest.fixture(scope="module")
def crowded_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 memories about deploying a release, then 300 intents cued by 'deploy release'."""
    store = tmp_path_factory.mktemp("crowded") / "intents.sqlite"
    anyio.run(_crowd, store)
    return store


@pytest.fixture
def crowded(crowded_file: Path, tmp_path: Path) -> Settings:
    """A fresh copy of the crowded store (recalls fire intents, so no test shares one)."""
    store = tmp_path / "intents.sqlite"
    shutil.copyfile(crowded_file, store)
    return Settings(store=store, owner="alice")


async def _recall_deploy(settings: Settings, times: int = 1) -> list[Any]:
    async with Client(hash_server(settings), cache=None) as client:
        return [
            await client.call_tool("memory_recall", {"query": "deploy release checklist", "k": 10})
            for _ in range(times)
        ]


async def test_a_recall_amid_300_due_reminders_keeps_all_its_hits(crowded: Settings) -> None:
    (result,) = await _recall_deploy(crowded)
    assert len(result.structured_content["hits"]) == 10


async def test_a_recall_carries_at_most_5_reminders(crowded: Settings) -> None:
    (result,) = await _recall_deploy(crowded)
    assert len(result.structured_content["reminders"]) == 5


async def test_a_recall_says_how_many_more_reminders_are_due(crowded: Settings) -> None:
    (result,) = await _recall_deploy(crowded)
    reply = result.structured_content
    said = [result.content[0].text, reply.get("note", "")]
    counted = [v for v in reply.values() if isinstance(v, int) and not isinstance(v, bool)]
    assert any(re.search(r"(?<![\d.])295(?![\d.])", text) for text in said) or 295 in counted, said


async def test_a_recall_note_never_repeats_a_sentence(crowded: Settings) -> None:
    # The budget note was once appended once per dropped hit: it must say so once.
    (result,) = await _recall_deploy(crowded)
    note = result.structured_content["note"]
    sentences = [x.strip() for x in re.split(r"(?<=[.!?])\s+", note) if x.strip()]
    assert len(sentences) == len(set(sentences)), note


async def test_reminders_left_out_stay_armed_for_the_next_call(crowded: Settings) -> None:
    first, second = await _recall_deploy(crowded, times=2)
    shown = [{r["intent_id"] for r in x.structured_content["reminders"]} for x in (first, second)]
    assert (len(shown[0]), len(shown[1]), shown[0] & shown[1]) == (5, 5, set())


async def test_identical_reminder_contents_are_collapsed_into_one(tmp_path: Path) -> None:
    # Two intents whose contents differ only past the length a reminder shows: two firings,
    # one text. (Dedup off, so today's near-duplicate rule stores both.)
    settings = Settings(store=tmp_path / "same.sqlite", owner="alice", dedup_similarity=1.01)
    body = " ".join(["Check the release notes and the rollback plan carefully."] * 100)
    async with Client(hash_server(settings), cache=None) as client:
        for tail in ("First copy.", "Second copy."):
            await call(
                client,
                "memory_author",
                {"content": f"{body} {tail}", "type": "intent", "trigger": {"cue": CUE}},
            )
        reply = await call(client, "memory_recall", {"query": "deploy release today"})
    contents = [r["content"] for r in reply["reminders"]]
    assert len(contents) == 1, [c[-40:] for c in contents]


# --------------------------------------------------------------------------- §12 leases


async def _reflect_as(store: Path, owner: str) -> str:
    settings = Settings(store=store, owner=owner)
    async with Client(hash_server(settings), cache=None) as client:
        with anyio.fail_after(HANG_GUARD):
            report = await call(client, "memory_reflect", {"steps": ["link"]})
    return report["status"]


@pytest.mark.processes
async def test_a_lease_whose_holder_was_killed_is_taken_over_at_once(tmp_path: Path) -> None:
    store = tmp_path / "lease.sqlite"
    async with reflection_holder(store, "alice") as holder:
        await stop(holder)  # kill -9 in the middle of the pass
    assert await _reflect_as(store, "alice") == "completed"


@pytest.mark.processes
async def test_one_roles_running_pass_does_not_block_another_roles_pass(tmp_path: Path) -> None:
    store = tmp_path / "lease.sqlite"
    async with reflection_holder(store, "alice"):
        assert await _reflect_as(store, "bob") == "completed"


@pytest.mark.processes
async def test_a_live_holder_still_keeps_its_own_roles_second_pass_out(tmp_path: Path) -> None:
    # Guard (holds today): per-role leases must still exclude a second pass of the same role.
    store = tmp_path / "lease.sqlite"
    async with reflection_holder(store, "alice"):
        assert await _reflect_as(store, "alice@other") == "already-running"
