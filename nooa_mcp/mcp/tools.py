"""The MCP tools: one thin adapter per verb of the Memory facade (DESIGN.md §13.1).

Each tool validates its arguments through its signature, gets the connection's Memory, makes
one facade call and returns the reply model as structured content with a text summary.
"""

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    model_validator,
)

from ..domain.injection import SHARED_TODO
from ..domain.replies import (
    AuthorResult,
    ExplainResult,
    IntentResult,
    RecallResult,
    ReflectReport,
    TodoResult,
    UpdateResult,
)
from ..domain.requests import (
    AuthorRequest,
    ExplainRequest,
    IntentRequest,
    RecallRequest,
    TodoRequest,
    UpdateRequest,
)
from ..domain.schema import (
    INTENT_ACTIONS,
    REFLECTION_STEPS,
    TODO_ACTIONS,
    TODO_STATUSES,
    Link,
    MemoryType,
    refuse_unknown_keys,
)
from .handlers import current_memory, tool_errors
from .notifications import Subscribers
from .rendering import (
    bound_explain,
    bound_list,
    bound_recall,
    json_tokens,
    memory_uri,
    render_author,
    render_explain,
    render_recall,
    render_reminders,
    render_update,
    tool_result,
)
from .sampling import session_sampler

__all__ = ["MemoryTools", "register_tools"]


# --------------------------------------------------------------------------- tool argument types


def one_of(values: Sequence[str], description: str = "") -> Any:
    """The schema of a text argument that lists `values` (the model sees them as an enum).

    The facade checks the value, not the SDK: its refusal names the field and the allowed
    values in one sentence, where the SDK's validation error is pydantic's text with a URL.
    """
    return Field(description=description, json_schema_extra={"enum": [*values]})


# Each list of values is written once (domain.schema); the enums the model sees come from it.
MEMORY_TYPES = [t.value for t in MemoryType]
TypeName = Annotated[str, one_of(MEMORY_TYPES)]
TodoStatus = Annotated[str, one_of(TODO_STATUSES, "Todos only.")]
TodoAction = Annotated[str, one_of(TODO_ACTIONS)]
TodoListing = Annotated[str, one_of((*TODO_STATUSES, "all"), "For list.")]
IntentAction = Annotated[str, one_of(INTENT_ACTIONS)]
Step = Annotated[str, one_of(REFLECTION_STEPS)]

# Strict: JSON true is not a level (lax validation stored it as importance 1).
Importance = Annotated[
    str | StrictFloat,
    Field(description="CRITICAL, HIGH, MEDIUM (default), LOW, TRIVIAL, 0-10."),
]
MemoryId = Annotated[str, Field(description="Id or 8-char prefix.")]


def _whole(value: Any) -> Any:
    """5.0 as 5: JSON has one kind of number, and the listed schema's "integer" takes 5.0
    (a client that writes every number with a point, as Python's json does for a float, was
    refused "must be a whole number; got 5.0"). 2.5, true and "3" are still refused, and so
    is 1e300 (past 2**53 a float is no exact whole number: "at most 50; got 1000…052…")."""
    whole = type(value) is float and value.is_integer() and abs(value) <= 2**53
    return int(value) if whole else value


#: After a whole number's bounds (`Annotated[StrictInt, Field(ge=1), WHOLE]`): strict but
#: for 5.0. Before them, the listed schema would spell the bounds "ge" and "le".
WHOLE = BeforeValidator(_whole)


class TriggerArg(BaseModel):
    """When an intent fires: a time, a cue, or both."""

    fire_at: datetime | None = None
    cue: str | None = Field(None, description="Words; fires when all or their gist come up.")
    every_hours: StrictFloat | None = Field(None, gt=0, description="Re-arm after firing.")

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        """A key it does not know is refused, not dropped: `every_hour: 24` (a typo) made a
        recurring intent a one-shot without a word. (Checked here, not by extra="forbid",
        which would spell additionalProperties in the listing the model reads every turn.)"""
        return refuse_unknown_keys(cls, data)


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


