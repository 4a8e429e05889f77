"""The Memory facade: the one object every front end (MCP server, CLI, evaluation) uses.

It owns the lifecycle (store, vector cache, embedder warm-up), validates arguments into
schema types, runs every write in one transaction, and answers with reply models.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import numpy as np

from . import recall as recall_mod
from . import tracing
from .accesses import apply_access, created_record
from .config import Settings
from .embeddings import Embedder, WarmingEmbedder, default_embedder
from .errors import InvalidInput, NotFound, OwnerForbidden
from .forgetting import prune_eta, retention
from .living import Living
from .references import parse_references
from .replies import (
    AuthorResult,
    ExplainResult,
    ExplainRow,
    Flags,
    MemoryView,
    RecallHit,
    RecallResult,
    Stats,
    UpdateResult,
    WhyNot,
)
from .schema import (
    CONFIDENCE,
    EDGE_WEIGHT,
    IMPORTANCE,
    SALIENCE,
    AccessRecord,
    Channel,
    EdgeType,
    MemoryType,
    Reference,
    Trigger,
    as_utc,
    clean_labels,
    content_hash,
    head,
    new_id,
    normalise_id,
    owner_role,
    parse_link,
    parse_owner,
)
from .schema import (
    Memory as MemoryRecord,
)
from .schema import (
    now as utc_now,
)
from .store import Scope, Store, memory_from_row
from .vectors import VectorIndex

MAX_CONTENT = 100_000
MAX_QUERY = 2_000


def _text_of(title: str, content: str) -> str:
    """What gets embedded: the title (if any) leads the content."""
    return f"{title}. {content}" if title else content


class Memory(Living):
    """Long-term memory for one owner over one store file.

    Open it with `async with Memory.open(path, owner="role@instance") as mem:`.
    """

    def __init__(
        self, store: Store, index: VectorIndex, embedder: Embedder, settings: Settings
    ) -> None:
        self.store = store
        self.index = index
        self.embedder = embedder
        self.settings = settings
        self.owner = settings.owner
        self.role = owner_role(settings.owner)
        self._model_checked = False

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        path: Path | str | None = None,
        *,
        owner: str | None = None,
        embedder: Embedder | None = None,
        settings: Settings | None = None,
    ) -> AsyncIterator[Memory]:
        """Open a store for an owner; the embedding model loads in the background.

        Raises:
            InvalidInput: the owner is malformed.
            StoreTooNew: the file was written by a newer nooa-mcp.
        """
        settings = (settings or Settings()).model_copy()
        if path is not None:
            settings.store = Path(path)
        if owner is not None:
            settings.owner = owner
        parse_owner(settings.owner)
        store = await Store.open(settings.store)
        owned: Embedder | None = None
        try:
            if embedder is None:
                embedder = owned = default_embedder(settings.model_cache_dir)
            index = VectorIndex(embedder.dim)
            await index.sync(store)
            yield cls(store, index, embedder, settings)
        finally:
            with anyio.CancelScope(shield=True):
                await store.close()
                if isinstance(owned, WarmingEmbedder):
                    # A process that exits while onnxruntime is still loading in the worker
                    # thread aborts (exit 134); a short command must let the load finish.
                    await anyio.to_thread.run_sync(owned.finish)

    @property
    def embeddings_state(self) -> str:
        ready = getattr(self.embedder, "ready", True)
        return "ready" if ready else "warming"

    async def wait_ready(self) -> None:
        """Wait until the embedding model has loaded (re-raises a load failure)."""
        if isinstance(self.embedder, WarmingEmbedder):
            await anyio.to_thread.run_sync(self.embedder.wait)

    async def _embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = await anyio.to_thread.run_sync(self.embedder.embed, list(texts))
        await self._ensure_model_matches()
        return vectors

    async def _query_vector(self, query: str) -> np.ndarray | None:
        if self.embeddings_state != "ready" or not self.settings.recall.use_dense:
            return None
        return (await self._embed([query]))[0]

    async def _ensure_model_matches(self) -> None:
        """Re-embed the store once if its vectors came from another model.

        Vectors of two models are not comparable, so a store written with one model and
        opened with another would silently lose its dense search; the stored text is
        re-embedded instead, in batches, each committed on its own.
        """
        if self._model_checked:
            return
        self._model_checked = True
        name = f"{self.embedder.name}:{self.embedder.dim}"
        if await self.store.get_meta("embedder") == name:
            return
        while True:
            rows = await self.store.rows(
                "SELECT id, title, content FROM memories WHERE embedding IS NULL "
                "OR length(embedding) != ? LIMIT 256",
                (self.embedder.dim * 4,),
            )
            if not rows:
                break
            texts = [_text_of(r["title"], r["content"]) for r in rows]
            vectors = await anyio.to_thread.run_sync(self.embedder.embed, texts)
            async with self.store.transaction():
                for row, vector in zip(rows, vectors, strict=True):
                    await self.store.set_embedding(row["id"], vector)
        async with self.store.transaction():
            await self.store.set_meta("embedder", name)
        self.index.mark_dirty()

    # ------------------------------------------------------------------ scope and ids

    def scope(self, scope: str = "mine") -> Scope:
        """Turn a scope word into a Scope (SPEC §10).

        Raises:
            InvalidInput: the scope is neither mine, instance, * nor a valid owner.
        """
        value = (scope or "mine").strip()
        if value == "mine":
            return Scope("role", role=self.role)
        if value == "instance":
            return Scope("owner", owner=self.owner) if self.owner else Scope("role", role="")
        if value == "*":
            return Scope("all")
        try:
            role, _ = parse_owner(value, "scope")
        except InvalidInput:
            raise InvalidInput(
                "scope",
                f"'{scope}' is not a scope.",
                "Use mine, instance, * or an owner such as role or role@instance.",
            ) from None
        return Scope("owner", owner=value) if "@" in value else Scope("role", role=role)

    async def _resolve(self, ident: str, scope: Scope, field: str = "memory_id") -> str:
        """Full id of a visible memory; a memory outside the scope does not exist here."""
        if not isinstance(ident, str):
            raise InvalidInput(field, f"{ident!r} is not an id.", "Pass an id or 8-char prefix.")
        memory_id = await self.store.resolve_id(normalise_id(ident, field), field)
        owner = await self.store.scalar("SELECT owner FROM memories WHERE id = ?", (memory_id,))
        if not scope.allows(owner):
            raise NotFound(ident, field)
        return memory_id

    def _writable(self, memory: MemoryRecord) -> None:
        """Writes stay inside the writer's role; shared rows belong to the shared owner only."""
        if memory.owner == self.owner:
            return
        if memory.owner == "" or owner_role(memory.owner) != self.role:
            raise OwnerForbidden(self.owner, memory.owner)

    def _access(self, channel: Channel, **fields: Any) -> AccessRecord:
        """An access by this owner now, linked to the client session and the OTel span."""
        session_ref, trace_ref = tracing.access_refs()
        return AccessRecord(
            ts=utc_now(),
            channel=channel,
            reader_owner=self.owner,
            session_ref=session_ref,
            trace_ref=trace_ref,
            **fields,
        )

    # ------------------------------------------------------------------ author

    def _build(self, spec: dict[str, Any]) -> MemoryRecord:
        """Validate one author request into a record (no I/O)."""
        content = spec.get("content")
        if not isinstance(content, str) or not content.strip():
            raise InvalidInput("content", "is empty.", "Pass the text to remember.")
        if len(content) > MAX_CONTENT:
            raise InvalidInput(
                "content",
                f"is {len(content)} characters; the limit is {MAX_CONTENT}.",
                "Split it, or store a file: reference instead.",
            )
        if "\x00" in content:
            raise InvalidInput("content", "contains a NUL byte.", "Remove control characters.")
        raw_type = spec.get("type") or "info"
        try:
            kind = MemoryType(str(raw_type).strip().lower())
        except ValueError:
            names = ", ".join(t.value for t in MemoryType)
            raise InvalidInput(
                "type", f"'{raw_type}' is not a memory type.", f"Use one of {names}."
            ) from None
        status = spec.get("status")
        if status is not None and kind is not MemoryType.todo:
            raise InvalidInput(
                "status",
                f"only todos have a status; this is a {kind.value}.",
                "Leave status out, or use type=todo.",
            )
        if status is not None and status not in ("open", "done", "dropped"):
            raise InvalidInput(
                "status", f"'{status}' is not a status.", "Use open, done or dropped."
            )
        trigger = spec.get("trigger")
        if trigger is not None:
            if kind is not MemoryType.intent:
                raise InvalidInput(
                    "trigger",
                    f"only intents have a trigger; this is a {kind.value}.",
                    "Use type=intent.",
                )
            trigger = _parse_trigger(trigger)
        title = spec.get("title") or ""
        if not isinstance(title, str) or len(title) > 500:
            raise InvalidInput("title", "must be text of at most 500 characters.", "Shorten it.")
        created = as_utc(spec.get("created_at"), "created_at") or utc_now()
        valid_from = as_utc(spec.get("valid_from"), "valid_from")
        valid_to = as_utc(spec.get("valid_to"), "valid_to")
        if valid_from and valid_to and valid_to < valid_from:
            raise InvalidInput("valid_to", "is before valid_from.", "Swap them or drop one.")
        salience = spec.get("salience")
        confidence = spec.get("confidence")
        place = spec.get("place_or_task") or ""
        if not isinstance(place, str):
            raise InvalidInput("place_or_task", "must be text.", "Pass a short phrase.")
        ident = spec.get("id")
        if ident is not None and (
            not isinstance(ident, str) or len(normalise_id(ident, "id")) != 32
        ):
            raise InvalidInput(
                "id",
                f"{ident!r} is not a full id.",
                "Leave id out; it is only for imports of exported memories.",
            )
        return MemoryRecord(
            id=ident.lower() if ident else new_id(),
            type=kind,
            title=" ".join(title.split()),
            content=content.strip(),
            owner=self.owner,
            importance=IMPORTANCE.parse(spec.get("importance", "MEDIUM")),
            salience=SALIENCE.parse(salience) if salience is not None else 0.3,
            confidence=CONFIDENCE.parse(confidence) if confidence is not None else 0.75,
            tags=clean_labels(spec.get("tags"), "tags"),
            entities=clean_labels(spec.get("entities"), "entities"),
            place_or_task=" ".join(place.split()),
            created_at=created,
            last_accessed_at=created,
            valid_from=valid_from,
            valid_to=valid_to,
            references=parse_references(spec.get("references")),
            status=status,
            trigger=trigger,
        )

    async def _links(self, links: Sequence[Any] | None) -> list[tuple[str, EdgeType, float]]:
        """Validate links and resolve their targets among memories this owner can see."""
        out = []
        if links is not None and not isinstance(links, list | tuple):
            raise InvalidInput("links", f"{links!r} is not a list.", "Pass a list of links.")
        for raw in links or []:
            link = parse_link(raw)
            target = await self._resolve(link.target, self.scope("mine"), "links.target")
            weight = (
                EDGE_WEIGHT.parse(link.weight, "links.weight") if link.weight is not None else 1.0
            )
            out.append((target, link.relation, weight))
        return out

    async def author(self, content: str, **fields: Any) -> AuthorResult:
        """Remember something. See `author_many` for the rules; this is a batch of one.

        Raises:
            InvalidInput: a field is malformed (the message names it and the fix).
            NotFound: a link target does not exist.
        """
        return (await self.author_many([{"content": content, **fields}]))[0]

    async def author_many(self, specs: Sequence[dict[str, Any]]) -> list[AuthorResult]:
        """Remember several memories in one transaction.

        - An exact repeat (same content hash, type and role) is idempotent: its id comes back
          with status `exists` and nothing changes, so a retried call never duplicates.
        - A near-duplicate (same type and role, cosine ≥ 0.92) reinforces the existing memory
          and returns its id with status `reinforced-existing`.
        - Everything is validated before anything is written: one bad item writes nothing.
        """
        records = [self._build(dict(spec)) for spec in specs]
        revive = [bool(spec.get("revive")) for spec in specs]
        links = [await self._links(spec.get("links")) for spec in specs]
        await self._capture_references(records)
        vectors = await self._embed([_text_of(r.title, r.content) for r in records])
        results: list[AuthorResult] = []
        async with self.store.transaction():
            await self.index.sync(self.store)
            batch: dict[str, str] = {}
            # Near-duplicates among the rows present now, for the whole batch in one pass:
            # a matrix-vector product over the store per item made a write at 100k rows
            # cost 100x one at 1k. Rows this batch adds are checked per item (few).
            prior = self._nearest_existing(records, vectors)
            for record, vector, edges, again, near in zip(
                records, vectors, links, revive, prior, strict=True
            ):
                results.append(await self._author_one(record, vector, edges, batch, again, near))
        self.index.mark_dirty()
        self._note_activity(writes=sum(r.status != "exists" for r in results))
        # SPEC §9: authored content is a cue too (but an intent never cues itself).
        texts = [(r.content, v) for r, v in zip(records, vectors, strict=True)]
        fired = await self._reminders(texts, exclude=[r.id for r in results])
        for result, reminders in zip(results, fired, strict=True):
            result.reminders = reminders
        return results

    async def _author_one(
        self,
        record: MemoryRecord,
        vector: np.ndarray,
        edges: list[tuple[str, EdgeType, float]],
        batch: dict[str, str],
        revive: bool = False,
        near: tuple[str | None, float, int] | None = None,
    ) -> AuthorResult:
        key = f"{record.type.value}:{record.content_hash}"
        existing = batch.get(key) or await self.store.find_by_hash(
            record.content_hash, self.role, record.type.value
        )
        if existing is None and await self.store.fetch(record.id) is not None:
            existing = record.id  # an import of an id that is already here
        if existing is not None:
            return AuthorResult(id=existing, status="exists", similarity=1.0)
        stone = await self._tombstone_match(record, vector)
        if stone is not None:
            return await self._blocked_or_revived(*stone, revive)
        twin, similarity = self._near_duplicate(record.type.value, vector, near)
        if twin is not None:
            await self._reinforce(twin, record, edges)
            return AuthorResult(id=twin, status="reinforced-existing", similarity=similarity)
        actr = apply_access(
            record,
            [],
            created_record(record, self.owner, *tracing.access_refs()),
            ring_size=self.settings.ring_size,
            exact_k=self.settings.recall.exact_accesses,
        )
        await self.store.insert(record, actr, vector)
        await self.store.append_accesses([(record.id, record.access_log[0])])
        for target, relation, weight in edges:
            await self.store.add_edge(record.id, target, relation, weight)
        # Later items of the same batch must see this one, for dedup.
        batch[key] = record.id
        seq = await self.store.scalar("SELECT seq FROM memories WHERE id = ?", (record.id,))
        self.index.note(record.id, seq, self.role, self.owner, record.type.value, vector)
        return AuthorResult(id=record.id, status="created")

    def _dedup_mask(self, type: str, start: int = 0) -> np.ndarray:
        """Rows `start`… that a new memory of `type` may be a near-duplicate of."""
        mask = self.index.mask(Scope("role", role=self.role), types={type}, start=start)
        if self.role:
            # Same owner role only: shared rows are not this owner's to reinforce.
            mask &= self.index.owner_code[start : self.index.size] != 0
        return mask

    def _nearest_existing(
        self, records: Sequence[MemoryRecord], vectors: np.ndarray
    ) -> list[tuple[str | None, float, int]]:
        """Per record: the most similar dedup candidate among the cached rows, its cosine,
        and how many rows were cached then (rows after that are checked one by one)."""
        n = self.index.size
        out: list[tuple[str | None, float, int]] = [(None, -1.0, n)] * len(records)
        by_type: dict[str, list[int]] = {}
        for i, record in enumerate(records):
            by_type.setdefault(record.type.value, []).append(i)
        for kind, items in by_type.items():
            mask = self._dedup_mask(kind)
            if n == 0 or not mask.any():
                continue
            for lo in range(0, len(items), 64):  # 64 columns: 25 MB of scores at 100k rows
                chunk = items[lo : lo + 64]
                sims = self.index.matrix[:n] @ np.asarray(vectors[chunk], dtype=np.float32).T
                sims[~mask] = -np.inf
                best = sims.argmax(axis=0)
                for j, i in enumerate(chunk):
                    out[i] = (self.index.ids[best[j]], float(sims[best[j], j]), n)
        return out

    def _near_duplicate(
        self, type: str, vector: np.ndarray, near: tuple[str | None, float, int] | None = None
    ) -> tuple[str | None, float]:
        if near is None:
            hits = self.index.search(vector, self._dedup_mask(type), 1)
        else:
            # `near` covers rows [0, since); only rows written after it are searched here.
            twin, cos, since = near
            hits = [(twin, cos)] if twin is not None else []
            rows = np.flatnonzero(self._dedup_mask(type, start=since)) + since
            if rows.size:
                sims = self.index.matrix[rows] @ vector
                j = int(sims.argmax())
                if not hits or sims[j] > hits[0][1]:
                    hits = [(self.index.ids[rows[j]], float(sims[j]))]
        if hits and hits[0][1] >= self.settings.dedup_similarity:
            return hits[0][0], hits[0][1]
        return None, 0.0

    async def import_edges(self, edges: Sequence[tuple[str, dict[str, Any]]]) -> int:
        """Recreate exported edges whose both ends exist here; returns how many were added."""
        added = 0
        async with self.store.transaction():
            for src, edge in edges:
                try:
                    relation = EdgeType(edge.get("type"))
                    weight = EDGE_WEIGHT.parse(edge.get("weight", 1.0), "edges.weight")
                    target = await self.store.resolve_id(normalise_id(str(edge.get("target"))))
                except (ValueError, NotFound):
                    continue
                if target != src:
                    await self.store.add_edge(src, target, relation, weight)
                    added += 1
        return added

    async def _reinforce(
        self, memory_id: str, record: MemoryRecord, edges: list[tuple[str, EdgeType, float]]
    ) -> None:
        memory, actr = await self._fetch(memory_id)
        memory.reinforcement_count += 1
        memory.importance = max(memory.importance, record.importance)
        authored = (await self.store.authored_of([memory_id]))[memory_id]
        await self.store.set_authored_importance(memory_id, max(authored, record.importance))
        memory.salience = max(memory.salience, record.salience)
        memory.confidence = max(memory.confidence, record.confidence)
        memory.tags = clean_labels(memory.tags + record.tags, "tags")
        memory.entities = clean_labels(memory.entities + record.entities, "entities")
        access = self._access(Channel.reinforced)
        actr = self._apply(memory, actr, access)
        await self.store.save(memory, actr)
        await self.store.append_accesses([(memory_id, access)])
        for target, relation, weight in edges:
            if target != memory_id:
                await self.store.add_edge(memory_id, target, relation, weight)

    def _apply(
        self,
        memory: MemoryRecord,
        actr: list[float],
        access: AccessRecord,
        bump_strength: bool = True,
    ) -> list[float]:
        same_role = memory.owner == "" or owner_role(memory.owner) == self.role
        return apply_access(
            memory,
            actr,
            access,
            ring_size=self.settings.ring_size,
            exact_k=self.settings.recall.exact_accesses,
            bump_strength=bump_strength,
            count_for_owner=same_role,
        )

    async def _fetch(self, memory_id: str) -> tuple[MemoryRecord, list[float]]:
        found = await self.store.fetch(memory_id)
        if found is None:
            raise NotFound(memory_id)
        return found

    # ------------------------------------------------------------------ recall and explain

    def _recall_args(self, query: Any, k: Any, types: Any, hops: Any) -> tuple:
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("query", "is empty.", "Pass the words to look for.")
        if "\x00" in query:
            raise InvalidInput("query", "contains a NUL byte.", "Remove control characters.")
        query = query.strip()[:MAX_QUERY]
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 50:
            raise InvalidInput("k", f"{k!r} is not between 1 and 50.", "Pass a small integer.")
        if hops is not None and (
            isinstance(hops, bool) or not isinstance(hops, int) or not 0 <= hops <= 3
        ):
            raise InvalidInput("hops", f"{hops!r} is not between 0 and 3.", "Pass 0, 1, 2 or 3.")
        kinds = None
        if types:
            kinds = set()
            for t in types:
                try:
                    kinds.add(MemoryType(str(t).strip().lower()).value)
                except ValueError:
                    names = ", ".join(m.value for m in MemoryType)
                    raise InvalidInput(
                        "types", f"'{t}' is not a memory type.", f"Use any of {names}."
                    ) from None
        return query, kinds

    async def _rank(
        self,
        query: str,
        scope: Scope,
        kinds: set[str] | None,
        hops: int | None,
        include_archived: bool = False,
        extra: tuple[str, ...] = (),
    ):
        query_vector = await self._query_vector(query)
        await self.index.sync(self.store)
        return await recall_mod.rank(
            query,
            store=self.store,
            index=self.index,
            query_vector=query_vector,
            scope=scope,
            settings=self.settings.recall,
            now=utc_now(),
            types=kinds,
            hops=hops,
            include_archived=include_archived,
            extra_ids=extra,
        )

    async def recall(
        self,
        query: str,
        *,
        k: int = 5,
        scope: str = "mine",
        types: Sequence[str] | None = None,
        hops: int | None = None,
        include_archived: bool = False,
    ) -> RecallResult:
        """Rank memories for a query and log why each returned one ranked where it did.

        Raises:
            InvalidInput: empty query, k outside 1–50, unknown type or scope.
        """
        query, kinds = self._recall_args(query, k, types, hops)
        scope_obj = self.scope(scope)
        ranking = await self._rank(query, scope_obj, kinds, hops, include_archived)
        top = ranking.rows[:k]
        channel = Channel.searched if hops == 0 else Channel.recalled
        stored_refs: dict[str, list[Reference]] = {}
        if top:
            async with self.store.transaction():
                fetched = await self.store.fetch_many([r.id for r in top])
                stored_refs = {i: m.references for i, (m, _) in fetched.items()}
                logged, saved = [], []
                for position, r in enumerate(top, 1):
                    memory, actr = fetched[r.id]
                    access = self._access(
                        channel,
                        query=query[:200],
                        score=round(r.score, 4),
                        rank=position,
                        components=r.components,
                    )
                    saved.append((memory, self._apply(memory, actr, access)))
                    logged.append((r.id, access))
                await self.store.save_many(saved)
                await self.store.append_accesses(logged)
            self.index.mark_dirty()
        hits = [self._hit(position, r) for position, r in enumerate(top, 1)]
        await self._attach_references(hits, stored_refs, scope_obj)
        self._note_activity()
        reminders = (await self._reminders([(query, ranking.query_vector)]))[0]
        nothing = all(h.flags.weak for h in hits)
        note = ""
        if not hits:
            note = "Nothing stored matches this query."
        elif nothing:
            note = "Nothing relevant: every result is only weakly related to the query."
        if ranking.dense_ready is False and self.settings.recall.use_dense:
            note = (note + " " if note else "") + "Embeddings are warming: keyword matches only."
        return RecallResult(
            query=query,
            scope=scope or "mine",
            hits=hits,
            embeddings="ready"
            if ranking.dense_ready or not self.settings.recall.use_dense
            else "warming",
            nothing_relevant=nothing,
            note=note,
            reminders=reminders,
        )

    def _flags(self, r: recall_mod.Ranked) -> Flags:
        weak = r.rel < self.settings.recall.weak_relevance
        return Flags(weak=weak, stale=r.stale, superseded_by=r.superseded_by)

    def _hit(self, position: int, r: recall_mod.Ranked) -> RecallHit:
        row = r.row
        last = datetime.fromtimestamp(row["last_accessed_at"], tz=utc_now().tzinfo)
        policy = self.settings.forgetting
        return RecallHit(
            rank=position,
            id=r.id,
            id8=r.id[:8],
            type=row["type"],
            owner=row["owner"],
            title=row["title"],
            content=row["content"],
            score=round(r.score, 4),
            components=r.components,
            flags=self._flags(r),
            status=row["status"],
            importance=row["importance"],
            created_at=datetime.fromtimestamp(row["created_at"], tz=last.tzinfo),
            valid_from=None
            if row["valid_from"] is None
            else datetime.fromtimestamp(row["valid_from"], tz=last.tzinfo),
            valid_to=None
            if row["valid_to"] is None
            else datetime.fromtimestamp(row["valid_to"], tz=last.tzinfo),
            retention=round(retention(last, row["strength"], utc_now(), policy.tau_hours), 4),
            prune_eta=prune_eta(last, row["strength"], policy),
            path=r.path,
        )

    def _row(self, position: int, r: recall_mod.Ranked) -> ExplainRow:
        return ExplainRow(
            rank=position,
            id=r.id,
            score=round(r.score, 4),
            source=r.source,
            cos=round(r.cos, 4),
            rel=round(r.rel, 4),
            rec=round(r.rec, 4),
            imp=round(r.imp, 4),
            spread=round(self.settings.recall.gamma * r.spread, 4),
            type=r.row["type"],
            owner=r.row["owner"],
            head=r.head,
            path=r.path,
            flags=self._flags(r),
        )

    async def explain(
        self,
        query: str | None = None,
        *,
        memory_id: str | None = None,
        k: int = 10,
        hops: int | None = None,
        scope: str = "mine",
    ) -> ExplainResult:
        """Why things rank: a dry run for a query, a memory's access history, or "why not".

        - query only: the recall pipeline without logging anything, every component shown.
        - memory_id only: the memory's past retrievals from the access stream, newest first.
        - both: whether that memory makes the top k for that query now, and why (not).

        Raises:
            InvalidInput: neither query nor memory_id given, or a bad argument.
            NotFound: the memory does not exist in this scope.
        """
        scope_obj = self.scope(scope)
        if query is None and memory_id is None:
            raise InvalidInput(
                "query", "and memory_id are both missing.", "Pass a query, a memory_id, or both."
            )
        target = await self._resolve(memory_id, scope_obj) if memory_id is not None else None
        if query is None:
            stream = await self.store.access_stream(target, limit=100)
            return ExplainResult(
                mode="replay",
                memory_id=target,
                accesses=[_redact(a, scope_obj) for _, _, a in stream],
                total_accesses=await self.store.count_accesses(target),
                embeddings=self.embeddings_state,
            )
        query, _ = self._recall_args(query, k, None, hops)
        extra = (target,) if target else ()
        ranking = await self._rank(
            query, scope_obj, None, hops, include_archived=bool(target), extra=extra
        )
        rows = [self._row(i, r) for i, r in enumerate(ranking.rows[:k], 1)]
        state = "ready" if ranking.dense_ready else "warming"
        if target is None:
            return ExplainResult(mode="query", query=query, rows=rows, embeddings=state)
        return ExplainResult(
            mode="why_not",
            query=query,
            memory_id=target,
            rows=rows,
            why_not=await self._why_not(target, ranking, k),
            embeddings=state,
        )

    async def _why_not(self, target: str, ranking: recall_mod.Ranking, k: int) -> WhyNot:
        memory, _ = await self._fetch(target)
        position = ranking.rank_of(target)
        mine = ranking.rows[position - 1] if position else None
        kth = ranking.rows[k - 1] if len(ranking.rows) >= k else None
        policy = self.settings.forgetting
        now = utc_now()
        in_top = position is not None and position <= k and not memory.archived
        if memory.archived:
            reason = "It is archived (forgotten or merged), so recall skips it."
        elif in_top:
            reason = f"It ranks {position} of the top {k}."
        elif mine is None:
            reason = "It was not a candidate: it is filtered out for this query."
        else:
            gaps = []
            if kth is not None:
                for name in ("rel", "rec", "imp"):
                    if getattr(mine, name) < getattr(kth, name):
                        gaps.append(f"{name} {getattr(mine, name):.3f} < {getattr(kth, name):.3f}")
                if mine.spread < kth.spread:
                    gaps.append(f"spread {mine.spread:.3f} < {kth.spread:.3f}")
            reason = f"It ranks {position}, below the top {k}" + (
                f": {', '.join(gaps)} against rank {k}." if gaps else "."
            )
            if mine.superseded_by:
                reason += f" It is superseded by {mine.superseded_by[:8]}."
            if mine.stale:
                reason += " Its validity ended (valid_to is past)."
        return WhyNot(
            id=target,
            in_top_k=in_top,
            rank=position,
            k=k,
            score=None if mine is None else round(mine.score, 4),
            components=None if mine is None else mine.components,
            kth_score=None if kth is None else round(kth.score, 4),
            kth_components=None if kth is None else kth.components,
            retention=round(
                retention(memory.last_accessed_at, memory.strength, now, policy.tau_hours), 4
            ),
            prune_eta=prune_eta(memory.last_accessed_at, memory.strength, policy),
            archived=memory.archived,
            reason=reason,
        )

    # ------------------------------------------------------------------ update, forget, link

    async def update(
        self,
        memory_id: str,
        *,
        content: str | None = None,
        title: str | None = None,
        importance: Any = None,
        tags: Sequence[str] | None = None,
        status: str | None = None,
        links: Sequence[Any] | None = None,
        valid_to: Any = None,
        forget: bool = False,
    ) -> UpdateResult:
        """Change, link or archive one of your memories in one transaction.

        Raises:
            NotFound / AmbiguousId: the id does not name one visible memory.
            OwnerForbidden: the memory belongs to another role.
            InvalidInput: a field is malformed.
        """
        target = await self._resolve(memory_id, self.scope("mine"))
        edges = await self._links(links)
        new_importance = IMPORTANCE.parse(importance) if importance is not None else None
        new_tags = clean_labels(list(tags), "tags") if tags is not None else None
        new_valid_to = as_utc(valid_to, "valid_to")
        if content is not None:
            if not isinstance(content, str) or not content.strip():
                raise InvalidInput("content", "is empty.", "Pass the new text, or leave it out.")
            if len(content) > MAX_CONTENT or "\x00" in content:
                raise InvalidInput(
                    "content",
                    "is too long or holds a NUL byte.",
                    f"Keep it under {MAX_CONTENT} plain characters.",
                )
        if status is not None and status not in ("open", "done", "dropped"):
            raise InvalidInput(
                "status", f"'{status}' is not a status.", "Use open, done or dropped."
            )
        new_content = content.strip() if content is not None else None
        new_title = " ".join(title.split()) if title is not None else None

        def text_after(m: MemoryRecord) -> str:
            return _text_of(
                m.title if new_title is None else new_title,
                m.content if new_content is None else new_content,
            )

        memory, _ = await self._fetch(target)
        self._writable(memory)
        # Embed outside the lock; the text is checked again under it (below).
        basis = text_after(memory)
        vector = None
        if basis != _text_of(memory.title, memory.content):
            vector = (await self._embed([basis]))[0]
        changed: list[str] = []
        async with self.store.transaction():
            memory, actr = await self._fetch(target)
            if new_content is not None and new_content != memory.content:
                memory.content = new_content
                changed.append("content")
            if new_title is not None and new_title != memory.title:
                memory.title = new_title
                changed.append("title")
            if "content" not in changed and "title" not in changed:
                vector = None
            elif vector is None or basis != _text_of(memory.title, memory.content):
                # A concurrent update changed the other half of the text since it was
                # embedded: the stored vector must be of the text as it is now saved.
                vector = (await self._embed([_text_of(memory.title, memory.content)]))[0]
            if new_importance is not None and new_importance != memory.importance:
                memory.importance = new_importance
                await self.store.set_authored_importance(target, new_importance)
                changed.append("importance")
            if new_tags is not None and new_tags != memory.tags:
                memory.tags = new_tags
                changed.append("tags")
            if status is not None and status != memory.status:
                if memory.type is not MemoryType.todo:
                    raise InvalidInput(
                        "status",
                        f"only todos have a status; this is a {memory.type.value}.",
                        "Leave status out.",
                    )
                memory.status = status  # type: ignore[assignment]
                changed.append("status")
            if valid_to is not None and new_valid_to != memory.valid_to:
                if memory.valid_from and new_valid_to and new_valid_to < memory.valid_from:
                    raise InvalidInput("valid_to", "is before valid_from.", "Pass a later date.")
                memory.valid_to = new_valid_to
                changed.append("valid_to")
            for other, relation, weight in edges:
                if other == target:
                    raise InvalidInput(
                        "links.target", "a memory cannot link to itself.", "Pick another target."
                    )
                await self.store.add_edge(target, other, relation, weight)
                changed.append(f"link:{relation.value}->{other[:8]}")
            if changed:
                # SPEC §2: an update logs `reinforced` without the strength bump.
                access = self._access(Channel.reinforced)
                actr = self._apply(memory, actr, access, bump_strength=False)
                await self.store.save(memory, actr, vector)
                await self.store.append_accesses([(target, access)])
            if forget and not memory.archived:
                await self._archive(memory, "forgotten")
                changed.append("archived")
        self.index.mark_dirty()
        archived = memory.archived or forget
        reminders = []
        if "content" in changed:
            # SPEC §9: new content is a cue like authored content (an intent never cues itself).
            fired = await self._reminders([(memory.content, vector)], exclude=[target])
            reminders = fired[0]
        return UpdateResult(id=target, changed=changed, archived=archived, reminders=reminders)

    async def _archive(self, memory: MemoryRecord, reason: str) -> None:
        """Archive inside an open transaction and leave a tombstone (SPEC §7)."""
        memory.archived = True
        when = utc_now()
        await self.store.set_archived(memory.id, True, when)
        await self.store.add_tombstone(memory.id, reason, when)

    async def forget(self, memory_id: str, reason: str = "forgotten") -> UpdateResult:
        """Archive a memory (never deleted): recall and spreading skip it from now on.

        Raises:
            NotFound / AmbiguousId / OwnerForbidden: as for `update`.
        """
        target = await self._resolve(memory_id, self.scope("mine"))
        async with self.store.transaction():
            memory, _ = await self._fetch(target)
            self._writable(memory)
            already = memory.archived
            if not already:
                await self._archive(memory, reason)
        self.index.mark_dirty()
        return UpdateResult(id=target, changed=[] if already else ["archived"], archived=True)

    async def link(
        self, memory_id: str, target: str, relation: str, weight: Any = None
    ) -> UpdateResult:
        """Add a typed edge from one of your memories to any memory you can see.

        Raises:
            InvalidInput: unknown relation, bad weight, or a self-link.
            NotFound: either id does not exist in your scope.
        """
        return await self.update(
            memory_id, links=[{"target": target, "relation": relation, "weight": weight}]
        )

    # ------------------------------------------------------------------ reading

    async def get(self, memory_id: str, *, scope: str = "mine") -> MemoryView:
        """One memory with everything derived from it now (no access is logged).

        Raises:
            NotFound / AmbiguousId: the id does not name one memory in the scope.
        """
        scope_obj = self.scope(scope)
        target = await self._resolve(memory_id, scope_obj)
        memory, _ = await self._fetch(target)
        return await self._view_in(memory, scope_obj)

    async def _view_in(self, memory: MemoryRecord, scope: Scope) -> MemoryView:
        """A memory as a reader in `scope` sees it: only edges and references the scope shows.

        References are resolved live without logging deref: reading a record is a look, not
        a use.
        """
        view = self._view(memory, await self._visible_edges(memory.id, scope))
        view.references, _ = await self._resolve_references(memory.references, scope)
        return view

    async def _visible_edges(self, memory_id: str, scope: Scope) -> list[dict]:
        """A memory's outgoing edges whose targets the scope may see (SPEC §10).

        An edge to a hidden memory would name it; it stays in the store for its owner.
        """
        edges = await self.store.edges_of(memory_id)
        if not edges:
            return []
        marks = ",".join("?" * len(edges))
        owners = {
            r["id"]: r["owner"]
            for r in await self.store.rows(
                f"SELECT id, owner FROM memories WHERE id IN ({marks})", [e.target for e in edges]
            )
        }
        return [
            e.model_dump(mode="json")
            for e in edges
            if e.target in owners and scope.allows(owners[e.target])
        ]

    def _view(self, memory: MemoryRecord, edges: list[dict]) -> MemoryView:
        policy = self.settings.forgetting
        now = utc_now()
        stale = memory.valid_to is not None and memory.valid_to < now
        return MemoryView(
            id=memory.id,
            type=memory.type,
            owner=memory.owner,
            title=memory.title,
            content=memory.content,
            importance=memory.importance,
            importance_label=IMPORTANCE.label(memory.importance),
            salience=memory.salience,
            confidence=memory.confidence,
            strength=memory.strength,
            reinforcement_count=memory.reinforcement_count,
            access_count=memory.access_count,
            tags=memory.tags,
            entities=memory.entities,
            place_or_task=memory.place_or_task,
            created_at=memory.created_at,
            last_accessed_at=memory.last_accessed_at,
            valid_from=memory.valid_from,
            valid_to=memory.valid_to,
            archived=memory.archived,
            status=memory.status,
            trigger=memory.trigger.model_dump(mode="json") if memory.trigger else None,
            edges=edges,
            references=[],  # _view_in resolves them for the reader's scope
            channels=memory.channels,
            sizes=memory.sizes,
            retention=round(
                retention(memory.last_accessed_at, memory.strength, now, policy.tau_hours), 4
            ),
            prune_eta=None
            if memory.archived
            else prune_eta(memory.last_accessed_at, memory.strength, policy),
            flags=Flags(stale=stale),
        )

    async def list_memories(
        self,
        *,
        archived: bool | None = False,
        limit: int = 50,
        after: int | None = None,
        type: str | None = None,
        status: str | None = None,
        scope: str = "mine",
    ) -> list[tuple[int, MemoryView]]:
        """Memories in insertion order with their cursor (seq); pass the last seq as `after`."""
        scope_obj = self.scope(scope)
        rows = await self.store.list_memories(
            scope_obj,
            archived=archived,
            type=type,
            status=status,
            after_seq=after,
            limit=max(1, min(limit, 500)),
        )
        return [(row["seq"], await self._view_in(memory_from_row(row), scope_obj)) for row in rows]

    async def access_log(
        self, memory_id: str, *, limit: int = 50, before: int | None = None, scope: str = "mine"
    ) -> list[tuple[int, AccessRecord]]:
        """A memory's accesses from the stream, newest first, with their cursor."""
        target = await self._resolve(memory_id, self.scope(scope))
        stream = await self.store.access_stream(target, max(1, min(limit, 500)), before)
        return [(seq, _redact(record, self.scope(scope))) for seq, _, record in stream]

    async def recent_accesses(
        self, *, limit: int = 50, before: int | None = None, scope: str = "mine"
    ) -> list[tuple[int, str, AccessRecord]]:
        """Store-wide accesses to memories in the scope, newest first."""
        scope_obj = self.scope(scope)
        stream = await self.store.access_stream(
            None, max(1, min(limit, 500)), before, scope=scope_obj
        )
        return [(seq, mid, _redact(record, scope_obj)) for seq, mid, record in stream]

    async def context(self, *, limit: int = 10) -> str:
        """The injection block: open todos, then the most important and most used memories.

        Reading it logs `injected` on each memory shown, which never reinforces (SPEC §2).
        """
        scope = self.scope("mine")
        where, params = scope.sql()
        # Read the rows inside the write transaction: each is saved back whole, and a row read
        # before the lock would write a concurrent update's old values back over it.
        async with self.store.transaction():
            rows = await self.store.rows(
                f"SELECT * FROM memories WHERE {where} AND archived = 0 AND type != 'scratch' "
                "ORDER BY (type = 'todo' AND status = 'open') DESC, importance DESC, "
                "last_accessed_at DESC LIMIT ?",
                [*params, max(1, min(limit, 50))],
            )
            logged = []
            for row in rows:
                memory = memory_from_row(row)
                access = self._access(Channel.injected)
                actr = self._apply(memory, _actr_times(row), access)
                await self.store.save(memory, actr)
                logged.append((memory.id, access))
            if logged:
                await self.store.append_accesses(logged)
        if rows:
            self.index.mark_dirty()
        lines = []
        for row in rows:
            label = row["type"] + (f":{row['status']}" if row["status"] else "")
            lines.append(
                f"- [{row['id'][:8]} {label} {IMPORTANCE.label(row['importance'])}] "
                f"{head(row['title'] or row['content'], 200)}"
            )
        return "\n".join(lines) if lines else "(no memories yet)"

    async def stats(self, *, scope: str = "mine") -> Stats:
        """Counts of memories, edges and accesses in the scope."""
        counts = await self.store.counts(self.scope(scope))
        return Stats(
            total=counts["total"],
            active=counts["total"] - counts["archived"],
            archived=counts["archived"],
            by_type=counts["by_type"],
            by_owner=counts["by_owner"],
            edges=await self.store.count_edges(),
            accesses=await self.store.count_accesses(),
            embeddings=self.embeddings_state,
            store=str(self.store.path),
            extra=await self._kpis(self.scope(scope)),
        )


