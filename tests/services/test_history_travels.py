"""Use history travels: export, import and migrate carry what ranking and forgetting read.

A memory's base-level recency, retention and prune ETA come from its uses in the store: when
the store learned it, how often and when it was used since. Before, an export carried none of
it: two memories made in March and recalled since stayed live in the source after a pass and
were both archived in the copy after its first one. Now `export` writes each memory's history
(bounded as the scorer bounds it) and `import` restores it; `migrate` copies every column.
The test: the same `explain` parts, views and prune decisions before and after a round trip,
SQLite → SQLite and SQLite → PostgreSQL, with the clock frozen at one instant for both sides.
A line without a history (an older export, plain notes) is learned at its import.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
import time_machine
from click.testing import CliRunner
from mcp import Client

from nooa_mcp import Memory, Settings, cli
from nooa_mcp.domain.schema import now as utc_now
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp.server import build_server

OWNER = "coder@laptop"
NOW = utc_now().replace(microsecond=0)
T0 = NOW - timedelta(days=200)
BACKUP = "The backup server lives in rack 12"
VPN = "Our VPN gateway is vpn.example.org"
PRINTER = "The printer on floor three jams on glossy paper"
QUERIES = ["where does the backup server live", "what is our VPN gateway", "printer jams"]


def settings_for(target: Path | str) -> Settings:
    return Settings(store=target, owner=OWNER)


async def tools(target: Path | str, *calls: tuple[str, dict]) -> list[dict]:
    out = []
    async with Client(build_server(settings_for(target), embedder=HashEmbedder())) as client:
        for tool, args in calls:
            result = await client.call_tool(tool, args)
            assert not result.is_error, result.content
            out.append(result.structured_content)
    return out


def build_source(target: Path | str) -> dict[str, str]:
    """Three memories learned 200 days ago; two of them used since, at spaced times."""
    with time_machine.travel(T0):
        made = anyio.run(
            tools,
            target,
            ("memory_author", {"content": BACKUP, "tags": ["ops"]}),
            ("memory_author", {"content": VPN, "importance": "LOW"}),
            ("memory_author", {"content": PRINTER}),
        )
    for day in (10, 30, 60, 100, 150, 190, 199):
        with time_machine.travel(T0 + timedelta(days=day)):
            asks = [("memory_recall", {"query": QUERIES[0]})]
            if day % 3 == 0:
                asks.append(("memory_recall", {"query": QUERIES[1]}))
            anyio.run(tools, target, *asks)
    return dict(zip(("backup", "vpn", "printer"), (m["id"] for m in made), strict=True))


def cli_in(target: Path | str, monkeypatch) -> callable:
    from nooa_mcp import engine

    monkeypatch.setenv("NOOA_OWNER", OWNER)
    monkeypatch.setattr(engine, "default_embedder", lambda cache_dir=None: HashEmbedder())
    runner = CliRunner()

    def invoke(*args: str) -> str:
        out = runner.invoke(cli.main, ["--store", str(target), *args], catch_exceptions=False)
        assert out.exit_code == 0, out.output
        return out.stdout

    return invoke


async def observed(target: Path | str, ids: dict[str, str]) -> dict:
    """What ranking and forgetting show of the store, now: every explain row's parts, and
    each memory's learned time, last use, strength, counters, retention and prune ETA."""
    async with Memory.open(settings=settings_for(target), embedder=HashEmbedder()) as mem:
        explained = {}
        for q in QUERIES:
            rows = (await mem.explain(q, k=5)).rows
            explained[q] = [
                (r.id, r.score, r.cos, r.rel, r.rec, r.imp, r.spread, r.flags.weak) for r in rows
            ]
        views = {}
        for name, memory_id in ids.items():
            v = await mem.get(memory_id)
            views[name] = (
                v.learned_at,
                v.last_accessed_at,
                v.strength,
                v.access_count,
                v.channels,
                v.retention,
                v.prune_eta,
                v.importance,
            )
        replay = [
            (a.ts, a.channel, a.query, a.rank)
            for a in (await mem.explain(memory_id=ids["backup"])).accesses
        ]
    return {"explain": explained, "views": views, "replay": replay}


