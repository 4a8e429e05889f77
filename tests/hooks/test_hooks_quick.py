"""The hook's keyword path in this process (`hooks/local.py` over `storage/quick.py`), read back
through the Memory facade: what a hook fires and logs must be exactly what the server would
have written (DESIGN.md §3.1, §9.2, §12). In process so coverage and mutation testing see it;
tests/hooks/test_hooks.py runs the same path through the console script.
"""

from __future__ import annotations

import io
import json
import os
import random
import sqlite3
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from hooks_support import hook_env, open_memory, recorded

from nooa_mcp.domain.injection import SHARED_TODO, holds_from
from nooa_mcp.hooks import local, run
from nooa_mcp.hooks.facade import injected_text
from nooa_mcp.storage.quick import QuickStore, QuickUnavailable

OWNER = "claude-code"
#: README: "the intents whose time has come (they fire once ...)", at most 5 at a time.
START_REMINDERS = 5


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "memory.sqlite"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "src" / "billing"
    (root / ".git").mkdir(parents=True)
    return root


@pytest.fixture(autouse=True)
def scratch_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = hook_env(tmp_path)
    for name in [k for k in os.environ if k.startswith("NOOA_")]:
        monkeypatch.delenv(name)
    for name in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "HOME"):
        monkeypatch.setenv(name, env[name])


def _hook(event: str, payload: dict, store: Path, owner: str = OWNER) -> str:
    out = io.StringIO()
    run.run(
        event, store=str(store), owner=owner, stdin=io.StringIO(json.dumps(payload)), stdout=out
    )
    text = out.getvalue()
    return json.loads(text)["hookSpecificOutput"]["additionalContext"] if text else ""


def _opened(store: Path) -> QuickStore:
    opened = QuickStore.open(str(store), time.monotonic() + 30)
    assert opened is not None
    return opened


# --------------------------------------------------------------------------- what is logged


def test_each_memory_shown_is_logged_injected_with_its_rank_query_and_session(
    store: Path, project: Path
) -> None:
    async def fill() -> list[str]:
        async with open_memory(store, OWNER) as mem:
            a = await mem.author("The nightly invoice export writes CSV files to the bucket")
            b = await mem.author("Invoice export CSV files are kept for ninety days")
            return [a.id, b.id]

    ids = anyio.run(fill)
    prompt = "Where does the nightly invoice export write CSV files?"
    payload = recorded("user_prompt", project, prompt=prompt, session_id="sess-42")
    text = _hook("user-prompt", payload, store)
    assert ids[0][:8] in text and ids[1][:8] in text

    async def read() -> tuple[dict, dict]:
        async with open_memory(store, OWNER) as mem:
            logs = {i: [r for _, r in await mem.access_log(i)] for i in ids}
            views = {i: await mem.get(i) for i in ids}
            return logs, views

    logs, views = anyio.run(read)
    ranks = {}
    for memory_id in ids:
        (record,) = [r for r in logs[memory_id] if r.channel.value == "injected"]
        assert record.channel.value == "injected"
        assert record.reader_owner == OWNER
        assert record.session_ref == "sess-42"
        assert record.query == prompt
        assert abs(record.ts.timestamp() - time.time()) < 120
        ranks[memory_id] = record.rank
        assert views[memory_id].channels.get("injected") == 1
        assert views[memory_id].access_count == 0  # injected is never use
    assert sorted(ranks.values()) == [1, 2]
    assert ranks[ids[0]] == 1  # shown first, the better match


