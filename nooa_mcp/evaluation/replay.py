"""Replay ablation: re-rank a store's recorded recalls under other weights.

Every recall logs, on each memory it returned, the components of its score (rel, rec, imp,
spread). Replay groups the stream back into recall events, recomputes each event's order
under alternative weights from those components alone — no embedding, no store query — and
asks where the memories that were *later used* would have ranked. A memory counts as used
after an event when a later access reaches it deliberately: a deref, an update or link
(logged as reinforced), or being recalled again by a different query.

Only the k memories an event returned can be re-ordered: a memory that was never returned
has no recorded components. So replay says how weights reorder what was shown, which is the
cheap, honest part of the ablation; LoCoMo measures what gets shown at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..config import RecallSettings
from ..domain import scoring
from ..domain.schema import AccessRecord, Channel
from ..memory import Memory
from .workload import generate_sessions

__all__ = ["WEIGHT_SETS", "RecallEvent", "ReplayReport", "group_events", "replay", "simulate"]

RECALL_CHANNELS = frozenset({Channel.recalled, Channel.searched})
USE_CHANNELS = frozenset({Channel.deref, Channel.reinforced, Channel.recalled, Channel.searched})

#: Alternative weights (a_rel, a_rec, a_imp, γ) replayed beside the recorded defaults.
WEIGHT_SETS: dict[str, dict[str, float]] = {
    "recorded": {},
    "-rec": {"a_rec": 0.0},
    "-imp": {"a_imp": 0.0},
    "-spread": {"gamma": 0.0},
    "rel only": {"a_rec": 0.0, "a_imp": 0.0, "gamma": 0.0},
    "rec x2": {"a_rec": 1.0},
    "imp x2": {"a_imp": 1.0},
}


@dataclass
class RecallEvent:
    """One recorded recall: its query, when, and the rows it returned in rank order."""

    seq: int
    query: str
    reader: str
    rows: list[tuple[str, AccessRecord]] = field(default_factory=list)


def group_events(stream: Sequence[tuple[int, str, AccessRecord]]) -> list[RecallEvent]:
    """Recall events from an oldest-first stream: consecutive recall records of one query
    whose ranks count up from 1."""
    events: list[RecallEvent] = []
    current: RecallEvent | None = None
    for seq, memory_id, rec in stream:
        if rec.channel not in RECALL_CHANNELS or rec.components is None or rec.rank is None:
            current = None
            continue
        same = (
            current is not None and rec.query == current.query and rec.rank == len(current.rows) + 1
        )
        if not same:
            current = RecallEvent(seq, rec.query or "", rec.reader_owner)
            events.append(current)
        assert current is not None  # `same`, or a new event just made
        current.rows.append((memory_id, rec))
    return events


def used_later(
    events: list[RecallEvent], stream: Sequence[tuple[int, str, AccessRecord]]
) -> list[set[str]]:
    """For each event, the returned memories that a later access used."""
    later: dict[str, list[tuple[int, AccessRecord]]] = {}
    for seq, memory_id, rec in stream:
        if rec.channel in USE_CHANNELS:
            later.setdefault(memory_id, []).append((seq, rec))
    out = []
    for ev in events:
        end = ev.seq + len(ev.rows)
        used = set()
        for memory_id, _ in ev.rows:
            for seq, rec in later.get(memory_id, []):
                if seq < end:
                    continue
                again = rec.channel in RECALL_CHANNELS
                if not again or rec.query != ev.query:
                    used.add(memory_id)
                    break
        out.append(used)
    return out


def rerank(event: RecallEvent, recall: RecallSettings) -> list[str]:
    """The event's memories ordered by score recomputed from their stored components."""
    # A recall event holds only records with components (`recall_events`).
    comps = [rec.components for _, rec in event.rows if rec.components is not None]
    rel = np.array([c.rel for c in comps])
    rec_ = np.array([c.rec for c in comps])
    imp = np.array([c.imp for c in comps])
    spread = np.array([c.spread for c in comps])
    span = recall.norm_min_span
    weights = scoring.Weights(recall.a_rel, recall.a_rec, recall.a_imp, recall.gamma)
    score = (
        scoring.base_scores(
            scoring.minmax(rel),
            scoring.minmax(rec_, min_span=span),
            scoring.minmax(imp, min_span=span),
            weights,
            scoring.relevance_gate(rel),
        )
        + recall.gamma * spread
    )
    # As recall orders them: weak hits last (DESIGN.md §5.7), then by score.
    weak = rel < recall.weak_relevance
    order = sorted(range(len(comps)), key=lambda i: (bool(weak[i]), -score[i], i))
    return [event.rows[i][0] for i in order]


