"""Reflection passes started from the console, and their progress as a stream of events.

A pass runs in the console's task group, not in the request that started it, so closing the
tab does not stop it; the page follows it by server-sent events or, without JavaScript, by
reloading itself.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
from anyio.abc import TaskGroup

from .. import Memory, NooaError

KEEP = 32


@dataclass
class Run:
    id: str
    owner: str
    started_at: datetime
    done: int = 0
    total: int = 0
    message: str = "starting"
    status: str = "running"  # running | completed | interrupted | already-running | failed
    report: Any = None
    error: str = ""
    changed: anyio.Event = field(default_factory=anyio.Event)

    @property
    def finished(self) -> bool:
        return self.status != "running"

    def snapshot(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "done": self.done,
            "total": self.total,
            "message": self.message,
            "status": self.status,
            "error": self.error,
        }

    def _notify(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()


class Runs:
    """The latest passes per console, each visible only to the owner who started it."""

    def __init__(self) -> None:
        self._runs: OrderedDict[str, Run] = OrderedDict()
        self._tasks: TaskGroup | None = None

    def attach(self, tasks: TaskGroup | None) -> None:
        self._tasks = tasks

    def get(self, run_id: str, owner: str) -> Run | None:
        run = self._runs.get(run_id)
        return run if run is not None and run.owner == owner else None

    def active(self, owner: str) -> Run | None:
        return next((r for r in self._runs.values() if r.owner == owner and not r.finished), None)

    def start(self, memory: Memory, steps: list[str] | None) -> Run:
        if self._tasks is None:
            raise RuntimeError("the console is not running (enter Console.running() first)")
        running = self.active(memory.owner)
        if running is not None:
            return running
        run = Run(secrets.token_urlsafe(9), memory.owner, datetime.now(UTC))
        self._runs[run.id] = run
        while len(self._runs) > KEEP:
            self._runs.popitem(last=False)
        self._tasks.start_soon(_reflect, run, memory, steps, name=f"console reflect {run.id}")
        return run

    async def events(self, run: Run) -> AsyncIterator[dict[str, Any]]:
        """The run's state now, then after every change, ending with the finished state."""
        while True:
            changed = run.changed
            yield run.snapshot()
            if run.finished:
                return
            await changed.wait()


async def _reflect(run: Run, memory: Memory, steps: list[str] | None) -> None:
    async def progress(done: int, total: int, message: str) -> None:
        run.done, run.total, run.message = done, total, message
        run._notify()

    try:
        report = await memory.reflect(steps, progress=progress)
        run.report = report
        run.status = report.status
        run.message = f"{report.applied} changes"
    except NooaError as exc:
        run.status, run.error = "failed", str(exc)
    except BaseException:
        run.status, run.error = "interrupted", "the console stopped during the pass"
        raise
    finally:
        run._notify()
