"""Ranking: candidates → ACT-R scoring → spreading → supersession, with reasons (DESIGN.md §5, §6).

Gathers numbers from the store (the keyword candidates, and the rows the vector search or
spreading added) and the vector index (vectors, and the edges it holds: `storage.links`) and
hands them to `domain.scoring`; it writes nothing. The recall verb logs the accesses of what it
returns; explain shows the whole ranking.

The archive is a tier of its own. Besides the live candidates, the best few *faded* memories
(archived by maintenance, `domain.archive`) by cosine and by BM25 are scored on the same
scale; one that is relevant (not weak) is ranked as if it were `faded_penalty` less relevant
than it is (so a live memory of similar relevance comes first, and a much more relevant faded
one still ranks above it), and the rest are dropped. Memories a user forgot are never
candidates. Faded memories neither relay nor receive spreading, and one that says the same
thing as a live candidate (a duplicate merged into it) is left out. Two memories that are
versions of one statement (cosine ≥ `version_similarity`, live or one faded) rank newer first
when the query names none of the words they differ in; of two facts on one subject (cosine ≥
`validity_similarity`), the one that holds now comes first, under the same exception.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field

import numpy as np

from ..config import RecallSettings
from ..domain import scoring
from ..domain.facts import same_statement
from ..domain.repeats import one_place, one_time
from ..domain.replies import ScoreTerms
from ..domain.schema import SUPERSEDING, TYPE_WEIGHT, Components
from ..domain.scope import Scope
from ..domain.text import tokens
from ..engine import text_of
from ..storage import Store
from ..storage.base import EdgeRow, ScoringRow
from ..storage.facts import HeldFacts, HeldRow
from ..storage.keywords import indexed_stems, named_stems, query_stems
from ..storage.vectors import VectorIndex

__all__ = ["KeywordRead", "Ranked", "Ranking", "held_keywords", "keyword_candidates", "rank"]


@dataclass(slots=True)
class Ranked:
    """One scored memory and everything that explains its score."""

    #: What it was scored on: its row read from the store, or the facts the index holds
    #: (`storage.facts`) until `Ranking.fill` reads the row of a memory that is shown.
    row: ScoringRow | HeldRow
    source: str
    #: The cosine with the query; None when it was never computed (no query vector while the
    #: model loads, or no stored vector).
    cos: float | None = None
    #: What relevance used in the cosine's place: the cosine, or BM25 while the model loads.
    semantic: float = 0.0
    overlap: float = 0.0
    lex: float = 0.0
    rel: float = 0.0
    rec: float = 0.0
    imp: float = 0.0
    base: float = 0.0
    spread: float = 0.0
    score: float = 0.0
    path: list[str] = field(default_factory=list)
    stale: bool = False
    #: Its `valid_from` is still ahead: it does not hold yet (the same penalty as stale).
    upcoming: bool = False
    #: Every memory that replaces it (`superseded_by` names the first): it ranks below each.
    replaced_by: list[str] = field(default_factory=list)
    #: Replaces a relevant memory: it is relevant as that memory's current version, even when
    #: its own words miss the query (DESIGN.md §16.7 over §16.8).
    succeeds_relevant: bool = False
    #: Relevance the ranking takes off (a faded memory's `faded_penalty`); `rel` stays as it
    #: is for the weak line and the reply.
    drop: float = 0.0
    #: The newest memory that is another version of this one (`_versions`: nearly the same
    #: words, written later, not linked to it) and ranks above it: the reply names it, so a
    #: reader of both knows which one is current.
    newer_version: str | None = None

    @property
    def superseded_by(self) -> str | None:
        """The first memory that replaces it (the one its flag and explain name), or None."""
        return self.replaced_by[0] if self.replaced_by else None

    @property
    def ranked_rel(self) -> float:
        """The relevance this memory ranks with."""
        return max(self.rel - self.drop, 0.0)

    def weak(self, threshold: float) -> bool:
        return self.rel < threshold and not self.succeeds_relevant

    @property
    def faded(self) -> bool:
        """Archived by maintenance: within recall's reach, below live memories."""
        return self.row.archived and self.row.faded

    @property
    def forgotten(self) -> bool:
        """Archived by its user: scored only when named by id (explain's "why not")."""
        return self.row.archived and not self.row.faded

    @property
    def id(self) -> str:
        return self.row.id

    @property
    def components(self) -> Components:
        return Components(
            source=self.source,  # type: ignore[arg-type]
            cos=None if self.cos is None else round(self.cos, 4),
            rel=round(self.rel, 4),
            rec=round(self.rec, 4),
            imp=round(self.imp, 4),
            spread=round(self.spread, 4),
        )

    @property
    def full(self) -> ScoringRow:
        """The memory's row, for what a reply shows of it (after `Ranking.fill`)."""
        if not isinstance(self.row, ScoringRow):
            raise RuntimeError(f"{self.id}: the ranking did not read this row (Ranking.fill)")
        return self.row

    @property
    def head(self) -> str:
        return self.full.head