async def pruned(target: Path | str, at: datetime) -> list[str]:
    async with Memory.open(settings=settings_for(target), embedder=HashEmbedder()) as mem:
        report = await mem.reflect(["prune"], now=at)
    return sorted(d.split()[0] for d in report.steps[0].details)


def test_export_and_import_carry_the_use_history(store_target, tmp_path, monkeypatch) -> None:
    source = tmp_path / "source.sqlite"
    ids = build_source(source)
    with time_machine.travel(NOW, tick=False):
        before = anyio.run(observed, source, ids)
        exported = cli_in(source, monkeypatch)("export")
        (tmp_path / "m.jsonl").write_text(exported)
        imported = json.loads(
            cli_in(store_target, monkeypatch)("import", "--json", str(tmp_path / "m.jsonl"))
        )
        assert imported == {"created": 3, "edges": 0}
        after = anyio.run(observed, store_target, ids)
    assert after["explain"] == before["explain"]
    assert after["views"] == before["views"]
    assert after["replay"] == before["replay"]
    # The history is what was compared: the backup server, used a day ago and often, has the
    # highest recency, the printer (never used) the lowest.
    rec = {row[0]: row[4] for q in QUERIES for row in before["explain"][q]}
    assert rec[ids["backup"]] > rec[ids["vpn"]] > rec[ids["printer"]]
    # Forgetting decides the same on both sides: only the printer, unused for 200 days.
    later = NOW + timedelta(days=1)
    assert anyio.run(pruned, source, later) == anyio.run(pruned, store_target, later)
    assert anyio.run(pruned, store_target, later) == []  # both already done
    with time_machine.travel(later, tick=False):
        counts = json.loads(cli_in(store_target, monkeypatch)("stats", "--json"))
    assert (counts["active"], counts["archived"]) == (2, 1)


def test_migrate_keeps_the_use_history(tmp_path, postgres, monkeypatch) -> None:
    source = tmp_path / "source.sqlite"
    ids = build_source(source)
    with time_machine.travel(NOW, tick=False):
        before = anyio.run(observed, source, ids)
        runner = CliRunner()
        out = runner.invoke(cli.main, ["migrate", str(source), postgres], catch_exceptions=False)
        assert out.exit_code == 0, out.output
        after = anyio.run(observed, postgres, ids)
    assert after == before


def test_an_export_without_history_is_learned_at_its_import(
    store_target, tmp_path, monkeypatch
) -> None:
    """An older export file (no history, no authored importance) still imports; each memory
    starts as learned then, whatever date it happened on."""
    old_line = {
        "id": "ab" * 16,
        "type": "info",
        "owner": "",
        "content": BACKUP,
        "importance": 5.0,
        "created_at": "2026-03-10T09:00:00Z",
        "archived": False,
        "edges": [],
        "references": [],
    }
    (tmp_path / "old.jsonl").write_text(json.dumps(old_line) + "\n" + json.dumps({"content": VPN}))
    run = cli_in(store_target, monkeypatch)
    with time_machine.travel(NOW, tick=False):
        assert json.loads(run("import", "--json", str(tmp_path / "old.jsonl")))["created"] == 2
        lines = [json.loads(x) for x in run("export").splitlines()]
    assert lines[0]["created_at"] == "2026-03-10T09:00:00Z"
    for line in lines:
        history = line["history"]
        assert history["learned_at"] == history["last_used_at"] == NOW.isoformat()
        assert (history["uses"], history["strength"]) == (1, 1)
        assert history["use_times"] == [NOW.isoformat()]
        assert [a["channel"] for a in history["accesses"]] == ["created"]


