"""Ranking parity: the same store on SQLite and on PostgreSQL gives the same top-10.

For each LoCoMo conversation: every turn is authored into a fresh SQLite store (one memory a
turn, as `eval locomo --ingest tool` writes them), every question is recalled once there (so
the store holds accesses), the store is copied with `migrate` into a fresh PostgreSQL schema,
and each question is then explained (a dry run, nothing logged) on both. A question counts as
identical when the ten ids come back in the same order.

    python benchmarks/ranking_parity.py /work/shared/data/locomo/locomo10_dev.json \
        [--postgres URL] [--conversations N] [--embedder minilm|hash]

Prints one line per conversation and the share of questions with identical top-10; the
differing questions are listed with the first rank where the two backends part.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import uuid
from pathlib import Path

import psycopg

from nooa_mcp import Memory, Settings
from nooa_mcp.evaluation.locomo import load_locomo
from nooa_mcp.storage.migrate import migrate

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
OWNER = "eval@parity"
TOP = 10


def schema_url(base: str, schema: str) -> str:
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options=-csearch_path%3D{schema}"


def make_embedder(name: str):
    if name == "hash":
        from nooa_mcp.embeddings import HashEmbedder

        return HashEmbedder(384)
    from nooa_mcp.embeddings import MiniLMEmbedder

    return MiniLMEmbedder()


async def top_ids(target: str | Path, embedder, questions: list[str]) -> list[list[str]]:
    settings = Settings(store=target, owner=OWNER)
    async with Memory.open(settings=settings, embedder=embedder) as mem:
        out = []
        for text in questions:
            ranked = await mem.explain(text, k=TOP)
            out.append([r.id for r in ranked.rows[:TOP]])
        return out


async def conversation(conv, base: str, embedder, work: Path) -> tuple[int, list[str]]:
    source = work / f"{conv.sample_id}.sqlite"
    settings = Settings(store=source, owner=OWNER)
    questions = [q.text for q in conv.questions]
    async with Memory.open(settings=settings, embedder=embedder) as mem:
        await mem.author_many([t.memory_spec() for t in conv.turns])
        for text in questions:
            await mem.recall(text)
    schema = f"nooa_parity_{uuid.uuid4().hex[:10]}"
    target = schema_url(base, schema)
    try:
        await migrate(source, target)
        on_sqlite = await top_ids(source, embedder, questions)
        on_pg = await top_ids(target, embedder, questions)
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    differing = []
    for q, a, b in zip(conv.questions, on_sqlite, on_pg, strict=True):
        if a != b:
            parted = (i + 1 for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
            rank = next(parted, min(len(a), len(b)) + 1)
            differing.append(f"{q.qid}: from rank {rank}: {q.text}")
    return len(questions), differing


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--postgres", default=DEFAULT_PG)
    parser.add_argument("--conversations", type=int, default=None)
    parser.add_argument("--embedder", choices=["minilm", "hash"], default="minilm")
    args = parser.parse_args()
    convs = load_locomo(args.file)[: args.conversations]
    embedder = make_embedder(args.embedder)
    total = same = 0
    with tempfile.TemporaryDirectory() as tmp:
        for conv in convs:
            n, differing = await conversation(conv, args.postgres, embedder, Path(tmp))
            total += n
            same += n - len(differing)
            print(f"{conv.sample_id}: {n - len(differing)}/{n} identical top-{TOP}", flush=True)
            for line in differing:
                print(f"  differs {line}", flush=True)
    print(f"identical top-{TOP}: {same}/{total} = {100 * same / max(total, 1):.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