class MemoryTools:
    """The tool handlers of one server: each builds the verb's request from its arguments,
    makes one facade call, tells subscribers what changed and bounds the reply to `budget`."""

    def __init__(self, budget: int, subscribers: Subscribers) -> None:
        self.budget = budget
        self.subscribers = subscribers

    async def memory_author(
        self,
        ctx: Context,
        content: Annotated[str, Field(description="One self-contained idea.")],
        type: TypeName = "info",
        title: str = "",
        importance: Importance | None = None,
        salience: Annotated[
            str | float | None,
            Field(description="Surprise: PIVOTAL, NOTABLE, ROUTINE, NONE or 0-1."),
        ] = None,
        confidence: Annotated[
            str | float | None,
            Field(description="Belief: CERTAIN, CONFIDENT, TENTATIVE, UNCERTAIN or 0-1."),
        ] = None,
        tags: list[str] | None = None,
        entities: Annotated[list[str] | None, Field(description="People, systems, places.")] = None,
        place_or_task: str = "",
        references: Annotated[
            list[str] | None,
            Field(description="file:<relative path>, memory:<id>, url:<address>."),
        ] = None,
        links: list[Link] | None = None,
        valid_from: datetime | None = None,
        valid_to: Annotated[datetime | None, Field(description="When it stops being true.")] = None,
        trigger: Annotated[
            TriggerArg | None,
            Field(description="For type=intent."),
        ] = None,
        revive: Annotated[
            StrictBool, Field(description="Keep a write that a forget blocked.")
        ] = False,
    ) -> Annotated[CallToolResult, AuthorResult]:
        """Remember something for next time. A near-duplicate is named in similar_to; for a
        changed fact, link the old one with refines."""
        request = AuthorRequest(
            content=content,
            type=type,
            title=title,
            importance=importance,
            salience=salience,
            confidence=confidence,
            tags=tags,
            entities=entities,
            place_or_task=place_or_task,
            references=references,
            links=links or None,
            valid_from=valid_from,
            valid_to=valid_to,
            trigger=trigger.model_dump(exclude_none=True) if trigger else None,
            revive=revive,
        )
        memory = await current_memory()
        result = await memory.author(request)
        await self.subscribers.publish(memory.owner, memory_uri(result.id), "memory://stats")
        return tool_result(result, render_author(result), self.budget)

    async def memory_recall(
        self,
        query: str,
        k: Annotated[StrictInt, Field(ge=1, le=50), WHOLE] = 5,
        scope: Annotated[
            str,
            Field(description="mine, instance, * or a role (wider only where granted)."),
        ] = "mine",
        types: list[TypeName] | None = None,
        hops: Annotated[
            Annotated[StrictInt, Field(ge=0, le=3), WHOLE] | None,
            Field(description="Hops over links; 0 = none."),
        ] = None,
        include_archived: Annotated[
            StrictBool,
            Field(description="Also weak faded hits, not forgotten ones."),
        ] = False,
    ) -> Annotated[CallToolResult, RecallResult]:
        """Recall what you know before acting (todos: todo list). Weak hits are loosely
        related; a faded hit the query answers, if not replaced, is live again."""
        request = RecallRequest(
            query=query,
            k=k,
            scope=scope,
            types=types or None,
            hops=hops,
            include_archived=include_archived,
        )
        result = await (await current_memory()).recall(request)
        bounded = bound_recall(result, self.budget)
        return tool_result(bounded, render_recall(bounded), self.budget)

    async def memory_explain(
        self,
        query: Annotated[
            str | None,
            Field(description="Dry-run it: each score and the terms it sums."),
        ] = None,
        memory_id: Annotated[
            str | None,
            Field(description="Its access history; with query: why (not) recalled."),
        ] = None,
        k: Annotated[StrictInt, Field(ge=1, le=50), WHOLE] = 10,
        scope: Annotated[str, Field(description="As recall's.")] = "mine",
        hops: Annotated[StrictInt, Field(ge=0, le=3), WHOLE] | None = None,
    ) -> Annotated[CallToolResult, ExplainResult]:
        """Why memories rank where they do; logs nothing."""
        request = ExplainRequest(query=query, memory_id=memory_id, k=k, hops=hops, scope=scope)
        result = await (await current_memory()).explain(request)
        bounded = bound_explain(result, self.budget)
        return tool_result(bounded, render_explain(bounded), self.budget)

    async def memory_update(
        self,
        ctx: Context,
        memory_id: MemoryId,
        content: str | None = None,
        title: str | None = None,
        importance: Annotated[
            str | StrictFloat | None,
            Field(description="CRITICAL, HIGH, MEDIUM, LOW, TRIVIAL, 0-10."),
        ] = None,
        tags: Annotated[list[str] | None, Field(description="Replaces all tags.")] = None,
        status: TodoStatus | None = None,
        links: list[Link] | None = None,
        valid_to: Annotated[datetime | None, Field(description="No longer true from then.")] = None,
        forget: Annotated[
            StrictBool, Field(description="Archive it: kept, never recalled.")
        ] = False,
    ) -> Annotated[CallToolResult, UpdateResult]:
        """Correct, re-rate, link or forget a memory of yours."""
        request = UpdateRequest(
            memory_id=memory_id,
            content=content,
            title=title,
            importance=importance,
            tags=tags,
            status=status,
            links=links or None,
            valid_to=valid_to,
            forget=forget,
        )
        memory = await current_memory()
        result = await memory.update(request)
        uris = [memory_uri(result.id), "memory://stats"]
        if result.archived:
            uris.append("memory://archived")
        if status is not None:
            uris.append("memory://todos")
        await self.subscribers.publish(memory.owner, *uris)
        return tool_result(result, render_update(result), self.budget)

    async def todo(
        self,
        ctx: Context,
        action: TodoAction,
        content: Annotated[str | None, Field(description="For add.")] = None,
        memory_id: Annotated[str | None, Field(description="For done, drop, reopen.")] = None,
        title: str = "",
        importance: Importance | None = None,
        tags: list[str] | None = None,
        status: TodoListing = "open",
        limit: Annotated[StrictInt, Field(ge=1, le=100), WHOLE] = 20,
    ) -> Annotated[CallToolResult, TodoResult]:
        """Commitments: open ones list first, never pruned."""
        request = TodoRequest(
            action=action,
            content=content,
            memory_id=memory_id,
            title=title,
            importance=importance,
            tags=tags,
            status=status,
            limit=limit,
        )
        memory = await current_memory()
        result = await memory.todo(request)
        if action != "list":
            await self.subscribers.publish(
                memory.owner, "memory://todos", "memory://stats", memory_uri(result.id or "")
            )
        result, omitted = bound_list(result, "todos", self.budget)
        return tool_result(result, _render_todos(result, omitted), self.budget)

    async def intent(
        self,
        ctx: Context,
        action: IntentAction,
        content: Annotated[str | None, Field(description="For add: what to do.")] = None,
        fire_at: Annotated[
            datetime | None,
            Field(description="For add: when (UTC unless offset)."),
        ] = None,
        cue: Annotated[
            str | None,
            Field(description="For add: words; fires when all or their gist come up."),
        ] = None,
        every_hours: Annotated[
            StrictFloat | None,
            Field(gt=0, description="For add: every N hours (cue: N h after firing)."),
        ] = None,
        memory_id: Annotated[str | None, Field(description="For cancel.")] = None,
        text: Annotated[
            str | None, Field(description="For check (fires cues): what is going on.")
        ] = None,
        importance: Importance | None = None,
    ) -> Annotated[CallToolResult, IntentResult]:
        """Act later, at a time or on a cue, once unless every_hours; see reminders."""
        request = IntentRequest(
            action=action,
            content=content,
            memory_id=memory_id,
            fire_at=fire_at,
            cue=cue,
            every_hours=every_hours,
            text=text,
            importance=importance,
        )
        memory = await current_memory()
        result = await memory.intent(request)
        if action in ("add", "cancel"):
            await self.subscribers.publish(
                memory.owner, memory_uri(result.id or ""), "memory://stats"
            )
        result, omitted = bound_list(result, "intents", self.budget)
        return tool_result(result, _render_intents(result, omitted), self.budget)

    async def memory_reflect(
        self,
        ctx: Context,
        steps: Annotated[
            list[Step] | None,
            Field(description="Default: all, in order."),
        ] = None,
    ) -> Annotated[CallToolResult, ReflectReport]:
        """Consolidate: merge repeats, link neighbours, rescore, prune."""
        memory = await current_memory()
        sampler = None
        if memory.settings.generative_reflection:
            sampler = session_sampler(ctx.session)

        async def progress(done: int, total: int, message: str) -> None:
            await ctx.report_progress(done, total, message)

        report = await memory.reflect(steps, sampler=sampler, progress=progress)
        await self.subscribers.publish(memory.owner, "memory://stats", "memory://archived")
        bounded = _bound_report(report, self.budget)
        return tool_result(bounded, _render_report(bounded), self.budget)


