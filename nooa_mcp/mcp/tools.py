"""The MCP tools: one thin adapter per verb of the Memory facade (SPEC §9, §12).

Each tool validates its arguments through its signature, gets the connection's Memory, makes
one facade call and returns the reply model as structured content with a text summary.
"""

from datetime import datetime
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, Field

from ..domain.replies import (
    AuthorResult,
    ExplainResult,
    IntentResult,
    RecallResult,
    ReflectReport,
    TodoResult,
    UpdateResult,
)
from ..domain.schema import (
    INTENT_ACTIONS,
    REFLECTION_STEPS,
    TODO_ACTIONS,
    TODO_STATUSES,
    Link,
    MemoryType,
)
from .handlers import current_memory, tool_errors
from .notifications import Subscribers
from .rendering import (
    approx_tokens,
    bound_explain,
    bound_list,
    bound_recall,
    memory_uri,
    render_author,
    render_explain,
    render_recall,
    render_reminders,
    render_update,
    tool_result,
)
from .sampling import session_sampler

__all__ = ["register_tools"]


# --------------------------------------------------------------------------- tool argument types

# Each list of values is written once (domain.schema); the Literals the model sees come from it.
TodoStatus = Literal[TODO_STATUSES]  # type: ignore[valid-type]
TodoFilter = Literal[(*TODO_STATUSES, "all")]  # type: ignore[valid-type]
TodoAction = Literal[TODO_ACTIONS]  # type: ignore[valid-type]
IntentAction = Literal[INTENT_ACTIONS]  # type: ignore[valid-type]

Importance = Annotated[
    str | float,
    Field(description="CRITICAL, HIGH, MEDIUM, LOW, TRIVIAL, or a number 0–10."),
]
MemoryId = Annotated[str, Field(description="A memory id; the first 8 hex characters are enough.")]


class TriggerArg(BaseModel):
    """When an intent fires: a time, a cue, or both."""

    fire_at: datetime | None = Field(None, description="ISO 8601 time after which it fires.")
    cue: str | None = Field(
        None, description="Words that fire it when they show up in a later query or memory."
    )
    every_hours: float | None = Field(
        None, gt=0, description="Re-arm this many hours after firing (recurring)."
    )


# Annotations are promises to the client, so each tool takes the one that is true of it:
# recall writes access records (not read-only); update, intent and reflect can archive.
WRITES = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
DESTRUCTIVE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)


