"""Every row of every ranking for a store's questions, to compare two builds bit for bit.

A change meant to make ranking faster must leave every ranking as it was. This ranks the first
N LoCoMo questions on a copy of STORE three ways each (the defaults, no spreading, two hops
with a type filter), the clock held at one instant, and prints every ranked row: id, score to
1e-9, source, path, flags and score parts. Run it on the build before and after, and compare:

    PYTHONPATH=/path/to/old/checkout python benchmarks/rank_dump.py STORE --questions 150 > a
    python benchmarks/rank_dump.py STORE --questions 150 > b && cmp a b

Run both with OPENBLAS_NUM_THREADS=1 (as a server runs). Held keyword postings load only
once the process has been idle, so this waits for them before ranking: the rankings are those
of a warm server.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import time_machine

sys.path.insert(0, str(Path(__file__).parent))

from bench_side_by_side import copy_store
from stdio_workload import questions

from nooa_mcp.embeddings import Embedder
from nooa_mcp.memory import Memory
from nooa_mcp.services.recall import ranking_for

#: The instant every ranking is computed at.
NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
#: (hops, types) of the three rankings per question: the defaults, none, a deeper filtered one.
VARIANTS: list[tuple[int | None, set[str] | None]] = [
    (None, None),
    (0, None),
    (2, {"info", "episode"}),
]


async def dump(mem: Memory, asked: list[str]) -> list[str]:
    """The lines for `asked` on an open store (see the module docstring)."""
    caller = mem._caller
    scope = caller.scope(None)
    index = mem.engine.index
    await ranking_for(caller, "warm up", scope, None, None, shown=5)
    for _ in range(100):  # the postings load while the process is idle
        if index.keywords.ready:
            break
        await asyncio.sleep(0.1)
    lines = []
    with time_machine.travel(NOW, tick=False):
        for query in asked:
            for hops, kinds in VARIANTS:
                ranking = await ranking_for(caller, query, scope, kinds, hops, shown=5)
                await ranking.fill(caller.store)
                lines.append(f"Q {query!r} {hops} {sorted(kinds or [])} {len(ranking.rows)}")
                lines += [
                    f"{r.id} {r.score:.9f} {r.source} {r.path} {r.stale} {r.superseded_by} "
                    f"{r.faded} {r.succeeds_relevant} rel {r.rel:.9f} rec {r.rec:.9f} "
                    f"imp {r.imp:.6f} spread {r.spread:.9f} cos {r.cos} lex {r.lex:.9f} "
                    f"overlap {r.overlap:.9f}"
                    for r in ranking.rows
                ]
    return lines


async def main(store: Path, n: int, embedder: Embedder | None = None) -> list[str]:
    """The lines for the first `n` questions, on a copy of `store` (and its WAL files)."""
    work = Path(tempfile.mkdtemp(prefix="rank-dump-"))
    try:
        async with Memory.open(copy_store(store, work), owner="bench", embedder=embedder) as mem:
            await mem.engine.wait_ready(120)
            return await dump(mem, questions()[:n])
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", type=Path, help="a store file (copied; the copy is ranked)")
    parser.add_argument("--questions", type=int, default=150)
    args = parser.parse_args()
    print("\n".join(asyncio.run(main(args.store, args.questions))))
