"""Claude Code hooks (DESIGN.md §12): recorded hook JSON in, the context to inject out.

Every test runs twice on a store written through the Memory facade: the installed `nooa-mcp`
console script in a fresh process, as Claude Code runs a command hook, and the same invocation
answered in this process (so coverage and mutation testing see `storage/quick.py` and
`hooks/local.py`, which a subprocess hides from them).
"""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import hooks_support
import pytest
from click.testing import CliRunner
from hooks_support import hook_env, log_lines, open_memory, recorded, run_hook_in_process

from nooa_mcp.cli import main

OWNER = "claude-code"
run_hook = hooks_support.run_hook


@pytest.fixture(autouse=True, params=["fresh_process", "this_process"])
def _how(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test once through the console script in a fresh process, once in this process
    (mutation testing deselects `fresh_process`: a fresh process runs the installed code)."""
    if request.param == "this_process":
        monkeypatch.setitem(globals(), "run_hook", run_hook_in_process)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder (a git checkout called billing)."""
    root = tmp_path / "src" / "billing"
    (root / ".git").mkdir(parents=True)
    (root / "invoices").mkdir()
    return root


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "memory.sqlite"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return hook_env(tmp_path)


async def _fill(store: Path, due: bool = True) -> dict[str, str]:
    """A store as a working agent leaves it; returns the ids by name. With `due`, an intent
    whose time has passed and that nothing has delivered yet."""
    now = datetime.now(UTC)
    ids = {}
    async with open_memory(store, OWNER) as mem:

        async def author(name: str, text: str, **fields) -> None:
            ids[name] = (await mem.author(text, **fields)).id

        async def todo(name: str, text: str, importance: str = "MEDIUM") -> None:
            ids[name] = (await mem.todo("add", content=text, importance=importance)).id

        async def intent(name: str, text: str, **trigger) -> None:
            ids[name] = (await mem.intent("add", content=text, **trigger)).id

        await author(
            "billing",
            "The billing service exports invoices as CSV to the reports bucket every night",
            tags=["billing"],
        )
        await author("ssh", "The production SSH keys are in the team vault", importance="HIGH")
        await author("lunch", "Lunch orders are due by 11am on Fridays", importance="LOW")
        await author("old", "Staging deploys use the deploy-staging job", importance="HIGH")
        await author(
            "new",
            "Staging deploys go through the release pipeline since March",
            importance="HIGH",
            links=[{"target": ids["old"], "relation": "refines"}],
        )
        await author(
            "stale",
            "Invoice export to staging is paused during the audit",
            valid_to=now - timedelta(days=1),
        )
        await todo("tls", "Renew the TLS certificate of the payment gateway", "HIGH")
        await todo("report", "Write the quarterly report")
        await todo("keys", "Rotate the API keys")
        await mem.todo("done", memory_id=ids["keys"])
        # Intents last: a later write whose text matched a cue would deliver it.
        await intent("demo", "Prepare the demo for Friday", fire_at=now + timedelta(days=1))
        runbook = "Point the user at the invoice export runbook"
        await intent("runbook", runbook, cue="invoice export")
        if due:
            await intent(
                "backup", "Check the nightly backup report", fire_at=now - timedelta(hours=1)
            )
    return ids


@pytest.fixture
def ids(store: Path) -> dict[str, str]:
    return anyio.run(_fill, store)


@pytest.fixture
def calm(store: Path) -> dict[str, str]:
    """The same store without a due intent: what a prompt gets is only what it cues."""
    return anyio.run(_fill, store, False)


async def _views(store: Path, ids: list[str]) -> dict:
    async with open_memory(store, OWNER) as mem:
        return {i: await mem.get(i) for i in ids}


async def _accesses(store: Path, memory_id: str) -> list:
    async with open_memory(store, OWNER) as mem:
        return [record for _, record in await mem.access_log(memory_id)]


async def _intents(store: Path) -> dict[str, bool]:
    async with open_memory(store, OWNER) as mem:
        return {i.id: i.armed for i in (await mem.intent("list")).intents}


def _order(text: str, *parts: str) -> list[int]:
    return [text.index(p) for p in parts]


# --------------------------------------------------------------------------- session start


def test_session_start_injects_open_todos_due_intents_and_the_projects_memories(
    store: Path, ids: dict[str, str], project: Path, env: dict[str, str]
) -> None:
    answer = run_hook(
        "session-start", recorded("session_start", project), env, "--store", str(store)
    )
    assert answer.code == 0, answer.stderr
    assert answer.event == "SessionStart"
    text = answer.context
    for shown in (
        "Renew the TLS certificate",
        "Write the quarterly report",
        "Check the nightly backup report",
        "The billing service exports invoices",
        "The production SSH keys",
        "release pipeline",
    ):
        assert shown in text, (shown, text)
    for hidden in (
        "Rotate the API keys",  # done
        "Prepare the demo",  # due tomorrow
        "invoice export runbook",  # a cue intent: nothing cued it
        "Lunch orders",  # LOW and not about the project
        "deploy-staging job",  # superseded
        "paused during the audit",  # stale
    ):
        assert hidden not in text, (hidden, text)
    # The project's own memory leads the memories; the important todo leads the todos.
    a, b = _order(text, "The billing service", "The production SSH keys")
    assert a < b
    a, b = _order(text, "Renew the TLS", "Write the quarterly")
    assert a < b


def test_what_session_start_shows_is_logged_injected_and_never_counts_as_use(
    store: Path, ids: dict[str, str], project: Path, env: dict[str, str]
) -> None:
    before = anyio.run(_views, store, [ids["billing"], ids["tls"]])
    payload = recorded("session_start", project)
    assert run_hook("session-start", payload, env, "--store", str(store)).context
    after = anyio.run(_views, store, [ids["billing"], ids["tls"]])
    for memory_id in (ids["billing"], ids["tls"]):
        newest = anyio.run(_accesses, store, memory_id)[0]
        assert newest.channel.value == "injected"
        assert newest.reader_owner == OWNER
        assert newest.session_ref == payload["session_id"]
        assert after[memory_id].channels.get("injected") == 1
        # DESIGN.md §3.1: injected never reinforces.
        assert after[memory_id].access_count == before[memory_id].access_count
        assert after[memory_id].strength == before[memory_id].strength
        assert after[memory_id].last_accessed_at == before[memory_id].last_accessed_at
    armed = anyio.run(_intents, store)
    assert armed[ids["backup"]] is False  # the due intent fired and is spent
    assert armed[ids["demo"]] is True and armed[ids["runbook"]] is True


def test_a_due_intent_fires_at_one_session_start_only(
    store: Path, ids: dict[str, str], project: Path, env: dict[str, str]
) -> None:
    payload = recorded("session_start", project)
    first = run_hook("session-start", payload, env, "--store", str(store)).context
    second = run_hook("session-start", payload, env, "--store", str(store)).context
    assert "Check the nightly backup report" in first
    assert "Check the nightly backup report" not in second
    assert "Renew the TLS certificate" in second


# --------------------------------------------------------------------------- each prompt


def test_a_prompt_gets_the_intents_it_cues_and_the_memories_relevant_to_it(
    store: Path, calm: dict[str, str], project: Path, env: dict[str, str]
) -> None:
    payload = recorded("user_prompt", project)
    answer = run_hook("user-prompt", payload, env, "--store", str(store))
    assert answer.code == 0, answer.stderr
    assert answer.event == "UserPromptSubmit"
    text = answer.context
    assert "Point the user at the invoice export runbook" in text  # the cue fired
    assert "The billing service exports invoices" in text
    assert "release pipeline" in text
    for hidden in ("deploy-staging job", "paused during the audit", "Lunch orders", "SSH keys"):
        assert hidden not in text, (hidden, text)
    assert len(text) < 10_000
    newest = anyio.run(_accesses, store, calm["billing"])[0]
    assert newest.channel.value == "injected" and newest.query == payload["prompt"][:200]
    assert anyio.run(_intents, store)[calm["runbook"]] is False


def test_a_prompt_with_nothing_relevant_gets_nothing_and_logs_nothing(
    store: Path, calm: dict[str, str], project: Path, env: dict[str, str]
) -> None:
    before = anyio.run(_views, store, list(calm.values()))
    payload = recorded("user_prompt", project, prompt="What is the capital of Mongolia?")
    answer = run_hook("user-prompt", payload, env, "--store", str(store))
    assert (answer.code, answer.stdout, answer.stderr) == (0, "", "")
    after = anyio.run(_views, store, list(calm.values()))
    assert {i: v.channels for i, v in after.items()} == {i: v.channels for i, v in before.items()}


def test_one_shared_word_is_not_enough_to_inject_a_memory(
    store: Path, calm: dict[str, str], project: Path, env: dict[str, str]
) -> None:
    payload = recorded("user_prompt", project, prompt="Order some pizza for the team")
    assert run_hook("user-prompt", payload, env, "--store", str(store)).context == ""
    payload = recorded("user_prompt", project, prompt="When are lunch orders due?")
    assert (
        "Lunch orders are due"
        in run_hook("user-prompt", payload, env, "--store", str(store)).context
    )


def test_a_one_shot_cue_intent_fires_for_one_prompt_only(
    store: Path, calm: dict[str, str], project: Path, env: dict[str, str]
) -> None:
    payload = recorded("user_prompt", project)
    first = run_hook("user-prompt", payload, env, "--store", str(store)).context
    second = run_hook("user-prompt", payload, env, "--store", str(store)).context
    assert "invoice export runbook" in first
    assert "invoice export runbook" not in second
    assert "The billing service exports invoices" in second


def test_the_injected_block_stays_far_below_what_claude_code_previews(
    store: Path, project: Path, env: dict[str, str]
) -> None:
    async def crowd() -> None:
        async with open_memory(store, OWNER) as mem:
            for i in range(40):
                await mem.todo("add", content=f"Invoice export task {i}: " + "details " * 400)
                await mem.author(
                    f"Invoice export note {i}: " + "context " * 800, importance="CRITICAL"
                )

    anyio.run(crowd)
    for event, name in (("session-start", "session_start"), ("user-prompt", "user_prompt")):
        text = run_hook(event, recorded(name, project), env, "--store", str(store)).context
        # README: under 4,000 characters; an item's text clipped at 300 (its line adds the id,
        # type and importance, under 40 more). Stated here, not imported from the code.
        assert 0 < len(text) <= 4_000
        assert all(len(line) <= 300 + 40 for line in text.splitlines())


# --------------------------------------------------------------------------- owner and store


async def _two_owners(store: Path) -> None:
    for owner, text in (
        ("alice@laptop", "Alice keeps the invoice export credentials in her keychain"),
        ("bob@laptop", "Bob runs the invoice export by hand on Mondays"),
        (OWNER, "The invoice export job is scheduled in the billing cron"),
    ):
        async with open_memory(store, owner) as mem:
            await mem.author(text)


def test_the_hook_owner_comes_from_configuration_and_never_from_the_hook_json(
    store: Path, project: Path, tmp_path: Path
) -> None:
    anyio.run(_two_owners, store)
    payload = recorded("user_prompt", project, owner="bob@laptop", reader_owner="bob@laptop")
    alice = run_hook(
        "user-prompt", payload, hook_env(tmp_path, NOOA_OWNER="alice@laptop"), "--store", str(store)
    ).context
    assert "Alice keeps" in alice and "Bob runs" not in alice and "billing cron" not in alice
    by_flag = run_hook(
        "user-prompt", payload, hook_env(tmp_path), "--owner", "alice@laptop", "--store", str(store)
    ).context
    assert "Alice keeps" in by_flag and "Bob runs" not in by_flag
    default = run_hook("user-prompt", payload, hook_env(tmp_path), "--store", str(store)).context
    assert "billing cron" in default and "Alice keeps" not in default and "Bob runs" not in default


def test_a_project_store_under_the_working_directory_is_the_hooks_store(
    project: Path, tmp_path: Path
) -> None:
    async def write() -> None:
        async with open_memory(project / ".nooa" / "memory.sqlite", OWNER) as mem:
            await mem.author("Invoice numbers restart every fiscal year", importance="HIGH")

    anyio.run(write)
    deep = project / "invoices"
    # The user trusts the project's store (a store found in a checkout is read only then).
    trusted = CliRunner().invoke(
        main, ["hooks", "trust", str(project)], env={"XDG_CONFIG_HOME": str(tmp_path / "config")}
    )
    assert trusted.exit_code == 0, trusted.output
    text = run_hook("session-start", recorded("session_start", deep), hook_env(tmp_path)).context
    assert "Invoice numbers restart every fiscal year" in text
    # An explicit store wins over the project's.
    other = tmp_path / "other.sqlite"
    assert (
        run_hook(
            "session-start",
            recorded("session_start", deep),
            hook_env(tmp_path),
            "--store",
            str(other),
        ).context
        == ""
    )


def test_a_missing_store_is_nothing_to_inject_and_is_not_created(
    tmp_path: Path, project: Path, env: dict[str, str]
) -> None:
    missing = tmp_path / "nowhere" / "memory.sqlite"
    for event, name in (("session-start", "session_start"), ("user-prompt", "user_prompt")):
        answer = run_hook(event, recorded(name, project), env, "--store", str(missing))
        assert (answer.code, answer.stdout) == (0, "")
    assert not missing.parent.exists()
    assert log_lines(tmp_path) == []


def test_a_store_of_an_older_schema_is_answered_through_the_full_store_code(
    store: Path, ids: dict[str, str], project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    with sqlite3.connect(store) as conn:
        conn.execute("PRAGMA user_version = 1")
    # The full store code imports the whole package: more than the default 2 s under load.
    env = {**env, "NOOA_HOOK_SECONDS": "60"}
    text = run_hook("user-prompt", recorded("user_prompt", project), env, "--store", str(store))
    assert "The billing service exports invoices" in text.context
    assert any("schema version 1" in line for line in log_lines(tmp_path))


# --------------------------------------------------------------------------- never break a prompt


def test_any_failure_prints_nothing_exits_zero_and_leaves_one_log_line(
    store: Path, ids: dict[str, str], project: Path, tmp_path: Path
) -> None:
    env = hook_env(tmp_path)
    foreign = tmp_path / "photos.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, path TEXT)")
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database at all" * 100)
    cases = [
        ("user-prompt", "not json {", ["--store", str(store)], "not JSON"),
        ("user-prompt", "[1, 2, 3]", ["--store", str(store)], "not a JSON object"),
        # A prompt that is no text was read as an empty one: no answer and no log line.
        ("user-prompt", '{"prompt": 5}', ["--store", str(store)], "'prompt' is int, not text"),
        ("user-prompt", '{"prompt": "hi", "cwd": 5}', ["--store", str(store)], "'cwd' is int"),
        ("user-prompt", recorded("user_prompt", project), ["--owner", "bad owner!"], "owner"),
        (
            "session-start",
            recorded("session_start", project),
            ["--store", str(tmp_path)],
            "directory",
        ),
        ("user-prompt", recorded("user_prompt", project), ["--store", str(foreign)], "not a nooa"),
        ("user-prompt", recorded("user_prompt", project), ["--store", str(garbage)], "not a nooa"),
    ]
    for number, (event, payload, args, said) in enumerate(cases, 1):
        answer = run_hook(event, payload, env, *args)
        assert (answer.code, answer.stdout, answer.stderr) == (0, "", ""), (args, answer)
        lines = log_lines(tmp_path)
        assert len(lines) == number, lines
        assert said in lines[-1], lines[-1]
        assert "Traceback" not in lines[-1]
    # Another application's file is never changed.
    with sqlite3.connect(foreign) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    assert tables == ["photos"]


def test_a_locked_store_gives_up_within_the_hook_budget_and_prints_nothing(
    store: Path, calm: dict[str, str], project: Path, tmp_path: Path
) -> None:
    env = hook_env(tmp_path, NOOA_HOOK_SECONDS="1")
    holder = sqlite3.connect(store, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        answer = run_hook(
            "user-prompt", recorded("user_prompt", project), env, "--store", str(store)
        )
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert (answer.code, answer.stdout) == (0, "")
    assert "locked" in log_lines(tmp_path)[-1]
    # Nothing was half-written: the cue intent is still armed and fires on the next prompt.
    again = run_hook("user-prompt", recorded("user_prompt", project), env, "--store", str(store))
    assert "invoice export runbook" in again.context


def test_a_server_that_does_not_answer_is_given_up_on_and_the_store_answers(
    store: Path, calm: dict[str, str], project: Path, tmp_path: Path
) -> None:
    env = hook_env(tmp_path, NOOA_HOOK_SECONDS="1.5")
    with socket.socket() as silent:  # accepts connections (backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        payload = recorded("user_prompt", project)
        answer = run_hook("user-prompt", payload, env, "--store", str(store), after=("--url", url))
    assert answer.code == 0
    assert "The billing service exports invoices" in answer.context
    assert "did not answer" in log_lines(tmp_path)[-1]


def test_a_refused_connection_falls_back_to_the_store(
    store: Path, ids: dict[str, str], project: Path, tmp_path: Path
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        env = hook_env(tmp_path, NOOA_URL=f"http://127.0.0.1:{port}")
        answer = run_hook(
            "session-start", recorded("session_start", project), env, "--store", str(store)
        )
    assert "Renew the TLS certificate" in answer.context
    assert "did not answer" in log_lines(tmp_path)[-1]


# --------------------------------------------------------------------------- the two ways in


def test_the_cli_hook_command_answers_like_the_console_script(
    store: Path,
    calm: dict[str, str],
    project: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("NOOA_OWNER", "NOOA_URL", "NOOA_STORE", "NOOA_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    payload = recorded(
        "user_prompt", project, prompt="Where do the invoices get exported every night?"
    )
    result = CliRunner().invoke(
        main, ["--store", str(store), "hook", "user-prompt"], input=json.dumps(payload)
    )
    assert result.exit_code == 0, result.output
    by_cli = json.loads(result.stdout)["hookSpecificOutput"]
    assert by_cli["hookEventName"] == "UserPromptSubmit"
    assert "The billing service exports invoices" in by_cli["additionalContext"]
    assert "--url" in CliRunner().invoke(main, ["hook", "user-prompt", "--help"]).output


def test_the_keyword_path_never_imports_the_model_numpy_pydantic_or_the_cli(
    store: Path, calm: dict[str, str], project: Path, env: dict[str, str]
) -> None:
    probe = (
        "import sys\n"
        "from nooa_mcp.__main__ import main\n"
        f"sys.argv = ['nooa-mcp', '--store', {str(store)!r}, 'hook', 'user-prompt']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = ['numpy', 'pydantic', 'onnxruntime', 'tokenizers', 'click', 'anyio', "
        "'aiosqlite', 'mcp', 'nooa_mcp.memory']\n"
        "print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        input=json.dumps(recorded("user_prompt", project)),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert "The billing service exports invoices" in done.stdout
    assert done.stderr.strip() == "[]", done.stderr


def test_a_mistyped_hook_command_never_blocks_the_prompt(
    store: Path, calm: dict[str, str], project: Path, tmp_path: Path
) -> None:
    """Claude Code blocks a prompt when a UserPromptSubmit hook exits 2, click's usage error."""
    env = hook_env(tmp_path)
    payload = recorded("user_prompt", project)
    for args, after in (
        (("--store", str(store)), ("--bogus",)),
        (("--stor", str(store)), ()),
        (("--store", str(store)), ("--url",)),
    ):
        answer = run_hook("user-prompt", payload, env, *args, after=after)
        assert (answer.code, answer.stdout) == (0, ""), (args, after, answer)
        assert "the hook command is wrong" in log_lines(tmp_path)[-1]
    helped = run_hook("user-prompt", payload, env, after=("--help",))
    assert helped.code == 0 and "--url" in helped.stdout
