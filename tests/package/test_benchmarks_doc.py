"""BENCHMARKS.md can be followed: what cites it by section finds that section, and every
command it gives to reproduce a figure names a script and flags that exist.

When one fails, a section was renamed or a benchmark's arguments changed without the other:
change the one that is wrong.
"""

from __future__ import annotations

import re
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
BENCHMARKS = REPOSITORY / "BENCHMARKS.md"

#: `BENCHMARKS.md, "Section"` or `BENCHMARKS.md: section)`, the two ways a section is cited;
#: a citation may run over a line break (comment markers and indentation are dropped first).
CITATION = re.compile(r'BENCHMARKS\.md(?:, "([^"]+)"|: ([^)]+)\))')
COMMAND = re.compile(r"python (benchmarks/[\w/]+\.py)([^#\n]*)")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z-]*)")


def headings(text: str) -> set[str]:
    return {m.group(1).strip().lower() for m in re.finditer(r"^#{2,4} (.+)$", text, re.M)}


def citing_texts() -> list[Path]:
    paths = [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").rglob("*.md"))]
    return paths + sorted((REPOSITORY / "nooa_mcp").rglob("*.py"))


def citations(text: str) -> list[str]:
    flat = re.sub(r"\s*\n\s*(?:#:?\s*)?", " ", text)
    return [" ".join((a or b).split()) for a, b in CITATION.findall(flat)]


def commands(text: str) -> list[tuple[str, list[str]]]:
    """(script, flags) for every `python benchmarks/X.py …` line of the document's code blocks."""
    found = []
    blocks = re.findall(r"```\n(.*?)```", text, re.S)
    for block in blocks:
        joined = block.replace("\\\n", " ")
        for script, rest in COMMAND.findall(joined):
            found.append((script, FLAG.findall(rest)))
    return found


def missing_flags(script: Path, flags: list[str]) -> list[str]:
    source = script.read_text(encoding="utf-8")
    return [flag for flag in flags if f'"{flag}"' not in source]


def test_a_section_cited_by_name_is_a_heading_of_benchmarks_md() -> None:
    known = headings(BENCHMARKS.read_text(encoding="utf-8"))
    wrong = []
    for path in citing_texts():
        for cited in citations(path.read_text(encoding="utf-8")):
            if cited.lower() not in known:
                wrong.append(f"{path.relative_to(REPOSITORY)}: {cited!r}")
    assert not wrong, "BENCHMARKS.md has no such section: " + ", ".join(wrong)


def test_every_command_names_a_benchmark_and_flags_it_takes() -> None:
    found = commands(BENCHMARKS.read_text(encoding="utf-8"))
    assert len(found) >= 10
    wrong = []
    for name, flags in found:
        script = REPOSITORY / name
        if not script.is_file():
            wrong.append(f"{name}: no such script")
            continue
        wrong += [f"{name}: no {flag}" for flag in missing_flags(script, flags)]
    assert not wrong, "BENCHMARKS.md gives commands that do not run: " + ", ".join(wrong)


def test_the_checks_see_a_citation_a_command_and_a_wrong_flag() -> None:
    code = '    # (BENCHMARKS.md, "Reflection at\n    #: scale") and (BENCHMARKS.md: recall at\n x)'
    assert citations(code) == ["Reflection at scale", "recall at x"]
    doc = "```\nR1  python benchmarks/bench_recall.py --sizes 1 \\\n  --dir /x  # --no\n```\n"
    assert commands(doc) == [("benchmarks/bench_recall.py", ["--sizes", "--dir"])]
    script = REPOSITORY / "benchmarks" / "bench_recall.py"
    assert missing_flags(script, ["--sizes", "--bogus"]) == ["--bogus"]
