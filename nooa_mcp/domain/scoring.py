"""ACT-R activation on numpy arrays: relevance, base-level, importance, spreading (DESIGN.md §5).

Pure: no I/O. Recall gathers the numbers; this module turns them into scores.

    rel(m,q) = λ·cos(m,q) + (1−λ)·lex(m,q) + μ·overlap(tokens(q), cue_set(m))
                                     λ = 0.5, μ = 0.3; lex = BM25 / best BM25 of the candidates
    B(m)     = ln Σ_k max(t_now − t_k, g)^(−d)             d = 0.5, grain g = 1 h
    rec(m)   = sigmoid(B(m))                    (no accesses: B = −10)
    imp(m)   = importance / 10
    S_base   = a_rel·norm(rel) + g·(a_rec·norm(rec) + a_imp·norm(imp))       a = 1, 0.5, 0.5
               g = rel / max rel over the candidates (the relevance gate)
    Act(n)   = S_base(n) + γ·spread(n)                                   γ = 0.5

Relevance gates usage (DESIGN.md §16.8, §16.9): recency and importance are weighted by the
memory's relevance relative to the best candidate's, so they reorder memories of comparable
relevance and never lift an irrelevant one; a hit flagged weak never ranks above one that is
not (recall sorts weak hits last). Ages are floored at a grain of an hour, and uses inside one
grain count once: memories written or recalled seconds apart carry no real recency signal, and
stretching a difference of 10 s against 5 min into the full a_rec bonus let the newest turn
beat the most relevant one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence, Set as AbstractSet
from dataclasses import dataclass

import numpy as np

NO_ACCESS_B = -10.0


def jaccard(a: set[str], b: set[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def overlap_coefficient(a: AbstractSet[str], b: AbstractSet[str]) -> float:
    """|a ∩ b| / min(|a|, |b|) (Szymkiewicz–Simpson).

    Used for cue overlap instead of Jaccard: a memory has a handful of cues and a query a
    dozen words, so Jaccard shrinks with every extra query word even when every cue of the
    memory is named; the coefficient asks how much of the smaller set the other one covers.
    """
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


def relevance(
    cos: np.ndarray,
    overlap: np.ndarray,
    lam: float = 0.7,
    *,
    lex: np.ndarray | None = None,
    mu: float | None = None,
) -> np.ndarray:
    """Relevance of candidates to a query, with negative cosines counted as 0.

    Without `lex` this is NOOA's rel = λ·cos + (1−λ)·overlap. With it, the lexical match
    takes the (1−λ) share and cue overlap gets its own weight μ:

        rel = λ·cos + (1−λ)·lex + μ·overlap

    where lex is the BM25 score scaled by the best one among the candidates (0 for a memory
    the keyword search did not return). Dense and lexical relevance are complementary (names,
    numbers and rare words the embedding blurs), so fusing them in the score beats ranking by
    either, and by fusing only their ranks (measured on LoCoMo, see BENCHMARKS.md).
    """
    cos = np.clip(np.asarray(cos, dtype=np.float64), 0.0, 1.0)
    overlap = np.asarray(overlap, dtype=np.float64)
    if lex is None:
        return lam * cos + (1.0 - lam) * overlap
    return lam * cos + (1.0 - lam) * np.asarray(lex, dtype=np.float64) + (mu or 0.0) * overlap


def base_level_exact(ages_seconds: Iterable[float], d: float = 0.5, grain: float = 1.0) -> float:
    """B = ln Σ max(age, g)^(−d) over every access: the reference the approximation meets."""
    ages = np.maximum(np.asarray(list(ages_seconds), dtype=np.float64), grain)
    if ages.size == 0:
        return NO_ACCESS_B
    return float(np.log(np.sum(ages ** (-d))))


def base_level(
    newest_ages: Sequence[float],
    n_total: int,
    first_age: float | None,
    d: float = 0.5,
    grain: float = 1.0,
) -> float:
    """Base-level over all accesses from the newest k ages, the total count and the first age.

    DESIGN.md §5.3 (Petrov 2006): the k newest accesses are summed exactly; the n−k older
    ones are taken as spread evenly between the k-th newest age t_k and the first age t_n:

        B ≈ ln( Σ_{i≤k} t_i^(−d) + (n−k)·(t_n^(1−d) − t_k^(1−d)) / ((1−d)·(t_n − t_k)) )
    """
    ages = np.maximum(np.sort(np.asarray(newest_ages, dtype=np.float64)), grain)
    if ages.size == 0 or n_total <= 0:
        return NO_ACCESS_B
    total = float(np.sum(ages ** (-d)))
    rest = n_total - ages.size
    if rest > 0:
        t_k = float(ages[-1])
        t_n = max(float(first_age if first_age is not None else t_k), t_k, grain)
        if t_n - t_k < 1e-6:
            total += rest * t_k ** (-d)
        else:
            total += rest * (t_n ** (1 - d) - t_k ** (1 - d)) / ((1 - d) * (t_n - t_k))
    return math.log(total)


def base_levels(
    newest_ages: Sequence[Sequence[float]],
    n_totals: Sequence[int],
    first_ages: Sequence[float | None],
    d: float = 0.5,
    grain: float = 1.0,
) -> np.ndarray:
    """`base_level` for many memories at once, vectorised over a padded age matrix.

    Recall scores ~100 candidates per query; a numpy call per candidate cost more than the
    whole dense search, so the newest ages are stacked (NaN-padded) and summed in one pass.
    Row i equals `base_level(newest_ages[i], n_totals[i], first_ages[i], d)`.
    """
    m = len(newest_ages)
    width = max((len(a) for a in newest_ages), default=0)
    ages = np.full((m, width), np.nan)
    for i, row in enumerate(newest_ages):
        if len(row):
            ages[i, : len(row)] = row
    first = np.array([np.nan if f is None else f for f in first_ages], dtype=np.float64)
    return padded_base_levels(ages, np.asarray(n_totals, dtype=np.float64), first, d, grain)


def padded_base_levels(
    ages: np.ndarray,
    n_totals: np.ndarray,
    first_ages: np.ndarray,
    d: float = 0.5,
    grain: float = 1.0,
) -> np.ndarray:
    """`base_levels` from its arrays: each memory's newest ages as a row of `ages`, left
    aligned and NaN after them (as wide as the most any memory has), its use count and its
    first age (NaN: not known). Ranking builds these from the columns it holds."""
    m, width = ages.shape
    out = np.full(m, NO_ACCESS_B)
    if m == 0 or width == 0:
        return out
    ages = np.maximum(ages, grain)  # NaN stays NaN
    count = np.sum(~np.isnan(ages), axis=1)
    total = np.nansum(ages ** (-d), axis=1)
    n = n_totals
    rest = n - count
    t_k = np.nanmax(np.where(count[:, None] > 0, ages, 1.0), axis=1)
    first = first_ages
    t_n = np.maximum(np.maximum(np.where(np.isnan(first), t_k, first), t_k), grain)
    gap = t_n - t_k
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = (t_n ** (1 - d) - t_k ** (1 - d)) / ((1 - d) * gap)
    older = np.where(gap < 1e-6, t_k ** (-d), spread)
    total = total + np.where(rest > 0, rest * older, 0.0)
    live = (count > 0) & (n > 0)
    out[live] = np.log(total[live])
    return out


def sigmoid(x: np.ndarray | float) -> np.ndarray | float:
    return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float64)))


def minmax(
    values: np.ndarray,
    lo: float | None = None,
    hi: float | None = None,
    min_span: float = 0.0,
) -> np.ndarray:
    """Min-max over the candidate set, or over a given range (for rows outside the set).

    DESIGN.md §5.5: when every candidate shares one value (or there is one candidate) there is
    no spread to normalise, so the raw value — already in [0, 1] — is kept, not 0 for all.

    `min_span` divides by at least that span, so differences smaller than it stay small
    instead of being stretched to the full [0, 1]. Recency needs it: memories that were all
    last used months ago differ in sigmoid(B) by 10⁻⁴, and plain min-max turned that into a
    full a_rec bonus for whichever was a few days younger.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return values
    lo = float(values.min()) if lo is None else lo
    hi = float(values.max()) if hi is None else hi
    if hi - lo < 1e-12:
        return np.clip(values, 0.0, 1.0)
    return np.clip((values - lo) / max(hi - lo, min_span), 0.0, 1.0)


