"""Timing helpers the benchmarks share: best-of timing, the memcpy floor, one BLAS thread.

Import it before NumPy (`import _timing` works from any benchmark run as a script: Python puts the
script's folder on the path); it imports NumPy only when a helper needs it.
"""
from __future__ import annotations

import os
import time


def one_blas_thread() -> None:
    """Run NumPy's BLAS (and SciPy's) on one thread unless OPENBLAS_NUM_THREADS is set; call it
    before NumPy loads (subprocesses inherit it). The engine already holds the kernels' BLAS to one
    thread while it runs (ipu/blas.py); this also keeps NumPy's reference products off a second
    pool: on a shared 2-core host NumPy's and SciPy's pools spinning at once stall each other for
    tens of ms (a 32x784x256 product took 0.1 ms with one thread, 150 ms with two; bench_bert's
    NumPy step at hidden 128, 17 ms against 5.0 s at load 6.6)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def best_of(fn, repeats: int) -> float:
    """The fastest of `repeats` calls of `fn`, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def memcpy_seconds(nbytes: int, reps: int = 7) -> float:
    """The fastest of `reps` copies of `nbytes` bytes between two host buffers."""
    import numpy as np

    src = np.ones(max(nbytes, 1), np.uint8)
    dst = np.empty_like(src)
    return best_of(lambda: np.copyto(dst, src), reps)