@dataclass
class ReplayReport:
    """How each weight set ranks the memories that were used later."""

    events: int
    events_with_use: int
    used: int
    results: dict[str, dict[str, float]]

    def as_dict(self) -> dict[str, Any]:
        return {
            "events": self.events,
            "events_with_use": self.events_with_use,
            "used_memories": self.used,
            "weights": self.results,
        }

    def table(self) -> str:
        lines = [
            f"{self.events} recall events, {self.events_with_use} with a memory used later "
            f"({self.used} used memories). Lower mean rank is better.",
            "",
            f"{'weights':<10} {'mean rank':>9} {'MRR':>6} {'up':>5} {'down':>5} {'same':>5}",
            "-" * 45,
        ]
        for name, r in self.results.items():
            lines.append(
                f"{name:<10} {r['mean_rank']:9.3f} {r['mrr']:6.3f} {int(r['up']):5d} "
                f"{int(r['down']):5d} {int(r['same']):5d}"
            )
        lines += [
            "",
            "shown: the ranks the memories were returned at. The weight sets re-rank each",
            "event's k returned rows from their stored components (renormalised over those k);",
            "up/down/same count used memories moving against the recorded weights.",
        ]
        return "\n".join(lines)


def replay(
    stream: Sequence[tuple[int, str, AccessRecord]],
    base: RecallSettings | None = None,
    weight_sets: dict[str, dict[str, float]] = WEIGHT_SETS,
) -> ReplayReport:
    """Re-rank every recorded recall event under each weight set (stream oldest first)."""
    base = base or RecallSettings()
    events = group_events(stream)
    used = used_later(events, stream)
    results: dict[str, dict[str, float]] = {}
    shown = [
        rec.rank or 0
        for ev, used_ids in zip(events, used, strict=True)
        for mid, rec in ev.rows
        if mid in used_ids
    ]
    results["shown"] = _summary(shown, 0, 0, len(shown))
    # Stored components were normalised over the whole candidate set, which replay cannot
    # see; every weight set, the recorded one included, is renormalised over the k rows an
    # event returned, and moves are counted against the recorded weights on that footing.
    reference = [rerank(ev, base) for ev in events]
    for name, overrides in weight_sets.items():
        recall = base.model_copy(update=overrides)
        ranks, up, down, same = [], 0, 0, 0
        for ev, used_ids, ref in zip(events, used, reference, strict=True):
            if not used_ids:
                continue
            order = rerank(ev, recall)
            for mid in used_ids:
                new = order.index(mid) + 1
                ranks.append(new)
                old = ref.index(mid) + 1
                up += new < old
                down += new > old
                same += new == old
        results[name] = _summary(ranks, up, down, same)
    return ReplayReport(
        events=len(events),
        events_with_use=sum(1 for u in used if u),
        used=sum(len(u) for u in used),
        results=results,
    )


def _summary(ranks: list[int], up: int, down: int, same: int) -> dict[str, float]:
    return {
        "mean_rank": float(np.mean(ranks)) if ranks else 0.0,
        "mrr": float(np.mean([1 / r for r in ranks])) if ranks else 0.0,
        "up": up,
        "down": down,
        "same": same,
    }


async def read_stream(mem: Memory) -> list[tuple[int, str, AccessRecord]]:
    """The whole access stream visible to `mem`'s owner, oldest first."""
    out: list[tuple[int, str, AccessRecord]] = []
    before = None
    while True:
        page = await mem.recent_accesses(limit=500, before=before, scope="*")
        if not page:
            break
        out += page
        before = page[-1][0]
    out.reverse()
    return out


async def simulate(mem: Memory, sessions: int = 30, seed: int = 0, k: int = 5) -> int:
    """Play a synthetic agent workload into `mem`; returns the number of recalls.

    Each session authors a few memories and recalls about its projects. The agent then
    *uses* a returned memory (updates it, as an agent does when it acts on a note) when the
    memory names every content word of the query that is a known project, tool or person —
    a rule about the text, independent of the scorer's weights.
    """
    from .workload import PEOPLE, PROJECTS, TOOLS

    names = {w.lower() for w in [*PROJECTS, *TOOLS, *PEOPLE]}
    recalls = 0
    for session in generate_sessions(sessions, seed=seed):
        await mem.author_many(session.authored)
        for query in session.queries:
            result = await mem.recall(query, k=k)
            recalls += 1
            wanted = {w for w in query.lower().split() if w in names}
            for hit in result.hits:
                text = hit.content.lower()
                if wanted and all(w in text for w in wanted):
                    await mem.update(hit.id, tags=["used"])
                    break
    return recalls
