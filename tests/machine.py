"""What some tests need of the machine: root (tmpfs and bind mounts, device nodes), a second
core (OpenBLAS with two threads), glibc (malloc arenas), an address besides loopback.

Elsewhere they skip and pytest says why; with NOOA_REQUIRE_MACHINE=1 (set by CI, whose machine
has all of it) the skip is a failure instead, as NOOA_REQUIRE_POSTGRES=1 does for PostgreSQL.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def machine_lacks(reason: str) -> NoReturn:
    """Skip the test (or, with NOOA_REQUIRE_MACHINE=1, fail it) because `reason`."""
    if os.environ.get("NOOA_REQUIRE_MACHINE") == "1":
        pytest.fail(f"NOOA_REQUIRE_MACHINE=1 but {reason}", pytrace=False)
    pytest.skip(f"{reason}; set NOOA_REQUIRE_MACHINE=1 to fail instead")
