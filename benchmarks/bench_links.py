"""What a sync's changed edges cost the edges held in memory (`storage/links.py`).

    python benchmarks/bench_links.py --edges 300000 --ends 100000

`--edges` random edges over `--ends` ids are held; then batches of k new edges (and one
rewritten weight) are applied, as a sync or a role's load brings them: put in place (one pass
over the arrays) and, for comparison, merged and sorted whole (what every batch of 4 or more
paid before). Medians over `--reps` batches, each on a fresh copy of the arrays, with the floor
measured in the same run: one copy of the five arrays.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time

import numpy as np

from nooa_mcp.storage.base import EdgeRow
from nooa_mcp.storage.links import HeldLinks

KINDS = ["related", "causes", "refines", "part_of", "supports"]


def edges(rng: np.random.Generator, ends: list[str], n: int) -> list[EdgeRow]:
    picks = rng.integers(0, len(ends), (n, 2)).tolist()
    kinds = rng.integers(0, len(KINDS), n).tolist()
    return [
        EdgeRow(ends[s], ends[d], KINDS[k], float(w))
        for (s, d), k, w in zip(picks, kinds, rng.random(n).tolist(), strict=True)
    ]


def timed(held: HeldLinks, batch: list[EdgeRow], whole: bool) -> float:
    """Milliseconds to apply `batch` to a copy of `held` (put in place, or sorted whole)."""
    mine = copy.copy(held)
    for name in ("src", "dst", "weight", "kind", "by_dst"):
        setattr(mine, name, getattr(held, name).copy())
    src = mine._codes([e.src for e in batch])
    dst = mine._codes([e.dst for e in batch])
    kind = np.array([mine._kind(e.type) for e in batch], dtype=np.uint8)
    weight = np.array([e.weight for e in batch], dtype=np.float64)
    started = time.perf_counter()
    (mine._merge if whole else mine._insert)(src, dst, kind, weight)
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--edges", type=int, default=300_000)
    parser.add_argument("--ends", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    ends = [f"{i:032x}" for i in range(args.ends)]
    held = HeldLinks()
    held.apply(edges(rng, ends, args.edges))
    print(f"{len(held)} edges held over {args.ends} ends; load {os.getloadavg()[0]:.2f}")
    floor = []
    arrays = (held.src, held.dst, held.weight, held.kind, held.by_dst)
    for _ in range(args.reps):
        started = time.perf_counter()
        for a in arrays:
            a.copy()
        floor.append((time.perf_counter() - started) * 1000)
    base = statistics.median(floor)
    print(f"floor (one copy of the arrays): {base:.2f} ms")
    print(f"{'k':>6} {'in place ms':>12} {'/floor':>7} {'sorted whole ms':>16} {'/floor':>7}")
    for k in (1, 3, 4, 10, 100, 1000, 10000):
        place, whole = [], []
        for _ in range(args.reps):
            batch = [*edges(rng, ends, k), held_edge(held, rng)]
            place.append(timed(held, batch, whole=False))
            whole.append(timed(held, batch, whole=True))
        p, w = statistics.median(place), statistics.median(whole)
        print(f"{k:>6} {p:>12.2f} {p / base:>7.1f} {w:>16.2f} {w / base:>7.1f}")
    print(f"load {os.getloadavg()[0]:.2f}")


def held_edge(held: HeldLinks, rng: np.random.Generator) -> EdgeRow:
    """One edge held, with a new weight."""
    i = int(rng.integers(len(held)))
    kind = held._kind_names[int(held.kind[i])]
    return EdgeRow(held.ends[int(held.src[i])], held.ends[int(held.dst[i])], kind, 9.0)


if __name__ == "__main__":
    main()
