"""Recall and cost of the clustered first sweep (similarity.clustered_sweep) against the exact
one, on the reflection benchmark's texts (issue 12).

    HF_HUB_OFFLINE=1 python benchmarks/bench_clustered.py --sizes 10000,20000
    python benchmarks/bench_clustered.py --sizes 10000 --embedder minilm --vectors /tmp/vecs

Per size: the exact full sweep (`similarity.sweep`, every pair once) and the clustered one
over the same unit vectors, both at cosine ≥ 0.80 (link's low threshold) without a per-row
cap, so recall measures the approximation itself; recall is reported at ≥ 0.80 and at ≥ 0.95
(merge). Then the clustered sweep again, to check it finds the same pairs (deterministic).
`--probes` lists the probe counts to try. Vectors as bench_reflect.py (hash embedder, or
MiniLM cached under `--vectors`).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

import numpy as np
from bench_reflect import Vectors, texts

from nooa_mcp.domain.reflection import LINK_LOW, SWEEP_SPILL
from nooa_mcp.domain.similarity import PROBES, clustered_sweep, sweep


def keys(found, m: int, at: float) -> np.ndarray:
    sel = found.pairs.cos >= at
    return np.unique(found.pairs.p[sel] * m + found.pairs.q[sel])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,20000")
    parser.add_argument("--embedder", choices=["hash", "minilm"], default="hash")
    parser.add_argument("--vectors", type=Path, default=None)
    parser.add_argument("--probes", default=str(PROBES))
    args = parser.parse_args()
    vectors = Vectors(args.embedder, args.vectors)
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        "| memories | vectors | probes | pairs ≥ 0.80 | recall ≥ 0.80 | pairs ≥ 0.95 | "
        "recall ≥ 0.95 | exact s | clustered s | cosines exact / clustered | same pairs twice |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for size in [int(x) for x in args.sizes.split(",")]:
        all_texts = texts(size)
        matrix = np.ascontiguousarray(vectors.of(all_texts, 0, size), dtype=np.float32)
        rows = np.arange(size)
        t = time.perf_counter()
        exact = sweep(matrix, rows, LINK_LOW, cap=size)
        exact_s = time.perf_counter() - t
        for probes in [int(x) for x in args.probes.split(",")]:
            t = time.perf_counter()
            approx = clustered_sweep(matrix, rows, LINK_LOW, cap=size, probes=probes)
            approx_s = time.perf_counter() - t
            again = clustered_sweep(matrix, rows, LINK_LOW, cap=size, probes=probes)
            same = bool(
                np.array_equal(approx.pairs.p, again.pairs.p)
                and np.array_equal(approx.pairs.q, again.pairs.q)
            )
            cells = []
            for at in (LINK_LOW, SWEEP_SPILL):
                want, got = keys(exact, size, at), keys(approx, size, at)
                hit = np.isin(want, got).sum()
                cells += [f"{want.size:,}", f"{hit / max(want.size, 1):.4f}"]
            print(
                f"| {size:,} | {args.embedder} | {probes} | {' | '.join(cells)} | "
                f"{exact_s:.1f} | {approx_s:.1f} | {exact.compared:.3g} / {approx.compared:.3g} "
                f"| {'yes' if same else 'NO'} |",
                flush=True,
            )
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
