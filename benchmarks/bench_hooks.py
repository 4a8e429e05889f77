"""Claude Code hook latency, as whole processes, next to floors measured in the same run.

    HF_HUB_OFFLINE=1 python benchmarks/bench_hooks.py [--size 10000] [--runs 200]

A fresh store of `--size` synthetic agent memories (filled with the 384-d hash embedder, see
bench_recall.py; the hook's keyword path never embeds) plus open todos and intents (a cue one
that many prompts fire, a recurring time one) is answered by:

- `hook user-prompt`, keyword path: `nooa-mcp --store S hook user-prompt` with a new prompt
  each run (natural agent questions over the store's vocabulary), as Claude Code runs it;
- `hook session-start`, keyword path;
- `hook user-prompt --url`: the same command asking a running server (the hook route over
  the engine with the real model loaded, as `serve --transport http` mounts it);
- the server's route alone, as a `"type": "http"` hook posts to it (no process started).

Floors, in the same run: `python -c pass` (interpreter start) and `python -c "import
nooa_mcp"` (interpreter + the package root). Prints p50, p99 and p50 / floor. Targets
(issue 13): the prompt hook p50 <= 150 ms and p99 <= 400 ms on a 10k store.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_recall import pct, queries

from nooa_mcp.config import Settings
from nooa_mcp.domain.accesses import apply_access, created_record
from nooa_mcp.domain.inputs import build_memory
from nooa_mcp.domain.requests import AuthorRequest, request_of
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.evaluation.workload import generate_memories
from nooa_mcp.memory import Memory

OWNER = "claude-code"
SERVER = """
import sys, uvicorn
from contextlib import asynccontextmanager
from starlette.applications import Starlette
from nooa_mcp.config import Settings
from nooa_mcp.embeddings import default_embedder
from nooa_mcp.engine import Engine
from nooa_mcp.hooks.http import hook_route

held = {}

@asynccontextmanager
async def lifespan(app):
    settings = Settings(store=sys.argv[1])
    async with Engine.open(settings, default_embedder()) as engine:
        await engine.wait_ready()
        held["engine"] = engine
        yield

