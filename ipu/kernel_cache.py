"""Where Numba caches the compiled kernels: a directory named after the sources they come from.

Numba drops a cached function only when the function's own file changes, but the kernels inline
helpers of other modules (`ipu.half`'s load / store, the shared loops of `codelets/_kernels.py`): a
change there alone would leave stale machine code in use, and wrong numbers with it. So the cache
directory carries a fingerprint of every source file of `ipu/` and `codelets/` (path, size,
modification time): any change to them starts a fresh cache, and a user's own codelets inlining
`ipu.load` are covered too. The directory is `.kernel_cache/<fingerprint>` beside the packages
(`~/.cache/ipu-sim/kernels/<fingerprint>` when that is not writable); older fingerprints there are
removed, keeping the few most recent. A `NUMBA_CACHE_DIR` the user sets is left alone.
"""
from __future__ import annotations

import hashlib
import os
import shutil

import numba

__all__ = ["configure", "fingerprint"]

KEEP = 3  # fingerprints kept (other checkouts or versions sharing a cache base)
PACKAGES = ("ipu", "codelets")


def fingerprint(root: str) -> str:
    h = hashlib.sha1()
    for pkg in PACKAGES:
        base = os.path.join(root, pkg)
        for dirpath, dirnames, files in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for f in sorted(files):
                if f.endswith(".py"):
                    path = os.path.join(dirpath, f)
                    st = os.stat(path)
                    h.update(f"{os.path.relpath(path, root)}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()[:16]


def _writable_base(root: str) -> str:
    for base in (os.path.join(root, ".kernel_cache"),
                 os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ipu-sim",
                              "kernels")):
        try:
            os.makedirs(base, exist_ok=True)
            if os.access(base, os.W_OK):
                return base
        except OSError:
            continue
    return ""


def _prune(base: str, current: str) -> None:
    try:
        entries = [e for e in os.scandir(base) if e.is_dir() and e.name != current]
        entries.sort(key=lambda e: e.stat().st_mtime, reverse=True)
        for e in entries[KEEP - 1:]:
            shutil.rmtree(e.path, ignore_errors=True)
    except OSError:
        pass


def configure() -> None:
    """Point Numba's cache at the fingerprinted directory (before any cached kernel is defined)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    base = _writable_base(root)
    if not base:
        return  # Numba's own default (beside the sources, or its user-wide cache)
    fp = fingerprint(root)
    path = os.path.join(base, fp)
    os.makedirs(path, exist_ok=True)
    os.utime(path)  # most recently used
    _prune(base, fp)
    numba.config.CACHE_DIR = path  # type: ignore[attr-defined]  # numba.config's settings are made at runtime
