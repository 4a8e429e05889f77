"""The MCP prompts, loaded from the prompts folder shipped in the wheel (DESIGN.md §13.3).

Each `prompts/<name>.md` may open with `<!-- description: ... -->`; `$name` placeholders are
filled from the store when the prompt is fetched.
"""

import string
from dataclasses import dataclass
from pathlib import Path

from mcp.server.mcpserver import MCPServer

import nooa_mcp

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
        context = await memory.context(limit=10)
        # Listing todos also evaluates time triggers: intents that are due fire here, and the
        # prompt is where they are delivered (DESIGN.md §9.3).
        todos = await memory.todo("list", limit=20)
        return start.body.safe_substitute(
            context=context.strip() or "Nothing stored yet.",
            todos=_bullets(
                [f"- [{t.id8}] {t.importance_label} {t.title or t.content}" for t in todos.todos],
                "No open todos.",
            ),
            intents=_bullets(
                [f"- [{r.intent_id[:8]}] {r.content}" for r in todos.reminders],
                "No intents are due.",
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
