"""The hook's keyword path: no server, no model, standard library only (DESIGN.md §12).

It gives what keywords and cue words can: intents whose time has come or whose cue words are
all in the prompt, memories that share enough words with the prompt (the rule of
`domain.injection`, on the keyword index), and at session start the open todos and the most
important memories. What it shows is logged `injected` and fired intents are marked fired,
in one transaction, exactly as the server does. What it cannot give is meaning: a memory that
matches the prompt only by sense ("car" for "vehicle") needs the model, which a server has
loaded (`--url`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from types import SimpleNamespace

from ..domain.cues import (
    due_occurrence,
    fired_fields,
    is_armed,
    keywords_match,
    lateness,
    time_due,
)
from ..domain.injection import (
    MU,
    PROMPT_MEMORIES,
    START_IMPORTANCE,
    START_MEMORIES,
    START_REMINDERS,
    START_TODOS,
    WEAK,
    Item,
    content_words,
    cue_overlap,
    item_note,
    relevant,
    render_prompt,
    render_session,
    shared_words,
)
from ..storage.keywords import query_stems
from ..storage.quick import QuickStore, iso

__all__ = ["prompt_context", "session_context"]

#: Keyword candidates looked at for a prompt.
CANDIDATES = 30
_TRIGGER_FIELDS = ("fire_at", "cue", "every_hours", "fired_at", "fired_count")


def _when(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def _trigger(raw: str) -> SimpleNamespace:
    data = json.loads(raw)
    return SimpleNamespace(
        fire_at=_when(data.get("fire_at")),
        cue=data.get("cue"),
        every_hours=data.get("every_hours"),
        fired_at=_when(data.get("fired_at")),
        fired_count=int(data.get("fired_count") or 0),
    )


def _dump(trigger: SimpleNamespace) -> str:
    """The trigger as the store keeps it (the Trigger model's JSON)."""
    data = {}
    for name in _TRIGGER_FIELDS:
        value = getattr(trigger, name)
        if isinstance(value, datetime):
            value = iso(value.timestamp())
        data[name] = value
    return json.dumps(data, separators=(",", ":"))


def _reason(trigger: SimpleNamespace, now: datetime, text: str | None) -> str | None:
    """Why an intent fires now ("time" or "cue"), or None (prospective.evaluate's rule)."""
    if time_due(trigger, now):
        return "time"
    if not text or not (trigger.cue or "").strip() or not is_armed(trigger, now):
        return None
    return "cue" if keywords_match(trigger.cue, text) else None


def _record(owner: str, session: str | None, query: str | None, rank: int | None) -> dict:
    record: dict = {"ts": iso(datetime.now(UTC).timestamp()), "channel": "injected"}
    record["reader_owner"] = owner
    if session:
        record["session_ref"] = session
    if query:
        record["query"] = query
    if rank is not None:
        record["rank"] = rank
    return record


def _fire(
    store: QuickStore, owner: str, session: str | None, text: str | None, now: datetime
) -> list[tuple[str, Callable[[str], tuple[str, dict] | None], dict, dict]]:
    """The intents due now or cued by `text` (at most START_REMINDERS; the rest stay armed)."""
    role = owner.partition("@")[0]
    out: list[tuple[str, Callable[[str], tuple[str, dict] | None], dict, dict]] = []
    for row in store.intents(role):
        trigger = _trigger(row["trigger"])
        reason = _reason(trigger, now, text)
        if reason is None:
            continue

        def decide(fresh: str, *, reason: str = reason, memory_id: str = row["id"]):
            # Decided again on the row as it is under the write lock: another process may
            # have fired this one-shot intent a moment ago.
            current = _trigger(fresh)
            again = _reason(current, now, text)
            if again is None:
                return None
            update, rearmed = fired_fields(current, now)
            for name, value in update.items():
                setattr(current, name, value)
            report = {
                "intent_id": memory_id,
                "role": role,
                "reason": again,
                "rearmed": rearmed,
                "text": (text or "")[:200],
                "similarity": None,
            }
            return _dump(current), report

        record = _record(owner, session, (text or "")[:200] or None, None)
        out.append((row["id"], decide, record, row))
        if len(out) == START_REMINDERS:
            break
    return out


def _fired_items(
    fired: list, done: list[str], reasons: dict[str, str], now: datetime
) -> list[Item]:
    rows = {f[0]: f[3] for f in fired}
    out: list[Item] = []
    for i in done:
        late = ""
        if reasons[i] == "time":
            # As a server's reminder says it: a day nobody called is not "on its time".
            trigger = _trigger(rows[i]["trigger"])
            late = lateness(due_occurrence(trigger.fire_at, trigger.every_hours, now), now)
        note = f"fired on its {reasons[i]}{late}"
        out.append((i, "intent", rows[i]["importance"], rows[i]["content"], note))
    return out


def _reasons(fired: list, now: datetime, text: str | None) -> dict[str, str]:
    return {f[0]: _reason(_trigger(f[3]["trigger"]), now, text) or "time" for f in fired}


def prompt_context(store: QuickStore, owner: str, prompt: str, session: str | None) -> str:
    """The block for one prompt; logs what it shows. "" when nothing is relevant."""
    role = owner.partition("@")[0]
    now = datetime.now(UTC)
    query = " ".join(prompt.split())
    if not query:
        return ""
    words = content_words(query)
    rows = store.keyword_candidates(query_stems(query), role, CANDIDATES)
    best = max((r["bm25"] for r in rows), default=0.0)
    superseded = store.superseded([r["id"] for r in rows], role)
    # A duplicate reflection merged into a memory not forgotten: that memory speaks for it.
    merged = store.merged_duplicates([r["id"] for r in rows if r["faded"]])
    chosen = []
    for r in rows:
        if r["id"] in merged:
            continue
        cues = [*r["tags"], *r["entities"], r["place_or_task"]]
        overlap = cue_overlap(query, cues)
        text = " ".join([r["title"], r["content"], *cues])
        ok = relevant(
            # recall's keyword-only relevance: BM25 over the best hit stands in for cosine.
            weak=(r["bm25"] / best if best > 0 else 0.0) + MU * overlap < WEAK,
            stale=r["valid_to"] is not None and r["valid_to"] < now.timestamp(),
            superseded=r["id"] in superseded,
            shared=len(shared_words(words, content_words(text))),
            prompt_words=len(words),
            overlap=overlap,
        )
        if ok:
            chosen.append(r)
            if len(chosen) == PROMPT_MEMORIES:
                break
    fired = _fire(store, owner, session, query, now)
    reasons = _reasons(fired, now, query)
    shown = [
        (r["id"], _record(owner, session, query[:200], rank)) for rank, r in enumerate(chosen, 1)
    ]
    done = store.log_injected(shown, [(i, decide, rec) for i, decide, rec, _ in fired])
    memories: list[Item] = [
        (r["id"], r["type"], r["importance"], r["title"] or r["content"], _note(r, now))
        for r in chosen
    ]
    return render_prompt(_fired_items(fired, done, reasons, now), memories)


def _note(row: dict, now: datetime) -> str:
    """`domain.injection.item_note` of a row (one a prompt brings in may be faded)."""
    shared_todo = row.get("type") == "todo" and row.get("owner") == ""
    return item_note(
        bool(row.get("faded")), row["valid_from"], now.timestamp(), shared_todo=shared_todo
    )


def session_context(store: QuickStore, owner: str, project: str, session: str | None) -> str:
    """The block for session start; logs what it shows. "" when there is nothing."""
    role = owner.partition("@")[0]
    now = datetime.now(UTC)
    todos, open_count = store.open_todos(role, START_TODOS)
    pool = store.important(role, project, START_MEMORIES, now.timestamp(), START_IMPORTANCE)
    superseded = store.superseded([m["id"] for m in pool], role)
    memories = [m for m in pool if m["id"] not in superseded][:START_MEMORIES]
    fired = _fire(store, owner, session, None, now)
    reasons = _reasons(fired, now, None)
    shown = [
        (m["id"], _record(owner, session, None, rank))
        for rank, m in enumerate([*todos, *memories], 1)
    ]
    done = store.log_injected(shown, [(i, decide, rec) for i, decide, rec, _ in fired])
    return render_session(
        project,
        [
            (t["id"], "todo", t["importance"], t["title"] or t["content"], _note(t, now))
            for t in todos
        ],
        open_count,
        _fired_items(fired, done, reasons, now),
        [
            (m["id"], m["type"], m["importance"], m["title"] or m["content"], _note(m, now))
            for m in memories
        ],
        sum(1 for m in memories if m.get("labelled")),
    )