@dataclass
class Ranking:
    """The full ranked list for a query, best first, and how it was produced."""

    query: str
    rows: list[Ranked]
    dense_ready: bool
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    query_vector: np.ndarray | None = None

    def terms(self, r: Ranked, s: RecallSettings) -> ScoreTerms:
        """What `r`'s score is made of, rounded as the reply rounds the score: the base's three
        terms on this ranking's ranges (`_scaled`, as `_base` weighed them), spreading
        (γ·spread), the penalties, and what placing one version below another moved (the rest
        of the score, and of the rounding). Made for the rows a reply shows, not for every
        candidate of every recall."""
        rel, rec, imp, gate = _scaled(
            np.array([r.ranked_rel]), np.array([r.rec]), np.array([r.imp]), self.ranges, s
        )
        penalty = -(s.stale_penalty if r.stale or r.upcoming else 0.0) - (
            s.superseded_penalty if r.superseded_by is not None else 0.0
        )
        parts = (
            s.a_rel * float(rel[0]),
            float(gate[0]) * (s.a_rec * float(rec[0])),
            float(gate[0]) * (s.a_imp * float(imp[0])),
            s.gamma * r.spread,
            penalty,
        )
        # Each rounded as the score is, the rest of the rounded score in `order`: the terms
        # shown add up to the score shown.
        shown = [round(v, 4) + 0.0 for v in parts]  # no -0.0
        order = round(round(r.score, 4) - sum(shown), 4) + 0.0
        return ScoreTerms(
            rel=shown[0], rec=shown[1], imp=shown[2], spread=shown[3], penalty=shown[4], order=order
        )

    def rank_of(self, memory_id: str) -> int | None:
        for i, r in enumerate(self.rows, 1):
            if r.id == memory_id:
                return i
        return None

    async def fill(self, store: Store, upto: int | None = None) -> None:
        """Read the rows of the first `upto` ranked (None: all) that were scored on held
        facts: what a reply shows of them (text, owner, references, retention) is read only
        for those it shows, in one read."""
        while True:
            shown = self.rows if upto is None else self.rows[:upto]
            gone = await _read_rows(store, [r for r in shown if not isinstance(r.row, ScoringRow)])
            if not gone:
                return
            # Held but not stored: a write of this process not committed (or rolled back).
            # Out of the ranking, as a read of the rows would have left it; the next ones
            # move up and are read in turn.
            self.rows = [r for r in self.rows if r.id not in gone]


async def _read_rows(store: Store, ranked: list[Ranked]) -> set[str]:
    """Give each of `ranked` its row from the store (one read); the ids of those the store
    does not have (a write still open on another connection, or rolled back)."""
    if not ranked:
        return set()
    rows = {row.id: row for row in await store.scoring_rows([r.id for r in ranked])}
    gone = set()
    for r in ranked:
        row = rows.get(r.id)
        if row is None:
            gone.add(r.id)
            continue
        row.bm25 = r.row.bm25
        r.row = row
    return gone


@dataclass
class KeywordRead:
    """The keyword half of the candidates (`keyword_candidates`): their rows, or, when the
    index holds what ranking scores (`storage.facts`), their ids and keyword scores alone."""

    rows: list[ScoringRow]
    hits: list[tuple[str, float]] | None = None
    #: When the hits came from the postings the index holds, brought up to date for this
    #: search (`held_keywords`): those it looked up, by stem. What ranking asks of a
    #: memory's words is then read there too.
    postings: dict[str, tuple[np.ndarray, np.ndarray]] | None = None
    #: The hits from the held postings as rows of the index and their scores (then `hits`
    #: is None): ranking takes its candidates' facts from the columns at those rows.
    hit_rows: tuple[np.ndarray, np.ndarray] | None = None


async def rank(
    query: str,
    *,
    store: Store,
    index: VectorIndex,
    query_vector: np.ndarray | None,
    scope: Scope,
    settings: RecallSettings,
    now: float,
    types: set[str] | None = None,
    hops: int | None = None,
    include_archived: bool = False,
    extra_ids: tuple[str, ...] = (),
    keyword: Awaitable[KeywordRead] | None = None,
    whole_archive: bool = False,
    shown: int | None = None,
) -> Ranking:
    """Rank every candidate for `query`. `extra_ids` are scored too (for "why not"), in any
    state. Faded memories are ranked when relevant, and with `include_archived` also when
    only weakly related (see the module docstring); forgotten ones never. `whole_archive`
    searches every memory in one tier, archived or not, so that the `extra_ids` are found as
    the query finds them (explain's "why not"); the forgotten ones found besides are dropped.

    `query_vector` is None while the embedding model is still loading: recall then runs on
    keyword candidates alone and BM25 stands in for cosine. `keyword` is `keyword_candidates`
    for the same arguments, already running (a task): it is awaited after the vector search,
    so the two overlap; without it the keyword rows are fetched here, with the dense rows, in
    one call. Spreading and supersession read the edges the index holds (`storage.links`).

    `shown`: how many of the ranked the caller will show (`Ranking.fill`). When versions of
    one statement must read their rows to compare words, the rows of the first `shown` are
    read in the same statement, so a recall reads rows once.
    """
    s = settings
    hops = s.hops if hops is None else hops
    vector = query_vector if s.use_dense else None
    dense_ready = vector is not None

    # The dense half: rows and cosines, named only where the rows' facts are not held.
    dense_at = np.zeros(0, dtype=np.int64)
    dense_cos = np.zeros(0, dtype=np.float64)
    if vector is not None:
        if whole_archive:
            mask = index.mask(scope, True, types)
            dense_at, cos = index.search_rows(vector, mask, s.n_dense)
        else:
            mask = index.mask(scope, types=types, faded=s.n_faded > 0)
            (live, live_cos), (faded, faded_cos) = index.search_tier_rows(
                vector, mask, s.n_dense, s.n_faded
            )
            dense_at, cos = np.concatenate([live, faded]), np.concatenate([live_cos, faded_cos])
        # In float64, as Python compares: numpy would round the line to float32 first.
        dense_cos = cos.astype(np.float64)
        close = dense_cos >= s.min_similarity
        dense_at, dense_cos = dense_at[close], dense_cos[close]
    read = None if keyword is None else await keyword
    postings = None if read is None else read.postings
    candidates = None
    if read is not None and read.hit_rows is not None and not extra_ids:
        candidates = _held_table(
            index, scope, (dense_at, dense_cos), read.hit_rows, vector, s, types, whole_archive
        )
    if candidates is None:
        dense = dict(zip(index.ids.names(dense_at.tolist()), dense_cos.tolist(), strict=True))
        rows = await _candidate_rows(
            store, index, query, scope, s, types, whole_archive, dense, extra_ids, read
        )
        candidates = _candidates_of(rows, dense, extra_ids, index, vector, s, types, whole_archive)
    query_tokens = tokens(query)
    _score_parts(list(candidates.values()), query_tokens, now, s, index.facts)
    if s.min_relevance > 0:
        candidates = {
            i: r for i, r in candidates.items() if r.rel >= s.min_relevance or i in extra_ids
        }
    if not include_archived:
        # A faded memory comes back only for a query it answers (not weak).
        candidates = {
            i: r
            for i, r in candidates.items()
            if not (r.faded and r.weak(s.weak_relevance)) or i in extra_ids
        }
    ranked = list(candidates.values())
    ranges = _ranges(ranked)
    _base(ranked, ranges, s)

    run = _Pass(store, index, query_vector, query_tokens, scope, s, now, types, ranges, candidates)
    # Archived memories relay nothing: spreading starts from live candidates only.
    await _spread(run, [r for r in ranked if not r.row.archived], hops)
    await _supersession(run)
    for r in candidates.values():
        if r.superseded_by and not r.weak(s.weak_relevance):
            for newer in r.replaced_by:  # each is a current version of a relevant memory
                candidates[newer].succeeds_relevant = True  # `_supersession` kept both

    for r in candidates.values():
        r.score = r.base + s.gamma * r.spread
    for r in candidates.values():
        if r.row.valid_to is not None and r.row.valid_to < now:
            r.stale = True
            r.score -= s.stale_penalty
        elif r.row.valid_from is not None and r.row.valid_from > now:
            r.upcoming = True  # not valid yet: below what holds now, as a stale one is
            r.score -= s.stale_penalty
    replaced = [r for r in candidates.values() if r.superseded_by is not None]
    for r in replaced:
        r.score -= s.superseded_penalty
    # DESIGN.md §16.7: a replaced memory ranks below each memory that replaced it, along a
    # chain too (A refined by B, B contradicted by C: A below B below C, in whatever order
    # they come).
    for _ in range(len(replaced)):
        moved = False
        for r in replaced:
            scores = [candidates[i].score for i in r.replaced_by if i in candidates]
            lowest = min(scores, default=float("inf"))
            if r.score >= lowest:
                r.score = lowest - 1e-6
                moved = True
        if not moved:
            break
    await _versions(store, index, query, candidates, s, shown, postings)
    ordered = _in_order(candidates.values(), s)
    return Ranking(query, ordered, dense_ready, ranges, query_vector)


