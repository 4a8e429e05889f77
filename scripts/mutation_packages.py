"""The packages scripts/mutation.sh mutates, the tests that reach each, and its bookkeeping.

    python scripts/mutation_packages.py config PACKAGE pyproject.toml   # the pyproject to run in
    python scripts/mutation_packages.py sample N      # N mutant names, fixed seed (in the work dir)
    python scripts/mutation_packages.py retest        # reset what was not killed (in the work dir)
    python scripts/mutation_packages.py score [NAMES] # the score, per module (in the work dir)

Each package's tests are the ones that run its code in the test process, where mutmut sees
which test calls which function: subprocess-only tests (the `processes` marker) are left out,
and the in-process suites that drive the same paths are in (MCP through an in-memory client,
HTTP through the ASGI app and in-process uvicorn, the hooks through their functions, PostgreSQL
through the store: the `postgres` marker is kept where the package has PostgreSQL code).
The real model's tests (`real_model`) are left out: they take seconds each, and the same
paths run with the hash embedder.
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

SUBPACKAGES = ("domain", "storage", "services", "mcp", "hooks", "console", "evaluation")

#: Tests that take 4-30 s each under load and reach code other tests cover: mutmut re-runs
#: every test that reaches a surviving mutant, so they would make a run hours longer.
SLOW = [
    "tests/property/test_isolation.py::test_no_scope_reveals_or_relays_a_memory_outside_it",
    "tests/services/test_ranking_gate.py::test_a_weak_hit_never_ranks_above_a_hit_that_is_not_weak",
    "tests/services/test_writes_keep.py::test_any_two_texts_that_differ_in_one_value_are_both_"
    "stored_and_both_recallable",
    "tests/services/test_writes_keep.py::test_importing_700_distinct_ledger_lines_stores_700_memories",
    "tests/services/test_writes_keep.py::test_importing_700_distinct_ledger_lines_with_the_console_"
    "script_stores_700",
    "tests/services/test_writes_keep.py::test_all_twelve_value_changes_are_stored_and_recallable_"
    "with_the_real_model",
]

#: package -> (modules to mutate, tests that reach them in process, pytest -m expression)
PACKAGES: dict[str, tuple[list[str], list[str], str]] = {
    "domain": (
        ["nooa_mcp/domain/*"],
        ["tests/domain", "tests/services", "tests/property"],
        "not processes and not postgres and not real_model",
    ),
    "storage": (
        ["nooa_mcp/storage/*"],
        ["tests/storage", "tests/postgres", "tests/services/test_memory.py"],
        "not processes and not real_model",
    ),
    "services": (
        ["nooa_mcp/services/*"],
        [
            "tests/services",
            "tests/domain",
            "tests/engine/test_write_behind.py",
            "tests/mcp/test_sampling.py",  # the steps that ask the client's model (reconcile)
        ],
        "not processes and not postgres and not real_model",
    ),
    "mcp": (
        ["nooa_mcp/mcp/*"],
        ["tests/mcp"],
        "not processes and not postgres and not real_model",
    ),
    "hooks": (
        [
            "nooa_mcp/hooks/*",
            # the hook's fast path into a SQLite store and what it shares with the store
            "nooa_mcp/storage/quick.py",
            "nooa_mcp/storage/dialect.py",
            "nooa_mcp/storage/sqlite_search.py",
        ],
        ["tests/hooks"],
        "not processes and not postgres and not real_model",
    ),
    "console": (
        ["nooa_mcp/console/*"],
        ["tests/console"],
        "not processes and not postgres and not real_model",
    ),
    "evaluation": (
        ["nooa_mcp/evaluation/*"],
        ["tests/evaluation"],
        "not processes and not postgres and not real_model",
    ),
    "top": (
        ["nooa_mcp/*.py"],  # fnmatch's * crosses "/": the subpackages are left out below
        [
            "tests/cli",
            "tests/engine",
            "tests/services/test_memory.py",
            "tests/package",
            # the entry point's own reading of a hook invocation, and `hooks install` (CLI)
            "tests/hooks/test_hooks_rules.py",
            "tests/hooks/test_hooks_install.py",
        ],
        "not processes and not postgres and not real_model",
    ),
}


#: Tests that fail under mutmut's function wrappers whatever the mutant (a clean run fails).
#: (uvicorn's start-up, which took a wrapped app's bare call for a factory, is one no more:
#: every app reaches uvicorn through `hosts.server_config`.)
BROKEN_UNDER_MUTMUT = {
    # mutmut's trampolines add names to every mutated module, so __all__ never matches there.
    "top": ["tests/package/test_exported_members.py"],
}


def _array(items: list[str]) -> str:
    return "[\n" + "".join(f"    {json.dumps(i)},\n" for i in items) + "]"


def _uses_hypothesis(tests: list[str]) -> bool:
    files = [f for t in tests for f in (Path(t).rglob("*.py") if Path(t).is_dir() else [Path(t)])]
    return any("hypothesis" in f.read_text() for f in files if f.exists())


def config(package: str, pyproject: str) -> str:
    """`pyproject` with its [tool.mutmut] table replaced by the one for `package` ("core":
    unchanged, the core modules and tests listed there)."""
    text = Path(pyproject).read_text()
    if package == "core":
        return text
    mutate, tests, marks = PACKAGES[package]
    skip = [f"nooa_mcp/{sub}/*" for sub in SUBPACKAGES] if package == "top" else []
    # A mutant's wrapper can leave a coroutine or socket to the garbage collector; the
    # project's filterwarnings=error would turn that, reported after the last test, into a
    # failed session and stop the run, though every test's own verdict stands.
    args = ["-p", "no:cacheprovider", "-n", "0", "-m", marks]  # in this process: no xdist
    args += ["-W", "ignore::pytest.PytestUnraisableExceptionWarning"]
    if not _uses_hypothesis(tests):
        # Its pytest plugin imports hypothesis in the terminal summary, deep in mutmut's
        # harness, where Python 3.11.7's parser failed ("AST constructor recursion depth
        # mismatch") and took the run down with it.
        args += ["-p", "no:hypothesispytest"]
    for test in SLOW + BROKEN_UNDER_MUTMUT.get(package, []):
        args += ["--deselect", test]
    table = (
        "[tool.mutmut]\n"
        'source_paths = ["nooa_mcp"]\n'
        f"only_mutate = {_array(mutate)}\n"
        f"do_not_mutate = {_array(skip)}\n"
        'also_copy = ["prompts", "docs", "benchmarks", "README.md", "BENCHMARKS.md"]\n'
        "timeout_constant = 3.0\n"
        f"pytest_add_cli_args = {_array(args)}\n"
        f"pytest_add_cli_args_test_selection = {_array(tests)}\n"
    )
    # The table runs from its header to the next table's header (or the end).
    pattern = re.compile(r"^\[tool\.mutmut\]\n.*?(?=^\[|\Z)", re.S | re.M)
    if not pattern.search(text):
        raise SystemExit(f"{pyproject} has no [tool.mutmut] table to replace")
    return pattern.sub(lambda _: table + "\n", text, count=1)


def _metas() -> list[tuple[Path, dict]]:
    return [(m, json.loads(m.read_text())) for m in sorted(Path("mutants").rglob("*.py.meta"))]


def sample(n: int) -> list[str]:
    names = sorted(k for _, data in _metas() for k in data["exit_code_by_key"])
    if n >= len(names):
        return names
    return sorted(random.Random(30).sample(names, n))


#: mutmut's exit codes that are a verdict an added test cannot change: killed, timed out, or
#: caught by a type check.
KEPT = (1, 3, 36, 24, -24, 152, 255, 37)


def retest() -> None:
    from mutmut.configuration import config as mutmut_config

    stats_path = Path("mutants/mutmut-stats.json")
    if stats_path.exists():
        stats = json.loads(stats_path.read_text())
        selection = mutmut_config().config_fingerprint()["test_selection"]
        stats["config_fingerprint"]["test_selection"] = selection
        stats_path.write_text(json.dumps(stats))
    reset = 0
    for meta, data in _metas():
        codes = data["exit_code_by_key"]
        for key, code in codes.items():
            if code not in KEPT:
                codes[key] = None
                reset += 1
        meta.write_text(json.dumps(data))
    print(f"re-testing {reset} mutants that were not killed")


#: How mutmut names an exit code (its status_by_exit_code, for the codes a run leaves).
def _status(code: int | None) -> str:
    if code is None:
        return "not checked"
    if code in (1, 3):
        return "killed"
    if code in (36, 24, -24, 152, 255):
        return "timeout"
    if code == 37:
        return "caught by type check"
    if code == 0:
        return "survived"
    if code == 33:
        return "no tests"
    if code == 34:
        return "skipped"
    if code in (-11, -9):
        return "segfault/killed by the system"
    return f"suspicious ({code})"


def score(names: list[str]) -> None:
    """mutmut's score (killed or timed out, of all tested), per module and in all, and the
    survivors by name; with `names`, over those only (with --match first, names matching
    those globs)."""
    import fnmatch

    globs = names[1:] if names[:1] == ["--match"] else []
    wanted = set() if globs else set(names)
    rows: dict[str, dict[str, int]] = {}
    survivors: list[str] = []
    for _, data in _metas():
        for key, code in data["exit_code_by_key"].items():
            if (wanted and key not in wanted) or (
                globs and not any(fnmatch.fnmatch(key, g) for g in globs)
            ):
                continue
            module = re.split(r"\.x_|\.x\u01c1", key)[0]
            status = _status(code)
            rows.setdefault(module, {}).setdefault(status, 0)
            rows[module][status] += 1
            if status in ("survived", "no tests"):
                survivors.append(f"{key}: {status}")
    total: dict[str, int] = {}
    for module, counts in sorted(rows.items()):
        for status, n in counts.items():
            total[status] = total.get(status, 0) + n
        print(f"{module}: {_line(counts)}")
    print(f"ALL: {_line(total)}" + (f" (a sample of {len(wanted)})" if wanted else ""))
    for line in survivors:
        print("  " + line)


def _line(counts: dict[str, int]) -> str:
    caught = counts.get("killed", 0) + counts.get("timeout", 0)
    tested = sum(n for s, n in counts.items() if s not in ("skipped", "not checked"))
    detail = ", ".join(f"{s} {n}" for s, n in sorted(counts.items()))
    return f"{caught / max(tested, 1):.1%} ({caught} of {tested} caught; {detail})"


def main(argv: list[str]) -> None:
    command, *rest = argv
    if command == "config":
        sys.stdout.write(config(rest[0], rest[1]))
    elif command == "sample":
        print("\n".join(sample(int(rest[0]))))
    elif command == "retest":
        retest()
    elif command == "score":
        score(rest)
    else:
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    main(sys.argv[1:])
