"""The LoCoMo retrieval run: the product as shipped, through its own interface.

Each conversation goes into a fresh store by one of two paths:

- **tool** (the default): every turn through the `memory_author` tool of a real MCP server,
  one call per turn, speaker as entity, with the shipped defaults and background maintenance
  running as it does in production (a reflection pass every 200 writes);
- **import**: the turns as `nooa-mcp import` takes them: dated by their session, with
  `precedes` edges between consecutive turns of a session.

Questions are asked through `memory_recall` (**recall**, live: every recall logs its accesses,
so earlier questions shape later ones, as in use) or `memory_explain` (**explain**, a dry run).
The four cells (tool/import × recall/explain) are reported for the shipped scorer; the
ablations run on the chosen path. Live variants each get their own copy of the ingested store.
"""

from __future__ import annotations

import itertools
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp_types import Implementation

from ..config import Settings
from ..domain.schema import now as utc_now
from ..embeddings import Embedder
from ..engine import Engine
from ..mcp.server import build_server
from ..memory import Memory
from ..storage import copy_store
from .grep import GrepIndex, write_markdown
from .locomo import CATEGORY_NAMES, Conversation, load_locomo
from .metrics import QuestionScore, Summary, score_question, summarise
from .timeline import (
    CLOCK,
    HELD_OUT,
    YEAR,
    pass_at,
    plan_clock,
    run_clock,
    structured,
    tool_error_text,
    travel,
)
from .variants import ASKS, INGESTS, VARIANTS, Variant, rrf_fuse

__all__ = ["ASKS", "INGESTS", "EvalReport", "run_locomo", "total_steps"]

#: The tool path's owner comes from the client's name, as for any MCP client.
CLIENT = "locomo-eval"
#: Depth of every ranking: R@10 and MRR@10 need 10; RRF fuses deeper lists.
DEPTH = 10
FUSION_DEPTH = 50


