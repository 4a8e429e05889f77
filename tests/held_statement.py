"""A SQLite statement a test can hold under way: the moment it starts is an event to wait on."""

from __future__ import annotations

import threading

import anyio


class Held:
    """A statement (`SELECT held()`) that stays under way until released: the moment it has
    started is an event the test waits on, instead of a sleep that assumes it."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def _held(self) -> int:
        self.started.set()
        self.release.wait(120)  # a hung job's guard: a test that fails still ends
        return 1

    async def install(self, conn) -> None:
        await conn.create_function("held", 0, self._held)

    async def wait_started(self) -> None:
        with anyio.fail_after(60):  # a hung job's guard, not a timing
            while not self.started.is_set():
                await anyio.sleep(0.01)
