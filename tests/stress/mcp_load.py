"""Real `nooa-mcp` server processes on one store, a write ledger, and the checks.

`ServerProcess` launches the CLI's console entry point (`nooa_mcp.cli:main`, what the installed
`nooa-mcp` script runs) with this checkout on PYTHONPATH, so the test exercises this tree even when
another tree owns the editable install. `Burst` drives many concurrent writes through MCP clients
and records every write the server acknowledged; `verify_store` then reads the file directly with
sqlite3 and checks each acknowledged write is there exactly once.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_types import Implementation

REPO = Path(__file__).resolve().parents[2]

# The console script's entry point, run from this checkout; the pid is written first so a test
# can kill -9 exactly this process (stdio_client starts the command without a shell).
_BOOT = (
    "import os, sys\n"
    "with open(sys.argv[1], 'w') as f: f.write(str(os.getpid()))\n"
    "del sys.argv[1]\n"
    "from nooa_mcp.cli import main\n"
    "main(prog_name='nooa-mcp')\n"
)

# `refines` and `contradicts` are left out: they mark their target superseded (DESIGN.md §5.7).
RELATIONS = ("related", "supports", "precedes", "part_of", "causes", "triggers")

_VOCABULARY = (
    "harbor lantern quartz meadow copper violin glacier orchard falcon ember saddle prism "
    "tundra walnut beacon cobalt marble canyon thistle plume anvil basalt cedar dune fjord "
    "garnet hazel iris juniper kelp lagoon mosaic nectar onyx pebble quill raven sorrel "
    "tapestry umber velvet willow yarrow zephyr almond bramble cinder drift estuary fennel "
    "gravel heron indigo jasmine kestrel lichen mangrove nimbus oyster pylon quarry reef "
    "spruce thicket upland vapor wharf yeast zinc acorn birch clover delta elm fern grotto "
    "hollow inlet jetty knoll ledge marsh nook oasis prairie ridge shoal tide vale wold "
    "accountant ballet chemistry dentist election furniture geometry hospital invoice "
    "journalism kitchen library mortgage newspaper orchestra passport quarantine railway "
    "satellite telescope umbrella vaccine warehouse xylophone yoghurt zoology bicycle "
    "calendar dinosaur engine festival guitar helmet insurance jacket keyboard ladder "
    "magnet notebook oxygen pyramid rocket scissors tractor uniform volcano wallet"
)
_WORDS = _VOCABULARY.split()


def sentence(rng: random.Random, marker: str, words: int = 9) -> str:
    """A distinct sentence: random words plus a marker token that appears nowhere else."""
    picked = rng.sample(_WORDS, words)
    return f"Note {marker}: {' '.join(picked)}."


@dataclass
class ServerProcess:
    """One `nooa-mcp` stdio server process and its MCP client."""

    name: str
    owner: str
    pidfile: Path
    errlog: Path
    client: Client | None = None

    @property
    def pid(self) -> int:
        return int(self.pidfile.read_text())

    def kill9(self) -> None:
        os.kill(self.pid, signal.SIGKILL)

    def stderr(self) -> str:
        return self.errlog.read_text(errors="replace") if self.errlog.exists() else ""


@asynccontextmanager
async def server_process(
    store: Path, owner: str, workdir: Path, name: str, extra_env: dict[str, str] | None = None
) -> AsyncIterator[ServerProcess]:
    """Start `nooa-mcp --store STORE --owner OWNER` over stdio and connect a client to it."""
    proc = ServerProcess(name, owner, workdir / f"{name}.pid", workdir / f"{name}.stderr")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", _BOOT, str(proc.pidfile), "--store", str(store), "--owner", owner],
        env={
            **os.environ,
            "PYTHONPATH": str(REPO),
            "HF_HUB_OFFLINE": "1",
            "NOOA_OWNER": owner,
            **(extra_env or {}),
        },
        cwd=str(workdir),
    )
    with proc.errlog.open("w") as err:
        info = Implementation(name=f"load-{name}", version="1")
        async with Client(stdio_client(params, errlog=err), client_info=info, cache=None) as c:
            proc.client = c
            yield proc


@asynccontextmanager
async def fleet(store: Path, count: int, workdir: Path) -> AsyncIterator[list[ServerProcess]]:
    """`count` server processes on one store, owners agent@p0…, started side by side."""
    procs: list[ServerProcess | None] = [None] * count
    ready = [anyio.Event() for _ in range(count)]
    stop = anyio.Event()

    async def serve(i: int) -> None:
        async with server_process(store, f"agent@p{i}", workdir, f"p{i}") as proc:
            procs[i] = proc
            ready[i].set()
            await stop.wait()

    async with anyio.create_task_group() as tg:
        for i in range(count):
            tg.start_soon(serve, i)
        for event in ready:
            await event.wait()
        try:
            yield [p for p in procs if p is not None]
        finally:
            stop.set()


# --------------------------------------------------------------------------- the ledger


@dataclass
class Ledger:
    """Every write attempted, and what the server acknowledged for each."""

    attempted: int = 0
    acknowledged: int = 0
    errors: list[str] = field(default_factory=list)
    lost_in_flight: int = 0
    # marker -> (id, status) for authors acknowledged as created (must be present once)
    created: dict[str, str] = field(default_factory=dict)
    # every acknowledged author: marker -> id (created, exists or reinforced)
    authored: dict[str, str] = field(default_factory=dict)
    # memory id -> content of the last acknowledged update
    contents: dict[str, str] = field(default_factory=dict)
    # (src, dst, relation) acknowledged
    links: set[tuple[str, str, str]] = field(default_factory=set)
    # todo id -> last acknowledged status
    todos: dict[str, str] = field(default_factory=dict)
    # author calls repeated as a retry: (first id, repeated id)
    retries: list[tuple[str, str]] = field(default_factory=list)
    # every acknowledged id, with the process that wrote it
    writer_of: dict[str, str] = field(default_factory=dict)
    reflect_passes: int = 0
    reflect_applied: int = 0
    # targets of calls lost in flight: applied or not, either is right
    uncertain: set[str] = field(default_factory=set)
    on_ack: Callable[[str], None] | None = None

    def ack(self, process: str) -> None:
        self.acknowledged += 1
        if self.on_ack is not None:
            self.on_ack(process)


class ConnectionLost(Exception):
    """The server process went away while a call was in flight."""


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """Call a tool; an error result raises AssertionError with its text."""
    try:
        result = await client.call_tool(tool, args)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
        raise ConnectionLost(str(exc)) from exc
    except Exception as exc:
        if "closed" in str(exc).lower() or "connection" in str(exc).lower():
            raise ConnectionLost(str(exc)) from exc
        raise
    if result.is_error:
        raise AssertionError(f"{tool} {args!r} failed: {result.content[0].text}")
    assert result.structured_content is not None
    return result.structured_content


@dataclass
class Worker:
    """One stream of writes through one connection; several run at once per connection."""

    proc: ServerProcess
    number: int
    ledger: Ledger
    pool: list[str]  # acknowledged ids from every process, for links
    rng: random.Random
    mine: list[str] = field(default_factory=list)
    todos: list[str] = field(default_factory=list)
    calls: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)
    serial: int = 0
    target: str | None = None  # the memory the call in flight changes

    def marker(self) -> str:
        self.serial += 1
        return f"zq{self.proc.name}x{self.number}x{self.serial}zq"

    async def one(self) -> None:
        """Do one write, chosen at random; record it only once it is acknowledged."""
        client = self.proc.client
        assert client is not None
        roll = self.rng.random()
        self.ledger.attempted += 1
        if roll < 0.40 or not self.mine:
            mark = self.marker()
            args: dict[str, Any] = {"content": sentence(self.rng, mark), "importance": "MEDIUM"}
            if self.pool and self.rng.random() < 0.3:
                target = self.rng.choice(self.pool)
                relation = self.rng.choice(RELATIONS)
                args["links"] = [{"target": target, "relation": relation}]
            reply = await call(client, "memory_author", args)
            self.ledger.ack(self.proc.name)
            self._authored(mark, reply, args)
        elif roll < 0.55:
            target = self.rng.choice(self.mine)
            content = sentence(self.rng, self.marker())
            self.target = target
            # A retry repeats a call at once; after an update its content is another memory's.
            self.calls = [c for c in self.calls if c[2] != target]
            await call(client, "memory_update", {"memory_id": target[:8], "content": content})
            self.ledger.ack(self.proc.name)
            self.ledger.contents[target] = content
        elif roll < 0.70:
            src = self.rng.choice(self.mine)
            dst = self.rng.choice(self.pool)
            relation = self.rng.choice(RELATIONS)
            if dst == src:
                self.ledger.attempted -= 1
                return
            await call(
                client,
                "memory_update",
                {"memory_id": src, "links": [{"target": dst, "relation": relation}]},
            )
            self.ledger.ack(self.proc.name)
            self.ledger.links.add((src, dst, relation))
        elif roll < 0.90:
            if not self.todos or self.rng.random() < 0.4:
                reply = await call(
                    client, "todo", {"action": "add", "content": sentence(self.rng, self.marker())}
                )
                self.ledger.ack(self.proc.name)
                self.todos.append(reply["id"])
                self.ledger.todos[reply["id"]] = "open"
                self.ledger.writer_of[reply["id"]] = self.proc.name
            else:
                target = self.rng.choice(self.todos)
                self.target = target
                action = self.rng.choice(("done", "drop", "reopen"))
                await call(client, "todo", {"action": action, "memory_id": target[:8]})
                self.ledger.ack(self.proc.name)
                self.ledger.todos[target] = {"done": "done", "drop": "dropped"}.get(action, "open")
        else:
            # A client retrying after a timeout: the very same author call again.
            if not self.calls:
                self.ledger.attempted -= 1
                return
            mark, args, first = self.rng.choice(self.calls)
            reply = await call(client, "memory_author", args)
            self.ledger.ack(self.proc.name)
            self.ledger.retries.append((first, reply["id"]))

    def _authored(self, mark: str, reply: dict[str, Any], args: dict[str, Any]) -> None:
        ident = reply["id"]
        self.ledger.authored[mark] = ident
        self.ledger.writer_of.setdefault(ident, self.proc.name)
        if reply["status"] == "created":
            self.ledger.created[mark] = ident
            self.ledger.contents[ident] = args["content"]
            self.mine.append(ident)
            self.pool.append(ident)
            self.calls.append((mark, args, ident))
        for link in args.get("links", []):
            self.ledger.links.add((ident, link["target"], link["relation"]))


async def run_workers(
    procs: list[ServerProcess],
    writes: int,
    workers_per_process: int,
    ledger: Ledger,
    seed: int,
    reflect_on: ServerProcess | None = None,
) -> None:
    """`writes` writes spread over every process, `workers_per_process` in flight on each.

    With `reflect_on`, reflection passes run on that process for as long as writes do.
    """
    pool: list[str] = []
    per_worker = max(1, writes // (len(procs) * workers_per_process))
    done = anyio.Event()

    async def drive(worker: Worker) -> None:
        for _ in range(per_worker):
            worker.target = None
            try:
                await worker.one()
            except ConnectionLost as exc:
                if worker.target is not None:
                    ledger.uncertain.add(worker.target)
                ledger.lost_in_flight += 1
                ledger.errors.append(f"{worker.proc.name}: connection lost ({exc})")
                return

    async def reflect_loop(proc: ServerProcess) -> None:
        assert proc.client is not None
        while not done.is_set():
            reply = await call(proc.client, "memory_reflect", {})
            ledger.reflect_passes += 1
            ledger.reflect_applied += reply.get("applied", 0)

    async with anyio.create_task_group() as outer:
        if reflect_on is not None:
            outer.start_soon(reflect_loop, reflect_on)
        async with anyio.create_task_group() as tg:
            for i, proc in enumerate(procs):
                for w in range(workers_per_process):
                    rng = random.Random(seed * 1000 + i * 100 + w)
                    tg.start_soon(drive, Worker(proc, w, ledger, pool, rng))
        done.set()


# --------------------------------------------------------------------------- checks


def connect(store: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(store, timeout=30)
    conn.row_factory = sqlite3.Row
    return conn


def verify_store(store: Path, ledger: Ledger) -> dict[str, int]:
    """Check every acknowledged write against the file itself; returns counts for the report.

    Raises AssertionError naming the first write that is missing, doubled or half-done.
    """
    conn = connect(store)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('integrity-check')")
        ids = {r["id"] for r in conn.execute("SELECT id FROM memories")}
        rows = {r["id"]: r for r in conn.execute("SELECT id, content, status FROM memories")}
        for mark, ident in ledger.created.items():
            found = conn.execute(
                "SELECT count(*) FROM memories WHERE instr(content, ?) > 0", (mark,)
            ).fetchone()[0]
            present_once = found == 1 or ident in ledger.contents  # updated away is fine
            assert ident in ids, f"acknowledged author {mark} ({ident}) is missing"
            assert present_once, f"author {mark} is present {found} times"
        for mark, ident in ledger.authored.items():
            assert ident in ids, f"acknowledged author {mark} → {ident} is missing"
            found = conn.execute(
                "SELECT count(*) FROM memories WHERE instr(content, ?) > 0", (mark,)
            ).fetchone()[0]
            assert found <= 1, f"{mark} is stored {found} times"
        for ident, content in ledger.contents.items():
            if ident in ledger.uncertain:
                continue
            assert rows[ident]["content"] == content, f"last update of {ident} is lost"
        for src, dst, relation in ledger.links:
            edge = conn.execute(
                "SELECT count(*) FROM edges WHERE src = ? AND dst = ? AND type = ?",
                (src, dst, relation),
            ).fetchone()[0]
            assert edge == 1, f"acknowledged link {src[:8]} -{relation}-> {dst[:8]} is missing"
        for ident, status in ledger.todos.items():
            if ident in ledger.uncertain:
                continue
            assert rows[ident]["status"] == status, f"todo {ident[:8]} is not {status}"
        for first, again in ledger.retries:
            assert first == again, "a retried author call made a second memory"
        # No half-writes: every memory has its creation in the access stream and a vector.
        orphans = conn.execute(
            "SELECT count(*) FROM memories m WHERE NOT EXISTS (SELECT 1 FROM accesses a "
            "WHERE a.memory_id = m.id AND a.channel = 'created')"
        ).fetchone()[0]
        assert orphans == 0, f"{orphans} memories without their 'created' access"
        unembedded = conn.execute(
            "SELECT count(*) FROM memories WHERE embedding IS NULL"
        ).fetchone()[0]
        assert unembedded == 0, f"{unembedded} memories without an embedding"
        dangling = conn.execute(
            "SELECT count(*) FROM edges WHERE src NOT IN (SELECT id FROM memories) "
            "OR dst NOT IN (SELECT id FROM memories)"
        ).fetchone()[0]
        assert dangling == 0, f"{dangling} edges point at no memory"
        return {
            "memories": len(ids),
            "edges": conn.execute("SELECT count(*) FROM edges").fetchone()[0],
            "accesses": conn.execute("SELECT count(*) FROM accesses").fetchone()[0],
        }
    finally:
        conn.close()


async def check_cross_visibility(procs: list[ServerProcess], ledger: Ledger, per_pair: int) -> int:
    """Through each process, find memories the other processes wrote by their exact text.

    The dense component (`cos`) of explain is read from the process's own vector index, so
    cos ≈ 1 proves that index holds the other process's vector, not only the keyword index.
    """
    by_writer: dict[str, list[str]] = {}
    for ident, writer in ledger.writer_of.items():
        if ident in ledger.contents and ident not in ledger.todos:
            by_writer.setdefault(writer, []).append(ident)
    checked = 0
    for proc in procs:
        assert proc.client is not None
        for other in procs:
            if other is proc:
                continue
            for ident in by_writer.get(other.name, [])[:per_pair]:
                query = ledger.contents[ident]
                explained = await call(
                    proc.client, "memory_explain", {"query": query, "memory_id": ident, "k": 5}
                )
                cos = explained["why_not"]["components"]["cos"]
                assert cos >= 0.99, (
                    f"{proc.name}'s vector index lacks {other.name}'s {ident[:8]}: cos {cos}"
                )
                recalled = await call(proc.client, "memory_recall", {"query": query, "k": 5})
                hits = [h["id"] for h in recalled["hits"]]
                assert ident in hits, f"{proc.name} cannot recall {other.name}'s {ident[:8]}"
                checked += 1
    return checked


def crashes_in(proc: ServerProcess) -> list[str]:
    """Tracebacks the server wrote to its stderr."""
    text = proc.stderr()
    return [part for part in text.split("Traceback")[1:]]