@dataclass
class EvalReport:
    """Metrics of every variant over the questions of a LoCoMo file."""

    file: str
    conversations: int
    questions: int
    skipped_questions: int
    turns: int
    memories: int
    ingest: str
    ask: str
    variants: list[Variant]
    summaries: dict[str, Summary]
    cells: dict[tuple[str, str], Summary]
    settings: dict[str, Any]
    elapsed_s: float
    per_conversation: dict[str, dict[str, Summary]] = field(default_factory=dict)
    #: The cells where time passes (`timeline`), by (cell, ask).
    time_cells: dict[tuple[str, str], Summary] = field(default_factory=dict)
    #: Per time cell, the memories archived and in all when its questions were asked.
    forgotten: dict[str, tuple[int, int]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "conversations": self.conversations,
            "questions": self.questions,
            "skipped_questions": self.skipped_questions,
            "turns": self.turns,
            "memories": self.memories,
            "ingest": self.ingest,
            "ask": self.ask,
            "metric_definition": (
                "R@k: a question is a hit when any of its evidence turns is in the top k; "
                "MRR: 1/rank of the first evidence turn within the top 10, else 0; "
                "evidence_R@k: fraction of a question's evidence turns in the top k."
            ),
            "categories": {str(k): v for k, v in CATEGORY_NAMES.items() if k != 5},
            "cells": {
                f"{ingest}/{ask}": summary.as_dict()
                for (ingest, ask), summary in self.cells.items()
            },
            "time_cells": {
                f"{cell}/{ask}": summary.as_dict()
                for (cell, ask), summary in self.time_cells.items()
            },
            "forgotten_share": {
                cell: round(a / t, 4) if t else 0.0 for cell, (a, t) in self.forgotten.items()
            },
            "variants": {
                v.name: {"description": v.description, **self.summaries[v.name].as_dict()}
                for v in self.variants
            },
            "settings": self.settings,
            "elapsed_s": round(self.elapsed_s, 1),
        }

    def table(self) -> str:
        """The four cells, then every variant with R@5 / MRR per category, as text."""
        cats = sorted({c for s in self.summaries.values() for c in s.by_category})
        lines = [
            f"LoCoMo {self.file}: {self.conversations} conversations, {self.turns} turns, "
            f"{self.memories} memories, {self.questions} questions ({self.skipped_questions} "
            f"skipped: category 5 or no evidence), {self.elapsed_s:.0f} s",
            "",
        ]
        if self.cells:
            lines += [
                "shipped scorer, R@5 / R@10 / MRR   ask: recall (live)      explain (dry run)",
                "-" * 76,
            ]
            for ingest in INGESTS:
                parts = []
                for ask in ASKS:
                    s = self.cells.get((ingest, ask))
                    parts.append(
                        f"{s.recall[5]:.3f} {s.recall[10]:.3f} {s.mrr:.3f}" if s else "-" * 17
                    )
                label = "tool  (memory_author)" if ingest == "tool" else "import (dated, edges)"
                lines.append(f"ingest {label:<28} {parts[0]:<23} {parts[1]}")
            lines.append("")
        if self.time_cells:
            lines += [*self._time_table(), ""]
        head = f"{'variant':<12} {'R@5':>6} {'R@10':>6} {'MRR':>6} {'evR@5':>6}  "
        head += "  ".join(f"{CATEGORY_NAMES.get(c, str(c))[:11]:>11}" for c in cats)
        lines += [
            f"variants on ingest {self.ingest}, ask {self.ask}; per category R@5/MRR; n = "
            + ", ".join(
                f"{CATEGORY_NAMES.get(c, c)} {next(iter(self.summaries.values())).by_category[c].n}"
                for c in cats
            ),
            "",
            head,
            "-" * len(head),
        ]
        for v in self.variants:
            s = self.summaries[v.name]
            row = f"{v.name:<12} {s.recall[5]:6.3f} {s.recall[10]:6.3f} {s.mrr:6.3f} "
            row += f"{s.evidence_recall[5]:6.3f}  "
            row += "  ".join(
                f"{s.by_category[c].recall[5]:5.3f}/{s.by_category[c].mrr:5.3f}"
                if c in s.by_category
                else f"{'-':>11}"
                for c in cats
            )
            lines.append(row)
        lines += ["", *(f"{v.name:<12} {v.description}" for v in self.variants)]
        return "\n".join(lines)

    def _time_table(self) -> list[str]:
        """The cells where time passes, beside the no-pass cell they start from."""

        def cell(s: Summary | None) -> str:
            if s is None:
                return ""
            return f"{s.recall[5]:.3f} {s.recall[10]:.3f} {s.mrr:.3f} {s.evidence_recall[5]:.3f}"

        def share(name: str) -> str:
            archived, total = self.forgotten.get(name, (0, 0))
            return f"{archived / total:.3f}" if total else ""

        get = self.time_cells.get
        rows = [
            ("no pass", "", get(("no pass", "recall")), self.cells.get(("import", "explain"))),
            (
                "a pass at the real now",
                "pass now",
                get(("pass now", "recall")),
                get(("pass now", "explain")),
            ),
            (
                "a pass a year on, nothing asked",
                "a year unused",
                get(("a year unused", "recall")),
                None,
            ),
            ("clock: monthly passes, held out", CLOCK, get((CLOCK, "recall")), None),
            ("no pass, the same held-out half", "", get((HELD_OUT, "recall")), None),
        ]
        out = [
            "time passes (ingest import: turns with their dates; R@5 R@10 MRR evR@5; forgotten: "
            "archived share when asked)",
            f"{'':<33} {'forgotten':>9}  {'ask: recall (live)':<24} explain (dry run)",
            "-" * 94,
        ]
        for label, name, live, dry in rows:
            out.append(f"{label:<33} {share(name):>9}  {cell(live):<24} {cell(dry)}".rstrip())
        held = get((CLOCK, "recall"))
        if held is not None:
            out.append(
                "clock: from the first session to now, each session imported on its date, a "
                f"pass each month; the user asks half the questions in months after they were "
                f"said, the other {held.n} are asked now."
            )
        return out


def total_steps(
    conversations: Sequence[Conversation],
    variants: Sequence[Variant],
    cells: bool = True,
    time_cells: bool = False,
    ingest: str = "tool",
    ask: str = "recall",
) -> int:
    """Progress units of a run: one per ingested turn and one per question asked."""
    turns = sum(len(c.turns) for c in conversations)
    questions = sum(len(c.questions) for c in conversations)
    ingests = len(INGESTS) if cells else 1
    asks = len(variants) + (len(INGESTS) * len(ASKS) - 1 if cells else 0)
    total = turns * ingests + questions * asks
    if time_cells:
        # pass now (explain, recall), a year unused, the clock (its turns, every question).
        total += turns + 4 * questions
        if not cells and ingest != "import":
            total += turns + questions  # the import store and its no-pass recall
        elif not cells and ask != "recall":
            total += questions  # the no-pass recall
    return total


def variant_settings(base: Settings, variant: Variant) -> Settings:
    """`base` with the variant's recall overrides applied (validated by pydantic)."""
    recall = base.recall.model_copy(update=variant.recall)
    return base.model_copy(update={"recall": type(base.recall).model_validate(recall)})


# --------------------------------------------------------------------------- ingest