@pytest.mark.parametrize(
    "history, field",
    [
        ({"learned_at": "soon"}, "history.learned_at"),
        ({"uses": -1}, "history.uses"),
        ({"uses": True}, "history.uses"),
        ({"use_times": "2026-01-01"}, "history.use_times"),
        ({"use_times": ["2026-01-01T00:00:00Z"] * 1001}, "history.use_times"),
        ({"channels": {"stolen": 1}}, "history.channels"),
        ({"accesses": [{"ts": "2026-01-01T00:00:00Z", "channel": "peeked"}]}, "history.accesses"),
        (
            {"accesses": [{"ts": "2026-01-01T00:00:00Z", "channel": "recalled", "components": 3}]},
            "history.accesses.components",
        ),
    ],
)
def test_a_malformed_history_is_refused_by_line_and_field_and_nothing_is_written(
    tmp_path, monkeypatch, history, field
) -> None:
    good = {
        "learned_at": "2026-01-01T00:00:00Z",
        "last_used_at": "2026-01-02T00:00:00Z",
        "uses": 2,
        "use_times": ["2026-01-02T00:00:00Z", "2026-01-01T00:00:00Z"],
        "strength": 2,
    }
    lines = [{"content": VPN}, {"content": BACKUP, "history": {**good, **history}}]
    (tmp_path / "bad.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    monkeypatch.setattr("nooa_mcp.engine.default_embedder", lambda cache_dir=None: HashEmbedder())
    store = tmp_path / "s.sqlite"
    out = CliRunner().invoke(
        cli.main, ["--store", str(store), "import", str(tmp_path / "bad.jsonl")]
    )
    assert out.exit_code == 1
    assert f"line 2: {field}" in out.output and "Nothing was imported" in out.output
    assert "Traceback" not in out.output
    if store.exists():
        total = CliRunner().invoke(cli.main, ["--store", str(store), "stats", "--json"])
        assert json.loads(total.stdout)["total"] == 0


def test_a_history_from_the_future_counts_as_now(tmp_path) -> None:
    """A hand-made line cannot postpone forgetting: times after the import count as then."""
    future = (NOW + timedelta(days=3000)).isoformat()
    line = {
        "content": BACKUP,
        "history": {
            "learned_at": future,
            "last_used_at": future,
            "uses": 3,
            "use_times": [future, future, future],
            "strength": 1,
        },
    }

    async def go() -> tuple[datetime, datetime | None]:
        async with Memory.open(
            settings=settings_for(tmp_path / "f.sqlite"), embedder=HashEmbedder()
        ) as mem:
            result = await mem.import_records([(1, line)])
            view = await mem.get(result.ids[0])
            return view.last_accessed_at, view.learned_at

    with time_machine.travel(NOW, tick=False):
        last, learned = anyio.run(go)
    assert last == learned == NOW.astimezone(UTC)


def test_restore_history_keeps_the_count_the_learned_time_and_clamps_the_ring() -> None:
    from nooa_mcp.domain.accesses import History, restore_history
    from nooa_mcp.domain.schema import AccessRecord, Channel, Memory as Record

    times = tuple((T0 + timedelta(days=d)).timestamp() for d in range(20, 0, -1))
    future = NOW + timedelta(days=9)
    history = History(
        learned_at=T0,
        last_used_at=T0 + timedelta(days=20),
        uses=40,
        use_times=times,
        strength=7,
        access_count=30,
        reinforcements=2,
        channels={"created": 1, "recalled": 39},
        accesses=(
            AccessRecord(ts=future, channel=Channel.recalled),
            AccessRecord(ts=T0, channel=Channel.created),
        ),
    )
    m = Record(content="x", owner=OWNER, created_at=T0 - timedelta(days=900))
    stream = restore_history(m, history, now=NOW, exact_k=16, ring_size=64)
    assert (m.actr_count, len(m.actr_times), m.actr_times[0]) == (40, 16, times[0])
    assert m.first_access_at == m.learned_at == T0 != m.created_at
    assert (m.strength, m.access_count, m.reinforcement_count) == (7, 30, 2)
    assert [(a.ts, a.reader_owner) for a in stream] == [(T0, OWNER), (NOW, OWNER)]
    assert m.access_log == stream[::-1]
    # A hand-made line that claims fewer uses than the times it gives counts the times.
    short = Record(content="z", owner=OWNER)
    restore_history(short, History(T0, T0, 2, times[:5], 1, 0, 0), now=NOW)
    assert short.actr_count == 5
    bare = Record(content="y", owner=OWNER)
    none_used = History(T0, T0, 0, (), 1, 0, 0)
    assert len(restore_history(bare, none_used, now=NOW)) == 0
    assert (bare.actr_count, bare.actr_times) == (1, [T0.timestamp()])


def test_an_archived_line_comes_back_archived_with_its_tombstones(store_target, tmp_path) -> None:
    """Without tombstones an archived line is forgotten (no reason says reflection did it);
    a lifted tombstone stays lifted and the standing one decides faded or forgotten."""
    lines = [
        {"content": BACKUP, "archived": True},
        {
            "content": VPN,
            "archived": True,
            "tombstones": [
                {
                    "reason": "forgotten",
                    "ts": "2026-01-01T00:00:00Z",
                    "lifted_at": "2026-02-01T00:00:00Z",
                },
                {"reason": "pruned: retention 0.0100 < 0.02", "ts": "2026-03-01T00:00:00Z"},
            ],
        },
    ]

    async def go() -> list[tuple]:
        async with Memory.open(settings=settings_for(store_target), embedder=HashEmbedder()) as mem:
            result = await mem.import_records(list(enumerate(lines, 1)))
            out = []
            for memory_id in result.ids:
                view = await mem.get(memory_id)
                stones = await mem.engine.store.all_tombstones([memory_id])
                out.append(
                    (
                        view.archived,
                        view.flags.faded,
                        [(s.reason, s.ts, s.lifted_at) for s in stones[memory_id]],
                    )
                )
            return out

    plain, stoned = anyio.run(go)

    async def exported() -> tuple[int, int]:
        async with Memory.open(settings=settings_for(store_target), embedder=HashEmbedder()) as mem:
            live = [r async for r in mem.export_records()]
            every = [r async for r in mem.export_records(include_archived=True)]
        return len(live), len(every)

    # A plain export carries the faded memory (recall still reaches it) and leaves the
    # forgotten one out; --include-archived carries both.
    assert anyio.run(exported) == (1, 2)
    assert plain[:2] == (True, False) and [s[0] for s in plain[2]] == ["archived before export"]
    assert stoned[:2] == (True, True)
    assert stoned[2] == [
        ("forgotten", datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 2, 1, tzinfo=UTC)),
        ("pruned: retention 0.0100 < 0.02", datetime(2026, 3, 1, tzinfo=UTC), None),
    ]


