"""The tiers of nooa-mcp, kept by walking every module's imports (README "Layout").

pure domain → storage → engine → services → Memory facade → front ends → entry points. A
module may import only from its own tier or the tiers before it; the domain does no I/O; SQL
lives only in storage. The front ends (MCP, console, hooks) never import one another: what they
share sits below them (`hosts.py`), and they are put together above them, by the entry points
(the CLI, `serving.py`, and the evaluation, which drives memory through the MCP server as a
client does). No module imports itself back through others. This test is the architecture's
documentation: when it fails, the import is wrong, not the test.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest
from test_design_doc import design_sections

PACKAGE = Path(__file__).resolve().parents[2] / "nooa_mcp"

#: Tier of each top-level part of the package (a folder or a module).
TIERS: dict[str, int] = {
    "errors": 0,
    "domain": 0,
    "config": 0,
    "storage": 1,
    "embeddings": 1,
    "malloc_tuning": 1,
    "startup_gc": 1,
    "hosts": 1,
    "cursors": 1,
    "model_file": 1,
    "shared_runs": 2,
    "engine": 2,
    "services": 3,
    "memory": 4,
    "mcp": 5,
    "console": 5,
    "hooks": 5,
    "__init__": 5,
    "cli": 6,
    "evaluation": 6,
    "serving": 6,
    "__main__": 6,
}
#: The front ends: each reaches memory through the facade, none through another front end.
FRONT_ENDS = {"mcp", "console", "hooks"}
#: Libraries that do I/O or belong to a front end: never imported by the pure domain.
IO_LIBRARIES = {
    "aiosqlite",
    "sqlite3",
    "psycopg",
    "psycopg_pool",
    "anyio",
    "fastembed",
    "tokenizers",
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


def _nodes(tree: ast.AST, runtime: bool) -> list[ast.AST]:
    """Every node of `tree`; with `runtime`, none under `if TYPE_CHECKING:`."""
    if not runtime:
        return list(ast.walk(tree))
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            todo += node.orelse
            continue
        todo += ast.iter_child_nodes(node)
    return out


def imported(path: Path, runtime: bool = False) -> list[tuple[str, int]]:
    """(module name inside nooa_mcp or a top-level library, line) for every import; with
    `runtime`, only those that run (not the ones for the type checker)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ".".join(("nooa_mcp", *path.relative_to(PACKAGE).parts[:-1]))
    out = []
    for node in _nodes(tree, runtime):
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
    [p for p in modules() if part_of(p) in FRONT_ENDS],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_a_front_end_imports_no_other_front_end(path: Path) -> None:
    mine = part_of(path)
    wrong = [
        f"line {line}: {name}"
        for name, line in imported(path)
        if name.split(".")[0] == "nooa_mcp"
        and len(name.split(".")) > 1
        and name.split(".")[1] in FRONT_ENDS - {mine}
    ]
    assert not wrong, f"{path.relative_to(PACKAGE)} imports another front end: {wrong}"