async def _ingest_tool(
    store: Path, conv: Conversation, embedder: Embedder, base: Settings, tick: Callable[[int], Any]
) -> dict[str, list[str]]:
    """Every turn through memory_author, one call each; background maintenance as shipped."""
    settings = base.model_copy(update={"store": store})
    turns_of: dict[str, list[str]] = {}
    async with Engine.open(settings, embedder) as engine:
        server = build_server(settings, engine=engine)
        info = Implementation(name=CLIENT, version="1")
        async with Client(server, client_info=info, raise_exceptions=True) as client:
            for turn in conv.turns:
                result = await client.call_tool(
                    "memory_author", {"content": turn.content, "entities": [turn.speaker]}
                )
                if result.is_error:
                    raise RuntimeError(f"memory_author failed: {tool_error_text(result)}")
                turns_of.setdefault(structured(result)["id"], []).append(turn.dia_id)
                tick(1)
            await _settle(engine)
    return turns_of


async def _settle(engine: Engine) -> None:
    """Let the passes that the writes started finish, as a long-running server would."""
    every = engine.settings.reflect_every_writes
    with anyio.fail_after(600):
        while any(
            state.reflect_lock.locked() or (every and state.writes >= every)
            for state in engine.roles.values()
        ):
            await anyio.sleep(0.05)


def import_lines(conv: Conversation) -> list[dict[str, Any]]:
    """The turns as `nooa-mcp import` lines: dated by their session, ids fixed by the turn,
    `precedes` edges between consecutive turns of a session, so activation spreads
    from a turn that matches the question to the reply that follows it."""
    specs = [turn.memory_spec() for turn in conv.turns]
    ids = [uuid.uuid5(uuid.NAMESPACE_URL, f"{conv.sample_id}/{t.dia_id}").hex for t in conv.turns]
    for spec, memory_id in zip(specs, ids, strict=True):
        spec["id"] = memory_id
    for (t1, spec), (t2, nxt) in itertools.pairwise(zip(conv.turns, specs, strict=True)):
        if t1.session == t2.session:
            spec["edges"] = [{"target": nxt["id"], "type": "precedes", "weight": 1.0}]
    return specs


async def _ingest_import(
    store: Path, conv: Conversation, embedder: Embedder, base: Settings, tick: Callable[[int], Any]
) -> dict[str, list[str]]:
    """The turns as `nooa-mcp import` takes them: dated, with `precedes` edges per session."""
    settings = base.model_copy(update={"store": store})
    specs = import_lines(conv)
    async with Memory.open(settings=settings, embedder=embedder) as mem:
        await mem.wait_ready()
        imported = await mem.import_records(list(enumerate(specs, 1)), tick=tick)
    turns_of: dict[str, list[str]] = {}
    for memory_id, turn in zip(imported.ids, conv.turns, strict=True):
        turns_of.setdefault(memory_id, []).append(turn.dia_id)
    return turns_of


# --------------------------------------------------------------------------- ask


async def _ask(
    store: Path,
    conv: Conversation,
    embedder: Embedder,
    settings: Settings,
    ask: str,
    depth: int,
    tick: Callable[[int], Any],
) -> list[list[str]]:
    """Every question through memory_recall (live) or memory_explain (dry run)."""
    settings = settings.model_copy(update={"store": store})
    out: list[list[str]] = []
    async with Engine.open(settings, embedder) as engine:
        await engine.wait_ready()
        server = build_server(settings, engine=engine)
        info = Implementation(name=CLIENT, version="1")
        async with Client(server, client_info=info, raise_exceptions=True) as client:
            for q in conv.questions:
                if ask == "recall":
                    result = await client.call_tool("memory_recall", {"query": q.text, "k": depth})
                    rows = structured(result)["hits"]
                else:
                    result = await client.call_tool("memory_explain", {"query": q.text, "k": depth})
                    rows = structured(result)["rows"]
                out.append([row["id"] for row in rows])
                tick(1)
    return out


def _grep_rankings(conv: Conversation, workdir: Path) -> list[list[str]]:
    sessions = [
        (
            f"Session {n} — {date:%d %B %Y}",
            [(t.dia_id, t.content) for t in conv.turns if t.session == n],
        )
        for n, date in sorted(conv.session_dates.items())
    ]
    index = GrepIndex.from_markdown(write_markdown(workdir / f"{conv.sample_id}.md", sessions))
    return [index.search(q.text, DEPTH) for q in conv.questions]


# --------------------------------------------------------------------------- run