@dataclass(frozen=True)
class Weights:
    a_rel: float = 1.0
    a_rec: float = 0.5
    a_imp: float = 0.5
    gamma: float = 0.5


def relevance_gate(rel: np.ndarray, best: float | None = None) -> np.ndarray:
    """g = rel / best rel, in [0, 1]: how relevant a memory is next to the best candidate."""
    rel = np.asarray(rel, dtype=np.float64)
    top = float(rel.max()) if best is None and rel.size else (best or 0.0)
    if top <= 0:
        return np.zeros_like(rel)
    return np.clip(rel / top, 0.0, 1.0)


def base_scores(
    rel_n: np.ndarray,
    rec_n: np.ndarray,
    imp_n: np.ndarray,
    w: Weights,
    gate: np.ndarray | None = None,
) -> np.ndarray:
    """S_base = a_rel·norm(rel) + g·(a_rec·norm(rec) + a_imp·norm(imp)).

    Usage is gated by relevance (DESIGN.md §16.8): the recency and importance bonus of a memory
    is scaled by its relevance gate `g` (see `relevance_gate`), so among memories of comparable
    relevance the used and important ones come first, and an irrelevant one gains nothing
    from being used or important. Without a gate (None) the bonus is ungated, NOOA's form.
    """
    g = np.ones_like(rel_n) if gate is None else gate
    return w.a_rel * rel_n + g * (w.a_rec * rec_n + w.a_imp * imp_n)


