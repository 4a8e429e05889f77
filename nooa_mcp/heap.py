"""Hand memory the process freed back to the operating system (glibc's `malloc_trim`).

glibc keeps freed heap memory for reuse: after a burst of short-lived allocations (loading the
ONNX model, reading 100k vectors in pages, a reflection pass, a batch of embeddings) the
process's RSS stays at the burst's peak although nothing holds that memory any more. Measured
on a 100k store (issue 12): the model load alone leaves ~60 MB of freed, still-resident heap,
and a server held 460 MB where 395 MB was live. `malloc_trim(0)` returns the free pages of
every arena (also those in the middle of a heap) and costs a few milliseconds, so it runs only
after those bursts, never on the path a recall waits on.

Elsewhere (macOS, musl) there is no `malloc_trim`: the call does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from collections.abc import Callable

_trim: Callable[[int], int] | None = None
_looked = False


def _lookup() -> Callable[[int], int] | None:
    global _trim, _looked
    if not _looked:
        _looked = True
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                fn = libc.malloc_trim
                fn.argtypes = [ctypes.c_size_t]
                fn.restype = ctypes.c_int
                _trim = fn
            except (OSError, AttributeError):  # not glibc
                _trim = None
    return _trim


def release_free_memory() -> bool:
    """Return freed heap pages to the OS; True if the C library could (glibc only)."""
    trim = _lookup()
    if trim is None:
        return False
    trim(0)
    return True
