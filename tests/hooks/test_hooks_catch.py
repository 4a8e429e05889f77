"""What the hooks show, stated in the documented numbers, through the hook command both ways:
in this process (`hooks.run.run` with the hook JSON on a StringIO, so coverage and mutation
testing see `storage/quick.py` and `hooks/local.py`) and as Claude Code runs it (the installed
console script in a fresh process).

Each test was written against a bug put in by hand (named in its docstring) and fails on it.
The numbers are the README's ("What the model is shown"), never imported from the code: up to
10 open todos, most important first; up to 5 memories at session start and 3 before a prompt;
a memory whose tag is in the prompt counts; a forgotten memory never comes; a block under
4,000 characters, each item's text clipped at 300.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import anyio
import pytest
from hooks_support import Answer, hook_env, log_lines, open_memory, recorded, run_hook

from nooa_mcp.domain.injection import render_prompt, render_session
from nooa_mcp.hooks import paths, run
from nooa_mcp.hooks.facade import inject

OWNER = "claude-code"
#: README: "always under 4,000 characters"; an item's text is clipped at 300, and its line adds
#: the id, type and importance (under 40 characters).
CONTEXT_CHARS = 4_000
ITEM_CHARS = 300
LINE_EXTRA = 40
START_TODOS = 10
START_MEMORIES = 5
PROMPT_MEMORIES = 3


@pytest.fixture(params=["this_process", "fresh_process", "full_store_code"])
def hook(request, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """`hook(event, payload, store)` -> Answer: the hook in this process, the console script in
    a fresh one, or the full store code the server's /hooks route and a PostgreSQL hook use
    (`facade.inject`, keywords only as a hook process has no model)."""
    env = hook_env(tmp_path)

    def in_process(event: str, payload: dict, store: Path) -> Answer:
        for name in [k for k in os.environ if k.startswith("NOOA_")]:
            monkeypatch.delenv(name)
        for name in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "HOME"):
            monkeypatch.setenv(name, env[name])
        out = io.StringIO()
        code = run.run(
            event, store=str(store), owner=OWNER, stdin=io.StringIO(json.dumps(payload)), stdout=out
        )
        return Answer(code, out.getvalue(), "")

    def console(event: str, payload: dict, store: Path) -> Answer:
        return run_hook(event, payload, env, "--store", str(store), "--owner", OWNER)

    def full(event: str, payload: dict, store: Path) -> Answer:
        _, project = paths.find_project(payload["cwd"])
        prompt = payload.get("prompt", "")
        text = inject(event, str(store), OWNER, project, prompt, payload["session_id"])
        shown = run.output(event, text)
        return Answer(0, shown + "\n" if shown else "", "")

    return {"this_process": in_process, "fresh_process": console, "full_store_code": full}[
        request.param
    ]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "src" / "billing"
    (root / ".git").mkdir(parents=True)
    return root


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "memory.sqlite"


def _items(text: str, header: str) -> list[str]:
    """The item lines under `header` (up to the next line that is not an item)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    out = []
    for line in lines[start + 1 :]:
        if not line.startswith("- ["):
            break
        out.append(line)
    return out


# --------------------------------------------------------------------------- todos at start


def test_session_start_shows_the_ten_most_important_open_todos_not_the_oldest(
    hook, store: Path, project: Path, tmp_path: Path
) -> None:
    """Bug put in: `open_todos` ordered by age only (the oldest ten shown)."""

    async def fill() -> None:
        async with open_memory(store, OWNER) as mem:
            for i in range(11):
                await mem.todo(
                    "add", content=f"Water plant number {i} in the office", importance="LOW"
                )
            await mem.todo(
                "add", content="Restore the payment gateway outage", importance="CRITICAL"
            )
            await mem.todo("add", content="Renew the TLS certificate soon", importance="HIGH")

    anyio.run(fill)
    text = hook("session-start", recorded("session_start", project), store).context
    todos = _items(text, "Open todos")
    assert len(todos) == START_TODOS, todos
    assert "(13 in all)" in text
    assert "Restore the payment gateway outage" in todos[0]
    assert "Renew the TLS certificate" in todos[1]
    # Among equals the oldest come first: plants 0..7 fill the rest, 8..10 wait.
    assert [f"number {i} " in todos[2 + i] for i in range(8)] == [True] * 8


# --------------------------------------------------------------------------- how many memories


async def _invoices(store: Path, n: int, **fields) -> list[str]:
    ids = []
    async with open_memory(store, OWNER) as mem:
        for i in range(n):
            text = f"Invoice export note {i}: the nightly invoice export writes CSV files"
            ids.append((await mem.author(text, **fields)).id)
    return ids