@dataclass
class _Ingested:
    """One conversation's ingested stores, asked under any variant."""

    conv: Conversation
    stores: dict[str, Path]
    turns_of: dict[str, dict[str, list[str]]]
    root: Path
    base: Settings
    embedder: Embedder
    tick: Callable[[int], Any]

    async def rank(self, way: str, how: str, variant: Variant, depth: int) -> list[list[str]]:
        """Turn ids ranked per question, by ingest path `way`, asked by `how`."""
        store = self.stores[way]
        if how == "recall":  # live: each variant on its own copy
            store = self.root / f"{self.conv.sample_id}-{way}-{variant.name}.sqlite"
            await copy_store(self.stores[way], store)
        settings = variant_settings(self.base, variant)
        ids = await _ask(store, self.conv, self.embedder, settings, how, depth, self.tick)
        return [[t for i in r for t in self.turns_of[way].get(i, [])] for r in ids]


def _scored(
    conv: Conversation, rankings: list[list[str]], which: Sequence[int] | None = None
) -> list[QuestionScore]:
    """Scores of the questions `which` (indexes; all by default), ranked in that order."""
    questions = conv.questions if which is None else [conv.questions[i] for i in which]
    return [
        score_question(ranked[:DEPTH], q.evidence, q.category)
        for q, ranked in zip(questions, rankings, strict=True)
    ]


async def _time_cells(
    ing: _Ingested, no_pass: list[list[str]], now: datetime
) -> tuple[dict[tuple[str, str], list[QuestionScore]], dict[str, tuple[int, int]]]:
    """The cells where time passes (`timeline`), for one conversation ingested by import:
    the scores per (cell, ask), and per cell the memories archived and in all when asked."""
    conv, root, sid = ing.conv, ing.root, ing.conv.sample_id
    out: dict[tuple[str, str], list[QuestionScore]] = {
        ("no pass", "recall"): _scored(conv, no_pass)
    }
    archived: dict[str, tuple[int, int]] = {}

    def to_turns(ids: list[list[str]]) -> list[list[str]]:
        return [[t for i in r for t in ing.turns_of["import"].get(i, [])] for r in ids]

    async def asked(store: Path, how: str, at: datetime | None) -> list[list[str]]:
        with travel(at):
            ids = await _ask(store, conv, ing.embedder, ing.base, how, DEPTH, ing.tick)
        return to_turns(ids)

    passed = root / f"{sid}-pass-now.sqlite"
    await copy_store(ing.stores["import"], passed)
    archived["pass now"] = await pass_at(passed, ing.embedder, ing.base, None)
    # The dry run first: it changes nothing the live recall then reads.
    for how in ("explain", "recall"):
        out[("pass now", how)] = _scored(conv, await asked(passed, how, None))
    unused = root / f"{sid}-a-year-unused.sqlite"
    await copy_store(ing.stores["import"], unused)
    archived["a year unused"] = await pass_at(unused, ing.embedder, ing.base, now + YEAR)
    out[("a year unused", "recall")] = _scored(conv, await asked(unused, "recall", now + YEAR))
    plan = plan_clock(conv, now)
    sessions: dict[int, list[dict[str, Any]]] = {}
    for turn, line in zip(conv.turns, import_lines(conv), strict=True):
        sessions.setdefault(turn.session, []).append(line)
    clock = root / f"{sid}-clock.sqlite"
    ranked, archived[CLOCK] = await run_clock(
        clock,
        conv,
        ing.embedder,
        ing.base,
        sessions,
        plan,
        ing.tick,
        client_name=CLIENT,
        depth=DEPTH,
    )
    out[(CLOCK, "recall")] = _scored(conv, to_turns(ranked), plan.held_out)
    out[(HELD_OUT, "recall")] = _scored(conv, [no_pass[i] for i in plan.held_out], plan.held_out)
    return out, archived


