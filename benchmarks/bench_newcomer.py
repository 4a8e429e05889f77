"""Ranking on a newcomer's store: where recall puts the memory that answers each question.

Spawns the server over MCP stdio (the Python SDK's client) with a fresh store and HOME, writes
every memory of newcomer/dataset.json through memory_author (links through its `links`
argument), waits until memory_recall no longer says the model is warming, then asks every
question through memory_recall (k=10, other arguments default). It prints the rank of the first
expected memory per question (and the source, dense / keyword / both, of that hit; W when it
is flagged weak), then R@1, R@5, MRR and the misses, the same split by source, and for each
question answered by a revised decision whether the old version is in the top 5.

    python benchmarks/bench_newcomer.py                            # the installed nooa-mcp
    python benchmarks/bench_newcomer.py --cmd "python -m nooa_mcp" --env PYTHONPATH=/checkout
    python benchmarks/bench_newcomer.py --explain 5                # memory_explain the 5 worst
    python benchmarks/bench_newcomer.py --cosine-baseline --json-out newcomer.json

--cosine-baseline also ranks each question by cosine alone (memory_explain k=50 sorted by
cos), to compare against. The real model is used: HF_HUB_OFFLINE=1 unless set, and the
caller's Hugging Face cache stays reachable under the fresh HOME.

Data: newcomer/dataset.json (124 memories, 60 questions), written by
newcomer/make_dataset.py. It was written for this project by a helper as data nobody had
tuned ranking on: a store as a model would author it for a new user, and questions asked
in other words than the memories'. Whoever tunes ranking on it should say so beside the
figures, as they are then no longer held-out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import CallToolResult

DATASET = Path(__file__).parent / "newcomer" / "dataset.json"
#: Hits asked of memory_recall per question: a miss is a question not answered in these.
K = 10
#: Relations by which a memory revises the one it links to.
REVISIONS = ("refines", "contradicts")


def payload(result: CallToolResult) -> dict[str, Any]:
    """The structured content of a tool result; a tool error raises."""
    if result.is_error:
        raise RuntimeError(f"tool error: {' '.join(c.text for c in result.content)}")
    return result.structured_content


def server_env(extra: list[str], home: str) -> dict[str, str]:
    """This process's environment with a fresh HOME, no NOOA_STORE, and `extra` KEY=VALs."""
    env = dict(os.environ, HOME=home)
    env.pop("NOOA_STORE", None)
    env.setdefault("HF_HUB_OFFLINE", "1")
    cache = Path.home() / ".cache" / "huggingface"
    if "HF_HOME" not in env and cache.is_dir():
        env["HF_HOME"] = str(cache)
    for pair in extra:
        key, _, value = pair.partition("=")
        env[key] = value
    return env


async def author(session: ClientSession, memories: list[dict[str, Any]]) -> dict[str, str]:
    """Write `memories` in order; their keys mapped to the ids the server gave them. Fields the
    server's memory_author does not take (an older build's) are left out."""
    tools = {t.name: t for t in (await session.list_tools()).tools}
    accepted = tools["memory_author"].input_schema.get("properties", {})
    ids: dict[str, str] = {}
    for memory in memories:
        arguments = {k: v for k, v in memory.items() if k in accepted and k != "links"}
        if memory.get("links") and "links" in accepted:
            arguments["links"] = [
                {"target": ids[link["target"]], "relation": link["relation"]}
                for link in memory["links"]
            ]
        res = payload(await session.call_tool("memory_author", arguments))
        if res.get("status") not in ("created", "exists", "revived"):
            print(f"WARN write {memory['key']}: {res}", file=sys.stderr)
        ids[memory["key"]] = res["id"]
    return ids


async def wait_warm(session: ClientSession, tries: int = 600) -> bool:
    """Whether the embedding model was ready within `tries` half-second polls."""
    for _ in range(tries):
        res = payload(await session.call_tool("memory_recall", {"query": "warmup probe", "k": 1}))
        if res.get("embeddings") != "warming":
            return True
        await asyncio.sleep(0.5)
    return False


def first_rank(keys: list[str], expected: set[str]) -> int | None:
    """1-based rank of the first of `expected` in `keys`, None when absent."""
    return next((i + 1 for i, key in enumerate(keys) if key in expected), None)


def scores(ranks: list[int | None]) -> tuple[float, float, float]:
    """R@1, R@5 and MRR of `ranks` (None: a miss)."""
    n = len(ranks)
    return (
        sum(r == 1 for r in ranks) / n,
        sum(r is not None and r <= 5 for r in ranks) / n,
        sum(1 / r for r in ranks if r) / n,
    )


async def cosine_rank(
    session: ClientSession, query: str, expected: set[str], key_of: dict[str, str]
) -> int | None:
    """Rank of the first expected memory among memory_explain's 50 rows sorted by cosine."""
    rows = payload(await session.call_tool("memory_explain", {"query": query, "k": 50}))["rows"]
    by_cos = sorted((r for r in rows if r.get("cos") is not None), key=lambda r: -r["cos"])
    return first_rank([key_of.get(r["id"], r["id"]) for r in by_cos], expected)


