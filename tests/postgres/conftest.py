"""The PostgreSQL suite runs the tests of other directories' modules again (test_postgres_suite.py,
test_postgres_server.py import them by name): their directories go on sys.path here, so that
`python -m pytest tests/postgres` works alone and not only after those directories were collected.
"""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent

for folder in ("services", "mcp"):
    path = str(TESTS / folder)
    if path not in sys.path:
        sys.path.insert(0, path)
