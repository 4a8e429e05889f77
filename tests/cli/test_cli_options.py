"""The CLI's options and input as a new user meets them: `--reference-root` named in the error
and working, `--store` and NOOA_STORE for `eval replay`, `author -` reading stdin, `--json`
before or after the command on every memory command, an intent refused without a trigger,
`stats` never saying the model is warming, `explain` on an empty store answering a sentence.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from writes_support import Cli, hash_cli, model_cli


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    return hash_cli(tmp_path, monkeypatch)


# --------------------------------------------------------------------------- reference root


def test_the_reference_root_error_names_an_option_that_exists_and_the_option_works(
    cli: Cli, tmp_path: Path
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "runbook.md").write_text("Restart the queue workers before the database.\n")
    missing = cli("author", "How to restart the stack", "--ref", "file:runbook.md")
    assert missing.exit_code == 1, missing.output
    assert "--reference-root" in missing.output and "NOOA_REFERENCE_ROOT" in missing.output
    assert "Traceback" not in missing.output
    written = cli(
        "--reference-root",
        str(root),
        "author",
        "How to restart the stack",
        "--ref",
        "file:runbook.md",
    )
    assert written.exit_code == 0, written.output
    recalled = cli.json("--reference-root", str(root), "recall", "restart the stack", "--json")
    refs = recalled["hits"][0]["references"]
    assert [(r["uri"], r["state"]) for r in refs] == [("file:runbook.md", "LIVE")]
    assert "Restart the queue workers" in refs[0]["value"]


# --------------------------------------------------------------------------- eval replay


def _store_with_three_recalls(cli: Cli, path: Path) -> None:
    for text in (
        "The deploy key lives in the 1Password vault",
        "The staging database restarts at midnight",
        "Team lunch is on Fridays at noon",
    ):
        assert cli("--store", str(path), "author", text).exit_code == 0
    for query in ("deploy key", "staging database", "team lunch"):
        assert cli("--store", str(path), "recall", query, "-k", "2").exit_code == 0


def test_eval_replay_replays_the_store_named_by_the_global_option_or_the_environment(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = tmp_path / "mine.sqlite"
    _store_with_three_recalls(cli, mine)
    by_option = cli.json("--store", str(mine), "eval", "replay", "--json")
    assert by_option["events"] == 3, by_option
    monkeypatch.setenv("NOOA_STORE", str(mine))
    by_env = cli.json("eval", "replay", "--json")
    assert by_env["events"] == 3


def test_the_synthetic_replay_workload_needs_the_synthetic_flag(cli: Cli) -> None:
    synthetic = cli.json(
        "eval", "replay", "--synthetic", "--sessions", "2", "--embedder", "hash", "--json"
    )
    assert synthetic["events"] > 0


# --------------------------------------------------------------------------- author from stdin


def test_author_dash_reads_long_text_from_stdin(cli: Cli) -> None:
    text = "\n".join(f"Line {i}: the release checklist step number {i}." for i in range(120))
    written = cli("author", "-", input=text + "\n")
    assert written.exit_code == 0, written.output
    exported = [json.loads(line) for line in cli("export").stdout.splitlines()]
    assert [m["content"] for m in exported] == [text]


def test_code_keeps_its_first_lines_indentation_through_export_and_import(
    cli: Cli, tmp_path: Path
) -> None:
    """Only blank lines before the text and whitespace after it go: stripping both ends took
    the first line's indentation off a snippet, and its shape with it."""
    code = "    def total(rows):\n        return sum(r.amount for r in rows)"
    assert cli("author", "-", input="\n  \n" + code + "\n\n").exit_code == 0
    exported = cli("export").stdout
    assert [json.loads(line)["content"] for line in exported.splitlines()] == [code]
    (tmp_path / "moved.jsonl").write_text(exported)
    other = str(tmp_path / "other.sqlite")
    assert cli("--store", other, "import", str(tmp_path / "moved.jsonl")).exit_code == 0
    assert Path(other).exists()
    moved = cli("--store", other, "export").stdout.splitlines()
    assert [json.loads(line)["content"] for line in moved] == [code]


# --------------------------------------------------------------------------- --json everywhere


def test_json_is_accepted_as_a_global_option(cli: Cli) -> None:
    assert cli("author", "The backup runs at 3am").exit_code == 0
    stats = cli.json("--json", "stats")
    assert stats["total"] == 1
    recalled = cli.json("--json", "recall", "backup")
    assert recalled["hits"][0]["content"] == "The backup runs at 3am"


