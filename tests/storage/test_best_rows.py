"""The top-n selection a recall's vector search ends with (`storage.vectors.best`): exactly the
n largest cosines, best first, equal ones in row order, however the blocks fall."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st
from vector_rows import info_rows

from nooa_mcp.domain.scope import Scope
from nooa_mcp.storage.vectors import VectorIndex, best

#: A few values only, so that ties (and ties at the n-th place) are common; -inf is a row a
#: mask left out.
_VALUES = st.sampled_from([-np.inf, -0.25, 0.0, 0.1, 0.1000001, 0.5, 0.9, 1.0])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_VALUES, min_size=0, max_size=3000),
    st.integers(min_value=0, max_value=80),
)
def test_best_is_the_stable_order_of_every_value_cut_at_n(values, n):
    sims = np.array(values, dtype=np.float32)
    expected = np.argsort(-sims, kind="stable")[:n]
    assert best(sims, n).tolist() == expected.tolist()


def test_best_on_a_large_array_finds_the_values_a_full_sort_finds():
    rng = np.random.default_rng(7)
    sims = rng.standard_normal(100_000).astype(np.float32)
    # The n largest all in one block, and a tie across the n-th place far apart.
    sims[500:560] = 10.0 + np.arange(60, dtype=np.float32)
    sims[[3, 90_000]] = 9.5
    for n in (1, 50, 61, 62, 1000):
        assert best(sims, n).tolist() == np.argsort(-sims, kind="stable")[:n].tolist()
    assert best(sims, 61)[-1] == 3  # of the two equal at the 61st place, the first row


def test_equal_cosines_come_back_in_row_order_from_a_search():
    index = VectorIndex(4)
    same = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
    other = np.array([0.0, 1.0, 0.0, 0.0], dtype=np.float32)
    index._apply(
        info_rows([same if i % 1000 in (7, 3) else other for i in range(20_000)], "m{:05d}")
    )
    scope = Scope(roles=frozenset({"r"}))
    hits = index.search(same, index.mask(scope), 5)
    assert [memory_id for memory_id, _ in hits] == [
        "m00003",
        "m00007",
        "m01003",
        "m01007",
        "m02003",
    ]
    assert {cos for _, cos in hits} == {1.0}
