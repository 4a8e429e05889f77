"""`nooa-mcp import` checks each line's types and sizes, by line number, before the first write,
and reads a bounded line at a time.

Before: `tags: "abc"` was stored as the tags a, b, c; `tags: 5`, `created_at: 12345` and
`importance: 10**400` ended in tracebacks; malformed edges were skipped without a word; a
200 MB line cost 656 MiB before it was refused; a 5 MB tombstone reason was stored.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from shared_support import cli, exited_cleanly, process_env

GOOD = {"content": "The release train leaves on Fridays."}


def _dump(tmp_path: Path, *lines: dict | str) -> Path:
    path = tmp_path / "dump.jsonl"
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def _import(store: Path, dump: Path):
    return cli(["--store", str(store), "--owner", "alice", "import", str(dump), "--json"])


def _total(store: Path) -> int:
    """Memories in the store; a refused import of a new store leaves no store at all."""
    if not store.exists():
        return 0
    result = cli(["--store", str(store), "--owner", "alice", "stats", "--json"])
    return json.loads(result.stdout)["total"]


BAD_LINES = [
    ({**GOOD, "tags": "abc"}, "tags"),
    ({**GOOD, "tags": 5}, "tags"),
    ({**GOOD, "entities": {"a": 1}}, "entities"),
    ({**GOOD, "created_at": 12345}, "created_at"),
    ({**GOOD, "valid_to": [2026]}, "valid_to"),
    ('{"content": "Huge.", "importance": 1' + "0" * 400 + "}", "importance"),
    ({**GOOD, "edges": [{"target": "0" * 32, "type": "nonsense"}]}, "edges.type"),
    ({**GOOD, "edges": [{"target": "0" * 32, "type": "related", "weight": 7}]}, "edges.weight"),
    ({**GOOD, "edges": [{"target": "not hex", "type": "related"}]}, "edges.target"),
    ({**GOOD, "edges": ["0" * 32]}, "edges"),
    ({**GOOD, "edges": {"target": "0" * 32}}, "edges"),
    ({**GOOD, "archived": True, "tombstones": [{"reason": "x" * 1_000_000}]}, "tombstones.reason"),
    ({**GOOD, "archived": True, "tombstones": [{"reason": 5}]}, "tombstones"),
    ({**GOOD, "archived": "yes"}, "archived"),
    ('{"content": "Deep.", "tags": ' + "[" * 100_000 + "]" * 100_000 + "}", "not JSON"),
    ('{"content": "Long int.", "importance": ' + "9" * 5000 + "}", "not JSON"),
    # A lone surrogate has no UTF-8 form: it ended in the model's TypeError after the first
    # 256 lines were written.
    ('{"content": "bad \\ud800 surrogate"}', "content"),
    ({**GOOD, "tags": ["t\udcff"]}, "tags"),
]


@pytest.mark.parametrize(("bad", "field"), BAD_LINES, ids=[f for _, f in BAD_LINES])
def test_a_malformed_line_is_refused_by_number_and_field_and_nothing_is_written(
    tmp_path: Path, bad: dict | str, field: str
) -> None:
    store = tmp_path / "m.sqlite"
    result = _import(store, _dump(tmp_path, GOOD, GOOD | {"content": "Second."}, bad))
    assert result.exit_code == 1, result.output
    assert exited_cleanly(result), repr(result.exception)
    (message,) = [line for line in result.stderr.splitlines() if "line 3" in line]
    assert field in message, message
    assert len(message) < 600, message[:200]  # the value is quoted short, never whole
    # Refused before the store is opened: no empty store is left for `export` to read.
    assert not store.exists()


def test_an_edge_to_a_memory_that_is_not_there_is_named_with_its_line(tmp_path: Path) -> None:
    store = tmp_path / "m.sqlite"
    missing = "ab" * 16
    result = _import(
        store,
        _dump(
            tmp_path,
            GOOD,
            {"content": "Linked.", "edges": [{"target": missing, "type": "related"}]},
        ),
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["edges_skipped"] == 1
    assert f"line 2: the related edge to {missing} was not added" in result.stderr


# `nooa-mcp ARGS` that prints its own peak RSS on exit (VmHWM belongs to the process image, so
# the test process it was forked from does not count, as it would in wait4's ru_maxrss).
_PEAK_BOOT = """
import atexit, sys

