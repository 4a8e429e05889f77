"""nooa-mcp measured the way a client sees it: a real process, driven over MCP stdio.

    HF_HUB_OFFLINE=1 python benchmarks/bench_stdio.py                       # nooa, 10k
    python benchmarks/bench_stdio.py --server nooa --server reference --memories 10000
    python benchmarks/bench_stdio.py --phases prefill --prefill 100000 --store-dir /tmp/stores
    python benchmarks/bench_stdio.py --json > run.json

The recall targets at 1k, 10k and 100k, nooa beside the floor and the reference server, in one
command (a summary table at the end; BENCHMARKS.md, "Recall latency", S5):

    npm install --prefix /work/scratch/peers @modelcontextprotocol/server-memory   # once
    python benchmarks/bench_stdio.py --server nooa --server reference --phases floors,prefill \
        --prefill 1000,10000,100000 --store-dir /work/scratch/stores --queries 200

The reference server (`@modelcontextprotocol/server-memory`, Node 18+) is looked for under
$NOOA_BENCH_PEERS (default /work/scratch/peers). Its prefill writes its memory.jsonl directly
(instant); nooa's runs `nooa-mcp import` (the real model, ~40-100 memories/s on 2 cores: the
one slow part, paid once, since --store-dir keeps the stores and each size is seeded with the
smaller one's store).

Phases (`--phases`, default all but prefill; prefill runs when --prefill N is given):
  floors   the machine's raw MiniLM embedding rate (batch of 1, batch of 32) and the time to
           embed one query, in this process; p50 of a trivial tool call on the SDK's bare
           server (benchmarks/bare_server.py) over stdio.
  startup  spawn -> initialize -> tools/list answered, over --startup-runs fresh processes
           per server, servers interleaved, the bare server among them; ratio to bare.
  tools    bytes of name + description + inputSchema of every tool (compact JSON), with
           outputSchema too, everything the server sends, and $ref / $defs occurrences.
  ingest   from an empty store, one write per tools/call (--concurrency calls in flight) up
           to --memories stored; per --checkpoint: the write rate in that window, the
           server's CPU, recall p50/p99 over --queries questions, RSS and peak RSS of the
           server's process tree.
  prefill  a store of --prefill memories filled WITHOUT MCP (nooa: `nooa-mcp import`), then
           recall, RSS and a short write window (--prefill-writes) through MCP. Not the client
           path: labelled so. Several sizes (--prefill 1000,10000,100000) are measured in turn,
           each in a store of its own, and summed up in one table beside the floor.

Each server is left idle WARM_IDLE (3) seconds once warm (nooa: the model ready), as a client
is between calls, before ingest or recall is measured there: the figures are of a warm server.

With --recall-during-writes, a client also recalls, one query after another, while the writes
of each window are in flight: what an agent waits for while other agents write.

Data: LoCoMo (read by path, see stdio_workload.py) turns as memories, then recombined halves
of turns as long as real ones; LoCoMo questions as queries. Adapters (stdio_adapters.py) map
them onto each server's tools. The client is raw JSON-RPC lines (stdio_client.py), so no
client-library time is counted. Load average is printed at the start, at every checkpoint
and at the end: on a busy machine, read the ratios measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

from stdio_adapters import Adapter, Bare, adapter
from stdio_client import ServerError, StdioServer
from stdio_workload import LOCOMO, Item, Queries, items, questions

PHASES = ("floors", "startup", "tools", "ingest", "prefill")
#: Seconds a server is left idle after it is warm, before ingest or recall is measured.
WARM_IDLE = 3.0


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": statistics.median(values),
        "p90": pct(values, 90),
        "p99": pct(values, 99),
        "mean": statistics.fmean(values),
    }


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# --------------------------------------------------------------------------- floors


def embed_floors(texts: list[str], queries: list[str]) -> dict[str, Any]:
    """Raw MiniLM in this process: what any server embedding with it cannot beat."""
    from nooa_mcp.embeddings import MiniLMEmbedder

    started = time.perf_counter()
    model = MiniLMEmbedder()
    loaded = time.perf_counter() - started
    for text in texts[:5]:
        model.embed([text])
    ones = texts[5:205]
    started = time.perf_counter()
    for text in ones:
        model.embed([text])
    rate_1 = len(ones) / (time.perf_counter() - started)
    batches = [texts[205 + 32 * i : 237 + 32 * i] for i in range(20)]
    started = time.perf_counter()
    for batch in batches:
        model.embed(batch)
    rate_32 = 32 * len(batches) / (time.perf_counter() - started)
    query_ms = []
    for query in queries[:200]:
        started = time.perf_counter()
        model.embed([query])
        query_ms.append((time.perf_counter() - started) * 1000)
    del model
    gc.collect()
    return {
        "model_load_s": loaded,
        "batch1_per_s": rate_1,
        "batch32_per_s": rate_32,
        "query_ms": summary(query_ms),
    }


@functools.cache
def matvec_ms(rows: int) -> float:
    """p50 of one float32 matrix-vector product over `rows` 384-d vectors: the least a dense
    recall over a store of that size does besides embedding the query. Measured once per
    size and run, so every server's row at that size has the same floor (two measures taken
    minutes apart differed by 40 % at 100k)."""
    rng = np.random.default_rng(rows)
    matrix = rng.standard_normal((rows, 384), dtype=np.float32)
    vector = rng.standard_normal(384, dtype=np.float32)
    ms = []
    for _ in range(100):
        started = time.perf_counter()
        (matrix @ vector).argmax()
        ms.append((time.perf_counter() - started) * 1000)
    return statistics.median(ms)


def add_ratios(result: dict[str, Any]) -> None:
    """Each figure next to its floor from the same run: a write against embedding one text
    (batch of 1), a recall against embedding the query + a bare tool call + one
    matrix-vector product over the store's size."""
    floors = result.get("floors")
    if not floors:
        return
    embed = floors["embedding"]
    base = embed["query_ms"]["p50"] + floors["tool_call_ms"]["p50"]

    def recall_floor(recall: dict[str, Any], size: int) -> None:
        recall["floor_ms"] = base + matvec_ms(size)
        recall["p50_over_floor"] = recall["p50"] / recall["floor_ms"]

    for run in result.get("ingest", []):
        for row in run["checkpoints"]:
            row["calls_over_raw1"] = row["calls_per_s"] / embed["batch1_per_s"]
            if "recall" in row:
                recall_floor(row["recall"], row["stored"])
    for info in result.get("prefill") or []:
        recall_floor(info["recall"], info["stored"])
        if info.get("writes"):
            info["writes"]["calls_over_raw1"] = (
                info["writes"]["calls_per_s"] / embed["batch1_per_s"]
            )


