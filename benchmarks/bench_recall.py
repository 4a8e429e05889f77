"""Recall latency at several store sizes, next to the floor measured in the same run.

    HF_HUB_OFFLINE=1 python benchmarks/bench_recall.py --sizes 1000,10000,100000
    HF_HUB_OFFLINE=1 python benchmarks/bench_recall.py --store postgresql://postgres@127.0.0.1/test

With `--store URL` the stores live in PostgreSQL, one schema per size (nooa_bench_recall_<size>,
filled once and reused by later runs and by bench_author.py; `--drop` removes them afterwards).

For each size a fresh store is filled with synthetic agent memories (benchmarks fill with
the deterministic 384-d hash embedder, because embedding 100k texts with the real model takes
~8 minutes and vector values do not change the cost of a matrix product; pass
--fill-embedder minilm to fill with the real model). Then, with the real MiniLM:

- recall: `Memory.recall(q, k=5)` for never-seen queries (so the query-embedding LRU never
  hits), warm (after 20 warm-up queries), query embedding and access logging included;
- floor: embedding a never-seen query + one numpy matrix-vector product over the store's
  vectors (the least any dense recall can cost).

Prints p50, p99, p50/floor and p99/p50. Targets (issue 5): p50 <= 2x floor at 100k, p99 <= 2x p50.
Also prints resident memory (VmRSS / VmHWM) after the largest size.

`--archived 0.5` then archives that share of each store as maintenance does (faded: every other
row, in seq order) and measures again, twice: with the faded tier recall searches by default,
and with it off (`n_faded=0`: the archive out of reach, as before the tier existed).

    HF_HUB_OFFLINE=1 python benchmarks/bench_recall.py --sizes 100000 --archived 0.5
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import anyio
import numpy as np

from nooa_mcp.config import Settings
from nooa_mcp.domain.accesses import apply_access, created_record
from nooa_mcp.domain.inputs import build_memory
from nooa_mcp.domain.requests import AuthorRequest, request_of
from nooa_mcp.embeddings import HashEmbedder, MiniLMEmbedder
from nooa_mcp.evaluation.workload import generate_memories
from nooa_mcp.memory import Memory


def rss_mb() -> tuple[float, float]:
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields.get("VmRSS", 0.0), fields.get("VmHWM", 0.0)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def queries(n: int, tag: str) -> list[str]:
    """`n` distinct, natural agent queries (never seen before in this process, so the query
    embedding LRU cannot answer them); built from the workload's vocabulary, so their
    keywords are as common in the store as real ones would be."""
    from nooa_mcp.evaluation.workload import ISSUES, PEOPLE, PROJECTS, TOOLS

    rng = np.random.default_rng(sum(map(ord, tag)))
    forms = [
        "how do we use {t} in {p}",
        "who owns {p} and {t}",
        "{i} in {p} with {t}",
        "what did {h} decide about {t} for {p}",
        "why did {p} move to {t}",
        "{p} {t} deploy notes from {h}",
    ]
    out: list[str] = []
    while len(out) < n:
        q = str(rng.choice(forms)).format(
            t=rng.choice(TOOLS), p=rng.choice(PROJECTS), i=rng.choice(ISSUES), h=rng.choice(PEOPLE)
        )
        if q not in out and q not in _SEEN:
            out.append(q)
            _SEEN.add(q)
    return out


_SEEN: set[str] = set()


def pg_schema_target(url: str, schema: str) -> str:
    """`url` with `schema` as the store's schema (libpq's options parameter)."""
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


def drop_pg_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def row_count(target: Path | str) -> int:
    from nooa_mcp.storage import open_store

    if isinstance(target, Path) and not target.exists():
        return 0
    store = await open_store(target)
    try:
        return await store.row_count()
    finally:
        await store.close()


async def fill(path: Path | str, n: int, embedder, batch: int = 1000, bulk: bool = True) -> float:
    """Fill a store with `n` synthetic memories; returns seconds.

    `bulk` writes rows through `Store.insert` the way `author_many` does, minus the
    near-duplicate search: that search is one matrix-vector product over the whole store per
    memory (see bench_author.py), which makes filling 100k memories quadratic. Latency of
    recall does not depend on how the rows got there.
    """
    s = Settings(store=path, owner="bench")
    started = time.perf_counter()
    async with Memory.open(path, owner="bench", embedder=embedder, settings=s) as mem:
        specs = list(generate_memories(n, seed=n))
        for i in range(0, n, batch):
            chunk = specs[i : i + batch]
            if not bulk:
                await mem.author_many(chunk)
                continue
            records = [build_memory(request_of(AuthorRequest, spec), mem.owner) for spec in chunk]
            vectors = embedder.embed([r.content for r in records])
            store = mem.engine.store
            async with store.transaction():
                for record, vector in zip(records, vectors, strict=True):
                    access = created_record(record, mem.owner)
                    apply_access(record, access, exact_k=s.recall.exact_accesses)
                    await store.insert(record, vector)
                    await store.append_accesses([(record.id, record.access_log[0])])
    return time.perf_counter() - started


async def archive_share(path: Path | str, share: float) -> int:
    """Archive `share` of the rows as reflection does (faded), spread evenly over the store."""
    from datetime import UTC, datetime

    from nooa_mcp.storage import open_store

    store = await open_store(path)
    try:
        ids = [m.id for m in await store.list_memories(_everyone(), archived=False, limit=10**7)]
        step = max(round(1 / share), 1) if share > 0 else 0
        chosen = ids[::step] if step else []
        when = datetime.now(UTC)
        async with store.transaction():
            for memory_id in chosen:
                await store.set_archived(memory_id, True, when, faded=True)
                await store.add_tombstone(memory_id, "pruned: retention 0.0100 < 0.02", when)
        return len(chosen)
    finally:
        await store.close()


def _everyone():
    from nooa_mcp.domain.scope import Scope

    return Scope(roles=None)


async def measure(
    path: Path | str,
    model: MiniLMEmbedder,
    n_queries: int,
    size: int,
    tag: str = "",
    n_faded: int | None = None,
) -> dict:
    s = Settings(store=path, owner="bench")
    if n_faded is not None:
        s.recall.n_faded = n_faded
    async with Memory.open(path, owner="bench", embedder=model, settings=s) as mem:
        for q in queries(20, f"warm{size}{tag}"):
            await mem.recall(q, k=5)
        recall_ms = []
        faded_hits = 0
        for q in queries(n_queries, f"recall{size}{tag}"):
            t = time.perf_counter()
            result = await mem.recall(q, k=5)
            recall_ms.append((time.perf_counter() - t) * 1000)
            faded_hits += sum(h.flags.faded for h in result.hits)
        index = mem.engine.index
        await index.sync(mem.engine.store)
        matrix = index.matrix[: index.size]
        floor_ms = []
        for q in queries(n_queries, f"floor{size}{tag}"):
            t = time.perf_counter()
            vec = model.embed([q])[0]
            sims = matrix @ vec
            sims.argmax()
            floor_ms.append((time.perf_counter() - t) * 1000)
    return {
        "size": size,
        "label": tag,
        "faded_hits": faded_hits,
        "recall_p50": statistics.median(recall_ms),
        "recall_p99": pct(recall_ms, 99),
        "floor_p50": statistics.median(floor_ms),
        "floor_p99": pct(floor_ms, 99),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--fill-embedder", choices=["hash", "minilm"], default="hash")
    parser.add_argument("--dir", type=Path, default=None, help="keep the stores here")
    parser.add_argument(
        "--store", default=None, help="a postgresql:// URL: one schema per size instead of files"
    )
    parser.add_argument("--drop", action="store_true", help="drop the PostgreSQL schemas after")
    parser.add_argument(
        "--author-fill", action="store_true", help="fill through author_many (slow at 100k)"
    )
    parser.add_argument(
        "--archived", type=float, default=0.0, help="then archive this share (faded), again"
    )
    args = parser.parse_args()
    model = MiniLMEmbedder()
    filler = model if args.fill_embedder == "minilm" else HashEmbedder(384)
    rows = []
    with tempfile.TemporaryDirectory(prefix="nooa-bench-") as tmp:
        root = args.dir or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        for size in [int(x) for x in args.sizes.split(",")]:
            path: Path | str = root / f"recall-{size}.sqlite"
            if args.store:
                path = pg_schema_target(args.store, f"nooa_bench_recall_{size}")
            if await row_count(path) < size:
                if args.store:
                    drop_pg_schema(args.store, f"nooa_bench_recall_{size}")
                seconds = await fill(path, size, filler, bulk=not args.author_fill)
                print(f"filled {size} memories in {seconds:.1f} s ({size / seconds:.0f}/s)")
            phases: list[tuple[str, int | None]] = [("", None)]
            if args.archived > 0:
                phases += [("faded tier", None), ("tier off", 0)]
            for label, n_faded in phases:
                if label == "faded tier":
                    archived = await archive_share(path, args.archived)
                    print(f"archived {archived} of {size} as faded", flush=True)
                row = await measure(path, model, args.queries, size, label, n_faded)
                rows.append(row)
                print(
                    f"{size:>7} {label:>10}  recall p50 {row['recall_p50']:7.2f} ms  p99 "
                    f"{row['recall_p99']:7.2f} ms  | floor p50 {row['floor_p50']:6.2f} ms  p99 "
                    f"{row['floor_p99']:6.2f} ms  | faded hits {row['faded_hits']}",
                    flush=True,
                )
    if args.store and args.drop:
        for r in rows:
            drop_pg_schema(args.store, f"nooa_bench_recall_{r['size']}")
    rss, hwm = rss_mb()
    print(
        f"\nstore: {'PostgreSQL ' + args.store if args.store else 'SQLite files'}; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print()
    print(
        "| memories | archive | recall p50 ms | recall p99 ms | floor p50 ms | p50 / floor "
        "| p99 / p50 | faded hits |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['size']:,} | {r['label'] or 'none'} | {r['recall_p50']:.2f} | "
            f"{r['recall_p99']:.2f} | {r['floor_p50']:.2f} | "
            f"{r['recall_p50'] / r['floor_p50']:.2f} | {r['recall_p99'] / r['recall_p50']:.2f} "
            f"| {r['faded_hits']} |"
        )
    print(f"\nRSS after the run: {rss:.0f} MB (peak {hwm:.0f} MB)")


if __name__ == "__main__":
    anyio.run(main)