def _peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            print("peak-kib", line.split()[1], file=sys.stderr)

atexit.register(_peak)
from nooa_mcp.__main__ import main
sys.argv[0] = "nooa-mcp"
main()
"""


def _peak_rss_mib(args: list[str]) -> tuple[int, float, str]:
    """Run `nooa-mcp ARGS` to its end; its exit code, peak RSS (MiB) and stderr."""
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_BOOT, *args],
        env=process_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    (peak,) = [int(x.split()[1]) for x in done.stderr.splitlines() if x.startswith("peak-kib")]
    return done.returncode, peak / 1024, done.stderr


@pytest.mark.processes
def test_a_200_mb_line_is_refused_while_it_is_read_without_holding_it(tmp_path: Path) -> None:
    dump = tmp_path / "big.jsonl"
    with dump.open("w") as fh:
        fh.write(json.dumps(GOOD) + "\n")
        fh.write('{"content": "')
        chunk = "x" * (1 << 20)
        for _ in range(200):
            fh.write(chunk)
        fh.write('"}\n')
    store = tmp_path / "m.sqlite"
    code, peak, stderr = _peak_rss_mib(["--store", str(store), "import", str(dump)])
    print(f"peak RSS of the refused import: {peak:.0f} MiB")
    assert code == 1 and "line 2" in stderr and "Traceback" not in stderr, stderr[-500:]
    # Holding the line alone would take 200 MiB; main took 656 MiB.
    assert peak < 200, peak
    assert not store.exists() or _total(store) == 0


def test_the_array_export_json_writes_is_named_with_the_fix(tmp_path: Path) -> None:
    """`export --json` writes one array over many lines; import reads JSON lines. The refusal
    says which it was given and what to pass instead, and writes nothing."""
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps([GOOD, {"content": "Standup is at nine."}], indent=2) + "\n")
    store = tmp_path / "m.sqlite"
    result = _import(store, dump)
    assert result.exit_code == 1 and exited_cleanly(result) and result.stdout == ""
    assert result.stderr.startswith("Error: line 1: not JSON")
    assert "`export --json` output" in result.stderr and "without --json" in result.stderr
    assert "Traceback" not in result.stderr and not store.exists()


def test_a_postgresql_store_without_the_driver_names_the_extra(tmp_path: Path) -> None:
    """Without the `postgres` extra installed a postgresql:// store is one sentence naming the
    install, not a traceback from the driver's import."""
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    # Stands in for an environment without psycopg: the import system finds nothing by name.
    (blocker / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Gone:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('psycopg', 'psycopg_pool'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, _Gone())\n"
    )
    env = {**process_env(), "PYTHONPATH": str(blocker)}
    done = subprocess.run(
        [sys.executable, "-m", "nooa_mcp", "--store", "postgresql://127.0.0.1/test", "stats"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 1, done.stderr
    assert "needs the PostgreSQL driver" in done.stderr
    assert "pip install 'nooa-mcp[postgres]'" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_importing_another_owners_lines_as_the_shared_owner_says_they_are_shared(
    tmp_path,
) -> None:
    """A file's owner is not configuration, so bob's lines imported with no owner set become
    shared memories, which every role reads: the command says so (it said nothing)."""
    dump = _dump(
        tmp_path,
        {"content": "Bob's vault code is 1234", "owner": "bob"},
        {"content": "The office opens at 8", "owner": ""},
    )
    shared = cli(["--store", str(tmp_path / "shared.sqlite"), "import", str(dump)])
    assert shared.exit_code == 0, shared.output
    assert "1 line(s) belonged to another owner and are shared memories now" in shared.stderr
    own = cli(["--store", str(tmp_path / "bob.sqlite"), "--owner", "bob", "import", str(dump)])
    assert own.exit_code == 0 and "shared memories now" not in own.stderr


# A field the import does not read was dropped without a word: the line below was imported
# as an `info` of importance 5, no tags and no end of validity, and the report said created: 1.
MISSPELT = {
    "content": "The deploy key is in vault slot 9",
    "importnce": "CRITICAL",
    "tag": ["ops"],
    "valid_until": "2027-01-01T00:00:00Z",
    "Type": "todo",
}

UNKNOWN_FIELDS = [
    (
        MISSPELT,
        "Error: line 3: importnce: is not a field of an export line. Did you mean importance? "
        "Also not fields: tag (tags?), valid_until (valid_to?), Type (type?). "
        "Nothing was imported.",
    ),
    (
        {**GOOD, "zzzq": 1},
        "Error: line 3: zzzq: is not a field of an export line. Use only id, content, type, "
        "title, importance, salience, confidence, tags, entities, place_or_task, created_at, "
        "valid_from, valid_to, status, trigger, references, owner, archived, faded, edges, "
        "authored_importance, history, tombstones. Nothing was imported.",
    ),
    (
        {**GOOD, "type": "intent", "trigger": {"cue": "deploy", "fire_time": "2027-01-01"}},
        "Error: line 3: trigger.fire_time: is not a field of a trigger. Did you mean fire_at? "
        "Nothing was imported.",
    ),
    (
        {"content": "Linked.", "edges": [{"target": "a" * 32, "type": "related", "wieght": 2}]},
        "Error: line 3: edges.wieght: is not a field of one of a line's edges. Did you mean "
        "weight? Nothing was imported.",
    ),
    (
        {"content": "Cited.", "references": [{"uri": "url:https://x.org", "preveiw": "x"}]},
        "Error: line 3: references.preveiw: is not a field of one of a line's references. "
        "Did you mean preview? Nothing was imported.",
    ),
    (
        {"content": "Used.", "history": {"learned_at": "2026-01-01T00:00:00Z", "usez": 3}},
        "Error: line 3: history.usez: is not a field of a line's history. Did you mean uses? "
        "Nothing was imported.",
    ),
    (
        {"content": 5},
        "Error: line 3: content: 5 is not text. Pass the memory's text as a JSON string. "
        "Nothing was imported.",
    ),
    (
        {"content": ["a"] * 1000},
        'Error: line 3: content: ["a", "a", "a", "a", "a", "a", "a", "a"… is not text. '
        "Pass the memory's text as a JSON string. Nothing was imported.",
    ),
    # A value the import refuses says what to write, as the tools do (the fix was dropped:
    # "line 3: type: 'note' is not a memory type. Nothing was imported.").
    (
        {"content": "Typed.", "type": "note"},
        "Error: line 3: type: 'note' is not a memory type. Use one of info, skill, episode, "
        "intent, todo, reflection, scratch. Nothing was imported.",
    ),
    (
        {"content": "Tagged.", "tags": "x"},
        "Error: line 3: tags: 'x' is not a list. Pass a list of short strings, e.g. [\"x\"]. "
        "Nothing was imported.",
    ),
    (
        {"content": "Tagged.", "tags": ["ops", ""]},
        "Error: line 3: tags: '' (item 2) is blank. Give it a word or leave it out. "
        "Nothing was imported.",
    ),
    (
        {"content": "Named.", "entities": ["  "]},
        "Error: line 3: entities: '  ' (item 1) is blank. Give it a word or leave it out. "
        "Nothing was imported.",
    ),
    (
        {"content": "Weighed.", "importance": "HUGE"},
        "Error: line 3: importance: 'HUGE' is not a level. Use CRITICAL, HIGH, MEDIUM, LOW, "
        "TRIVIAL or a number from 0 to 10. Nothing was imported.",
    ),
]


def _stored(store: Path) -> list[dict]:
    out = cli(["--store", str(store), "--owner", "alice", "export"])
    assert out.exit_code == 0, out.output
    return [json.loads(x) for x in out.stdout.splitlines()]


@pytest.mark.parametrize(
    ("bad", "sentence"),
    UNKNOWN_FIELDS,
    ids=[
        "misspelt",
        "unknown",
        "trigger",
        "edge",
        "reference",
        "history",
        "content-int",
        "content-list",
        "type",
        "tags",
        "blank-tag",
        "blank-entity",
        "importance",
    ],
)
def test_an_unknown_field_or_content_that_is_not_text_refuses_the_whole_file(
    tmp_path: Path, bad: dict, sentence: str
) -> None:
    store = tmp_path / "m.sqlite"
    result = _import(store, _dump(tmp_path, GOOD, GOOD | {"content": "Second."}, bad))
    assert result.exit_code == 1, result.output
    assert exited_cleanly(result), repr(result.exception)
    assert result.stderr.strip() == sentence
    assert not store.exists()  # refused before the store is opened
    # Into a store that holds memories already: nothing of the file is written either.
    assert _import(store, _dump(tmp_path, {"content": "Kept."})).exit_code == 0
    result = _import(store, _dump(tmp_path, GOOD, bad))
    assert result.exit_code == 1, result.output
    assert result.stderr.strip() == sentence.replace("line 3", "line 2")
    assert [x["content"] for x in _stored(store)] == ["Kept."]


def test_an_accesses_of_line_with_an_unknown_field_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "m.sqlite"
    history = {
        "learned_at": "2026-01-01T00:00:00+00:00",
        "last_used_at": "2026-01-01T00:00:00+00:00",
        "uses": 1,
        "strength": 1,
    }
    line = {**GOOD, "id": "ab" * 16, "history": history}
    older = {"accesses_of": "ab" * 16, "accesses": [], "acesses": []}
    result = _import(store, _dump(tmp_path, line, older))
    assert result.exit_code == 1, result.output
    assert result.stderr.strip() == (
        "Error: line 2: acesses: is not a field of an accesses_of line. Did you mean accesses? "
        "Nothing was imported."
    )
    assert not store.exists()
    # Without the misspelt key the same file imports.
    del older["acesses"]
    assert _import(store, _dump(tmp_path, line, older)).exit_code == 0


@pytest.mark.parametrize("text", ["", "\n\n  \n"], ids=["empty", "blank-lines"])
def test_a_file_without_memories_is_refused_and_creates_no_store(tmp_path: Path, text: str) -> None:
    store = tmp_path / "m.sqlite"
    dump = tmp_path / "dump.jsonl"
    dump.write_text(text)
    result = _import(store, dump)
    assert result.exit_code == 1, result.output
    assert exited_cleanly(result), repr(result.exception)
    assert result.stderr.strip() == (
        f"Error: {dump}: holds no memories (it is empty, or only blank lines). "
        "Nothing was imported."
    )
    assert result.stdout == ""  # no "edges: 0" report
    assert not store.exists()


def test_a_byte_order_mark_opens_the_file_and_is_no_part_of_a_memory(tmp_path: Path) -> None:
    """Windows editors write one: the import refused it in Python's words ("Unexpected UTF-8
    BOM (decode using utf-8-sig)")."""
    store, dump = tmp_path / "m.sqlite", tmp_path / "bom.jsonl"
    dump.write_bytes(b"\xef\xbb\xbf" + json.dumps(GOOD).encode() + b"\n")
    result = _import(store, dump)
    assert result.exit_code == 0, result.output
    assert _total(store) == 1


def test_a_broken_line_says_where_it_breaks(tmp_path: Path) -> None:
    """The decoder's sentence stopped at "at" ("Invalid control character at")."""
    store, dump = tmp_path / "m.sqlite", tmp_path / "cut.jsonl"
    dump.write_bytes(json.dumps(GOOD).encode() + b'\n{"content": "cut \x01 here"}\n')
    result = _import(store, dump)
    assert result.exit_code == 1
    assert "line 2: not JSON (Invalid control character, column 18)." in result.stderr
    assert not store.exists()


def test_a_file_of_maintenance_log_lines_alone_is_refused_and_creates_no_store(
    tmp_path: Path,
) -> None:
    store = tmp_path / "m.sqlite"
    dump = tmp_path / "dump.jsonl"
    entry = {"maintenance": "reflection", "ts": "2026-01-01T00:00:00Z", "report": {"role": "me"}}
    dump.write_text(json.dumps(entry) + "\n")
    result = _import(store, dump)
    assert result.exit_code == 1, result.output
    assert "holds no memories (only maintenance log lines)" in result.stderr
    assert not store.exists()