def register_tools(
    server: MCPServer, budget: int, subscribers: Subscribers, *, reflect: bool = True
) -> None:
    """Register the tools on `server`; `memory_reflect` (DESIGN.md §8) only with `reflect`.

    Reflection's generative steps (reconcile, abstract) ask the client's own model through MCP
    sampling, only when `generative_reflection` is on and the client offers sampling.
    """
    tools = MemoryTools(budget, subscribers)
    listed: list[tuple[Callable[..., Awaitable[CallToolResult]], str, ToolAnnotations]] = [
        (tools.memory_author, "Write a memory", WRITES),
        (tools.memory_recall, "Recall memories", WRITES),
        (tools.memory_explain, "Explain a recall", READ_ONLY),
        (tools.memory_update, "Update, link or forget a memory", DESTRUCTIVE),
        (tools.todo, "Todos", WRITES),
        (tools.intent, "Intents (prospective memory)", DESTRUCTIVE),
    ]
    if reflect:
        listed.append((tools.memory_reflect, "Consolidate memory", DESTRUCTIVE))
    for handler, title, annotations in listed:
        server.tool(title=title, annotations=annotations)(tool_errors(handler))


def _bound_report(report: BaseModel, budget: int) -> Any:
    """Trim each step's details until the report fits half the reply budget."""
    keep = 50
    bounded = report
    while json_tokens(bounded) > budget // 2 and keep > 1:
        keep //= 2
        steps = [
            s.model_copy(update={"details": s.details[:keep]})
            for s in report.steps  # type: ignore[attr-defined]
        ]
        bounded = report.model_copy(update={"steps": steps})
    return bounded


