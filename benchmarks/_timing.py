"""Timing helpers the benchmarks share: timing with its spread, the memcpy floor, one BLAS thread.

A benchmark reports the best run beside the median and the 10th-90th percentile range: the best
is what the code costs with no interference, the median what a user of a shared host meets.

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


class Spread:
    """Wall times of repeated runs (seconds): best, median and the 10th-90th percentile range."""

    def __init__(self, times):
        import numpy as np

        t = np.asarray(list(times), np.float64)
        if t.size == 0:
            raise ValueError("Spread: no times")
        self.times = t
        self.best = float(t.min())
        self.median = float(np.median(t))
        self.p10, self.p90 = (float(v) for v in np.percentile(t, [10, 90]))

    def __float__(self) -> float:
        return self.best

    def ms(self, digits: int = 1) -> str:
        """'best 6.2 ms, median 7.0 (6.4-8.1)': the best, the median and the p10-p90 range."""
        f = f".{digits}f"
        return (f"best {self.best * 1e3:{f}} ms, median {self.median * 1e3:{f}} "
                f"({self.p10 * 1e3:{f}}-{self.p90 * 1e3:{f}})")

    def ratio(self, other: "Spread") -> str:
        """This spread over another measured in the same run: best / best and median / median."""
        return f"{self.best / other.best:.1f}x (median {self.median / other.median:.1f}x)"


def times_of(fn, repeats: int) -> Spread:
    """Wall times of `repeats` calls of `fn`."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return Spread(times)


def best_of(fn, repeats: int) -> float:
    """The fastest of `repeats` calls of `fn`, in seconds."""
    return times_of(fn, repeats).best


def load_average() -> str:
    """The host's 1-minute load average, printed beside the figures (the host is often shared)."""
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:
        return "?"


def memcpy_seconds(nbytes: int, reps: int = 7) -> float:
    """The fastest of `reps` copies of `nbytes` bytes between two host buffers."""
    import numpy as np

    src = np.ones(max(nbytes, 1), np.uint8)
    dst = np.empty_like(src)
    return best_of(lambda: np.copyto(dst, src), reps)