async def _candidate_rows(
    store: Store,
    index: VectorIndex,
    query: str,
    scope: Scope,
    s: RecallSettings,
    types: set[str] | None,
    whole_archive: bool,
    dense: dict[str, float],
    extra_ids: tuple[str, ...],
    read: KeywordRead | None,
) -> list[ScoringRow | HeldRow]:
    """The rows of the keyword hits, the dense hits and the `extra_ids`: from the facts the
    index holds where it holds them, else read from the store (one read)."""
    wanted = [*dense, *(i for i in extra_ids if i not in dense)]
    if read is None:
        return [
            *await store.candidates(
                query,
                scope,
                limit=_keyword_limit(s, types),
                ids=wanted,
                faded=_faded_limit(s, types),
                include_archived=whole_archive,
            )
        ]
    hits = read.hits
    if read.hit_rows is not None:
        at, scores = read.hit_rows
        hits = list(zip(index.ids.names(at.tolist()), scores.tolist(), strict=True))
    if hits is not None:
        return await _held_candidates(store, index, scope, hits, wanted)
    have = {r.id for r in read.rows}
    missing = [i for i in wanted if i not in have]
    return [*read.rows, *(await store.scoring_rows(missing) if missing else [])]


def _candidates_of(
    rows: list[ScoringRow | HeldRow],
    dense: dict[str, float],
    extra_ids: tuple[str, ...],
    index: VectorIndex,
    vector: np.ndarray | None,
    s: RecallSettings,
    types: set[str] | None,
    whole_archive: bool,
) -> dict[str, Ranked]:
    """The candidates among `rows` (see `rank`), with their cosines and keyword scores:
    each tier's keyword places, the dense hits, the `extra_ids`; none forgotten unless
    asked about by id."""
    candidates: dict[str, Ranked] = {}
    bm25: dict[str, float] = {}
    keyword_rows = sorted(
        ((r, r.bm25) for r in rows if r.bm25 is not None), key=lambda pair: -pair[1]
    )
    # Each tier has its own places: live rows up to n_sparse, faded ones up to n_faded.
    places = {False: s.n_sparse, True: s.n_faded}
    for row, keyword_score in keyword_rows:
        if types and row.type not in types:
            continue
        bm25[row.id] = keyword_score
        tier = bool(row.archived) and not whole_archive
        places[tier] -= 1
        if row.id in dense:
            candidates[row.id] = Ranked(row, "both", cos=dense[row.id])
        elif places[tier] >= 0:
            candidates[row.id] = Ranked(row, "sparse")
    for row in rows:
        if row.id in candidates:
            continue
        if row.id in dense:
            candidates[row.id] = Ranked(row, "dense", cos=dense[row.id])
        elif row.id in extra_ids:
            candidates[row.id] = Ranked(row, "sparse")

    # Forgotten by its user: never a candidate, unless asked about by id.
    for memory_id in [i for i, r in candidates.items() if r.forgotten and i not in extra_ids]:
        del candidates[memory_id]
    top_bm25 = max(bm25.values(), default=0.0)
    if vector is not None:
        sparse = [r for r in candidates.values() if r.source == "sparse"]
        sims = index.cosines([r.id for r in sparse], vector)
        for r, sim in zip(sparse, sims, strict=True):
            r.cos = sim
    for r in candidates.values():
        r.lex = bm25.get(r.id, 0.0) / top_bm25 if top_bm25 > 0 else 0.0
        # Without a query vector, BM25 (scaled by the best hit) stands in for the cosine.
        r.semantic = r.lex if vector is None else (r.cos or 0.0)
    return candidates


