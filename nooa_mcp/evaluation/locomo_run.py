"""The LoCoMo retrieval run: ingest each conversation, rank every question per variant (SPEC §13).

Each conversation goes into a fresh store under a temporary directory: one memory per turn,
dated by its session, with `precedes` edges between consecutive turns of a session. Every
store-backed variant opens the same store with its own `RecallSettings` and asks each question
through `Memory.explain` — a dry run, so no variant's accesses change another's recency and the
order of questions does not matter. RRF fuses the cosine-only and BM25-only rankings; grep
reads a markdown file of the same turns.
"""

from __future__ import annotations

import itertools
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import Settings
from ..embeddings import Embedder
from ..memory import Memory
from .grep import GrepIndex, write_markdown
from .locomo import CATEGORY_NAMES, Conversation, load_locomo
from .metrics import QuestionScore, Summary, score_question, summarise
from .variants import VARIANTS, Variant, rrf_fuse

__all__ = ["EvalReport", "run_locomo", "total_steps"]

OWNER = "eval"
#: Depth of every ranking: R@10 and MRR@10 need 10; RRF fuses deeper lists.
DEPTH = 10
FUSION_DEPTH = 50


@dataclass
class EvalReport:
    """Metrics of every variant over the questions of a LoCoMo file."""

    file: str
    conversations: int
    questions: int
    skipped_questions: int
    turns: int
    memories: int
    variants: list[Variant]
    summaries: dict[str, Summary]
    settings: dict[str, Any]
    elapsed_s: float
    per_conversation: dict[str, dict[str, Summary]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "conversations": self.conversations,
            "questions": self.questions,
            "skipped_questions": self.skipped_questions,
            "turns": self.turns,
            "memories": self.memories,
            "metric_definition": (
                "R@k: a question is a hit when any of its evidence turns is in the top k; "
                "MRR: 1/rank of the first evidence turn within the top 10, else 0; "
                "evidence_R@k: fraction of a question's evidence turns in the top k."
            ),
            "categories": {str(k): v for k, v in CATEGORY_NAMES.items() if k != 5},
            "variants": {
                v.name: {"description": v.description, **self.summaries[v.name].as_dict()}
                for v in self.variants
            },
            "settings": self.settings,
            "elapsed_s": round(self.elapsed_s, 1),
        }

    def table(self) -> str:
        """The results as fixed-width text: overall metrics, then R@5 / MRR per category."""
        cats = sorted({c for s in self.summaries.values() for c in s.by_category})
        head = f"{'variant':<12} {'R@5':>6} {'R@10':>6} {'MRR':>6} {'evR@5':>6}  "
        head += "  ".join(f"{CATEGORY_NAMES.get(c, str(c))[:11]:>11}" for c in cats)
        lines = [
            f"LoCoMo {self.file}: {self.conversations} conversations, {self.turns} turns, "
            f"{self.questions} questions ({self.skipped_questions} skipped: category 5 or "
            f"no evidence), {self.elapsed_s:.0f} s",
            "per category: R@5/MRR; n = "
            + ", ".join(
                f"{CATEGORY_NAMES.get(c, c)} {next(iter(self.summaries.values())).by_category[c].n}"
                for c in cats
            ),
            "",
            head,
            "-" * len(head),
        ]
        for v in self.variants:
            s = self.summaries[v.name]
            row = f"{v.name:<12} {s.recall[5]:6.3f} {s.recall[10]:6.3f} {s.mrr:6.3f} "
            row += f"{s.evidence_recall[5]:6.3f}  "
            row += "  ".join(
                f"{s.by_category[c].recall[5]:5.3f}/{s.by_category[c].mrr:5.3f}"
                if c in s.by_category
                else f"{'-':>11}"
                for c in cats
            )
            lines.append(row)
        lines += ["", *(f"{v.name:<12} {v.description}" for v in self.variants)]
        return "\n".join(lines)


def total_steps(conversations: Sequence[Conversation], variants: Sequence[Variant]) -> int:
    """Progress units of a run: one per question per variant, plus one per ingested turn."""
    questions = sum(len(c.questions) for c in conversations)
    return sum(len(c.turns) for c in conversations) + questions * len(variants)


def variant_settings(base: Settings, variant: Variant) -> Settings:
    """`base` with the variant's recall overrides applied (validated by pydantic)."""
    recall = base.recall.model_copy(update=variant.recall)
    return base.model_copy(update={"recall": type(base.recall).model_validate(recall)})


async def _ingest(
    mem: Memory, conv: Conversation, tick: Callable[[int], None]
) -> dict[str, list[str]]:
    """Author one memory per turn and link consecutive turns of a session; map id → turn ids."""
    turns_of: dict[str, list[str]] = {}
    results = []
    batch = 256
    for start in range(0, len(conv.turns), batch):
        chunk = conv.turns[start : start + batch]
        results += await mem.author_many([t.memory_spec() for t in chunk])
        tick(len(chunk))
    for turn, result in zip(conv.turns, results, strict=True):
        turns_of.setdefault(result.id, []).append(turn.dia_id)
    # SPEC §13: `precedes` edges between consecutive turns of a session, so activation spreads
    # from a turn that matches the question to the reply that follows it.
    edges = [
        (r1.id, {"target": r2.id, "type": "precedes", "weight": 1.0})
        for (t1, r1), (t2, r2) in itertools.pairwise(zip(conv.turns, results, strict=True))
        if t1.session == t2.session and r1.id != r2.id
    ]
    await mem.import_edges(edges)
    return turns_of


