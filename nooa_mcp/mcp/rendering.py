"""Bounded replies and their text summaries for MCP clients (DESIGN.md §13.4).

Every tool reply carries the reply model as structured content and a compact text rendering
for clients that only show text. Both stay inside a budget (default 8k tokens; prose counted
at 4 characters a token, JSON at 2, as the MiniLM tokenizer counts them): long content is
clipped with a marker that names the `memory://` resource holding the rest, and no reply may
pass the hard cap far below the 25k tokens clients enforce.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import TypeVar

from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel

from ..domain.replies import (
    AuthorResult,
    ExplainResult,
    ExplainRow,
    MemoryView as MemoryViewModel,
    RecallHit,
    RecallResult,
    Reminder,
    ScoreTerms,
    UpdateResult,
)

REPLY_TOKENS = 8_000
"""Default budget of one reply (text and structured content together)."""
HARD_CAP_TOKENS = 20_000
"""No reply passes this, whatever the settings: clients refuse results near 25k tokens."""
HIT_CHARS = 2_000
"""Content of one recall hit is clipped here before the whole reply is measured."""
MIN_HIT_CHARS = 200

M = TypeVar("M", bound=BaseModel)


def memory_uri(memory_id: str) -> str:
    return f"memory://memories/{memory_id}"


#: Characters per token of prose (a reply's summary).
PROSE_CHARS_PER_TOKEN = 4


def text_tokens(text: str, chars_per_token: float = PROSE_CHARS_PER_TOKEN) -> int:
    """Tokens of `text` as the bounds count them: ASCII at `chars_per_token` characters a
    token, and every other character as a token of its own (an emoji, a CJK ideograph or an
    accented letter is one token or more in every tokenizer clients use, not a quarter)."""
    ascii_chars = len(text.encode("ascii", "ignore"))
    return math.ceil(ascii_chars / chars_per_token) + len(text) - ascii_chars


def prefix_within(text: str, tokens: int, chars_per_token: float = PROSE_CHARS_PER_TOKEN) -> int:
    """The length of a prefix of `text` that counts at most `tokens` (by `text_tokens`)."""
    n = min(len(text), int(tokens * chars_per_token))
    while n > 0 and (used := text_tokens(text[:n], chars_per_token)) > tokens:
        n = min(n - 1, n * tokens // used)
    return max(n, 0)


def clip(text: str, limit: int, uri: str) -> str:
    """Cut `text` to about `limit` characters, ending with a marker naming where the rest is."""
    if len(text) <= limit:
        return text
    kept = text[: max(limit, 0)].rstrip()
    return (
        f"{kept}… [clipped: {len(text) - len(kept)} of {len(text)} characters left out; read {uri}]"
    )


#: Characters per token of a JSON reply. 4 holds for prose; ids, timestamps, numbers and
#: punctuation run at about 2 in the MiniLM WordPiece tokenizer, and a reply sized at 4
#: passed its budget.
JSON_CHARS_PER_TOKEN = 2
#: Characters per token of a memory's own text read as a resource: prose runs at 4–5, notes
#: with numbers and identifiers at about 3.3 ("harbour123 crane4"), and a piece sized at 4
#: passed its budget.
CONTENT_CHARS_PER_TOKEN = 3


def json_tokens(model: BaseModel) -> int:
    """A structured reply's size in tokens, at JSON_CHARS_PER_TOKEN."""
    return text_tokens(model.model_dump_json(), JSON_CHARS_PER_TOKEN)


def _clip_hits(hits: Iterable[RecallHit], limit: int) -> list[RecallHit]:
    return [
        h.model_copy(update={"content": clip(h.content, limit, memory_uri(h.id))}) for h in hits
    ]