def _redact(record: AccessRecord, scope: Scope) -> AccessRecord:
    """An access by a reader outside the scope: when and how, but not what they asked.

    A shared memory is read by every role; one role's queries (and the ids of its own
    memories in a deref note) are not another's to read (SPEC §10).
    """
    if scope.allows(record.reader_owner):
        return record
    return record.model_copy(update={"query": None, "session_ref": None, "trace_ref": None})


def _actr_times(row: sqlite3.Row) -> list[float]:
    return json.loads(row["actr_times"])


def _parse_trigger(value: Any) -> Trigger:
    if isinstance(value, Trigger):
        return value
    if not isinstance(value, dict):
        raise InvalidInput(
            "trigger",
            f"{value!r} is not a trigger.",
            "Pass {fire_at: ISO time} and/or {cue: text}, optionally every_hours.",
        )
    fire_at = as_utc(value.get("fire_at"), "trigger.fire_at")
    cue = value.get("cue")
    if cue is not None and (not isinstance(cue, str) or len(cue) > 500):
        raise InvalidInput("trigger.cue", "must be text under 500 characters.", "Shorten it.")
    every = value.get("every_hours")
    if every is not None and (
        isinstance(every, bool) or not isinstance(every, int | float) or not 0 < every <= 24 * 366
    ):
        raise InvalidInput(
            "trigger.every_hours",
            f"{every!r} is not a positive number of hours.",
            "Pass e.g. 24 for daily.",
        )
    if fire_at is None and not (cue or "").strip():
        raise InvalidInput(
            "trigger", "needs fire_at, cue or both.", "Pass {fire_at: ISO time} and/or {cue: text}."
        )
    return Trigger(fire_at=fire_at, cue=cue, every_hours=every)


__all__ = ["Memory", "content_hash"]
