"""Another role's reads travel as another reader's, never as the owner's (DESIGN.md §5).

`ops` reads `dev`'s memory through a read grant. In the source, explain shows those accesses
with a blank reader (another reader, redacted) and stats counts them as cross-owner reads.
Before, the export dropped every reader and the import set the owner as the reader of each
carried access: the copy's explain said dev ran the recalls, and cross_owner_reads was 0. Now
the export says only that another reader made an access (`other_reader`, no name) and the
import keeps it another reader's; an older export's accesses are the owner's, as before.
"""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from nooa_mcp import Memory, Settings
from nooa_mcp.domain.scope import OTHER_READER
from nooa_mcp.embeddings import HashEmbedder

pytestmark = pytest.mark.anyio

FACT = "The deploy key rotates every ninety days"


def _open(target, owner: str, **grants) -> Memory:
    return Memory.open(
        settings=Settings(store=target, owner=owner, **grants), embedder=HashEmbedder()
    )


async def _seen_by_dev(target, memory_id: str) -> tuple[list[tuple[str, str]], int]:
    async with _open(target, "dev") as dev:
        shown = await dev.explain(memory_id=memory_id)
        readers = [(a.channel.value, a.reader_owner) for a in shown.accesses]
        return readers, (await dev.stats()).extra["cross_owner_reads"]


async def test_another_roles_reads_stay_another_readers(store_target, tmp_path) -> None:
    async with _open(store_target, "dev") as dev:
        memory_id = (await dev.author(FACT)).id
    async with _open(store_target, "ops", read=["dev"]) as ops:
        for _ in range(3):
            assert (await ops.recall("deploy key rotation", scope="*", k=1)).hits
    before = await _seen_by_dev(store_target, memory_id)
    assert before[1] == 3
    assert [r for c, r in before[0] if c == "recalled"] == ["", "", ""]

    async with _open(store_target, "dev") as dev:
        lines = [r async for r in dev.export_records(include_archived=True)]
    text = json.dumps(lines)
    assert '"other_reader": true' in text
    assert "ops" not in text

    copy = tmp_path / "copy.sqlite"
    async with _open(copy, "dev") as dev:
        await dev.import_records(list(enumerate(lines, 1)))
    assert await _seen_by_dev(copy, memory_id) == before
    async with _open(copy, "admin", read=["*"]) as everyone:
        log = await everyone.access_log(memory_id, scope="*")
        assert [a.reader_owner for _, a in log if a.channel.value == "recalled"] == [
            OTHER_READER
        ] * 3


async def test_an_export_by_a_role_reading_every_role_carries_no_other_roles_query(
    store_target,
) -> None:
    """What another role asked is that role's data: `dev`'s export with a grant to read every
    role (`--read '*'`) marks `ops`'s reads of dev's memory `other_reader` and keeps their
    time and channel (the base-level is unchanged), never their query nor how well it
    matched. Before, each carried ops's query ("deploy key rotation schedule"), score, rank
    and components (an export without the grant redacted them already)."""
    async with _open(store_target, "dev") as dev:
        memory_id = (await dev.author(FACT)).id
    async with _open(store_target, "ops", read=["dev"]) as ops:
        for _ in range(2):
            assert (await ops.recall("deploy key rotation schedule", scope="*", k=1)).hits
    async with _open(store_target, "dev", read=["*"]) as dev:
        lines = [r async for r in dev.export_records()]
        log = await dev.access_log(memory_id, scope="*")
    [line] = [item for item in lines if item.get("id") == memory_id]
    others = [a for a in line["history"]["accesses"] if a.get("other_reader")]
    recalled = sorted(a.ts for _, a in log if a.channel.value == "recalled")
    assert sorted(datetime.fromisoformat(a["ts"]) for a in others) == recalled
    assert [sorted(a) for a in others] == [["channel", "other_reader", "ts"]] * 2
    assert "rotation schedule" not in json.dumps(lines)


async def test_an_older_export_reads_its_accesses_as_the_owners(tmp_path) -> None:
    async with _open(tmp_path / "src.sqlite", "dev") as dev:
        memory_id = (await dev.author(FACT)).id
        await dev.recall("deploy key rotation", k=1)
        lines = [r async for r in dev.export_records()]
    for line in lines:
        for access in line.get("history", {}).get("accesses", []):
            access.pop("other_reader", None)
    async with _open(tmp_path / "copy.sqlite", "dev") as dev:
        await dev.import_records(list(enumerate(lines, 1)))
        log = await dev.access_log(memory_id)
    assert {a.reader_owner for _, a in log} == {"dev"}


async def _round_trip(source, copy, owner: str) -> None:
    async with _open(source, owner) as mem:
        lines = [r async for r in mem.export_records(include_archived=True)]
    async with _open(copy, owner) as mem:
        await mem.import_records(list(enumerate(lines, 1)))