def register_tools(
    server: MCPServer, budget: int, subscribers: Subscribers, *, reflect: bool = True
) -> None:
    @server.tool(title="Write a memory", annotations=WRITES)
    @tool_errors
    async def memory_author(
        ctx: Context,
        content: Annotated[str, Field(description="One self-contained idea, fact or procedure.")],
        type: Annotated[MemoryType, Field(description="What kind of memory this is.")] = (
            MemoryType.info
        ),
        title: str = "",
        importance: Importance = "MEDIUM",
        salience: Annotated[
            str | float | None,
            Field(description="PIVOTAL, NOTABLE, ROUTINE, NONE or 0–1: how surprising."),
        ] = None,
        confidence: Annotated[
            str | float | None,
            Field(description="CERTAIN, CONFIDENT, TENTATIVE, UNCERTAIN or 0–1."),
        ] = None,
        tags: list[str] | None = None,
        entities: Annotated[
            list[str] | None, Field(description="People, systems, places it is about.")
        ] = None,
        place_or_task: str = "",
        references: Annotated[
            list[str] | None,
            Field(
                description="Pointers instead of copies: file:<relative path>, memory:<id>, "
                "url:<address>."
            ),
        ] = None,
        links: Annotated[
            list[Link] | None,
            Field(description="Edges to existing memories, e.g. {target, relation: refines}."),
        ] = None,
        valid_from: datetime | None = None,
        valid_to: Annotated[
            datetime | None, Field(description="When this stops being true, if known.")
        ] = None,
        trigger: Annotated[
            TriggerArg | None, Field(description="Only for type=intent: when it fires.")
        ] = None,
        revive: Annotated[
            bool, Field(description="Restore a memory that was forgotten before.")
        ] = False,
    ) -> Annotated[CallToolResult, AuthorResult]:
        """Store something worth remembering next time: a fact, procedure, episode or lesson.

        Importance CRITICAL/HIGH/MEDIUM/LOW/TRIVIAL. A near-duplicate reinforces the existing
        memory; content that was forgotten is not recreated unless revive=true.
        """
        memory = await current_memory()
        result = await memory.author(
            content,
            type=type.value,
            title=title,
            importance=importance,
            salience=salience,
            confidence=confidence,
            tags=tags,
            entities=entities,
            place_or_task=place_or_task,
            references=references,
            links=[link.model_dump(exclude_none=True) for link in links] if links else None,
            valid_from=valid_from,
            valid_to=valid_to,
            trigger=trigger.model_dump(exclude_none=True) if trigger else None,
            revive=revive,
        )
        await subscribers.publish(ctx, memory_uri(result.id), "memory://stats")
        return tool_result(result, render_author(result), budget)

    @server.tool(title="Recall memories", annotations=WRITES)
    @tool_errors
    async def memory_recall(
        query: Annotated[str, Field(description="A short natural-language query.")],
        k: Annotated[int, Field(ge=1, le=50, description="How many results.")] = 5,
        scope: Annotated[
            str,
            Field(
                description="mine (your role + shared, default), instance (only you), "
                "* (everyone, read-only) or an owner role[@instance]."
            ),
        ] = "mine",
        types: list[MemoryType] | None = None,
        hops: Annotated[
            int | None, Field(ge=0, le=3, description="Spreading hops over links; 0 = none.")
        ] = None,
        include_archived: bool = False,
    ) -> Annotated[CallToolResult, RecallResult]:
        """Find what you remember about something, ranked by relevance, recency and importance.

        Use it before acting on a subject you may have met before. Results marked weak are
        loosely related; long content is clipped with the resource URI that has the rest.
        """
        memory = await current_memory()
        result = await memory.recall(
            query,
            k=k,
            scope=scope,
            types=[t.value for t in types] if types else None,
            hops=hops,
            include_archived=include_archived,
        )
        bounded = bound_recall(result, budget)
        return tool_result(bounded, render_recall(bounded), budget)

    @server.tool(
        title="Explain a recall",
        annotations=READ_ONLY,
    )
    @tool_errors
    async def memory_explain(
        query: Annotated[
            str | None,
            Field(description="Dry-run this query: every candidate and its score parts."),
        ] = None,
        memory_id: Annotated[
            str | None,
            Field(
                description="Replay this memory's access history; with query: why (not) recalled."
            ),
        ] = None,
        k: Annotated[int, Field(ge=1, le=50)] = 10,
        scope: str = "mine",
        hops: Annotated[int | None, Field(ge=0, le=3)] = None,
    ) -> Annotated[CallToolResult, ExplainResult]:
        """See why memories rank where they do, without logging anything.

        Pass query for a dry run, memory_id for its access history, or both to learn why that
        memory was or was not in the top k.
        """
        memory = await current_memory()
        result = await memory.explain(query=query, memory_id=memory_id, k=k, hops=hops, scope=scope)
        bounded = bound_explain(result, budget)
        return tool_result(bounded, render_explain(bounded), budget)

    @server.tool(
        title="Update, link or forget a memory",
        annotations=DESTRUCTIVE,
    )
    @tool_errors
    async def memory_update(
        ctx: Context,
        memory_id: MemoryId,
        content: str | None = None,
        title: str | None = None,
        importance: Annotated[
            str | float | None, Field(description="CRITICAL, HIGH, MEDIUM, LOW, TRIVIAL or 0–10.")
        ] = None,
        tags: list[str] | None = None,
        status: Annotated[TodoStatus | None, Field(description="Todos only.")] = None,
        links: list[Link] | None = None,
        valid_to: Annotated[
            datetime | None, Field(description="Mark the fact as no longer true from then.")
        ] = None,
        forget: Annotated[
            bool, Field(description="Archive it: kept, but no longer recalled.")
        ] = False,
    ) -> Annotated[CallToolResult, UpdateResult]:
        """Correct, re-rate, link or archive one of your memories (8-char id prefixes work).

        Use forget=true for something wrong or obsolete; prefer a new memory linked with
        refines when a fact changed and the old one is history.
        """
        memory = await current_memory()
        result = await memory.update(
            memory_id,
            content=content,
            title=title,
            importance=importance,
            tags=tags,
            status=status,
            links=[link.model_dump(exclude_none=True) for link in links] if links else None,
            valid_to=valid_to,
            forget=forget,
        )
        uris = [memory_uri(result.id), "memory://stats"]
        if result.archived:
            uris.append("memory://archived")
        if status is not None:
            uris.append("memory://todos")
        await subscribers.publish(ctx, *uris)
        return tool_result(result, render_update(result), budget)

    @server.tool(
        title="Todos",
        annotations=WRITES,
    )
    @tool_errors
    async def todo(
        ctx: Context,
        action: Annotated[
            TodoAction,
            Field(description="add a todo, list them, or close/reopen one by id."),
        ],
        content: Annotated[str | None, Field(description="For add: what you committed to.")] = None,
        memory_id: Annotated[
            str | None, Field(description="For done/drop/reopen: the todo's id (8 chars).")
        ] = None,
        title: str = "",
        importance: Importance = "MEDIUM",
        tags: list[str] | None = None,
        status: Annotated[
            TodoFilter,
            Field(description="For list: which todos to show."),
        ] = "open",
        limit: Annotated[int, Field(ge=1, le=100, description="For list: at most this many.")] = 20,
    ) -> Annotated[CallToolResult, TodoResult]:
        """Keep track of commitments: add, list (open first, by importance), done, drop, reopen.

        Open todos are never pruned and are shown at session start.
        """
        memory = await current_memory()
        result = await memory.todo(
            action,
            content=content,
            memory_id=memory_id,
            title=title,
            importance=importance,
            tags=tags,
            status=status,
            limit=limit,
        )
        if action != "list":
            await subscribers.publish(
                ctx, "memory://todos", "memory://stats", memory_uri(result.id or "")
            )
        result, omitted = bound_list(result, "todos", budget)
        return tool_result(result, _render_todos(result, omitted), budget)

    @server.tool(
        title="Intents (prospective memory)",
        annotations=DESTRUCTIVE,
    )
    @tool_errors
    async def intent(
        ctx: Context,
        action: Annotated[
            IntentAction,
            Field(description="add an intent, list them, check what fires now, cancel one."),
        ],
        content: Annotated[
            str | None, Field(description="For add: what to do when it fires.")
        ] = None,
        fire_at: Annotated[
            datetime | None,
            Field(description="For add: fire once this time (ISO 8601) has passed."),
        ] = None,
        cue: Annotated[
            str | None,
            Field(description="For add: fire when these words come up in a recall or memory."),
        ] = None,
        every_hours: Annotated[
            float | None, Field(gt=0, description="For add: re-arm after firing.")
        ] = None,
        memory_id: Annotated[str | None, Field(description="For cancel: the intent's id.")] = None,
        text: Annotated[
            str | None, Field(description="For check: what is happening now, matched against cues.")
        ] = None,
        importance: Importance = "MEDIUM",
    ) -> Annotated[CallToolResult, IntentResult]:
        """Remember to do something later: when a time passes or when a cue comes up.

        Fired intents come back in the reminders field of later results; act on them.
        """
        memory = await current_memory()
        result = await memory.intent(
            action,
            content=content,
            memory_id=memory_id,
            fire_at=fire_at,
            cue=cue,
            every_hours=every_hours,
            text=text,
            importance=importance,
        )
        if action in ("add", "cancel"):
            await subscribers.publish(ctx, memory_uri(result.id or ""), "memory://stats")
        result, omitted = bound_list(result, "intents", budget)
        return tool_result(result, _render_intents(result, omitted), budget)

    if reflect:
        register_reflect_tool(server, budget, subscribers)


