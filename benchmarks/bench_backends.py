"""SQLite beside PostgreSQL in one process, measured interleaved (issue 11).

    HF_HUB_OFFLINE=1 python benchmarks/bench_backends.py \
        --store postgresql://postgres@127.0.0.1/test --sizes 10000,100000 --dir /tmp/stores

bench_recall.py and bench_author.py measure one backend per process; on a shared machine the
load moves between two such runs by more than the backends differ. Here both stores of a
size are open in one process with one MiniLM model, and every measurement alternates between
them (SQLite first on even rounds, PostgreSQL first on odd ones), beside the floor:

- recall: `Memory.recall(q, k=5)` of a never-seen question (each backend its own questions,
  so the model's query cache never answers), after 20 warm-up questions each; with the
  store's round trips per recall (`round_trips.py`: hops to SQLite's connection threads,
  statements sent to PostgreSQL), those of the call and those of the access log written
  behind its reply, as medians;
- floor: embedding a never-seen question + one matrix-vector product over the SQLite
  store's vectors (the least any dense recall costs; the same for both backends);
- author: `Memory.author_many` of 100 fresh memories per batch into a copy of each store
  (SQLite: a file copy; PostgreSQL: a fresh schema filled with the same rows), and raw
  embedding of 100 fresh texts per round;
- clients (`--clients 4`): that many clients of one server each authoring one memory per call
  at the same time (`Memory.author`, the `memory_author` tool's path), into the same copies;
  memories per second, the backends alternating every 40 writes;
- reflect (`--reflect N`): the first reflection pass over N LoCoMo turns (MiniLM vectors),
  on identical copies: the SQLite store is filled once, then copied by file and by
  `nooa-mcp migrate` into a fresh PostgreSQL schema for each of `--reflect-runs` runs,
  the backend that goes first alternating.

The stores are those of bench_recall.py (DIR/recall-<size>.sqlite and the schema
nooa_bench_recall_<size>, filled here with the hash embedder when missing). The author copies
are dropped after each size; `--drop` also drops the recall schemas at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

import anyio
from bench_recall import drop_pg_schema, fill, pct, pg_schema_target, queries, row_count
from round_trips import RoundTrips

from nooa_mcp.config import Settings
from nooa_mcp.embeddings import HashEmbedder, MiniLMEmbedder
from nooa_mcp.evaluation.workload import generate_memories
from nooa_mcp.memory import Memory
from nooa_mcp.storage.migrate import migrate

BACKENDS = ("sqlite", "postgres")


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


async def ensure_filled(target: Path | str, size: int, schema: str | None, pg: str) -> None:
    """Fill `target` with bench_recall.py's `size` memories unless it already holds them."""
    if await row_count(target) >= size:
        return
    if schema is not None:
        drop_pg_schema(pg, schema)
    seconds = await fill(target, size, HashEmbedder(384))
    print(f"  filled {target if schema is None else schema}: {size} in {seconds:.0f} s", flush=True)


def opened(stack: AsyncExitStack, target: Path | str, model: MiniLMEmbedder):
    settings = Settings(store=target, owner="bench")
    return stack.enter_async_context(
        Memory.open(target, owner="bench", embedder=model, settings=settings)
    )


async def recall_round(
    stores: dict[str, Path | str], model: MiniLMEmbedder, size: int, n: int
) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {
        key: [] for b in BACKENDS for key in (b, f"{b} trips", f"{b} trips behind")
    }
    times["floor"] = []
    async with AsyncExitStack() as stack:
        mems = {b: await opened(stack, stores[b], model) for b in BACKENDS}
        asked = {b: queries(n + 20, f"{b}-backends-{size}") for b in BACKENDS}
        for b in BACKENDS:
            for q in asked[b][:20]:
                await mems[b].recall(q, k=5)
        index = mems["sqlite"].engine.index
        await index.sync(mems["sqlite"].engine.store)
        matrix = index.matrix[: index.size]
        floors = queries(n, f"floor-backends-{size}")
        for b in BACKENDS:
            await mems[b].engine.flush()
        with RoundTrips() as trips:
            for i in range(n):
                order = BACKENDS if i % 2 == 0 else BACKENDS[::-1]
                for b in order:
                    trips.take()
                    started = time.perf_counter()
                    await mems[b].recall(asked[b][20 + i], k=5)
                    times[b].append((time.perf_counter() - started) * 1000)
                    times[f"{b} trips"].append(sum(trips.take()))
                    await mems[b].engine.flush()
                    times[f"{b} trips behind"].append(sum(trips.take()))
                started = time.perf_counter()
                (matrix @ model.embed([floors[i]])[0]).argmax()
                times["floor"].append((time.perf_counter() - started) * 1000)
    return times