def _held_table(
    index: VectorIndex,
    scope: Scope,
    dense: tuple[np.ndarray, np.ndarray],
    hits: tuple[np.ndarray, np.ndarray],
    vector: np.ndarray | None,
    s: RecallSettings,
    types: set[str] | None,
    whole_archive: bool,
) -> dict[str, Ranked] | None:
    """`_candidates_of` on rows of the index (the dense hits and the keyword hits with their
    cosines and BM25 scores) as columns: the same candidates in the same order with the same
    numbers, with no row object made for a memory that is not a candidate and no id looked
    up. None when a row's facts are not held (written by another process since the last
    sync, or a role not loaded): those are read from the store."""
    dense_at, dense_cos = dense
    hit_at, hit_bm25 = hits
    if not index.holds(scope.visible_roles):
        return None
    # Membership by a mark per row of the index: `np.isin` sorts, ~0.1 ms a call here.
    is_dense = np.zeros(index.size, dtype=bool)
    is_dense[dense_at] = True
    is_hit = np.zeros(index.size, dtype=bool)
    is_hit[hit_at] = True
    # Every row the store would be asked for: the hits, then the dense rows not among them.
    every = np.concatenate([hit_at, dense_at[~is_hit[dense_at]]])
    if not index.facts.known[every].all():
        return None
    # The keyword hits, best first (ties in the search's order), of the types asked for.
    order = np.argsort(-hit_bm25, kind="stable")
    kw_at, kw_bm25 = hit_at[order], hit_bm25[order]
    if types:
        typed = index.type_allowed(types)[index.type_code[kw_at]]
        kw_at, kw_bm25 = kw_at[typed], kw_bm25[typed]
    # Each tier has its own places: live rows up to n_sparse, faded ones up to n_faded.
    tier = index.archived[kw_at] if not whole_archive else np.zeros(kw_at.size, dtype=bool)
    place = np.where(tier, np.cumsum(tier), np.cumsum(~tier))
    in_dense = is_dense[kw_at]
    chosen = in_dense | (place <= np.where(tier, s.n_faded, s.n_sparse))
    picked = kw_at[chosen]
    is_dense[picked] = False  # what is left: the dense rows not picked, in the store's order
    rest = every[is_dense[every]]
    at = np.concatenate([picked, rest])
    both = np.concatenate([in_dense[chosen], np.ones(rest.size, dtype=bool)])
    source = ["both" if b else "sparse" for b in both[: picked.size].tolist()]
    source += ["dense"] * rest.size
    # Forgotten by its user: never a candidate.
    kept = ~(index.archived[at] & ~index.faded[at])
    if not kept.all():
        at, both = at[kept], both[kept]
        source = [name for name, keep in zip(source, kept.tolist(), strict=True) if keep]
    top = float(kw_bm25.max()) if kw_bm25.size else 0.0
    # A candidate that is a hit is one of the types asked for (a dense row passed the same
    # type mask): its score is the one the places were counted by.
    hit = dict(zip(hit_at.tolist(), hit_bm25.tolist(), strict=True))
    cosine = dict(zip(dense_at.tolist(), dense_cos.tolist(), strict=True))
    rows = at.tolist()
    lex = [hit.get(row, 0.0) / top if top > 0 else 0.0 for row in rows]
    cos: list[float | None] = [
        cosine[row] if b else None for row, b in zip(rows, both.tolist(), strict=True)
    ]
    if vector is not None:
        sparse = [k for k, b in enumerate(both.tolist()) if not b]
        for k, sim in zip(sparse, index.cosines_at(at[sparse], vector), strict=True):
            cos[k] = sim
    held = index.held_rows_at(at, index.ids.names(rows))
    out = {}
    for row, name, c, x in zip(held, source, cos, lex, strict=True):
        row.bm25 = hit.get(row.at)  # as a hit's row by id carries it (`_held_candidates`)
        # Without a query vector, BM25 (scaled by the best hit) stands in for the cosine.
        out[row.id] = Ranked(row, name, cos=c, lex=x, semantic=x if vector is None else (c or 0.0))
    return out


def _in_order(ranked: Iterable[Ranked], s: RecallSettings) -> list[Ranked]:
    """`ranked` in the ranking's order: by score, and (DESIGN.md §16.8) a weakly related
    memory never above a relevant one, whatever its recency, importance or spreading."""
    return sorted(ranked, key=lambda r: (r.weak(s.weak_relevance), -r.score, r.id))


#: The relations by which a newer memory replaces an older one, as the store names them.
SUPERSEDING_RELATIONS = [e.value for e in SUPERSEDING]
#: Each relation's weight in spreading, by the name the store gives it.
_TYPE_WEIGHTS = {kind.value: weight for kind, weight in TYPE_WEIGHT.items()}


async def _held_candidates(
    store: Store,
    index: VectorIndex,
    scope: Scope,
    hits: list[tuple[str, float]],
    wanted: list[str],
) -> list[ScoringRow | HeldRow]:
    """The keyword hits and the rows `wanted` as candidates, from the facts the index holds
    (`storage.facts`); a memory it holds none for (written by another process since the last
    sync, or a role not held) is read from the store, in one read."""
    ids = list(dict.fromkeys([*(i for i, _ in hits), *wanted]))
    held: dict[str, ScoringRow | HeldRow] = {}
    if index.holds(scope.visible_roles):
        held.update(index.held_rows(ids))
    missing = [i for i in ids if i not in held]
    if missing:
        held.update((row.id, row) for row in await store.scoring_rows(missing))
    for memory_id, bm25 in hits:
        row = held.get(memory_id)
        if row is not None:
            row.bm25 = bm25
    return [held[i] for i in ids if i in held]


