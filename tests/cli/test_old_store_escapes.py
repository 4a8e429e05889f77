"""A store written before lone surrogates were refused may hold one in a JSON column, as a
`\\u` escape (a tag, an entity, a recall's query in the access ring). Every reader answers on
it, writing U+FFFD where the character was, and a recall's access log heals the ring.

Before: `list`, `list --json`, `explain --id` and `export` ended in a traceback (pydantic's
json_invalid on the ring, a UnicodeEncodeError on a tag), and a recall printed one from its
access log: the store could not even be exported.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from writes_support import Cli, hash_cli


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    return hash_cli(tmp_path, monkeypatch)


def _old_store(cli: Cli) -> str:
    """One memory, recalled once, then its tag, entity and the ring's query rewritten as an
    earlier release could have stored them."""
    memory_id = cli("author", "The kettle is descaled monthly.", "--tag", "home").stdout.split()[1]
    assert cli("recall", "kettle").exit_code == 0
    with sqlite3.connect(cli.store) as db:
        (ring,) = db.execute("SELECT ring FROM memories").fetchone()
        assert '"query":"kettle"' in ring
        db.execute(
            "UPDATE memories SET tags = ?, entities = ?, ring = ?",
            (
                '["ho\\ud800me"]',
                '["ket\\udc00tle"]',
                ring.replace('"query":"kettle"', '"query":"ket\\udcfftle"'),
            ),
        )
    return memory_id


@pytest.mark.parametrize(
    "args",
    [
        ["list"],
        ["list", "--json"],
        ["explain", "--id", "ID"],
        ["recall", "kettle", "--json"],
        ["export"],
    ],
    ids=["list", "list-json", "explain-id", "recall-json", "export"],
)
def test_every_reader_answers_on_an_escaped_lone_surrogate(cli: Cli, args: list[str]) -> None:
    memory_id = _old_store(cli)
    result = cli(*[memory_id if a == "ID" else a for a in args])
    assert result.exit_code == 0, result.output
    text = result.stdout_bytes.decode("utf-8")  # strict: every byte is UTF-8
    assert "kettle" in text.lower() or "ket\ufffdtle" in text
    if args[0] in ("list", "export"):
        assert "ho\ufffdme" in text


def test_a_recall_heals_the_ring_it_logs_to(cli: Cli) -> None:
    _old_store(cli)
    result = cli("recall", "kettle")
    assert result.exit_code == 0 and "kettle" in result.stdout
    with sqlite3.connect(cli.store) as db:
        (ring,) = db.execute("SELECT ring FROM memories").fetchone()
    queries = [r.get("query") for r in json.loads(ring)]
    assert queries[:3] == ["kettle", "ket\ufffdtle", None], queries
