"""LoCoMo where time passes: the shipped maintenance runs years after the conversations.

The four ingest/ask cells ask every question right after the turns go in, so forgetting never
gets a chance to matter. These cells let time pass, through the product's own interfaces:

- **pass now**: the turns imported with their real dates (2023), then one pass of the shipped
  maintenance (`nooa-mcp reflect`: merge, link, rescore, prune) at the real now, years later,
  then every question (memory_recall, live; memory_explain, a dry run). Decay counts from when
  the store learned a turn (the import), not from its date, so this should score as the
  no-pass cell does.
- **a year unused**: the same store, but the pass and the questions a year after the import,
  with nothing asked meanwhile: prune fades every turn, and the answers come from the archive
  tier (flagged faded).
- **clock**: a simulated clock from the first session to the real now. Each session is imported
  on its date (learned then), a pass runs at the start of every month, and a simulated user asks
  half the questions, each in a month drawn after its evidence was said; the other half are
  asked at the real now and scored. Beside it, the no-pass cell on the same held-out half.

The clock is moved for the whole process with time-machine, so every part of the product (the
store, the scorer, reflection) sees the same time; nothing in the product is told about it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import time_machine
from mcp import Client
from mcp_types import CallToolResult, Implementation, TextContent

from ..config import Settings
from ..embeddings import Embedder
from ..mcp.server import build_server
from ..memory import Memory
from .locomo import Conversation, Question

__all__ = [
    "CLOCK",
    "HELD_OUT",
    "TIME_CELLS",
    "YEAR",
    "ClockPlan",
    "month_starts",
    "pass_at",
    "plan_clock",
    "recall_ids",
    "run_clock",
    "travel",
]

#: The time cells, in the order the table prints them.
CLOCK = "clock"
#: The no-pass cell scored on the clock's held-out questions only, for comparison.
HELD_OUT = "no pass, held out"
TIME_CELLS: tuple[str, ...] = ("pass now", "a year unused", CLOCK, HELD_OUT)
#: How long "a year unused" waits after the import.
YEAR = timedelta(days=365)


def travel(at: datetime | None) -> AbstractContextManager[Any]:
    """The whole process at `at` with the clock running (None: the real now)."""
    return nullcontext() if at is None else time_machine.travel(at, tick=True)


async def pass_at(
    store: Path, embedder: Embedder, base: Settings, at: datetime | None
) -> tuple[int, int]:
    """One pass of the shipped maintenance over `store`, as `nooa-mcp reflect` runs it;
    returns the memories archived and in all afterwards (`nooa-mcp stats`)."""
    settings = base.model_copy(update={"store": store})
    with travel(at):
        async with Memory.open(settings=settings, embedder=embedder) as mem:
            await mem.wait_ready()
            await mem.reflect()
            stats = await mem.stats()
    return stats.archived, stats.total


def month_starts(first: datetime, last: datetime) -> list[datetime]:
    """The first instant of every month after `first`'s, up to `last`."""
    out: list[datetime] = []
    year, month = first.year, first.month
    while True:
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
        start = datetime(year, month, 1, tzinfo=UTC)
        if start > last:
            return out
        out.append(start)


@dataclass(frozen=True)
class ClockPlan:
    """Who asks what when on the simulated clock: question index -> the month it is asked
    in, and the held-out questions (indexes) asked at the end and scored."""

    months: list[datetime]
    asked: dict[int, datetime]
    held_out: list[int]


def plan_clock(conv: Conversation, now: datetime, seed: int = 0) -> ClockPlan:
    """Half the questions (drawn with `seed`) are the simulated user's, each asked in a month
    drawn among those after all its evidence was said; the rest are held out."""
    months = month_starts(min(conv.session_dates.values()), now)
    rng = random.Random(f"{seed}/{conv.sample_id}")
    n = len(conv.questions)
    users = set(rng.sample(range(n), n // 2))
    asked: dict[int, datetime] = {}
    for i in sorted(users):
        said = _evidence_date(conv, conv.questions[i])
        later = [m for m in months if m > said]
        if later:
            asked[i] = rng.choice(later)
    held = [i for i in range(n) if i not in asked]
    return ClockPlan(months, asked, held)


def _evidence_date(conv: Conversation, q: Question) -> datetime:
    sessions = {int(e[1:].split(":")[0]) for e in q.evidence}
    return max(conv.session_dates[s] for s in sessions)


def tool_error_text(result: CallToolResult) -> str:
    """The text a tool answered with when it refused (its first text block)."""
    return " ".join(block.text for block in result.content if isinstance(block, TextContent))


def structured(result: CallToolResult) -> dict[str, Any]:
    """A tool's structured reply (every nooa-mcp tool gives one when it succeeds)."""
    if result.structured_content is None:
        raise RuntimeError(f"the tool gave no structured reply: {tool_error_text(result)}")
    return result.structured_content


async def recall_ids(client: Client, question: str, depth: int) -> list[str]:
    """The memory ids memory_recall returns for `question`, live (the recall is a use)."""
    result = await client.call_tool("memory_recall", {"query": question, "k": depth})
    if result.is_error:
        raise RuntimeError(f"memory_recall failed: {tool_error_text(result)}")
    return [hit["id"] for hit in structured(result)["hits"]]


async def run_clock(
    store: Path,
    conv: Conversation,
    embedder: Embedder,
    base: Settings,
    sessions: dict[int, list[dict[str, Any]]],
    plan: ClockPlan,
    tick: Callable[[int], Any],
    *,
    client_name: str,
    depth: int,
) -> tuple[list[list[str]], tuple[int, int]]:
    """Play the clock: each session imported on its date, a pass at every month's start, the
    user's questions in their months (memory_recall, live). Returns the memory ids ranked for
    each held-out question, asked at the real now, and the memories archived and in all when
    they are asked. `sessions`: session -> its import lines."""
    settings = base.model_copy(update={"store": store})
    events: list[tuple[datetime, int, str, int]] = [
        (date, 0, "session", n) for n, date in conv.session_dates.items()
    ]
    events += [(month, 1, "pass", 0) for month in plan.months]
    events += [(m + timedelta(hours=12), 2, "ask", i) for i, m in plan.asked.items()]
    events.sort()
    info = Implementation(name=client_name, version="1")
    async with Memory.open(settings=settings, embedder=embedder) as mem:
        await mem.wait_ready()
        server = build_server(settings, engine=mem.engine)
        async with Client(server, client_info=info, raise_exceptions=True) as client:
            for when, _, kind, what in events:
                with travel(when):
                    if kind == "session":
                        await mem.import_records(list(enumerate(sessions[what], 1)))
                        tick(len(sessions[what]))
                    elif kind == "pass":
                        await mem.reflect()
                    else:
                        await recall_ids(client, conv.questions[what].text, depth)
                        tick(1)
            stats = await mem.stats()
            ranked = []
            for i in plan.held_out:
                ranked.append(await recall_ids(client, conv.questions[i].text, depth))
                tick(1)
    return ranked, (stats.archived, stats.total)
