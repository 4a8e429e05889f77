"""The vector matrix at half width: int16 codes and one float32 scale per row (DESIGN.md §15).

The matrix is most of a server's memory (147 MiB of float32 at 100k rows of 384). A row x is
held as codes c = rint(x / s) with s = max|x| / 32767, and read back as s·c in float32: half
the bytes, and each component within s/2 of x (~5·10⁻⁶ for a unit MiniLM vector; a cosine
moves by under 10⁻⁵, BENCHMARKS.md "The matrix at half width"). A product multiplies the
codes and scales each row's result (`HalfWidth.unscaled`), so a row's cosine is the same bits
whichever rows it is read with; every other reader (the sketch, hashes, reflection's sweeps,
ranking) reads the dequantized rows s·c, whose products differ from those by a rounding, far
inside the sketch's margin. The store keeps the float32 vectors as written.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

#: The largest code: a row's largest component maps to ±CODE_MAX.
CODE_MAX = 32767
#: Rows converted at a time when a product reads many (`HalfWidth.unscaled`): 768 KiB of
#: float32, under the allocator's mmap threshold, in a buffer each thread keeps.
BLOCK_ROWS = 512

_buffers = threading.local()


def quantize(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes (int16, the shape of `vectors`) and scales (float32, one per vector) with
    `vectors ≈ codes · scale`. A zero vector gets scale 0 and zero codes."""
    vectors = np.asarray(vectors, dtype=np.float32)
    scale = (np.abs(vectors).max(axis=-1, initial=0.0) / np.float32(CODE_MAX)).astype(np.float32)
    divisor = np.where(scale > 0, scale, np.float32(1.0))
    codes = np.rint(vectors / divisor[..., None]).astype(np.int16)
    return codes, scale


def dequantize(codes: np.ndarray, scale: Any) -> np.ndarray:
    """`codes · scale` as float32 (one row, or rows with a scale each)."""
    scale = np.asarray(scale, dtype=np.float32)
    return np.multiply(codes, scale[..., None], dtype=np.float32)


class HalfWidth:
    """The float32 rows of a matrix held as codes and scales, read-only: indexing (a row, a
    slice, an array or list of rows) dequantizes the rows asked for into a new array."""

    __slots__ = ("codes", "scale")

    def __init__(self, codes: np.ndarray, scale: np.ndarray) -> None:
        self.codes = codes
        self.scale = scale

    @property
    def shape(self) -> tuple[int, ...]:
        return self.codes.shape

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.float32)

    def __len__(self) -> int:
        return int(self.codes.shape[0])

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, tuple):  # (rows, columns): the rows, then those columns of them
            rows = self[key[0]]
            return rows[key[1:]] if rows.ndim == 1 else rows[(slice(None), *key[1:])]
        if isinstance(key, list):
            key = np.asarray(key, dtype=np.int64)
        return dequantize(self.codes[key], self.scale[key])

    def multiply(
        self,
        rows: slice | np.ndarray,
        right: np.ndarray,
        out: np.ndarray,
        kernel: Callable[[np.ndarray, np.ndarray, np.ndarray], Any] = np.matmul,
    ) -> None:
        """`self[rows] @ right` into `out` (a vector or a block of them on the right): the
        codes `BLOCK_ROWS` rows at a time (`unscaled`) by `kernel(rows, right, out)`, then
        each row's result times its scale — one multiply a row instead of one a component,
        no copy of the matrix ever made whole, and blocks that start where `rows` starts,
        so a row's result is the same bits in any product that cuts its rows alike."""
        n = out.shape[0]
        for lo in range(0, n, BLOCK_ROWS):
            hi = min(lo + BLOCK_ROWS, n)
            if isinstance(rows, slice):
                key: slice | np.ndarray = slice(rows.start + lo, rows.start + hi)
            else:
                key = rows[lo:hi]
            kernel(self.unscaled(key), right, out[lo:hi])
        scale = self.scale[rows]
        out *= scale if out.ndim == 1 else scale[:, None]

    def unscaled(self, key: slice | np.ndarray) -> np.ndarray:
        """The codes of the rows `key` selects (at most `BLOCK_ROWS`) as float32, not scaled,
        in this thread's buffer: valid until the thread's next call (`multiply`)."""
        codes = self.codes[key]
        n, dim = codes.shape
        buffer = getattr(_buffers, "rows", None)
        if buffer is None or buffer.shape[1] != dim or buffer.shape[0] < n:
            buffer = _buffers.rows = np.empty((max(n, BLOCK_ROWS), dim), dtype=np.float32)
        rows = buffer[:n]
        np.copyto(rows, codes, casting="unsafe")
        return rows