@dataclass(frozen=True)
class OutEdge:
    """An outgoing edge as spreading sees it: already filtered to visible, live targets."""

    target: str
    weight: float
    type_weight: float
    relation: str


def spread_hop(
    frontier: Mapping[str, float],
    out_edges: Mapping[str, Sequence[OutEdge]],
    *,
    decay: float = 0.6,
    fanout: int = 5,
    floor: float = 0.05,
) -> dict[str, tuple[float, str, str]]:
    """One hop of spreading activation.

    Each frontier node passes act·δ·w·type_weight along its `fanout` strongest edges; passes
    below `floor` are dropped. DESIGN.md §16.2: the frontier holds activation that already
    carries the earlier hops' δ, so each hop multiplies by δ once (cumulative δ^h), never by
    δ^h again.

    Returns: target → (summed contribution, strongest parent, relation from that parent).
    """
    names = list(frontier)
    places, edges = [], []
    for place, node in enumerate(names):
        for edge in out_edges.get(node, ()):
            places.append(place)
            edges.append(edge)
    group = np.array(places, dtype=np.int64)
    at, amounts = hop_passes(
        np.array(list(frontier.values()), dtype=np.float64)[group],
        group,
        np.array([e.weight for e in edges], dtype=np.float64),
        np.array([e.type_weight for e in edges], dtype=np.float64),
        np.array([e.target == names[p] for e, p in zip(edges, places, strict=True)], dtype=bool),
        decay=decay,
        fanout=fanout,
        floor=floor,
    )
    return gather_passes(
        (names[places[k]], edges[k].target, edges[k].relation, amount)
        for k, amount in zip(at.tolist(), amounts.tolist(), strict=True)
    )


def hop_passes(
    act: np.ndarray,
    group: np.ndarray,
    weight: np.ndarray,
    type_weight: np.ndarray,
    loop: np.ndarray,
    *,
    decay: float,
    fanout: int,
    floor: float,
) -> tuple[np.ndarray, np.ndarray]:
    """`spread_hop` on arrays, one entry per edge: its source's activation, its source's
    place in the frontier (`group`; a source's edges in the order ties keep), weight, type
    weight, and whether it points back at its source.

    Returns the edges that pass activation, in the order `spread_hop` visits them (source by
    source in frontier order, each source's strongest edge first, ties in the given order),
    and the amount each passes, computed as act·δ·w·type_weight in that order of operations.
    Recall spreads over ~100 edges a hop: a Python object and a sort per source cost more
    than the rest of the hop.
    """
    m = len(weight)
    if not m:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    # Stable: by source, then strength (w·type_weight, strongest first), then given order.
    order = np.lexsort((np.arange(m), -weight * type_weight, group))
    sources = group[order]
    starts = np.flatnonzero(np.r_[True, sources[1:] != sources[:-1]])
    place = np.arange(m) - np.repeat(starts, np.diff(np.r_[starts, m]))
    order = order[place < fanout]
    amount = act[order] * decay * weight[order] * type_weight[order]
    passes = (act[order] > 0) & (amount >= floor) & ~loop[order]
    return order[passes], amount[passes]


def gather_passes(
    passes: Iterable[tuple[str, str, str, float]],
) -> dict[str, tuple[float, str, str]]:
    """Sum (source, target, relation, amount) passes by target in the order given, each
    target remembering its strongest parent (the first of equally strong ones)."""
    reached: dict[str, tuple[float, str, str]] = {}
    best: dict[str, float] = {}
    for node, target, relation, amount in passes:
        total, parent, kind = reached.get(target, (0.0, node, relation))
        if amount > best.get(target, 0.0):
            best[target] = amount
            parent, kind = node, relation
        reached[target] = (total + amount, parent, kind)
    return reached