async def _recalled(target: Path, times: int) -> str:
    async with Memory.open(settings=settings_for(target), embedder=HashEmbedder()) as mem:
        memory_id = (await mem.author(BACKUP)).id
        for n in range(times):
            await mem.recall(f"backup server rack {n}")
        return memory_id


async def _stream(target: Path | str, memory_id: str) -> list[tuple[str, str | None]]:
    async with Memory.open(settings=settings_for(target), embedder=HashEmbedder()) as mem:
        log = await mem.access_log(memory_id, limit=500)
        return [(a.channel.value, a.query) for _, a in log][::-1]


def test_every_access_travels_beyond_the_ring_and_the_line(
    store_target, tmp_path, monkeypatch
) -> None:
    """Explain replays a memory's whole history from the stream; an export used to write only
    the ring (64), so a copy replayed the newest 64. Every access goes now: the newest on the
    memory's line, the rest on `accesses_of` lines after it (the per-line limit shrunk to 7
    here, so 90 accesses take a line and 12 more), and the ring is the newest 64 again."""
    from nooa_mcp.domain import imports
    from nooa_mcp.services import transfer

    monkeypatch.setattr(imports, "MAX_HISTORY_TIMES", 7)
    monkeypatch.setattr(transfer, "MAX_HISTORY_TIMES", 7)
    source = tmp_path / "source.sqlite"
    memory_id = anyio.run(_recalled, source, 89)
    before = anyio.run(_stream, source, memory_id)
    assert len(before) == 90 and before[0] == ("created", None)
    dump = cli_in(source, monkeypatch)("export")
    lines = [json.loads(x) for x in dump.splitlines()]
    assert len(lines[0]["history"]["accesses"]) == 7
    assert [x["accesses_of"] for x in lines[1:]] == [memory_id] * 12
    (tmp_path / "dump.jsonl").write_text(dump)
    cli_in(store_target, monkeypatch)("import", str(tmp_path / "dump.jsonl"))
    assert anyio.run(_stream, store_target, memory_id) == before
    again = cli_in(store_target, monkeypatch)("export")
    assert [json.loads(x) for x in again.splitlines()] == lines