def test_export_json_prints_one_json_array(cli: Cli) -> None:
    for text in ("first memory to move", "second memory to move"):
        assert cli("author", text).exit_code == 0
    exported = cli.json("export", "--json")
    assert isinstance(exported, list)
    assert [m["content"] for m in exported] == ["first memory to move", "second memory to move"]


def test_every_memory_command_takes_json(cli: Cli) -> None:
    commands = ["author", "recall", "explain", "stats", "import", "export", "reflect"]
    without = [c for c in commands if "--json" not in cli(c, "--help").output]
    assert without == []


# --------------------------------------------------------------------------- intents need triggers


def test_the_cli_refuses_an_intent_without_a_trigger(cli: Cli) -> None:
    out = cli("author", "Call the landlord about the heating", "--type", "intent")
    assert out.exit_code != 0
    assert "Error: --fire-at/--cue: an intent needs a time or a cue" in out.output, out.output
    assert "Pass --fire-at (" in out.output and ", --cue (" in out.output
    assert "fire_at" not in out.output and "Traceback" not in out.output
    assert "No store at" in cli("stats").output  # refused in a new store: none is left
    cli("author", "The boiler is serviced every October")
    cli("author", "Call the landlord about the heating", "--type", "intent")
    assert cli.json("stats", "--json")["total"] == 1


def test_cli_refusals_name_the_flag_not_the_tools_field(cli: Cli) -> None:
    """The services name a bad argument by the tool's field (`links.target`); a person at a
    terminal typed a flag, so the sentence names the flag."""
    first = cli.json("author", "The boiler is serviced every October", "--json")["id"]
    refusals = {
        ("--link", "deadbeef"): "Error: --link: no memory with id 'deadbeef'.",
        ("--link", f"{first[:8]}:fixes"): "Error: --link: 'fixes' is not a relation.",
        ("--importance", "12"): "Error: --importance: '12' is outside 0–10.",
        ("--ref", "bogus:x"): "Error: --ref: 'bogus:x' has no known kind.",
        ("--valid-from", "2027-01-01", "--valid-to", "2026-01-01"): (
            "Error: --valid-to: is before --valid-from."
        ),
    }
    for flags, sentence in refusals.items():
        out = cli("author", "The boiler needs a new valve", *flags)
        assert out.exit_code == 1 and sentence in out.output, (flags, out.output)
        assert "links." not in out.output and "valid_from" not in out.output
    assert cli("author", "").output.startswith("Error: TEXT: is empty.")
    wrong = cli("author", "x", "--type", "wrong").output
    assert "Error: --type: 'wrong' is not a memory type." in wrong
    assert "Error: --hops: 9 is not between 0 and 3." in cli("recall", "x", "--hops", "9").output
    empty = cli("author", "x", "--link", f"{first[:8]}:")
    assert empty.exit_code == 2 and "names no relation after the colon" in empty.output
    # The type is read as the services read it, whatever its case.
    assert (
        cli.json("author", "Ping the lab", "--type", "INTENT", "--cue", "lab results", "--json")[
            "status"
        ]
        == "created"
    )
    assert "Error: --id: no memory with id 'abcdef12'." in cli("explain", "--id", "abcdef12").output
    assert cli.json("stats", "--json")["total"] == 2


# --------------------------------------------------------------------------- stats and explain


@pytest.mark.real_model
def test_cli_stats_never_says_the_model_is_warming(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = model_cli(tmp_path, monkeypatch)
    assert cli("reflect").exit_code == 0  # a write: creates the store, empty
    table = cli("stats")
    assert table.exit_code == 0, table.output
    assert "warming" not in table.output
    assert "warming" not in json.dumps(cli.json("stats", "--json"))


def test_stats_names_the_whole_store_path_and_prints_no_python_none(cli: Cli) -> None:
    """Which file was counted is the first thing a person checks; an empty value reads as a
    dash, not as Python's None."""
    assert cli("author", "Deploys go out on Tuesdays").exit_code == 0
    out = cli("stats")
    assert out.exit_code == 0, out.output
    assert f"sqlite:{cli.store}" in out.output
    assert "None" not in out.output
    assert "last_reflection_at" in out.output
    assert cli.json("stats", "--json")["extra"]["last_reflection_at"] is None


def test_explain_on_an_empty_store_prints_a_sentence(cli: Cli) -> None:
    assert cli("reflect").exit_code == 0  # a write: creates the store, empty
    out = cli("explain", "x")
    assert out.exit_code == 0, out.output
    text = out.output.strip()
    assert text and text.endswith("."), repr(out.output)
    assert "score" not in text


# --------------------------------------------------------------------------- flags, not arguments


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["explain"], "Give a QUERY, --id ID, or both."),
        (["recall", "keys", "-k", "0"], "0 is not in the range 1<=x<=50"),
        (["explain", "keys", "-k", "51"], "51 is not in the range 1<=x<=50"),
        (
            ["author", "A fact", "--fire-at", "2030-01-01"],
            "--fire-at is for intents: add --type intent (the type given is info).",
        ),
        (
            ["author", "A todo", "--type", "todo", "--cue", "rent", "--every-hours", "2"],
            "--cue and --every-hours are for intents",
        ),
        (
            ["author", "Call the bank", "--type", "intent", "--fire-at", "tomorrow"],
            "'tomorrow' is not an ISO 8601 time: write e.g. 2030-01-01T09:00 (local time)",
        ),
    ],
)
def test_the_cli_names_its_own_flags_when_it_refuses(cli: Cli, args: list[str], said: str) -> None:
    """A person at the terminal reads the CLI's flags (--id, -k, --type intent), not the
    names of the tools' arguments (memory_id, type=intent); nothing is written."""
    assert cli("reflect").exit_code == 0  # the store exists, empty
    out = cli(*args)
    assert out.exit_code == 2, out.output
    assert said in out.output
    assert "memory_id" not in out.output and "type=intent" not in out.output
    assert cli.json("stats", "--json")["total"] == 0


