"""Four clients' writes per second: SQLite, PostgreSQL notifying after COMMIT, and notifying inside.

    python benchmarks/bench_notify.py --store postgresql://postgres@127.0.0.1/test

One process, hash embedder, 4 clients authoring 200 memories per round into each of: a SQLite
file; a PostgreSQL schema whose pool asks the trigger to note the notification and sends it
right after the COMMIT (what nooa-mcp does, pg_schema `_NOTIFY_AFTER`); a second schema whose
pool does not ask, so the trigger notifies inside the transaction (before schema 5), holding
PostgreSQL's notify lock through the COMMIT's WAL flush. Rounds alternate the order; prints
the medians, each PostgreSQL variant's ratio to SQLite and the load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import anyio
from author_trips import clients_rate
from bench_recall import drop_pg_schema, pg_schema_target

from nooa_mcp.config import Settings
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.memory import Memory
from nooa_mcp.storage import postgres as pgmod


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True, help="postgresql://… URL of a scratch database")
    ap.add_argument("--rounds", type=int, default=8)
    url = ap.parse_args().store
    rounds = ap.parse_args().rounds
    for s in ("nooa_exp_after", "nooa_exp_inside"):
        drop_pg_schema(url, s)
    tmp = tempfile.mkdtemp()
    st = Settings(reflect_every_writes=0, reflect_idle_seconds=0)
    out = {"sqlite": [], "after": [], "inside": []}
    good = pgmod._configure
    try:

        def opened(schema_or_file: Any) -> Any:
            return Memory.open(schema_or_file, owner="b", embedder=HashEmbedder(384), settings=st)

        async def plain(conn: Any) -> None:
            conn.adapters.register_loader("json", pgmod.TextLoader)
            conn.adapters.register_loader("jsonb", pgmod.TextLoader)

        async with (
            opened(Path(tmp) / "x.sqlite") as lite,
            opened(pg_schema_target(url, "nooa_exp_after")) as after,
        ):
            pgmod._configure = plain  # this pool does not ask: the trigger notifies inside
            async with opened(pg_schema_target(url, "nooa_exp_inside")) as inside:
                mems = {"sqlite": lite, "after": after, "inside": inside}
                for m in mems.values():
                    for k in range(5):
                        await m.author(f"warm {k}")
                for r in range(rounds):
                    order = list(mems) if r % 2 == 0 else list(mems)[::-1]
                    for b in order:
                        out[b].append(await clients_rate(mems[b], 4, 200, f"{b}{r}"))
    finally:
        pgmod._configure = good
        for s in ("nooa_exp_after", "nooa_exp_inside"):
            drop_pg_schema(url, s)
    base = statistics.median(out["sqlite"])
    print("load", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    for v, xs in out.items():
        med = statistics.median(xs)
        rounds_text = " ".join(f"{x:.0f}" for x in xs)
        print(f"{v:8} median {med:7.1f}/s  / SQLite {med / base:.2f}   rounds: {rounds_text}")


if __name__ == "__main__":
    anyio.run(main)