def _keyword_limit(s: RecallSettings, types: set[str] | None) -> int:
    """How many keyword hits to fetch: twice as many when a type filter will drop some."""
    if not s.use_sparse:
        return 0
    return s.n_sparse * 2 if types else s.n_sparse


def _faded_limit(s: RecallSettings, types: set[str] | None) -> int:
    """How many faded keyword hits to fetch beside the live ones (likewise)."""
    if not s.use_sparse:
        return 0
    return s.n_faded * 2 if types else s.n_faded


async def _versions(
    store: Store,
    index: VectorIndex,
    query: str,
    candidates: dict[str, Ranked],
    s: RecallSettings,
    shown: int | None = None,
    postings: dict[str, tuple[np.ndarray, np.ndarray]] | None = None,
) -> None:
    """Order memories that are versions of one statement (cosine at least
    `version_similarity`, both relevant), and facts on one subject (`validity_similarity`)
    of which one holds now and the other does not.

    - A faded memory that says the same thing in the same words as a live candidate (a
      duplicate reflection merged into it) is left out: the live one answers, superseded or
      not (a duplicate of a superseded memory is no newer than it, and used here it was
      revived as a live, unsuperseded fact above the memory that replaced it).
    - Two that differ in a word ("… three worker nodes" / "… four worker nodes", both kept)
      rank newer first, unless the query names a word they differ in (then relevance
      decides: "which cluster has three nodes?"), the newer faded or not: unused since it
      was written, it faded while the older, used before, stayed live. When one of two
      versions holds now and the other does not (stale, or valid only from a later date),
      the one that holds comes first, newer or not, under the same exception. A word is a
      stem of the words keyword search indexes (title, content, tags, entities:
      `storage.keywords`); when this ranking searched the held postings (`postings`: those
      it looked up) they are read there, with no row read.
    - Two facts closer than `validity_similarity` but not versions, one holding now and the
      other not: the one that holds comes first, under the same exception.
    """
    pool = [r for r in candidates.values() if not r.forgotten and not r.weak(s.weak_relevance)]
    if len(pool) < 2:
        return
    rows = _rows_in(index, pool)
    known = [(r, row) for r, row in zip(pool, rows, strict=True) if row >= 0]
    known = [(r, row) for r, row in known if index.has_vector[row]]
    if len(known) < 2:
        return
    vectors = index.matrix[[row for _, row in known]]
    sims = np.triu(vectors @ vectors.T, 1)
    close = np.argwhere(sims >= s.version_similarity)
    # Two facts on one subject, not versions, of which one holds now and the other does not
    # ("The team wiki lives on Confluence" until March, "... on Notion" from March: cosine
    # 0.69): what holds now leads, as between versions. Their penalty alone did not do it
    # among a few candidates, where the stretch makes the more relevant one's rel' 1.
    now_holds = np.array([not (r.stale or r.upcoming) for r, _ in known], dtype=bool)
    related = np.argwhere(
        (sims >= s.validity_similarity)
        & (sims < s.version_similarity)
        & (now_holds[:, None] != now_holds[None, :])
    )
    if not close.size and not related.size:
        return
    # Their words decide (DESIGN.md §5.7): which of the query's words each holds, from the
    # held postings when this ranking searched them (`postings`), else from its row; a
    # faded memory paired with a live one is compared whole (`same_statement`), from rows.
    paired = sorted({int(i) for i in [*close.ravel().tolist(), *related.ravel().tolist()]})
    asked = named_stems(query)
    ids = [known[i][0].id for i in paired]
    held = (
        {}
        if postings is None
        else index.stems_held(ids, asked, postings, rows=[known[i][1] for i in paired])
    )
    whole: set[int] = set()
    for i, j in close.tolist():
        if known[i][0].faded != known[j][0].faded:
            whole.update((i, j))
    unread: list[Ranked] = []
    for i in paired:
        r = known[i][0]
        if (i in whole or r.id not in held) and not isinstance(r.row, ScoringRow):
            unread.append(r)
    if unread:
        # With them, the rows of the first `shown`, as they can rank once this lowers older
        # versions (at most one place down per memory paired): `Ranking.fill` finds them read.
        if shown:
            unread += _in_order(candidates.values(), s)[: shown + len(paired)]
        gone = await _read_rows(
            store, list({r.id: r for r in unread if not isinstance(r.row, ScoringRow)}.values())
        )
        for memory_id in gone:  # held, not stored (see `Ranking.fill`): out of the ranking
            candidates.pop(memory_id, None)
        close, related = (
            np.array(
                [
                    (i, j)
                    for i, j in found.tolist()
                    if known[i][0].id not in gone and known[j][0].id not in gone
                ],
                dtype=np.int64,
            ).reshape(-1, 2)
            for found in (close, related)
        )
    named: dict[str, frozenset[str]] = {}

    def names(r: Ranked) -> frozenset[str]:
        """The query's words this memory holds: two versions differ in a word the query
        names exactly when these differ."""
        if r.id not in named:
            found = held.get(r.id)
            if found is None:
                row = r.full
                tags, entities = json.loads(row.tags_json), json.loads(row.entities_json)
                found = asked & indexed_stems(row.title, row.content, tags, entities)
            named[r.id] = found
        return named[r.id]

    pairs = []
    holding: list[tuple[Ranked, Ranked]] = []
    for i, j in close.tolist():
        a, b = known[i][0], known[j][0]
        if a.faded != b.faded:
            faded, live = (a, b) if a.faded else (b, a)
            if _one_memory(faded.full, live.full) and same_statement(
                text_of(faded.full.title, faded.full.content),
                text_of(live.full.title, live.full.content),
            ):
                candidates.pop(faded.id, None)
                continue
            # Two versions, one faded by disuse: the newer still leads ("four worker nodes",
            # written after "three" and unused since, faded while "three", used before it,
            # stayed live, and came back below it).
        elif a.faded:
            continue  # both faded: their penalties order them
        if a.superseded_by is not None or b.superseded_by is not None:
            continue  # a superseded version already ranks below the one that replaced it
        a_holds, b_holds = not (a.stale or a.upcoming), not (b.stale or b.upcoming)
        if a_holds != b_holds:  # what holds now first, whichever is newer
            holding.append((a, b) if a_holds else (b, a))
            continue
        if not a_holds:
            continue  # neither holds now: their penalties order them
        newer, older = (a, b) if (a.row.created_at, a.id) > (b.row.created_at, b.id) else (b, a)
        pairs.append((newer, older))
    for i, j in related.tolist():
        a, b = known[i][0], known[j][0]
        if a.superseded_by is None and b.superseded_by is None:
            holding.append((a, b) if now_holds[i] else (b, a))
    # Newest first, so each newer memory's own place is settled before it places an older,
    # and an older one is marked with the newest version above it.
    pairs.sort(key=lambda p: (-p[0].row.created_at, p[0].id))
    for newer, older in pairs:
        if names(newer) != names(older):
            continue  # the query names a word they differ in: relevance decides
        if older.score >= newer.score:
            older.score = newer.score - 1e-6
        if older.newer_version is None and _replaces(newer, older):
            older.newer_version = newer.id
    # Then validity: a version that does not hold now (stale, or valid only from a later
    # date) goes below one that does, unless the query names a word they differ in.
    for holds, other in holding:
        if other.score >= holds.score and names(holds) == names(other):
            other.score = holds.score - 1e-6


