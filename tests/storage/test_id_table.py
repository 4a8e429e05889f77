"""The vector index's id table (nooa_mcp/storage/ids.py): every id found at its row, nothing
else found, whatever the hashes, the text or the order of appends and merges."""

from __future__ import annotations

import numpy as np
import pytest

from nooa_mcp.storage import ids as ids_module
from nooa_mcp.storage.ids import IdTable


class Collides(str):
    """An id whose hash is the same as every other Collides: lookups must compare the text."""

    def __hash__(self) -> int:
        return 42


@pytest.fixture
def small_merges(monkeypatch):
    monkeypatch.setattr(ids_module, "MERGE_AT", 7)


def test_every_id_is_found_at_its_row_across_merges(small_merges):
    table = IdTable()
    names = [f"m-{i:04x}" for i in range(100)] + ["é-ünïcode", "D1:2", "a" * 300]
    rows = [table.append(n) for n in names]
    assert rows == list(range(len(names)))
    assert len(table) == len(names) and list(table) == names
    assert [table[r] for r in rows] == names
    assert [table.get(n) for n in names] == rows
    found = table.rows_of([*reversed(names), "absent", ""])
    assert found.tolist() == [*reversed(rows), -1, -1]
    table.settle()
    assert table.rows_of(names).tolist() == rows
    assert "absent" not in table and "D1:2" in table
    assert table.get("absent", -5) == -5


def test_ids_with_equal_hashes_are_told_apart_by_their_text(small_merges):
    table = IdTable()
    first = [Collides(f"c{i}") for i in range(10)]
    for name in first:
        table.append(name)
    table.settle()
    assert table.rows_of([Collides("c9"), Collides("c0"), Collides("zz")]).tolist() == [9, 0, -1]
    assert table.get(Collides("c5")) == 5


def test_a_lookup_before_any_merge_uses_the_recent_rows():
    table = IdTable()
    table.append("only")
    assert table.rows_of(["only", "other"]).tolist() == [0, -1]
    with pytest.raises(IndexError):
        table[1]


def test_a_hundred_thousand_ids_cost_a_third_of_a_list_and_dict():
    table = IdTable()
    rng = np.random.default_rng(0)
    names = [f"{rng.integers(1 << 62):032x}" for _ in range(100_000)]
    for n in names:
        table.append(n)
    table.settle()
    held = len(table._data) + table._ends.nbytes + table._hashes.nbytes + table._rows.nbytes
    assert held < 6_000_000  # measured: list + dict + strs + ints held ~15.4 MiB
    sample = names[::997]
    assert table.rows_of(sample).tolist() == list(range(0, 100_000, 997))


def test_names_decodes_many_rows_at_once_and_refuses_a_row_not_here(small_merges):
    table = IdTable()
    names = [f"m-{i}" for i in range(20)] + ["é-ünïcode", ""]
    for n in names:
        table.append(n)
    assert table.names([21, 0, 20, 5, 5]) == ["", "m-0", "é-ünïcode", "m-5", "m-5"]
    assert table.names(np.array([], dtype=np.int64)) == []
    for bad in ([22], [-1], [3, 40]):
        with pytest.raises(IndexError):
            table.names(bad)


def test_a_lookup_of_many_ids_keeps_none_of_them_and_a_small_one_keeps_its_own():
    """`rows_of` keeps the ids it found for the next lookup (recall asks for the same ~100
    ten times), at most FOUND_AT_MOST: a lookup of more (a store's links as they load) keeps
    none, so no cache holds 100k id strings alive until some later recall empties it."""
    table = IdTable()
    names = [f"memory-{i:06d}" for i in range(3 * ids_module.FOUND_AT_MOST)]
    for name in names:
        table.append(name)
    table.settle()
    small = names[:100]
    assert table.rows_of(small).tolist() == list(range(100))
    assert set(table._found) == set(small)
    assert table.rows_of(names).tolist() == list(range(len(names)))
    assert set(table._found) == set(small)  # the large lookup kept nothing, dropped nothing
    # Small lookups fill it up to the bound, then start it again.
    for start in range(100, len(names), 1000):
        table.rows_of(names[start : start + 1000])
        assert len(table._found) <= ids_module.FOUND_AT_MOST