def test_every_hook_access_moves_the_store_revision(store: Path, project: Path) -> None:
    """Running servers pull the rows whose revision moved (their vector caches)."""

    async def fill() -> None:
        async with open_memory(store, OWNER) as mem:
            await mem.author("The nightly invoice export writes CSV files to the bucket")

    anyio.run(fill)
    with sqlite3.connect(store) as conn:
        before = conn.execute("SELECT max(rev) FROM memories").fetchone()[0]
    prompt = "Where does the nightly invoice export write CSV files?"
    assert _hook("user-prompt", recorded("user_prompt", project, prompt=prompt), store)
    with sqlite3.connect(store) as conn:
        after = conn.execute("SELECT max(rev) FROM memories").fetchone()[0]
    assert after == before + 1
    # A second showing counts on the channel's counter (and moves the revision again).
    assert _hook("user-prompt", recorded("user_prompt", project, prompt=prompt), store)
    with sqlite3.connect(store) as conn:
        rev, channels = conn.execute("SELECT rev, channels FROM memories").fetchone()
    assert rev == before + 2
    assert json.loads(channels)["injected"] == 2


# --------------------------------------------------------------------------- intents


def test_the_fast_path_says_how_late_a_reminder_is_from_its_latest_occurrence(
    store: Path, project: Path
) -> None:
    """The hook's own path said "(fired on its time)" of a reminder due 12 days before, and
    a recurring one measured its lateness from the first occurrence missed (re-test helper):
    both now say it as a server's reply does, from the occurrence this firing answers."""
    now = datetime.now(UTC)

    async def fill() -> None:
        async with open_memory(store, OWNER) as mem:
            # remind=False: neither add fires the other; the hook fires both.
            await mem.intent(
                "add",
                remind=False,
                content="Renew the TLS certificate",
                fire_at=now - timedelta(days=12),
            )
            await mem.intent(
                "add",
                remind=False,
                content="Read the nightly backup report",
                fire_at=now - timedelta(days=6, hours=4),
                every_hours=24,
            )

    anyio.run(fill)
    shown = _hook("session-start", recorded("session_start", project), store)
    (tls,) = [line for line in shown.splitlines() if "Renew the TLS certificate" in line]
    (nightly,) = [line for line in shown.splitlines() if "nightly backup" in line]
    assert "fired on its time, due " in tls and "12 day(s) late" in tls, tls
    assert "4 hour(s) late" in nightly or "3 hour(s) late" in nightly, nightly


def test_a_recurring_intent_fires_rearms_and_moves_to_its_next_time(
    store: Path, project: Path
) -> None:
    now = datetime.now(UTC)

    async def fill() -> str:
        async with open_memory(store, OWNER) as mem:
            added = await mem.intent(
                "add",
                content="Check the nightly backup report",
                fire_at=now - timedelta(hours=1),
                every_hours=24,
            )
            return added.id

    intent = anyio.run(fill)
    first = _hook("session-start", recorded("session_start", project), store)
    assert "Check the nightly backup report" in first and "fired on its time" in first
    second = _hook("session-start", recorded("session_start", project), store)
    assert "Check the nightly backup report" not in second  # not again before tomorrow

    async def read():
        async with open_memory(store, OWNER) as mem:
            return {i.id: i for i in (await mem.intent("list")).intents}[intent]

    item = anyio.run(read)
    assert item.fired_count == 1
    assert item.every_hours == 24
    assert item.last_fired_at is not None and abs((item.last_fired_at - now).total_seconds()) < 120
    # The next occurrence: a day after the one that fired.
    expected = now - timedelta(hours=1) + timedelta(hours=24)
    assert abs((item.fire_at - expected).total_seconds()) < 5
    with sqlite3.connect(store) as conn:
        (report,) = [
            json.loads(r[0])
            for r in conn.execute("SELECT report FROM maintenance_log WHERE kind = 'intent'")
        ]
    assert report == {
        "intent_id": intent,
        "role": OWNER,
        "reason": "time",
        "rearmed": True,
        "text": "",
        "similarity": None,
    }