async def call_floor(calls: int, workdir: Path) -> dict[str, float]:
    """A trivial tool call on the SDK's bare server: the protocol's own cost over stdio."""
    argv, env = Bare().argv(workdir)
    server = StdioServer(argv, env)
    await server.start()
    try:
        await server.initialize()
        for i in range(20):
            await server.call("echo", {"text": f"warm {i}"})
        ms = []
        for i in range(calls):
            started = time.perf_counter()
            await server.call("echo", {"text": f"call {i}"})
            ms.append((time.perf_counter() - started) * 1000)
    finally:
        await server.close()
    return summary(ms)


# --------------------------------------------------------------------------- start-up, tools


async def list_tools(server: StdioServer) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    params: dict[str, Any] | None = None
    while True:
        page = await server.request("tools/list", params)
        tools += page.get("tools", [])
        if not page.get("nextCursor"):
            return tools
        params = {"cursor": page["nextCursor"]}


async def spawn_once(server_adapter: Adapter, data_dir: Path) -> tuple[float, float, list]:
    argv, env = server_adapter.argv(data_dir)
    server = StdioServer(argv, env)
    await server.start(stderr_path=data_dir / "stderr.log")
    try:
        await server.initialize()
        initialized = time.perf_counter() - server.spawned_at
        tools = await list_tools(server)
        listed = time.perf_counter() - server.spawned_at
    finally:
        await server.close()
    return initialized, listed, tools


async def startup(adapters: list[Adapter], runs: int, workdir: Path) -> dict[str, Any]:
    """Fresh processes, servers interleaved so a change in load touches all alike. Each
    server's store was created by one uncounted spawn first (a client starts a server on a
    store that exists), which also warms the page cache."""
    dirs = {}
    for a in adapters:
        dirs[a.name] = workdir / f"startup-{a.name}"
        dirs[a.name].mkdir(parents=True, exist_ok=True)
        await spawn_once(a, dirs[a.name])
    samples: dict[str, tuple[list[float], list[float]]] = {a.name: ([], []) for a in adapters}
    tools: dict[str, list] = {}
    for i in range(runs):
        log(f"  start-up run {i + 1}/{runs}")
        for a in adapters:
            initialized, listed, tools[a.name] = await spawn_once(a, dirs[a.name])
            samples[a.name][0].append(initialized * 1000)
            samples[a.name][1].append(listed * 1000)
    out: dict[str, Any] = {}
    bare = statistics.median(samples["bare"][1])
    for name, (inits, lists) in samples.items():
        out[name] = {
            "initialize_ms": summary(inits),
            "tools_list_ms": summary(lists),
            "ratio_to_bare": statistics.median(lists) / bare,
        }
    out["_tools"] = tools
    return out