def _replaces(newer: Ranked, older: Ranked) -> bool:
    """Whether the newer of two versions is the current one, so the older is marked: not
    for events (a later episode is another event, "Deployed v1.3" does not retract "Deployed
    v1.2") nor for two memories of other types."""
    kind = older.row.type
    return kind == newer.row.type and kind != "episode"


def _rows_in(index: VectorIndex, ranked: list[Ranked]) -> list[int]:
    """Each one's row in the index (-1: none): kept by those scored on held facts, looked up
    by id for the others (rows read from the store)."""
    rows = [r.row.at if isinstance(r.row, HeldRow) else -1 for r in ranked]
    asked = [k for k, row in enumerate(rows) if row < 0]
    if asked:
        found = index.ids.rows_of([ranked[k].id for k in asked]).tolist()
        for k, row in zip(asked, found, strict=True):
            rows[k] = row
    return rows


def _one_memory(a: ScoringRow, b: ScoringRow) -> bool:
    """Of one type, time and place (`domain.repeats`): an episode faded a month before its
    live repeat is another event, a note for another place another note, and each answers."""
    return one_place(a.place, b.place) and one_time(
        (a.type, a.valid_from, a.valid_to, a.created_at),
        (b.type, b.valid_from, b.valid_to, b.created_at),
    )


async def keyword_candidates(
    query: str,
    *,
    store: Store,
    scope: Scope,
    settings: RecallSettings,
    types: set[str] | None = None,
    whole_archive: bool = False,
    held: bool = False,
) -> KeywordRead:
    """The keyword half of `rank`'s candidates; it needs no query vector, so a caller runs
    it while the query is embedded (the two overlap: SQLite and the model each release the
    GIL). `held`: the index holds what ranking scores for every role of the scope, so only
    the hits' ids are read (`Store.keyword_hits`)."""
    limit, faded = _keyword_limit(settings, types), _faded_limit(settings, types)
    if held:
        hits = await store.keyword_hits(
            query, scope, limit=limit, faded=faded, include_archived=whole_archive
        )
        return KeywordRead([], hits)
    rows = await store.candidates(
        query, scope, limit=limit, faded=faded, include_archived=whole_archive
    )
    return KeywordRead(rows)


async def held_keywords(
    query: str,
    *,
    index: VectorIndex,
    store: Store,
    scope: Scope,
    settings: RecallSettings,
    types: set[str] | None = None,
    whole_archive: bool = False,
) -> KeywordRead:
    """`keyword_candidates` from the postings the index holds (`VectorIndex.keyword_hit_rows`),
    for an index brought up to date and holding every role of `scope`: awaited after the
    sync. Inside a transaction (whose rows the postings do not hold yet), or before the
    postings are loaded, the store searches."""
    limit, faded = _keyword_limit(settings, types), _faded_limit(settings, types)
    hits = None
    looked: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    if not store.in_transaction:
        await index.pull_keywords(store)
        hits = index.keyword_hit_rows(
            query_stems(query) if limit > 0 else [],
            scope,
            limit=limit,
            faded=faded,
            wide=whole_archive,
            floor=store.common_floor,
            looked=looked,
        )
    if hits is None:
        return await keyword_candidates(
            query,
            store=store,
            scope=scope,
            settings=settings,
            types=types,
            whole_archive=whole_archive,
            held=True,
        )
    return KeywordRead([], None, postings=looked, hit_rows=hits)


def _spreads(s: RecallSettings, hops: int) -> bool:
    """Whether ranking spreads activation at all (and so needs out-edges)."""
    return hops > 0 and s.gamma != 0