def test_a_cue_intent_fires_on_a_prompt_holding_every_cue_word_and_logs_the_prompt(
    store: Path, project: Path
) -> None:
    async def fill() -> str:
        async with open_memory(store, OWNER) as mem:
            added = await mem.intent(
                "add", content="Point the user at the export runbook", cue="invoice export"
            )
            return added.id

    intent = anyio.run(fill)
    only_one = recorded("user_prompt", project, prompt="The invoice is late")
    assert "export runbook" not in _hook("user-prompt", only_one, store)
    prompt = "Why did the invoice export fail last night?"
    text = _hook("user-prompt", recorded("user_prompt", project, prompt=prompt), store)
    assert "Point the user at the export runbook" in text and "fired on its cue" in text
    with sqlite3.connect(store) as conn:
        (report,) = [
            json.loads(r[0])
            for r in conn.execute("SELECT report FROM maintenance_log WHERE kind = 'intent'")
        ]
    assert report["intent_id"] == intent and report["reason"] == "cue"
    assert report["rearmed"] is False and report["text"] == prompt

    async def armed() -> bool:
        async with open_memory(store, OWNER) as mem:
            return {i.id: i.armed for i in (await mem.intent("list")).intents}[intent]

    assert anyio.run(armed) is False


def test_at_most_five_due_intents_fire_at_once_and_the_rest_stay_armed(
    store: Path, project: Path
) -> None:
    async def fill() -> list[str]:
        # Due a moment from now: an intent already due when the next one is added would be
        # delivered with that reply, as with any tool call.
        soon = datetime.now(UTC) + timedelta(seconds=2)
        async with open_memory(store, OWNER) as mem:
            return [
                (await mem.intent("add", content=f"Due errand number {i}", fire_at=soon)).id
                for i in range(7)
            ]

    ids = anyio.run(fill)
    time.sleep(2.5)  # until they are due (a clock, not progress, is waited on)
    text = _hook("session-start", recorded("session_start", project), store)
    shown = [i for i in range(7) if f"Due errand number {i}" in text]
    assert shown == list(range(START_REMINDERS))  # the oldest first

    # Read from the file: listing intents through the facade would deliver the due ones.
    with sqlite3.connect(store) as conn:
        fired = dict(
            conn.execute("SELECT id, json_extract(trigger, '$.fired_count') FROM memories")
        )
    assert [fired[i] for i in ids] == [1] * 5 + [0] * 2
    again = _hook("session-start", recorded("session_start", project), store)
    assert [i for i in range(7) if f"Due errand number {i}" in again] == [5, 6]


def test_another_roles_intents_memories_and_todos_never_reach_this_hook(
    store: Path, project: Path
) -> None:
    now = datetime.now(UTC)

    async def fill() -> None:
        async with open_memory(store, "bob@laptop") as mem:
            await mem.intent("add", content="Bob's errand is due", fire_at=now - timedelta(hours=1))
            await mem.todo("add", content="Bob renews the invoice export certificate")
            await mem.author("Bob's invoice export notes", importance="CRITICAL", tags=["billing"])
        async with open_memory(store, "claude-code@laptop") as mem:
            await mem.author("The invoice export job is scheduled in the billing cron")

    anyio.run(fill)
    start = _hook("session-start", recorded("session_start", project), store)
    prompt = "When does the invoice export job run in the billing cron?"
    asked = _hook("user-prompt", recorded("user_prompt", project, prompt=prompt), store)
    for text in (start, asked):
        assert "Bob" not in text, text
    # Another instance of this role is this role: its memory is shown.
    assert "scheduled in the billing cron" in asked


# --------------------------------------------------------------------------- the store file


def test_a_missing_file_is_no_store_and_a_foreign_one_is_refused_unchanged(tmp_path: Path) -> None:
    assert QuickStore.open(str(tmp_path / "none.sqlite"), time.monotonic() + 5) is None
    foreign = tmp_path / "photos.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY)")
    before = foreign.read_bytes()
    with pytest.raises(QuickUnavailable, match="not a nooa-mcp store") as caught:
        QuickStore.open(str(foreign), time.monotonic() + 5)
    assert caught.value.older is False
    assert foreign.read_bytes() == before


