"""`nooa-mcp eval locomo` measures the product as shipped.

By default each turn goes in through the memory_author tool path and each question is asked
through memory_recall (live); `--ingest import` and `--ask explain` are the variants, and the
report shows the four cells side by side beside the ablations. A one-conversation slice built
here keeps the test fast; the real data set is never copied.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from locomo_slice import conversation

from nooa_mcp.cli import main

NUMBER = re.compile(r"\d\.\d{2,}")


@pytest.fixture
def locomo_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("NOOA_OWNER", "NOOA_STORE", "NOOA_REFERENCE_ROOT", "NOOA_READ"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "slice.json"
    path.write_text(json.dumps([conversation("conv-tool")]))
    return path


def run(*args: str):
    return CliRunner().invoke(main, ["eval", "locomo", *args], catch_exceptions=False)


def _row(lines: list[str], word: str) -> bool:
    """A table row labelled `word` (before its first figure) carrying at least two figures."""
    for line in lines:
        first = NUMBER.search(line)
        labelled = first and re.search(rf"\b{word}\b", line[: first.start()], re.I)
        if labelled and len(NUMBER.findall(line)) >= 2:
            return True
    return False


def _header(lines: list[str], a: str, b: str) -> bool:
    return any(
        re.search(rf"\b{a}\b", line, re.I)
        and re.search(rf"\b{b}\b", line, re.I)
        and not NUMBER.search(line)
        for line in lines
    )


def shows_four_cells(report: str) -> bool:
    """tool/import × recall/explain, whichever way round the table is laid out."""
    lines = report.splitlines()
    return (
        _row(lines, "tool") and _row(lines, "import") and _header(lines, "recall", "explain")
    ) or (_row(lines, "recall") and _row(lines, "explain") and _header(lines, "tool", "import"))


@pytest.mark.parametrize(
    ("ingest", "ask"),
    [("tool", "recall"), ("tool", "explain"), ("import", "recall"), ("import", "explain")],
)
def test_eval_locomo_takes_the_ingest_path_and_the_way_of_asking(
    locomo_file: Path, ingest: str, ask: str
) -> None:
    result = run(
        str(locomo_file),
        "--conversations",
        "1",
        "--embedder",
        "hash",
        "--ingest",
        ingest,
        "--ask",
        ask,
        "--json",
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["questions"], data["skipped_questions"], data["turns"]) == (3, 1, 7)
    # Whatever the path, every turn is its own memory: nothing is merged on the way in.
    assert data["memories"] == 7
    assert "full" in data["variants"] and "-rec" in data["variants"]


def test_the_default_eval_report_shows_the_four_cells_and_keeps_the_ablations(
    locomo_file: Path,
) -> None:
    result = run(str(locomo_file), "--conversations", "1", "--embedder", "hash")
    assert result.exit_code == 0, result.output
    report = result.stdout
    assert shows_four_cells(report), report
    for ablation in ("-rec", "-imp", "-spread", "cosine-only", "bm25-only", "rrf", "grep"):
        assert re.search(rf"^{re.escape(ablation)}\s", report, re.M), ablation


def test_an_unknown_ingest_path_is_refused_naming_the_choices(locomo_file: Path) -> None:
    result = run(str(locomo_file), "--embedder", "hash", "--ingest", "carrier-pigeon")
    assert result.exit_code != 0
    assert "--ingest" in result.output
    assert "tool" in result.output and "import" in result.output
    assert "Traceback" not in result.output


def test_the_four_cell_check_rejects_todays_single_table() -> None:
    """The detector above must not accept a report without the cells (a test that can fail)."""
    today = "\n".join(
        [
            "variant         R@5   R@10    MRR  evR@5",
            "full          0.708  0.791  0.540  0.650",
            "-rec          0.700  0.790  0.530  0.640",
            "cosine-only   0.414  0.500  0.330  0.400",
        ]
    )
    cells = "\n".join(
        [
            "full scorer      recall  explain",
            "tool             0.612   0.615",
            "import           0.700   0.708",
        ]
    )
    assert not shows_four_cells(today)
    assert shows_four_cells(cells)
