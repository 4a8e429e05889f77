"""Author throughput in batches, next to raw embedding throughput, at several store sizes.

    HF_HUB_OFFLINE=1 python benchmarks/bench_author.py [--stores DIR] [--n 1000]

Raw: `MiniLMEmbedder.embed` over N fresh texts (batch 32). Author: `Memory.author_many` of
the same number of fresh texts in batches of 100 (embedding, dedup search, insert, FTS,
access stream, one transaction per batch), into an empty store and into copies of the
stores bench_recall.py left in DIR (recall-<size>.sqlite), so the cost per write can be
compared across store sizes. Target (issue 5): author >= 150 memories/s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import anyio

from nooa_mcp.config import Settings
from nooa_mcp.embeddings import MiniLMEmbedder
from nooa_mcp.evaluation.workload import generate_memories
from nooa_mcp.memory import Memory


async def author(path: Path, model: MiniLMEmbedder, n: int, seed: int) -> float:
    s = Settings(store=path, owner="bench")
    specs = list(generate_memories(n, seed=seed))
    async with Memory.open(path, owner="bench", embedder=model, settings=s) as mem:
        await mem.engine.index.sync(mem.engine.store)
        started = time.perf_counter()
        for i in range(0, n, 100):
            await mem.author_many(specs[i : i + 100])
        return n / (time.perf_counter() - started)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stores", type=Path, default=None)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--sizes", default=None, help="only these store sizes, e.g. 0,100000")
    args = parser.parse_args()
    model = MiniLMEmbedder()
    model.embed([s["content"] for s in generate_memories(64, seed=5)])

    def raw_rate(seed: int) -> float:
        # Measured right before each author run, so a busy machine slows both alike.
        texts = [s["content"] for s in generate_memories(args.n, seed=seed)]
        started = time.perf_counter()
        model.embed(texts)
        return args.n / (time.perf_counter() - started)

    rows = []
    with tempfile.TemporaryDirectory(prefix="nooa-author-") as tmp:
        bases: list[tuple[int, Path | None]] = [(0, None)]
        if args.stores:
            for p in sorted(args.stores.glob("recall-*.sqlite")):
                bases.append((int(p.stem.split("-")[1]), p))
        wanted = None if args.sizes is None else {int(x) for x in args.sizes.split(",")}
        for size, src in sorted(bases, key=lambda b: b[0]):
            if wanted is not None and size not in wanted:
                continue
            path = Path(tmp) / f"author-{size}.sqlite"
            if src is not None:
                for suffix in ("", "-wal", "-shm"):
                    if Path(str(src) + suffix).exists():
                        shutil.copy(str(src) + suffix, str(path) + suffix)
            raw = raw_rate(seed=2000 + size)
            rate = await author(path, model, args.n, seed=1000 + size)
            rows.append((size, rate, raw))
            print(f"store {size:>7}: author {rate:6.1f}/s, raw embedding {raw:6.1f}/s", flush=True)
    print()
    print("| store size | author memories/s | raw embedding texts/s | author / raw |")
    print("|---:|---:|---:|---:|")
    for size, rate, raw in rows:
        print(f"| {size:,} | {rate:.1f} | {raw:.1f} | {rate / raw:.2f} |")


if __name__ == "__main__":
    anyio.run(main)
