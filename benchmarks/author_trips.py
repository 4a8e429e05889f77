"""Round trips and time of one `Memory.author` (the memory_author tool's path) on each backend.

    python benchmarks/author_trips.py --store postgresql://postgres@127.0.0.1/test [--trace]

Hash embedder (no model), a fresh SQLite file and a fresh PostgreSQL schema, `--n` authors of
distinct texts each, alternating backends; prints per backend the median round trips per
author (`round_trips.py`: hops to SQLite's connection thread, statements sent to PostgreSQL)
and the median milliseconds, with the PostgreSQL/SQLite ratio and the machine's load.
`--trace` prints the statements of one PostgreSQL author. `--clients N` then measures
memories per second with N clients authoring at once into each backend (the hash embedder
leaves the store's work: what four clients of bench_backends.py wait on besides the model).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import anyio
from bench_recall import drop_pg_schema, pg_schema_target
from round_trips import RoundTrips

from nooa_mcp.config import Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.memory import Memory

SCHEMA = "nooa_bench_author_trips"


def _trace() -> Any:
    """Print each statement psycopg sends (outside pipelines: one per round trip)."""
    import psycopg

    original = psycopg.AsyncCursor.execute

    async def execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        text = query if isinstance(query, str) else repr(query)
        flag = " (pipelined)" if self._conn._pipeline else ""
        print(f"    {' '.join(text.split())[:110]}{flag}")
        return await original(self, query, *args, **kwargs)

    psycopg.AsyncCursor.execute = execute  # type: ignore[method-assign]
    return lambda: setattr(psycopg.AsyncCursor, "execute", original)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True, help="postgresql://… URL of a scratch database")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--trace", action="store_true")
    ap.add_argument("--clients", type=int, default=0)
    args = ap.parse_args()
    drop_pg_schema(args.store, SCHEMA)
    with tempfile.TemporaryDirectory() as tmp:
        targets: dict[str, Any] = {
            "sqlite": Path(tmp) / "trips.sqlite",
            "postgres": pg_schema_target(args.store, SCHEMA),
        }
        trips: dict[str, list[int]] = {b: [] for b in targets}
        ms: dict[str, list[float]] = {b: [] for b in targets}
        try:
            async with (
                Memory.open(
                    targets["sqlite"],
                    owner="bench",
                    embedder=HashEmbedder(384),
                    settings=Settings(reflect_every_writes=0, reflect_idle_seconds=0),
                ) as lite,
                Memory.open(
                    targets["postgres"],
                    owner="bench",
                    embedder=HashEmbedder(384),
                    settings=Settings(reflect_every_writes=0, reflect_idle_seconds=0),
                ) as pg,
            ):
                mems = {"sqlite": lite, "postgres": pg}
                for b, mem in mems.items():  # warm up: the first write opens what it needs
                    for i in range(5):
                        await mem.author(f"warm-up note {i} for {b}")
                if args.trace:
                    undo = _trace()
                    print("  one PostgreSQL author:")
                    await pg.author("a traced note about the harbour ferry timetable")
                    await pg.engine.flush()
                    undo()
                with RoundTrips() as counter:
                    for i in range(args.n):
                        for b in mems if i % 2 == 0 else reversed(list(mems)):
                            await mems[b].engine.flush()
                            counter.take()
                            started = time.perf_counter()
                            await mems[b].author(f"note {i} about topic {i * 7919 % 1000} ({b})")
                            ms[b].append((time.perf_counter() - started) * 1000)
                            await mems[b].engine.flush()
                            trips[b].append(sum(counter.take()))
                rates: dict[str, list[float]] = {b: [] for b in mems}
                for r in range(6 if args.clients else 0):
                    for b in mems if r % 2 == 0 else reversed(list(mems)):
                        rates[b].append(
                            await clients_rate(mems[b], args.clients, args.n, f"{b}{r}")
                        )
        finally:
            drop_pg_schema(args.store, SCHEMA)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"author x{args.n}, hash embedder, load {load}")
    for b in targets:
        print(
            f"  {b:9} round trips/author p50 {statistics.median(trips[b]):4.0f} "
            f"(max {max(trips[b])}), ms p50 {statistics.median(ms[b]):6.2f}"
        )
    ratio = statistics.median(ms["postgres"]) / statistics.median(ms["sqlite"])
    print(f"  postgres/sqlite ms p50: {ratio:.2f}x")
    if args.clients:
        med = {b: statistics.median(v) for b, v in rates.items()}
        print(
            f"  {args.clients} clients, memories/s (median of {len(rates['sqlite'])} rounds): "
            f"sqlite {med['sqlite']:.1f}  postgres {med['postgres']:.1f}  "
            f"PG / SQLite {med['postgres'] / med['sqlite']:.2f}"
        )


async def clients_rate(mem: Memory, clients: int, n: int, tag: str) -> float:
    """Memories per second with `clients` tasks each authoring its share of `n` at once."""

    async def client(c: int) -> None:
        for i in range(c, n, clients):
            await mem.author(f"client {c} writes note {i} of round {tag}")

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for c in range(clients):
            tg.start_soon(client, c)
    spent = time.perf_counter() - started
    await mem.engine.flush()
    return n / spent


if __name__ == "__main__":
    anyio.run(main)
