"""Turn-level retrieval metrics for LoCoMo: R@k and MRR, overall and per category.

Pure. How a question with several evidence turns counts:
- **R@k** is a hit (1) when *any* evidence turn is among the top k turns, else 0; the reported
  R@k is the mean over questions. (Retrieval feeds a reader model: one evidence turn in the
  window is what makes an answer possible at all.)
- **MRR** uses the rank of the *first* evidence turn in the ranking, 1/rank, and 0 when none is
  within the ranking's depth (the evaluation ranks 10 turns, so this is MRR@10).
- **Evidence recall@k** (reported beside them) is the fraction of a question's evidence turns
  in the top k, averaged over questions, for readers who want the stricter all-evidence view.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["QuestionScore", "Summary", "score_question", "summarise"]

KS: tuple[int, ...] = (5, 10)


@dataclass(frozen=True)
class QuestionScore:
    """The metrics of one question under one ranking."""

    category: int
    hits: dict[int, float]
    evidence_recall: dict[int, float]
    rr: float
    first_rank: int | None


@dataclass
class Summary:
    """Means over a set of questions, overall and per category."""

    n: int
    recall: dict[int, float]
    evidence_recall: dict[int, float]
    mrr: float
    by_category: dict[int, Summary] = field(default_factory=dict)

    def as_dict(self) -> dict:
        out: dict[str, Any] = {
            "n": self.n,
            **{f"R@{k}": round(v, 4) for k, v in self.recall.items()},
            "MRR": round(self.mrr, 4),
            **{f"evidence_R@{k}": round(v, 4) for k, v in self.evidence_recall.items()},
        }
        if self.by_category:
            out["by_category"] = {str(c): s.as_dict() for c, s in self.by_category.items()}
        return out


def dedupe(ranked: Iterable[str]) -> list[str]:
    """Keep the first occurrence of each turn id (a memory standing for several turns, or a
    turn reached twice, must not count twice)."""
    seen: set[str] = set()
    out: list[str] = []
    for item in ranked:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def score_question(
    ranked: Sequence[str], evidence: Iterable[str], category: int = 0, ks: Sequence[int] = KS
) -> QuestionScore:
    """Score one ranking of turn ids against the question's evidence turn ids."""
    gold = set(evidence)
    order = dedupe(ranked)
    first = next((i + 1 for i, t in enumerate(order) if t in gold), None)
    hits = {k: 1.0 if first is not None and first <= k else 0.0 for k in ks}
    ev = {k: (len(gold & set(order[:k])) / len(gold) if gold else 0.0) for k in ks}
    return QuestionScore(category, hits, ev, 1.0 / first if first else 0.0, first)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def summarise(scores: Sequence[QuestionScore], ks: Sequence[int] = KS) -> Summary:
    """Average question scores overall and per category (categories in ascending order)."""

    def flat(group: Sequence[QuestionScore]) -> Summary:
        return Summary(
            n=len(group),
            recall={k: _mean([s.hits[k] for s in group]) for k in ks},
            evidence_recall={k: _mean([s.evidence_recall[k] for s in group]) for k in ks},
            mrr=_mean([s.rr for s in group]),
        )

    total = flat(scores)
    for category in sorted({s.category for s in scores}):
        total.by_category[category] = flat([s for s in scores if s.category == category])
    return total
