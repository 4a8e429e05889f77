"""docs/DESIGN.md and the README state the numbers the code runs on.

The design document's §17 lists every default and limit with the code that holds it; each row
is read and compared with the value the code has. Every `name = value` the document's text
writes must agree with that table, and the numbers the README states (weights, thresholds,
limits, names of tools and prompts) must agree with the code too. When one of these fails,
the document or the code changed without the other: change the one that is wrong.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
import math
import re
import tempfile
from enum import EnumMeta
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "DESIGN.md"
README = ROOT / "README.md"
TOOLS_JSON = ROOT / "nooa_mcp" / "mcp" / "tools.json"

_NUMBER = r"-?\d[\d,]*(?:\.\d+)?"


# --------------------------------------------------------------------------- reading the doc


def _table(text: str, heading: str) -> list[list[str]]:
    """The body rows of the first markdown table after `heading`, as stripped cells."""
    start = text.index(heading)
    rows: list[list[str]] = []
    for line in text[start:].splitlines()[1:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append(cells)
    _header, rule, *body = rows
    assert set(rule[0]) <= {"-", ":"}, f"no table after {heading!r}"
    return body


def _number(text: str) -> float:
    return float(text.replace(",", ""))


@dataclasses.dataclass(frozen=True)
class Row:
    name: str
    value: str
    code: str

    @property
    def key(self) -> str | None:
        """The code's own name, when the first cell is exactly a backticked name."""
        match = re.match(r"^`(\w+)`", self.name)
        return match.group(1) if match else None

    @property
    def symbol(self) -> str | None:
        """The symbol the text writes for it (λ, d, τ), when the first cell gives one."""
        match = re.search(r"\((\S{1,2})\)", self.name)
        return match.group(1) if match else None


@functools.cache
def value_rows() -> list[Row]:
    text = DESIGN.read_text(encoding="utf-8")
    return [Row(*cells[:3]) for cells in _table(text, "### 17.1 Values")]


@functools.cache
def name_rows() -> list[Row]:
    text = DESIGN.read_text(encoding="utf-8")
    return [Row(*cells[:3]) for cells in _table(text, "### 17.2 Names")]


# --------------------------------------------------------------------------- reading the code


def _tool_schema(spec: str) -> Any:
    """`memory_recall.k.default` → that property of the tool's input schema in tools.json."""
    tool, prop, key = spec.split(".")
    listed = {t["name"]: t for t in json.loads(TOOLS_JSON.read_text(encoding="utf-8"))}
    return listed[tool]["inputSchema"]["properties"][prop][key]


