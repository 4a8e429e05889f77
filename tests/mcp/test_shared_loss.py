"""Nothing is lost silently, and a broken store gets one clear sentence.

A write is acknowledged only when it is stored: a store file deleted or replaced under a
running server refuses writes. Export and import carry archived state and tombstones, and an
import validates the whole file first. A full disk, a read-only store, a file that is not a
nooa-mcp store and a directory get one sentence naming the file, on the CLI and in the tool
result. A reference's root is part of its identity.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from machine import machine_lacks
from mcp import Client
from shared_support import (
    HANG_GUARD,
    acli,
    build_server,
    call,
    cli,
    error_lines,
    exited_cleanly,
    fill,
    hash_server,
    mount_read_only,
    mount_tmpfs,
    nooa_argv,
    process_env,
    reply_text,
    run_to_exit,
    stdio_params,
    umount,
)

from nooa_mcp import Memory, Settings
from nooa_mcp.embeddings import HashEmbedder

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def seed(store: Path, *contents: str, owner: str = "alice") -> list[str]:
    """Author `contents` into `store` and close it (the WAL is checkpointed); their ids."""
    async with Memory.open(store, owner=owner, embedder=HashEmbedder()) as mem:
        return [(await mem.author(text)).id for text in contents]


# --------------------------------------------------------------------------- §13 file swapped


async def test_a_write_after_the_store_file_was_deleted_is_refused_naming_the_file(
    tmp_path: Path,
) -> None:
    settings = Settings(store=tmp_path / "live.sqlite", owner="alice")
    async with Client(hash_server(settings), cache=None) as client:
        await call(client, "memory_author", {"content": "Written before the file went away."})
        settings.store.unlink()
        result = await client.call_tool("memory_author", {"content": "Written after it went."})
    assert result.is_error
    assert "live.sqlite" in result.content[0].text
    assert "deleted or replaced" in result.content[0].text


async def test_a_write_after_a_backup_was_restored_over_the_store_is_refused_naming_the_file(
    tmp_path: Path,
) -> None:
    settings = Settings(store=tmp_path / "live.sqlite", owner="alice")
    backup = tmp_path / "backup.sqlite"
    async with Client(hash_server(settings), cache=None) as client:
        await call(client, "memory_author", {"content": "In the backup."})
        with (
            closing(sqlite3.connect(settings.store)) as src,
            closing(sqlite3.connect(backup)) as dst,
        ):
            src.backup(dst)
        await call(client, "memory_author", {"content": "Only in the live file."})
        shutil.copyfile(backup, tmp_path / "restored.sqlite")
        (tmp_path / "restored.sqlite").replace(settings.store)
        result = await client.call_tool("memory_author", {"content": "After the restore."})
    assert result.is_error
    assert "live.sqlite" in result.content[0].text
    assert "deleted or replaced" in result.content[0].text


# --------------------------------------------------------------------------- §14 export / import

KEEP = "The staging database restarts at midnight."
GONE = "The old deploy key lives in the blue binder."


@pytest.fixture
async def exported(tmp_path: Path) -> tuple[list[dict], str]:
    """Alice's store with one live and one forgotten memory, exported with the archive."""
    store = tmp_path / "a.sqlite"
    settings = Settings(store=store, owner="alice")
    async with Client(hash_server(settings), cache=None) as client:
        await call(client, "memory_author", {"content": KEEP})
        gone = (await call(client, "memory_author", {"content": GONE}))["id"]
        await call(client, "memory_update", {"memory_id": gone, "forget": True})
    result = await acli(["--store", str(store), "--owner", "alice", "export", "--include-archived"])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()], gone


async def test_export_with_the_archive_marks_a_forgotten_memory_with_its_tombstone(
    exported: tuple[list[dict], str],
) -> None:
    lines, gone = exported
    (record,) = [line for line in lines if line["id"] == gone]
    assert record["archived"] is True
    assert isinstance(record.get("tombstones"), list) and len(record["tombstones"]) == 1


