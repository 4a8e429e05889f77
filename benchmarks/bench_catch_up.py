"""Recall from the moment the model is ready, with no pause between calls: how long a busy
server takes to catch up with what it reads in the background after its start.

Once its model is ready a server reads the keyword postings (and, at 100k, sketches its rows)
a page at a time, each page waiting for a moment between calls (DESIGN §15). `bench_stdio`
idles a few seconds first, so its figures are of a server that has caught up; a client that
never pauses (agents sharing a server, a script) sees the catching up instead. Here each
build in turn is spawned on a fresh copy of STORE and sent recalls back to back for S
seconds from the moment its model is ready; every 5 s it prints the recall p50 of those 5 s
and the server's RSS, then the second from which the p50 stays within 10 % of the last
blocks' (the caught-up p50, which is this run's floor) and the p50 before it.

    python benchmarks/bench_catch_up.py STORE --command nooa-mcp \\
        --command "env PYTHONPATH=/path/to/old/checkout nooa-mcp" [--seconds 70 --rounds 1]

STORE is a store file (`bench_stdio.py --prefill ... --store-dir DIR` leaves them).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_side_by_side import spawn
from stdio_workload import questions

#: Seconds a block of the curve lasts.
BLOCK_S = 5.0
#: Blocks at the end whose p50s make the caught-up p50.
LAST_BLOCKS = 3


async def curve(command: str, store: Path, seconds: float, workdir: Path) -> list[dict]:
    """Blocks of back-to-back recalls from the moment the model is ready; the copy of the
    store in `workdir` is removed after the run (a 100k copy is ~470 MB)."""
    server = await spawn(command, store, workdir)
    asked = itertools.cycle(questions())
    blocks: list[dict] = []
    try:
        started = time.perf_counter()
        ms: list[float] = []
        edge = started + BLOCK_S
        while time.perf_counter() - started < seconds:
            at = time.perf_counter()
            await server.call("memory_recall", {"query": next(asked), "k": 5})
            ms.append((time.perf_counter() - at) * 1000)
            if time.perf_counter() >= edge:
                stats = server.stats()
                blocks.append(
                    {
                        "end_s": edge - started,
                        "calls": len(ms),
                        "p50": statistics.median(ms),
                        "rss_mib": stats.rss_mib,
                    }
                )
                ms, edge = [], edge + BLOCK_S
    finally:
        await server.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return blocks


def caught_up(blocks: list[dict]) -> tuple[float, float, float | None]:
    """The caught-up p50 (median of the last blocks), the second from which every block
    stays within 10 % of it, and the p50 of the calls before that second (None: none)."""
    floor = statistics.median(b["p50"] for b in blocks[-LAST_BLOCKS:])
    first = len(blocks)
    while first > 0 and blocks[first - 1]["p50"] <= 1.1 * floor:
        first -= 1
    before = [b["p50"] for b in blocks[:first]]
    at_s = blocks[first - 1]["end_s"] if first else 0.0
    return floor, at_s, statistics.median(before) if before else None


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", type=Path, help="a store file to copy for each run")
    parser.add_argument(
        "--command", action="append", required=True, help="a server command (repeatable)"
    )
    parser.add_argument("--seconds", type=float, default=70.0, help="recalls per run (s)")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each command")
    args = parser.parse_args()
    if args.seconds < BLOCK_S * (LAST_BLOCKS + 1):
        parser.error(f"--seconds must be at least {BLOCK_S * (LAST_BLOCKS + 1):.0f}.")
    with tempfile.TemporaryDirectory(prefix="nooa-catch-up-") as tmp:
        for round_ in range(args.rounds):
            order = args.command if round_ % 2 == 0 else args.command[::-1]
            for n, command in enumerate(order):
                workdir = Path(tmp) / f"r{round_}-{n}"
                blocks = await curve(command, args.store, args.seconds, workdir)
                print(f"round {round_ + 1}: {command}")
                for b in blocks:
                    print(
                        f"  {b['end_s']:5.0f} s  {b['calls']:4d} recalls  p50 {b['p50']:6.2f} ms"
                        f"  RSS {b['rss_mib']:.0f} MiB"
                    )
                floor, at_s, before = caught_up(blocks)
                peak = max(b["rss_mib"] for b in blocks)
                shown = "-" if before is None else f"{before:.2f} ms ({before / floor:.2f}x)"
                print(
                    f"  caught up by {at_s:.0f} s: p50 {floor:.2f} ms after, {shown} before;"
                    f" RSS peak {peak:.0f}, last {blocks[-1]['rss_mib']:.0f} MiB",
                    flush=True,
                )


if __name__ == "__main__":
    asyncio.run(main())
