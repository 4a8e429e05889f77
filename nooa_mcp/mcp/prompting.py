"""The MCP prompts, loaded from the prompts folder shipped in the wheel (DESIGN.md §13.3).

Each `prompts/<name>.md` may open with `<!-- description: ... -->`; `$name` placeholders are
filled from the store when the prompt is fetched.
"""

import string
from dataclasses import dataclass
from pathlib import Path

from mcp.server.mcpserver import MCPServer

import nooa_mcp

from ..domain.injection import item_line
from ..domain.text import head
from .handlers import current_memory, resource_errors

__all__ = ["PromptFile", "load_prompt", "prompts_dir", "register_prompts"]


def prompts_dir() -> Path:
    """The prompts folder: inside the installed package first, then the source checkout's."""
    packaged = Path(nooa_mcp.__file__).parent / "prompts"
    if packaged.is_dir():
        return packaged
    source = Path(nooa_mcp.__file__).parent.parent / "prompts"
    if source.is_dir():
        return source
    raise FileNotFoundError(f"no prompts folder at {packaged} or {source}; reinstall nooa-mcp")


@dataclass(frozen=True)
class PromptFile:
    name: str
    description: str
    body: string.Template


def load_prompt(name: str) -> PromptFile:
    """Read `<name>.md`; an opening `<!-- description: ... -->` line becomes the description."""
    text = (prompts_dir() / f"{name}.md").read_text(encoding="utf-8")
    description = ""
    first, _, rest = text.partition("\n")
    if first.startswith("<!--") and first.rstrip().endswith("-->"):
        description = first.strip()[4:-3].strip().removeprefix("description:").strip()
        text = rest
    return PromptFile(name, description, string.Template(text.strip() + "\n"))


def _bullets(lines: list[str], empty: str) -> str:
    return "\n".join(lines) if lines else empty


# --------------------------------------------------------------------------- prompts


def register_prompts(server: MCPServer) -> None:
    guide = load_prompt("memory_guide")
    start = load_prompt("session_start")
    reflect = load_prompt("reflect")

    @server.prompt(
        name="memory_guide", title="How to use your memory", description=guide.description
    )
    def memory_guide() -> str:
        return guide.body.safe_substitute()

    @server.prompt(
        name="session_start", title="Start a session with memory", description=start.description
    )
    @resource_errors
    async def session_start() -> str:
        memory = await current_memory()
        # The selection is the session-start hook's (`services.injection.at_session_start`):
        # open todos, the intents due now (they fire here and are delivered by this prompt,
        # DESIGN.md §9.3) and the important memories, none superseded, stale, archived, a
        # scratch note or an intent. Each memory is in one section only: todos under "Open
        # todos", where their count and the way to close them are said, never again in the
        # memory list.
        got = await memory.inject_at_start()
        todos = [item_line(t, with_type=False) for t in got.todos]
        if got.open_todos > len(got.todos):
            todos.append(f"- … {got.open_todos} open in all (`todo` with action=list shows them)")
        return start.body.safe_substitute(
            context=_bullets(
                [item_line(m) for m in got.memories],
                "No HIGH or CRITICAL memory to show: `memory_recall` finds the rest.",
            ),
            todos=_bullets(todos, "No open todos."),
            intents=_bullets(
                [item_line(r, with_type=False) for r in got.reminders], "No intents are due."
            ),
        )

    @server.prompt(name="reflect", title="Reflect on recent work", description=reflect.description)
    @resource_errors
    async def reflect_prompt() -> str:
        memory = await current_memory()
        stats = await memory.stats()
        episodes = await memory.list_memories(limit=20, type="episode")
        return reflect.body.safe_substitute(
            total=stats.total,
            active=stats.active,
            archived=stats.archived,
            episodes=_bullets(
                [
                    f"- [{e.id[:8]}] {e.created_at:%Y-%m-%d} {head(e.content, 300)}"
                    for _, e in episodes
                ],
                "No episodes are stored yet: author one after each task (type=episode).",
            ),
            reflect_hint="",
        )
