"""A small sketch of each stored vector that bounds its cosine with any query from above.

A write asks whether any stored memory is at cosine ≥ 0.92 (a near-duplicate) or any
forgotten one at ≥ 0.95 (a tombstone); a recall asks for the 50 best, whose 50th sits near
0.56 at 100k LoCoMo memories. A product over every row answers either by reading the whole
matrix, at 100k rows the largest cost of a write after the model and of a recall. Few rows
come near such a line, and this sketch says which rows cannot, without reading them.

For an orthonormal basis B (d × dim) and vectors q, x, split each into its part in the
basis and the rest: q·x = (Bq)·(Bx) + q⊥·x⊥, and by Cauchy–Schwarz q⊥·x⊥ ≤ |q⊥|·|x⊥|. So

    q·x ≤ (Bq)·(Bx) + |q⊥|·|x⊥|,   |x⊥|² = |x|² − |Bx|²

for any orthonormal B: a row whose bound is under the threshold is under it, and only the
rows left are multiplied in full. The answer is the full product's, exactly; the basis only
decides how many rows are left. Sentence embeddings share a few strong directions, so B is
their top principal directions (of the uncentred second moment, which is what dot products
see): on 100k MiniLM memories of LoCoMo text, 24 directions leave ~70 of 100k rows to
multiply at 0.92 (0.27 ms against 7.2 ms for the full product), but half the rows at a
recall's 0.56; 64 leave about one in twenty there (BENCHMARKS.md). A basis fitted on another
mix of texts is as exact, only less selective.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["DIM", "FIT_ROWS", "MARGIN", "REST_FLOOR", "bounds", "estimates", "fit", "project"]

#: Directions kept per row: 256 bytes a row (24.4 MiB at 100k) beside the row's 1,536.
#: 24 were enough for a write's near-duplicate check at 0.92 (~70 rows of 100k left); a
#: recall's top 50 sits near 0.56, where 24 leave half the rows and 64 about one in twenty.
DIM = 64
#: Rows the basis is fitted on (a seeded sample): their 384 × 384 second moment.
FIT_ROWS = 4096
#: Slack added to every bound, over the float32 rounding of the sketch's products (~1e-5):
#: a row kept in error only costs its product.
MARGIN = 1e-3
#: Added to every squared norm outside the basis before its root: |x⊥|² is a difference
#: of two sums, off by up to ~5e-5 in float32, which near 0 would make the root too small
#: by ~7e-3; with this it is never too small, and 1e-4 looser at the usual 0.5.
REST_FLOOR = 1e-4


def fit(sample: np.ndarray, dim: int = DIM) -> np.ndarray:
    """An orthonormal basis (dim × width, float32): the top principal directions of `sample`'s
    rows, uncentred. Fewer rows than `dim` still give a basis (any orthonormal one is exact)."""
    width = sample.shape[1]
    dim = min(dim, width)
    # float32 products: no float64 copy of the sample (~25 MB); the basis only has to be
    # orthonormal, which eigh makes it in float64.
    moment = (sample.T @ sample).astype(np.float64)
    values, vectors = np.linalg.eigh(moment)  # ascending
    top = vectors[:, np.argsort(values, kind="stable")[::-1][:dim]]
    return np.ascontiguousarray(top.T, dtype=np.float32)


def project(basis: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's part in the basis (n × d) and the norm of what the basis misses (n,)."""
    inside = rows @ basis.T
    whole = np.einsum("ij,ij->i", rows, rows, dtype=np.float64)
    kept = np.einsum("ij,ij->i", inside, inside, dtype=np.float64)
    rest = np.sqrt(np.maximum(whole - kept, 0.0) + REST_FLOOR).astype(np.float32)
    return inside.astype(np.float32, copy=False), rest


def bounds(
    sketch: np.ndarray, rest: np.ndarray, basis: np.ndarray, queries: np.ndarray
) -> np.ndarray:
    """Upper bounds of every row's dot product with each query, `MARGIN` included: shape
    (rows,) for one query, (rows, k) for a (k, width) block."""
    one = queries.ndim == 1
    block = np.atleast_2d(np.asarray(queries, dtype=np.float32))
    inside, outside = project(basis, block)
    out = sketch @ inside.T
    out += rest[:, None] * outside[None, :]
    out += MARGIN
    return out[:, 0] if one else out


def estimates(
    sketch: np.ndarray,
    rest: np.ndarray,
    basis: np.ndarray,
    query: np.ndarray,
    product: Callable[[np.ndarray, np.ndarray], np.ndarray] = np.matmul,
) -> tuple[np.ndarray, np.ndarray]:
    """For one query: each row's dot product within the basis (its cosine's estimate, which
    ranks rows close to how their cosines do) and its upper bound, as `bounds` gives it.
    `product(rows, vector)` multiplies (the index passes its own, split across the cores)."""
    inside, outside = project(basis, np.asarray(query, dtype=np.float32)[None, :])
    estimate = product(sketch, inside[0])
    bound = rest * outside[0]
    bound += estimate
    bound += MARGIN
    return estimate, bound
