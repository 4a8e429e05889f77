"""The Memory facade: the public verbs of one owner's memory, one delegation each.

Every front end (MCP server, CLI, console, hooks, evaluation) uses it. A `Memory` is cheap:
an owner, its read grants and the process's shared `Engine`. `Memory.open(...)` opens an engine
of its own for one-shot use (the CLI, scripts, tests); servers open one engine and ask it for a
`Memory` per caller.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from .config import Settings
from .domain.injection import render_session
from .domain.replies import (
    AuthorResult,
    ExplainResult,
    IntentResult,
    MaintenanceRecord,
    MemoryView,
    Neighbourhood,
    RecallResult,
    ReflectReport,
    Stats,
    TodoResult,
    UpdateResult,
)
from .domain.requests import (
    AuthorRequest,
    ExplainRequest,
    IntentRequest,
    RecallRequest,
    TodoRequest,
    UpdateRequest,
    request_of,
)
from .domain.schema import AccessRecord
from .domain.scope import Actor, Scope, parse_owner, parse_roles
from .embeddings import Embedder
from .engine import Engine
from .malloc_tuning import release_free_memory
from .services import (
    authoring,
    consolidation,
    editing,
    explain,
    injection,
    intents,
    neighbourhood,
    recall,
    todos,
    transfer,
    views,
)
from .services.caller import Caller
from .services.consolidation import Progress
from .services.sampler import Sampler

__all__ = ["Memory"]

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])
R = TypeVar("R")


def _after_logging(verb: F) -> F:
    """The verb first waits for access logging queued behind earlier replies.

    Recall logs what it returned after its reply (`Engine.after_reply`); every other verb
    sees those accesses, so a caller always reads its own earlier recalls.
    """

    @functools.wraps(verb)
    async def wrapper(self: Memory, *args: Any, **kwargs: Any) -> Any:
        await self.engine.flush()
        return await verb(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


class Memory:
    """Long-term memory for one owner over a shared engine.

    Open a standalone one with `async with Memory.open(path, owner="role@instance") as mem:`.
    """

    def __init__(self, engine: Engine, owner: str = "", grants: Iterable[str] = ()) -> None:
        parse_owner(owner)
        self.engine = engine
        self._caller = Caller(engine, Actor(owner, parse_roles(grants)))

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        path: Path | str | None = None,
        *,
        owner: str | None = None,
        read: Iterable[str] | None = None,
        embedder: Embedder | None = None,
        settings: Settings | None = None,
    ) -> AsyncIterator[Memory]:
        """Open a store for an owner; the embedding model loads in the background.

        `read` grants the owner read access to other roles (or `*`): configuration, never
        something a model chooses.

        Raises:
            InvalidInput: the owner is malformed.
            StoreTooNew / StoreUnavailable: the store cannot be used.
        """
        settings = (settings or Settings()).model_copy()
        if path is not None:
            settings.store = path
        if owner is not None:
            settings.owner = owner
        if read is not None:
            settings.read = list(read)
        parse_owner(settings.owner)
        async with Engine.open(settings, embedder) as engine:
            yield cls(engine, settings.owner, settings.read)

    # ------------------------------------------------------------------ identity and state

    @property
    def owner(self) -> str:
        return self._caller.owner

    @property
    def role(self) -> str:
        return self._caller.role

    @property
    def settings(self) -> Settings:
        return self.engine.settings

    @property
    def embeddings_state(self) -> str:
        return self.engine.embeddings_state

    async def wait_ready(self) -> None:
        """Wait until the embedding model has loaded (re-raises a load failure)."""
        await self.engine.wait_ready()

    def scope(self, word: str = "mine") -> Scope:
        """The scope a scope word resolves to for this owner (DESIGN.md §10)."""
        return self._caller.scope(word)

    # ------------------------------------------------------------------ writing

    async def author(self, content: str | AuthorRequest, **fields: Any) -> AuthorResult:
        """Remember something (see `author_many` for the rules); a batch of one.

        `author("text", importance="HIGH")` is short for
        `author(AuthorRequest(content="text", importance="HIGH"))`.

        Raises:
            InvalidInput: a field is malformed or unknown (the message names it and the fix).
            NotFound: a link target does not exist.
        """
        return (await self.author_many([_request(AuthorRequest, "content", content, fields)]))[0]

    @_after_logging
    async def author_many(
        self, requests: Sequence[AuthorRequest | Mapping[str, Any]]
    ) -> list[AuthorResult]:
        """Remember several memories in one transaction; one bad item writes nothing. An item
        may be a mapping of an `AuthorRequest`'s fields (a JSON batch)."""
        batch = [request_of(AuthorRequest, request) for request in requests]
        return await authoring.author_many(self._caller, batch)

    @_after_logging
    async def import_edges(self, edges: Sequence[tuple[str, dict[str, Any]]]) -> int:
        """Recreate exported edges whose both ends exist here; returns how many were added."""
        return await authoring.import_edges(self._caller, edges)

    @_after_logging
    async def import_records(
        self,
        items: Sequence[tuple[int, Any]] | transfer.CheckedFile,
        tick: Callable[[int], Any] | None = None,
    ) -> transfer.Imported:
        """Import exported records (line number, decoded JSON); every line is checked first
        (a file `transfer.check_records` returned is not checked again)."""
        return await transfer.import_records(self._caller, items, tick)

    def export_records(self, *, include_archived: bool = False) -> AsyncIterator[dict]:
        """Every memory in your scope that recall reaches (live and faded, with tombstones) as
        an export record; forgotten ones too with `include_archived`."""
        return transfer.export_records(self._caller, include_archived=include_archived)

    @_after_logging
    async def update(self, memory_id: str | UpdateRequest, **fields: Any) -> UpdateResult:
        """Change, link or archive one of your memories (see `services.editing.update`);
        `update(id, title="…")` is short for `update(UpdateRequest(memory_id=id, title="…"))`."""
        return await editing.update(
            self._caller, _request(UpdateRequest, "memory_id", memory_id, fields)
        )

    @_after_logging
    async def forget(self, memory_id: str, reason: str = "forgotten") -> UpdateResult:
        """Archive a memory (never deleted): recall and spreading skip it from now on."""
        return await editing.forget(self._caller, memory_id, reason)

    @_after_logging
    async def revive(self, memory_id: str) -> UpdateResult:
        """Restore a forgotten memory by id: that very memory, with its history; its
        tombstone is lifted. Refused across roles as `forget` is."""
        return await editing.revive(self._caller, memory_id)

    @_after_logging
    async def link(
        self, memory_id: str, target: str, relation: str, weight: Any = None
    ) -> UpdateResult:
        """Add a typed edge from one of your memories to any memory you can see."""
        link = {"target": target, "relation": relation, "weight": weight}
        return await editing.update(self._caller, UpdateRequest(memory_id=memory_id, links=[link]))

    # ------------------------------------------------------------------ reading

    async def recall(self, query: str | RecallRequest, **options: Any) -> RecallResult:
        """Rank memories for a query and log why each returned one ranked where it did;
        `recall("text", k=3)` is short for `recall(RecallRequest(query="text", k=3))`."""
        return await recall.recall(self._caller, _request(RecallRequest, "query", query, options))

    @_after_logging
    async def explain(
        self, query: str | ExplainRequest | None = None, **options: Any
    ) -> ExplainResult:
        """A dry run for a query, a memory's access history, or why it is (not) recalled
        (the fields of an `ExplainRequest`)."""
        request = _request(ExplainRequest, "query", query, options)
        return await explain.explain(self._caller, request)

    @_after_logging
    async def get(self, memory_id: str, *, scope: str = "mine") -> MemoryView:
        """One memory with everything derived from it now (no access is logged)."""
        return await views.get(self._caller, memory_id, scope=scope)

    @_after_logging
    async def list_memories(self, **options: Any) -> list[tuple[int, MemoryView]]:
        """Memories in insertion order with their cursor; pass the last one as `after`.
        Filters: archived, type, status, owner, tag (see `services.views.list_memories`)."""
        return await views.list_memories(self._caller, **options)

    @_after_logging
    async def neighbourhood(self, memory_id: str, **options: Any) -> Neighbourhood:
        """The memories within `hops` links of one memory, either way, as you may see them
        (see `services.neighbourhood.neighbourhood`); nothing is logged."""
        return await neighbourhood.neighbourhood(self._caller, memory_id, **options)

    @_after_logging
    async def access_log(self, memory_id: str, **options: Any) -> list[tuple[int, AccessRecord]]:
        """A memory's accesses from the stream, newest first, with their cursor."""
        return await views.access_log(self._caller, memory_id, **options)

    @_after_logging
    async def recent_accesses(self, **options: Any) -> list[tuple[int, str, AccessRecord]]:
        """Accesses to memories in the scope, newest first."""
        return await views.recent_accesses(self._caller, **options)

    @_after_logging
    async def context(self) -> str:
        """The session-start block as the hook shows it (`inject_at_start`), without firing
        intents: open todos and the most important memories, none superseded, stale or
        archived. Reading it logs `injected`, which never reinforces."""
        got = await self.inject_at_start(fire=False)
        block = render_session("", got.todos, got.open_todos, [], got.memories)
        return block or "(nothing to show: no open todos and no HIGH or CRITICAL memory)"

    @_after_logging
    async def inject_for_prompt(self, prompt: str) -> injection.Injected:
        """What a harness shows before a prompt: the intents it cues and the memories that
        pass the injection rule; each logged `injected`, which never reinforces."""
        return await injection.for_prompt(self._caller, prompt)

    @_after_logging
    async def inject_at_start(self, project: str = "", *, fire: bool = True) -> injection.Injected:
        """What a harness shows at session start: open todos, due intents (unless `fire` is
        False) and the most important memories (those labelled `project` first); logged
        `injected`."""
        return await injection.at_session_start(self._caller, project, fire=fire)

    @_after_logging
    async def stats(self, *, scope: str = "mine", show_path: bool = False) -> Stats:
        """Counts and KPIs of what the scope can see."""
        return await views.stats(self._caller, scope=scope, show_path=show_path)

    async def other_roles(self) -> dict[str, int]:
        """Live memories per role you cannot read, when you can read none: for front ends run
        by whoever holds the store (the CLI, the loopback console), never for MCP clients
        (see `services.views.other_roles`)."""
        return await views.other_roles(self._caller)

    @_after_logging
    async def maintenance_log(
        self, kind: str = "reflection", *, limit: int = 20
    ) -> list[MaintenanceRecord]:
        """Your role's latest reflection passes (or fired intents, `kind="intent"`), newest
        first."""
        return await views.maintenance_log(self._caller, kind, limit=limit)

    # ------------------------------------------------------------------ prospective memory

    @_after_logging
    async def todo(
        self, action: str | TodoRequest = "list", *, remind: bool = True, **fields: Any
    ) -> TodoResult:
        """Add, list, close or reopen a todo (the fields of a `TodoRequest`). With
        `remind=False` listing and closing fire no due intent (a person looking is not the
        agent's turn); added content still cues."""
        request = _request(TodoRequest, "action", action, fields)
        return await todos.todo(self._caller, request, remind=remind)

    @_after_logging
    async def intent(
        self, action: str | IntentRequest = "list", *, remind: bool = True, **fields: Any
    ) -> IntentResult:
        """Add, list, check or cancel an intent (the fields of an `IntentRequest`). With
        `remind=False` listing and cancelling fire no due intent; `check` is refused (it is
        what fires them)."""
        request = _request(IntentRequest, "action", action, fields)
        return await intents.intent(self._caller, request, remind=remind)

    # ------------------------------------------------------------------ consolidation

    @_after_logging
    async def reflect(
        self,
        steps: Sequence[str] | None = None,
        *,
        sampler: Sampler | None = None,
        progress: Progress | None = None,
        now: datetime | None = None,
        trigger: str = "on-demand",
    ) -> ReflectReport:
        """Run one reflection pass over your role: merge, reconcile, link, rescore, abstract,
        prune (see `services.consolidation.reflect`)."""
        report = await consolidation.reflect(
            self._caller, steps, sampler=sampler, progress=progress, now=now, trigger=trigger
        )
        # The pass's garbage is freed with its frame but stays resident: hand it back.
        await anyio.to_thread.run_sync(release_free_memory)
        return report


def _request(kind: type[R], first: str, given: object, fields: dict[str, Any]) -> R:
    """`given` with `fields` laid over it if it is a request of `kind`, else the request whose
    field `first` is `given` (a verb's positional argument: the content, the query, …)."""
    if isinstance(given, kind):
        return request_of(kind, given, **fields)
    return request_of(kind, {first: given}, **fields)


async def maintain(engine: Engine) -> None:
    """Background reflection for every role of a process, until cancelled."""
    await consolidation.maintain(engine)