def register_reflect_tool(server: MCPServer, budget: int, subscribers: Subscribers) -> None:
    """Register `memory_reflect` (SPEC §8, §12): one consolidation pass with progress.

    The generative steps (reconcile, abstract) ask the client's own model through MCP sampling,
    only when `generative_reflection` is on and the client offers sampling.
    """
    Step = Literal[REFLECTION_STEPS]  # type: ignore[valid-type]

    @server.tool(
        title="Consolidate memory",
        annotations=DESTRUCTIVE,
    )
    @tool_errors
    async def memory_reflect(
        ctx: Context,
        steps: Annotated[
            list[Step] | None,
            Field(description="Which steps to run, in pass order; default all."),
        ] = None,
    ) -> Annotated[CallToolResult, ReflectReport]:
        """Consolidate your memory now: merge near-duplicates, link neighbours, rescore, prune.

        Runs one pass and reports what each step did; progress is reported as it goes. Archived
        memories stay readable in memory://archived.
        """
        memory = await current_memory()
        sampler = None
        if memory.settings.generative_reflection:
            sampler = session_sampler(ctx.session)

        async def progress(done: int, total: int, message: str) -> None:
            await ctx.report_progress(done, total, message)

        report = await memory.reflect(steps, sampler=sampler, progress=progress)
        await subscribers.publish(ctx, "memory://stats", "memory://archived")
        bounded = _bound_report(report, budget)
        return tool_result(bounded, _render_report(bounded), budget)


