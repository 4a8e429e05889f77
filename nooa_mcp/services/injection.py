"""Injection: what a harness shows the model without a tool call (DESIGN.md §12).

A Claude Code hook asks for it at session start (open todos, due intents, the most important
memories for the project) and before each prompt (the intents the prompt cues and the memories
relevant to it). Everything shown is logged `injected`, which never counts as use; the
relevance rule is `domain.injection.relevant`, the same one the hook's keyword path applies.
A prompt may bring in a faded memory (archived by reflection) that is relevant, noted as faded
and ranked after live ones, as recall does; being shown unasked, it is not used, so it stays
faded. Session start never shows one.

The model is used when this process has it loaded; a hook never waits for it to load.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..domain.injection import (
    PROMPT_MEMORIES,
    START_IMPORTANCE,
    START_MEMORIES,
    START_TODOS,
    Item,
    content_words,
    item_note,
)
from ..domain.prospective import todo_order
from ..domain.replies import Reminder
from ..domain.schema import Channel, Memory, now as utc_now
from . import reminders
from .caller import Caller
from .corrections import successors_of
from .ranking import rank
from .recall import log_batch
from .relevance import on_its_own_terms

__all__ = ["Injected", "at_session_start", "for_prompt"]

#: The longest prompt text used as a query (embedding and keyword terms look at the start).
QUERY_CHARS = 2_000
#: Candidates looked at before the rule keeps a few.
CANDIDATES = 20
#: Types a prompt may bring in: intents come as reminders, scratch notes never.
PROMPT_TYPES = {"info", "skill", "episode", "todo", "reflection"}


@dataclass
class Injected:
    """What was injected: items ready for `domain.injection.render_*`."""

    memories: list[Item] = field(default_factory=list)
    reminders: list[Item] = field(default_factory=list)
    todos: list[Item] = field(default_factory=list)
    open_todos: int = 0
    embeddings: str = "ready"
    #: How many of `memories`, the first, carry the project's name (session start).
    labelled: int = 0


def _item(m: Memory, now: float) -> Item:
    """A live memory or todo as session start lists it."""
    valid_from = None if m.valid_from is None else m.valid_from.timestamp()
    shared_todo = m.type.value == "todo" and m.owner == ""
    note = item_note(False, valid_from, now, shared_todo=shared_todo)
    return (m.id, m.type.value, m.importance, m.title or m.content, note)


def _reminder(r: Reminder, importance: float = 5.0) -> Item:
    note = "time" if r.reason == "time" else "cue"
    return (r.intent_id, "intent", importance, r.content, f"fired on its {note}{r.lateness()}")


async def _log(caller: Caller, ids: list[str], query: str | None) -> None:
    """Log `injected` on each memory shown, in the order shown (never use: DESIGN.md §3.1),
    in one transaction (`recall.log_batch`). A read-only store logs nothing: what is shown
    is still shown, as recall answers there."""
    if not ids or not caller.store.writable:
        return

    accesses = [
        (memory_id, caller.access(Channel.injected, query=query, rank=position))
        for position, memory_id in enumerate(ids, 1)
    ]
    await log_batch([(caller, accesses)])


async def _reminders(caller: Caller, text: str | None, vector) -> list[Item]:
    fired = (await reminders.fire(caller, [(text, vector)]))[0].reminders
    if not fired:
        return []
    importance = {
        i: m.importance
        for i, m in (await caller.store.fetch_many([r.intent_id for r in fired])).items()
    }
    return [_reminder(r, importance.get(r.intent_id, 5.0)) for r in fired]


async def for_prompt(caller: Caller, prompt: str, *, limit: int = PROMPT_MEMORIES) -> Injected:
    """The intents a prompt fires and the memories relevant to it, logged `injected`."""
    # A prompt is what the person typed, not a field to refuse: a NUL (which no PostgreSQL
    # text column holds, and the logged query is one) separates words like a space.
    query = " ".join(prompt.replace("\x00", " ").split())[:QUERY_CHARS]
    out = Injected(embeddings=caller.engine.embeddings_state)
    if not query:
        return out
    now = utc_now().timestamp()
    settings = caller.settings.recall
    vector = None
    if settings.use_dense and caller.engine.embeddings_state == "ready":
        vector = (await caller.engine.embed([query]))[0]
    scope = caller.actor.own
    async with caller.engine.vectors(scope.visible_roles, for_keywords=vector is None) as index:
        ranking = await rank(
            query,
            store=caller.store,
            index=index,
            query_vector=vector,
            scope=scope,
            settings=settings,
            now=now,
            types=PROMPT_TYPES,
            hops=0,
        )
    await ranking.fill(caller.store, CANDIDATES)
    words = content_words(query)
    chosen = []
    for r in ranking.rows[:CANDIDATES]:
        row = r.full
        if row.type == "todo" and row.status not in (None, "open"):
            continue
        if on_its_own_terms(r, words, settings):
            chosen.append(r)
        if len(chosen) == limit:
            break
    out.memories = [
        (
            r.id,
            r.full.type,
            r.full.importance,
            r.full.title or r.full.content,
            item_note(r.faded, r.full.valid_from, now),
        )
        for r in chosen
    ]
    await _log(caller, [r.id for r in chosen], query[:200])
    out.reminders = await _reminders(caller, query, vector)
    return out


async def at_session_start(caller: Caller, project: str = "", *, fire: bool = True) -> Injected:
    """Open todos, due intents and the most important memories (the project's first).

    `fire=False` leaves intents armed and shows none: for a reader that may not deliver what
    fired to the model (a resource a client reads on its own), since firing spends a one-shot.
    """
    project = project.replace("\x00", "")
    out = Injected(embeddings=caller.engine.embeddings_state)
    own = caller.actor.own
    todos = await caller.store.list_memories(
        own, archived=False, type="todo", status="open", limit=100_000
    )
    todos.sort(key=lambda m: todo_order(m.status, m.importance, m.created_at))
    out.open_todos = len(todos)
    now = utc_now().timestamp()
    out.todos = [_item(m, now) for m in todos[:START_TODOS]]
    out.reminders = await _reminders(caller, None, None) if fire else []
    important, out.labelled = await _important(caller, project, len(todos))
    out.memories = [_item(m, now) for m in important]
    await _log(caller, [t[0] for t in out.todos] + [m[0] for m in out.memories], None)
    return out


async def _important(caller: Caller, project: str, open_todos: int) -> tuple[list[Memory], int]:
    """The project's labelled memories, then the HIGH and CRITICAL ones; none superseded.
    With how many of them, the first, are the labelled ones."""
    own = caller.actor.own
    now = utc_now()
    labelled: list[str] = []
    if project:
        wanted = project.lower()
        rows = await caller.store.candidates(project, own, limit=200)
        labelled = [
            r.id
            for r in sorted(rows, key=lambda r: (-r.importance, -r.last_accessed_at))
            if wanted in r.cues and not r.archived
        ]
    # The context rows put open todos first: ask for enough to reach the memories after them.
    ranked = await caller.store.context_rows(own, open_todos + START_MEMORIES * 8)
    fetched = await caller.store.fetch_many(labelled)
    pool = [fetched[i] for i in labelled if i in fetched]
    seen = {m.id for m in pool}
    pool += [m for m in ranked if m.id not in seen and m.importance >= START_IMPORTANCE]
    pool = [
        m
        for m in pool
        if m.type.value not in ("todo", "intent", "scratch")
        and not m.archived
        and (m.valid_to is None or m.valid_to > now)
    ]
    superseded = await successors_of(caller, pool, own)
    chosen = [m for m in pool if m.id not in superseded][:START_MEMORIES]
    return chosen, sum(1 for m in chosen if m.id in set(labelled))
