"""Rows for a vector index built directly in storage tests (`VectorIndex._apply`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nooa_mcp.storage.base import VectorRow


def info_rows(vectors: Sequence[np.ndarray], name: str = "m{}") -> list[VectorRow]:
    """One live `info` memory of role "r" and the shared owner per vector, in order: seq i + 1,
    id `name.format(i)`."""
    return [
        VectorRow(i + 1, name.format(i), "r", "", "info", False, vector)
        for i, vector in enumerate(vectors)
    ]