def test_explain_prints_the_terms_each_score_adds_up_to(cli: Cli) -> None:
    """The table's terms column and the why-not line: each score beside the terms that make
    it, so a reader can check it (the raw parts beside them do not add up to it)."""
    keys = cli("author", "The production SSH keys are in the team vault").output.split()[1]
    cli("author", "Lunch orders are due by 11am on Fridays")
    data = cli.json("explain", "where are the SSH keys", "--json")
    out = cli("explain", "where are the SSH keys")
    assert "= rel'+rec'+imp' (scaled, weighted)" in out.output
    for row in data["rows"]:
        t = row["terms"]
        assert f"{t['rel']:.3f}+{t['rec']:.3f}+{t['imp']:.3f}" in out.output
    why = cli("explain", "lunch orders", "--id", keys[:8], "-k", "1")
    line = next(x for x in why.output.splitlines() if x.startswith("score "))
    assert re.fullmatch(r"score [\d.-]+ = [\d.+-]+.*; rank 1's [\d.]+ = [\d.+-]+.*", line), line


def test_author_links_and_bounds_a_memory_from_the_shell(cli: Cli) -> None:
    """--link ID[:RELATION] and --valid-to, as the tools' links and valid_to: a correction
    ranks its predecessor below it (superseded), an ended fact is flagged stale, and explain
    --hops 0 searches without spreading."""
    old = cli("author", "The VPN password rotates every 90 days", "--importance", "CRITICAL")
    old_id = old.output.split()[1]
    new = cli("author", "The VPN password rotates every 30 days", "--link", f"{old_id[:8]}:refines")
    assert new.exit_code == 0, new.output
    ended = cli("author", "The VPN runs on the old firewall", "--valid-to", "2026-01-01T00:00")
    assert ended.exit_code == 0, ended.output
    related = cli("author", "VPN tokens live in the vault", "--link", old_id[:8])
    assert related.exit_code == 0, related.output
    rows = {r["id"]: r for r in cli.json("explain", "VPN password rotates", "--json")["rows"]}
    assert rows[old_id]["flags"]["superseded_by"] == new.output.split()[1]
    assert rows[ended.stdout.split()[1]]["flags"]["stale"] is True  # the note is on stderr
    exported = [json.loads(x) for x in cli("export").stdout.splitlines()]
    edges = {(x["id"], e["target"], e["type"]) for x in exported for e in x.get("edges", [])}
    assert (related.output.split()[1], old_id, "related") in edges
    searched = cli.json("explain", "VPN tokens", "--hops", "0", "--json")["rows"]
    assert all(r["spread"] == 0 for r in searched)
    bad = cli("author", "x", "--link", f"{old_id[:8]}:frobs")
    assert bad.exit_code != 0 and "'frobs' is not a relation" in bad.output