def _score_parts(
    rows: list[Ranked], query_tokens: set[str], now: float, s: RecallSettings, facts: HeldFacts
) -> None:
    """rel, rec and imp of every row in one vectorised pass (no per-candidate numpy calls),
    and the relevance a faded row ranks without (`Ranked.drop`).

    A row scored on held facts (`storage.facts`) has its importance, cue words and use
    history read from the columns for all of them at once; a row read from the store, from
    its fields. Both fill the same arrays: a score is the same from either, to the bit.
    """
    if not rows:
        return
    m = len(rows)
    importance = np.empty(m)
    counts = np.empty(m)
    firsts = np.full(m, np.nan)
    lone = np.full(m, np.nan)  # the one use time of a memory used once
    times: dict[int, list[float]] = {}  # by position: the use times of the others
    cues: list[frozenset[str]] = [frozenset()] * m
    held: list[int] = []
    held_at: list[int] = []
    for i, r in enumerate(rows):
        row = r.row
        if isinstance(row, HeldRow):
            held.append(i)
            held_at.append(row.at)
            continue
        importance[i] = row.importance
        counts[i] = row.actr_count
        if row.first_access_at is not None:
            firsts[i] = row.first_access_at
        times[i] = row.actr_times
        cues[i] = row.cues
    if held:
        at = np.asarray(held_at, dtype=np.int64)
        where = np.asarray(held)
        importance[where] = facts.importance[at]
        uses, first, newest, more = facts.use_columns(at, [rows[i].id for i in held])
        counts[where], firsts[where], lone[where] = uses, first, newest
        times.update((held[k], t) for k, t in more.items())
        for i, cue in zip(held, facts.cue_sets(at), strict=True):
            cues[i] = cue
    # Cue sets are shared by memories with equal labels: each distinct one once.
    seen: dict[frozenset[str], float] = {}
    overlap = []
    for cue in cues:
        value = seen.get(cue)
        if value is None:
            value = seen[cue] = scoring.overlap_coefficient(query_tokens, cue)
        overlap.append(value)
    # A time in the future (an import, a skewed clock) counts as now, never as fresher.
    width = max((len(t) for t in times.values()), default=0)
    used_once = ~np.isnan(lone)
    if width == 0 and used_once.any():
        width = 1
    ages = np.full((m, width), np.nan)
    if width:
        ages[used_once, 0] = np.maximum(now - lone[used_once], 0.0)
    for i, t in times.items():
        if t:
            ages[i, : len(t)] = [max(now - x, 0.0) for x in t]
    first_ages = np.where(np.isnan(firsts), np.nan, np.maximum(now - firsts, 0.0))
    rel = scoring.relevance(
        np.array([r.semantic for r in rows]),
        np.array(overlap),
        s.lam,
        lex=np.array([r.lex for r in rows]),
        mu=s.mu,
    )
    rec = np.asarray(
        scoring.sigmoid(scoring.padded_base_levels(ages, counts, first_ages, s.decay, s.time_grain))
    )
    for r, over, rel_i, rec_i, imp in zip(
        rows, overlap, rel.tolist(), rec.tolist(), (importance / 10.0).tolist(), strict=True
    ):
        r.overlap = over
        r.rel = rel_i
        r.rec = rec_i
        r.imp = imp
        # A faded one (a candidate, or a correction brought in by what it supersedes) ranks
        # as if it were less relevant; `rel` stays as it is for the weak line and the reply.
        r.drop = s.faded_penalty if r.faded else 0.0


def _ranges(rows: list[Ranked]) -> dict[str, tuple[float, float]]:
    if not rows:
        return {}
    out = {}
    for name in ("rel", "rec", "imp"):
        values = [r.ranked_rel if name == "rel" else getattr(r, name) for r in rows]
        out[name] = (min(values), max(values))
    return out