def _compact(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def tool_weight(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """What a client puts in the model's context for these tools, in bytes of compact JSON."""
    per_tool = []
    for tool in tools:
        core = {k: tool[k] for k in ("name", "description", "inputSchema") if k in tool}
        with_output = {
            **core,
            **({"outputSchema": tool["outputSchema"]} if "outputSchema" in tool else {}),
        }
        text = json.dumps(tool)
        per_tool.append(
            {
                "name": tool["name"],
                "core_bytes": _compact(core),
                "with_output_bytes": _compact(with_output),
                "full_bytes": _compact(tool),
                "refs": text.count('"$ref"'),
                "defs": text.count('"$defs"'),
            }
        )
    total = {
        key: sum(t[key] for t in per_tool)
        for key in ("core_bytes", "with_output_bytes", "full_bytes", "refs", "defs")
    }
    return {"tools": len(tools), **total, "per_tool": per_tool}


# --------------------------------------------------------------------------- ingest and recall


async def measure_recall(
    server_adapter: Adapter, server: StdioServer, queries: Queries, n: int
) -> dict[str, Any]:
    for query in queries.take(5):
        await server_adapter.recall(server, query)
    ms, hits = [], []
    for query in queries.take(n):
        started = time.perf_counter()
        hits.append(await server_adapter.recall(server, query))
        ms.append((time.perf_counter() - started) * 1000)
    out: dict[str, Any] = summary(ms)
    out["p99_over_p50"] = out["p99"] / out["p50"]
    out["mean_hits"] = statistics.fmean(hits) if min(hits) >= 0 else None
    return out


class Writer:
    """Writes memories from the stream until the server has stored a target number."""

    def __init__(self, server_adapter: Adapter, server: StdioServer, stream: Iterator[Item]):
        self.adapter = server_adapter
        self.server = server
        self.stream = stream
        self.stored = 0
        self.calls = 0
        self.errors: list[str] = []

    async def fill(self, target: int, concurrency: int) -> list[float]:
        latencies: list[float] = []

        async def worker() -> None:
            while self.stored < target:
                item = next(self.stream)
                self.calls += 1
                if self.calls > 3 * target + 100:
                    raise SystemExit(f"{self.adapter.name}: most writes were not stored; stop.")
                started = time.perf_counter()
                try:
                    stored = await self.adapter.author(self.server, item)
                except ServerError as exc:
                    self.errors.append(str(exc))
                    if len(self.errors) > 10:
                        raise SystemExit(f"{self.adapter.name}: >10 failed writes: {exc}") from None
                    continue
                latencies.append((time.perf_counter() - started) * 1000)
                self.stored += stored

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return latencies


async def window(
    writer: Writer, target: int, concurrency: int, queries: Queries | None = None
) -> dict[str, Any]:
    """Writes until `target` are stored; with `queries`, a client recalls one query after
    another while the writes are in flight (what an agent waits for while others write)."""
    stats = writer.server.stats()
    calls, stored = writer.calls, writer.stored
    during: list[float] = []
    writing = True

    async def reader() -> None:
        while writing:
            for query in queries.take(1):
                begun = time.perf_counter()
                await writer.adapter.recall(writer.server, query)
                during.append((time.perf_counter() - begun) * 1000)

    started = time.perf_counter()
    recalls = asyncio.create_task(reader()) if queries is not None else None
    try:
        latencies = await writer.fill(target, concurrency)
    finally:
        writing = False
        if recalls is not None:
            await recalls
    elapsed = time.perf_counter() - started
    after = writer.server.stats()
    return {
        "recall_during": summary(during) if during else None,
        "stored": writer.stored,
        "calls": writer.calls,
        "window_s": elapsed,
        "calls_per_s": (writer.calls - calls) / elapsed,
        "stored_per_s": (writer.stored - stored) / elapsed,
        "write_ms": summary(latencies) if latencies else None,
        "server_cpu_pct": 100 * (after.cpu_s - stats.cpu_s) / elapsed,
        "rss_mib": after.rss_mib,
        "hwm_mib": after.hwm_mib,
        "processes": after.processes,
        "load": load(),
    }


async def open_server(server_adapter: Adapter, data_dir: Path) -> tuple[StdioServer, float]:
    argv, env = server_adapter.argv(data_dir)
    server = StdioServer(argv, env)
    await server.start(stderr_path=data_dir / "stderr.log")
    log(f"  {server_adapter.name}: pid {server.pid} (attach a profiler to it), data in {data_dir}")
    await server.initialize()
    await list_tools(server)
    await server_adapter.warm(server)
    ready_s = time.perf_counter() - server.spawned_at
    # Idle a moment, as a client is between calls: what a server reads in the background
    # once it is ready (nooa-mcp: the keyword postings, read between calls) is done before
    # the figures below, which are of a warm server; `startup` measures the first calls.
    await asyncio.sleep(WARM_IDLE)
    return server, ready_s


async def ingest(server_adapter: Adapter, args: argparse.Namespace, workdir: Path) -> dict:
    data_dir = workdir / f"ingest-{server_adapter.name}"
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    server, ready_s = await open_server(server_adapter, data_dir)
    queries = Queries(questions(args.locomo))
    writer = Writer(server_adapter, server, items(args.locomo))
    concurrency = args.concurrency if server_adapter.concurrent_writes else 1
    if concurrency != args.concurrency:
        log(f"  {server_adapter.name} loses writes when calls overlap: one call at a time")
    targets = list(range(args.checkpoint, args.memories + 1, args.checkpoint))
    if not targets or targets[-1] != args.memories:
        targets.append(args.memories)
    recall_at = set(targets) if args.recall_at is None else set(args.recall_at)
    rows = []
    started = time.perf_counter()
    try:
        for target in targets:
            row = await window(
                writer, target, concurrency, queries if args.recall_during_writes else None
            )
            if target in recall_at:
                row["recall"] = await measure_recall(server_adapter, server, queries, args.queries)
                after = server.stats()
                row["rss_after_recall_mib"], row["hwm_after_recall_mib"] = (
                    after.rss_mib,
                    after.hwm_mib,
                )
            rows.append(row)
            recall = row.get("recall")
            log(
                f"  {server_adapter.name} {row['stored']:>7} stored  "
                f"{row['calls_per_s']:6.1f} calls/s  cpu {row['server_cpu_pct']:4.0f}%  "
                + (f"recall p50 {recall['p50']:.1f} p99 {recall['p99']:.1f} ms  " if recall else "")
                + f"rss {row['rss_mib']:.0f} MiB  load {row['load'][0]}"
            )
    finally:
        await server.close()
    return {
        "server": server_adapter.name,
        "concurrency": concurrency,
        "ready_s": ready_s,
        "total_s": time.perf_counter() - started,
        "errors": writer.errors[:3],
        "error_count": len(writer.errors),
        "queries_repeated": queries.repeated,
        "checkpoints": rows,
    }


async def prefilled(
    server_adapter: Adapter, args: argparse.Namespace, workdir: Path, size: int, seed: Path | None
) -> dict:
    """Fill a store without MCP until it holds `size` memories, then measure it over MCP.

    Near-duplicates are not stored, so it takes more texts than memories: texts are written
    in rounds until the count is reached. The store and a note of how far it got stay in
    --store-dir, so a later run reuses it (or tops it up) instead of filling it again. A
    store not filled yet starts as a copy of `seed`, the next smaller size's store (its
    writes through MCP included), so 1k, 10k and 100k cost one fill of 100k.
    """
    base = args.store_dir or workdir
    data_dir = base / f"prefill-{server_adapter.name}-{size}"
    reused = (data_dir / "prefilled.json").exists()
    if not reused and seed is not None:
        shutil.rmtree(data_dir, ignore_errors=True)
        shutil.copytree(seed, data_dir, ignore=shutil.ignore_patterns("stderr.log"))
        log(f"  {server_adapter.name}: {size} starts from a copy of {seed.name}")
    data_dir.mkdir(parents=True, exist_ok=True)
    marker = data_dir / "prefilled.json"
    state = (
        json.loads(marker.read_text())
        if marker.exists()
        else {"stored": 0, "texts": 0, "fill_s": 0.0}
    )
    stream = items(args.locomo)
    for _ in range(state["texts"]):
        next(stream)
    for _ in range(10):
        need = size - state["stored"]
        if need <= 0:
            break
        log(
            f"  {server_adapter.name}: {state['stored']} stored, writing {need} more texts "
            f"({server_adapter.prefill_how})"
        )
        started = time.perf_counter()
        state["stored"] += server_adapter.prefill(data_dir, [next(stream) for _ in range(need)])
        state["texts"] += need
        state["fill_s"] += time.perf_counter() - started
        marker.write_text(json.dumps(state))
    info: dict[str, Any] = {
        **state,
        "server": server_adapter.name,
        "size": size,
        "dir": str(data_dir),
        "reused": reused,
        "how": server_adapter.prefill_how,
    }
    server, info["ready_s"] = await open_server(server_adapter, data_dir)
    try:
        idle = server.stats()
        info["rss_at_start_mib"], info["hwm_at_start_mib"] = idle.rss_mib, idle.hwm_mib
        queries = Queries(questions(args.locomo))
        info["recall"] = await measure_recall(server_adapter, server, queries, args.queries)
        after = server.stats()
        info["rss_after_recall_mib"], info["hwm_after_recall_mib"] = after.rss_mib, after.hwm_mib
        if args.prefill_writes:
            # Texts past the prefill's, so the writes are new memories, not repeats.
            writer = Writer(server_adapter, server, stream)
            concurrency = args.concurrency if server_adapter.concurrent_writes else 1
            info["writes"] = await window(
                writer,
                args.prefill_writes,
                concurrency,
                queries if args.recall_during_writes else None,
            )
            state["texts"] += writer.calls
            state["stored"] += writer.stored
            marker.write_text(json.dumps(state))
        after = server.stats()
        info["rss_mib"], info["hwm_mib"], info["load"] = after.rss_mib, after.hwm_mib, load()
        if args.prefill_writes and args.settle:
            # What the writes set going (nooa: the reflection pass of the 200th write) runs
            # after the last reply: RSS once the server has been idle a while, and the peak
            # on the way, are what it holds for as long as it then stays up.
            rest = await at_rest(server, args.settle)
            info["rss_rest_mib"], info["hwm_rest_mib"], info["rest_s"] = rest
    finally:
        await server.close()
    return info


async def at_rest(server: StdioServer, longest: float) -> tuple[float, float, float]:
    """RSS and peak RSS once the server has used under 2 % of a core and moved its RSS by
    under 1 MiB for five seconds running (at most `longest` seconds), and the seconds that
    took."""
    started = time.perf_counter()
    last, quiet = server.stats(), 0
    while quiet < 5 and time.perf_counter() - started < longest:
        await asyncio.sleep(1.0)
        now = server.stats()
        still = abs(now.rss_mib - last.rss_mib) < 1 and now.cpu_s - last.cpu_s < 0.02
        quiet = quiet + 1 if still else 0
        last = now
    return last.rss_mib, last.hwm_mib, time.perf_counter() - started


# --------------------------------------------------------------------------- report


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    lines = [
        "  ".join(
            h.rjust(w) if i else h.ljust(w)
            for i, (h, w) in enumerate(zip(headers, widths, strict=True))
        )
    ]
    lines.append("  ".join("-" * w for w in widths))
    for row in cells:
        lines.append(
            "  ".join(
                c.rjust(w) if i else c.ljust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    return "\n".join(lines)


def render(result: dict[str, Any]) -> str:
    out = []
    m = result["machine"]
    out.append(
        f"bench_stdio  {m['date']}  {m['cpus']} cpus  python {m['python']}  nooa {m['revision']}"
    )
    out.append(f"load average: start {result['load_start']}  end {result['load_end']}")
    floors = result.get("floors")
    if floors:
        e = floors.get("embedding")
        out.append("\nFloors (this run)")
        rows = []
        if e:
            rows += [
                [
                    "MiniLM embed, batch of 1",
                    f"{e['batch1_per_s']:.1f} texts/s",
                    f"{1000 / e['batch1_per_s']:.1f} ms each",
                ],
                [
                    "MiniLM embed, batch of 32",
                    f"{e['batch32_per_s']:.1f} texts/s",
                    f"{1000 / e['batch32_per_s']:.1f} ms each",
                ],
                [
                    "one query embedded",
                    f"p50 {e['query_ms']['p50']:.2f} ms",
                    f"p99 {e['query_ms']['p99']:.2f} ms",
                ],
            ]
        c = floors.get("tool_call_ms")
        if c:
            rows.append(
                ["bare tool call over stdio", f"p50 {c['p50']:.2f} ms", f"p99 {c['p99']:.2f} ms"]
            )
        out.append(table(["floor", "rate or p50", "per text or p99"], rows))
    start = result.get("startup")
    if start:
        out.append(
            "\nStart-up: spawn -> initialize -> tools/list answered "
            f"({result['args']['startup_runs']} runs each, interleaved)"
        )
        rows = [
            [
                name,
                _f(s["initialize_ms"]["p50"]),
                _f(s["tools_list_ms"]["p50"]),
                _f(s["tools_list_ms"]["p90"]),
                f"{s['ratio_to_bare']:.2f}",
            ]
            for name, s in start.items()
        ]
        out.append(table(["server", "init p50 ms", "list p50 ms", "list p90 ms", "x bare"], rows))
    tools = result.get("tools")
    if tools:
        out.append("\nTool list, bytes of compact JSON over all tools")
        rows = [
            [
                name,
                t["tools"],
                t["core_bytes"],
                t["with_output_bytes"],
                t["full_bytes"],
                t["refs"],
                t["defs"],
            ]
            for name, t in tools.items()
        ]
        out.append(
            table(
                ["server", "tools", "name+desc+input", "+output", "all fields", "$ref", "$defs"],
                rows,
            )
        )
        for name, t in tools.items():
            if name == "bare":
                continue
            per = ", ".join(
                f"{p['name']} {p['core_bytes']}/{p['with_output_bytes']}" for p in t["per_tool"]
            )
            out.append(f"  {name} per tool (core/with output): {per}")
    for run in result.get("ingest", []):
        out.append(
            f"\nIngest through MCP stdio, {run['server']}: one write per call, "
            f"{run['concurrency']} in flight; recall over {result['args']['queries']} "
            "LoCoMo questions "
            f"(ready after {run['ready_s']:.1f} s; {run['total_s']:.0f} s in all; "
            f"{run['error_count']} failed calls)"
        )
        rows = []
        for r in run["checkpoints"]:
            rc = r.get("recall") or {}
            rows.append(
                [
                    r["stored"],
                    r["calls"],
                    _f(r["calls_per_s"]),
                    _f(r.get("calls_over_raw1"), 2),
                    _f(r["write_ms"]["p50"] if r["write_ms"] else None),
                    _f(r["write_ms"]["p99"] if r["write_ms"] else None),
                    f"{r['server_cpu_pct']:.0f}",
                    _f(rc.get("p50"), 2),
                    _f(rc.get("p99"), 2),
                    _f(rc.get("p99_over_p50"), 2),
                    _f(rc.get("p50_over_floor"), 1),
                    _f(rc.get("mean_hits"), 1),
                    f"{r.get('rss_after_recall_mib', r['rss_mib']):.0f}",
                    f"{r.get('hwm_after_recall_mib', r['hwm_mib']):.0f}",
                    r["load"][0],
                ]
            )
        out.append(
            table(
                [
                    "stored",
                    "calls",
                    "calls/s",
                    "x raw1",
                    "write p50",
                    "write p99",
                    "cpu%",
                    "recall p50",
                    "p99",
                    "p99/p50",
                    "x floor",
                    "hits",
                    "RSS MiB",
                    "HWM MiB",
                    "at rest",
                    "HWM",
                    "load1",
                ],
                rows,
            )
        )
        out.append(
            "  x raw1 = calls/s / raw embedding rate (batch of 1); x floor = recall p50 / (query "
            "embedding + bare tool call + one matrix-vector product at that size); cpu% = the "
            "server's process tree during the writes (200% = both cores); RSS/HWM after recall."
        )
        for r in run["checkpoints"]:
            if r.get("recall_during"):
                d = r["recall_during"]
                out.append(
                    f"  recall while the writes up to {r['stored']} ran: {d['n']} recalls, "
                    f"p50 {d['p50']:.2f} ms, p99 {d['p99']:.2f} ms"
                )
        if run["errors"]:
            out.append(f"  first errors: {run['errors']}")
    for p in result.get("prefill") or []:
        name = p["server"]
        rc = p["recall"]
        out.append(
            f"\nPrefilled store, {name}: {p['stored']} memories from {p['texts']} texts via "
            f"{p['how']} in {p['fill_s']:.0f} s{' (reused store)' if p['reused'] else ''}. "
            "NOT THE CLIENT PATH: recall and writes below are through MCP stdio."
        )
        rows = [
            [
                "recall over MCP (ms)",
                f"p50 {rc['p50']:.2f}",
                f"p99 {rc['p99']:.2f}",
                f"p99/p50 {rc['p99_over_p50']:.2f}",
                f"x floor {_f(rc.get('p50_over_floor'), 1)}, hits {rc['mean_hits']:.1f}",
            ],
            [
                "RSS / HWM at start (MiB)",
                f"{p['rss_at_start_mib']:.0f}",
                f"{p['hwm_at_start_mib']:.0f}",
                "",
                "",
            ],
            [
                "RSS / HWM after recall (MiB)",
                f"{p['rss_after_recall_mib']:.0f}",
                f"{p['hwm_after_recall_mib']:.0f}",
                "",
                "",
            ],
        ]
        w = p.get("writes")
        if w:
            rows.append(
                [
                    "writes over MCP at this size",
                    f"{w['calls_per_s']:.1f} calls/s",
                    f"p50 {_f(w['write_ms']['p50'])} ms",
                    f"cpu {w['server_cpu_pct']:.0f}%",
                    f"x raw1 {_f(w.get('calls_over_raw1'), 2)}",
                ]
            )
        during = (w or {}).get("recall_during")
        if during:
            rows.append(
                [
                    "recall while they run (ms)",
                    f"p50 {during['p50']:.2f}",
                    f"p99 {during['p99']:.2f}",
                    f"p99/p50 {during['p99'] / during['p50']:.2f}",
                    f"{during['n']} recalls",
                ]
            )
        rows.append(
            [
                "RSS / HWM after the writes (MiB)" if w else "RSS / HWM at end (MiB)",
                f"{p['rss_mib']:.0f}",
                f"{p['hwm_mib']:.0f}",
                f"load {p['load'][0]}",
                "",
            ]
        )
        if p.get("rss_rest_mib") is not None:
            rows.append(
                [
                    "RSS / HWM at rest after them (MiB)",
                    f"{p['rss_rest_mib']:.0f}",
                    f"{p['hwm_rest_mib']:.0f}",
                    f"after {p['rest_s']:.0f} s",
                    "",
                ]
            )
        out.append(table(["", "", "", "", ""], rows))
    targets = summary_table(result.get("prefill") or [])
    if targets:
        out.append(targets)
    return "\n".join(out)


def summary_table(prefill: list[dict[str, Any]]) -> str:
    """One row per prefilled size and server: recall through MCP beside the floor of the
    same run and beside the other servers at that size, the write rate, RSS after writes."""
    if not prefill:
        return ""
    rows = []
    for p in prefill:
        rc, w = p["recall"], p.get("writes") or {}
        others = [
            o["recall"]["p50"]
            for o in prefill
            if o["size"] == p["size"] and o["server"] != p["server"]
        ]
        rows.append(
            [
                p["size"],
                p["server"],
                p["stored"],
                f"{rc['p50']:.2f}",
                f"{rc['p99']:.2f}",
                f"{rc['p99_over_p50']:.2f}",
                _f(rc.get("floor_ms"), 2),
                _f(rc.get("p50_over_floor"), 2),
                " ".join(f"{rc['p50'] / o:.2f}" for o in others) or "-",
                _f(w.get("calls_per_s")),
                f"{p['rss_mib']:.0f}",
                f"{p['hwm_mib']:.0f}",
                _f(p.get("rss_rest_mib"), 0),
                _f(p.get("hwm_rest_mib"), 0),
                p["load"][0],
            ]
        )
    return "\n".join(
        [
            "\nSummary: recall through MCP stdio at each size, beside this run's floor and "
            "the other servers",
            table(
                [
                    "size",
                    "server",
                    "stored",
                    "recall p50",
                    "p99",
                    "p99/p50",
                    "floor ms",
                    "x floor",
                    "x other p50",
                    "writes/s",
                    "RSS MiB",
                    "HWM MiB",
                    "at rest",
                    "HWM",
                    "load1",
                ],
                rows,
            ),
            "  floor = one query embedded + a bare SDK tool call + one matrix-vector product "
            "at that size (floors phase); x other p50 = this p50 / the other server's p50 at "
            "that size; writes/s = --prefill-writes through MCP at that size, "
            "one call at a time unless --concurrency; RSS/HWM after those writes; at "
            "rest / HWM: RSS once the server has been idle 5 s after them (what the writes "
            "set going, a reflection pass, has run) and the peak by then (--settle).",
        ]
    )


# --------------------------------------------------------------------------- main


def revision() -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(Path(__file__).parent), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog=__doc__.split("\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--server",
        action="append",
        help="nooa (default), reference, or "
        "'name=X;cmd=COMMAND {dir};author=TOOL.ARG;recall=TOOL.ARG' (repeatable)",
    )
    parser.add_argument(
        "--nooa-command",
        default=None,
        help="the nooa-mcp executable (default: the one beside this Python)",
    )
    parser.add_argument("--phases", default=None, help=f"comma-separated, of {','.join(PHASES)}")
    parser.add_argument("--startup-runs", type=int, default=10)
    parser.add_argument("--calls", type=int, default=500, help="bare tool calls for the floor")
    parser.add_argument(
        "--memories", type=int, default=10_000, help="ingest up to this many stored"
    )
    parser.add_argument("--checkpoint", type=int, default=1000)
    parser.add_argument(
        "--recall-at",
        default=None,
        help="stored counts at which to measure recall (default: every checkpoint)",
    )
    parser.add_argument("--queries", type=int, default=200, help="recall queries per measurement")
    parser.add_argument(
        "--settle",
        type=float,
        default=180.0,
        help="after the prefill writes, wait up to this many seconds for the server to be "
        "idle and read its RSS at rest (0: do not wait)",
    )
    parser.add_argument("--concurrency", type=int, default=1, help="write calls in flight")
    parser.add_argument(
        "--recall-during-writes",
        action="store_true",
        help="also recall, one query after another, while the writes are in flight (the "
        "write rates then include that load)",
    )
    parser.add_argument(
        "--prefill",
        default="",
        help="memories in the prefilled store; comma-separated for several sizes, smallest "
        "first (e.g. 1000,10000,100000): each size is a store of its own, measured in turn",
    )
    parser.add_argument(
        "--prefill-writes",
        type=int,
        default=200,
        help="writes through MCP on the prefilled store (0: none)",
    )
    parser.add_argument(
        "--store-dir",
        type=Path,
        default=None,
        help="keep stores here; a prefilled store found here is reused",
    )
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--save", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args(argv)
    args.server = args.server or ["nooa"]
    args.phases = (
        args.phases.split(",")
        if args.phases
        else [p for p in PHASES if p != "prefill" or args.prefill]
    )
    unknown = set(args.phases) - set(PHASES)
    if unknown:
        parser.error(f"--phases: {', '.join(sorted(unknown))} unknown; use {','.join(PHASES)}")
    try:
        args.prefill = sorted({int(x) for x in str(args.prefill).split(",") if x.strip()})
    except ValueError:
        parser.error(f"--prefill {args.prefill!r}: give sizes as numbers, e.g. 1000,10000")
    if "prefill" in args.phases and not args.prefill:
        parser.error("--phases prefill needs --prefill N (how many texts to fill the store with)")
    args.recall_at = [int(x) for x in args.recall_at.split(",")] if args.recall_at else None
    if args.nooa_command is None:
        beside = Path(sys.executable).parent / "nooa-mcp"
        args.nooa_command = (
            str(beside) if beside.exists() else (shutil.which("nooa-mcp") or "nooa-mcp")
        )
    return args


async def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    servers = [adapter(spec, args.nooa_command) for spec in args.server]
    result: dict[str, Any] = {
        "machine": {
            "date": time.strftime("%Y-%m-%d %H:%M", time.localtime()),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "revision": revision(),
        },
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "load_start": load(),
    }
    if "floors" in args.phases:
        log("floors: MiniLM in this process, then a bare server over stdio")
        stream = items(args.locomo)
        texts = [next(stream).content for _ in range(900)]
        result["floors"] = {
            "embedding": embed_floors(texts, questions(args.locomo)[-300:]),
            "tool_call_ms": await call_floor(args.calls, workdir),
        }
    if "startup" in args.phases or "tools" in args.phases:
        log("start-up")
        started = await startup([Bare(), *servers], args.startup_runs, workdir)
        tools = started.pop("_tools")
        if "startup" in args.phases:
            result["startup"] = started
        if "tools" in args.phases:
            result["tools"] = {name: tool_weight(t) for name, t in tools.items()}
    if "ingest" in args.phases:
        result["ingest"] = []
        for server_adapter in servers:
            log(f"ingest: {server_adapter.name}")
            result["ingest"].append(await ingest(server_adapter, args, workdir))
    if "prefill" in args.phases:
        result["prefill"] = []
        seeds: dict[str, Path | None] = {a.name: None for a in servers}
        for size in args.prefill:
            for server_adapter in servers:
                log(f"prefill: {server_adapter.name} at {size}")
                info = await prefilled(
                    server_adapter, args, workdir, size, seeds[server_adapter.name]
                )
                seeds[server_adapter.name] = Path(info["dir"])
                result["prefill"].append(info)
    result["load_end"] = load()
    add_ratios(result)
    return result


def main() -> None:
    args = parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-stdio-") as tmp:
        workdir = args.store_dir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        result = asyncio.run(run(args, workdir))
    if args.save:
        args.save.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2) if args.json else render(result))


if __name__ == "__main__":
    main()