def test_a_prompt_gets_at_most_three_memories_and_never_a_forgotten_one(
    hook, store: Path, project: Path
) -> None:
    """Bugs put in: PROMPT_MEMORIES raised to 5; forgotten (archived, not faded) memories let
    into the keyword candidates."""
    ids = anyio.run(_invoices, store, 6)

    async def forget() -> None:
        async with open_memory(store, OWNER) as mem:
            gone = await mem.author("The old billing password rotation runs every ninety days")
            await mem.forget(gone.id)

    anyio.run(forget)
    prompt = "Where does the nightly invoice export write its CSV files?"
    text = hook("user-prompt", recorded("user_prompt", project, prompt=prompt), store).context
    shown = _items(text, "From your long-term memory")
    assert len(shown) == PROMPT_MEMORIES, shown
    assert all(any(i[:8] in line for i in ids) for line in shown)
    # The forgotten memory is the only one this prompt is about: nothing is shown.
    prompt = "How often does the old billing password rotation run?"
    answer = hook("user-prompt", recorded("user_prompt", project, prompt=prompt), store)
    assert answer.stdout == "", answer.context


def test_session_start_shows_at_most_five_memories_and_never_a_forgotten_one(
    hook, store: Path, project: Path
) -> None:
    """Bugs put in: START_MEMORIES raised to 8; archived memories let into `important`."""
    anyio.run(lambda: _invoices(store, 8, importance="CRITICAL"))

    async def forget() -> None:
        async with open_memory(store, OWNER) as mem:
            gone = await mem.author("Forgotten: the old billing password", importance="CRITICAL")
            await mem.forget(gone.id)

    anyio.run(forget)
    text = hook("session-start", recorded("session_start", project), store).context
    assert len(_items(text, "Most important memories")) == START_MEMORIES, text
    assert "Forgotten" not in text


# --------------------------------------------------------------------------- a tag in the prompt


def test_a_prompt_word_that_is_a_memorys_tag_counts(hook, store: Path, project: Path) -> None:
    """Bug put in: the keyword path's cues leave out the memory's tags. The memory shares no
    word of its text with the prompt; only its tag is in it."""

    async def fill() -> None:
        async with open_memory(store, OWNER) as mem:
            await mem.author(
                "Rollouts pause while the on-call rotation changes", tags=["kubernetes"]
            )
            await mem.author("Lunch orders are due by 11am on Fridays")

    anyio.run(fill)
    prompt = "Plan the kubernetes upgrade for next week"
    text = hook("user-prompt", recorded("user_prompt", project, prompt=prompt), store).context
    assert "Rollouts pause while the on-call rotation changes" in text, text
    assert "Lunch orders" not in text


# --------------------------------------------------------------------------- the bound


def test_a_crowded_store_stays_under_4000_characters_with_items_clipped_at_300(
    hook, store: Path, project: Path
) -> None:
    """Bug put in: CONTEXT_CHARS raised to 12,000; ITEM_CHARS to 1,000."""

    async def crowd() -> None:
        async with open_memory(store, OWNER) as mem:
            for i in range(12):
                await mem.todo("add", content=f"Invoice export task {i}: " + "details " * 100)
                await mem.author(
                    f"Invoice export note {i}: " + "context " * 200, importance="CRITICAL"
                )

    anyio.run(crowd)
    for event, name in (("session-start", "session_start"), ("user-prompt", "user_prompt")):
        text = hook(event, recorded(name, project), store).context
        assert 0 < len(text) <= CONTEXT_CHARS, len(text)
        items = [line for line in text.splitlines() if line.startswith("- [")]
        assert items and all(len(line) <= ITEM_CHARS + LINE_EXTRA for line in items)
        assert any(len(line) > ITEM_CHARS for line in items)  # clipped, not left short


def test_no_mix_of_item_lengths_takes_a_block_past_4000_characters() -> None:
    """Bug put in (it was there): the note that more items exist appended past the bound."""
    for size in range(200, 301, 3):
        for count in (12, 13, 14, 15):
            items = [(f"{i:032x}", "info", 8.0, "x" * size, "") for i in range(count)]
            for text in (
                render_prompt(items[:2], items[2:]),
                render_session("billing", items[:10], 12, [], items[10:]),
            ):
                assert len(text) <= CONTEXT_CHARS, (size, count, len(text))


# --------------------------------------------------------------------------- in process only


def test_in_process_failures_print_nothing_and_log_one_line(
    store: Path, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run() contract in this process: bad input, a bad deadline, an unknown event."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("NOOA_HOOK_SECONDS", raising=False)
    cases = [
        ("user-prompt", "not json {", {}, ["not JSON"]),
        ("session-end", "{}", {}, ["is not a hook"]),
        ("user-prompt", "[1]", {"deadline": "soon"}, ["deadline 'soon'", "not a JSON object"]),
    ]
    for event, raw, extra, said in cases:
        before = len(log_lines(tmp_path))
        out = io.StringIO()
        assert run.run(event, store=str(store), stdin=io.StringIO(raw), stdout=out, **extra) == 0
        assert out.getvalue() == ""
        lines = log_lines(tmp_path)[before:]
        assert len(lines) == len(said), lines
        for line, words in zip(lines, said, strict=True):
            assert words in line, line