def module_name(path: Path) -> str:
    parts = ["nooa_mcp", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_cycles() -> list[list[str]]:
    """The groups of modules that import one another, through any chain of imports that run
    (lazy ones inside functions too); each group is sorted, the list by its first module."""
    paths = {module_name(p): p for p in modules()}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        graph[name] = set()
        for target, _ in imported(path, runtime=True):
            while target and target not in paths:
                target = target.rpartition(".")[0]
            # `nooa_mcp` itself only names its exports, and loads them when first asked.
            if target and target not in (name, "nooa_mcp"):
                graph[name].add(target)
    # Tarjan's strongly connected components, without recursion.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        cycles.append(sorted(group))
    return sorted(cycles)


def test_no_module_imports_itself_back() -> None:
    assert not import_cycles(), f"import cycles: {import_cycles()}"


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
    server = PACKAGE / "mcp" / "server.py"
    assert "nooa_mcp.mcp.catalog" in {name for name, _ in imported(server, runtime=True)}
    web = PACKAGE / "console" / "web.py"  # imports the Console for the type checker only
    assert "nooa_mcp.console.app" in {n for n, _ in imported(web)}
    assert "nooa_mcp.console.app" not in {n for n, _ in imported(web, runtime=True)}
    assert not SQL.search("Select the memory from the list")


# --------------------------------------------------------------------------- citations

REPOSITORY = PACKAGE.parent
#: What the package's comments may not cite: documents that are not in the repository (the
#: first specification, the issue tracker, the style notes, an interfaces file).
FOREIGN_CITATION = re.compile(
    r"\bSPEC\b|(?i:\bissues? #?\d+)|\bSTYLE(?:\.md| §)|\bINTERFACES(?:\.md)?\b"
)
MARKDOWN_NAME = re.compile(r"(?<![\w/.-])([\w/.-]*[\w-]\.md)\b")
DESIGN_SECTION = re.compile(r"DESIGN\.md(?:'s)? §(\d+(?:\.\d+)?)((?:, §\d+(?:\.\d+)?)*)")
TEXT_SUFFIXES = {".py", ".json", ".html", ".js", ".css", ".md", ".txt"}


def package_texts() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*") if p.suffix in TEXT_SUFFIXES and p.is_file())


def markdown_files() -> set[str]:
    """Paths of the repository's markdown files, and their bare names."""
    found = {p for p in REPOSITORY.rglob("*.md") if ".git" not in p.parts}
    return {str(p.relative_to(REPOSITORY)) for p in found} | {p.name for p in found}


def foreign_citations(text: str, known: set[str], prose: bool = True) -> list[str]:
    """The citations in `text` of documents the repository lacks. Markdown file names count
    only in `prose` (comments, docstrings): a string may name an example path."""
    out = [m.group(0) for m in FOREIGN_CITATION.finditer(text)]
    if prose:
        out += [name for name in MARKDOWN_NAME.findall(text) if name not in known]
    return out


def prose_lines(path: Path) -> set[int]:
    """Lines of a Python module that are comments or docstrings."""
    source = path.read_text(encoding="utf-8")
    lines = {
        token.start[0]
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    }
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                lines |= set(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def foreign_citations_in(paths: list[Path]) -> list[str]:
    known = markdown_files()
    found = []
    for path in paths:
        prose = prose_lines(path) if path.suffix == ".py" else None
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            in_prose = prose is None or number in prose
            for cited in foreign_citations(line, known, in_prose):
                found.append(f"{path.relative_to(REPOSITORY)}:{number}: {cited}")
    return found


def test_no_module_cites_a_document_the_repository_lacks() -> None:
    found = foreign_citations_in(package_texts())
    assert not found, "cite docs/DESIGN.md or say the reason instead:\n" + "\n".join(found)


def test_a_design_citation_names_a_section_the_design_has() -> None:
    sections = design_sections()
    wrong = []
    for path in package_texts():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for first, more in DESIGN_SECTION.findall(line):
                for cited in [first, *re.findall(r"§(\d+(?:\.\d+)?)", more)]:
                    if cited not in sections:
                        wrong.append(f"{path.relative_to(REPOSITORY)}:{number}: §{cited}")
    assert not wrong, "DESIGN.md has no such section: " + ", ".join(wrong)


def test_the_citation_checks_see_a_citation_when_there_is_one() -> None:
    known = markdown_files()
    assert "docs/DESIGN.md" in known and "BENCHMARKS.md" in known
    assert foreign_citations("(SPEC §5 fix 8)", known)
    assert foreign_citations("at 100k (issue 12)", known)
    assert foreign_citations("see INTERFACES.md", known)
    assert foreign_citations("as STYLE §4 says", known)
    assert foreign_citations("see NOTES.md", known)
    assert not foreign_citations("e.g. file:docs/notes.md", known, prose=False)
    module = PACKAGE / "domain" / "references.py"
    assert 1 in prose_lines(module)
    assert not foreign_citations("(DESIGN.md §5.7), figures in BENCHMARKS.md", known)
    assert not foreign_citations("the spec of a tool; an issue with 3 causes", known)
    assert DESIGN_SECTION.findall("(DESIGN.md §8.3, §8.6)") == [("8.3", ", §8.6")]
    assert {"5", "5.7", "16.8", "17.1"} <= design_sections()
    assert "16.30" not in design_sections()
