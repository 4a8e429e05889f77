"""Hooks through the Memory facade: the server's route, and stores the quick path cannot read.

The server calls `injected_text` with its own engine (model loaded, index warm). A hook process
whose store is PostgreSQL (or a SQLite file of another schema version) calls `inject`, which
opens the store without loading the model: keywords and cues only, and a slow start (the whole
package is imported), but the same rule and the same logging.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import anyio
import numpy as np

from ..config import Settings
from ..domain.injection import render_prompt, render_session
from ..embeddings import MiniLMEmbedder
from ..memory import Memory

__all__ = ["NoModel", "inject", "injected_text", "within"]


class NoModel:
    """The bundled model's name and size, never loaded: this process ranks by keywords.

    A hook must answer in well under a second; loading the model takes longer than that. Its
    `ready` is False, so the engine neither waits for it nor embeds with it.
    """

    name = MiniLMEmbedder.name
    dim = MiniLMEmbedder.dim
    ready = False

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        raise RuntimeError("this hook process does not load the embedding model")


async def injected_text(memory: Memory, event: str, project: str, prompt: str) -> str:
    """Inject for one hook event and render the block ("" when there is nothing)."""
    if event == "session-start":
        got = await memory.inject_at_start(project)
        return render_session(
            project, got.todos, got.open_todos, got.reminders, got.memories, got.labelled
        )
    got = await memory.inject_for_prompt(prompt)
    return render_prompt(got.reminders, got.memories)


def within(url: str, seconds: float) -> str:
    """A PostgreSQL URL whose connections give up after `seconds`: `connect_timeout` (whole
    seconds, at least libpq's 2) and `statement_timeout`, which also bounds a wait on a lock.
    The URL's other parameters, and its own `options` (a search_path), are kept."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    ms = max(1, int(seconds * 1000))
    options = [v for k, v in query if k == "options"] + [f"-c statement_timeout={ms}"]
    kept = [(k, v) for k, v in query if k not in ("options", "connect_timeout")]
    kept += [("connect_timeout", str(max(2, math.ceil(seconds)))), ("options", " ".join(options))]
    return urlunsplit(parts._replace(query=urlencode(kept, quote_via=quote)))


def inject(
    event: str,
    store: str,
    owner: str,
    project: str,
    prompt: str,
    session: str | None,
    deadline: float | None = None,
) -> str:
    """Open `store` in this process (no model) and inject for one hook event.

    With `deadline` (time.monotonic), everything — connecting, every statement, closing —
    must be done by then; a PostgreSQL store's connections carry timeouts from what is left.

    Raises:
        TimeoutError: the deadline passed (nothing is half-written: the store's transactions
            roll back when cancelled).
    """
    import logging

    from ..services import provenance

    # A hook prints nothing but its output: what the driver logs while a deadline cancels its
    # queries must not reach stderr through logging's last-resort handler.
    logging.getLogger().addHandler(logging.NullHandler())
    left = None if deadline is None else deadline - time.monotonic()
    if left is not None and left <= 0:
        raise TimeoutError("no time was left to open the store")
    if left is not None and store.startswith(("postgresql://", "postgres://")):
        store = within(store, left)

    async def body() -> str:
        settings = Settings.from_env(store=store, owner=owner)
        async with Memory.open(settings=settings, embedder=NoModel()) as memory:
            with provenance.session(session):
                return await injected_text(memory, event, project, prompt)

    async def bounded() -> str:
        with anyio.fail_after(None if deadline is None else deadline - time.monotonic()):
            return await body()

    return anyio.run(bounded)