app = Starlette(routes=[hook_route(lambda: held.get("engine"))], lifespan=lifespan)
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
"""


def script() -> str:
    beside = Path(sys.executable).parent / "nooa-mcp"
    found = str(beside) if beside.exists() else shutil.which("nooa-mcp")
    if found is None:
        sys.exit("the nooa-mcp console script is not installed: pip install -e .")
    return found


async def fill(path: Path, n: int) -> float:
    """`n` synthetic memories of the hook's owner, written in bulk as bench_recall.fill does
    (rows through Store.insert, no near-duplicate search); returns seconds."""
    embedder = HashEmbedder(384)
    settings = Settings(store=path, owner=OWNER)
    started = time.perf_counter()
    async with Memory.open(path, embedder=embedder, settings=settings) as mem:
        specs = list(generate_memories(n, seed=n))
        for i in range(0, n, 1000):
            records = [
                build_memory(request_of(AuthorRequest, spec), OWNER) for spec in specs[i : i + 1000]
            ]
            vectors = embedder.embed([r.content for r in records])
            store = mem.engine.store
            async with store.transaction():
                for record, vector in zip(records, vectors, strict=True):
                    access = created_record(record, OWNER)
                    apply_access(record, access, exact_k=settings.recall.exact_accesses)
                    await store.insert(record, vector)
                    await store.append_accesses([(record.id, record.access_log[0])])
    return time.perf_counter() - started


async def extras(path: Path) -> None:
    """Open todos and intents, as a real store has them."""
    async with Memory.open(path, owner=OWNER, embedder=HashEmbedder(384)) as mem:
        for i in range(8):
            await mem.todo("add", content=f"Follow up on the release checklist item {i}")
        cue = {"cue": "deploy", "every_hours": 0.001}
        await mem.intent("add", content="Mention the migration RFC", **cue)
        past = (datetime.now(UTC) - timedelta(days=1)).isoformat()
        await mem.intent("add", content="Read the backup report", fire_at=past, every_hours=0.001)


def timed(command: list[str], payloads: list[str], env: dict[str, str]) -> list[float]:
    out = []
    for payload in payloads:
        started = time.perf_counter()
        done = subprocess.run(command, input=payload, capture_output=True, text=True, env=env)
        out.append((time.perf_counter() - started) * 1000)
        if done.returncode != 0:
            sys.exit(f"{command} failed: {done.stderr}")
    return out


def post(port: int, body: bytes) -> float:
    import http.client

    started = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("POST", "/hooks", body=body, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    response.read()
    connection.close()
    if response.status != 200:
        sys.exit(f"the hook route answered {response.status}")
    return (time.perf_counter() - started) * 1000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def row(name: str, values: list[float], floor: float) -> str:
    p50 = statistics.median(values)
    return f"| {name} | {p50:.1f} | {pct(values, 99):.1f} | {p50 / floor:.2f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--dir", type=Path, default=None, help="keep the store here")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOOA_")}
    env["HF_HUB_OFFLINE"] = "1"
    hook = script()
    with tempfile.TemporaryDirectory(prefix="nooa-bench-hooks-") as tmp:
        root = args.dir or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        path = root / f"hooks-{args.size}.sqlite"
        if not path.exists():
            seconds = anyio.run(fill, path, args.size)
            anyio.run(extras, path)
            print(f"filled {args.size} memories in {seconds:.1f} s", flush=True)
        prompts = [
            json.dumps(
                {
                    "session_id": "bench",
                    "cwd": str(root),
                    "hook_event_name": "UserPromptSubmit",
                    "prompt": f"Please check: {q}?",
                }
            )
            for q in queries(args.runs, "hooks")
        ]
        start = json.dumps({"session_id": "bench", "cwd": str(root), "source": "startup"})
        python = [sys.executable]
        floor_pass = timed([*python, "-c", "pass"], [""] * args.runs, env)
        floor_import = timed([*python, "-c", "import nooa_mcp"], [""] * args.runs, env)
        base = [hook, "--store", str(path), "--owner", OWNER, "hook"]
        prompt_ms = timed([*base, "user-prompt"], prompts, env)
        start_ms = timed([*base, "session-start"], [start] * args.runs, env)

        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(path), str(port)], env=env, stderr=subprocess.PIPE
        )
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    post(port, b"{}")
                    break
                except (OSError, SystemExit):
                    if time.monotonic() > deadline or server.poll() is not None:
                        sys.exit("the hook server did not start")
                    time.sleep(0.2)
            url = f"http://127.0.0.1:{port}"
            server_prompts = [
                json.dumps({**json.loads(p), "prompt": f"Also: {json.loads(p)['prompt']}"})
                for p in prompts
            ]
            remote_ms = timed([*base, "user-prompt", "--url", url], server_prompts, env)
            route_ms = [post(port, ("  " + p).encode()) for p in prompts]
        finally:
            server.terminate()
            server.wait()

    floor = statistics.median(floor_pass)
    load = os.getloadavg()
    print(
        f"\n{args.size:,} memories, {args.runs} runs each; load average {load[0]:.2f}, "
        f"{load[1]:.2f}, {load[2]:.2f} on {os.cpu_count()} cores\n"
    )
    print("| what | p50 ms | p99 ms | p50 / `python -c pass` |")
    print("|---|---:|---:|---:|")
    print(row("`python -c pass` (floor)", floor_pass, floor))
    print(row("`python -c 'import nooa_mcp'` (floor)", floor_import, floor))
    print(row("`hook user-prompt`, keyword path", prompt_ms, floor))
    print(row("`hook session-start`, keyword path", start_ms, floor))
    print(row("`hook user-prompt --url` (server, model)", remote_ms, floor))
    print(row("POST /hooks (an http hook; no process)", route_ms, floor))
    p50, p99 = statistics.median(prompt_ms), pct(prompt_ms, 99)
    verdict = "meets" if p50 <= 150 and p99 <= 400 else "misses"
    print(
        f"\nprompt hook, keyword path: p50 {p50:.1f} ms, p99 {p99:.1f} ms: {verdict} the "
        "target (p50 <= 150 ms, p99 <= 400 ms)"
    )


if __name__ == "__main__":
    main()