def resolve(code: str) -> Any:
    """The value a §17 code path names: `module.Object.attr…` under nooa_mcp, where a pydantic
    model or dataclass gives its field's default and a dict its item; or `tools.json:…`."""
    code = code.strip("`")
    if code.startswith("tools.json:"):
        return _tool_schema(code.removeprefix("tools.json:"))
    parts = code.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module("nooa_mcp." + ".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        break
    else:
        raise AssertionError(f"{code}: no module of nooa_mcp")
    for part in parts[split:]:
        if isinstance(obj, type) and issubclass(obj, BaseModel) and part in obj.model_fields:
            obj = obj.model_fields[part].get_default(call_default_factory=True)
        elif dataclasses.is_dataclass(obj) and isinstance(obj, type):
            field = {f.name: f for f in dataclasses.fields(obj)}[part]
            if field.default is not dataclasses.MISSING:
                obj = field.default
            else:
                obj = field.default_factory()  # type: ignore[misc]
        elif isinstance(obj, dict):
            obj = obj[part]
        else:
            obj = getattr(obj, part)
    return obj


async def _surface() -> dict[str, list[str]]:
    """What a client lists from the server as shipped (defaults, in memory)."""
    from mcp import Client

    from nooa_mcp.config import Settings
    from nooa_mcp.embeddings import HashEmbedder
    from nooa_mcp.mcp.server import build_server

    with tempfile.TemporaryDirectory() as folder:
        settings = Settings(store=Path(folder) / "m.sqlite", owner="tester")
        server = build_server(settings, embedder=HashEmbedder())
        async with Client(server, cache=None) as client:
            return {
                "tools": [t.name for t in (await client.list_tools()).tools],
                "prompts": [p.name for p in (await client.list_prompts()).prompts],
                "resources": [str(r.uri) for r in (await client.list_resources()).resources],
                "resource_templates": [
                    t.uri_template
                    for t in (await client.list_resource_templates()).resource_templates
                ],
            }


@functools.cache
def surface() -> dict[str, list[str]]:
    return anyio.run(_surface)


def _names_in_code(code: str) -> tuple[list[str], bool]:
    """The names a §17.2 row's code holds, and whether their order means something."""
    code = code.strip("`")
    if code.startswith("mcp:"):
        return surface()[code.removeprefix("mcp:")], True
    value = resolve(code)
    if isinstance(value, EnumMeta):
        return [m.value for m in value], True  # type: ignore[attr-defined]
    if isinstance(value, set | frozenset):
        return sorted(str(v) for v in value), False
    return [str(v) for v in value], True


def _backticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]*)`", cell)


# --------------------------------------------------------------------------- the document


def test_the_tables_are_read() -> None:
    """The parser finds the tables (an empty table would make every check below vacuous)."""
    assert len(value_rows()) >= 100
    assert len(name_rows()) >= 15
    assert {r.symbol for r in value_rows()} >= {"λ", "μ", "d", "γ", "δ", "τ"}


@pytest.mark.parametrize("row", value_rows(), ids=lambda r: r.name)
def test_a_documented_value_is_the_codes(row: Row) -> None:
    actual = resolve(row.code)
    words = _backticked(row.value)
    if words:
        if isinstance(actual, set | frozenset):
            assert sorted(map(str, actual)) == sorted(words), row
        else:
            assert str(actual) == words[0], row
        return
    assert not isinstance(actual, bool), f"{row.code} is a flag: write it in backticks"
    documented = _number(row.value)
    assert math.isclose(float(actual), documented, rel_tol=1e-9, abs_tol=1e-12), (
        f"DESIGN.md §17 says {row.name} = {row.value}; {row.code} is {actual}"
    )


@pytest.mark.parametrize("row", name_rows(), ids=lambda r: r.name)
def test_documented_names_are_the_codes(row: Row) -> None:
    names, ordered = _names_in_code(row.code)
    documented = _backticked(row.value)
    if not ordered:
        documented = sorted(documented)
    assert documented == names, f"DESIGN.md §17.2 {row.name}: {documented} against {names}"


def _prose() -> str:
    """The document without §17 (whose table is the reference for the rest)."""
    text = DESIGN.read_text(encoding="utf-8")
    return text[: text.index("## 17. Defaults and limits")]


def _assignments(text: str, name: str) -> list[str]:
    """Every number the text writes as `name = number` (or `` `name` = number``)."""
    pattern = rf"(?<![\w`]){re.escape(name)}\s*=\s*({_NUMBER})"
    return re.findall(pattern, text)


def test_every_value_the_text_writes_is_the_tables() -> None:
    text = _prose()
    checked = 0
    wrong = []
    for row in value_rows():
        if re.search(r"`", row.value):
            continue
        table = _number(row.value)
        names = [f"`{row.key}`"] if row.key else []
        names += [row.symbol] if row.symbol else []
        for name in names:
            for written in _assignments(text, name):
                checked += 1
                if not math.isclose(_number(written), table):
                    wrong.append(f"{name} = {written} (table: {row.value})")
    assert not wrong, f"DESIGN.md's text disagrees with its §17: {wrong}"
    assert checked >= 40, f"only {checked} values found in the text: is the pattern still right?"