def bound_recall(result: RecallResult, budget_tokens: int = REPLY_TOKENS) -> RecallResult:
    """Fit the structured reply in half the budget; the hits come first.

    Reminders are clipped before any hit is; then hit contents are clipped; only then are the
    lowest-ranked hits left out, and the note says so once. The other half of the budget is
    left for the text rendering, which repeats heads, not contents.
    """
    room = budget_tokens // 2
    bounded = result.model_copy(update={"hits": _clip_hits(result.hits, HIT_CHARS)})
    # Measured once per version of the reply: a dump is most of this function's cost.
    size = json_tokens(bounded)
    if size > room and bounded.reminders:
        clipped = [
            r.model_copy(update={"content": r.content[:MIN_HIT_CHARS]}) for r in result.reminders
        ]
        bounded = bounded.model_copy(update={"reminders": clipped})
        size = json_tokens(bounded)
    limit = HIT_CHARS
    while size > room and limit > MIN_HIT_CHARS:
        limit //= 2
        bounded = bounded.model_copy(update={"hits": _clip_hits(result.hits, limit)})
        size = json_tokens(bounded)
    if size > room and len(bounded.hits) > 1:
        hits = list(bounded.hits)
        while json_tokens(bounded.model_copy(update={"hits": hits})) > room and len(hits) > 1:
            hits.pop()  # drop from the bottom
        note = f"{bounded.note} Lower-ranked results left out to stay within the reply budget."
        bounded = bounded.model_copy(update={"hits": hits, "note": note.strip()})
    return bounded


