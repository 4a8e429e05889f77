"""The least a recall server can do: embed the query and take the top k of one product.

A bare MCP server (the SDK's `MCPServer`, stdio) with one tool named as nooa's,
`memory_recall(query, k)`: it embeds the query with the same model as nooa-mcp (in a worker
thread, as an async server must), multiplies it with every stored vector of a nooa store
(read once at start, live rows only; nooa's own product, split across the cores for a large
matrix), and returns the k nearest ids and cosines. No keywords, no scoring, no log.

bench_stdio's floor adds a query embedded back to back in a plain loop to a bare tool call;
served one call at a time, the model runs in a server's rhythm instead (idle threads to wake,
caches the rest of the call used), which costs it more than that loop. This server measures
that rhythm: `bench_side_by_side.py STORE --a "python benchmarks/floor_server.py" --b nooa-mcp`
puts nooa beside it on the same store, the same questions, alternating blocks.

    python benchmarks/floor_server.py --store STORE [--owner ignored]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

# As nooa-mcp runs it: one BLAS thread (`storage.vectors.single_threaded_blas`).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import anyio
import numpy as np
from mcp.server.mcpserver import MCPServer

from nooa_mcp.embeddings import MiniLMEmbedder
from nooa_mcp.storage.vectors import best, product


def stored_vectors(store: Path) -> tuple[list[str], np.ndarray]:
    """The ids and float32 vectors of the store's live memories that have one."""
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT id, embedding FROM memories WHERE embedding IS NOT NULL AND archived = 0"
        ).fetchall()
    ids = [memory_id for memory_id, _ in rows]
    matrix = np.frombuffer(b"".join(blob for _, blob in rows), dtype=np.float32)
    return ids, matrix.reshape(len(ids), -1)


def serve(store: Path) -> None:
    ids, matrix = stored_vectors(store)
    model = MiniLMEmbedder()
    server = MCPServer("floor")

    @server.tool()
    async def memory_recall(query: str, k: int = 5) -> dict[str, Any]:
        """The k stored memories nearest to the query by cosine."""
        vector = (await anyio.to_thread.run_sync(model.embed, [query]))[0]
        sims = product(matrix, vector)  # nooa's kernel: split across the cores when large
        top = best(sims, k)  # nooa's top n of the cosines
        hits = [{"id": ids[row], "cos": float(sims[row])} for row in top.tolist()]
        return {"embeddings": "ready", "hits": hits}

    server.run()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", type=Path, required=True, help="a nooa-mcp SQLite store")
    parser.add_argument("--owner", help="accepted and ignored (bench_side_by_side passes it)")
    args = parser.parse_args()
    if not args.store.is_file():
        sys.exit(f"--store {args.store}: no such file.")
    serve(args.store)
