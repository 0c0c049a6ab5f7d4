"""The machine's environment variables, read in one place.

Each function reads one IPU_SIM_* variable from `environ` (os.environ by default) and says what it
means, with a clear error for a value it cannot take. An `ipu.Engine` or `ipu.get_target` given no
value takes these defaults; a popxl Session reads the same variables once, through these
functions, into its options (popxl/_run_options.py) and passes the values down, so a variable set
after the session is made does not change it. docs/options.md lists every variable.
"""
from __future__ import annotations

import os
from typing import Mapping, Optional

__all__ = ["compiled", "threads", "blas_threads", "huge_pages", "target_name", "progress", "compile_ahead"]

_OFF = ("0", "false", "no", "off")


def _get(environ: Optional[Mapping[str, str]], name: str) -> str:
    return ((os.environ if environ is None else environ).get(name) or "").strip()


def compiled(environ: Optional[Mapping[str, str]] = None) -> bool:
    """IPU_SIM_COMPILED: the compiled step loop, unless "0" (the Python walk, the reference)."""
    return _get(environ, "IPU_SIM_COMPILED").lower() not in _OFF


def threads(environ: Optional[Mapping[str, str]] = None) -> Optional[int]:
    """IPU_SIM_THREADS: host threads of the compiled step loop (None: as many as Numba has)."""
    text = _get(environ, "IPU_SIM_THREADS")
    if not text:
        return None
    try:
        return max(1, int(text))
    except ValueError:
        raise ValueError(f"IPU_SIM_THREADS={text!r}: give a number of host threads (1, 2, ...)") from None


def blas_threads(environ: Optional[Mapping[str, str]] = None) -> int:
    """IPU_SIM_BLAS_THREADS: threads of the kernels' BLAS during a run (default 1; 0 leaves it alone)."""
    text = _get(environ, "IPU_SIM_BLAS_THREADS")
    if not text:
        return 1
    try:
        n = int(text)
    except ValueError:
        raise ValueError(f"IPU_SIM_BLAS_THREADS must be a whole number of threads (0 leaves BLAS alone), "
                         f"not {text!r}") from None
    if n < 0:
        raise ValueError(f"IPU_SIM_BLAS_THREADS must be >= 0 (0 leaves BLAS alone), not {n}")
    return n


def huge_pages(environ: Optional[Mapping[str, str]] = None) -> bool:
    """IPU_SIM_HUGE_PAGES: tile memory asks for transparent huge pages, unless "0"."""
    return _get(environ, "IPU_SIM_HUGE_PAGES") != "0"


def target_name(environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """IPU_SIM_TARGET: the target sessions compile for ('GC200', 'Bow', 'C600', 'GC2', 'small:N'),
    None when unset."""
    return _get(environ, "IPU_SIM_TARGET") or None


def progress(environ: Optional[Mapping[str, str]] = None) -> bool:
    """IPU_SIM_PROGRESS: a status line while kernels compile, unless "0"."""
    return _get(environ, "IPU_SIM_PROGRESS").lower() not in _OFF


def compile_ahead(environ: Optional[Mapping[str, str]] = None) -> bool:
    """IPU_SIM_COMPILE_AHEAD: a second process compiles the kernels a program will call that are
    not in the kernel cache yet (ipu/compile_ahead.py), unless "0"."""
    return _get(environ, "IPU_SIM_COMPILE_AHEAD").lower() not in _OFF