def bound_explain(result: ExplainResult, budget_tokens: int = REPLY_TOKENS) -> ExplainResult:
    """Drop the oldest replayed accesses (and last rows) until the reply fits half the budget."""
    bounded = result
    while json_tokens(bounded) > budget_tokens // 2 and len(bounded.accesses) > 1:
        keep = max(1, len(bounded.accesses) // 2)
        bounded = bounded.model_copy(update={"accesses": bounded.accesses[:keep]})
    while json_tokens(bounded) > budget_tokens // 2 and len(bounded.rows) > 1:
        bounded = bounded.model_copy(update={"rows": bounded.rows[:-1]})
    return bounded


#: Tokens kept free for the marker that names where the rest of a long memory is.
MARKER_TOKENS = 100
#: The least of a long memory one read shows, whatever the budget.
MIN_PIECE = 1_000


def bound_view(
    view: MemoryViewModel, budget_tokens: int = REPLY_TOKENS, offset: int = 0
) -> MemoryViewModel:
    """One memory's content from `offset`, clipped so a resource read stays within the budget.

    The clip marker names the same resource with the offset where the rest starts.
    """
    bare = view.model_copy(update={"content": ""})
    while json_tokens(bare) > budget_tokens // 2 and len(bare.edges) > 1:
        bare = bare.model_copy(update={"edges": bare.edges[: len(bare.edges) // 2]})
    # What the rest of the view leaves, less room for the marker; never under MIN_PIECE.
    room = budget_tokens - json_tokens(bare) - MARKER_TOKENS
    rest = view.content[offset:]
    if text_tokens(rest, CONTENT_CHARS_PER_TOKEN) <= room:
        return bare.model_copy(update={"content": rest})
    limit = max(prefix_within(rest, room, CONTENT_CHARS_PER_TOKEN), MIN_PIECE)
    if limit >= len(rest):
        return bare.model_copy(update={"content": rest})
    kept = rest[:limit]
    nxt = offset + len(kept)
    marker = (
        f"… [clipped: characters {offset}–{nxt} of {len(view.content)} shown; "
        f"read {memory_uri(view.id)}?offset={nxt} for the rest]"
    )
    return bare.model_copy(update={"content": kept + marker})


def bound_items(items: list[M], model_tokens: int, budget_tokens: int = REPLY_TOKENS) -> int:
    """How many leading items fit in half the budget, given the reply without them."""
    room = budget_tokens // 2 - model_tokens
    used = 0
    for count, item in enumerate(items):
        used += json_tokens(item)
        if used > room:
            return count
    return len(items)


def bound_list(result: M, field: str, budget_tokens: int = REPLY_TOKENS) -> tuple[M, int]:
    """`result` with only the leading items of its list `field` that fit; and how many were cut.

    The rest of the reply is measured with the list emptied: counting the items there as well
    left no room once the list was long (40 open todos listed none; 15 of them fit).
    """
    items = getattr(result, field)
    rest = json_tokens(result.model_copy(update={field: []}))
    shown = bound_items(items, rest, budget_tokens)
    return result.model_copy(update={field: items[:shown]}), len(items) - shown


_SUMMARY_CLIPPED = "… [summary clipped; the structured result has every field]"


def tool_result(model: BaseModel, text: str, budget_tokens: int = REPLY_TOKENS) -> CallToolResult:
    """A CallToolResult with `model` as structured content and `text` as its summary.

    The text is clipped to whatever the structured part leaves of the budget, and the sum is
    held under HARD_CAP_TOKENS.
    """
    structured = model.model_dump(mode="json")
    used = text_tokens(json.dumps(structured), JSON_CHARS_PER_TOKEN)
    room = max(min(budget_tokens, HARD_CAP_TOKENS) - used, 250)
    if text_tokens(text) > room:
        # The marker is part of the reply: it fits in the room too (DESIGN §13.4).
        kept = text[: prefix_within(text, room - text_tokens(_SUMMARY_CLIPPED))].rstrip()
        text = kept + _SUMMARY_CLIPPED
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=structured
    )


# --------------------------------------------------------------------------- text renderings


def _num(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") if value else "0"


def render_reminders(reminders: list[Reminder], more: int = 0) -> list[str]:
    if not reminders and not more:
        return []
    lines = ["", "Reminders (intents that fired — act on them):"]
    for r in reminders:
        also = f" (also {len(r.also)} more intent(s) with this text)" if r.also else ""
        lines.append(f"- [{r.intent_id[:8]}] ({r.reason}{r.lateness()}) {r.content}{also}")
    if more:
        lines.append(f"{more} more due: they come with later replies, or call intent action=check.")
    return lines


def _flags(hit: RecallHit) -> str:
    marks = []
    if hit.flags.weak:
        marks.append("WEAK")
    if hit.flags.stale:
        marks.append("STALE")
    if hit.flags.holds_from:
        marks.append(f"holds from {hit.flags.holds_from:%Y-%m-%d}")
    if hit.flags.superseded_by:
        marks.append(f"superseded by {hit.flags.superseded_by[:8]}")
    if hit.flags.newer_version:
        marks.append(f"newer version {hit.flags.newer_version[:8]} above")
    if hit.flags.faded:
        marks.append("FADED")
    if hit.status:
        marks.append(hit.status)
    return f" [{', '.join(marks)}]" if marks else ""


def render_recall(result: RecallResult) -> str:
    head = f'{len(result.hits)} result(s) for "{result.query}" (scope {result.scope})'
    # The note, when the recall wrote one, already says these: one sentence each, not two.
    if result.embeddings == "warming" and "keyword matches only" not in result.note:
        head += " — embedding model still loading, keyword matches only"
    lines = [head + ":"]
    if (result.nothing_relevant or not result.hits) and not result.note.startswith("Nothing"):
        lines.append("Nothing relevant is stored for this query.")
    for hit in result.hits:
        c = hit.components
        title = f' "{hit.title}"' if hit.title else ""
        lines.append(
            f"{hit.rank}. [{hit.id8}] {hit.type.value}{title} score {_num(hit.score)} "
            f"(rel {_num(c.rel)} rec {_num(c.rec)} imp {_num(c.imp)} spread {_num(c.spread)}, "
            f"{c.source}){_flags(hit)}"
        )
        lines.append(f"   {hit.content}")
        for ref in hit.references:
            note = f" ({ref.note})" if ref.note else ""
            lines.append(f"   ref {ref.uri}: {ref.state}{note} {ref.value[:200]}".rstrip())
    if result.note:
        lines.append(result.note)
    lines += render_reminders(result.reminders)  # the note counts the rest
    return "\n".join(lines)


_AUTHOR_WORDS = {
    "created": "Stored as new memory",
    "exists": "Already stored, unchanged:",
    "blocked-by-tombstone": "Not stored: this says what was forgotten before",
    "revived": "Revived forgotten memory",
}


def render_author(result: AuthorResult) -> str:
    line = f"{_AUTHOR_WORDS.get(result.status, result.status)} {result.id[:8]}"
    if result.similarity is not None and result.status != "created":
        line += f" (similarity {_num(result.similarity)})"
    lines = [line + "."]
    lines += result.notes(relink="link it with refines", revive="revive=true")
    lines += render_reminders(result.reminders, result.reminders_more)
    return "\n".join(lines)


def render_update(result: UpdateResult) -> str:
    changed = ", ".join(result.changed) if result.changed else "nothing"
    line = f"Updated {result.id[:8]}: {changed}."
    if result.merged_from:
        line = (
            f"{result.merged_from[:8]} was merged into {result.id[:8]} by reflection, which "
            f"answers for it: updated that one: {changed}."
        )
    if result.tags is not None:
        # The list given replaced the old one: say what it is now.
        line += f" Tags now: {', '.join(result.tags) or 'none'}."
    if result.archived:
        line += " It is forgotten now (kept, never recalled; revive brings it back)."
    return "\n".join([line, *render_reminders(result.reminders, result.reminders_more)])


def _state(state: str | None) -> str:
    """ " (faded)" or " (forgotten)" after a memory's id; nothing for a live one."""
    return f" ({state})" if state and state != "live" else ""


def _row_flags(row: ExplainRow) -> str:
    marks = [
        name
        for name, on in (
            ("weak", row.flags.weak),
            ("stale", row.flags.stale),
            ("faded", row.flags.faded),
            ("forgotten", row.forgotten),
        )
        if on
    ]
    if row.flags.holds_from:
        marks.append(f"holds from {row.flags.holds_from:%Y-%m-%d}")
    if row.flags.superseded_by:
        marks.append(f"superseded by {row.flags.superseded_by[:8]}")
    if row.flags.newer_version:
        marks.append(f"newer version {row.flags.newer_version[:8]} above")
    return f" [{', '.join(marks)}]" if marks else ""


def _terms(terms: ScoreTerms | None) -> str:
    """ " (= 1 rel + 0.2 rec + 0.03 imp …)": the terms the score adds up, the scaled and
    weighted parts (spread, a penalty and a version's move only when not 0)."""
    if terms is None:
        return ""
    said = f"{_num(terms.rel)} rel + {_num(terms.rec)} rec + {_num(terms.imp)} imp"
    for name, value in (("spread", terms.spread), ("penalty", terms.penalty)):
        if abs(value) >= 0.005:
            said += f" {'-' if value < 0 else '+'} {_num(abs(value))} {name}"
    if abs(terms.order) >= 0.005:
        said += f" {'-' if terms.order < 0 else '+'} {_num(abs(terms.order))} to order versions"
    return f" (= {said})"


def render_explain(result: ExplainResult) -> str:
    lines: list[str] = []
    if result.mode == "query":
        lines.append(f'Dry run for "{result.query}" (nothing logged):')
        for row in result.rows:
            path = f" via {' → '.join(p[:8] for p in row.path)}" if row.path else ""
            lines.append(
                f"{row.rank}. [{row.id[:8]}] {row.type.value} score {_num(row.score)}"
                f"{_terms(row.terms)} "
                f"cos {'-' if row.cos is None else _num(row.cos)} rel {_num(row.rel)} "
                f"rec {_num(row.rec)} imp {_num(row.imp)} "
                f"spread {_num(row.spread)} ({row.source}){path}{_row_flags(row)} — {row.head}"
            )
        if not result.rows:
            lines.append("No candidates.")
    elif result.mode == "replay":
        lines.append(
            f"Access history of {(result.memory_id or '')[:8]}{_state(result.state)}: "
            f"{result.total_accesses} access(es), newest first ({len(result.accesses)} shown):"
        )
        for a in result.accesses:
            rank = f" rank {a.rank}" if a.rank is not None else ""
            score = f" score {_num(a.score)}" if a.score is not None else ""
            query = f' "{a.query}"' if a.query else ""
            lines.append(f"- {a.ts:%Y-%m-%d %H:%M} {a.channel.value}{query}{rank}{score}")
        if result.total_accesses > len(result.accesses) and result.memory_id:
            lines.append(f"More in {memory_uri(result.memory_id)}/access-log")
    elif result.why_not is not None:
        w = result.why_not
        verdict = f"in the top {w.k} at rank {w.rank}" if w.in_top_k else f"not in the top {w.k}"
        # Said once: a reason that gives the rank against the top k is the verdict ("in the
        # top 10 at rank 1. It ranks 1 of the top 10." said it twice).
        said = f"ranks {w.rank} of the top {w.k}" in w.reason or (
            f"ranks {w.rank}, below the top {w.k}" in w.reason
        )
        lines.append(
            f'{w.id[:8]} for "{result.query}": ' + ("" if said else f"{verdict}. ") + w.reason
        )
        if w.score is not None:
            against = (
                f"; rank {w.k}'s {_num(w.kth_score)}{_terms(w.kth_terms)}"
                if w.kth_score is not None
                else ""
            )
            lines.append(f"score {_num(w.score)}{_terms(w.terms)}{against}")
        lines.append(
            f"retention {_num(w.retention)}"
            + (f", prune ETA {w.prune_eta:%Y-%m-%d}" if w.prune_eta else "")
            + ("" if w.prune_eta or w.archived else ", never pruned (protected)")
            + (f", {w.state}" if w.state != "live" else "")
        )
    if result.embeddings == "warming":
        lines.append("(embedding model still loading: keyword candidates only)")
    if result.note:
        lines.append(result.note)
    return "\n".join(lines)