def test_a_newer_schema_is_refused_and_an_older_one_is_handed_to_the_full_code(
    store: Path,
) -> None:
    async def fill() -> None:
        async with open_memory(store, OWNER) as mem:
            await mem.author("anything")

    anyio.run(fill)
    for version, older, said in ((99, False, "newer than this"), (2, True, "schema version 2")):
        with sqlite3.connect(store) as conn:
            conn.execute(f"PRAGMA user_version = {version}")
        with pytest.raises(QuickUnavailable, match=said) as caught:
            QuickStore.open(str(store), time.monotonic() + 5)
        assert caught.value.older is older


def test_open_todos_are_counted_beyond_those_shown(store: Path) -> None:
    async def fill() -> None:
        async with open_memory(store, OWNER) as mem:
            for i in range(4):
                await mem.todo("add", content=f"Errand {i}", importance="HIGH" if i == 2 else "LOW")
            done = await mem.todo("add", content="Errand done")
            await mem.todo("done", memory_id=done.id)

    anyio.run(fill)
    opened = _opened(store)
    try:
        todos, count = opened.open_todos(OWNER, 2)
    finally:
        opened.close()
    assert count == 4
    assert [t["content"] for t in todos] == ["Errand 2", "Errand 0"]


def test_session_start_leads_with_the_projects_labelled_memories(
    store: Path, project: Path
) -> None:
    async def fill() -> None:
        async with open_memory(store, OWNER) as mem:
            await mem.author("Billing deploys on Tuesdays", importance="LOW", tags=["billing"])
            await mem.author("Billing owner is the finance team", entities=["Billing"])
            await mem.author("Unrelated but critical fact", importance="CRITICAL")
            await mem.author("A medium fact about nothing")

    anyio.run(fill)
    opened = _opened(store)
    try:
        rows = opened.important(OWNER, "billing", 5, time.time(), 6.5)
    finally:
        opened.close()
    contents = [r["content"] for r in rows]
    labelled = {"Billing deploys on Tuesdays", "Billing owner is the finance team"}
    assert set(contents[:2]) == labelled
    assert contents[2:] == ["Unrelated but critical fact"]

    # Only the labelled ones are said to be the project's (all five were headed "Most important
    # memories for billing:"), in the hook's process and the server's alike.
    async def served() -> str:
        async with open_memory(store, OWNER) as mem:
            return await injected_text(mem, "session-start", "billing", "")

    for text in (local.session_context(_opened(store), OWNER, "billing", None), anyio.run(served)):
        ours, _, rest = text.partition("Memories labelled billing:\n")[2].partition(
            "Most important memories:\n"
        )
        assert "Billing deploys on Tuesdays" in ours and "Billing owner is the finance" in ours
        assert "Unrelated but critical fact" in rest and "Unrelated" not in ours, text
        assert "for billing" not in text


def test_a_recurring_cue_intent_rests_for_its_cooldown_after_firing(
    store: Path, project: Path
) -> None:
    async def fill() -> str:
        async with open_memory(store, OWNER) as mem:
            added = await mem.intent(
                "add", content="Mention the export runbook", cue="invoice export", every_hours=1
            )
            return added.id

    intent = anyio.run(fill)
    payload = recorded("user_prompt", project, prompt="Why did the invoice export fail?")
    assert "Mention the export runbook" in _hook("user-prompt", payload, store)
    # Within the hour it rests; the hook still answers (nothing else is relevant: no output).
    assert _hook("user-prompt", payload, store) == ""
    with sqlite3.connect(store) as conn:
        trigger = json.loads(
            conn.execute("SELECT trigger FROM memories WHERE id = ?", (intent,)).fetchone()[0]
        )
    assert trigger["fired_count"] == 1 and trigger["every_hours"] == 1


