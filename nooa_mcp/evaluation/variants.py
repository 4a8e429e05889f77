"""The scorer and its ablations for the LoCoMo run, each as Settings overrides.

A variant is either a set of `RecallSettings` overrides passed to `Memory` (the full scorer,
−rec, −imp, −spread, −overlap, cosine-only, BM25-only), a fusion of two of those rankings
(RRF hybrid), or the grep-over-markdown baseline, which uses no store at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["ASKS", "INGESTS", "RRF_K", "VARIANTS", "Variant", "rrf_fuse"]

#: How turns go in: through the memory_author tool (as a client writes) or as an import.
INGESTS: tuple[str, ...] = ("tool", "import")
#: How questions are asked: memory_recall (live) or memory_explain (a dry run).
ASKS: tuple[str, ...] = ("recall", "explain")
#: Reciprocal-rank-fusion constant (Cormack et al. 2009).
RRF_K = 60

_PLAIN = {"a_rec": 0.0, "a_imp": 0.0, "gamma": 0.0, "mu": 0.0}


@dataclass(frozen=True)
class Variant:
    """One ranking method in the evaluation table."""

    name: str
    description: str
    kind: Literal["memory", "rrf", "grep"] = "memory"
    recall: dict[str, Any] = field(default_factory=dict)


VARIANTS: tuple[Variant, ...] = (
    Variant("full", "ACT-R scorer, shipped defaults"),
    Variant("-rec", "without base-level recency (a_rec = 0)", recall={"a_rec": 0.0}),
    Variant("-imp", "without importance (a_imp = 0)", recall={"a_imp": 0.0}),
    Variant("-spread", "without spreading activation (γ = 0)", recall={"gamma": 0.0}),
    Variant("-overlap", "without cue overlap (μ = 0)", recall={"mu": 0.0}),
    Variant(
        "cosine-only",
        "dense candidates ranked by cosine alone",
        recall={**_PLAIN, "lam": 1.0, "use_sparse": False},
    ),
    Variant(
        "bm25-only",
        "FTS5 candidates ranked by BM25 alone",
        recall={**_PLAIN, "lam": 0.0, "use_dense": False},
    ),
    Variant("rrf", f"reciprocal-rank fusion of cosine-only and BM25-only (k={RRF_K})", "rrf"),
    Variant("grep", "all turns in one markdown file, lines ranked by keyword hits", "grep"),
)


def rrf_fuse(rankings: list[list[str]], k: int = RRF_K) -> list[str]:
    """Fuse rankings by Σ 1/(k + rank); ties keep the order of first appearance."""
    score: dict[str, float] = {}
    for ranking in rankings:
        for rank, ident in enumerate(ranking, 1):
            score[ident] = score.get(ident, 0.0) + 1.0 / (k + rank)
    first = {ident: n for n, ident in enumerate(score)}
    return sorted(score, key=lambda i: (-score[i], first[i]))
