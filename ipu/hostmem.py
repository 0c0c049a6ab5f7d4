"""Host memory for the simulated tiles: one zeroed block per engine, on huge pages where the host has them.

A step touches every tile's slice of the engine memory: an exchange of 200,000 short runs, a compute
set of thousands of vertices each on its own tile. Tiles are a few KB to 624 KB apart, so with 4 KiB
pages nearly every run and vertex needs its own TLB entry, and on a virtual machine a TLB miss is a
two-level page walk. Transparent huge pages (2 MiB) cover a whole small program in a handful of
entries. Linux gives them to an anonymous mapping that asks (`madvise(MADV_HUGEPAGE)`, honoured
when /sys/kernel/mm/transparent_hugepage/enabled is `always` or `madvise`); elsewhere, or for
blocks under one huge page, this is a plain zeroed NumPy array. The contents and results are the
same either way: only the host's address translation changes. IPU_SIM_HUGE_PAGES=0 turns it off.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import mmap

import numpy as np

from . import env

__all__ = ["release_freed", "zeroed_memory"]

HUGE_PAGE = 1 << 21


def zeroed_memory(rows: int, row_bytes: int, huge_pages: bool | None = None) -> np.ndarray:
    """A zeroed uint8 array of shape (rows, row_bytes), on huge pages when the host grants them
    (unless huge_pages is False; None: IPU_SIM_HUGE_PAGES decides)."""
    nbytes = rows * row_bytes
    wanted = env.huge_pages() if huge_pages is None else huge_pages
    if nbytes < HUGE_PAGE or not wanted or not hasattr(mmap, "MADV_HUGEPAGE"):
        return np.zeros((rows, row_bytes), np.uint8)
    size = -(-nbytes // HUGE_PAGE) * HUGE_PAGE
    try:
        block = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        block.madvise(mmap.MADV_HUGEPAGE)
    except (OSError, ValueError):  # no such advice here: ordinary pages
        return np.zeros((rows, row_bytes), np.uint8)
    # the array keeps the mapping alive (its base); anonymous pages start zeroed
    return np.frombuffer(block, np.uint8, nbytes).reshape(rows, row_bytes)


_TRIM: list = []  # [glibc's malloc_trim, or None where the C library has none], once looked up


def release_freed() -> None:
    """Give the heap pages freed so far back to the OS (glibc's `malloc_trim`; elsewhere nothing).

    NumPy takes arrays under a threshold (which glibc raises up to 32 MiB as large blocks are
    freed) from the C heap, and freeing them keeps their pages resident. The compiler's garbage
    and the copy tables the step loop replaces by its own are such arrays, and left resident they
    add to the process's peak: BERT-base, 4 layers, about 0.9 GiB."""
    if not _TRIM:
        name = ctypes.util.find_library("c")
        fn = getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
        if fn is not None:
            fn.argtypes = [ctypes.c_size_t]
        _TRIM.append(fn)
    if _TRIM[0] is not None:
        _TRIM[0](0)