def test_an_intent_fired_at_session_start_is_logged_with_the_session(
    store: Path, project: Path
) -> None:
    soon = datetime.now(UTC) + timedelta(seconds=1)

    async def fill() -> str:
        async with open_memory(store, OWNER) as mem:
            return (await mem.intent("add", content="Check the backup", fire_at=soon)).id

    intent = anyio.run(fill)
    time.sleep(1.5)  # until it is due
    payload = recorded("session_start", project, session_id="sess-7")
    assert "Check the backup" in _hook("session-start", payload, store, owner="claude-code@desk")

    async def log() -> list:
        async with open_memory(store, OWNER) as mem:
            return [r for _, r in await mem.access_log(intent) if r.channel.value == "injected"]

    (record,) = anyio.run(log)
    assert record.session_ref == "sess-7" and record.reader_owner == "claude-code@desk"


def test_a_project_name_with_a_quote_is_a_label_not_a_query(store: Path, tmp_path: Path) -> None:
    root = tmp_path / 'bill"ing'
    (root / ".git").mkdir(parents=True)

    async def fill() -> None:
        async with open_memory(store, OWNER) as mem:
            await mem.author("Quoted project notes", importance="LOW", tags=['bill"ing'])

    anyio.run(fill)
    text = _hook("session-start", recorded("session_start", root), store)
    assert "Quoted project notes" in text


def test_a_faded_memory_is_shown_after_live_ones_and_noted_faded(
    store: Path, project: Path
) -> None:
    async def fill() -> tuple[str, str]:
        async with open_memory(store, OWNER) as mem:
            live = await mem.author("The nightly invoice export writes CSV files to the bucket")
            faded = await mem.author("The nightly invoice export once wrote CSV files by FTP")
            return live.id, faded.id

    live, faded = anyio.run(fill)
    with sqlite3.connect(store) as conn:  # as a reflection pass leaves it (DESIGN.md §5.8)
        conn.execute("UPDATE memories SET archived = 1, faded = 1 WHERE id = ?", (faded,))
    prompt = "Where does the nightly invoice export write its CSV files?"
    text = _hook("user-prompt", recorded("user_prompt", project, prompt=prompt), store)
    lines = [line for line in text.splitlines() if line.startswith("- [")]
    assert len(lines) == 2, text
    assert lines[0].startswith(f"- [{live[:8]} ") and "(faded" not in lines[0]
    assert lines[1].startswith(f"- [{faded[:8]} ")
    assert lines[1].endswith("(faded: archived by reflection)")


def test_a_fact_whose_correction_faded_with_it_is_not_brought_in(
    store: Path, project: Path
) -> None:
    """Maintenance faded a fact and the correction that refines it together: the correction
    still supersedes it (DESIGN.md §7.2), so the prompt brings in the correction, not the
    replaced fact."""

    async def fill() -> tuple[str, str]:
        async with open_memory(store, OWNER) as mem:
            old = await mem.author("The nightly invoice export writes CSV files by FTP")
            new = await mem.author(
                "The nightly invoice export writes CSV files to the bucket now",
                links=[{"target": old.id, "relation": "refines"}],
            )
            return old.id, new.id

    _, new = anyio.run(fill)
    with sqlite3.connect(store) as conn:  # as a prune pass leaves them (DESIGN.md §7.2)
        conn.execute("UPDATE memories SET archived = 1, faded = 1")
    prompt = "Where does the nightly invoice export write its CSV files?"
    text = _hook("user-prompt", recorded("user_prompt", project, prompt=prompt), store)
    lines = [line for line in text.splitlines() if line.startswith("- [")]
    assert [line[3:11] for line in lines] == [new[:8]], text


