"""Recall latency at several store sizes, next to the floor measured in the same run.

    HF_HUB_OFFLINE=1 python benchmarks/bench_recall.py --sizes 1000,10000,100000

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


async def fill(path: Path, n: int, embedder, batch: int = 1000, bulk: bool = True) -> float:
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
            records = [build_memory(dict(spec), mem.owner) for spec in chunk]
            vectors = embedder.embed([r.content for r in records])
            store = mem.engine.store
            async with store.transaction():
                for record, vector in zip(records, vectors, strict=True):
                    access = created_record(record, mem.owner)
                    apply_access(record, access, exact_k=s.recall.exact_accesses)
                    await store.insert(record, vector)
                    await store.append_accesses([(record.id, record.access_log[0])])
    return time.perf_counter() - started


async def measure(path: Path, model: MiniLMEmbedder, n_queries: int, size: int) -> dict:
    s = Settings(store=path, owner="bench")
    async with Memory.open(path, owner="bench", embedder=model, settings=s) as mem:
        for q in queries(20, f"warm{size}"):
            await mem.recall(q, k=5)
        recall_ms = []
        for q in queries(n_queries, f"recall{size}"):
            t = time.perf_counter()
            await mem.recall(q, k=5)
            recall_ms.append((time.perf_counter() - t) * 1000)
        index = mem.engine.index
        await index.sync(mem.engine.store)
        matrix = index.matrix[: index.size]
        floor_ms = []
        for q in queries(n_queries, f"floor{size}"):
            t = time.perf_counter()
            vec = model.embed([q])[0]
            sims = matrix @ vec
            sims.argmax()
            floor_ms.append((time.perf_counter() - t) * 1000)
    return {
        "size": size,
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
        "--author-fill", action="store_true", help="fill through author_many (slow at 100k)"
    )
    args = parser.parse_args()
    model = MiniLMEmbedder()
    filler = model if args.fill_embedder == "minilm" else HashEmbedder(384)
    rows = []
    with tempfile.TemporaryDirectory(prefix="nooa-bench-") as tmp:
        root = args.dir or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        for size in [int(x) for x in args.sizes.split(",")]:
            path = root / f"recall-{size}.sqlite"
            if not path.exists():
                seconds = await fill(path, size, filler, bulk=not args.author_fill)
                print(f"filled {size} memories in {seconds:.1f} s ({size / seconds:.0f}/s)")
            row = await measure(path, model, args.queries, size)
            rows.append(row)
            print(
                f"{size:>7}  recall p50 {row['recall_p50']:7.2f} ms  p99 {row['recall_p99']:7.2f}"
                f" ms  | floor p50 {row['floor_p50']:6.2f} ms  p99 {row['floor_p99']:6.2f} ms",
                flush=True,
            )
    rss, hwm = rss_mb()
    print()
    print("| memories | recall p50 ms | recall p99 ms | floor p50 ms | p50 / floor | p99 / p50 |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['size']:,} | {r['recall_p50']:.2f} | {r['recall_p99']:.2f} | "
            f"{r['floor_p50']:.2f} | {r['recall_p50'] / r['floor_p50']:.2f} | "
            f"{r['recall_p99'] / r['recall_p50']:.2f} |"
        )
    print(f"\nRSS after the run: {rss:.0f} MB (peak {hwm:.0f} MB)")


if __name__ == "__main__":
    anyio.run(main)