async def _rank_all(
    mem: Memory, conv: Conversation, depth: int, tick: Callable[[int], None]
) -> list[list[str]]:
    out = []
    for q in conv.questions:
        result = await mem.explain(query=q.text, k=depth)
        out.append([row.id for row in result.rows])
        tick(1)
    return out


def _grep_rankings(conv: Conversation, workdir: Path) -> list[list[str]]:
    sessions = [
        (
            f"Session {n} — {date:%d %B %Y}",
            [(t.dia_id, t.content) for t in conv.turns if t.session == n],
        )
        for n, date in sorted(conv.session_dates.items())
    ]
    index = GrepIndex.from_markdown(write_markdown(workdir / f"{conv.sample_id}.md", sessions))
    return [index.search(q.text, DEPTH) for q in conv.questions]


async def run_locomo(
    path: str | Path,
    *,
    embedder: Embedder | None = None,
    variants: Sequence[Variant] = VARIANTS,
    settings: Settings | None = None,
    conversations: Sequence[Conversation] | None = None,
    workdir: Path | None = None,
    progress: Callable[[int], None] | None = None,
) -> EvalReport:
    """Run every variant over every evaluable question of the LoCoMo file at `path`.

    Args:
        path: the LoCoMo JSON file (read by path, never copied).
        embedder: the embedding model; None loads the bundled MiniLM once for the whole run.
        variants: which rankings to compute (RRF needs cosine-only and bm25-only among them).
        settings: base settings; each variant overrides its recall constants.
        conversations: already-parsed conversations (skips reading `path`).
        workdir: where the temporary stores go; a fresh temporary directory by default.
        progress: called with a number of finished steps (see `total_steps`).

    Raises:
        InvalidInput: the file is not a LoCoMo file.
    """
    started = time.perf_counter()
    convs = list(conversations) if conversations is not None else load_locomo(path)
    tick = progress or (lambda n: None)
    if embedder is None:
        from ..embeddings import MiniLMEmbedder

        embedder = MiniLMEmbedder()
    names = {v.name for v in variants}
    needs = {"cosine-only", "bm25-only"} if "rrf" in names else set()
    scores: dict[str, list[QuestionScore]] = {v.name: [] for v in variants}
    per_conv: dict[str, dict[str, Summary]] = {}
    memories = 0
    with tempfile.TemporaryDirectory(prefix="nooa-locomo-", dir=workdir) as tmp:
        root = Path(tmp)
        for conv in convs:
            store = root / f"{conv.sample_id}.sqlite"
            base = (settings or Settings()).model_copy(
                # One memory per turn (SPEC §13): near-duplicate merging would fold repeated
                # small talk into one memory, so it is switched off for the ingest.
                update={"store": store, "owner": OWNER, "dedup_similarity": 1.01}
            )
            async with Memory.open(store, owner=OWNER, embedder=embedder, settings=base) as mem:
                await mem.wait_ready()
                turns_of = await _ingest(mem, conv, tick)
            memories += len(turns_of)
            rankings: dict[str, list[list[str]]] = {}
            for v in variants:
                if v.kind == "memory" or v.name in needs:
                    depth = FUSION_DEPTH if v.name in needs else DEPTH
                    vs = variant_settings(base, v)
                    async with Memory.open(store, owner=OWNER, embedder=embedder, settings=vs) as m:
                        ids = await _rank_all(m, conv, depth, tick)
                    rankings[v.name] = [[t for i in r for t in turns_of.get(i, [])] for r in ids]
                elif v.kind == "rrf":
                    pairs = zip(rankings["cosine-only"], rankings["bm25-only"], strict=True)
                    rankings[v.name] = [rrf_fuse([a, b]) for a, b in pairs]
                    tick(len(conv.questions))
                else:
                    rankings[v.name] = _grep_rankings(conv, root)
                    tick(len(conv.questions))
            per_conv[conv.sample_id] = {}
            for v in variants:
                conv_scores = [
                    score_question(ranked[:DEPTH], q.evidence, q.category)
                    for q, ranked in zip(conv.questions, rankings[v.name], strict=True)
                ]
                scores[v.name] += conv_scores
                per_conv[conv.sample_id][v.name] = summarise(conv_scores)
    base_recall = (settings or Settings()).recall
    return EvalReport(
        file=str(path),
        conversations=len(convs),
        questions=sum(len(c.questions) for c in convs),
        skipped_questions=sum(c.skipped_questions for c in convs),
        turns=sum(len(c.turns) for c in convs),
        memories=memories,
        variants=list(variants),
        summaries={name: summarise(s) for name, s in scores.items()},
        settings=base_recall.model_dump(),
        elapsed_s=time.perf_counter() - started,
        per_conversation=per_conv,
    )
