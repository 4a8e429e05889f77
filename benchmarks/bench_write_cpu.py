"""CPU per write on each backend: this process's and its PostgreSQL backends', four clients.

    python benchmarks/bench_write_cpu.py --store postgresql://postgres@127.0.0.1/test \\
        [--n 400] [--rounds 2] [--without text_trigger,gin,...]

On a shared machine a rate moves with the load; the CPU a write costs moves much less. Each
backend is opened alone (a fresh SQLite file, a fresh PostgreSQL schema), warmed up, then
`--clients` tasks author `--n` distinct memories at once (hash embedder: the store's work);
per author, the process's CPU (`time.process_time`, its threads included: SQLite's store work
runs there) and the CPU of the PostgreSQL backends of its pool and of the server's own
writers (`/proc/PID/stat`, so PostgreSQL must run on this machine). Medians of `--rounds`.
`--without` also measures PostgreSQL with one part of the schema disabled at a time (see
`PARTS`), to find where the backends' time goes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import anyio
import psycopg
from bench_recall import drop_pg_schema, pg_schema_target

from nooa_mcp.config import Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.memory import Memory

SCHEMA = "nooa_bench_write_cpu"
TICK = os.sysconf("SC_CLK_TCK")
#: What `--without` can disable, as the DDL that does it.
PARTS = {
    "text_trigger": ["ALTER TABLE memories DISABLE TRIGGER memories_text"],
    "gin": ["DROP INDEX memories_fts"],
    "notify_trigger": ["ALTER TABLE memories DISABLE TRIGGER memories_notify_insert"],
    "access_counts": ["ALTER TABLE accesses DISABLE TRIGGER accesses_count"],
    "memories_indexes": [
        f"DROP INDEX {i}"
        for i in ("memories_rev", "memories_type", "memories_role", "memories_status")
    ],
    "accesses_indexes": [
        f"DROP INDEX {i}" for i in ("accesses_memory", "accesses_ts", "accesses_xid")
    ],
}


def backends_cpu(url: str) -> float:
    """CPU seconds so far of nooa-mcp's PostgreSQL backends and the server's writers."""
    with psycopg.connect(url, autocommit=True) as conn:
        pids = [
            r[0]
            for r in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = 'nooa-mcp' "
                "OR backend_type IN ('walwriter', 'background writer', 'checkpointer')"
            )
        ]
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        total += int(fields[11]) + int(fields[12])
    return total / TICK


async def measure(mem: Memory, url: str, clients: int, n: int, tag: str) -> tuple[float, ...]:
    """Memories per second, and ms of this process's and the backends' CPU per author."""

    async def client(c: int) -> None:
        for i in range(c, n, clients):
            await mem.author(f"client {c} writes note {i} of {tag} on topic {i * 7919 % 1000}")

    started, cpu, backends = time.perf_counter(), time.process_time(), backends_cpu(url)
    async with anyio.create_task_group() as tg:
        for c in range(clients):
            tg.start_soon(client, c)
    wall = time.perf_counter() - started
    out = (
        n / wall,
        (time.process_time() - cpu) / n * 1000,
        (backends_cpu(url) - backends) / n * 1000,
    )
    await mem.engine.flush()
    return out


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True, help="postgresql://… URL of a local scratch database")
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--without", default="", help=f"comma-separated, of: {', '.join(PARTS)}")
    args = ap.parse_args()
    runs = [
        "sqlite",
        "postgresql",
        *[f"postgresql without {p}" for p in args.without.split(",") if p],
    ]
    settings = Settings(reflect_every_writes=0, reflect_idle_seconds=0)
    found: dict[str, list[tuple[float, ...]]] = {run: [] for run in runs}
    for r in range(args.rounds):
        for run in runs if r % 2 == 0 else runs[::-1]:
            drop_pg_schema(args.store, SCHEMA)
            with tempfile.TemporaryDirectory() as tmp:
                target = (
                    Path(tmp) / "w.sqlite"
                    if run == "sqlite"
                    else pg_schema_target(args.store, SCHEMA)
                )
                try:
                    async with Memory.open(
                        target, owner="bench", embedder=HashEmbedder(384), settings=settings
                    ) as mem:
                        if " without " in run:
                            with psycopg.connect(
                                args.store, autocommit=True, options=f"-csearch_path={SCHEMA}"
                            ) as conn:
                                for ddl in PARTS[run.split(" without ")[1]]:
                                    conn.execute(ddl)
                        for i in range(10):  # the first writes open what they need
                            await mem.author(f"warm-up note {i}")
                        found[run].append(
                            await measure(mem, args.store, args.clients, args.n, f"{run}{r}")
                        )
                finally:
                    drop_pg_schema(args.store, SCHEMA)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"{args.clients} clients x {args.n} authors, hash embedder, "
        f"medians of {args.rounds}, load {load}"
    )
    print(
        "| run | memories/s | this process's CPU ms / author "
        "| PostgreSQL backends' CPU ms / author |"
    )
    print("|---|---:|---:|---:|")
    for run, values in found.items():
        rate, mine, theirs = (statistics.median(v[i] for v in values) for i in range(3))
        print(f"| {run} | {rate:.1f} | {mine:.2f} | {theirs:.2f} |")


if __name__ == "__main__":
    anyio.run(main)
