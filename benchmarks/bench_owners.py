"""One HTTP server, many owners: its resident memory, open files and threads (issues 10 and 11).

    HF_HUB_OFFLINE=1 python benchmarks/bench_owners.py                      # both modes, 300 owners
    python benchmarks/bench_owners.py --mode names --owners 300 --memories 2000 --runs 3
    python benchmarks/bench_owners.py --store postgresql://postgres@127.0.0.1/test

A store of `--memories` memories (the synthetic agent workload, embedded with the real MiniLM;
7 in 10 shared, the rest 2 or so per owner) is copied fresh for every run, and one real
`nooa-mcp --store STORE serve --transport http` process serves it with its default model. Then
`--owners` distinct owners visit it one after another, each with its own MCP client session
(the SDK's `Client` over streamable HTTP): initialize, one `memory_recall` of a new question,
one `memory_author` of a new note, close. The owner comes from

- `tokens`: a tokens file of one bearer token per owner (`agent-000` … `agent-299`), or
- `names`: no tokens on loopback, the owner derived from each client's name (issue 10 item 9).

The server's VmRSS (and VmHWM), open file descriptors and threads are read from /proc before
the first client, after 1 owner, after 10, 100 and all owners; then all owners again with
their sessions held open at once (each makes a recall while open; without tokens spread
over 127.0.0.2… because each client address may hold 64 sessions), and after those close.
Issue 11's target: RSS with 300 owners under 1.2x the RSS with one owner.

With `--store postgresql://…` every run fills a fresh schema (nooa_bench_owners_<run>),
dropped after the run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

import anyio
import numpy as np
from bench_recall import drop_pg_schema, pg_schema_target, queries
from http_process import (
    ProcStats,
    call,
    http_server,
    load_average,
    mcp_client,
    median,
    stamp,
)

from nooa_mcp.config import Settings
from nooa_mcp.domain.accesses import apply_access, created_record
from nooa_mcp.domain.inputs import build_memory
from nooa_mcp.domain.requests import AuthorRequest, request_of
from nooa_mcp.embeddings import MiniLMEmbedder
from nooa_mcp.evaluation.workload import generate_memories
from nooa_mcp.memory import Memory

#: Points at which the server is measured: (label, owners visited so far).
CHECKPOINTS = (1, 10, 100)
#: Sessions one client address may hold without tokens (the server's default cap is 64).
PER_ADDRESS = 60


def owner_name(i: int) -> str:
    return f"agent-{i:03d}"


def client_name(i: int) -> str:
    """A client name whose owner slug is owner_name(i) ("Agent 007" -> "agent-007")."""
    return f"Agent {i:03d}"


def token_of(i: int) -> str:
    return f"bench-owner-token-{i:03d}-{(i * 2654435761) % 2**32:08x}"


class Filler:
    """The store's contents, embedded once with the real model and written into each run's
    store through `Store.insert` (as bench_recall.py does; the near-duplicate search per
    memory would only make the fill slower)."""

    def __init__(self, memories: int, owners: int) -> None:
        self.specs = list(generate_memories(memories, seed=11))
        self.owners = ["" if i % 10 < 7 else owner_name(i % owners) for i in range(len(self.specs))]
        self.model = MiniLMEmbedder()
        started = time.perf_counter()
        self.vectors = self.model.embed([s["content"] for s in self.specs])
        print(f"embedded {memories} memories in {time.perf_counter() - started:.1f} s", flush=True)

    async def fill(self, target: Path | str) -> None:
        settings = Settings(store=target, owner="bench-fill")
        async with Memory.open(
            target, owner="bench-fill", embedder=self.model, settings=settings
        ) as mem:
            await mem.engine.embed(["records which model embedded this store"])
            store = mem.engine.store
            async with store.transaction():
                for spec, owner, vector in zip(self.specs, self.owners, self.vectors, strict=True):
                    record = build_memory(request_of(AuthorRequest, spec), owner)
                    access = created_record(record, owner)
                    apply_access(record, access, exact_k=settings.recall.exact_accesses)
                    await store.insert(record, np.asarray(vector))
                    await store.append_accesses([(record.id, record.access_log[0])])


async def visit(url: str, mode: str, i: int, question: str, note: str) -> None:
    """One owner's session: initialize, a recall, an author, close."""
    token = token_of(i) if mode == "tokens" else None
    async with mcp_client(url, client_name(i), token=token) as client:
        await call(client, "memory_recall", {"query": question, "k": 5})
        await call(client, "memory_author", {"content": note})


async def hold_all(url: str, mode: str, owners: int, questions: list[str], measure) -> ProcStats:
    """Every owner with a session open at once (each recalls once); `measure()` while held."""
    opened = 0
    all_open = anyio.Event()
    release = anyio.Event()
    gate = anyio.Semaphore(16)

    async def hold(i: int) -> None:
        nonlocal opened
        token = token_of(i) if mode == "tokens" else None
        source = None if mode == "tokens" else f"127.0.0.{2 + i // PER_ADDRESS}"
        async with AsyncExitStack() as stack:
            async with gate:
                client = await stack.enter_async_context(
                    mcp_client(url, client_name(i), token=token, source=source)
                )
                await call(client, "memory_recall", {"query": questions[i], "k": 5})
            opened += 1
            if opened == owners:
                all_open.set()
            await release.wait()

    async with anyio.create_task_group() as tg:
        for i in range(owners):
            tg.start_soon(hold, i)
        await all_open.wait()
        await anyio.sleep(1)
        held = measure()
        release.set()
    return held