def test_the_cli_checks_each_line_of_an_import_once(tmp_path, monkeypatch) -> None:
    """The command checks the whole file before it opens the store, and the import takes
    that check as it is (each line was validated twice, a second pass over a large file)."""
    from nooa_mcp.services import transfer

    checked: list[int] = []
    real = transfer._check

    def counted(item, line, owner):
        checked.append(line)
        return real(item, line, owner)

    monkeypatch.setattr(transfer, "_check", counted)
    dump = tmp_path / "dump.jsonl"
    dump.write_text("".join(json.dumps({"content": f"{BACKUP} {n}"}) + "\n" for n in range(3)))
    out = cli_in(tmp_path / "m.sqlite", monkeypatch)("import", str(dump))
    assert "created: 3" in out
    assert checked == [1, 2, 3]


def test_an_accesses_line_for_no_memory_of_the_file_is_refused(tmp_path, monkeypatch) -> None:
    dump = tmp_path / "dump.jsonl"
    stray = {"accesses_of": "ab" * 16, "accesses": [{"ts": T0.isoformat(), "channel": "shown"}]}
    dump.write_text(json.dumps({"content": BACKUP}) + "\n" + json.dumps(stray) + "\n")
    target = tmp_path / "m.sqlite"
    monkeypatch.setenv("NOOA_OWNER", OWNER)
    out = CliRunner().invoke(cli.main, ["--store", str(target), "import", str(dump)])
    assert out.exit_code == 1
    assert f"Error: line 2: accesses_of: {'ab' * 16} names no line" in out.stderr
    assert not target.exists()


async def _shared_read_by_bob(target: Path) -> str:
    async with Memory.open(settings=Settings(store=target, owner=""), embedder=HashEmbedder()) as m:
        shared = (await m.author(BACKUP)).id
    bob = Settings(store=target, owner="bob")
    async with Memory.open(settings=bob, embedder=HashEmbedder()) as m:
        hits = (await m.recall("bob private question about the backup server rack")).hits
        assert shared in [h.id for h in hits]
    return shared


async def _exported(target: Path, owner: str) -> list[dict]:
    async with Memory.open(
        settings=Settings(store=target, owner=owner), embedder=HashEmbedder()
    ) as m:
        return [record async for record in m.export_records()]


def test_an_export_leaves_out_what_another_role_asked_of_a_shared_memory(tmp_path) -> None:
    """One role's queries are not another's to read (a shared memory's view hides them); an
    export wrote them with the ring. The access stays (when and how), without its query."""
    target = tmp_path / "m.sqlite"
    shared = anyio.run(_shared_read_by_bob, target)
    (line,) = [r for r in anyio.run(_exported, target, "alice") if r["id"] == shared]
    channels = [a["channel"] for a in line["history"]["accesses"]]
    assert channels.count("recalled") + channels.count("searched") == 1
    assert "bob private" not in json.dumps(line)
    (own,) = [r for r in anyio.run(_exported, target, "bob") if r["id"] == shared]
    assert "bob private question" in json.dumps(own)


async def _import_as(target: Path, owner: str, records: list[dict]) -> dict[str, int]:
    async with Memory.open(
        settings=Settings(store=target, owner=owner), embedder=HashEmbedder()
    ) as m:
        return (await m.import_records(list(enumerate(records, 1)))).counts


def test_an_import_counts_the_lines_another_owner_held(tmp_path) -> None:
    """A shared memory exported by alice comes back as the importer's own (a file's owner is
    not configuration); the report says how many lines that happened to."""
    source = tmp_path / "m.sqlite"
    anyio.run(_shared_read_by_bob, source)
    records = anyio.run(_exported, source, "alice")
    assert [r["owner"] for r in records] == [""]
    counts = anyio.run(_import_as, tmp_path / "copy.sqlite", "carol", records)
    assert (counts["created"], counts["from_other_owners"]) == (1, 1)
    again = anyio.run(_import_as, tmp_path / "shared.sqlite", "", records)
    assert again["created"] == 1 and "from_other_owners" not in again
