"""A server holds the roles it serves (issue 33 item 4): vectors, bytes and RSS per server.

    HF_HUB_OFFLINE=1 python benchmarks/bench_roles.py --memories 10000 --roles 100
    HF_HUB_OFFLINE=1 python benchmarks/bench_roles.py --memories 100000 --dir /tmp/stores
    HF_HUB_OFFLINE=1 python benchmarks/bench_roles.py --store postgresql://postgres@127.0.0.1/test

One store of `--memories` memories spread evenly over `--roles` roles (owner role-NNN@bench;
synthetic agent memories with 384-d hash-embedder vectors, written through `Store.insert` as
bench_recall.py fills its stores; reused by later runs: DIR/roles-N-R.sqlite, or the schema
nooa_bench_roles_N_R, which `--drop` removes afterwards). Three fresh processes open it, each
an engine as a server opens it (no configured owner: the roles come with the callers):

- `none`: serves no role: the process with the store open and the model, the baseline;
- `served`: serves `--served` roles (one recall each, then warm recalls round robin): holds
  their rows only, each loaded by that role's first recall;
- `whole`: holds every role's rows (what every server held before), same recalls;
- `latency`: one process with both engines open, their warm recalls alternated query by
  query: the served/whole ratio of warm p50 that a loaded machine does not skew.

With `--edges E` the store gets about E random links a memory, each between two memories of
one role (a store of its own: DIR/roles-N-R-eE.sqlite, schema nooa_bench_roles_N_R_eE), and each
process reports the edges it holds for ranking (`storage.links`) and their bytes: a server holds
the edges of the roles it holds, not every edge of the store.

Per process: rows held, bytes of the index's arrays, edges held and their bytes, VmRSS and
VmHWM; the first recall of each cold role (its load included; median and max) and the load
alone; warm recall p50/p99 over `--queries` recalls (query embedding and access logging
included), and the floor: embedding the query plus one matrix-vector product over the role's
rows. Ratios: served/whole for rows, bytes, RSS above the baseline and warm p50. `--model
minilm` embeds queries with the real model (the store's vectors stay hash vectors: cost, not
quality, is measured).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

import anyio
import numpy as np
from bench_recall import drop_pg_schema, pct, pg_schema_target, queries, row_count, rss_mb

from nooa_mcp.config import Settings
from nooa_mcp.domain.accesses import apply_access, created_record
from nooa_mcp.domain.inputs import build_memory
from nooa_mcp.domain.requests import AuthorRequest, request_of
from nooa_mcp.embeddings import HashEmbedder, MiniLMEmbedder
from nooa_mcp.engine import Engine
from nooa_mcp.evaluation.workload import generate_memories
from nooa_mcp.memory import Memory

DIM = 384
BATCH = 1000


def role_name(i: int) -> str:
    return f"role-{i:03d}"


def served_roles(roles: int, served: int) -> list[str]:
    """`served` roles spread over the store's roles (not neighbours in seq order)."""
    step = max(roles // served, 1)
    return [role_name((i * step) % roles) for i in range(served)]


async def fill(target: Path | str, n: int, roles: int) -> float:
    """`n` memories, the i-th owned by role i mod `roles`; seconds taken."""
    embedder = HashEmbedder(DIM)
    started = time.perf_counter()
    settings = Settings(store=target, vector_idle_seconds=0)
    async with Engine.open(settings, embedder) as engine:
        store = engine.store
        specs = list(generate_memories(n, seed=n))
        for lo in range(0, n, BATCH):
            chunk = specs[lo : lo + BATCH]
            owners = [f"{role_name((lo + k) % roles)}@bench" for k in range(len(chunk))]
            records = [
                build_memory(request_of(AuthorRequest, dict(s)), o)
                for s, o in zip(chunk, owners, strict=True)
            ]
            vectors = embedder.embed([r.content for r in records])
            async with store.transaction():
                for record, owner, vector in zip(records, owners, vectors, strict=True):
                    access = created_record(record, owner)
                    apply_access(record, access, exact_k=settings.recall.exact_accesses)
                    await store.insert(record, vector)
                    await store.append_accesses([(record.id, record.access_log[0])])
            if lo and lo % 20000 == 0:
                print(f"    {lo} written", flush=True)
    return time.perf_counter() - started


async def link(target: Path | str, per_memory: float) -> tuple[int, float]:
    """About `per_memory` random edges a memory, each to another memory of its role (relation
    and weight random too); how many and the seconds taken."""
    from nooa_mcp.domain.schema import EdgeType
    from nooa_mcp.storage import open_store

    started = time.perf_counter()
    rng = np.random.default_rng(7)
    kinds = list(EdgeType)
    store = await open_store(target)
    try:
        rows = await store._rows("SELECT id, role FROM memories ORDER BY seq")  # type: ignore[attr-defined]
        by_role: dict[str, list[str]] = {}
        for r in rows:
            by_role.setdefault(r["role"], []).append(r["id"])
        edges = []
        for ids in by_role.values():
            if len(ids) < 2:
                continue
            counts = rng.poisson(per_memory, len(ids))
            for i, k in enumerate(counts.tolist()):
                for j in rng.integers(0, len(ids) - 1, k).tolist():
                    dst = ids[j + (j >= i)]  # any other memory of the role
                    kind = kinds[int(rng.integers(len(kinds)))]
                    edges.append((ids[i], dst, kind, round(float(rng.uniform(0.3, 1.0)), 3)))
        for lo in range(0, len(edges), 5000):
            async with store.transaction():
                await store.add_edges(edges[lo : lo + 5000])
        count = len(await store.edge_pairs(None, live_only=False))
    finally:
        await store.close()
    return count, time.perf_counter() - started


def links_held(index: Any) -> tuple[int, int, int]:
    """Edges held for ranking, the bytes of their arrays and of their ends' id table."""
    links = index.links
    ends = links.ends
    table = len(ends._data) + ends._ends.nbytes + ends._hashes.nbytes + ends._rows.nbytes
    return len(links), int(links.nbytes), int(table)


async def child(
    mode: str, target: str, roles: int, served: int, n_queries: int, model: str
) -> dict:
    """One process's figures (see the module docstring)."""
    embedder = MiniLMEmbedder() if model == "minilm" else HashEmbedder(DIM)
    settings = Settings(store=target, vector_idle_seconds=0)
    out: dict[str, Any] = {"mode": mode}
    async with Engine.open(settings, embedder) as engine:
        if model == "minilm":
            await engine.wait_ready()
        await engine.embed(["warm the model up"])
        index = engine.index
        names = served_roles(roles, served)
        mems = [Memory(engine, f"{r}@bench") for r in names]
        if mode == "whole":
            started = time.perf_counter()
            await engine.sync_vectors(None)
            out["load_all_ms"] = (time.perf_counter() - started) * 1000
        if mode != "none":
            cold, loads = [], []
            for k, mem in enumerate(mems):
                q = queries(1, f"cold-{mode}-{k}")[0]
                started = time.perf_counter()
                await mem.recall(q, k=5)
                cold.append((time.perf_counter() - started) * 1000)
                await engine.flush()
            out["first_recall_ms"] = cold
            if mode == "served":
                # The load alone: each role let go and read again, as its next first use does.
                for r in names:
                    started = time.perf_counter()
                    await _drop_and_load(engine, r)
                    loads.append((time.perf_counter() - started) * 1000)
                out["load_ms"] = loads
            for k, mem in enumerate(mems * 4):
                await mem.recall(queries(1, f"warm-{mode}-{k}")[0], k=5)
            await engine.flush()
            warm, floor = [], []
            asked = queries(n_queries, f"warm-{mode}")
            floors = queries(n_queries, f"floor-{mode}")
            codes = [index._roles[r] for r in names]
            for i, q in enumerate(asked):
                mem = mems[i % len(mems)]
                started = time.perf_counter()
                await mem.recall(q, k=5)
                warm.append((time.perf_counter() - started) * 1000)
                await engine.flush()
                rows = np.flatnonzero(index.role_code[: index.size] == codes[i % len(codes)])
                started = time.perf_counter()
                vector = (await engine.embed([floors[i]]))[0]
                (index.matrix[rows] @ vector).argmax()
                floor.append((time.perf_counter() - started) * 1000)
            out["warm_ms"] = warm
            out["floor_ms"] = floor
        out["rows"] = int(index.size)
        out["bytes"] = int(index.nbytes)
        out["edges"], out["edge_bytes"], out["ends_bytes"] = links_held(index)
        out["rss_mib"], out["hwm_mib"] = rss_mb()
    return out


async def _drop_and_load(engine: Engine, role: str) -> None:
    """Let `role` go and load it again, as its next first use does."""
    index = engine.index
    residency = index.residency
    assert residency is not None
    now = residency.clock()
    residency._used[role] = now - 10**9  # idle for ages: due at once
    residency.idle_seconds = 1.0
    index.release_idle()
    residency.idle_seconds = 0.0
    await engine.sync_vectors(frozenset({role}))


async def latency(target: str, roles: int, served: int, n_queries: int, model: str) -> dict:
    """Warm recall p50 of a served role on a server holding only the served roles beside one
    holding every role, in one process, alternated query by query (the load of a shared
    machine moves between two processes' runs by more than they differ)."""
    embedder = MiniLMEmbedder() if model == "minilm" else HashEmbedder(DIM)
    settings = Settings(store=target, vector_idle_seconds=0)
    names = served_roles(roles, served)
    out: dict[str, list[float]] = {"served": [], "whole": []}
    async with (
        Engine.open(settings, embedder) as one,
        Engine.open(settings, embedder) as every,
    ):
        if model == "minilm":
            await one.wait_ready()
        await every.sync_vectors(None)
        engines = {"served": one, "whole": every}
        mems = {k: [Memory(e, f"{r}@bench") for r in names] for k, e in engines.items()}
        asked = {k: queries(n_queries + 4 * served, f"alternate-{k}") for k in engines}
        order = list(engines)
        for i in range(n_queries + 4 * served):
            for k in order if i % 2 == 0 else order[::-1]:
                mem = mems[k][i % served]
                started = time.perf_counter()
                await mem.recall(asked[k][i], k=5)
                if i >= 4 * served:  # every role warm first
                    out[k].append((time.perf_counter() - started) * 1000)
                await engines[k].flush()
    return out


def run_child(mode: str, target: Path | str, args: argparse.Namespace) -> dict:
    argv = [sys.executable, __file__, "--child", mode, "--target", str(target)]
    argv += ["--roles", str(args.roles), "--served", str(args.served)]
    argv += ["--queries", str(args.queries), "--model", args.model]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"the {mode} process failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def med(values: list[float]) -> float:
    return float(np.median(values)) if values else float("nan")


def report(n: int, args: argparse.Namespace, res: dict[str, dict], alt: dict) -> None:
    none, served, whole = res["none"], res["served"], res["whole"]
    base = none["rss_mib"]
    print(f"\n{n} memories over {args.roles} roles, {args.served} served; load {load()}")
    print(f"{'':>8} {'rows':>8} {'index MiB':>10} {'RSS MiB':>8} {'above none':>10} {'peak':>7}")
    for name, r in res.items():
        print(
            f"{name:>8} {r['rows']:>8} {r['bytes'] / 2**20:>10.1f} {r['rss_mib']:>8.1f} "
            f"{r['rss_mib'] - base:>10.1f} {r['hwm_mib']:>7.1f}"
        )
    print(
        f"served/whole: rows {served['rows'] / whole['rows']:.3f}, index bytes "
        f"{served['bytes'] / whole['bytes']:.3f}, RSS above none "
        f"{(served['rss_mib'] - base) / max(whole['rss_mib'] - base, 1e-9):.3f}"
    )
    per_memory = whole["bytes"] / whole["rows"]
    rss_per = (whole["rss_mib"] - base) * 2**20 / whole["rows"]
    print(f"per memory held: {per_memory:.0f} B of index arrays, {rss_per:.0f} B of RSS")
    print(f"whole store loaded in {whole['load_all_ms']:.0f} ms")
    for name, r in res.items():
        total = r["edge_bytes"] + r["ends_bytes"]
        print(
            f"{name:>8} edges held {r['edges']:>8}, {r['edge_bytes'] / 2**20:.2f} MiB of edge "
            f"arrays + {r['ends_bytes'] / 2**20:.2f} MiB of their ends = {total / 2**20:.2f} MiB"
            f" ({total / max(r['edges'], 1):.1f} B an edge)"
        )
    if whole["edges"]:
        print(f"served/whole: edges held {served['edges'] / whole['edges']:.3f}")
    for name in ("served", "whole"):
        r = res[name]
        print(
            f"{name:>8} warm recall p50 {med(r['warm_ms']):.2f} ms p99 {pct(r['warm_ms'], 99):.2f}"
            f" ms, floor p50 {med(r['floor_ms']):.2f} ms, p50/floor "
            f"{med(r['warm_ms']) / med(r['floor_ms']):.2f}"
        )
    print(
        f"alternated in one process: warm recall p50 served {med(alt['served']):.2f} ms, "
        f"whole {med(alt['whole']):.2f} ms, "
        f"served/whole {med(alt['served']) / med(alt['whole']):.3f}"
        f" (p99 {pct(alt['served'], 99):.2f} / {pct(alt['whole'], 99):.2f} ms)"
    )
    print(
        f"first recall of a cold role: median {med(served['first_recall_ms']):.1f} ms, "
        f"max {max(served['first_recall_ms']):.1f} ms (whole, already loaded: median "
        f"{med(whole['first_recall_ms']):.1f} ms); the role's load alone: median "
        f"{med(served['load_ms']):.1f} ms"
    )


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", default="10000", help="comma-separated sizes")
    parser.add_argument("--roles", type=int, default=100)
    parser.add_argument("--served", type=int, default=5)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--model", choices=["hash", "minilm"], default="hash")
    parser.add_argument(
        "--edges", type=float, default=0.0, help="random same-role links a memory (about)"
    )
    parser.add_argument("--store", help="a postgresql:// URL (default: SQLite files in --dir)")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/nooa-bench-roles"))
    parser.add_argument("--drop", action="store_true", help="drop the PostgreSQL schemas after")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "latency":
        found = await latency(args.target, args.roles, args.served, args.queries, args.model)
        print(json.dumps(found))
        return
    if args.child:
        out = await child(
            args.child, args.target, args.roles, args.served, args.queries, args.model
        )
        print(json.dumps(out))
        return
    for n in [int(x) for x in args.memories.split(",")]:
        linked = f"-e{args.edges:g}" if args.edges else ""
        schema = f"nooa_bench_roles_{n}_{args.roles}{linked.replace('-', '_').replace('.', '_')}"
        if args.store:
            target: Path | str = pg_schema_target(args.store, schema)
        else:
            args.dir.mkdir(parents=True, exist_ok=True)
            target = args.dir / f"roles-{n}-{args.roles}{linked}.sqlite"
        if await row_count(target) < n:
            if args.store:
                drop_pg_schema(args.store, schema)
            elif isinstance(target, Path) and target.exists():
                target.unlink()
            print(f"filling {n} memories over {args.roles} roles ...", flush=True)
            seconds = await fill(target, n, args.roles)
            print(f"  filled in {seconds:.0f} s", flush=True)
            if args.edges:
                count, seconds = await link(target, args.edges)
                print(f"  {count} edges linked in {seconds:.0f} s", flush=True)
        res = {mode: run_child(mode, target, args) for mode in ("none", "served", "whole")}
        report(n, args, res, run_child("latency", target, args))
        if args.store and args.drop:
            drop_pg_schema(args.store, schema)


if __name__ == "__main__":
    anyio.run(main)
