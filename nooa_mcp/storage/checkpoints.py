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

SQLite starts the log again only when a write begins with every frame already copied and no
reader in the log. Writes that follow each other leave it no such moment: each checkpoint
ends while a transaction is open, and that transaction's frames are not yet copied when the
next one begins. The log then grows until the writes pause:
the first reflection pass over a 100k store imported in one go wrote 3.2 GB of log (six times
the file) and left it on disk until the store closed; its index, mapped by every connection,
added 6 MiB to the server's RSS. So once a tick finds the log over `RESTART_PAGES`, the log is
copied to its end and started again, truncated (`restart`): by that tick if the writer lets
it within `RESTART_WAIT_MS`, else by the store's next transaction, which asks for it before it
begins, when no other write of this process can be under way (a busy writer always wins the
lock back from a thread that waits for it). A reader still in the log (a long read of another
process, or of this one: an export, a pass's bulk read) makes both give up, each after its
wait, so a tick that finds the log long can hold the writes back twice, `RESTART_WAIT_MS`
each: the tick's own try holds SQLite's write lock while it waits, and the next transaction
waits for its try. They try again on the next tick. A transaction that finds the tick itself
under way does not wait for its copy: the tick is trying already.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

__all__ = ["CHECKPOINT_SECONDS", "RESTART_PAGES", "RESTART_WAIT_MS", "Checkpointer"]

#: Seconds between two checkpoints. A second of writes is a few MB of log at most through MCP.
CHECKPOINT_SECONDS = 1.0
#: Pages of log (64 MiB at SQLite's 4 KiB pages) from which a tick starts the log again
#: instead of leaving that to a write that may never come at the right moment.
RESTART_PAGES = 16_384
#: Longest a restart of the log waits for the writer and the log's readers (ms); new writes
#: wait meanwhile.
RESTART_WAIT_MS = 20

logger = logging.getLogger(__name__)


class Checkpointer:
    """Checkpoints one store file's WAL from a thread of its own (see the module docstring)."""

    def __init__(
        self, path: Path, every: float | None = None, restart_pages: int | None = None
    ) -> None:
        self.path = path
        self.every = CHECKPOINT_SECONDS if every is None else every
        self.restart_pages = RESTART_PAGES if restart_pages is None else restart_pages
        self.runs = 0
        #: Times a restart of the log was tried (`_restart`), and times it succeeded.
        self.tries = 0
        self.restarts = 0
        #: The last tick found the log over `restart_pages`, and neither it nor a transaction
        #: since has tried to start it again.
        self.long_log = False
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
                _, log, _ = self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                self.runs += 1
                self.long_log = log >= self.restart_pages
                if self.long_log:
                    self._restart()
            except sqlite3.Error:
                # The next tick tries again; the log only waits a little longer.
                logger.debug("checkpointing %s failed", self.path, exc_info=True)

    def restart(self) -> None:
        """Copy the rest of a long log and start it again from its beginning (blocking: the
        store calls it from its next transaction while `long_log`, before it begins).

        Tried once per tick that found the log long: a reader that keeps the log costs the
        writes one wait a tick, not one each. While the tick itself runs it returns at once:
        the tick is copying and tries the restart itself, and the writer (which holds the
        store's write lock while it calls this) would otherwise wait for the whole copy."""
        if not self._lock.acquire(blocking=False):
            return
        try:
            if self._conn is None or not self.long_log:
                return
            try:
                self._restart()
            except sqlite3.Error:
                logger.debug("restarting the log of %s failed", self.path, exc_info=True)
            self.long_log = False
        finally:
            self._lock.release()

    def _restart(self) -> None:
        """TRUNCATE: what is left copied, the log emptied; it waits up to `RESTART_WAIT_MS`
        for the writer and for readers still in the log, and what stays past that leaves
        the log as it was, for the next try."""
        assert self._conn is not None
        self.tries += 1
        self._conn.execute(f"PRAGMA busy_timeout = {RESTART_WAIT_MS}")
        try:
            busy, _, _ = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if not busy:
                self.restarts += 1
                self.long_log = False
        finally:
            self._conn.execute("PRAGMA busy_timeout = 0")

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
