"""Relevant on its own terms: what a memory must be, beyond ranking well, to be shown unasked
or to count as used when it had faded (DESIGN.md §12, §5.8).

Recall's relevance scales keyword scores by the best keyword hit among the candidates, so a
memory that is the only one holding one incidental word of a query ("orders" in "how are
customer orders processed?" and "Lunch orders are due by 11am") gets the full keyword score and
clears the weak line. That is fine for an order, and wrong for a decision: a prompt's hook must
not inject it, and a recall must not take it as a use that brings a faded memory back. The
rule (`domain.injection.relevant`): close in meaning on the cosine alone, or sharing two of
the query's content words (one when it has only one), or a cue's words.
"""

from __future__ import annotations

from ..config import RecallSettings
from ..domain.injection import content_words, relevant, shared_words
from .ranking import Ranked

__all__ = ["on_its_own_terms"]


def on_its_own_terms(
    r: Ranked, words: set[str], s: RecallSettings, *, current_only: bool = True
) -> bool:
    """Whether ranked `r` (its row read) is relevant to a query of content `words` on its own
    terms; `current_only` also asks that it hold now and be replaced by nothing (what is
    injected), not what a recall may use."""
    row = r.full
    text = " ".join((row.title, row.content, *row.cues))
    return relevant(
        weak=r.weak(s.weak_relevance),
        stale=current_only and r.stale,
        superseded=current_only and (r.superseded_by or r.newer_version) is not None,
        shared=len(shared_words(words, content_words(text))),
        prompt_words=len(words),
        overlap=r.overlap,
        cos=r.cos,
        lam=s.lam,
        mu=s.mu,
        weak_floor=s.weak_relevance,
    )
