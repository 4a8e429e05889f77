"""What a harness may inject without being asked, and how it reads (DESIGN.md §12).

Pure and standard-library only: the Claude Code hook's keyword path runs it in a fresh process
before every prompt, and the server's hook route runs it on ranked recall rows, so both apply
one rule. Injected context reaches the model unasked, so the bar is higher than recall's:

- nothing weak (the recall gate, DESIGN.md §5.9) and nothing stale or superseded;
- and relevance that does not depend on the other candidates: a meaning match strong enough
  to pass the weak line on its own (λ·cos + μ·cue overlap ≥ weak floor), or at least two
  content words shared with the prompt (one when the prompt has one), or the memory's cues
  (tags, entities, place) found in the prompt.

Nothing relevant means nothing injected. The block stays far below the 10,000 characters
Claude Code passes in full: a few short items, each clipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from .cues import cue_keywords
from .epoch import from_epoch
from .text import STOPWORDS, cut_cjk, stem

__all__ = [
    "CONTEXT_CHARS",
    "ITEM_CHARS",
    "LINE_CHARS",
    "PROMPT_MEMORIES",
    "SHARED_TODO",
    "START_IMPORTANCE",
    "START_MEMORIES",
    "START_REMINDERS",
    "START_TODOS",
    "Item",
    "bound_context",
    "content_words",
    "cue_overlap",
    "enough_shared",
    "holds_from",
    "importance_label",
    "item_line",
    "item_note",
    "relevant",
    "render_prompt",
    "render_session",
    "shared_words",
]

#: Memories injected before one prompt, and at session start.
PROMPT_MEMORIES = 3
START_MEMORIES = 5
START_TODOS = 10
START_REMINDERS = 5
#: Session start shows memories not labelled with the project only from HIGH up (the HIGH
#: band starts halfway between MEDIUM 5 and HIGH 8): a new session needs the few that matter.
START_IMPORTANCE = 6.5
#: One item's text is clipped here; the whole block never passes CONTEXT_CHARS.
ITEM_CHARS = 300
CONTEXT_CHARS = 4_000
#: A rendered line: the item's text at ITEM_CHARS, with its id, type, importance and note.
LINE_CHARS = 400
#: Cue overlap (|prompt ∩ cues| / min(|prompt|, |cues|)) that counts on its own.
CUE_OVERLAP = 0.6
#: The shipped recall constants the keyword path uses (it has no Settings): λ, μ, weak floor.
LAM, MU, WEAK = 0.5, 0.3, 0.18

_WORD = re.compile(r"\w+")
_CHATTER = (
    "a an the and or but if then so not no can could should would will shall may might must "
    "just also any some all each every please thanks thank hi hello ok okay yes"
)
_NOISE = STOPWORDS | frozenset(_CHATTER.split())

#: (id, type, importance, text, extra): one line of the block. `extra` is a short note
#: (a todo's status, an intent's reason) or "".
Item = tuple[str, str, float, str, str]


def content_words(text: str) -> set[str]:
    """Lower-cased words of two or more characters, function words left out."""
    found = cut_cjk(_WORD.findall(text.lower()), text)  # a CJK run as its bigrams
    return {w for w in found if len(w) > 1 and w not in _NOISE}


def shared_words(prompt: set[str], memory: set[str]) -> set[str]:
    """Prompt words the memory contains, or a word with the same stem ("deploy" and
    "deploying", in either direction; not "plan" and "planet"), as cue words match."""
    stems = {stem(m) for m in memory}
    return {word for word in prompt if word in memory or stem(word) in stems}


def enough_shared(shared: int, prompt_words: int) -> bool:
    """Two shared content words, or one when the prompt has only one."""
    return prompt_words > 0 and shared >= min(2, prompt_words)


def cue_overlap(prompt_text: str, cues: Iterable[str]) -> float:
    """|prompt ∩ cues| / min(|prompt|, |cues|) over content words (recall's overlap rule)."""
    cue_words: set[str] = set()
    for cue in cues:
        cue_words |= cue_keywords(cue)
    prompt = content_words(prompt_text)
    if not cue_words or not prompt:
        return 0.0
    return len(prompt & cue_words) / min(len(prompt), len(cue_words))


def relevant(
    *,
    weak: bool,
    stale: bool,
    superseded: bool,
    shared: int,
    prompt_words: int,
    overlap: float,
    cos: float | None = None,
    lam: float = LAM,
    mu: float = MU,
    weak_floor: float = WEAK,
) -> bool:
    """Whether a candidate may be injected for a prompt (the rule in the module docstring)."""
    if weak or stale or superseded:
        return False
    if cos is not None and lam * cos + mu * overlap >= weak_floor:
        return True
    return enough_shared(shared, prompt_words) or overlap >= CUE_OVERLAP


def holds_from(valid_from: float | None, now: float) -> str:
    """The note on a fact that holds only from a later date ("" once it holds): shown unasked,
    "rent is 1,500 from March" must not read as today's rent."""
    if valid_from is None or valid_from <= now:
        return ""
    return f"holds from {from_epoch(valid_from):%Y-%m-%d}"


#: The note on a shared todo: the session is told to mark todos done, and a role may not
#: write the shared owner's memory (DESIGN.md §10).
SHARED_TODO = "shared: the user closes it; tell them when it is done"


def item_note(
    faded: bool, valid_from: float | None, now: float, *, shared_todo: bool = False
) -> str:
    """The note on a memory shown unasked: archived by reflection (faded) and still brought
    in, holding only from a later date (`holds_from`), a todo only the user may close
    (`shared_todo`); "" for none."""
    notes = (
        "faded: archived by reflection" if faded else "",
        holds_from(valid_from, now),
        SHARED_TODO if shared_todo else "",
    )
    return "; ".join(note for note in notes if note)


def importance_label(importance: float) -> str:
    """The importance ladder's word for a number (nearest band, ties upward)."""
    for name, floor in (("CRITICAL", 9), ("HIGH", 6.5), ("MEDIUM", 4), ("LOW", 2)):
        if importance >= floor:
            return name
    return "TRIVIAL"


def _clip(text: str, n: int = ITEM_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


def item_line(item: Item, with_type: bool = True) -> str:
    """One item as a bullet: id, type (unless left out), importance word, clipped text, note."""
    memory_id, kind, importance, text, extra = item
    tag = f"{memory_id[:8]} {kind} " if with_type else f"{memory_id[:8]} "
    note = f" ({extra})" if extra else ""
    return f"- [{tag}{importance_label(importance)}] {_clip(text)}{note}"


_MORE = "- … more in memory (recall it with memory_recall)"


def _bounded(lines: list[str]) -> str:
    """The lines that fit in CONTEXT_CHARS, the note that more exist included."""
    out: list[str] = []
    size = 0
    for number, line in enumerate(lines):
        last = number == len(lines) - 1
        # Room is kept for the note unless this is the last line.
        room = CONTEXT_CHARS - (0 if last else len(_MORE) + 1)
        if size + len(line) > room:
            out.append(_MORE)
            break
        out.append(line)
        size += len(line) + 1
    return "\n".join(out)


def bound_context(text: str) -> str:
    """Another process's injected block, held to this one's bounds: each line flattened and
    clipped at LINE_CHARS, the whole under CONTEXT_CHARS (a server answering `--url` is trusted
    with the text, never with its size)."""
    lines = [_clip(line, LINE_CHARS) for line in text.splitlines() if line.strip()]
    return _bounded(lines)


def render_prompt(reminders: Sequence[Item], memories: Sequence[Item]) -> str:
    """The block injected before a prompt; "" when there is nothing to say."""
    lines: list[str] = []
    if reminders:
        lines.append("Reminders from your memory (intents you set, due now; act on them):")
        lines += [item_line(r, with_type=False) for r in reminders]
    if memories:
        lines.append(
            "From your long-term memory, possibly relevant to this prompt (injected by a hook; "
            "memory_recall finds more):"
        )
        lines += [item_line(m) for m in memories]
    return _bounded(lines)


def render_session(
    project: str,
    todos: Sequence[Item],
    open_todos: int,
    reminders: Sequence[Item],
    memories: Sequence[Item],
    labelled: int = 0,
) -> str:
    """The block injected at session start; "" when memory holds nothing to show.

    The first `labelled` memories carry the project's name as a tag, entity or place, and are
    said to; the rest were chosen for their importance alone, and are not said to be the
    project's (they were headed "Most important memories for billing:", about billing or not).
    With none labelled, the heading says so: "Most important memories (none labelled billing):".
    """
    lines: list[str] = []
    if todos:
        more = f" ({open_todos} in all)" if open_todos > len(todos) else ""
        lines.append(f"Open todos{more}; mark one done with the todo tool when you finish it:")
        lines += [item_line(t, with_type=False) for t in todos]
    if reminders:
        lines.append("Intents that are due now (act on them when the moment fits):")
        lines += [item_line(r, with_type=False) for r in reminders]
    labelled = labelled if project else 0
    if memories[:labelled]:
        lines.append(f"Memories labelled {project}:")
        lines += [item_line(m) for m in memories[:labelled]]
    if memories[labelled:]:
        # The project is named even when no memory carries it: what session start looked for.
        none = f" (none labelled {project})" if project and not labelled else ""
        lines.append(f"Most important memories{none}:")
        lines += [item_line(m) for m in memories[labelled:]]
    if not lines:
        return ""
    head = (
        "Long-term memory (nooa), injected at session start. Recall before acting on a subject "
        "you may have met before; author what you would want next time."
    )
    return _bounded([head, *lines])
