"""Reflection at scale (issue 12): one role of N memories, three kinds of pass.

    HF_HUB_OFFLINE=1 python benchmarks/bench_reflect.py --sizes 10000,100000
    python benchmarks/bench_reflect.py --sizes 10000 --embedder minilm --vectors /tmp/vecs

For each size, in a fresh process (so its peak RSS is its own): a SQLite store is filled with
N memories in one role through `Store.insert` (as bench_recall.py's `fill`), then

- **first**: a pass over a store no pass has seen (the full sweep: every pair once);
- **again**: a second pass with nothing changed (`--repeat` times);
- **+200**: 200 new memories written, then a pass (`--repeat` times): the pass the server
  runs by itself every `reflect_every_writes` (200) writes.

Data: LoCoMo turns, then recombined halves of turns (stdio_workload.py), dated over 90 days
in order. Vectors matter here (they decide how many pairs there are to merge and link):
`--embedder minilm` embeds with the real model (~5 texts/s on this shared machine, so
`--vectors DIR` keeps them between runs); `--embedder hash` uses the deterministic 384-d
hash embedder (token overlap, not meaning) and says so in the table.

Prints per pass the median time, the sweep kind, the memories compared against the role and
the pairs that took, what each step applied; then the peak RSS (VmHWM) of the process and the
load average. Each pass also reports its planning time (start of the pass to its first item)
and the process's CPU seconds over the pass (all threads): on a shared, loaded machine the
wall time says how long it waited for a core, the CPU time what it cost.

`--mcp W` then drives the real `nooa-mcp` process over stdio on a copy of the store the passes
left, the way a client does: W writes, one per `memory_author` call, with the server's own pass
every 200 writes; it reports the write rate per window of 200, the passes the server ran (from
its maintenance log) and the server's RSS and peak RSS. With `--embedder hash` the stored
vectors (and the last pass's record) are labelled as MiniLM's so the server does not re-embed
the store (hours here); the new writes get MiniLM vectors, which do not pair with hash
vectors, so pair counts between new and old memories are not realistic there — the costs
(k×n sweeps, memory) are.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

import anyio
import numpy as np
from stdio_workload import LOCOMO, items

from nooa_mcp.config import Settings
from nooa_mcp.domain.accesses import apply_access, created_record
from nooa_mcp.domain.inputs import build_memory
from nooa_mcp.domain.requests import AuthorRequest
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.memory import Memory

OWNER = "bench@reflect"
WRITES = 200
#: The fill dates memories over the 90 days before this; passes judge pruning at it, so no
#: memory is old enough to be pruned (a copy driven over MCP is moved to the present).
FILL_END = datetime(2026, 4, 1, tzinfo=UTC)


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def texts(n: int) -> list[str]:
    stream = items(LOCOMO)
    return [next(stream).content for _ in range(n)]


class Vectors:
    """Embeddings of the workload texts: the hash embedder, or MiniLM cached on disk in
    chunks of 1000 (embedding 100k texts takes hours on a shared 2-core machine)."""

    def __init__(self, kind: str, cache: Path | None) -> None:
        self.kind = kind
        self.cache = cache
        self.model = None
        self.hash = HashEmbedder(384)

    @property
    def embedder(self):
        if self.kind == "hash":
            return self.hash
        if self.model is None:
            from nooa_mcp.embeddings import MiniLMEmbedder

            self.model = MiniLMEmbedder()
        return self.model

    def of(self, all_texts: list[str], start: int, stop: int) -> np.ndarray:
        if self.kind == "hash" or self.cache is None:
            return self.embedder.embed(all_texts[start:stop])
        out = []
        for chunk in range(start - start % 1000, stop, 1000):
            path = self.cache / f"{chunk:06d}.npy"
            lo, hi = max(start, chunk) - chunk, min(stop, chunk + 1000) - chunk
            block = np.load(path) if path.exists() else None
            if block is None or len(block) < hi:
                # A chunk cached by a shorter workload (2,760 texts end inside chunk 2000)
                # holds fewer rows than a longer one needs: embed the whole chunk again.
                self.cache.mkdir(parents=True, exist_ok=True)
                block = self.embedder.embed(all_texts[chunk : chunk + 1000])
                np.save(path, block)
            out.append(block[lo:hi])
        return np.concatenate(out)


async def insert(mem: Memory, all_texts: list[str], vectors: Vectors, start: int, stop: int):
    """Rows start…stop of the workload, through Store.insert, in transactions of 1000."""
    first = FILL_END - timedelta(days=90)
    step = timedelta(days=90) / max(len(all_texts), 1)
    store = mem.engine.store
    for lo in range(start, stop, 1000):
        hi = min(lo + 1000, stop)
        vecs = vectors.of(all_texts, lo, hi)
        async with store.transaction():
            for i, vector in zip(range(lo, hi), vecs, strict=True):
                record = build_memory(AuthorRequest(content=all_texts[i]), mem.owner)
                record.created_at = record.last_accessed_at = first + i * step
                access = created_record(record, mem.owner)
                apply_access(record, access, exact_k=mem.settings.recall.exact_accesses)
                await store.insert(record, vector)
                await store.append_accesses([(record.id, record.access_log[0])])
    mem.engine.index.mark_dirty()


async def timed_pass(mem: Memory) -> dict:
    started = time.perf_counter()
    cpu = time.process_time()
    first_item: list[float] = []

    async def progress(done: int, total: int, message: str) -> None:
        if not first_item:
            first_item.append(time.perf_counter() - started)

    report = await mem.reflect(progress=progress, now=FILL_END)
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        # CPU of the whole process (all threads): what the pass costs, whatever the load.
        "cpu_seconds": time.process_time() - cpu,
        "plan_seconds": first_item[0] if first_item else seconds,
        # (getattr: the script also times code from before these fields, for comparison)
        "sweep": getattr(report, "sweep", "n/a"),
        "changed": getattr(report, "changed", 0),
        "compared": getattr(report, "compared", 0),
        "applied": {s.step: s.applied for s in report.steps if s.applied},
        "status": report.status,
    }


async def one_size(size: int, kind: str, cache: Path | None, repeat: int, root: Path) -> dict:
    vectors = Vectors(kind, cache)
    all_texts = texts(size + WRITES * repeat)
    base = root / f"reflect-{kind}-{size}.sqlite"
    work = root / f"reflect-{kind}-{size}.work.sqlite"
    out: dict = {"size": size, "embedder": kind, "passes": {}, "fill_seconds": 0.0}
    if not base.exists():
        # Filled once and kept (with --dir): every run starts from a copy no pass has seen.
        t = time.perf_counter()
        filling = base.with_suffix(".filling")
        async with Memory.open(filling, owner=OWNER, embedder=vectors.embedder) as mem:
            await insert(mem, all_texts, vectors, 0, size)
        filling.rename(base)
        out["fill_seconds"] = time.perf_counter() - t
    for suffix in ("", "-wal", "-shm"):
        Path(f"{work}{suffix}").unlink(missing_ok=True)
    shutil.copy(base, work)
    settings = Settings(store=work, owner=OWNER, reflect_every_writes=0, reflect_idle_seconds=0)
    async with Memory.open(work, owner=OWNER, embedder=vectors.embedder, settings=settings) as mem:
        out["passes"]["first"] = [await timed_pass(mem)]
        out["passes"]["again"] = [await timed_pass(mem) for _ in range(repeat)]
        out["passes"]["+200"] = []
        for r in range(repeat):
            lo = size + r * WRITES
            await insert(mem, all_texts, vectors, lo, lo + WRITES)
            out["passes"]["+200"].append(await timed_pass(mem))
    out["peak_rss_mb"] = peak_rss_mb()
    out["load"] = os.getloadavg()
    return out


async def through_mcp(size: int, kind: str, root: Path, writes: int, command: str) -> dict:
    """The server over stdio on a copy of the store the in-process passes left (see the
    module docstring): writes one per call, the server's own pass every 200."""
    import sqlite3

    from stdio_client import StdioServer

    from nooa_mcp.embeddings import MiniLMEmbedder
    from nooa_mcp.services.planning import record_key

    source = root / f"reflect-{kind}-{size}.work.sqlite"
    if not source.exists():
        sys.exit(f"{source} does not exist: run the in-process benchmark with --dir first.")
    data = root / f"mcp-{kind}-{size}"
    data.mkdir(exist_ok=True)
    store = data / "store.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)
    shutil.copy(source, store)
    role = OWNER.split("@")[0]
    with sqlite3.connect(store) as db:
        # The server judges pruning at the present: bring the last uses up to it (creation
        # times stay: they are part of what the last pass's record planned over).
        shift = time.time() - FILL_END.timestamp()
        db.execute(
            "UPDATE memories SET last_accessed_at = last_accessed_at + ?, "
            "first_access_at = first_access_at + ?",
            (shift, shift),
        )
        if kind == "hash":
            # Hash vectors labelled as MiniLM's, and the last pass's record with them, so the
            # server neither re-embeds 100k texts nor sweeps the whole role again.
            label = f"{MiniLMEmbedder.name}:{MiniLMEmbedder.dim}"
            old = f"{HashEmbedder(384).name}:384"
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('embedder', ?)", (label,))
            db.execute(
                "UPDATE meta SET value = replace(value, ?, ?) WHERE key = ?",
                (f"|{old}|", f"|{label}|", record_key(role)),
            )
        logged = db.execute("SELECT coalesce(max(seq), 0) FROM maintenance_log").fetchone()[0]
    stream = items(LOCOMO)
    for _ in range(size + WRITES * 10):
        next(stream)
    out: dict = {"size": size, "embedder": kind, "writes": writes, "windows": []}
    argv = [command, "--store", str(store), "--owner", OWNER]
    server = StdioServer(argv, {"HF_HUB_OFFLINE": "1"})
    await server.start(stderr_path=data / "stderr.log")
    try:
        await server.initialize()
        deadline = time.perf_counter() + 300
        while time.perf_counter() < deadline:
            got = await server.call("memory_recall", {"query": "warm-up", "k": 1})
            if got["structuredContent"].get("embeddings") == "ready":
                break
        ready = server.stats()
        out["rss_ready_mib"], out["hwm_ready_mib"] = ready.rss_mib, ready.hwm_mib
        done = 0
        while done < writes:
            stats, t = server.stats(), time.perf_counter()
            for _ in range(min(WRITES, writes - done)):
                item = next(stream)
                await server.call(
                    "memory_author", {"content": item.content, "entities": [item.speaker]}
                )
                done += 1
            elapsed = time.perf_counter() - t
            now = server.stats()
            out["windows"].append(
                {
                    "written": done,
                    "calls_per_s": WRITES / elapsed,
                    "server_cpu_pct": 100 * (now.cpu_s - stats.cpu_s) / elapsed,
                    "rss_mib": now.rss_mib,
                    "hwm_mib": now.hwm_mib,
                    "load": os.getloadavg()[0],
                }
            )
            print(f"  mcp: {json.dumps(out['windows'][-1])}", file=sys.stderr, flush=True)
        # Let the pass the last writes asked for finish before reading the log.
        await anyio.sleep(20)
        final = server.stats()
        out["rss_mib"], out["hwm_mib"] = final.rss_mib, final.hwm_mib
    finally:
        await server.close()
    with sqlite3.connect(store) as db:
        rows = db.execute(
            "SELECT report FROM maintenance_log WHERE kind = 'reflection' AND seq > ? ORDER BY seq",
            (logged,),
        ).fetchall()
    out["passes"] = []
    for (raw,) in rows:
        r = json.loads(raw)
        span = datetime.fromisoformat(r["finished_at"]) - datetime.fromisoformat(r["started_at"])
        out["passes"].append(
            {
                "trigger": r["trigger"],
                "seconds": span.total_seconds(),
                "sweep": r["sweep"],
                "changed": r["changed"],
                "compared": r["compared"],
                "applied": r["applied"],
            }
        )
    out["load"] = os.getloadavg()
    return out


