"""The markers that let `pytest -m` pick a suite: by directory and by what a test needs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from suite_marks import TESTS, needed_marks


def item(path: str, fixtures=(), params=None, obj=None) -> SimpleNamespace:
    callspec = SimpleNamespace(params=params) if params is not None else None
    return SimpleNamespace(
        path=TESTS / path, fixturenames=list(fixtures), callspec=callspec, obj=obj
    )


def plain() -> None:
    pass


@given(st.integers())
def drawn(n: int) -> None:
    pass


def test_the_suites_apart_are_marked_by_their_directory() -> None:
    assert needed_marks(item("postgres/test_postgres_store.py")) == {"postgres"}
    assert needed_marks(item("property/test_fuzz_tools.py")) == {"property"}
    assert needed_marks(item("stress/test_stress_processes.py")) == {"stress"}
    # A file of that name elsewhere is not in the suite.
    assert needed_marks(item("mcp/test_postgres_like.py", obj=plain)) == set()


def test_a_test_is_marked_by_the_fixtures_it_needs() -> None:
    assert needed_marks(item("services/test_x.py", ["tmp_path", "postgres"])) == {"postgres"}
    assert needed_marks(item("console/test_x.py", ["site", "chromium"])) == {"browser"}
    assert needed_marks(item("engine/test_x.py", ["minilm", "tmp_path"])) == {"real_model"}
    assert needed_marks(item("services/test_x.py", ["mem", "store_path"], obj=plain)) == set()


def test_only_the_postgresql_variant_of_a_backend_parameter_needs_postgres() -> None:
    both = ["store_target", "tmp_path"]
    on_pg = item("storage/test_x.py", both, {"store_target": "postgresql"})
    on_sqlite = item("storage/test_x.py", both, {"store_target": "sqlite"})
    assert needed_marks(on_pg) == {"postgres"}
    assert needed_marks(on_sqlite) == set()
    # A parameter that is not text (an array, a number) is never mistaken for a backend.
    assert needed_marks(item("domain/test_x.py", params={"rows": [1, 2], "k": 3})) == set()


def test_a_hypothesis_test_is_a_property_test_wherever_it_lives() -> None:
    assert needed_marks(item("storage/test_store.py", obj=drawn)) == {"property"}
    assert needed_marks(item("storage/test_store.py", obj=plain)) == set()


@settings(max_examples=1, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.just(0))
def test_the_collection_hook_puts_the_marks_on_the_collected_test(
    request: pytest.FixtureRequest, n: int
) -> None:
    assert request.node.get_closest_marker("property") is not None
