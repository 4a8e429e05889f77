"""The vector matrix at half width (`storage.half_width`): what holding each row as int16
codes with a per-row scale saves, costs and changes, measured on a real store.

The matrix is most of a large server's memory (146.5 MiB of float32 at 100k rows of 384), and
issue 31's RSS line (≤ 400 MB at 100k after writes) is under what the rest of the process
needs beside it. float16 halves it too, but numpy has no fast float16 kernel: every product
would convert, and the conversion is the slow part. int16 codes with a scale per row
(x ≈ scale · code, scale = max|x| / 32767) convert with the same vector instructions as any
integer array; the index's product dequantizes a block of rows at a time into a buffer.

Reads every stored vector of STORE (a SQLite store: `bench_stdio.py --prefill ... --store-dir`
leaves them), embeds LoCoMo questions with the real model, and prints, beside the float32
matrix measured in the same run through the same code (`storage.vectors.product`, one BLAS
thread, as a server multiplies): bytes held; the whole product and a gathered one (the rows a
sketch leaves at 100k) per query, medians; the largest cosine error and its bound
(½·scale·|q|₁ per row); and how often a query's top n rows (the ranking's dense candidates)
are the same rows in the same order.

    python benchmarks/bench_half_width.py STORE [--queries 200] [--n 50] [--block 512]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: a server's one BLAS thread

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from stdio_workload import questions

from nooa_mcp.embeddings import MiniLMEmbedder
from nooa_mcp.storage import half_width
from nooa_mcp.storage.half_width import HalfWidth, dequantize, quantize
from nooa_mcp.storage.rows import vector_of
from nooa_mcp.storage.vectors import padded_product, product

#: Rows the gathered product takes per query: ~1 in 20 of 100k, what the sketch leaves a
#: recall there (`storage.sketch`).
GATHERED_SHARE = 20


def stored_vectors(store: Path) -> np.ndarray:
    """Every stored embedding of `store`, in seq order, as one float32 matrix."""
    try:
        db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
        blobs = db.execute(
            "SELECT embedding FROM memories WHERE embedding IS NOT NULL ORDER BY seq"
        ).fetchall()
    except sqlite3.Error as exc:
        raise SystemExit(f"{store}: not a nooa store that can be read ({exc}).") from None
    if not blobs:
        raise SystemExit(f"{store}: the store holds no vectors; fill it first.")
    return np.stack([vector_of(blob) for (blob,) in blobs])


def timed(run: Callable[[], object]) -> float:
    """Milliseconds one call of `run` took."""
    started = time.perf_counter()
    run()
    return (time.perf_counter() - started) * 1000


def main(args: argparse.Namespace) -> None:
    half_width.BLOCK_ROWS = args.block
    matrix = stored_vectors(args.store)
    rows, dim = matrix.shape
    codes, scale = quantize(matrix)
    held = HalfWidth(codes, scale)
    exact = dequantize(codes, scale)
    asked = questions()[: args.queries]
    queries = MiniLMEmbedder().embed(asked)
    rng = np.random.default_rng(0)

    # Accuracy: every query against every row, both ways.
    worst, bound, same, same_rows = 0.0, 0.0, 0, 0
    for q in queries:
        full, half = product(matrix, q), product(held, q)
        worst = max(worst, float(np.abs(full - half).max()))
        bound = max(bound, float((scale * (0.5 * np.abs(q).sum())).max()))
        top_full = np.lexsort((np.arange(rows), -full))[: args.n]
        top_half = np.lexsort((np.arange(rows), -half))[: args.n]
        same += bool(np.array_equal(top_full, top_half))
        same_rows += set(top_full.tolist()) == set(top_half.tolist())
    if not np.allclose(exact @ queries[0], product(held, queries[0]), atol=1e-6):
        raise SystemExit("the blocked product does not match the dequantized matrix's")

    # Speed, alternated query by query so drift hits both alike.
    picked = np.sort(rng.choice(rows, max(rows // GATHERED_SHARE, 1), replace=False))
    timings: dict[str, list[float]] = {}
    for q in queries:
        runs = {
            "f32": lambda q=q: product(matrix, q),
            "i16": lambda q=q: product(held, q),
            "f32 gather": lambda q=q: padded_product(matrix, picked, q),
            "i16 gather": lambda q=q: padded_product(held, picked, q),
        }
        for name, run in runs.items():
            timings.setdefault(name, []).append(timed(run))
    p50 = {name: statistics.median(values) for name, values in timings.items()}

    mib = 2**20
    print(f"{args.store}: {rows} rows of {dim}, {len(queries)} LoCoMo questions, top {args.n}")
    print(
        f"  held: float32 {matrix.nbytes / mib:.1f} MiB, int16 + scale "
        f"{(codes.nbytes + scale.nbytes) / mib:.1f} MiB "
        f"({(codes.nbytes + scale.nbytes) / matrix.nbytes:.2f}x)"
    )
    print(
        f"  whole product p50: float32 {p50['f32']:.2f} ms, int16 in blocks of {args.block} "
        f"{p50['i16']:.2f} ms ({p50['i16'] / p50['f32']:.2f}x)"
    )
    print(
        f"  {picked.size} gathered rows p50: float32 {p50['f32 gather']:.3f} ms, int16 "
        f"{p50['i16 gather']:.3f} ms ({p50['i16 gather'] / p50['f32 gather']:.2f}x)"
    )
    print(
        f"  largest cosine error {worst:.2e} (bound {bound:.2e}); top {args.n}: the same rows "
        f"for {same_rows} of {len(queries)} questions, in the same order for {same}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", type=Path, help="a SQLite store file")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--n", type=int, default=50, help="top rows compared (recall's n_dense)")
    parser.add_argument(
        "--block", type=int, default=half_width.BLOCK_ROWS, help="rows dequantized at a time"
    )
    main(parser.parse_args())