async def test_a_read_by_another_instance_of_the_role_is_the_owners(tmp_path) -> None:
    """dev@b reading dev@a's memory is a read of its own role: stats does not count it as
    another role's, and dev@a sees its query. A copy (and a copy of the copy) says the same;
    marking it another reader's counted it in cross_owner_reads and dropped its query."""
    src = tmp_path / "src.sqlite"
    async with _open(src, "dev@a") as dev:
        memory_id = (await dev.author(FACT)).id
    async with _open(src, "dev@b", read=["dev"]) as other:
        assert (await other.recall("deploy key rotation", scope="*", k=1)).hits
    async with _open(src, "ops", read=["dev"]) as ops:
        assert (await ops.recall("deploy key rotation", scope="*", k=1)).hits

    async def seen(target) -> tuple[int, list[str | None]]:
        async with _open(target, "dev@a") as dev:
            log = await dev.access_log(memory_id)
            cross = (await dev.stats()).extra["cross_owner_reads"]
        return cross, sorted(a.query or "" for _, a in log if a.channel.value == "recalled")

    before = await seen(src)
    assert before == (1, ["", "deploy key rotation"])
    await _round_trip(src, tmp_path / "copy.sqlite", "dev@a")
    assert await seen(tmp_path / "copy.sqlite") == before
    await _round_trip(tmp_path / "copy.sqlite", tmp_path / "again.sqlite", "dev@a")
    assert await seen(tmp_path / "again.sqlite") == before


async def test_the_exporters_own_reads_of_a_shared_memory_stay_its_own(tmp_path) -> None:
    """A shared memory dev recalled comes into dev's copy as dev's, with dev's query: the
    export marked dev's own recall another reader's, and the copy hid it from dev."""
    src = tmp_path / "src.sqlite"
    async with _open(src, "") as shared:
        await shared.author(FACT)
    async with _open(src, "dev") as dev:
        assert (await dev.recall("deploy key rotation", k=1)).hits
    await _round_trip(src, tmp_path / "copy.sqlite", "dev")
    async with _open(tmp_path / "copy.sqlite", "dev") as dev:
        [(_, view)] = await dev.list_memories()
        log = await dev.access_log(view.id)
    assert [(a.reader_owner, a.query) for _, a in log if a.channel.value == "recalled"] == [
        ("dev", "deploy key rotation")
    ]


async def test_the_shared_owners_pass_logs_no_words_of_another_roles_pruned_memory(
    store_target,
) -> None:
    """The shared owner's pass runs over every role and logs as the shared owner: a prune of
    `dev`'s memory is named by its id and retention, not by its words, so the shared owner's
    log and export carry none of dev's text. Before, the first 60 characters went with it.
    dev's own pass still logs what it pruned in its own words."""
    from datetime import timedelta

    from nooa_mcp.domain.schema import now as utc_now

    later = utc_now() + timedelta(days=730)
    async with _open(store_target, "dev") as dev:
        pruned_by_shared = (await dev.author("Dev's staging password hint is", importance="LOW")).id
    async with _open(store_target, "") as shared:
        await shared.author("Deploys freeze on Fridays", importance="LOW")
        report = await shared.reflect(["prune"], now=later)
        [prune] = [s for s in report.steps if s.step == "prune"]
        assert prune.applied == 2, prune
        lines = [r async for r in shared.export_records()]
    log = json.dumps([item for item in lines if "maintenance" in item])
    assert pruned_by_shared[:8] in log and "staging password" not in log
    assert "Deploys freeze on Fridays" in log  # the shared owner's own memory, in its words
    async with _open(store_target, "dev") as dev:
        kept = (
            await dev.author("Dev's build cache lives on the scratch disk", importance="LOW")
        ).id
        [own] = [s for s in (await dev.reflect(["prune"], now=later)).steps if s.step == "prune"]
        assert any(d.startswith(kept[:8]) and "build cache" in d for d in own.details)


async def test_an_export_with_every_role_readable_carries_no_query_of_a_shared_memory_but_its_own(
    store_target,
) -> None:
    """A shared memory's reads are not marked as another reader's: `dev`'s export with
    `--read '*'` carried `ops`'s query and the user's own (a recall without an owner) on
    them, unredacted, as dev's own reads (an import makes them the importer's). It keeps
    their time and channel and dev's own query only."""
    async with _open(store_target, "") as user:
        memory_id = (await user.author(FACT)).id
        assert (await user.recall("private lawyer meeting about the deploy key", k=1)).hits
    async with _open(store_target, "ops") as ops:
        assert (await ops.recall("ops deploy key rotation schedule", k=1)).hits
    async with _open(store_target, "dev", read=["*"]) as dev:
        assert (await dev.recall("dev rotates the deploy key", k=1)).hits
        lines = [r async for r in dev.export_records()]
    [line] = [item for item in lines if item.get("id") == memory_id]
    accesses = line["history"]["accesses"]
    said = json.dumps(lines)
    assert "lawyer" not in said and "ops deploy" not in said, said
    assert [a.get("query") for a in accesses if a["channel"] == "recalled"] == [
        None,
        None,
        "dev rotates the deploy key",
    ]