def _render_report(report: Any) -> str:
    lines = [f"Reflection {report.status}: {report.applied} change(s)."]
    if report.sweep == "full":
        lines.append(f"Compared every pair of {report.changed} memories.")
    elif report.sweep == "clustered":
        lines.append(
            f"Compared each of {report.changed} memories with its nearest clusters "
            "(a large role's first pass: most similar pairs, not every pair)."
        )
    elif report.sweep == "changed":
        lines.append(f"Compared the {report.changed} memories changed since the last pass.")
    for s in report.steps:
        note = f" — {s.note}" if s.note else ""
        lines.append(
            f"- {s.step}: planned {s.planned}, applied {s.applied}, skipped {s.skipped}, "
            f"failed {s.failed}{note}"
        )
        shown, more = s.outcomes()
        lines += [f"    {d}" for d in shown]
        if more:
            where = " (memory://archived lists what faded)" if s.step == "prune" else ""
            lines.append(f"    … and {more} more{where}")
    return "\n".join(lines)


def _render_todos(result: TodoResult, omitted: int) -> str:
    lines = []
    if result.id:
        lines.append(f"{result.action}: {result.id[:8]} → {result.outcome}.")
    rows = [
        f"- [{t.id8}] [{t.status}] {t.importance_label} {t.title or t.content}"
        + (f" ({SHARED_TODO})" if t.shared else "")
        for t in result.todos
    ]
    if result.action == "list" and result.status not in (None, "open"):
        # A listing by another status names what it lists ("1 done todo(s):").
        shown = "" if result.status == "all" else f"{result.status} "
        header = f"{len(result.todos)} {shown}todo(s):"
        lines.append(_listing(header, rows, f"No {shown}todos."))
    else:
        lines.append(_listing(f"{result.open_count} open todo(s):", rows, "No open todos."))
    if omitted:
        lines.append(f"{omitted} more not shown; read memory://todos for all of them.")
    lines += render_reminders(result.reminders, result.reminders_more)
    return "\n".join(lines)


def _render_intents(result: IntentResult, omitted: int) -> str:
    lines = []
    if result.id or result.outcome:
        said = " ".join(part for part in ((result.id or "")[:8], result.outcome) if part)
        lines.append(f"{result.action}: {said}.")
    rows = []
    for i in result.intents:
        when = ", ".join(
            part
            for part in (
                f"at {i.fire_at:%Y-%m-%d %H:%M} UTC" if i.fire_at else "",
                f"on '{i.cue}'" if i.cue else "",
                f"every {i.every_hours:g} h" if i.every_hours else "",
            )
            if part
        )
        state = "armed" if i.armed else f"fired {i.fired_count}×"
        rows.append(f"- [{i.id8}] {state} {i.content} ({when})")
    lines.append(_listing("Intents:", rows, "No intents."))
    if omitted:
        lines.append(f"{omitted} more not shown.")
    lines += render_reminders(result.reminders, result.reminders_more)
    return "\n".join(lines)


def _listing(title: str, rows: list[str], empty: str) -> str:
    """`title` over the rows, or `empty` alone ("0 open todo(s):" over "No open todos." said
    it twice)."""
    return "\n".join([title, *rows]) if rows else empty
