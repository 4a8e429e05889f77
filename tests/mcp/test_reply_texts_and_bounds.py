"""What the model reads back: reply texts and reply bounds (DESIGN.md §13.4), pinned.

The renderers and bounds of `nooa_mcp/mcp/rendering.py` are called directly (so mutation
testing reaches them without a server), the exact lines a model reads are asserted, and reply
sizes are counted with the bundled MiniLM tokenizer (tests/tokens_support.py), never with the
module's own estimate. A k=50 recall through a server must fit the 8k budget, and the hard cap
holds whatever budget a caller passes.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from mcp import Client
from tokens_support import CLIENT_CAP, REPLY_BUDGET, real_tokens

from nooa_mcp import Memory
from nooa_mcp.config import Settings
from nooa_mcp.domain.replies import (
    AuthorResult,
    ExplainResult,
    ExplainRow,
    Flags,
    MemoryView,
    RecallHit,
    RecallResult,
    Reminder,
    ResolvedReference,
    ScoreTerms,
    SimilarTo,
    TombstoneInfo,
    UpdateResult,
    WhyNot,
)
from nooa_mcp.domain.schema import AccessRecord, Channel, Components, MemoryType
from nooa_mcp.embeddings import HashEmbedder
from nooa_mcp.mcp.rendering import (
    bound_explain,
    bound_items,
    bound_list,
    bound_recall,
    bound_view,
    clip,
    render_author,
    render_explain,
    render_recall,
    render_reminders,
    render_update,
    tool_result,
)
from nooa_mcp.mcp.server import build_server

pytestmark = pytest.mark.anyio

A = "a1b2c3d4" + "0" * 24
B = "b1b2c3d4" + "1" * 24
C = "c1c2c3d4" + "2" * 24
TS = datetime(2026, 11, 30, 14, 5, tzinfo=UTC)


def _row(rank: int, ident: str, **extra: object) -> ExplainRow:
    fields: dict[str, object] = {
        "rank": rank,
        "id": ident,
        "score": 1.25,
        "source": "direct",
        "cos": 0.5,
        "rel": 0.4,
        "rec": 0.1,
        "imp": 0.55,
        "spread": 0.0,
        "type": MemoryType.info,
        "owner": "coder",
        "head": "The relay sits in bay 4.",
    }
    fields.update(extra)
    return ExplainRow.model_validate(fields)


def _access(n: int, **extra: object) -> AccessRecord:
    fields: dict[str, object] = {"ts": TS, "channel": Channel.recalled}
    fields.update(extra)
    return AccessRecord.model_validate(fields)


# --------------------------------------------------------------------------- render_author


def test_an_author_reply_says_what_happened_to_the_write() -> None:
    assert render_author(AuthorResult(id=A, status="created")) == "Stored as new memory a1b2c3d4."
    exists = render_author(AuthorResult(id=A, status="exists", similarity=1.0))
    assert exists == "Already stored, unchanged: a1b2c3d4 (similarity 1)."
    # A created memory never shows a similarity of its own (its close match says it).
    created = render_author(AuthorResult(id=A, status="created", similarity=0.5))
    assert created == "Stored as new memory a1b2c3d4."


def test_an_author_reply_names_the_close_match_and_what_differs() -> None:
    """The close match is kept beside the new one; the text a model reads names it,
    says what differs and how to mark a successor (before, only structured content did)."""
    near = SimilarTo(id=B, similarity=0.9412, differs_in=["number", "date"])
    text = render_author(AuthorResult(id=A, status="created", similar_to=near))
    assert text.splitlines() == [
        "Stored as new memory a1b2c3d4.",
        "Close to b1b2c3d4 (similarity 0.94; differs in number, date): both kept, linked "
        "related. If it replaces b1b2c3d4, link it with refines.",
    ]
    reworded = SimilarTo(id=B, similarity=0.93)
    text = render_author(AuthorResult(id=A, status="created", similar_to=reworded))
    assert "(similarity 0.93; reads as a rewording)" in text


def test_an_author_reply_on_a_forgotten_value_says_how_to_restore_it() -> None:
    stone = TombstoneInfo(memory_id=C, reason="forgotten", archived_at=TS, similarity=0.97)
    blocked = AuthorResult(id=C, status="blocked-by-tombstone", similarity=0.97, tombstone=stone)
    assert render_author(blocked).splitlines() == [
        "Not stored: this says what was forgotten before c1c2c3d4 (similarity 0.97).",
        "It was archived on 2026-11-30 (forgotten) as c1c2c3d4. Pass revive=true to keep it "
        "anyway (in the same words, that memory is restored).",
    ]
    revived = AuthorResult(id=C, status="revived", tombstone=stone)
    assert render_author(revived).splitlines() == [
        "Revived forgotten memory c1c2c3d4.",
        "It had been archived on 2026-11-30 (forgotten); it is active again.",
    ]
    fired = Reminder(intent_id=B, content="Mention the freeze.", reason="time", fired_at=TS)
    with_reminder = render_author(AuthorResult(id=A, status="created", reminders=[fired]))
    assert with_reminder.splitlines()[-1] == "- [b1b2c3d4] (time) Mention the freeze."


# --------------------------------------------------------------------------- render_update


def test_an_update_names_what_changed_and_says_when_it_archived() -> None:
    plain = render_update(UpdateResult(id=A, changed=["title", "tags"]))
    assert plain == "Updated a1b2c3d4: title, tags."
    nothing = render_update(UpdateResult(id=A, changed=[]))
    assert nothing == "Updated a1b2c3d4: nothing."
    archived = render_update(UpdateResult(id=A, changed=["archived"], archived=True))
    assert archived == (
        "Updated a1b2c3d4: archived. It is forgotten now (kept, never recalled; revive brings "
        "it back)."
    )


def test_an_update_carries_the_reminders_it_fired() -> None:
    fired = Reminder(intent_id=B, content="Mention the freeze.", reason="cue", fired_at=TS)
    text = render_update(
        UpdateResult(id=A, changed=["content"], reminders=[fired], reminders_more=2)
    )
    assert text.splitlines() == [
        "Updated a1b2c3d4: content.",
        "",
        "Reminders (intents that fired — act on them):",
        "- [b1b2c3d4] (cue) Mention the freeze.",
        "2 more due: they come with later replies, or call intent action=check.",
    ]


# --------------------------------------------------------------------------- render_explain


def test_a_dry_run_shows_every_score_part_and_the_path_spreading_took() -> None:
    rows = [
        _row(1, A),
        _row(2, B, cos=None, source="spread", spread=0.3, path=[A, B], score=0.75),
    ]
    text = render_explain(ExplainResult(mode="query", query="relay bay", rows=rows))
    assert text.splitlines() == [
        'Dry run for "relay bay" (nothing logged):',
        "1. [a1b2c3d4] info score 1.25 cos 0.5 rel 0.4 rec 0.1 imp 0.55 spread 0 (direct)"
        " — The relay sits in bay 4.",
        "2. [b1b2c3d4] info score 0.75 cos - rel 0.4 rec 0.1 imp 0.55 spread 0.3 (spread)"
        " via a1b2c3d4 → b1b2c3d4 — The relay sits in bay 4.",
    ]


def test_a_dry_run_with_no_candidates_says_so_and_says_when_the_model_is_loading() -> None:
    text = render_explain(ExplainResult(mode="query", query="x", embeddings="warming"))
    assert text.splitlines() == [
        'Dry run for "x" (nothing logged):',
        "No candidates.",
        "(embedding model still loading: keyword candidates only)",
    ]
    ready = render_explain(ExplainResult(mode="query", query="x", rows=[_row(1, A)]))
    assert "No candidates." not in ready and "still loading" not in ready


def test_a_replay_lists_accesses_newest_first_and_points_to_the_rest() -> None:
    accesses = [
        _access(1, query="relay bay", rank=2, score=0.8125),
        _access(2, channel=Channel.created),
    ]
    result = ExplainResult(mode="replay", memory_id=A, accesses=accesses, total_accesses=7)
    assert render_explain(result).splitlines() == [
        "Access history of a1b2c3d4: 7 access(es), newest first (2 shown):",
        '- 2026-11-30 14:05 recalled "relay bay" rank 2 score 0.81',
        "- 2026-11-30 14:05 created",
        f"More in memory://memories/{A}/access-log",
    ]
    whole = ExplainResult(mode="replay", memory_id=A, accesses=accesses, total_accesses=2)
    assert "More in" not in render_explain(whole)


def _why_not(**extra: object) -> WhyNot:
    fields: dict[str, object] = {
        "id": C,
        "in_top_k": False,
        "rank": None,
        "k": 5,
        "score": 0.2,
        "components": None,
        "kth_score": 0.9,
        "kth_components": None,
        "retention": 0.25,
        "prune_eta": None,
        "archived": False,
        "reason": "Its relevance is below the fifth hit's.",
    }
    fields.update(extra)
    return WhyNot.model_validate(fields)


def test_why_not_gives_the_verdict_the_reason_both_scores_and_the_retention() -> None:
    mine = ScoreTerms(rel=0.1, rec=0.05, imp=0.05, spread=0.0, penalty=0.0, order=0.0)
    kth = ScoreTerms(rel=0.6, rec=0.1, imp=0.2, spread=0.0, penalty=0.0, order=0.0)
    out = ExplainResult(mode="why_not", query="relay", why_not=_why_not(terms=mine, kth_terms=kth))
    assert render_explain(out).splitlines() == [
        'c1c2c3d4 for "relay": not in the top 5. Its relevance is below the fifth hit\'s.',
        "score 0.2 (= 0.1 rel + 0.05 rec + 0.05 imp); rank 5's 0.9 (= 0.6 rel + 0.1 rec + 0.2 imp)",
        # Live with no prune date: pruning never takes it.
        "retention 0.25, never pruned (protected)",
    ]
    eta = datetime(2027, 2, 1, tzinfo=UTC)
    inside = _why_not(
        in_top_k=True, rank=3, prune_eta=eta, archived=True, state="faded", reason="Ranked."
    )
    text = render_explain(ExplainResult(mode="why_not", query="relay", why_not=inside))
    assert text.splitlines() == [
        'c1c2c3d4 for "relay": in the top 5 at rank 3. Ranked.',
        "score 0.2; rank 5's 0.9",
        "retention 0.25, prune ETA 2027-02-01, faded",
    ]


def test_why_not_says_the_rank_once_when_the_reason_gives_it() -> None:
    # Before: 'in the top 10 at rank 1. It ranks 1 of the top 10.'
    for in_top, rank, reason in (
        (True, 1, "It ranks 1 of the top 5."),
        (False, 9, "It ranks 9, below the top 5: rel 0.100 < 0.600 against rank 5."),
    ):
        why = _why_not(in_top_k=in_top, rank=rank, reason=reason)
        text = render_explain(ExplainResult(mode="why_not", query="relay", why_not=why))
        assert text.splitlines()[0] == f'c1c2c3d4 for "relay": {reason}'


# --------------------------------------------------------------------------- bound_explain


def _big_explain(n_accesses: int, n_rows: int) -> ExplainResult:
    query = "relay bay harbour crane " * 20
    accesses = [_access(i, query=query, rank=i % 9 + 1, score=0.5) for i in range(n_accesses)]
    rows = [_row(i + 1, f"{i:032x}", head="word " * 60) for i in range(n_rows)]
    return ExplainResult(
        mode="replay", memory_id=A, accesses=accesses, rows=rows, total_accesses=n_accesses
    )


def test_a_long_access_history_is_cut_to_its_newest_part_within_half_the_budget() -> None:
    result = _big_explain(400, 0)
    bounded = bound_explain(result)
    size = real_tokens(bounded.model_dump_json())
    assert size <= REPLY_BUDGET // 2, size
    assert 10 <= len(bounded.accesses) < 400
    # Newest first: the kept ones are the head of the list, in order.
    assert bounded.accesses == result.accesses[: len(bounded.accesses)]
    assert bounded.total_accesses == 400


def test_an_explain_that_fits_is_returned_whole() -> None:
    result = _big_explain(5, 5)
    assert bound_explain(result) == result


def test_many_rows_are_cut_from_the_bottom_and_one_always_stays() -> None:
    result = _big_explain(0, 120)
    bounded = bound_explain(result)
    assert real_tokens(bounded.model_dump_json()) <= REPLY_BUDGET // 2
    assert 5 <= len(bounded.rows) < 120
    assert bounded.rows == result.rows[: len(bounded.rows)]
    tiny = bound_explain(_big_explain(3, 3), budget_tokens=10)
    assert len(tiny.rows) == 1 and len(tiny.accesses) == 1


# --------------------------------------------------------------------------- lists and text


async def test_a_todo_list_shows_as_many_todos_as_fit_and_counts_the_rest(tmp_path: Path) -> None:
    """Catches: the listing bound counted its own items in "the rest of the reply".

    With 40 open todos the list showed none of them ("40 open todo(s): No open todos.").
    """
    settings = Settings(store=tmp_path / "memory.sqlite", owner="coder@laptop")
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as client:
        for n in range(40):
            body = " ".join(f"step{n} part{i} of the harbour crane checklist" for i in range(60))
            added = await client.call_tool("todo", {"action": "add", "content": body})
            assert not added.is_error
        listed = await client.call_tool("todo", {"action": "list", "limit": 40})
    assert not listed.is_error
    text = listed.content[0].text
    shown = listed.structured_content["todos"]
    assert 10 <= len(shown) < 40
    assert f"{40 - len(shown)} more not shown" in text
    assert text.count("step") >= len(shown)
    size = real_tokens(text) + real_tokens(json.dumps(listed.structured_content))
    assert size <= REPLY_BUDGET, size


def test_a_list_that_fits_is_not_cut_and_an_empty_one_stays_empty() -> None:
    result = _big_explain(0, 4)
    same, cut = bound_list(result, "rows")
    assert (same, cut) == (result, 0)
    empty, none_cut = bound_list(_big_explain(0, 0), "rows")
    assert empty.rows == [] and none_cut == 0
    _, all_cut = bound_list(_big_explain(0, 40), "rows", budget_tokens=2)
    assert all_cut == 40


def test_a_clip_keeps_text_at_the_limit_and_names_what_it_left_out() -> None:
    uri = "memory://memories/x"
    assert clip("abcd", 4, uri) == "abcd"
    assert clip("abcde", 4, uri) == f"abcd… [clipped: 1 of 5 characters left out; read {uri}]"
    assert clip("ab   cdef", 5, uri).startswith("ab… [clipped: 7 of 9 characters")


def test_a_summary_is_clipped_to_what_the_structured_part_leaves() -> None:
    """The summary's room is what the budget leaves after the structured reply, in real
    tokens: a long summary beside a large structured part still fits the budget whole."""
    big = UpdateResult(id=A, changed=[f"link:related->{i:08x}" for i in range(300)])
    prose = "The staging database restarts at midnight and backups run after it. " * 600
    reply = tool_result(big, prose)
    text = reply.content[0].text
    assert text.endswith("… [summary clipped; the structured result has every field]")
    size = real_tokens(text) + real_tokens(json.dumps(reply.structured_content))
    assert size <= REPLY_BUDGET, size
    assert len(reply.structured_content["changed"]) == 300
    short = tool_result(big, "Updated.")
    assert short.content[0].text == "Updated."


# --------------------------------------------------------------------------- bound_view

#: The documented rules the bounds follow: JSON counted at 2 characters a token and a
#: memory's own text at 3 (ASCII; any other character is a token of its own); a view's
#: structured part in half the budget, its content in what the rest leaves less 100 tokens
#: for the marker, never under 1,000 characters.
JSON_CHARS, CONTENT_CHARS, MARKER = 2, 3, 100


def _view(content: str, edges: int = 0) -> MemoryView:
    edge = {"relation": "related", "target": B, "weight": 0.5, "head": "word " * 8}
    return MemoryView(
        id=A,
        type=MemoryType.info,
        owner="coder",
        title="Relay",
        content=content,
        importance=0.5,
        importance_label="MEDIUM",
        salience=0.3,
        confidence=0.75,
        strength=1,
        reinforcement_count=0,
        access_count=0,
        tags=[],
        entities=[],
        place_or_task="",
        created_at=TS,
        last_accessed_at=TS,
        valid_from=None,
        valid_to=None,
        archived=False,
        status=None,
        trigger=None,
        edges=[dict(edge, target=f"{i:032x}") for i in range(edges)],
        edges_total=edges,
        references=[],
        channels={},
        sizes={},
        retention=1.0,
        prune_eta=None,
    )


def _piece_limit(view: MemoryView, budget: int = REPLY_BUDGET) -> int:
    """Characters of ASCII content one read shows."""
    bare = view.model_copy(update={"content": ""})
    room = budget - -(-len(bare.model_dump_json()) // JSON_CHARS) - MARKER
    return max(room * CONTENT_CHARS, 1_000)


def test_a_memory_that_fits_is_shown_whole_from_its_first_character() -> None:
    view = _view("The relay sits in bay 4.")
    assert bound_view(view) == view
    at_limit = _view("x" * _piece_limit(_view("")))
    assert bound_view(at_limit).content == at_limit.content
    over = _view("x" * (_piece_limit(_view("")) + 1))
    assert bound_view(over).content.startswith("x" * _piece_limit(over) + "… [clipped: ")


def test_a_long_memory_is_shown_in_pieces_that_join_back_into_it() -> None:
    content = "".join(f"harbour{i} crane{i % 7} " for i in range(9_000))
    view = _view(content)
    limit = _piece_limit(view)
    first = bound_view(view)
    assert first.content == (
        content[:limit] + f"… [clipped: characters 0–{limit} of {len(content)} shown; "
        f"read memory://memories/{A}?offset={limit} for the rest]"
    )
    assert real_tokens(first.model_dump_json()) <= REPLY_BUDGET
    pieces: list[str] = []
    offset = 0
    while True:
        piece = bound_view(view, offset=offset).content
        body, _, marker = piece.partition("… [clipped: ")
        pieces.append(body)
        if not marker:
            break
        offset = int(marker.rsplit("?offset=", 1)[1].split(" ", 1)[0])
        assert offset == sum(len(p) for p in pieces)
    assert "".join(pieces) == content
    assert len(pieces) == -(-len(content) // limit)


def test_a_piece_of_wide_characters_is_cut_to_fit_too() -> None:
    """Each emoji or ideograph is at least one token: 32k of them were one 32k-token read."""
    view = _view("記憶" * 40_000)
    piece = bound_view(view).content
    assert real_tokens(piece) <= REPLY_BUDGET
    assert piece.startswith("記憶" * 1_000) and "… [clipped: characters 0–" in piece


def test_a_tiny_budget_still_shows_a_thousand_characters() -> None:
    view = _view("y" * 5_000)
    shown = bound_view(view, budget_tokens=10).content
    assert shown.startswith("y" * 1_000 + "… [clipped: characters 0–1000 of 5000 shown")


def test_a_memory_with_thousands_of_edges_keeps_the_most_that_fit_and_at_least_one() -> None:
    view = _view("The relay sits in bay 4.", edges=2_000)
    bounded = bound_view(view)
    n = len(bounded.edges)
    assert bounded.edges == view.edges[:n]
    assert bounded.content == view.content and bounded.edges_total == 2_000

    def fits(count: int) -> bool:
        bare = view.model_copy(update={"content": "", "edges": view.edges[:count]})
        return len(bare.model_dump_json()) / JSON_CHARS <= REPLY_BUDGET // 2

    # Halved until it fits: it fits, and twice as many did not.
    assert fits(n) and not fits(2 * n) and 2_000 // n & (2_000 // n - 1) == 0
    assert real_tokens(bounded.model_dump_json()) <= REPLY_BUDGET
    assert len(bound_view(view, budget_tokens=10).edges) == 1


# --------------------------------------------------------------------------- bound_items


def test_items_are_counted_one_by_one_against_what_the_rest_leaves() -> None:
    rows = [_row(i + 10, f"{i:032x}") for i in range(30)]  # ranks of one width: one size
    each = -(-len(rows[0].model_dump_json()) // JSON_CHARS)
    assert all(-(-len(r.model_dump_json()) // JSON_CHARS) == each for r in rows)
    # Room for exactly 7 items: the 8th would pass it by one token.
    budget = 2 * (100 + 7 * each)
    assert bound_items(rows, 100, budget) == 7
    assert bound_items(rows, 100 + 1, budget) == 6
    assert bound_items(rows, 100 - each, budget) == 8
    assert bound_items(rows[:3], 100, budget) == 3
    assert bound_items([], 100, budget) == 0


# --------------------------------------------------------------------------- render_recall


def _hit(rank: int, ident: str, content: str = "The relay sits in bay 4.", **extra: object):
    fields: dict[str, object] = {
        "rank": rank,
        "id": ident,
        "id8": ident[:8],
        "type": MemoryType.info,
        "owner": "coder",
        "title": "",
        "content": content,
        "score": 1.5,
        "components": Components(source="both", cos=0.5, rel=0.75, rec=0.1, imp=0.5, spread=0),
        "importance": 0.5,
        "created_at": TS,
        "retention": 1.0,
    }
    fields.update(extra)
    return RecallHit.model_validate(fields)


def test_a_recall_reply_lists_each_hit_with_its_score_parts_flags_and_references() -> None:
    ref = ResolvedReference(uri="file:docs/a.md", state="LIVE", value="x" * 300, note="read now")
    hits = [
        _hit(1, A, title="Relay", references=[ref]),
        _hit(
            2,
            B,
            "Old relay bay.",
            score=0.25,
            flags=Flags(weak=True, stale=True, superseded_by=A),
            status="open",
            type=MemoryType.todo,
        ),
    ]
    result = RecallResult(query="relay bay", scope="mine", hits=hits, note="A note.")
    assert render_recall(result).splitlines() == [
        '2 result(s) for "relay bay" (scope mine):',
        '1. [a1b2c3d4] info "Relay" score 1.5 (rel 0.75 rec 0.1 imp 0.5 spread 0, both)',
        "   The relay sits in bay 4.",
        "   ref file:docs/a.md: LIVE (read now) " + "x" * 200,
        "2. [b1b2c3d4] todo score 0.25 (rel 0.75 rec 0.1 imp 0.5 spread 0, both)"
        " [WEAK, STALE, superseded by a1b2c3d4, open]",
        "   Old relay bay.",
        "A note.",
    ]


def test_an_empty_or_weak_recall_says_nothing_relevant_and_when_the_model_is_loading() -> None:
    empty = RecallResult(query="x", scope="mine", hits=[], embeddings="warming")
    assert render_recall(empty).splitlines() == [
        '0 result(s) for "x" (scope mine) — embedding model still loading, keyword matches only:',
        "Nothing relevant is stored for this query.",
    ]
    weak = RecallResult(query="x", scope="mine", hits=[_hit(1, A)], nothing_relevant=True)
    assert render_recall(weak).splitlines()[1] == "Nothing relevant is stored for this query."
    fine = RecallResult(query="x", scope="mine", hits=[_hit(1, A)])
    assert "Nothing relevant" not in render_recall(fine)
    dangling = ResolvedReference(uri="file:gone.md", state="DANGLING")
    lone = RecallResult(query="x", scope="mine", hits=[_hit(1, A, references=[dangling])])
    assert render_recall(lone).splitlines()[-1] == "   ref file:gone.md: DANGLING"


def test_reminders_are_listed_with_their_reason_and_the_count_still_due() -> None:
    assert render_reminders([]) == []
    one = Reminder(intent_id=B, content="Ship it.", reason="time", fired_at=TS, also=[C, A])
    assert render_reminders([one], more=3) == [
        "",
        "Reminders (intents that fired — act on them):",
        "- [b1b2c3d4] (time) Ship it. (also 2 more intent(s) with this text)",
        "3 more due: they come with later replies, or call intent action=check.",
    ]
    assert render_reminders([], more=1)[-1].startswith("1 more due")
    fired = RecallResult(query="x", scope="mine", hits=[_hit(1, A)], reminders=[one])
    assert render_recall(fired).splitlines()[-1].startswith("- [b1b2c3d4] (time) Ship it.")


# --------------------------------------------------------------------------- bound_recall


def _long_recall(n: int, chars: int, reminders: int = 0) -> RecallResult:
    words = "harbour crane relay station ledger folder quarry beacon "
    hits = [_hit(i + 1, f"{i:032x}", (words * (chars // len(words) + 1))[:chars]) for i in range(n)]
    due = [
        Reminder(intent_id=f"{i:032x}", content=words * 60, reason="cue", fired_at=TS)
        for i in range(reminders)
    ]
    return RecallResult(query="relay", scope="mine", hits=hits, reminders=due, note="Note.")


def test_a_recall_that_fits_is_returned_as_it_is() -> None:
    result = _long_recall(5, 300)
    assert bound_recall(result) == result


def test_hit_contents_are_clipped_at_two_thousand_characters_naming_where_the_rest_is() -> None:
    result = _long_recall(1, 2_500)
    hit = bound_recall(result).hits[0]
    assert hit.content.startswith(result.hits[0].content[:1_990])
    kept = hit.content.split("… [clipped: ")[0]
    assert len(kept) <= 2_000 and len(kept) >= 1_990
    assert hit.content.endswith(f"characters left out; read memory://memories/{result.hits[0].id}]")
    exact = _long_recall(1, 2_000)
    assert bound_recall(exact).hits[0].content == exact.hits[0].content


def test_reminders_are_clipped_before_any_hit_is() -> None:
    result = _long_recall(3, 1_500, reminders=5)
    bounded = bound_recall(result)
    assert [len(r.content) for r in bounded.reminders] == [200] * 5
    assert [h.content for h in bounded.hits] == [h.content for h in result.hits]
    assert real_tokens(bounded.model_dump_json()) <= REPLY_BUDGET // 2


def test_contents_are_halved_before_hits_are_left_out_and_the_note_says_so_once() -> None:
    halved = bound_recall(_long_recall(6, 2_000))
    assert len(halved.hits) == 6 and halved.note == "Note."
    shown = {len(h.content.split("… [clipped: ")[0]) for h in halved.hits}
    assert max(shown) <= 1_000 and min(shown) >= 200
    assert real_tokens(halved.model_dump_json()) <= REPLY_BUDGET // 2
    dropped = bound_recall(_long_recall(50, 2_000))
    n = len(dropped.hits)
    assert 1 < n < 50
    assert [h.rank for h in dropped.hits] == list(range(1, n + 1))
    assert all(len(h.content.split("… [clipped: ")[0]) <= 200 for h in dropped.hits)
    assert dropped.note == "Note. Lower-ranked results left out to stay within the reply budget."
    assert real_tokens(dropped.model_dump_json()) <= REPLY_BUDGET // 2
    one = bound_recall(_long_recall(3, 2_000), budget_tokens=10)
    assert len(one.hits) == 1


# ------------------------------------------------------------------ reply budget, through a server


async def _k50_recall_of_long_memories(tmp_path: Path) -> tuple[str, str, dict]:
    """A k=50 recall over sixty long memories that all match: even with every content clipped
    the hits do not fit one reply. Returns its text, its structured content as JSON, and that
    content."""
    settings = Settings(store=tmp_path / "m.sqlite", owner="coder@laptop")
    async with Memory.open(settings=settings, embedder=HashEmbedder()) as mem:
        specs = [
            {"content": f"deploy note {i} " + " ".join(f"harbor{i} crane{j}" for j in range(600))}
            for i in range(60)
        ]
        await mem.author_many(specs)
    async with Client(build_server(settings, embedder=HashEmbedder()), cache=None) as client:
        result = await client.call_tool("memory_recall", {"query": "deploy note", "k": 50})
    assert not result.is_error
    structured = result.structured_content
    return result.content[0].text, json.dumps(structured), structured


async def test_a_k50_recall_reply_drops_its_lowest_hits_to_fit_the_8k_budget(
    tmp_path: Path,
) -> None:
    """Catches: recall never drops hits to fit the reply budget (a k=50 reply ran to 13.2k).

    Measured in the documented unit (tokens ≈ characters / 4) against DESIGN.md §13.4's 8k,
    text and structured content together: the lowest-ranked hits are left out, the ranks stay
    1..n and the note says why.
    """
    text, structured, content = await _k50_recall_of_long_memories(tmp_path)
    assert (len(text) + len(structured)) / 4 <= REPLY_BUDGET
    hits = content["hits"]
    assert 1 < len(hits) < 50
    assert [h["rank"] for h in hits] == list(range(1, len(hits) + 1))
    assert content["note"].count("left out to stay within the reply budget") == 1


async def test_a_k50_recall_reply_fits_the_8k_budget_in_real_tokens(tmp_path: Path) -> None:
    """The same reply counted with the bundled MiniLM tokenizer against DESIGN.md §13.4's 8k."""
    text, structured, _ = await _k50_recall_of_long_memories(tmp_path)
    assert real_tokens(text) + real_tokens(structured) <= REPLY_BUDGET


def test_the_hard_cap_holds_whatever_budget_a_caller_passes() -> None:
    """Catches: hard reply cap ×10 (the bound tests imported the cap from the module they check).

    A caller passing a budget far above the cap still gets a summary clipped under the 25k
    tokens clients enforce (DESIGN.md §13.4), counted with the real tokenizer. The text is plain
    prose, about a word per token.
    """
    prose = "The staging database restarts at midnight and the backups run after it. " * 8_000
    assert real_tokens(prose) > 4 * CLIENT_CAP
    reply = tool_result(UpdateResult(id="0" * 32, changed=[]), prose, budget_tokens=10**7)
    text = reply.content[0].text
    used = real_tokens(text) + real_tokens(json.dumps(reply.structured_content))
    assert used <= CLIENT_CAP, used
    assert text.endswith("… [summary clipped; the structured result has every field]")
    assert used > CLIENT_CAP // 2  # the cap clips; it does not empty the reply
