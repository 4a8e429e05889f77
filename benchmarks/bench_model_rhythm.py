"""The query model's run time back to back, and after the idle gaps a server leaves between calls.

S5's floor embeds its queries back to back in a loop; a server runs the model once per call,
after the ranking, the reply and the client's next request have left a core idle. On the
machines this project is measured on (2-core VMs) a run after an idle gap is slower, whatever
the session's threading: this prints the p50 of `MiniLMEmbedder._run` over LoCoMo questions,
in one process, back to back and after each gap, with the shipped session (two intra-op
threads, spinning stopped after a run) and with one intra-op thread, so a floor and a served
recall can be read against what the model itself costs in a server's rhythm.

    HF_HUB_OFFLINE=1 python benchmarks/bench_model_rhythm.py [--queries 200] [--gaps 0,1,5,20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

# As nooa-mcp runs it: one BLAS thread (`storage.vectors.single_threaded_blas`).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

sys.path.insert(0, str(Path(__file__).parent))

from stdio_workload import questions

from nooa_mcp.embeddings import MiniLMEmbedder

#: Runs before any timing (the session's first runs allocate and warm its threads).
WARM = 20


def one_thread(embedder: MiniLMEmbedder) -> MiniLMEmbedder:
    """`embedder` with its session rebuilt on one intra-op thread (same file and settings)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.enable_cpu_mem_arena = False
    options.intra_op_num_threads = 1
    embedder._session = ort.InferenceSession(
        str(embedder.model_path), sess_options=options, providers=["CPUExecutionProvider"]
    )
    return embedder


def p50_after(embedder: MiniLMEmbedder, asked: list[str], gap_ms: float) -> float:
    """The median run over `asked`, each after `gap_ms` of sleep (0: back to back)."""
    took = []
    for query in asked:
        if gap_ms:
            time.sleep(gap_ms / 1000)
        start = time.perf_counter()
        embedder._run([query])
        took.append((time.perf_counter() - start) * 1000)
    return statistics.median(took)


def main(args: argparse.Namespace) -> None:
    asked = questions()[: args.queries]
    gaps = [float(g) for g in args.gaps.split(",")]
    print(f"load {os.getloadavg()[0]:.2f}; {len(asked)} LoCoMo questions, one run each per gap")
    for label, embedder in (
        ("shipped session (2 threads)", MiniLMEmbedder()),
        ("one intra-op thread", one_thread(MiniLMEmbedder())),
    ):
        for query in asked[:WARM]:
            embedder._run([query])
        cells = [f"{g:g} ms idle: {p50_after(embedder, asked, g):.2f}" for g in gaps]
        print(f"  {label:28s} p50 ms  " + "   ".join(cells))
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--gaps", default="0,1,5,20", help="idle ms before each run")
    main(parser.parse_args())
