"""Hand memory the process freed back to the operating system (glibc's `malloc_trim`).

glibc keeps freed heap memory for reuse: after a burst of short-lived allocations (loading the
ONNX model, reading 100k vectors in pages, a reflection pass, a batch of embeddings) the
process's RSS stays at the burst's peak although nothing holds that memory any more (the
model load alone leaves tens of MB of it). `malloc_trim(0)` returns the free pages of
every arena (also those in the middle of a heap) and costs a few milliseconds, so it runs only
after those bursts, never on the path a recall waits on.

A server also tunes glibc's allocator once, before its threads start (`tune_malloc`):
- Two arenas at most: each thread that allocates gets an arena of its own (up to 8 per core),
  and a server's threads — the event loop, SQLite's, the model's, reflection's — each kept a
  heap of its own peaks.
- A fixed mmap threshold of 1 MiB: glibc raises the threshold after freeing a mapped block,
  so a reflection pass's large temporaries moved into the heap, where they stayed resident.

Memory the process still holds but has zeroed and not yet used (the rows an array grown in
place keeps ahead, `release_zeroed_pages`) is handed back the same way, page by page
(`madvise(MADV_DONTNEED)`): those pages read as zeros again and are resident only once written.

Elsewhere (macOS, musl) there is no `malloc_trim` or `mallopt`: the calls do nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import sys
from typing import Any

#: mallopt's parameter numbers (glibc's malloc.h).
M_ARENA_MAX = -8
M_MMAP_THRESHOLD = -3
#: Arenas a server keeps: each arena holds on to its own freed memory, and two serve a
#: server's few threads as fast as more do (figures in BENCHMARKS.md).
SERVER_ARENAS = 2
#: Blocks from this size up are mapped, and unmapped when freed: a fixed threshold keeps a
#: pass's large blocks from staying resident after it, and passes run as fast.
SERVER_MMAP_THRESHOLD = 1 << 20
#: madvise's advice to drop a private anonymous page: it reads as zeros on its next touch.
MADV_DONTNEED = 4

_libc: ctypes.CDLL | None = None
_looked = False


def _glibc() -> ctypes.CDLL | None:
    global _libc, _looked
    if not _looked:
        _looked = True
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                libc.malloc_trim.argtypes = [ctypes.c_size_t]
                libc.malloc_trim.restype = ctypes.c_int
                libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
                libc.mallopt.restype = ctypes.c_int
                libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
                libc.madvise.restype = ctypes.c_int
                _libc = libc
            except (OSError, AttributeError):  # not glibc
                _libc = None
    return _libc


def tune_malloc(arenas: int = SERVER_ARENAS, mmap_threshold: int = SERVER_MMAP_THRESHOLD) -> bool:
    """Cap glibc's arenas and fix its mmap threshold (call before the process starts its
    threads); True if both were set. What the user set in the environment
    (`MALLOC_ARENA_MAX`, `MALLOC_MMAP_THRESHOLD_`) is left alone.
    """
    libc = _glibc()
    if libc is None:
        return False
    done = []
    for variable, parameter, value in (
        ("MALLOC_ARENA_MAX", M_ARENA_MAX, arenas),
        ("MALLOC_MMAP_THRESHOLD_", M_MMAP_THRESHOLD, mmap_threshold),
    ):
        done.append(not os.environ.get(variable) and libc.mallopt(parameter, value) == 1)
    return all(done)


def release_free_memory() -> bool:
    """Return freed heap pages to the OS; True if the C library could (glibc only)."""
    libc = _glibc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


def release_zeroed_pages(array: Any, start: int) -> int:
    """Hand back the whole pages of `array`'s bytes from byte `start` on, which must be zeros
    the process has no use for yet (rows allocated ahead); the bytes handed back (0 where the
    C library cannot). The array keeps its memory: a page read again reads zeros, and is
    resident once written.

    `ndarray.resize` zero-fills the rows it adds, which makes them resident: at 100k rows of
    384 floats, the 4,096 rows a matrix grows by ahead of its writes were 6 MiB of RSS.
    """
    libc = _glibc()
    if libc is None or not array.flags.c_contiguous:
        return 0
    base = array.ctypes.data
    page = mmap.PAGESIZE
    first = -(-(base + start) // page) * page
    last = (base + array.nbytes) // page * page
    if last <= first or libc.madvise(first, last - first, MADV_DONTNEED) != 0:
        return 0
    return last - first