@pytest.mark.parametrize("corrected", [False, True], ids=["merged", "merged and corrected"])
def test_a_duplicate_merged_into_another_memory_is_not_brought_in(
    store: Path, project: Path, corrected: bool
) -> None:
    """Reflection merged a copy into the memory that said it first: that memory speaks for
    the faded copy, as recall leaves it out (DESIGN.md §5.8). Corrected, the correction alone
    is brought in, never the copy holding the corrected fact's words."""

    async def fill() -> list[str]:
        async with open_memory(store, OWNER) as mem:
            first = await mem.author("The release branch is named stable")
            await mem.author("The release branch is named stable.", tags=["release"])
            (step,) = (await mem.reflect(["merge"])).steps
            assert step.applied == 1
            if not corrected:
                return [first.id]
            fix = await mem.author(
                "The release branch was renamed from stable to main",
                links=[{"target": first.id, "relation": "refines"}],
            )
            return [fix.id]

    wanted = anyio.run(fill)
    prompt = "what is the release branch named?"
    text = _hook("user-prompt", recorded("user_prompt", project, prompt=prompt), store)
    lines = [line for line in text.splitlines() if line.startswith("- [")]
    assert [line[3:11] for line in lines] == [i[:8] for i in wanted], text

    async def served() -> list[str]:  # the server's route (a hook with --url) alike
        async with open_memory(store, OWNER) as mem:
            return [m[0] for m in (await mem.inject_for_prompt(prompt)).memories]

    assert anyio.run(served) == wanted


def test_session_start_lines_ranks_and_current_memories(store: Path, project: Path) -> None:
    """Todos then memories, ranked in the order shown; a memory valid until next week is
    current; a todo's line is its importance and text, with no note."""
    later = datetime.now(UTC) + timedelta(days=7)

    async def fill() -> dict[str, str]:
        async with open_memory(store, OWNER) as mem:
            todo = await mem.todo("add", content="Renew the TLS certificate", importance="HIGH")
            fact = await mem.author(
                "The freeze lasts until next week", importance="CRITICAL", valid_to=later
            )
            return {"todo": todo.id, "fact": fact.id}

    ids = anyio.run(fill)
    text = _hook("session-start", recorded("session_start", project), store)
    assert f"- [{ids['todo'][:8]} HIGH] Renew the TLS certificate" in text.splitlines()
    assert f"- [{ids['fact'][:8]} info CRITICAL] The freeze lasts until next week" in (
        text.splitlines()
    )

    async def ranks() -> dict[str, int]:
        async with open_memory(store, OWNER) as mem:
            out = {}
            for name, memory_id in ids.items():
                logged = [r for _, r in await mem.access_log(memory_id)]
                (record,) = [r for r in logged if r.channel.value == "injected"]
                out[name] = record.rank
            return out

    assert anyio.run(ranks) == {"todo": 1, "fact": 2}


def test_a_tag_that_only_contains_the_project_name_is_no_label(store: Path) -> None:
    async def fill() -> None:
        async with open_memory(store, OWNER) as mem:
            await mem.author(
                "Billing reports go out monthly", importance="LOW", tags=["billing-reports"]
            )
            await mem.author("Billing deploys on Tuesdays", importance="LOW", tags=["Billing"])

    anyio.run(fill)
    opened = _opened(store)
    try:
        rows = opened.important(OWNER, "billing", 5, time.time(), 6.5)
    finally:
        opened.close()
    assert [r["content"] for r in rows] == ["Billing deploys on Tuesdays"]


def test_a_word_in_a_thousand_memories_or_more_is_too_common_to_bring_one_in(
    store: Path, project: Path
) -> None:
    """DESIGN.md §5.1's cut-off, as the server applies it: a term in at least 1,000 rows (or 1 %
    of them, when that is more) does not rank."""
    rng = random.Random(7)
    syllables = [c + v for c in "bcdfghjklmnpqstvxz" for v in "aeiou"]
    words = sorted({"".join(rng.sample(syllables, 3)) for _ in range(3000)})

    async def fill() -> str:
        async with open_memory(store, OWNER) as mem:
            for _ in range(4):
                await mem.author_many(
                    [
                        {"content": "Invoice export " + " ".join(rng.sample(words, 6))}
                        for _ in range(275)
                    ]
                )
            return (await mem.author("The invoice export run starts at 2am")).id

    rare = anyio.run(fill)
    prompt = "When does the invoice export run?"
    text = _hook("user-prompt", recorded("user_prompt", project, prompt=prompt), store)
    lines = [line for line in text.splitlines() if line.startswith("- [")]
    # "invoice" and "export" are in 1,101 memories: only "run" ranks, and one memory holds it.
    assert lines == [f"- [{rare[:8]} info MEDIUM] The invoice export run starts at 2am"], text
    # A prompt of common words only has nothing to rank by: nothing is brought in.
    payload = recorded("user_prompt", project, prompt="invoice export")
    assert _hook("user-prompt", payload, store) == ""


