"""Which markers a test gets, so that `pytest -m` can pick a suite or leave one out.

The suites kept apart are marked by their directory (tests/postgres, tests/property,
tests/stress); elsewhere a test is marked by what it needs: the PostgreSQL fixture or backend
(`postgres`), Chromium (`browser`), the bundled model (`real_model`), Hypothesis (`property`).
`processes` stays a mark written on each test that starts a server process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent
SUITE_DIRECTORIES = {"postgres": "postgres", "property": "property", "stress": "stress"}


def needed_marks(item: Any) -> set[str]:
    """The markers a collected test `item` gets from its directory and the fixtures it uses."""
    marks = set()
    parts = Path(item.path).resolve().relative_to(TESTS).parts
    if len(parts) > 1 and parts[0] in SUITE_DIRECTORIES:
        marks.add(SUITE_DIRECTORIES[parts[0]])
    fixtures = set(getattr(item, "fixturenames", ()))
    params = getattr(getattr(item, "callspec", None), "params", {})
    if "postgres" in fixtures or any(
        isinstance(value, str) and value == "postgresql" for value in params.values()
    ):
        marks.add("postgres")
    if "chromium" in fixtures:
        marks.add("browser")
    if "minilm" in fixtures:
        marks.add("real_model")
    if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
        marks.add("property")
    return marks
