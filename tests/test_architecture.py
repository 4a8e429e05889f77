"""The tiers of nooa-mcp, kept by walking every module's imports (README "Layout").

pure domain → storage → engine → services → Memory facade → front ends. A module may import
only from its own tier or the tiers before it; the domain does no I/O; SQL lives only in
storage. This test is the architecture's documentation: when it fails, the import is wrong,
not the test.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "nooa_mcp"

#: Tier of each top-level part of the package (a folder or a module).
TIERS: dict[str, int] = {
    "errors": 0,
    "domain": 0,
    "config": 0,
    "storage": 1,
    "embeddings": 1,
    "heap": 1,
    "model_file": 1,
    "shared_runs": 2,
    "engine": 2,
    "services": 3,
    "memory": 4,
    "mcp": 5,
    "cli": 5,
    "evaluation": 5,
    "console": 5,
    "hooks": 5,
    "__init__": 5,
    "__main__": 5,
}
#: Libraries that do I/O or belong to a front end: never imported by the pure domain.
IO_LIBRARIES = {
    "aiosqlite",
    "sqlite3",
    "psycopg",
    "psycopg_pool",
    "anyio",
    "fastembed",
    "onnxruntime",
    "mcp",
    "mcp_types",
    "click",
    "starlette",
    "uvicorn",
    "httpx",
}
SQL = re.compile(r"\b(SELECT\s.+\sFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM)\b", re.S)


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py"))


def part_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0].removesuffix(".py")


def imported(path: Path) -> list[tuple[str, int]]:
    """(module name inside nooa_mcp or a top-level library, line) for every import."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ".".join(("nooa_mcp", *path.relative_to(PACKAGE).parts[:-1]))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            if name == "nooa_mcp" or (node.level and not node.module):
                # `from . import x` / `from nooa_mcp import x`: each name is a module.
                out += [(f"{name}.{alias.name}", node.lineno) for alias in node.names]
            else:
                out.append((name, node.lineno))
    return out


def tier_of(name: str) -> int | None:
    parts = name.split(".")
    if parts[0] != "nooa_mcp" or len(parts) < 2:
        return None
    return TIERS.get(parts[1])


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_module_imports_only_from_its_tier_or_below(path: Path) -> None:
    part = part_of(path)
    assert part in TIERS, f"{part} has no tier: add it to TIERS and to the README's layout"
    mine = TIERS[part]
    wrong = [
        f"line {line}: {name} (tier {tier_of(name)})"
        for name, line in imported(path)
        if (tier_of(name) or 0) > mine
    ]
    assert not wrong, f"{path.relative_to(PACKAGE)} (tier {mine}) imports upward: {wrong}"


@pytest.mark.parametrize(
    "path",
    [p for p in modules() if TIERS.get(part_of(p)) == 0],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_the_domain_does_no_io(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    libraries = {name.split(".")[0] for name, _ in imported(path)}
    assert not libraries & IO_LIBRARIES, f"imports {libraries & IO_LIBRARIES}"
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.AsyncFunctionDef)]


@pytest.mark.parametrize(
    "path",
    [p for p in modules() if part_of(p) != "storage"],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_no_sql_outside_storage(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    statements = [
        node.value[:60]
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value)
    ]
    assert not statements, f"SQL outside storage: {statements}"
    libraries = {name.split(".")[0] for name, _ in imported(path)}
    assert not libraries & {"sqlite3", "aiosqlite", "psycopg", "psycopg_pool"}


def test_the_checks_above_see_a_violation_when_there_is_one(tmp_path: Path) -> None:
    """The walker resolves relative imports and finds SQL, so the tests above can fail."""
    fake = PACKAGE / "domain" / "scope.py"
    names = {name for name, _ in imported(fake)}
    assert "nooa_mcp.errors" in names
    services = PACKAGE / "services" / "caller.py"
    assert tier_of("nooa_mcp.engine") == 2 and tier_of("nooa_mcp.mcp.server") == 5
    assert any(tier_of(n) == 2 for n, _ in imported(services))
    assert SQL.search("SELECT id FROM memories WHERE x = ?")
    assert not SQL.search("Select the memory from the list")