def design_sections() -> set[str]:
    """The sections DESIGN.md has: its numbered headings ("5", "5.6") and the numbered bold
    items of a section ("16.8" is item 8 of §16)."""
    sections: set[str] = set()
    current = None
    for line in DESIGN.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", line)
        if heading:
            sections.add(heading.group(1))
            current = heading.group(1) if line.startswith("## ") else current
        item = re.match(r"^(\d+)\. \*\*", line)
        if item and current:
            sections.add(f"{current}.{item.group(1)}")
    return sections


def test_the_document_cites_only_its_own_sections() -> None:
    """A "§N" in DESIGN.md names a section DESIGN.md has."""
    text = DESIGN.read_text(encoding="utf-8")
    cited = set(re.findall(r"§(\d+(?:\.\d+)?)", text))
    assert cited, "no section cited"
    assert cited <= design_sections(), f"cited but missing: {sorted(cited - design_sections())}"


# --------------------------------------------------------------------------- the README


def _readme() -> str:
    return " ".join(README.read_text(encoding="utf-8").split())


def _settings() -> Any:
    from nooa_mcp.config import Settings

    return Settings(store="unused.sqlite")


def _readme_claims() -> list[tuple[str, str, Any]]:
    """(what, pattern over the README with whitespace collapsed, the code's values)."""
    from nooa_mcp.console import auth
    from nooa_mcp.domain import injection, reflection, schema, similarity
    from nooa_mcp.domain.forgetting import ForgettingPolicy
    from nooa_mcp.domain.inputs import MAX_CONTENT, MAX_SHORT_TEXT
    from nooa_mcp.mcp import stdio
    from nooa_mcp.services import consolidation, references

    s = _settings()
    r = s.recall
    ladder = schema.IMPORTANCE.levels
    return [
        (
            "relevance weights",
            r"rel = ([\d.]+)·cos \+ ([\d.]+)·lex \+ ([\d.]+)·overlap",
            (r.lam, 1 - r.lam, r.mu),
        ),
        (
            "time grain and decay",
            r"B = ln Σ max\(t, (\d+) h\)\^−([\d.]+)",
            (r.time_grain / 3600, r.decay),
        ),
        ("exact accesses", r"exact for the newest (\d+)", (r.exact_accesses,)),
        ("usage weights", r"([\d.]+)·norm\(rec\) \+ ([\d.]+)·norm\(imp\)", (r.a_rec, r.a_imp)),
        ("min-max span", r"rec and imp over a span of at least ([\d.]+)", (r.norm_min_span,)),
        ("spreading", r"plus `([\d.]+)·spread` \(δ = ([\d.]+) per hop", (r.gamma, r.per_hop_decay)),
        ("candidates", r"top (\d+) by cosine ∪ top (\d+) by BM25", (r.n_dense, r.n_sparse)),
        ("near-duplicates", r"same type and role, cosine ≥ ([\d.]+)\)", (s.dedup_similarity,)),
        (
            "merge threshold",
            r"merging two memories at cosine ≥ ([\d.]+)",
            (reflection.MERGE_SIMILARITY,),
        ),
        ("passes after writes", r"after every (\d+) writes", (s.reflect_every_writes,)),
        (
            "reflection transactions",
            r"of up to (\d+) items or (\d+) ms of work",
            (consolidation.APPLY_BATCH, consolidation.APPLY_SECONDS * 1000),
        ),
        ("clustered sweep", r"from (\d+)k memories", (similarity.CLUSTERED_FROM / 1000,)),
        ("clusters probed", r"its (\d+) nearest k-means clusters", (similarity.PROBES,)),
        ("sweep block", r"(\d+) MB of cosines at a time", (similarity.BLOCK_CELLS * 4 / 2**20,)),
        ("content limit", r"Content holds up to ([\d,]+) characters", (MAX_CONTENT,)),
        ("label limit", r"is a label of at most (\d+)", (MAX_SHORT_TEXT,)),
        ("ring", r"the memory's ring \(newest (\d+)\)", (s.ring_size,)),
        ("prune line", r"retention below ([\d.]+)", (ForgettingPolicy().prune_below,)),
        ("faded penalty", r"ranked as if ([\d.]+) less relevant", (r.faded_penalty,)),
        (
            "faded candidates",
            r"at most (\d+) faded candidates by cosine and (\d+) by keywords \(`n_faded`\) "
            r"beside the (\d+) \+ (\d+) live ones",
            (r.n_faded, r.n_faded, r.n_dense, r.n_sparse),
        ),
        (
            "importance ladder",
            r"importance CRITICAL (\d+) · HIGH (\d+) · MEDIUM (\d+) · LOW (\d+) · TRIVIAL (\d+)",
            tuple(ladder[k] for k in ("CRITICAL", "HIGH", "MEDIUM", "LOW", "TRIVIAL")),
        ),
        ("sessions per client", r"hold at most (\d+) open sessions", (s.max_sessions_per_client,)),
        ("stdio line", r"a line over (\d+) MiB", (stdio.MAX_LINE / 2**20,)),
        ("stdio in flight", r"at most (\d+) requests before their replies", (stdio.MAX_IN_FLIGHT,)),
        ("session-start todos", r"up to (\d+) open todos", (injection.START_TODOS,)),
        (
            "session-start memories",
            r"up to (\d+) memories — first those",
            (injection.START_MEMORIES,),
        ),
        (
            "prompt memories",
            r"up to (\d+) memories relevant to the prompt",
            (injection.PROMPT_MEMORIES,),
        ),
        ("hook block", r"always under ([\d,]+) characters", (injection.CONTEXT_CHARS,)),
        (
            "hook meaning rule",
            r"\(([\d.]+)·cosine \+ ([\d.]+)·cue overlap ≥ ([\d.]+), the weak line\)",
            (r.lam, r.mu, r.weak_relevance),
        ),
        (
            "folder preview",
            r"folder preview lists at most (\d+) entries",
            (references.DIR_ENTRIES,),
        ),
        (
            "console session",
            r"lapses after (\d+) hours unused \((\d+) days at most\)",
            (auth.SESSION_IDLE / 3600, auth.SESSION_MAX_AGE / 86400),
        ),
        (
            "console sign-in failures",
            r"may get (\d+) tokens wrong a minute",
            (auth.FAILURES,),
        ),
    ]


