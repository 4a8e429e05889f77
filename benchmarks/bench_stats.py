"""`Memory.stats()` (the console's stats page, the `stats` tool) at 10k and 100k memories.

    HF_HUB_OFFLINE=1 python benchmarks/bench_stats.py [--sizes 10000,100000] [--runs 15]
    HF_HUB_OFFLINE=1 python benchmarks/bench_stats.py --store postgresql://postgres@127.0.0.1/test

Stats reads the whole scope: counts by type and owner, and the KPIs, whose cost grows with the
access stream (every recall appends to it). So the stores here carry a realistic stream, not
just the `created` row of each memory: `--reads` (default 5) accesses per memory on average,
skewed (a few memories are read often, most rarely or never: a Zipf-like draw), on the channels
recall, search, dereference and injection write, a tenth of them by a reader of another role.
Besides: 10% of the rows belong to another role and 5% are shared, 5% are archived with a
tombstone, one `related` edge per memory, `derived_from` edges from a fifth of the reflections,
todos open, done and dropped, and a few hundred maintenance-log entries.

Rows are written through `Store.insert` / `append_accesses` with `apply_access` applied to each
record, the way authoring and recall write them (the row's counters agree with the stream), in
a few large transactions instead of one per recall: filling 100k memories and 500k accesses
through `recall` would take hours and would not change what stats costs.

SQLite stores are kept under `--dir` (default: the system temp folder) and reused by later runs;
PostgreSQL stores are one schema per size (nooa_bench_stats_<size>; `--drop` removes them).

Prints p50 and p90 of `Memory.stats()` (scope "mine") and `Memory.stats(scope="*")`, warm,
and the p50 of the CPU time the process spent per call (steadier than wall time on a loaded
machine; PostgreSQL's own work is not in it).
`--golden FILE` writes every number stats reports to FILE, or, when FILE exists, checks that
this run reports exactly the same numbers (so a faster stats can be shown to say the same).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import anyio

from nooa_mcp.config import Settings
from nooa_mcp.domain.accesses import apply_access, created_record
from nooa_mcp.domain.inputs import build_memory
from nooa_mcp.domain.requests import AuthorRequest, request_of
from nooa_mcp.domain.schema import AccessRecord, Channel, EdgeType
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.evaluation.workload import generate_memories
from nooa_mcp.memory import Memory

OWNER = "bench@box"
OTHER = "writer@desk"
READER = "reviewer@desk"
#: How the stream's non-created accesses split over channels (recall logs most of them).
CHANNELS = [
    (Channel.recalled, 0.55),
    (Channel.searched, 0.10),
    (Channel.deref, 0.05),
    (Channel.injected, 0.20),
    (Channel.shown, 0.10),
]


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def pg_schema_target(url: str, schema: str) -> str:
    """`url` with `schema` as the store's schema (libpq's options parameter)."""
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


async def fill(target: Path | str, n: int, reads: float) -> tuple[float, int]:
    """A store of `n` memories and about `n * reads` accesses besides `created`.

    Returns (seconds, accesses written).
    """
    rng = random.Random(n)
    embedder = HashEmbedder()
    settings = Settings(store=target, owner=OWNER, reflect_every_writes=0)
    started = time.perf_counter()
    now = datetime.now(UTC)
    # Zipf-like popularity: the memory at popularity rank r is read with weight 1 / r^0.9.
    order = list(range(n))
    rng.shuffle(order)
    weights = [0.0] * n
    for r, i in enumerate(order, start=1):
        weights[i] = 1.0 / r**0.9
    per_memory: list[int] = [0] * n
    cumulative = list(itertools.accumulate(weights))
    for i in rng.choices(range(n), cum_weights=cumulative, k=int(n * reads)):
        per_memory[i] += 1
    channels, channel_weights = zip(*CHANNELS, strict=True)
    written = 0
    async with Memory.open(settings=settings, embedder=embedder) as mem:
        store = mem.engine.store
        specs = list(generate_memories(n, seed=n))
        ids: list[str] = []
        kinds: list[str] = []
        for start in range(0, n, 2000):
            chunk = specs[start : start + 2000]
            records, logs = [], []
            for offset, spec in enumerate(chunk):
                draw = rng.random()
                owner = OTHER if draw < 0.10 else ("" if draw < 0.15 else OWNER)
                if spec["type"] == "todo":
                    spec["status"] = rng.choice(["open", "open", "done", "dropped"])
                record = build_memory(request_of(AuthorRequest, spec), owner)
                log = [created_record(record, owner)]
                apply_access(record, log[0], exact_k=settings.recall.exact_accesses)
                span = (now - record.created_at).total_seconds()
                times = sorted(rng.uniform(0, span) for _ in range(per_memory[start + offset]))
                for t in times:
                    access = AccessRecord(
                        ts=record.created_at + timedelta(seconds=t),
                        channel=rng.choices(channels, weights=channel_weights)[0],
                        reader_owner=READER if rng.random() < 0.1 else OWNER,
                        query="how do we deploy",
                        rank=rng.randint(1, 5),
                    )
                    apply_access(
                        record,
                        access,
                        exact_k=settings.recall.exact_accesses,
                        count_for_owner=access.reader_owner == owner,
                    )
                    log.append(access)
                records.append(record)
                logs.append(log)
            vectors = embedder.embed([r.content for r in records])
            async with store.transaction():
                for record, vector, log in zip(records, vectors, logs, strict=True):
                    await store.insert(record, vector)
                    await store.append_accesses([(record.id, a) for a in log])
                    written += len(log) - 1
            ids += [r.id for r in records]
            kinds += [r.type.value for r in records]
        reflections = [i for i, kind in zip(ids, kinds, strict=True) if kind == "reflection"]
        async with store.transaction():
            for src in ids:
                await store.add_edge(src, rng.choice(ids), EdgeType.related, 0.5)
            for src in reflections[: len(reflections) // 5]:
                for dst in rng.sample(ids, 2):
                    await store.add_edge(src, dst, EdgeType.derived_from, 1.0)
            for gone in rng.sample(ids, n // 20):
                await store.set_archived(gone, True, now)
                await store.add_tombstone(gone, "forgotten", now)
            for i in range(300):
                role = "bench" if i % 3 else "writer"
                await store.log_maintenance(
                    "reflection" if i % 2 else "intent",
                    {"role": role, "steps": [{"step": "link", "applied": i % 7}]},
                )
    return time.perf_counter() - started, written


def numbers(stats: object) -> dict:
    """Everything stats reports that a run can compare (the open-ages median drifts by clock)."""
    data = stats.model_dump(mode="json")  # type: ignore[attr-defined]
    data.pop("embeddings", None)
    data.pop("store", None)
    return data


async def measure(
    target: Path | str, runs: int
) -> dict[str, tuple[list[float], list[float], dict]]:
    """Per scope: wall-clock ms, this process's CPU ms (all threads: SQLite runs in
    aiosqlite's), and the numbers reported. On a loaded machine the CPU time is the steadier
    measure of what a call costs; it leaves out PostgreSQL's own work."""
    settings = Settings(store=target, owner=OWNER, reflect_every_writes=0)
    out = {}
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        for scope in ("mine", "*"):
            await mem.stats(scope=scope)
            wall, cpu = [], []
            for _ in range(runs):
                t, c = time.perf_counter(), time.process_time()
                result = await mem.stats(scope=scope)
                wall.append((time.perf_counter() - t) * 1000)
                cpu.append((time.process_time() - c) * 1000)
            out[scope] = (wall, cpu, numbers(result))
    return out


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--reads", type=float, default=5.0, help="accesses per memory on average")
    ap.add_argument("--store", help="a PostgreSQL URL (one schema per size); SQLite otherwise")
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "nooa-bench-stats")
    ap.add_argument("--drop", action="store_true", help="drop the PostgreSQL schemas afterwards")
    ap.add_argument("--golden", type=Path, help="write, or compare against, the numbers reported")
    args = ap.parse_args()
    golden = json.loads(args.golden.read_text()) if args.golden and args.golden.exists() else None
    seen: dict[str, dict] = {}
    print(f"load: {os.getloadavg()[0]:.2f} (1 min)")
    for size in [int(s) for s in args.sizes.split(",")]:
        tag = f"{'pg' if args.store else 'sqlite'}-{size}-{args.reads:g}"
        if args.store:
            import psycopg

            schema = f"nooa_bench_stats_{size}_{args.reads:g}".replace(".", "_")
            target: Path | str = pg_schema_target(args.store, schema)
            with psycopg.connect(args.store, autocommit=True) as conn:
                fresh = not conn.execute(
                    "SELECT 1 FROM information_schema.tables WHERE table_schema = %s "
                    "AND table_name = 'memories'",
                    (schema,),
                ).fetchone()
                if fresh:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
                    conn.execute(f'CREATE SCHEMA "{schema}"')
        else:
            args.dir.mkdir(parents=True, exist_ok=True)
            target = args.dir / f"stats-{size}-{args.reads:g}.sqlite"
            fresh = not target.exists()
        if fresh:
            seconds, written = await fill(target, size, args.reads)
            print(f"{size:>7}: filled in {seconds:.0f} s ({written} accesses besides created)")
        if args.store:
            # Planner statistics, as autovacuum (or the store itself, after its next search)
            # keeps them on a store in use: without them PostgreSQL estimates 200 rows for a
            # scan of 10k and loops over indexes where it should hash.
            with psycopg.connect(target, autocommit=True) as conn:
                tables = conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                ).fetchall()
                conn.execute(f"ANALYZE {', '.join(t for (t,) in tables)}")
        result = await measure(target, args.runs)
        for scope, (wall, cpu, reported) in result.items():
            print(
                f"{size:>7} stats(scope={scope!r:>6}): p50 {statistics.median(wall):8.1f} ms"
                f"  p90 {pct(wall, 90):8.1f} ms  cpu p50 {statistics.median(cpu):7.1f} ms"
                f"  (reads {reported['extra']['reads']}, accesses {reported['accesses']})"
            )
            seen[f"{tag}/{scope}"] = reported
        if args.store and args.drop:
            with psycopg.connect(args.store, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    if args.golden and golden is None:
        seen["at"] = time.time()  # type: ignore[assignment]
        args.golden.write_text(json.dumps(seen, indent=1, sort_keys=True))
        print(f"numbers written to {args.golden}")
    elif golden is not None:
        # Open todos have aged since the golden run: their median age moves by exactly that.
        aged = (time.time() - golden["at"]) / 3600
        for key, reported in seen.items():
            was = golden.get(key, {}).get("extra", {}).get("todo_open_median_age_hours")
            now = reported["extra"]["todo_open_median_age_hours"]
            if was is not None and now is not None and abs(now - was - aged) <= 0.11:
                reported["extra"]["todo_open_median_age_hours"] = was
        differ = [k for k in seen if k in golden and golden[k] != seen[k]]
        for key in differ:
            for field in sorted(set(golden[key]) | set(seen[key])):
                if golden[key].get(field) != seen[key].get(field):
                    print(f"  {key} {field}: {golden[key].get(field)} -> {seen[key].get(field)}")
        compared = sum(1 for k in seen if k in golden)
        print(f"numbers vs {args.golden}: {compared} compared, {len(differ)} differ")


if __name__ == "__main__":
    anyio.run(main)
