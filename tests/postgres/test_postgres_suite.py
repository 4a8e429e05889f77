"""The facade's behaviour suites again, with the store on PostgreSQL.

The tests of the modules below that need no more than a `Memory` (`mem`), its `settings` or its
`store_path` run here a second time: `store_path` is a fresh PostgreSQL schema instead of a
SQLite file, so every verb (author, recall, explain, update, todos, intents, tombstones, KPIs,
validity, the console's: revive, neighbourhood, maintenance log, and incremental reflection)
is checked on both backends by the same assertions.
"""

from __future__ import annotations

import inspect

import pytest
import test_facade_verbs
import test_import_again
import test_intents
import test_kpis
import test_memory
import test_planning
import test_recall
import test_server_reflect
import test_todos
import test_tombstones
import test_validity

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

_MODULES = (
    test_memory,
    test_facade_verbs,
    test_import_again,
    test_recall,
    test_intents,
    test_kpis,
    test_todos,
    test_tombstones,
    test_validity,
    test_server_reflect,
    test_planning,
)
#: Fixtures these tests may take: the store comes in through `store_path` (or `client`).
_ALLOWED = {"mem", "settings", "store_path", "embedder", "clock", "client"}
#: These set up or check rows with SQLite's own SQL (their behaviour is covered on PostgreSQL
#: by the contract suite: archiving, counting, owners and spreading through out_edges).
_SQLITE_SQL = {
    "test_forget_archives_and_recall_stops_returning_it",
    "test_a_foreign_memory_neither_appears_nor_relays_activation",
}


@pytest.fixture
def store_path(postgres: str) -> str:
    return postgres


def _is_fixture(obj: object) -> bool:
    return type(obj).__name__ == "FixtureFunctionDefinition" or hasattr(
        obj, "_pytestfixturefunction"
    )


def _parametrized(fn: object) -> set[str]:
    names: set[str] = set()
    for mark in getattr(fn, "pytestmark", []):
        if mark.name == "parametrize":
            given = mark.args[0]
            names |= {n.strip() for n in (given.split(",") if isinstance(given, str) else given)}
    return names


def _collect() -> dict[str, object]:
    out: dict[str, object] = {}
    for module in _MODULES:
        for name, obj in vars(module).items():
            if _is_fixture(obj) and name not in ("store_path", "settings"):
                out.setdefault(name, obj)
            elif name.startswith("test_") and inspect.isfunction(obj) and name not in _SQLITE_SQL:
                wanted = set(inspect.signature(obj).parameters) - _parametrized(obj)
                if wanted <= _ALLOWED:
                    out[name if name not in out else f"{name}_{module.__name__}"] = obj
    return out


globals().update(_collect())
