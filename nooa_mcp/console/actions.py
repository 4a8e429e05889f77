"""The writes a person makes from the console, each one facade call as the console's owner.

The owner is the one the authenticator resolved for the request; the facade stamps it and
refuses writes across roles exactly as it does for the tools. Every action answers with a
redirect (post/redirect/get), so reloading a page never repeats a write.
"""

from __future__ import annotations

import json

from starlette.responses import Response, StreamingResponse

from .. import InvalidInput
from .pages import STEPS
from .web import Page


def _id(page: Page) -> str:
    return page.request.path_params["memory_id"]


async def edit(page: Page) -> Response:
    view = await page.memory.get(_id(page))
    content = page.field("content")
    title = page.field("title")
    importance = page.field("importance").strip()
    tags_text = page.field("tags")
    tags = [t.strip() for t in tags_text.split(",") if t.strip()]
    result = await page.memory.update(
        view.id,
        content=content if content.strip() != view.content else None,
        title=title if " ".join(title.split()) != view.title else None,
        importance=importance if importance and float_or(importance) != view.importance else None,
        tags=tags if tags != view.tags else None,
    )
    return page.redirect(f"/memory/{view.id}", note="saved" if result.changed else "unchanged")


def float_or(text: str) -> float | str:
    try:
        return float(text)
    except ValueError:
        return text  # a label such as HIGH: the facade parses and validates it


async def forget(page: Page) -> Response:
    result = await page.memory.forget(_id(page))
    return page.redirect(f"/memory/{result.id}", note="forgotten")


async def revive(page: Page) -> Response:
    result = await page.memory.revive(_id(page))
    return page.redirect(f"/memory/{result.id}", note="revived")


#: The todo action that moves a todo to each status.
_TODO_ACTION = {"done": "done", "dropped": "drop", "open": "reopen"}


async def todo_status(page: Page) -> Response:
    status = page.field("status")
    if status not in _TODO_ACTION:
        raise InvalidInput(
            "status", f"'{status}' is not a todo status.", "Use done, dropped or open."
        )
    # A person closing a todo is not the agent's turn: no reminder fires (and is lost) here.
    result = await page.memory.todo(_TODO_ACTION[status], memory_id=_id(page), remind=False)
    back = page.field("back")
    if back == "todos":
        return page.redirect("/todos", note=f"todo-{status}")
    return page.redirect(f"/memory/{result.id}", note=f"todo-{status}")


async def cancel_intent(page: Page) -> Response:
    result = await page.memory.intent("cancel", memory_id=_id(page), remind=False)
    if page.field("back") == "intents":
        return page.redirect("/intents", note="cancelled")
    return page.redirect(f"/memory/{result.id}", note="cancelled")


async def reflect(page: Page) -> Response:
    chosen = [s for s in STEPS if page.field(f"step_{s}")]
    run = page.console.runs.start(page.memory, chosen or None)
    return page.redirect(f"/reflect/{run.id}")


async def reflect_page(page: Page) -> Response:
    run = page.console.runs.get(page.request.path_params["run_id"], page.owner)
    if run is None:
        raise InvalidInput("run", "no such reflection pass here.", "Start one from the Stats page.")
    return page.render("reflect.html", run=run)


async def reflect_events(page: Page) -> Response:
    run = page.console.runs.get(page.request.path_params["run_id"], page.owner)
    if run is None:
        raise InvalidInput("run", "no such reflection pass here.", "Start one from the Stats page.")

    async def stream():
        async for state in page.console.runs.events(run):
            kind = "progress" if state["status"] == "running" else "end"
            yield f"event: {kind}\ndata: {json.dumps(state)}\n\n"

    return StreamingResponse(
        stream(), media_type="text/event-stream", headers={"x-accel-buffering": "no"}
    )
