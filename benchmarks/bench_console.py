"""Console page latency on a 10k-memory store: server time per page and a full browser load.

    HF_HUB_OFFLINE=1 python benchmarks/bench_console.py [--size 10000] [--loads 30]

A fresh store is filled in-process through the facade (`author_many`, the workload's
synthetic agent memories with tags, plus links, todos, intents, recalls and reflection
passes, so every page has something to draw). It is filled with the deterministic 384-d hash
embedder (embedding 10k texts with the real model takes ~45 s and vector values do not
change the cost of anything measured; `--fill-embedder minilm` fills with the real model),
then served with the real MiniLM.

For each page:
- server: the page rendered in-process through the ASGI app (Starlette, the facade verbs,
  Jinja, the SVG geometry), `--requests` times over different memories and queries;
- floor: the facade verb(s) the page is built on, called directly (explain for search, get +
  access_log for a memory, list_memories for a list, stats + the maintenance log for stats),
  so page / floor is what the console adds;
- browser: Chromium (Debian's, through Playwright) loading the page over loopback, from the
  navigation start to the load event (HTML, CSS, JS, layout, SVG paint), `--loads` times.

Prints p50 and p90 of each, and page / floor. Target (issue 14): every page p50 <= 200 ms.
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import anyio
import httpx
import uvicorn

from nooa_mcp import Memory, Settings
from nooa_mcp.console import Console, LoopbackOnly, standalone_app
from nooa_mcp.embeddings import HashEmbedder, MiniLMEmbedder
from nooa_mcp.engine import Engine
from nooa_mcp.evaluation.workload import PROJECTS, TOOLS, generate_memories

OWNER = "bench@console"
CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def fill(path: Path, size: int, embedder: object) -> dict[str, list[str]]:
    """A store of `size` memories with the shapes every page draws; returns ids to visit."""
    rng = random.Random(size)
    settings = Settings(store=path, owner=OWNER, reflect_every_writes=0)
    ids: list[str] = []
    async with Memory.open(settings=settings, embedder=embedder) as mem:  # type: ignore[arg-type]
        specs = list(generate_memories(size, seed=size))
        for spec in specs:
            spec["tags"] = [rng.choice(PROJECTS), rng.choice(TOOLS).lower()]
        for i in range(0, size, 500):
            ids += [r.id for r in await mem.author_many(specs[i : i + 500])]
        hubs = rng.sample(ids, 200)
        for hub in hubs:
            for target in rng.sample(ids, 4):
                if target != hub:
                    await mem.link(hub, target, "related", rng.choice([0.3, 0.6, 1.0]))
        for i in range(100):
            await mem.todo("add", content=f"follow up on {rng.choice(PROJECTS)} item {i}")
        for i in range(30):
            await mem.intent("add", content=f"check {rng.choice(TOOLS)} {i}", cue=f"cue {i}")
        for q in queries(200, rng):
            await mem.recall(q, k=5)
        for _ in range(5):
            await mem.reflect(["link", "rescore", "prune"])
    return {"memories": ids, "hubs": hubs}


def queries(n: int, rng: random.Random) -> list[str]:
    forms = ["how do we use {t} in {p}", "who owns {p}", "why did {p} move to {t}"]
    return [
        rng.choice(forms).format(t=rng.choice(TOOLS), p=rng.choice(PROJECTS)) + f" {i}"
        for i in range(n)
    ]


def page_paths(ids: dict[str, list[str]], n: int, rng: random.Random) -> dict[str, list[str]]:
    """`n` URLs per page, each a different memory, query or filter."""
    qs = queries(n, rng)
    mems = rng.sample(ids["hubs"], n)
    return {
        "search": [f"/?q={q.replace(' ', '+')}" for q in qs],
        "why not #1": [
            f"/why?q={q.replace(' ', '+')}&id={m}&fragment=1" for q, m in zip(qs, mems, strict=True)
        ],
        "memory": [f"/memory/{m}" for m in mems],
        "graph (2 hops)": [f"/memory/{m}/graph" for m in mems],
        "list": ["/memories"] * n,
        "list by tag": [f"/memories?tag={rng.choice(PROJECTS)}" for _ in range(n)],
        "list by type": ["/memories?type=todo"] * n,
        "todos": ["/todos"] * n,
        "intents": ["/intents"] * n,
        "stats": ["/stats"] * n,
    }


def floors(mem: Memory, ids: dict[str, list[str]], n: int, rng: random.Random) -> dict:
    """The facade calls each page stands on, one callable per request."""
    qs = queries(n, rng)
    mems = rng.sample(ids["hubs"], n)
    tags = [rng.choice(PROJECTS) for _ in range(n)]

    async def memory(m: str) -> None:
        await mem.get(m)
        await mem.access_log(m, limit=200)

    async def todos() -> None:
        for status, limit in (("open", 50), ("done", 10), ("dropped", 10)):
            await mem.todo("list", status=status, limit=limit + 1, remind=False)

    async def stats() -> None:
        await mem.stats()
        await mem.maintenance_log("reflection", limit=60)

    return {
        "search": [lambda q=q: mem.explain(q, k=10) for q in qs],
        "why not #1": [
            lambda q=q, m=m: mem.explain(q, memory_id=m, k=1) for q, m in zip(qs, mems, strict=True)
        ],
        "memory": [lambda m=m: memory(m) for m in mems],
        "graph (2 hops)": [lambda m=m: mem.neighbourhood(m, hops=2) for m in mems],
        "list": [lambda: mem.list_memories(limit=50)] * n,
        "list by type": [lambda: mem.list_memories(type="todo", limit=50)] * n,
        "list by tag": [lambda t=t: mem.list_memories(tag=t, limit=51) for t in tags],
        "todos": [todos] * n,
        "intents": [lambda: mem.intent("list", remind=False)] * n,
        "stats": [stats] * n,
    }


async def timed(calls: list[Callable[[], Awaitable[object]]]) -> list[float]:
    out = []
    for call in calls:
        started = time.perf_counter()
        await call()
        out.append((time.perf_counter() - started) * 1000)
    return out


async def browser_loads(
    base: str, paths: dict[str, list[str]], loads: int
) -> dict[str, list[float]]:
    from playwright.async_api import async_playwright

    out: dict[str, list[float]] = {}
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 900})
        await page.goto(base + "/")  # the first load pays for the process; not counted
        for name, urls in paths.items():
            times = []
            for url in urls[:loads]:
                await page.goto(base + url, wait_until="load")
                times.append(
                    await page.evaluate(
                        "(() => { const n = performance.getEntriesByType('navigation')[0];"
                        " return n.loadEventEnd - n.startTime; })()"
                    )
                )
            out[name] = times
        await browser.close()
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--loads", type=int, default=30)
    parser.add_argument("--fill-embedder", choices=["hash", "minilm"], default="hash")
    parser.add_argument("--dir", type=Path, default=None, help="keep (and reuse) the store here")
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    model = MiniLMEmbedder()
    filler = model if args.fill_embedder == "minilm" else HashEmbedder(384)
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="nooa-bench-") as tmp:
        root = args.dir or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        path = root / f"console-{args.size}.sqlite"
        ids_file = path.with_suffix(".ids")
        if not path.exists():
            started = time.perf_counter()
            ids = await fill(path, args.size, filler)
            ids_file.write_text("\n".join(ids["hubs"]) + "\n--\n" + "\n".join(ids["memories"]))
            print(f"filled {args.size} memories in {time.perf_counter() - started:.1f} s")
        hubs, _, rest = ids_file.read_text().partition("\n--\n")
        ids = {"hubs": hubs.split(), "memories": rest.split()}
        settings = Settings(store=path, owner=OWNER, reflect_every_writes=0)
        paths = page_paths(ids, args.requests, rng)
        async with Engine.open(settings, model) as engine:
            mem = Memory(engine, OWNER)
            await mem.wait_ready()
            console = Console.for_engine(engine, LoopbackOnly(OWNER))
            async with console.running():
                app = console.app()
                transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
                server: dict[str, list[float]] = {}
                async with httpx.AsyncClient(
                    transport=transport, base_url="http://127.0.0.1"
                ) as http:
                    for urls in paths.values():  # warm: templates compiled, caches filled
                        for url in urls[:3]:
                            assert (await http.get(url)).status_code == 200, url
                    for name, urls in paths.items():
                        times = []
                        for url in urls:
                            started = time.perf_counter()
                            response = await http.get(url)
                            times.append((time.perf_counter() - started) * 1000)
                            assert response.status_code == 200, (url, response.text[:300])
                        server[name] = times
                floor = {
                    name: await timed(calls)
                    for name, calls in floors(mem, ids, args.requests, rng).items()
                }
                browser: dict[str, list[float]] = {}
                if not args.no_browser and Path(CHROMIUM).exists():
                    sock = socket.socket()
                    sock.bind(("127.0.0.1", 0))
                    sock.listen(64)
                    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
                    web = uvicorn.Server(
                        uvicorn.Config(
                            standalone_app(console, ["127.0.0.1"]),
                            log_level="warning",
                            lifespan="off",
                        )
                    )
                    async with anyio.create_task_group() as tasks:
                        tasks.start_soon(web.serve, [sock])
                        browser = await browser_loads(base, paths, args.loads)
                        web.should_exit = True
    report(args.size, server, floor, browser)


def report(size: int, server: dict, floor: dict, browser: dict) -> None:
    print(f"\nconsole pages on {size:,} memories, in ms")
    print("(server: in-process through the ASGI app; browser: navigation start to load event)\n")
    print("| page | server p50 | server p90 | floor p50 | page / floor | browser p50 | p90 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, times in server.items():
        p50 = statistics.median(times)
        cells = [name, f"{p50:.1f}", f"{pct(times, 90):.1f}"]
        f = floor.get(name)
        cells += (
            [f"{statistics.median(f):.1f}", f"{p50 / statistics.median(f):.2f}"] if f else ["—"] * 2
        )
        b = browser.get(name)
        cells += [f"{statistics.median(b):.1f}", f"{pct(b, 90):.1f}"] if b else ["—"] * 2
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    anyio.run(main)