async def _import(tmp_path: Path, lines: list[dict], store: Path) -> None:
    dump = tmp_path / "dump.jsonl"
    dump.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = await acli(["--store", str(store), "--owner", "alice", "import", str(dump)])
    assert result.exit_code == 0, result.output


async def test_importing_an_export_keeps_a_forgotten_memory_archived(
    tmp_path: Path, exported: tuple[list[dict], str]
) -> None:
    store = tmp_path / "b.sqlite"
    await _import(tmp_path, exported[0], store)
    result = await acli(["--store", str(store), "--owner", "alice", "stats", "--json"])
    stats = json.loads(result.stdout)
    assert (stats["active"], stats["archived"]) == (1, 1)


async def test_reauthoring_forgotten_content_after_an_import_is_blocked_by_its_tombstone(
    tmp_path: Path, exported: tuple[list[dict], str]
) -> None:
    store = tmp_path / "b.sqlite"
    await _import(tmp_path, exported[0], store)
    result = await acli(["--store", str(store), "--owner", "alice", "author", GONE, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "blocked-by-tombstone"


def _dump_with_a_bad_line_300(tmp_path: Path) -> Path:
    dump = tmp_path / "dump.jsonl"
    good = [{"content": f"Ledger line {i}: invoice {1000 + i} was paid."} for i in range(299)]
    bad = {"content": "Ledger line 299: invoice 1299 was paid.", "type": "frobnicate"}
    dump.write_text("".join(json.dumps(item) + "\n" for item in [*good, bad]))
    return dump


def test_an_import_with_a_bad_line_names_that_line(tmp_path: Path) -> None:
    store = str(tmp_path / "b.sqlite")
    dump = _dump_with_a_bad_line_300(tmp_path)
    result = cli(["--store", store, "--owner", "alice", "import", str(dump)])
    assert result.exit_code == 1
    assert exited_cleanly(result), repr(result.exception)
    assert "line 300" in result.stderr


def test_an_import_with_a_bad_line_writes_nothing(tmp_path: Path) -> None:
    store = str(tmp_path / "b.sqlite")
    dump = _dump_with_a_bad_line_300(tmp_path)
    refused = cli(["--store", store, "--owner", "alice", "import", str(dump)])
    assert refused.exit_code == 1 and "line 300" in refused.stderr
    # Refused before the store is opened: there is no store, rather than an empty one.
    stats = cli(["--store", store, "--owner", "alice", "stats", "--json"])
    assert stats.exit_code == 1 and stats.stderr.startswith(f"Error: No store at {store}")


# --------------------------------------------------------------------------- §15 broken stores


def _not_sqlite(tmp_path: Path) -> Path:
    path = tmp_path / "notes.sqlite"
    path.write_text("These are my notes, not a database.\n")
    return path


def _truncated(tmp_path: Path) -> Path:
    path = tmp_path / "cut.sqlite"
    anyio.run(seed, path, *[f"Fact {i} about harbour cranes and ferries. " * 5 for i in range(50)])
    size = path.stat().st_size
    with path.open("r+b") as fh:
        fh.truncate(size // 2)
    return path


def _directory(tmp_path: Path) -> Path:
    path = tmp_path / "folder.sqlite"
    path.mkdir()
    return path


BROKEN = {"not SQLite": _not_sqlite, "truncated": _truncated, "a directory": _directory}


@pytest.mark.processes
@pytest.mark.parametrize("make", list(BROKEN.values()), ids=list(BROKEN))
async def test_the_cli_names_a_broken_store_file_in_one_sentence(tmp_path: Path, make) -> None:
    # A real process: all it prints is on its stderr (a worker thread's late traceback too).
    path = await anyio.to_thread.run_sync(make, tmp_path)
    argv = nooa_argv("--store", str(path), "--owner", "alice", "recall", "harbour")
    done = await run_to_exit(argv, process_env(), 60)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1, done.stderr
    assert len(lines) == 1 and path.name in lines[0], done.stderr


@pytest.mark.parametrize("make", list(BROKEN.values()), ids=list(BROKEN))
async def test_a_tool_result_names_a_broken_store_file(tmp_path: Path, make) -> None:
    path = await anyio.to_thread.run_sync(make, tmp_path)  # `_truncated` runs a loop
    async with Client(hash_server(Settings(store=path, owner="alice")), cache=None) as client:
        result = await client.call_tool("memory_recall", {"query": "harbour"})
    assert result.is_error
    assert path.name in result.content[0].text


def _foreign_app_file(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "crm.sqlite"
    with closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
        db.execute("INSERT INTO customers (name) VALUES ('Ada')")
        db.commit()
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_cli_refuses_another_applications_sqlite_file_naming_it(tmp_path: Path) -> None:
    path, _ = _foreign_app_file(tmp_path)
    result = cli(["--store", str(path), "--owner", "alice", "stats"])
    assert result.exit_code == 1
    assert exited_cleanly(result), repr(result.exception)
    assert len(error_lines(result)) == 1, result.stderr
    assert "crm.sqlite" in result.stderr


def test_another_applications_sqlite_file_is_left_byte_for_byte_unchanged(tmp_path: Path) -> None:
    path, digest = _foreign_app_file(tmp_path)
    cli(["--store", str(path), "--owner", "alice", "stats"])
    cli(["--store", str(path), "--owner", "alice", "author", "A fact for the wrong file."])
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["crm.sqlite"]


@pytest.fixture
def read_only_store(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A store with one memory, seen through a read-only bind mount (root cannot write it).

    Written by the CLI (the real model), so reading it needs no re-embedding.
    """
    source = tmp_path / "rw"
    source.mkdir()
    authored = cli(
        ["--store", str(source / "ro.sqlite"), "--owner", "alice", "author", RO_FACT, "--json"]
    )
    assert authored.exit_code == 0, authored.output
    target = tmp_path / "ro"
    why = mount_read_only(source, target)
    if why is not None:
        machine_lacks(f"a read-only bind mount is not possible here: {why}")
    try:
        yield target / "ro.sqlite", json.loads(authored.stdout)["id"]
    finally:
        umount(target)


RO_FACT = "The harbour crane is serviced on Mondays."


def test_a_read_only_store_still_serves_recall_on_the_cli(
    read_only_store: tuple[Path, str],
) -> None:
    path, fact = read_only_store
    result = cli(["--store", str(path), "--owner", "alice", "recall", "harbour crane", "--json"])
    assert result.exit_code == 0, result.output
    reply = json.loads(result.stdout)
    assert [h["id"] for h in reply["hits"]] == [fact]
    assert "read-only" in reply["note"]


@pytest.mark.real_model
async def test_a_read_only_store_still_serves_recall_over_mcp(
    read_only_store: tuple[Path, str],
) -> None:
    path, fact = read_only_store
    # The real model, as the store was written with it.
    server = build_server(Settings(store=path, owner="alice"))
    async with Client(server, cache=None) as client:
        reply = await call(client, "memory_recall", {"query": "harbour crane"})
    assert [h["id"] for h in reply["hits"]] == [fact]
    assert "read-only" in reply["note"]


def test_a_write_to_a_read_only_store_is_refused_in_one_sentence_naming_the_file(
    read_only_store: tuple[Path, str],
) -> None:
    path, _ = read_only_store
    result = cli(["--store", str(path), "--owner", "alice", "author", "A new fact."])
    assert result.exit_code == 1
    assert exited_cleanly(result), repr(result.exception)
    assert len(error_lines(result)) == 1, result.stderr
    assert "ro.sqlite" in result.stderr


def test_a_read_only_store_of_the_previous_schema_is_refused_naming_the_upgrade(
    tmp_path: Path,
) -> None:
    """A file of the previous schema is upgraded when opened (its access counts are taken
    from its stream); read-only, it cannot be, and the sentence says so and what to do."""
    source = tmp_path / "rw"
    source.mkdir()
    authored = cli(["--store", str(source / "old.sqlite"), "--owner", "alice", "author", RO_FACT])
    assert authored.exit_code == 0, authored.output
    with closing(sqlite3.connect(source / "old.sqlite")) as conn, conn:
        for name in ("accesses_count", "accesses_uncount", "accesses_recount"):
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute("DROP TABLE access_counts")
        conn.execute("DROP INDEX memories_kpi")
        conn.execute("PRAGMA user_version = 2")
    target = tmp_path / "ro"
    why = mount_read_only(source, target)
    if why is not None:
        machine_lacks(f"a read-only bind mount is not possible here: {why}")
    try:
        result = cli(["--store", str(target / "old.sqlite"), "--owner", "alice", "stats"])
    finally:
        umount(target)
    assert result.exit_code == 1
    assert exited_cleanly(result), repr(result.exception)
    assert len(error_lines(result)) == 1, result.stderr
    assert "schema version 2" in result.stderr and "writable once" in result.stderr


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """An empty 1 MiB tmpfs (a disk that fills up on demand)."""
    disk = tmp_path / "disk"
    why = mount_tmpfs(disk, "1m")
    if why is not None:
        machine_lacks(f"a small tmpfs (a full disk) cannot be mounted here: {why}")
    try:
        yield disk
    finally:
        umount(disk)


@pytest.mark.processes
async def test_a_write_on_a_full_disk_is_refused_in_one_sentence_on_the_cli(
    small_disk: Path,
) -> None:
    store = small_disk / "full.sqlite"
    await seed(store, "The harbour crane is serviced on Mondays.")
    fill(small_disk)
    # A subprocess: SQLite on a full tmpfs must not take the test runner down with it.
    argv = nooa_argv("--store", str(store), "--owner", "alice", "author", "New fact.")
    done = await run_to_exit(argv, process_env(), 60)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1, done.stderr
    assert len(lines) == 1 and "full.sqlite" in lines[0], done.stderr


def distinct_words(count: int) -> str:
    """`count` words that share no index entries, so the text takes its full size on disk."""
    return " ".join(f"w{n:05d}x" for n in range(count))


def log_all_in_the_file(store: Path) -> None:
    """Copy the store's write-ahead log into its file from a connection of our own, and return
    once every frame is copied (the server's next commit then starts the log from its
    beginning, in space the log file already holds)."""
    with closing(sqlite3.connect(store, timeout=HANG_GUARD)) as conn:
        busy, logged, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert (busy, copied) == (0, logged) and logged > 0, (busy, logged, copied)


@pytest.mark.processes
async def test_a_write_after_the_disk_filled_up_is_a_tool_error_naming_the_file(
    small_disk: Path,
) -> None:
    """A commit that needs more room than the disk has is refused, whatever the checkpoint
    thread did meanwhile.

    SQLite appends a commit to the write-ahead log, and once a checkpoint has copied the log
    into the file it writes the next commit from the log's beginning again, in space the log
    file already holds. So a small write on a full disk can rightly be stored (see the next
    test): the one refused here needs more room than the log was given before the disk
    filled (it starts empty: `seed` closes the store and SQLite deletes the log).
    """
    store = small_disk / "full.sqlite"
    await seed(store, "Seeded while there was room.")
    big = distinct_words(12_000)  # 95,999 characters, under the 100,000 limit
    async with Client(stdio_params(Settings(store=store, owner="alice")), cache=None) as client:
        await call(client, "memory_author", {"content": "Written while there was room."})
        room = store.with_name("full.sqlite-wal").stat().st_size
        fill(small_disk)
        with anyio.fail_after(HANG_GUARD):
            result = await client.call_tool("memory_author", {"content": big})
    # The text alone takes more pages than the log had room for (SQLite stores it as it is).
    assert room < len(big), f"the log already held {room} bytes: the write may fit in it"
    assert result.is_error
    assert "full.sqlite" in result.content[0].text
    assert "nothing was written" in result.content[0].text
    for filler in small_disk.glob("filler*"):
        filler.unlink()
    async with Memory.open(store, owner="alice", embedder=HashEmbedder()) as mem:
        kept = [view.content for _, view in await mem.list_memories()]
    assert sorted(kept) == ["Seeded while there was room.", "Written while there was room."]


@pytest.mark.processes
async def test_a_write_acknowledged_on_a_full_disk_is_kept(small_disk: Path) -> None:
    """A write that fits in the space the write-ahead log already holds is stored on a full
    disk, and it is really there: after the server stopped and the disk has room again, the
    store (its log replayed) holds it."""
    store = small_disk / "full.sqlite"
    async with Client(stdio_params(Settings(store=store, owner="alice")), cache=None) as client:
        # Creating the store logged its whole schema: the log file has room for a small write.
        await call(client, "memory_author", {"content": "Written while there was room."})
        await anyio.to_thread.run_sync(log_all_in_the_file, store)
        fill(small_disk)
        with anyio.fail_after(HANG_GUARD):
            result = await client.call_tool(
                "memory_author", {"content": "Written after the disk filled up."}
            )
        assert not result.is_error, result.content[0].text
    assert (small_disk / "filler").stat().st_size > 0
    for filler in small_disk.glob("filler*"):
        filler.unlink()
    async with Memory.open(store, owner="alice", embedder=HashEmbedder()) as mem:
        kept = [view.content for _, view in await mem.list_memories()]
    assert sorted(kept) == ["Written after the disk filled up.", "Written while there was room."]


# --------------------------------------------------------------------------- §16 reference roots


async def test_a_reference_captured_under_another_root_is_dangling(tmp_path: Path) -> None:
    store = tmp_path / "shared.sqlite"
    roots = {}
    for name, text in (("a", "Project A checklist."), ("b", "Project B checklist.")):
        roots[name] = tmp_path / f"project-{name}"
        roots[name].mkdir()
        (roots[name] / "notes.md").write_text(text)
    writer = hash_server(Settings(store=store, owner="alice", reference_root=roots["a"]))
    reader = hash_server(Settings(store=store, owner="alice", reference_root=roots["b"]))
    async with Client(writer, cache=None) as client:
        await call(
            client,
            "memory_author",
            {"content": "The release checklist is in the notes.", "references": ["file:notes.md"]},
        )
    async with Client(reader, cache=None) as client:
        result = await client.call_tool("memory_recall", {"query": "release checklist notes"})
    (reference,) = result.structured_content["hits"][0]["references"]
    assert (reference["state"], reference["value"]) == ("DANGLING", "Project A checklist.")
    assert "Project B" not in reply_text(result)
    assert "another root" in reply_text(result)


@pytest.mark.real_model
def test_a_read_only_store_still_serves_the_session_start_block(tmp_path: Path) -> None:
    """The context resource and the session_start prompt log `injected` where they can; on a
    read-only store they still answer with what they show (as recall does), logging nothing."""
    import anyio

    source = tmp_path / "rw"
    source.mkdir()
    store = ["--store", str(source / "ro.sqlite"), "--owner", "alice"]
    authored = cli([*store, "author", RO_FACT, "--importance", "HIGH", "--json"])
    assert authored.exit_code == 0, authored.output
    fact = json.loads(authored.stdout)["id"]
    target = tmp_path / "ro"
    why = mount_read_only(source, target)
    if why is not None:
        machine_lacks(f"a read-only bind mount is not possible here: {why}")

    async def read() -> tuple[str, str]:
        settings = Settings(store=target / "ro.sqlite", owner="alice")
        async with Client(build_server(settings), cache=None) as client:
            block = (await client.read_resource("memory://context")).contents[0].text
            prompt = (await client.get_prompt("session_start")).messages[0].content.text
        return block, prompt

    try:
        block, prompt = anyio.run(read)
    finally:
        umount(target)
    assert f"[{fact[:8]} info HIGH] {RO_FACT}" in block
    assert f"[{fact[:8]} info HIGH] {RO_FACT}" in prompt