def table(runs: list[dict]) -> str:
    lines = [
        "| memories | vectors | pass | median s | CPU s | planning s | sweep | compared "
        "(memories × memories) | applied |",
        "|---:|---|---|---:|---:|---:|---|---:|---|",
    ]
    for run in runs:
        for name, passes in run["passes"].items():
            mid = statistics.median(p["seconds"] for p in passes)
            plan = statistics.median(p["plan_seconds"] for p in passes)
            cpu = statistics.median(p.get("cpu_seconds", 0.0) for p in passes)
            last = passes[-1]
            applied = ", ".join(f"{k} {v}" for k, v in last["applied"].items()) or "nothing"
            lines.append(
                f"| {run['size']:,} | {run['embedder']} | {name} (n={len(passes)}) | "
                f"{mid:.2f} | {cpu:.2f} | {plan:.2f} | {last['sweep']} | "
                f"{last['changed']:,} × all = {last['compared']:.3g} | {applied} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--embedder", choices=["hash", "minilm"], default="hash")
    parser.add_argument("--vectors", type=Path, default=None, help="MiniLM vector cache dir")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="keep the stores here")
    parser.add_argument(
        "--mcp", type=int, default=0, help="then W writes through the real server over stdio"
    )
    parser.add_argument("--command", default="nooa-mcp", help="the server command for --mcp")
    parser.add_argument("--only-mcp", action="store_true", help="skip the in-process passes")
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        root = args.dir or Path(tempfile.mkdtemp(prefix="nooa-reflect-"))
        result = anyio.run(one_size, args.one, args.embedder, args.vectors, args.repeat, root)
        print(json.dumps(result))
        return
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    runs = []
    sizes = [] if args.only_mcp else [int(x) for x in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="nooa-reflect-") as tmp:
        for size in sizes:
            cmd = [sys.executable, __file__, "--one", str(size), "--embedder", args.embedder]
            cmd += ["--repeat", str(args.repeat), "--dir", str(args.dir or tmp)]
            if args.vectors:
                cmd += ["--vectors", str(args.vectors)]
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                sys.exit(f"size {size} failed:\n{done.stderr}")
            run = json.loads(done.stdout.strip().splitlines()[-1])
            runs.append(run)
            print(
                f"{size:,}: filled in {run['fill_seconds']:.0f} s (0: kept); peak RSS "
                f"{run['peak_rss_mb']:.0f} MB; load {' '.join(f'{x:.2f}' for x in run['load'])}",
                flush=True,
            )
            for name, passes in run["passes"].items():
                for p in passes:
                    print(f"  {name}: {json.dumps(p)}", flush=True)
    if runs:
        print()
        print(table(runs))
    if args.mcp:
        if args.dir is None:
            sys.exit("--mcp needs --dir (the filled stores are copied from there)")
        for size in [int(x) for x in args.sizes.split(",")]:
            got = anyio.run(through_mcp, size, args.embedder, args.dir, args.mcp, args.command)
            print(f"\nthrough MCP at {size:,} ({args.embedder} vectors in the store):")
            print(json.dumps(got, indent=1))
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
