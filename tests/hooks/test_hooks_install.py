"""`nooa-mcp hooks install|uninstall` on scratch Claude Code settings files."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner
from hooks_support import hook_env, open_memory, recorded
from writes_support import console_script

from nooa_mcp.cli import main

#: A user's settings with hooks of other tools, on the same events and on others.
THEIRS = {
    "model": "opus",
    "permissions": {"allow": ["Bash(npm run lint)"]},
    "hooks": {
        "UserPromptSubmit": [
            {"hooks": [{"type": "command", "command": "~/bin/prompt-guard.sh", "timeout": 5}]}
        ],
        "PreToolUse": [
            {
                "matcher": "Bash",
                "hooks": [{"type": "command", "command": "~/bin/check-bash.sh"}],
            }
        ],
    },
}


def cli(*args: str, owner: str | None = None):
    prefix = ["--owner", owner] if owner else []
    return CliRunner().invoke(main, [*prefix, "hooks", *args], catch_exceptions=False)


def ours(settings: dict, event: str) -> list[dict]:
    return [h for group in settings["hooks"].get(event, []) for h in group["hooks"]]


@pytest.fixture
def settings(tmp_path: Path) -> Path:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(json.dumps(THEIRS, indent=4) + "\n")
    return path


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("NOOA_OWNER", "NOOA_STORE", "NOOA_URL", "NOOA_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def test_install_merges_its_hooks_and_keeps_every_other_hook_and_setting(settings: Path) -> None:
    done = cli("install", "--settings", str(settings), "--command", "nooa-mcp", owner="me@code")
    assert done.exit_code == 0, done.output
    after = json.loads(settings.read_text())
    assert after["model"] == "opus" and after["permissions"] == THEIRS["permissions"]
    assert after["hooks"]["PreToolUse"] == THEIRS["hooks"]["PreToolUse"]
    prompt = ours(after, "UserPromptSubmit")
    assert prompt[0] == THEIRS["hooks"]["UserPromptSubmit"][0]["hooks"][0]
    assert prompt[1] == {
        "type": "command",
        "command": "nooa-mcp --owner me@code hook user-prompt",
        "timeout": 10,
    }
    assert ours(after, "SessionStart") == [
        {"type": "command", "command": "nooa-mcp --owner me@code hook session-start", "timeout": 10}
    ]


def test_install_twice_changes_nothing_and_a_new_option_replaces_the_old_entry(
    settings: Path,
) -> None:
    cli("install", "--settings", str(settings), "--command", "nooa-mcp")
    first = settings.read_text()
    again = cli("install", "--settings", str(settings), "--command", "nooa-mcp")
    assert again.exit_code == 0 and "No change" in again.output
    assert settings.read_text() == first
    cli("install", "--settings", str(settings), "--command", "nooa-mcp", owner="me@code")
    commands = [h["command"] for h in ours(json.loads(settings.read_text()), "SessionStart")]
    assert commands == ["nooa-mcp --owner me@code hook session-start"]


def test_uninstall_removes_exactly_what_install_added(settings: Path, tmp_path: Path) -> None:
    cli("install", "--settings", str(settings), "--url", "http://127.0.0.1:8765")
    removed = cli("uninstall", "--settings", str(settings))
    assert removed.exit_code == 0, removed.output
    assert json.loads(settings.read_text()) == THEIRS
    # A file install created is left as an empty object: nothing of nooa's remains.
    fresh = tmp_path / "fresh" / "settings.json"
    cli("install", "--settings", str(fresh))
    cli("uninstall", "--settings", str(fresh))
    assert json.loads(fresh.read_text()) == {}
    assert "No change" in cli("uninstall", "--settings", str(fresh)).output


def test_uninstall_keeps_a_users_own_hook_that_shares_a_group_with_nooas(
    settings: Path,
) -> None:
    cli("install", "--settings", str(settings), "--command", "nooa-mcp")
    data = json.loads(settings.read_text())
    group = data["hooks"]["SessionStart"][0]
    group["hooks"].append({"type": "command", "command": "echo started"})
    settings.write_text(json.dumps(data))
    cli("uninstall", "--settings", str(settings))
    after = json.loads(settings.read_text())
    assert after["hooks"]["SessionStart"] == [
        {"hooks": [{"type": "command", "command": "echo started"}]}
    ]
    assert after["hooks"]["UserPromptSubmit"] == THEIRS["hooks"]["UserPromptSubmit"]


def test_dry_run_prints_the_diff_and_writes_nothing(settings: Path) -> None:
    before = settings.read_text()
    shown = cli("install", "--settings", str(settings), "--command", "nooa-mcp", "--dry-run")
    assert shown.exit_code == 0, shown.output
    assert settings.read_text() == before
    added = [line for line in shown.output.splitlines() if line.startswith("+") and "hook " in line]
    assert any("hook session-start" in line for line in added)
    assert any("hook user-prompt" in line for line in added)
    assert shown.output.startswith("---")
    cli("install", "--settings", str(settings), "--command", "nooa-mcp")
    after = settings.read_text()
    undo = cli("uninstall", "--settings", str(settings), "--dry-run")
    assert settings.read_text() == after
    assert any(
        line.startswith("-") and "hook user-prompt" in line for line in undo.output.splitlines()
    )


def test_install_refuses_a_settings_file_that_is_not_json_and_leaves_it_as_it_was(
    tmp_path: Path,
) -> None:
    broken = tmp_path / "settings.json"
    broken.write_text('{"hooks": {"SessionStart": [}\n')
    done = cli("install", "--settings", str(broken))
    assert done.exit_code == 1
    assert str(broken) in done.output and "not valid JSON" in done.output
    assert "Traceback" not in done.output
    assert broken.read_text() == '{"hooks": {"SessionStart": [}\n'
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"hooks": {"UserPromptSubmit": "nooa"}}')
    refused = cli("uninstall", "--settings", str(wrong))
    assert refused.exit_code == 1 and "UserPromptSubmit" in refused.output


def test_http_hooks_post_to_the_servers_hook_route_and_uninstall_removes_them(
    settings: Path,
) -> None:
    url = "http://127.0.0.1:8765/mcp"
    done = cli("install", "--settings", str(settings), "--url", url, "--http", "--token-env", "T")
    assert done.exit_code == 0, done.output
    after = json.loads(settings.read_text())
    assert ours(after, "SessionStart") == [
        {
            "type": "http",
            "url": "http://127.0.0.1:8765/hooks",
            "timeout": 10,
            "allowedEnvVars": ["T"],
            "headers": {"X-Nooa-Hook": "1", "Authorization": "Bearer $T"},
        }
    ]
    cli("uninstall", "--settings", str(settings))
    assert json.loads(settings.read_text()) == THEIRS
    refused = cli("install", "--settings", str(settings), "--http")
    assert refused.exit_code == 1 and "--url" in refused.output


def test_the_scopes_name_claude_codes_settings_files(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    for scope, path in (
        ("user", tmp_path / "home" / ".claude" / "settings.json"),
        ("project", tmp_path / ".claude" / "settings.json"),
        ("local", tmp_path / ".claude" / "settings.local.json"),
    ):
        assert cli("install", "--scope", scope).exit_code == 0
        command = ours(json.loads(path.read_text()), "UserPromptSubmit")[0]["command"]
        # A shared project file names the command; a personal one this installation's path,
        # which Claude Code finds whatever its PATH.
        program = "nooa-mcp" if scope == "project" else (shutil.which("nooa-mcp") or "nooa-mcp")
        assert command == f"{program} hook user-prompt"


def test_an_installed_hook_answers_the_recorded_hook_json(tmp_path: Path) -> None:
    """The whole flow: install into a scratch settings file, run what Claude Code would run."""
    store = tmp_path / "memory.sqlite"
    project = tmp_path / "src" / "billing"
    (project / ".git").mkdir(parents=True)

    async def remember() -> None:
        async with open_memory(store, "me@code") as mem:
            await mem.author(
                "The invoice export runs from the billing cron at 02:00", tags=["billing"]
            )
            await mem.todo("add", content="Fix the invoice export retry", importance="HIGH")

    anyio.run(remember)
    settings = tmp_path / "settings.json"
    done = CliRunner().invoke(
        main,
        [
            "--owner",
            "me@code",
            "--store",
            str(store),
            "hooks",
            "install",
            "--settings",
            str(settings),
            "--command",
            console_script(),
            "--deadline",
            "5",
        ],
    )
    assert done.exit_code == 0, done.output
    installed = json.loads(settings.read_text())["hooks"]
    # The deadline is written after the event, where the console script reads it.
    assert installed["SessionStart"][0]["hooks"][0]["command"].endswith(
        "hook session-start --deadline 5"
    )
    env = hook_env(tmp_path)
    answers = {}
    for event, name in (("SessionStart", "session_start"), ("UserPromptSubmit", "user_prompt")):
        command = installed[event][0]["hooks"][0]["command"]
        run = subprocess.run(
            command,
            shell=True,
            input=json.dumps(recorded(name, project)),
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert run.returncode == 0, run.stderr
        output = json.loads(run.stdout)["hookSpecificOutput"]
        assert output["hookEventName"] == event
        answers[event] = output["additionalContext"]
    assert "Fix the invoice export retry" in answers["SessionStart"]
    assert "billing cron at 02:00" in answers["SessionStart"]
    assert "billing cron at 02:00" in answers["UserPromptSubmit"]


@pytest.mark.parametrize("flags", [[], ["--http"]], ids=["command", "http"])
@pytest.mark.parametrize("url", ["notaurl", "http://", "http://exa mple/mcp", "http://h:99999"])
def test_install_refuses_a_url_that_is_not_http(settings: Path, flags: list[str], url) -> None:
    """`--url notaurl` was written into both hooks, to fail at the first prompt (auditor);
    so were a URL without a host, with a space, with a port no socket has (re-tester)."""
    before = settings.read_text()
    done = cli("install", "--settings", str(settings), "--url", url, *flags)
    assert done.exit_code == 1
    assert f"url: {url!r} is not an http(s) URL" in done.output
    assert settings.read_text() == before