# --------------------------------------------------------------------------- not valid yet
# A fact that holds only from a later date, shown unasked (DESIGN.md §12): session start and a
# prompt's block note "holds from <date>" on it, on the hook's keyword path and on the server's
# route alike, and say nothing once the date has come. "The rent is 1,500 from March" must not
# read as today's rent.

RENT = "The flat's rent is 1,500 euros a month, paid on the first"


def _line_of(text: str, memory_id: str) -> str:
    (line,) = [line for line in text.splitlines() if line.startswith(f"- [{memory_id[:8]} ")]
    return line


def _fill_rent(store: Path, valid_from: datetime) -> tuple[str, str]:
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
    store: Path, tmp_path: Path
) -> None:
    ahead = datetime.now(UTC) + timedelta(days=40)
    later, current = _fill_rent(store, ahead)
    project = tmp_path / "flat"
    project.mkdir()

    start = _hook("session-start", recorded("session_start", project), store)
    assert _line_of(start, later).endswith(f"({holds_from(ahead.timestamp(), 0.0)})")
    assert _line_of(start, current).endswith("every October")

    prompt = "How much is the flat's rent each month?"
    block = _hook("user-prompt", recorded("user_prompt", project, prompt=prompt), store)
    assert _line_of(block, later).endswith(f"(holds from {ahead:%Y-%m-%d})")


def test_the_servers_route_notes_it_as_the_hook_does_and_drops_the_note_once_it_holds(
    store: Path, tmp_path: Path
) -> None:
    ahead = datetime.now(UTC) + timedelta(days=40)
    later, _ = _fill_rent(store, ahead)
    past = datetime.now(UTC) - timedelta(days=40)
    other = tmp_path / "other.sqlite"
    held, _ = _fill_rent(other, past)

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


def test_a_shared_intent_fires_once_for_the_first_role_whose_session_meets_it(
    store: Path, project: Path
) -> None:
    """An intent set without an owner (the CLI's `author --type intent`) is everyone's, as a
    shared todo is: it fires at this role's session start, and being one-shot, only once."""
    now = datetime.now(UTC)

    async def fill() -> str:
        async with open_memory(store, "") as mem:
            added = await mem.intent(
                "add", content="Rotate the shared deploy key", fire_at=now + timedelta(seconds=1)
            )
            return added.id

    intent = anyio.run(fill)
    time.sleep(1.1)
    start = _hook("session-start", recorded("session_start", project), store)
    assert "Rotate the shared deploy key" in start
    assert intent[:8] in start
    again = _hook("session-start", recorded("session_start", project), store, owner="bob")
    assert "Rotate the shared deploy key" not in again


def test_a_shared_todo_is_noted_as_the_users_to_close_at_both_session_starts(
    store: Path, project: Path
) -> None:
    """Session start asks the model to mark todos done, and a role may not write a shared
    one: it is noted as the user's (hook and server alike), the role's own is not."""

    async def fill() -> tuple[str, str, str]:
        async with open_memory(store, "") as shared:
            everyone = (await shared.todo("add", content="Renew the team TLS certificate")).id
        async with open_memory(store, OWNER) as mine:
            own = (await mine.todo("add", content="Tidy the billing fixtures")).id
            block = await mine.context()
        return everyone, own, block

    everyone, own, served = anyio.run(fill)
    hooked = _hook("session-start", recorded("session_start", project), store)
    for text in (hooked, served):
        lines = {line[3:11]: line for line in text.splitlines() if line.startswith("- [")}
        assert lines[everyone[:8]].endswith(f"({SHARED_TODO})")
        assert "shared" not in lines[own[:8]]
