"""A fact that holds only from a later date, shown unasked (DESIGN.md §12): session start and a
prompt's block note "holds from <date>" on it, on the hook's keyword path and on the server's
route alike, and say nothing once the date has come. "The rent is 1,500 from March" must not
read as today's rent.
"""

from __future__ import annotations

import io
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from hooks_support import hook_env, open_memory, recorded

from nooa_mcp.domain.injection import holds_from
from nooa_mcp.hooks import run

OWNER = "claude-code"
RENT = "The flat's rent is 1,500 euros a month, paid on the first"


@pytest.fixture(autouse=True)
def scratch_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = hook_env(tmp_path)
    for name in [k for k in os.environ if k.startswith("NOOA_")]:
        monkeypatch.delenv(name)
    for name in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "HOME"):
        monkeypatch.setenv(name, env[name])


def _hook(event: str, payload: dict, store: Path) -> str:
    out = io.StringIO()
    run.run(
        event, store=str(store), owner=OWNER, stdin=io.StringIO(json.dumps(payload)), stdout=out
    )
    text = out.getvalue()
    return json.loads(text)["hookSpecificOutput"]["additionalContext"] if text else ""


def _line(text: str, memory_id: str) -> str:
    (line,) = [line for line in text.splitlines() if line.startswith(f"- [{memory_id[:8]} ")]
    return line


def _fill(store: Path, valid_from: datetime) -> tuple[str, str]:
    async def fill() -> tuple[str, str]:
        async with open_memory(store, OWNER) as mem:
            later = await mem.author(RENT, importance="HIGH", valid_from=valid_from)
            now = await mem.author(
                "The flat's heating is serviced every October", importance="HIGH"
            )
            return later.id, now.id

    return anyio.run(fill)


def test_holds_from_names_the_date_only_while_it_is_ahead() -> None:
    day = datetime(2027, 3, 1, tzinfo=UTC).timestamp()
    assert holds_from(day, day - 1) == "holds from 2027-03-01"
    assert holds_from(day, day) == ""
    assert holds_from(day, day + 1) == ""
    assert holds_from(None, day) == ""


def test_the_hooks_keyword_path_notes_a_fact_that_holds_from_a_later_date(
    tmp_path: Path,
) -> None:
    store = tmp_path / "memory.sqlite"
    ahead = datetime.now(UTC) + timedelta(days=40)
    later, current = _fill(store, ahead)
    project = tmp_path / "flat"
    project.mkdir()

    start = _hook("session-start", recorded("session_start", project), store)
    assert _line(start, later).endswith(f"({holds_from(ahead.timestamp(), 0.0)})")
    assert _line(start, current).endswith("every October")

    prompt = "How much is the flat's rent each month?"
    block = _hook("user-prompt", recorded("user_prompt", project, prompt=prompt), store)
    assert _line(block, later).endswith(f"(holds from {ahead:%Y-%m-%d})")


def test_the_servers_route_notes_it_as_the_hook_does_and_drops_the_note_once_it_holds(
    tmp_path: Path,
) -> None:
    store = tmp_path / "memory.sqlite"
    ahead = datetime.now(UTC) + timedelta(days=40)
    later, _ = _fill(store, ahead)
    past = datetime.now(UTC) - timedelta(days=40)
    other = tmp_path / "other.sqlite"
    held, _ = _fill(other, past)

    async def injected(path: Path, memory_id: str) -> tuple[str, str]:
        async with open_memory(path, OWNER) as mem:
            start = await mem.inject_at_start(fire=False)
            prompt = await mem.inject_for_prompt("How much is the flat's rent each month?")
            (at_start,) = [m[4] for m in start.memories if m[0] == memory_id]
            (for_prompt,) = [m[4] for m in prompt.memories if m[0] == memory_id]
            return at_start, for_prompt

    note = f"holds from {ahead:%Y-%m-%d}"
    assert anyio.run(injected, store, later) == (note, note)
    assert anyio.run(injected, other, held) == ("", "")
