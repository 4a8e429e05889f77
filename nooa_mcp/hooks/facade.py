"""Hooks through the Memory facade: the server's route, and stores the quick path cannot read.

The server calls `injected_text` with its own engine (model loaded, index warm). A hook process
whose store is PostgreSQL (or a SQLite file of another schema version) calls `inject`, which
opens the store without loading the model: keywords and cues only, and a slow start (the whole
package is imported), but the same rule and the same logging.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import numpy as np

from ..config import Settings
from ..domain.injection import render_prompt, render_session
from ..embeddings import MiniLMEmbedder
from ..memory import Memory

__all__ = ["NoModel", "inject", "injected_text"]


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
        return render_session(project, got.todos, got.open_todos, got.reminders, got.memories)
    got = await memory.inject_for_prompt(prompt)
    return render_prompt(got.reminders, got.memories)


def inject(
    event: str, store: str, owner: str, project: str, prompt: str, session: str | None
) -> str:
    """Open `store` in this process (no model) and inject for one hook event."""
    from ..services import provenance

    async def body() -> str:
        settings = Settings.from_env(store=store, owner=owner)
        async with Memory.open(settings=settings, embedder=NoModel()) as memory:
            with provenance.session(session):
                return await injected_text(memory, event, project, prompt)

    return anyio.run(body)
