"""The public surface is the sorted `__all__` of the package, nothing more and nothing less."""

import nooa_mcp


def test_all_is_sorted_and_complete():
    exported = {name for name in dir(nooa_mcp) if not name.startswith("_") and name[0].isupper()}
    assert nooa_mcp.__all__ == sorted(nooa_mcp.__all__)
    assert set(nooa_mcp.__all__) == exported