async def run_locomo(
    path: str | Path,
    *,
    embedder: Embedder | None = None,
    variants: Sequence[Variant] = VARIANTS,
    settings: Settings | None = None,
    conversations: Sequence[Conversation] | None = None,
    workdir: Path | None = None,
    progress: Callable[[int], None] | None = None,
    ingest: str = "tool",
    ask: str = "recall",
    cells: bool = True,
    time_cells: bool = True,
) -> EvalReport:
    """Run every variant over every evaluable question of the LoCoMo file at `path`.

    Args:
        path: the LoCoMo JSON file (read by path, never copied).
        embedder: the embedding model; None loads the bundled MiniLM once for the whole run.
        variants: which rankings to compute (RRF needs cosine-only and bm25-only among them).
        settings: base settings (the shipped defaults when None); variants override recall.
        conversations: already-parsed conversations (skips reading `path`).
        workdir: where the temporary stores go; a fresh temporary directory by default.
        progress: called with a number of finished steps (see `total_steps`).
        ingest, ask: the path the variants run on (tool or import; recall or explain).
        cells: also run the shipped scorer on the other three paths (the four-cell table).
        time_cells: also run the cells where time passes (`timeline`) on the import path.

    Raises:
        InvalidInput: the file is not a LoCoMo file.
    """
    started = time.perf_counter()
    convs = list(conversations) if conversations is not None else load_locomo(path)
    tick = progress or (lambda n: None)
    if embedder is None:
        from ..embeddings import MiniLMEmbedder

        embedder = MiniLMEmbedder()
    base = settings or Settings()
    names = {v.name for v in variants}
    needs = {"cosine-only", "bm25-only"} if "rrf" in names else set()
    full = next((v for v in variants if v.name == "full"), Variant("full", "shipped"))
    scores: dict[str, list[QuestionScore]] = {v.name: [] for v in variants}
    cell_scores: dict[tuple[str, str], list[QuestionScore]] = {}
    time_scores: dict[tuple[str, str], list[QuestionScore]] = {}
    forgotten: dict[str, tuple[int, int]] = {}
    real_now = utc_now()
    per_conv: dict[str, dict[str, Summary]] = {}
    memories = 0
    ingestors = {"tool": _ingest_tool, "import": _ingest_import}
    with tempfile.TemporaryDirectory(prefix="nooa-locomo-", dir=workdir) as tmp:
        root = Path(tmp)
        for conv in convs:
            paths = INGESTS if cells else (ingest,)
            if time_cells and "import" not in paths:
                paths = (*paths, "import")
            stores: dict[str, Path] = {}
            turns_of: dict[str, dict[str, list[str]]] = {}
            for way in paths:
                stores[way] = root / f"{conv.sample_id}-{way}.sqlite"
                turns_of[way] = await ingestors[way](stores[way], conv, embedder, base, tick)
            memories += len(turns_of[ingest])

            ingested = _Ingested(conv, stores, turns_of, root, base, embedder, tick)
            rankings: dict[str, list[list[str]]] = {}
            for v in variants:
                if v.kind == "memory" or v.name in needs:
                    depth = FUSION_DEPTH if v.name in needs else DEPTH
                    rankings[v.name] = await ingested.rank(ingest, ask, v, depth)
                elif v.kind == "rrf":
                    pairs = zip(rankings["cosine-only"], rankings["bm25-only"], strict=True)
                    rankings[v.name] = [rrf_fuse([a, b]) for a, b in pairs]
                    tick(len(conv.questions))
                else:
                    rankings[v.name] = _grep_rankings(conv, root)
                    tick(len(conv.questions))
            done: dict[tuple[str, str], list[list[str]]] = {}
            if "full" in rankings:
                done[(ingest, ask)] = rankings["full"]
            if cells:
                for way in INGESTS:
                    for how in ASKS:
                        if (way, how) not in done:
                            done[(way, how)] = await ingested.rank(way, how, full, DEPTH)
                        cell_scores.setdefault((way, how), []).extend(
                            _scored(conv, done[(way, how)])
                        )
            if time_cells:
                no_pass = done.get(("import", "recall"))
                if no_pass is None:
                    no_pass = await ingested.rank("import", "recall", full, DEPTH)
                got, archived = await _time_cells(ingested, no_pass, real_now)
                for key, part in got.items():
                    time_scores.setdefault(key, []).extend(part)
                for cell, (n_archived, n_total) in archived.items():
                    a, t = forgotten.get(cell, (0, 0))
                    forgotten[cell] = (a + n_archived, t + n_total)
            per_conv[conv.sample_id] = {}
            for v in variants:
                conv_scores = _scored(conv, rankings[v.name])
                scores[v.name] += conv_scores
                per_conv[conv.sample_id][v.name] = summarise(conv_scores)
    return EvalReport(
        file=str(path),
        conversations=len(convs),
        questions=sum(len(c.questions) for c in convs),
        skipped_questions=sum(c.skipped_questions for c in convs),
        turns=sum(len(c.turns) for c in convs),
        memories=memories,
        ingest=ingest,
        ask=ask,
        variants=list(variants),
        summaries={name: summarise(s) for name, s in scores.items()},
        cells={key: summarise(s) for key, s in cell_scores.items()},
        time_cells={key: summarise(s) for key, s in time_scores.items()},
        forgotten=forgotten,
        settings=base.recall.model_dump(),
        elapsed_s=time.perf_counter() - started,
        per_conversation=per_conv,
    )