async def run_once(
    filler: Filler, mode: str, owners: int, run: int, template: Path | None, pg: str | None
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="nooa-owners-") as tmp:
        folder = Path(tmp)
        schema = f"nooa_bench_owners_{run}"
        if pg:
            drop_pg_schema(pg, schema)
            store: Path | str = pg_schema_target(pg, schema)
            await filler.fill(store)
        else:
            assert template is not None
            store = folder / "owners.sqlite"
            shutil.copyfile(template, store)
        serve: list[str] = []
        if mode == "tokens":
            tokens = folder / "tokens.json"
            tokens.write_text(json.dumps({token_of(i): owner_name(i) for i in range(owners)}))
            serve = ["--tokens", str(tokens)]
        questions = queries(owners, f"owners-{mode}-{run}")
        notes = [s["content"] for s in generate_memories(owners, seed=1000 + run, unique=True)]
        points: dict[str, ProcStats] = {}
        seconds: list[float] = []
        try:
            with http_server(store, *serve) as server:

                def measure(label: str) -> ProcStats:
                    stats = server.stats()
                    points[label] = stats
                    print(f"  [{mode} run {run}] {label:>22}: {stats.row()}", flush=True)
                    return stats

                measure("socket bound, no store")
                for i in range(owners):
                    started = time.perf_counter()
                    await visit(server.url, mode, i, questions[i], notes[i])
                    seconds.append(time.perf_counter() - started)
                    if i + 1 in CHECKPOINTS:
                        await anyio.sleep(0.5)
                        measure(f"{i + 1} owner{'s' if i else ''}")
                await anyio.sleep(0.5)
                measure(f"{owners} owners")
                await hold_all(
                    server.url, mode, owners, questions, lambda: measure(f"{owners} held open")
                )
                await anyio.sleep(1)
                measure(f"{owners} closed again")
        finally:
            if pg:
                drop_pg_schema(pg, schema)
    return {
        "mode": mode,
        "run": run,
        "points": {k: vars(v) for k, v in points.items()},
        "session_p50_ms": median(seconds[1:]) * 1000,
        "first_session_ms": seconds[0] * 1000,
        "load": load_average(),
    }


def table(results: list[dict[str, Any]], owners: int) -> None:
    labels = list(results[0]["points"])
    print(f"\n{results[0]['mode']}: median of {len(results)} run(s)\n")
    print("| server | RSS MiB | peak RSS MiB | fds | threads | RSS / 1 owner |")
    print("|---|---:|---:|---:|---:|---:|")
    base = median([r["points"]["1 owner"]["rss_mib"] for r in results])
    for label in labels:
        values = [r["points"][label] for r in results]
        rss = median([v["rss_mib"] for v in values])
        print(
            f"| {label} | {rss:.0f} | {median([v['hwm_mib'] for v in values]):.0f} | "
            f"{median([v['fds'] for v in values]):.0f} | "
            f"{median([v['threads'] for v in values]):.0f} | {rss / base:.2f} |"
        )
    print(
        f"\nsession (initialize + recall + author + close) p50 "
        f"{median([r['session_p50_ms'] for r in results]):.0f} ms; first session "
        f"{median([r['first_session_ms'] for r in results]):.0f} ms (model loading); "
        f"load average at the end of each run: {'; '.join(r['load'] for r in results)}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--owners", type=int, default=300)
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--mode", choices=["tokens", "names", "both"], default="both")
    parser.add_argument("--runs", type=int, default=1, help="fresh servers per mode")
    parser.add_argument("--store", default=None, help="a postgresql:// URL instead of SQLite")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    if args.mode != "tokens" and args.owners > PER_ADDRESS * 250:
        raise SystemExit("--owners: at most 15000 without tokens (source addresses run out).")
    print(f"{stamp()}; load average {load_average()}", flush=True)
    filler = Filler(args.memories, args.owners)
    modes = ["tokens", "names"] if args.mode == "both" else [args.mode]
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(prefix="nooa-owners-template-") as tmp:
        template = None
        if not args.store:
            template = Path(tmp) / "template.sqlite"
            await filler.fill(template)
        for run in range(args.runs):
            for mode in modes:  # interleaved, so a change in load hits both modes alike
                results[mode].append(
                    await run_once(filler, mode, args.owners, run, template, args.store)
                )
    print(
        f"\n{stamp()}; store: {'PostgreSQL' if args.store else 'SQLite'}, {args.memories} "
        f"memories, {args.owners} owners; load average {load_average()}"
    )
    for mode in modes:
        table(results[mode], args.owners)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    anyio.run(main)