def test_a_protected_memory_shows_no_prune_date_in_recall_or_why_not(cli: Cli) -> None:
    """DESIGN §7.3: pruning never takes a HIGH memory, so no reply gives it a prune date; an
    unprotected one keeps its date."""
    high = cli.json("author", "The vault key rotates monthly", "--importance", "HIGH", "--json")
    plain = cli.json("author", "The vault door squeaks", "--json")
    hits = {h["id"]: h for h in cli.json("recall", "vault", "--json")["hits"]}
    assert hits[high["id"]]["prune_eta"] is None
    assert hits[plain["id"]]["prune_eta"] is not None
    shown = cli("explain", "vault key", "--id", high["id"][:8]).output
    assert shown.rstrip().endswith("retention 1.000, never pruned (protected)"), shown
    other = cli("explain", "vault key", "--id", plain["id"][:8]).output
    assert "prune ETA" in other and "never pruned" not in other


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("NOOA_VECTOR_IDLE_SECONDS", "abc", "valid number"),
        ("NOOA_VECTOR_MAX_ROLES", "-5", "greater than or equal to 0"),
        ("NOOA_MAX_SESSIONS_PER_CLIENT", "abc", "valid integer"),
        ("NOOA_GENERATIVE_REFLECTION", "perhaps", "valid boolean"),
        ("NOOA_REFLECT_IDLE_SECONDS", "-1", "greater than or equal to 0"),
        ("NOOA_REFLECT_IDLE_SECONDS", "10m", "valid number"),
    ],
)
def test_a_bad_environment_variable_is_named_in_one_sentence(
    tmp_path: Path, variable: str, value: str, said: str
) -> None:
    """It ended in pydantic's ValidationError traceback (and a stdio server died of it)."""
    from shared_support import cli as run_cli

    result = run_cli(["--store", str(tmp_path / "m.sqlite"), "stats"], **{variable: value})
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    (line,) = [x for x in result.output.splitlines() if x.strip()]
    assert line.startswith(f"Error: {variable}: '{value}' is not accepted: ") and said in line
    assert line.endswith("Correct it, or unset it for the default.")


@pytest.mark.parametrize(
    "args",
    [["serve", "--transport", "http", "--port", "99999"], ["ui", "--port", "70000"]],
    ids=["serve", "ui"],
)
def test_a_port_past_65535_is_refused_by_the_option(args: list[str]) -> None:
    from shared_support import cli as run_cli

    result = run_cli(args)
    assert result.exit_code == 2
    assert "Invalid value for '--port'" in result.output and "0<=x<=65535" in result.output


@pytest.mark.parametrize(
    ("store", "said"),
    [
        ("mysql://127.0.0.1/x", "mysql:// is not a store nooa-mcp can open."),
        ("", "is empty."),
        ("file:m.sqlite", "'file:m.sqlite' is a file: URI."),
    ],
    ids=["other-scheme", "empty", "file-uri"],
)
def test_a_store_that_is_no_path_nor_postgres_is_refused(tmp_path, monkeypatch, store, said):
    """mysql://… was taken as a path: folders ./mysql:/127.0.0.1 and a new store in them;
    an empty --store opened "." and said it is a directory (auditor)."""
    from shared_support import cli as run_cli

    monkeypatch.chdir(tmp_path)
    result = run_cli(["--store", store, "author", "hi"])
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert f"Error: --store (or NOOA_STORE): {said}" in result.output
    assert list(tmp_path.iterdir()) == []


def test_generative_reflection_is_turned_on_by_its_variable(monkeypatch) -> None:
    """It had no variable or flag: a client offering sampling heard that reconcile "needs a
    client's model", as if it were the client's fault (newcomer helper)."""
    from nooa_mcp.config import Settings

    monkeypatch.delenv("NOOA_GENERATIVE_REFLECTION", raising=False)
    assert Settings.from_env().generative_reflection is False
    monkeypatch.setenv("NOOA_GENERATIVE_REFLECTION", " 1 ")
    assert Settings.from_env().generative_reflection is True


# --------------------------------------------------------------------------- variables


@pytest.mark.parametrize(
    ("variable", "value", "option"),
    [
        ("NOOA_JSON", "abc", "--json"),
        ("NOOA_REFERENCE_ROOT", __file__, "--reference-root"),
        ("NOOA_OWNER", "bad owner!!", "--owner"),
        ("NOOA_READ", "!!", "--read"),
    ],
)
def test_a_bad_variable_is_named_not_the_option_nobody_typed(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, variable: str, value: str, option: str
) -> None:
    monkeypatch.setenv(variable, value)
    refused = cli("stats")
    assert refused.exit_code == 2, refused.output
    assert f"'{variable}'" in refused.output and option not in refused.output.split("Error:")[1]
    assert "Traceback" not in refused.output


def test_a_bad_typed_option_is_still_named_as_typed(cli: Cli) -> None:
    refused = cli("--reference-root", __file__, "stats")
    assert refused.exit_code == 2 and "'--reference-root'" in refused.output, refused.output


def test_a_bad_store_variable_is_not_read_when_a_store_is_typed(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("NOOA_STORE", "mysql://h/db")
    typed = tmp_path / "typed.sqlite"
    written = cli("--store", str(typed), "author", "Typed over a bad variable.")
    assert written.exit_code == 0, written.output
    assert typed.exists()