async def explain(
    session: ClientSession,
    question: dict[str, Any],
    number: int,
    rank: int | None,
    ids: dict[str, str],
    key_of: dict[str, str],
    k: int,
) -> dict[str, Any]:
    """Print memory_explain's dry run for a question and why its first answer ranks where it
    does; both replies returned."""
    query, answers = question["q"], question["answers"]
    ranked = payload(await session.call_tool("memory_explain", {"query": query, "k": k}))
    why = payload(
        await session.call_tool("memory_explain", {"query": query, "memory_id": ids[answers[0]]})
    )
    print(f"\n=== Q{number} rank={rank or 'miss'}: {query}  want={answers}")
    for row in ranked.get("rows", []):
        key = key_of.get(row["id"], row["id"][:8])
        mark = "*" if key in answers else " "
        print(
            f" {mark}{row['rank']:2d} {key:14s} score={row['score']:.3f} src={row['source']} "
            f"cos={row['cos']} rel={row['rel']:.3f} rec={row['rec']:.3f} imp={row['imp']:.3f} "
            f"spread={row['spread']:.3f} terms={json.dumps(row.get('terms'))[:300]} "
            f"flags={row.get('flags')}"
        )
    print(" why_not:", json.dumps({k: v for k, v in why.items() if k != "rows"})[:1500])
    for row in why.get("rows", [])[:3]:
        print("   ", json.dumps(row)[:800])
    return {"q": number, "query": ranked, "why": why}


async def run(session: ClientSession, args: argparse.Namespace, out: dict[str, Any]) -> int:
    """Author the dataset, ask every question and print the results into `out` (see the module
    docstring); the exit status."""
    dataset = json.loads(args.dataset.read_text(encoding="utf-8"))
    questions = dataset["questions"]
    ids = await author(session, dataset["memories"])
    key_of = {v: k for k, v in ids.items()}
    if not await wait_warm(session):
        print("model never left warming", file=sys.stderr)
        return 2

    ranks: list[int | None] = []
    cos_ranks: list[int | None] = []
    for i, question in enumerate(questions):
        hits = payload(await session.call_tool("memory_recall", {"query": question["q"], "k": K}))[
            "hits"
        ]
        got = [key_of.get(h["id"], h["id"][:8]) for h in hits]
        expected = set(question["answers"])
        rank = first_rank(got, expected)
        hit = hits[rank - 1] if rank else {}
        source = hit["components"]["source"] if rank else "-"
        weak = bool(rank and hit["flags"]["weak"])
        ranks.append(rank)
        if args.cosine_baseline:
            cos_ranks.append(await cosine_rank(session, question["q"], expected, key_of))
        out["questions"].append(
            {
                "i": i,
                "q": question["q"],
                "answers": question["answers"],
                "rank": rank,
                "source": source,
                "weak": weak,
                "top": got[:5],
            }
        )
        print(
            f"{i:2d} {'miss' if rank is None else rank:>4} {source:6s}{'W' if weak else ' '} "
            f"{question['q'][:66]:66s} want={','.join(question['answers'])} "
            f"top={','.join(got[:3])}"
        )

    n = len(ranks)
    r1, r5, mrr = scores(ranks)
    misses = ranks.count(None)
    print(f"\nN={n}  R@1={r1:.3f}  R@5={r5:.3f}  MRR={mrr:.3f}  misses(k={K})={misses}")
    out.update(R1=r1, R5=r5, MRR=mrr, misses=misses, n=n)
    by_source: dict[str, list[int | None]] = {}
    for rank, row in zip(ranks, out["questions"], strict=True):
        by_source.setdefault(row["source"], []).append(rank)
    for source, some in sorted(by_source.items()):
        s1, _, smrr = scores(some)
        print(f"  answer source={source:6s} n={len(some):2d}  R@1={s1:.3f}  MRR={smrr:.3f}")
    if args.cosine_baseline:
        c1, c5, cmrr = scores(cos_ranks)
        print(
            "  cosine-only baseline (memory_explain k=50, sorted by cos): "
            f"R@1={c1:.3f}  R@5={c5:.3f}  MRR={cmrr:.3f}"
        )
        out.update(cos_R1=c1, cos_R5=c5, cos_MRR=cmrr, cos_ranks=cos_ranks)
    revised = {
        m["key"]: link["target"]
        for m in dataset["memories"]
        for link in m.get("links", [])
        if link["relation"] in REVISIONS
    }
    for row in out["questions"]:
        for answer in row["answers"]:
            if answer in revised:
                old = revised[answer]
                print(
                    f"  revision Q{row['i']}: {answer} rank={row['rank']}; "
                    f"old {old} in top5={old in row['top']}"
                )

    worst = sorted(range(n), key=lambda j: (-(ranks[j] or 99), j))[: args.explain]
    worst += [j for j in args.explain_q if j not in worst]
    if worst:
        out["explain"] = [
            await explain(session, questions[j], j, ranks[j], ids, key_of, args.explain_k)
            for j in worst
        ]
    return 0


async def main(args: argparse.Namespace) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="newcomer-"))
    home = workdir / "home"
    home.mkdir()
    cmd = shlex.split(args.cmd)
    params = StdioServerParameters(
        command=cmd[0],
        args=[*cmd[1:], "--store", str(workdir / "memory.sqlite")],
        env=server_env(args.env, str(home)),
    )
    out: dict[str, Any] = {"questions": []}
    try:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await run(session, args, out)
    finally:
        if args.json_out:
            args.json_out.write_text(json.dumps(out, indent=1))
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cmd", default="nooa-mcp", help="server command (default nooa-mcp)")
    parser.add_argument(
        "--env", action="append", default=[], metavar="KEY=VAL", help="extra env for the server"
    )
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--explain", type=int, default=0, help="memory_explain the N worst")
    parser.add_argument("--explain-k", type=int, default=10, help="rows per explain")
    parser.add_argument(
        "--explain-q",
        type=lambda s: [int(x) for x in s.split(",") if x.strip()],
        default=[],
        help="also explain these question numbers (comma-separated)",
    )
    parser.add_argument(
        "--cosine-baseline",
        action="store_true",
        help="also rank each question by cosine alone (memory_explain k=50)",
    )
    parser.add_argument("--json-out", type=Path, help="write per-question results here")
    sys.exit(asyncio.run(main(parser.parse_args())))