async def author_round(
    stores: dict[str, Path | str], model: MiniLMEmbedder, size: int, n: int
) -> dict[str, float]:
    """Memories per second into each backend, and raw embedding texts per second."""
    spent = dict.fromkeys((*BACKENDS, "raw"), 0.0)
    specs = {b: list(generate_memories(n, seed=7000 + size + k)) for k, b in enumerate(BACKENDS)}
    raw_texts = [s["content"] for s in generate_memories(n, seed=9000 + size)]
    async with AsyncExitStack() as stack:
        mems = {b: await opened(stack, stores[b], model) for b in BACKENDS}
        for b in BACKENDS:
            await mems[b].engine.index.sync(mems[b].engine.store)
        for r, i in enumerate(range(0, n, 100)):
            started = time.perf_counter()
            model.embed(raw_texts[i : i + 100])
            spent["raw"] += time.perf_counter() - started
            for b in BACKENDS if r % 2 == 0 else BACKENDS[::-1]:
                started = time.perf_counter()
                await mems[b].author_many(specs[b][i : i + 100])
                spent[b] += time.perf_counter() - started
    return {k: n / v for k, v in spent.items()}


async def clients_round(
    stores: dict[str, Path | str], model: MiniLMEmbedder, size: int, n: int, clients: int
) -> dict[str, float]:
    """Memories per second into each backend with `clients` authors writing at once."""
    spent = dict.fromkeys(BACKENDS, 0.0)
    specs = {b: list(generate_memories(n, seed=11000 + size + k)) for k, b in enumerate(BACKENDS)}
    step = 40
    async with AsyncExitStack() as stack:
        mems = {b: await opened(stack, stores[b], model) for b in BACKENDS}
        for b in BACKENDS:
            await mems[b].engine.index.sync(mems[b].engine.store)
        for r, i in enumerate(range(0, n, step)):
            for b in BACKENDS if r % 2 == 0 else BACKENDS[::-1]:
                chunk = specs[b][i : i + step]

                async def client(c: int, mem: Memory = mems[b], chunk: list = chunk) -> None:
                    for spec in chunk[c::clients]:
                        await mem.author(**spec)

                started = time.perf_counter()
                async with anyio.create_task_group() as tg:
                    for c in range(clients):
                        tg.start_soon(client, c)
                spent[b] += time.perf_counter() - started
            for b in BACKENDS:
                await mems[b].engine.flush()
    return {k: n / v for k, v in spent.items()}


