"""WAL checkpoints off the path a client waits on.

SQLite copies the write-ahead log back into the database file when a commit finds the log over
1,000 pages (`wal_autocheckpoint`). That commit then holds the store's one connection for the
copy and its fsyncs; on a server it is usually the access log written right after a recall's
reply, so the next call's reads wait behind the copy: at 100k memories that showed in the
p99 and worst recall times, not in the median (BENCHMARKS.md).

So a writable store turns the automatic checkpoint off on its connection and a `Checkpointer`
thread, with a connection of its own, checkpoints once a second. PASSIVE mode never waits for a
lock and never blocks a reader or a writer (of this process or another): what it cannot copy
now it copies on a later tick, and SQLite starts the log from its beginning again once all of it
was copied. The automatic checkpoint is turned off only once the thread's connection is open,
and when the store closes the thread stops after one last checkpoint, so the log is never left
to grow without one.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

__all__ = ["CHECKPOINT_SECONDS", "Checkpointer"]

#: Seconds between two checkpoints. A second of writes is a few MB of log at most through MCP.
CHECKPOINT_SECONDS = 1.0

logger = logging.getLogger(__name__)


class Checkpointer:
    """Checkpoints one store file's WAL from a thread of its own (see the module docstring)."""

    def __init__(self, path: Path, every: float | None = None) -> None:
        self.path = path
        self.every = CHECKPOINT_SECONDS if every is None else every
        self.runs = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._thread = threading.Thread(target=self._loop, name="nooa-checkpoint", daemon=True)

    def start(self) -> None:
        """Open the thread's connection and start it (blocking: call off the event loop).

        Raises:
            sqlite3.Error: the file cannot be opened a second time.
            RuntimeError: no thread could be started.
        """
        self._conn = sqlite3.connect(
            str(self.path), timeout=0, isolation_level=None, check_same_thread=False
        )
        try:
            self._thread.start()
        except RuntimeError:
            self._conn.close()
            self._conn = None
            raise

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def checkpoint(self) -> None:
        """Copy what the log holds into the file now, as far as readers allow (blocking)."""
        with self._lock:
            if self._conn is None:
                return
            try:
                self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                self.runs += 1
            except sqlite3.Error:
                # The next tick tries again; the log only waits a little longer.
                logger.debug("checkpointing %s failed", self.path, exc_info=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.checkpoint()
        self.checkpoint()  # the last one, as the store closes

    def stop(self) -> None:
        """Stop the thread after one last checkpoint and close its connection (blocking)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
