"""How many threads the kernels' BLAS runs on while an engine runs.

The matmul vertices call SciPy's BLAS `sgemm` (`scipy.linalg.cython_blas`, the routine Numba's
`np.dot` binds to; codelets/_sgemm.py); PyPI wheels of SciPy carry their own OpenBLAS, apart from NumPy's.
The engine already spreads a compute set over host threads (ipu/native.py), so a BLAS pool inside
each vertex only competes with them and with NumPy's pool: on a 2-core host the spinning pools
stall each other. While `Engine.run` runs, SciPy's BLAS is held to the engine's `blas_threads`
(default IPU_SIM_BLAS_THREADS, else 1; 0 leaves it alone) and put back
as it was when the last concurrent run ends. NumPy's own BLAS is left alone unless SciPy shares it
(a system or conda BLAS), and then only for the run; a host callback's SciPy calls during a run
get the limit too. Results are bitwise the same either way (tests/machine/test_blas_threads.py).

The libraries are found once, after a kernel has loaded SciPy's BLAS bindings (compiling a
program that multiplies does); entering and leaving then costs a few microseconds.
"""
from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager

import numpy
from threadpoolctl import ThreadpoolController

from . import env

__all__ = ["blas_threads", "kernel_blas_libraries", "single_threaded_kernel_blas"]

_BINDINGS = "scipy.linalg.cython_blas"  # what the kernels' sgemm comes from


def blas_threads() -> int:
    """Threads the kernels' BLAS gets during a run: IPU_SIM_BLAS_THREADS (0: leave it alone)."""
    return env.blas_threads()


def _under(path: str, module) -> bool:
    # a wheel's vendored libraries sit in <pkg>.libs (Linux, Windows) or <pkg>/.dylibs (macOS)
    root = os.path.dirname(os.path.realpath(module.__file__))
    return os.path.realpath(path).startswith(root)


def kernel_blas_libraries():
    """threadpoolctl controllers of the BLAS the kernels call (SciPy's), or None while
    SciPy's BLAS bindings are not loaded yet (then no kernel can have called them)."""
    if _BINDINGS not in sys.modules:
        return None
    scipy = sys.modules["scipy"]  # loaded with its BLAS bindings

    blas = [lib for lib in ThreadpoolController().lib_controllers if lib.user_api == "blas"]
    libs = [lib for lib in blas if _under(lib.filepath, scipy)]
    if not libs:  # SciPy built against a shared BLAS: every one but NumPy's vendored copy
        libs = [lib for lib in blas if not _under(lib.filepath, numpy)]
    return libs


def _set_threads(lib, n: int) -> None:
    # threadpoolctl lets one Python thread (the first to set it) control an OpenBLAS pool and
    # ignores the others; runs agree among themselves here (the lock), and whichever thread ends
    # the last run must put the count back, so its unguarded setter is used where it has one
    getattr(lib, "_real_set_num_threads", lib.set_num_threads)(n)


class _KernelBlasLimit:
    """Re-entrant, thread-safe limit: the first run to enter sets it, the last to leave restores."""

    def __init__(self):
        self._lock = threading.Lock()
        self._libs = None  # found once (see kernel_blas_libraries)
        self._depth = 0
        self._saved: list[tuple[object, int]] = []

    @contextmanager
    def limited(self, threads: int | None = None):
        """The limit at `threads` (None: IPU_SIM_BLAS_THREADS) for the first run to enter."""
        self._enter(threads)
        try:
            yield self
        finally:
            self.__exit__()

    def __enter__(self):
        return self._enter(None)

    def _enter(self, threads: int | None):
        with self._lock:
            if self._depth == 0:
                n = blas_threads() if threads is None else threads
                if self._libs is None:
                    self._libs = kernel_blas_libraries()
                if n and self._libs:
                    self._saved = [(lib, lib.get_num_threads()) for lib in self._libs]
                    # a library already at n is left alone (nothing to set, nothing to restore)
                    self._saved = [(lib, k) for lib, k in self._saved if k is not None and k != n]
                    for lib, _ in self._saved:
                        _set_threads(lib, n)
            self._depth += 1
        return self

    def __exit__(self, *exc):
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                for lib, n in self._saved:
                    _set_threads(lib, n)
                self._saved = []
        return False


single_threaded_kernel_blas = _KernelBlasLimit()  # `with single_threaded_kernel_blas: ...`