async def reflect_round(pg: str, root: Path, size: int, runs: int) -> dict[str, list[float]]:
    """Seconds of the first reflection pass on identical copies of `size` LoCoMo turns."""
    from bench_reflect import FILL_END, OWNER, Vectors, insert, texts

    base = root / f"reflect-minilm-{size}.sqlite"
    vectors = Vectors("minilm", root / "reflect-vectors")
    if not base.exists():
        filling = base.with_suffix(".filling")
        async with Memory.open(filling, owner=OWNER, embedder=vectors.embedder) as mem:
            await insert(mem, texts(size), vectors, 0, size)
        filling.rename(base)
    out: dict[str, list[float]] = {b: [] for b in BACKENDS}
    for run in range(runs):
        schema = f"nooa_bench_reflect_{size}"
        drop_pg_schema(pg, schema)
        copies: dict[str, Path | str] = {
            "sqlite": root / f"reflect-{size}.run.sqlite",
            "postgres": pg_schema_target(pg, schema),
        }
        for suffix in ("", "-wal", "-shm"):
            Path(f"{copies['sqlite']}{suffix}").unlink(missing_ok=True)
        shutil.copy(base, copies["sqlite"])
        await migrate(base, copies["postgres"])
        try:
            for b in BACKENDS if run % 2 == 0 else BACKENDS[::-1]:
                settings = Settings(
                    store=copies[b], owner=OWNER, reflect_every_writes=0, reflect_idle_seconds=0
                )
                async with Memory.open(
                    copies[b], owner=OWNER, embedder=vectors.embedder, settings=settings
                ) as mem:
                    await mem.engine.index.sync(mem.engine.store)
                    started = time.perf_counter()
                    await mem.reflect(now=FILL_END)
                    out[b].append(time.perf_counter() - started)
        finally:
            drop_pg_schema(pg, schema)
        print(
            f"  reflect run {run + 1}: sqlite {out['sqlite'][-1]:.1f} s  "
            f"postgres {out['postgres'][-1]:.1f} s  (load {load()})",
            flush=True,
        )
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", required=True, help="the postgresql:// URL")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--dir", type=Path, required=True, help="where the SQLite stores live")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--authors", type=int, default=1000, help="memories authored per size")
    parser.add_argument("--no-author", action="store_true")
    parser.add_argument("--drop", action="store_true", help="drop the recall schemas at the end")
    parser.add_argument(
        "--clients", type=int, default=0, help="also: this many authors writing at once"
    )
    parser.add_argument(
        "--reflect", type=int, default=0, help="also: a first reflection pass over N turns"
    )
    parser.add_argument("--reflect-runs", type=int, default=3)
    parser.add_argument(
        "--no-recall", action="store_true", help="skip the recall rounds (and their fills)"
    )
    args = parser.parse_args()
    pg = args.store
    sizes = [int(x) for x in args.sizes.split(",")]
    args.dir.mkdir(parents=True, exist_ok=True)
    print(f"{time.strftime('%H:%M:%S')} load average {load()}", flush=True)
    model = MiniLMEmbedder()
    model.embed([s["content"] for s in generate_memories(64, seed=5)])
    recall_rows, author_rows, client_rows = [], [], []
    for size in [] if args.no_recall else sizes:
        stores: dict[str, Path | str] = {
            "sqlite": args.dir / f"recall-{size}.sqlite",
            "postgres": pg_schema_target(pg, f"nooa_bench_recall_{size}"),
        }
        await ensure_filled(stores["sqlite"], size, None, pg)
        await ensure_filled(stores["postgres"], size, f"nooa_bench_recall_{size}", pg)
        t = await recall_round(stores, model, size, args.queries)
        row = {"size": size, "load": load()}
        for key, values in t.items():
            row[key] = (statistics.median(values), pct(values, 99))
        recall_rows.append(row)
        print(
            f"{size:>7} recall p50/p99 ms: sqlite {row['sqlite'][0]:.1f}/{row['sqlite'][1]:.1f}"
            f"  postgres {row['postgres'][0]:.1f}/{row['postgres'][1]:.1f}"
            f"  floor {row['floor'][0]:.1f}/{row['floor'][1]:.1f}  (load {row['load']})\n"
            f"        round trips per recall, in the call + behind it: sqlite "
            f"{row['sqlite trips'][0]:.0f} + {row['sqlite trips behind'][0]:.0f}  postgres "
            f"{row['postgres trips'][0]:.0f} + {row['postgres trips behind'][0]:.0f}",
            flush=True,
        )
    for size in [] if args.no_author else [0, *sizes]:
        with tempfile.TemporaryDirectory(prefix="nooa-backends-") as tmp:
            schema = f"nooa_bench_author_{size}"
            drop_pg_schema(pg, schema)
            copies: dict[str, Path | str] = {
                "sqlite": Path(tmp) / f"author-{size}.sqlite",
                "postgres": pg_schema_target(pg, schema),
            }
            try:
                if size:
                    source = args.dir / f"recall-{size}.sqlite"
                    await ensure_filled(source, size, None, pg)
                    for suffix in ("", "-wal", "-shm"):
                        if Path(f"{source}{suffix}").exists():
                            shutil.copy(f"{source}{suffix}", f"{copies['sqlite']}{suffix}")
                    seconds = await fill(copies["postgres"], size, HashEmbedder(384))
                    print(f"  filled {schema}: {size} in {seconds:.0f} s", flush=True)
                rates = await author_round(copies, model, size, args.authors)
                if args.clients:
                    many = await clients_round(copies, model, size, args.authors, args.clients)
                    client_rows.append({"size": size, "load": load(), **many})
                    print(
                        f"{size:>7} {args.clients} clients, memories/s: sqlite "
                        f"{many['sqlite']:.1f}  postgres {many['postgres']:.1f}  "
                        f"PG / SQLite {many['postgres'] / many['sqlite']:.2f}  (load {load()})",
                        flush=True,
                    )
            finally:
                drop_pg_schema(pg, schema)
        author_rows.append({"size": size, "load": load(), **rates})
        print(
            f"{size:>7} author/s: sqlite {rates['sqlite']:.1f}  postgres {rates['postgres']:.1f}"
            f"  raw embedding {rates['raw']:.1f}  (load {load()})",
            flush=True,
        )
    reflected = None
    if args.reflect:
        reflected = await reflect_round(pg, args.dir, args.reflect, args.reflect_runs)
    if args.drop:
        for size in sizes:
            drop_pg_schema(pg, f"nooa_bench_recall_{size}")
    print(f"\n{time.strftime('%H:%M:%S')} load average {load()}\n")
    print(
        "| memories | SQLite p50 | SQLite p99 | PostgreSQL p50 | PostgreSQL p99 | floor p50 "
        "| PG p50 / SQLite p50 | round trips SQLite / PG (call + behind) | load average |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for r in recall_rows:
        trips = (
            f"{r['sqlite trips'][0]:.0f} + {r['sqlite trips behind'][0]:.0f} / "
            f"{r['postgres trips'][0]:.0f} + {r['postgres trips behind'][0]:.0f}"
        )
        print(
            f"| {r['size']:,} | {r['sqlite'][0]:.1f} | {r['sqlite'][1]:.1f} | "
            f"{r['postgres'][0]:.1f} | {r['postgres'][1]:.1f} | {r['floor'][0]:.1f} | "
            f"{r['postgres'][0] / r['sqlite'][0]:.2f} | {trips} | {r['load']} |"
        )
    if author_rows:
        print(
            "\n| store size | SQLite memories/s | PostgreSQL memories/s | raw embedding texts/s "
            "| SQLite / raw | PostgreSQL / raw | load average |"
        )
        print("|---:|---:|---:|---:|---:|---:|---|")
        for r in author_rows:
            print(
                f"| {r['size']:,} | {r['sqlite']:.1f} | {r['postgres']:.1f} | {r['raw']:.1f} | "
                f"{r['sqlite'] / r['raw']:.2f} | {r['postgres'] / r['raw']:.2f} | {r['load']} |"
            )

    if client_rows:
        print(
            f"\n| store size | SQLite memories/s, {args.clients} clients | PostgreSQL memories/s "
            "| PG / SQLite | load average |"
        )
        print("|---:|---:|---:|---:|---|")
        for r in client_rows:
            print(
                f"| {r['size']:,} | {r['sqlite']:.1f} | {r['postgres']:.1f} | "
                f"{r['postgres'] / r['sqlite']:.2f} | {r['load']} |"
            )
    if reflected:
        sq, pq = statistics.median(reflected["sqlite"]), statistics.median(reflected["postgres"])
        print(
            f"\nfirst reflection pass over {args.reflect:,} LoCoMo turns, median of "
            f"{len(reflected['sqlite'])}: SQLite {sq:.1f} s, PostgreSQL {pq:.1f} s, "
            f"PG / SQLite {pq / sq:.2f} (load {load()})"
        )


if __name__ == "__main__":
    anyio.run(main)