def _bound_report(report: BaseModel, budget: int) -> Any:
    """Trim each step's details until the report fits half the reply budget."""
    keep = 50
    bounded = report
    while approx_tokens(bounded.model_dump_json()) > budget // 2 and keep > 1:
        keep //= 2
        steps = [
            s.model_copy(update={"details": s.details[:keep]})
            for s in report.steps  # type: ignore[attr-defined]
        ]
        bounded = report.model_copy(update={"steps": steps})
    return bounded


def _render_report(report: Any) -> str:
    lines = [f"Reflection {report.status}: {report.applied} change(s)."]
    for s in report.steps:
        note = f" — {s.note}" if s.note else ""
        lines.append(
            f"- {s.step}: planned {s.planned}, applied {s.applied}, skipped {s.skipped}, "
            f"failed {s.failed}{note}"
        )
        lines += [f"    {d}" for d in s.details[:5]]
    return "\n".join(lines)


def _render_todos(result: TodoResult, omitted: int) -> str:
    lines = []
    if result.id:
        lines.append(f"{result.action}: {result.id[:8]} → {result.outcome}.")
    rows = [
        f"- [{t.id8}] [{t.status}] {t.importance_label} {t.title or t.content}"
        for t in result.todos
    ]
    lines.append(_listing(f"{result.open_count} open todo(s):", rows, "No todos."))
    if omitted:
        lines.append(f"{omitted} more not shown; read memory://todos for all of them.")
    lines += render_reminders(result.reminders)
    return "\n".join(lines)


def _render_intents(result: IntentResult, omitted: int) -> str:
    lines = []
    if result.id or result.outcome:
        lines.append(f"{result.action}: {(result.id or '')[:8]} {result.outcome}".strip() + ".")
    rows = []
    for i in result.intents:
        when = ", ".join(
            part
            for part in (
                f"at {i.fire_at:%Y-%m-%d %H:%M}" if i.fire_at else "",
                f"on '{i.cue}'" if i.cue else "",
                f"every {i.every_hours:g} h" if i.every_hours else "",
            )
            if part
        )
        state = "armed" if i.armed else f"fired {i.fired_count}×"
        rows.append(f"- [{i.id8}] {state} {i.content} ({when})")
    lines.append(_listing("Intents:", rows, "None."))
    if omitted:
        lines.append(f"{omitted} more not shown.")
    lines += render_reminders(result.reminders)
    return "\n".join(lines)


def _listing(title: str, rows: list[str], empty: str) -> str:
    return "\n".join([title, *(rows or [empty])])