def _scaled(
    rel: np.ndarray,
    rec: np.ndarray,
    imp: np.ndarray,
    ranges: dict[str, tuple[float, float]],
    s: RecallSettings,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """rel', rec' and imp' (min-max on the candidates' `ranges`; rec and imp over a span of at
    least `norm_min_span`) and the relevance gate: what S_base weighs (DESIGN.md §5.5)."""
    return (
        scoring.minmax(rel, *ranges["rel"], min_span=0.0),
        scoring.minmax(rec, *ranges["rec"], min_span=s.norm_min_span),
        scoring.minmax(imp, *ranges["imp"], min_span=s.norm_min_span),
        scoring.relevance_gate(rel, ranges["rel"][1]),
    )


def _base(rows: list[Ranked], ranges: dict[str, tuple[float, float]], s: RecallSettings) -> None:
    """S_base with min-max over the candidate set; rows added later use the same ranges."""
    if not rows:
        return
    w = scoring.Weights(s.a_rel, s.a_rec, s.a_imp, s.gamma)
    rel, rec, imp, gate = _scaled(
        np.array([r.ranked_rel for r in rows]),
        np.array([r.rec for r in rows]),
        np.array([r.imp for r in rows]),
        ranges,
        s,
    )
    base = scoring.base_scores(rel, rec, imp, w, gate)
    for r, b in zip(rows, base, strict=True):
        r.base = float(b)


@dataclass
class _Pass:
    """What scoring a memory for one query needs, shared by the steps after the candidates."""

    store: Store
    index: VectorIndex
    query_vector: np.ndarray | None
    query_tokens: set[str]
    scope: Scope
    s: RecallSettings
    now: float
    types: set[str] | None
    ranges: dict[str, tuple[float, float]]
    candidates: dict[str, Ranked]


def _held(run: _Pass) -> bool:
    """Whether the index holds the rows whose edges ranking follows: every role the scope
    sees is loaded. Not while the first read of the vectors waits for the model (a ranking
    on keywords alone): the store is asked then, as the held edges' ends cannot be checked."""
    return run.index.holds(run.scope.visible_roles)


async def _out_edges(
    run: _Pass, sources: list[str], ranked: list[Ranked] | None = None
) -> list[EdgeRow]:
    """Out-edges of `sources` to live targets inside the scope (`storage.links`); by their
    rows when they are `ranked` candidates all held (`_held_at`)."""
    if not _held(run):
        return await run.store.out_edges(sources, run.scope)
    at = None if ranked is None else _held_at(ranked)
    if at is not None:
        return run.index.links.out_edges_at(at, run.scope, run.index)
    return run.index.links.out_edges(sources, run.scope, run.index)


async def _successors(run: _Pass, targets: list[Ranked]) -> list[EdgeRow]:
    """Superseding links into `targets` from live sources inside the scope, likewise."""
    if not _held(run):
        ids = [r.id for r in targets]
        return await run.store.successors(ids, SUPERSEDING_RELATIONS, run.scope)
    links, index = run.index.links, run.index
    at = _held_at(targets)
    if at is not None:
        return links.successors_at(at, SUPERSEDING_RELATIONS, run.scope, index)
    return links.successors([r.id for r in targets], SUPERSEDING_RELATIONS, run.scope, index)


def _held_at(ranked: list[Ranked]) -> np.ndarray | None:
    """The index rows of `ranked` when every one was scored on held facts (`HeldRow.at`),
    else None: a row read from the store is looked up by id, as an edge may name a memory
    the index does not hold yet."""
    rows = [r.row.at if isinstance(r.row, HeldRow) else -1 for r in ranked]
    if -1 in rows:
        return None
    return np.array(rows, dtype=np.int64)


async def _add_outsiders(run: _Pass, ids: list[str]) -> None:
    """Score memories reached by an edge rather than by the query, on the candidates' scale
    (from the facts the index holds, `storage.facts`, or rows read from the store)."""
    wanted = [i for i in ids if i not in run.candidates]
    if not wanted:
        return
    read: list[ScoringRow | HeldRow] = []
    if _held(run):
        held = run.index.held_rows(wanted)
        read = [held[i] for i in wanted if i in held]
        wanted = [i for i in wanted if i not in held]
    if wanted:
        read += await run.store.scoring_rows(wanted)
    rows = [Ranked(row, "spread") for row in read if not run.types or row.type in run.types]
    if run.query_vector is not None:
        for r, cos in zip(
            rows, run.index.cosines([r.id for r in rows], run.query_vector), strict=True
        ):
            r.cos = cos
    for r in rows:
        r.semantic = r.cos or 0.0
    _score_parts(rows, run.query_tokens, run.now, run.s, run.index.facts)
    if rows:
        _base(rows, run.ranges or _ranges(rows), run.s)
    run.candidates.update({r.id: r for r in rows})


def _novelty(index: VectorIndex, pairs: list[tuple[str, str]]) -> np.ndarray:
    """1 − cos(src, dst) per edge (clipped to [0, 1]; 1 when either vector is unknown).

    Spreading brings in what relevance cannot see: a memory associated with a relevant one
    by cause, sequence or part. The part of an association that is plain similarity is
    already in each memory's own relevance, so relaying it again only pushed clusters of
    near-duplicates (and reflection's similarity links) above the one memory that answers.
    """
    out = np.ones(len(pairs))
    if not pairs:
        return out
    rows = index.ids.rows_of([end for pair in pairs for end in pair]).reshape(-1, 2)
    known = np.flatnonzero((rows >= 0).all(axis=1))
    if len(known):
        src = index.matrix[rows[known, 0]]
        dst = index.matrix[rows[known, 1]]
        cos = np.einsum("ij,ij->i", src, dst)
        out[known] = np.clip((0.9 - cos) / 0.4, 0.0, 1.0)
    return out


async def _spread(run: _Pass, seeds: list[Ranked], hops: int) -> None:
    """Spreading activation from every candidate over typed edges, `hops` deep."""
    s = run.s
    if not _spreads(s, hops) or not seeds:
        return
    frontier = {r.id: r.base for r in seeds}
    received: dict[str, float] = {}
    paths: dict[str, list[str]] = {}
    first: list[Ranked] | None = seeds  # the first hop's sources, by row where held
    for _ in range(hops):
        # DESIGN.md §16.3, §16.4: only edges to live targets inside the scope, so an archived
        # or foreign memory is never written into the frontier and relays nothing.
        found = await _out_edges(run, list(frontier), first)
        first = None
        # `scoring.spread_hop` on arrays: each edge's source by its place in the frontier,
        # the edges of one source in the store's order (ties keep it).
        places = {node: place for place, node in enumerate(frontier)}
        group = np.fromiter((places[e.src] for e in found), dtype=np.int64, count=len(found))
        at, amounts = scoring.hop_passes(
            np.fromiter(frontier.values(), dtype=np.float64, count=len(frontier))[group],
            group,
            np.fromiter((e.weight for e in found), dtype=np.float64, count=len(found))
            * _novelty(run.index, [(e.src, e.dst) for e in found]),
            np.fromiter((_TYPE_WEIGHTS[e.type] for e in found), dtype=np.float64, count=len(found)),
            np.fromiter((e.src == e.dst for e in found), dtype=bool, count=len(found)),
            decay=s.per_hop_decay,
            fanout=s.per_hop_fanout,
            floor=s.activation_floor,
        )
        reached = scoring.gather_passes(
            (found[k].src, found[k].dst, found[k].type, amount)
            for k, amount in zip(at.tolist(), amounts.tolist(), strict=True)
        )
        for target, (amount, parent, relation) in reached.items():
            received[target] = received.get(target, 0.0) + amount
            if target not in paths:
                paths[target] = [*paths.get(parent, [parent[:8]]), f"-{relation}->", target[:8]]
        frontier = {t: a for t, (a, _, _) in reached.items()}
        if not frontier:
            break
    await _add_outsiders(run, list(received))
    for target, amount in received.items():
        r = run.candidates.get(target)
        if r is not None:
            r.spread = amount
            if r.source == "spread":
                r.path = paths.get(target, [])


async def _supersession(run: _Pass) -> None:
    """Flag memories that a newer one refines or contradicts, and bring the newer one in."""
    candidates = run.candidates
    if not candidates:
        return
    links = await _successors(run, list(candidates.values()))
    await _add_outsiders(run, [e.src for e in links if e.src not in candidates])
    for e in links:
        old, new = candidates.get(e.dst), candidates.get(e.src)
        if old is None or new is None or old.id == new.id:
            continue
        if new.row.created_at >= old.row.created_at:
            old.replaced_by.append(new.id)
            if len(old.replaced_by) == 1 and new.source == "spread" and not new.path:
                new.path = [old.id[:8], f"<-{e.type}-", new.id[:8]]
