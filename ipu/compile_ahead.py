"""Compile ahead: a second process compiles the kernels a program will call while this one works.

On a new install (an empty kernel cache) a first run spends most of its time in Numba compiles of
the codelet kernels its compute sets call, one after another as the run reaches them. When
`ipu.compile` starts and some of those kernels are not in the kernel cache, `start` hands the list
(kernel and argument types, in the order the graph's compute sets were made) to one worker
process, `python -m ipu.compile_ahead`, which compiles them last first into the same cache, then
the compile-time kernels (placement, copy and address tables, compute-set scheduling: a small
program runs their Python bodies, ipu/interpreted.py, so a later, bigger one finds them cached).
This process goes on planning memory and running; a kernel the worker has cached by the time the
run reaches it is loaded (Numba looks in the cache before it compiles), one it has not reached is
compiled here as before. The two meet in the middle: on two cores the codelet compiles take about
half the wall time. Nothing waits for the worker and nothing depends on it: the machine code is
the same whichever process compiled it, and a worker that fails or is killed only leaves more to
compile. One worker runs per cache directory at a time (a lock file); it runs at a lower priority
and outlives this process if it must. IPU_SIM_COMPILE_AHEAD=0 turns it off.
"""
from __future__ import annotations

import fcntl
import importlib
import os
import pickle
import subprocess
import sys
import tempfile

import numba
import numpy as np
from numba.core.dispatcher import Dispatcher

from . import env, interpreted
from .step_loop import kernel_signature

__all__ = ["jobs", "main", "start"]

LOCK = "compile_ahead.lock"
_worker: subprocess.Popen | None = None  # this process's worker, while it runs


def _cache_dir() -> str:
    return str(getattr(numba.config, "CACHE_DIR", "") or "")


def jobs(graph) -> list:
    """What a worker would compile for the graph: (module, function name, storage dtypes of the
    fields) of every codelet kernel its compute sets call, in the order they first appear, then
    (module, function name, None) of the compile-time kernels. Only kernels not in the kernel
    cache yet, and importable by name (a kernel made inside a function cannot be found by the
    worker: this process compiles it as before)."""
    out: list = []
    seen: set = set()
    for cs in graph.compute_sets:
        for chunk in cs.chunks:
            kern = chunk.codelet.kernel()
            storages = tuple(np.dtype(t.storage) for t in chunk.types)
            key = (id(kern), storages)
            if key in seen or not isinstance(kern, Dispatcher):
                continue
            seen.add(key)
            name = _importable(kern)
            if name is not None and not interpreted.ready(kern):
                out.append((*name, storages))
    for kern in _compile_time_kernels():
        name = _importable(kern)
        if name is not None and not interpreted.ready(kern):
            out.append((*name, None))
    return out


def _importable(kern: Dispatcher) -> tuple | None:
    f = kern.py_func
    mod = sys.modules.get(f.__module__)
    return (f.__module__, f.__qualname__) if mod is not None and getattr(mod, f.__qualname__, None) is kern else None


def start(graph) -> subprocess.Popen | None:
    """Start a worker for the graph's kernels that are not cached yet (see the module docstring);
    None when they all are, when one of this process's workers still runs, or when turned off."""
    global _worker
    if not env.compile_ahead():
        return None
    if _worker is not None and _worker.poll() is None:
        return None
    cache = _cache_dir()
    todo = jobs(graph) if cache else []
    if not todo:
        return None
    try:
        os.makedirs(cache, exist_ok=True)
        with open(os.path.join(cache, LOCK), "a") as lock:  # another process's worker runs: leave it
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return None
        fd, path = tempfile.mkstemp(prefix="compile_ahead.", suffix=".jobs", dir=cache)
        with os.fdopen(fd, "wb") as f:
            pickle.dump(todo, f)
        environ = dict(os.environ, NUMBA_CACHE_DIR=cache, IPU_SIM_PROGRESS="0")
        _worker = subprocess.Popen([sys.executable, "-m", "ipu.compile_ahead", path], env=environ,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True,
                                   cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    except OSError:  # no worker: this process compiles everything itself, as without one
        return None
    return _worker


def _compile_time_kernels() -> list:
    from . import copytables, costs, executable, placement
    return [placement._patterns, placement._place, copytables._merge_kernel, copytables._runs_kernel,
            executable._split_runs, executable._lookup_addresses, costs._schedule]


def _example_arguments(name: str) -> tuple:
    """Arguments of the types the compiler passes a compile-time kernel (int64 arrays, Python
    ints, a bool array), so the worker compiles the same signature; empty arrays: the compile is
    all that runs."""
    z = np.zeros(0, np.int64)
    one = np.zeros(1, np.int64)  # an empty pointer table (n + 1 entries)
    return {
        "_patterns": (one, z, z),
        "_place": (z, z, z, one, z, z, 1, z, z, one, z, z),
        "_merge_kernel": (z, z, z, z, z, z, 4),
        "_runs_kernel": (z, z, z, z, 4),
        "_split_runs": (z, z, z, z, z, z, 4),
        "_lookup_addresses": (z, z, z, z, z, 4, z, z),
        "_schedule": (z, z, np.zeros(0, np.bool_), 1, 6, 1),
    }[name]


def main(path: str) -> int:
    """The worker: compile the codelet kernels of the jobs in `path` last first, then the
    compile-time kernels; nothing when another worker holds the cache's lock."""
    cache = _cache_dir()
    try:
        with open(path, "rb") as f:
            todo = pickle.load(f)
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    with open(os.path.join(cache, LOCK), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return 0
        codelet_jobs = [j for j in todo if j[2] is not None]
        for mod, name, storages in codelet_jobs[::-1] + [j for j in todo if j[2] is None]:
            try:
                kern = getattr(importlib.import_module(mod), name)
                if storages is None:
                    kern(*_example_arguments(name))
                else:
                    kern.compile(kernel_signature(storages))
            except Exception:  # noqa: BLE001 - the program's process compiles it if it must
                pass
    return 0


if __name__ == "__main__":
    try:
        os.nice(10)
    except OSError:
        pass
    sys.exit(main(sys.argv[1]))