@pytest.mark.parametrize("claim", _readme_claims(), ids=lambda c: c[0])
def test_a_number_the_readme_states_is_the_codes(claim: tuple[str, str, Any]) -> None:
    what, pattern, expected = claim
    found = re.findall(pattern, _readme())
    assert found, f"the README no longer states the {what} as /{pattern}/: fix it or this check"
    for written in found:
        written = written if isinstance(written, tuple) else (written,)
        numbers = tuple(_number(w) for w in written)
        assert all(map(math.isclose, numbers, map(float, expected))), (
            f"README: {what} {numbers}; the code has {tuple(expected)}"
        )


def test_the_readmes_types_and_relations_are_the_codes() -> None:
    from nooa_mcp.domain.kinds import EDGE_TYPES, MEMORY_TYPES

    text = _readme()
    types = re.search(r"\*\*Seven types\*\*: (.*?); \*\*ten relations\*\*", text)
    relations = re.search(r"\*\*ten relations\*\*: (.*?)\.(?: |$)", text)
    assert types and relations, "the README's model summary moved: fix it or this check"
    assert _backticked(types.group(1)) == list(MEMORY_TYPES)
    assert _backticked(relations.group(1)) == list(EDGE_TYPES)


def test_the_readmes_tools_and_prompts_exist() -> None:
    """Every `memory_…` name the README writes is a tool or a prompt, and the prompts it
    shows under Claude Code's menu are exactly the server's."""
    listed = surface()
    text = _readme()
    named = set(re.findall(r"`(memory_[a-z_]+)", text))
    assert named, "the README names no tool"
    assert named <= set(listed["tools"]) | set(listed["prompts"]), named
    menu = re.findall(r"/mcp__nooa__(\w+)", text)
    assert sorted(menu) == sorted(listed["prompts"])
