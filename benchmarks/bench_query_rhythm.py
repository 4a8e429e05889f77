"""One query embedded by MiniLM, back to back and in a server's rhythm.

bench_stdio's floor embeds 200 queries back to back in a plain loop. A server embeds one per
call: between two, the model's threads have gone idle and the rest of the call has filled the
caches with other data. This runs the same model on the same questions four ways, alternated
in rounds, and prints each median beside the back-to-back one measured in the same round:

- back to back (the floor as bench_stdio measures it);
- after a pause (`--pause` ms asleep: the threads idle, as between two calls);
- after the caches were used (`--evict` MiB of memory read: what ranking and the reply do);
- after both, which is what a served recall gets.

    python benchmarks/bench_query_rhythm.py [--queries 200] [--rounds 2] [--pause 5] [--evict 64]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from stdio_workload import questions

from nooa_mcp.embeddings import MiniLMEmbedder


def timed(
    model: MiniLMEmbedder, queries: list[str], pause: float, evict: np.ndarray | None, tag: str
) -> float:
    """Median ms of embedding each query, `tag` appended: a text the embedder's cache of
    queries has not seen, so each is the model's own run."""
    took = []
    for query in queries:
        if evict is not None:
            evict.sum()
        if pause:
            time.sleep(pause)
        started = time.perf_counter()
        model.embed([f"{query} {tag}"])
        took.append((time.perf_counter() - started) * 1000)
    return statistics.median(took)


def main(args: argparse.Namespace) -> None:
    model = MiniLMEmbedder()
    asked = questions()
    big = np.ones(args.evict * 1024 * 1024 // 4, dtype=np.float32)
    ways = {
        "back to back": (0.0, None),
        f"after {args.pause:g} ms asleep": (args.pause / 1000, None),
        f"after reading {args.evict} MiB": (0.0, big),
        "after both": (args.pause / 1000, big),
    }
    for query in asked[:20]:
        model.embed([query])
    print(f"MiniLM, one query a call, {args.queries} questions a way, medians (ms):")
    at = 20
    for round_ in range(1, args.rounds + 1):
        figures = {}
        for name, (pause, evict) in ways.items():
            queries = asked[at : at + args.queries]
            figures[name] = timed(model, queries, pause, evict, f"({round_})")
            at = (at + args.queries) % max(len(asked) - args.queries, 1)
        floor = figures["back to back"]
        print(
            f"  round {round_}: "
            + "; ".join(f"{name} {ms:.2f} ({ms / floor:.2f}x)" for name, ms in figures.items())
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pause", type=float, default=5.0, help="ms asleep before a query")
    parser.add_argument("--evict", type=int, default=64, help="MiB read before a query")
    main(parser.parse_args())
