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
half the wall time. Neither compiles a kernel the other is compiling: each codelet job has a lock
file that whoever compiles it holds meanwhile (`claim`, called by this process before it first
calls or compiles a kernel it handed over): the worker skips a job this process holds, and this
process waits for one the worker holds (the progress line counts it as a kernel compile), then
loads it from the cache. The machine code is the same whichever process compiled it, and a
worker that fails or is killed only leaves more to compile (its locks go with it). One worker
runs per cache directory at a time (a lock file); it runs at a lower priority and outlives this
process if it must. IPU_SIM_COMPILE_AHEAD=0 turns it off.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import pickle
import subprocess
import sys
import tempfile

import numba
import numpy as np
from numba.core.dispatcher import Dispatcher

from . import compile_progress, env, interpreted
from .step_loop import kernel_signature

__all__ = ["claim", "jobs", "main", "start"]

LOCK = "compile_ahead.lock"
PACKAGES = ("codelets.", "ipu.")  # whose kernels a worker compiles (it imports them by name)
_worker: subprocess.Popen | None = None  # this process's worker, while it runs
_handed: set = set()  # jobs this process has handed to a worker: each once (one may never be cached)
# the codelet jobs handed to a worker that this process has not called yet: (id(kernel), storage
# dtypes) -> the job's lock file (`claim`)
pending: dict = {}


def _cache_dir() -> str:
    return str(getattr(numba.config, "CACHE_DIR", "") or "")


def jobs(graph) -> list:
    """What a worker would compile for the graph: (module, function name, storage dtypes of the
    fields) of every codelet kernel its compute sets call, in the order they first appear, then
    (module, function name, None) of the compile-time kernels. Only the project's kernels
    (PACKAGES) not in the kernel cache yet, found by name (a user's codelet, or a kernel made
    inside a function, is compiled by this process as before)."""
    out: list = []
    seen: set = set()
    for cs in graph.compute_sets:
        for chunk in cs.chunks:
            key = (chunk.codelet.name, chunk.types)
            if key in seen:
                continue
            seen.add(key)
            kern = chunk.codelet.kernel()
            if not isinstance(kern, Dispatcher):
                continue
            storages = tuple(np.dtype(t.storage) for t in chunk.types)
            name = _importable(kern)
            if name is not None and not interpreted.ready(kern):
                out.append((*name, storages))
    for kern, _ in interpreted.compile_time_kernels():
        name = _importable(kern)
        if name is not None and not interpreted.ready(kern):
            out.append((*name, None))
    return out


def _importable(kern: Dispatcher) -> tuple | None:
    f = kern.py_func
    if not f.__module__.startswith(PACKAGES):
        return None
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
    todo = [j for j in jobs(graph) if j not in _handed] if cache else []
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
            _ByReference(f).dump([(getattr(sys.modules[m], n), s) for m, n, s in todo])
    except OSError:  # no worker: this process compiles everything itself, as without one
        return None
    environ = dict(os.environ, NUMBA_CACHE_DIR=cache, IPU_SIM_PROGRESS="0")
    try:
        _worker = subprocess.Popen([sys.executable, "-m", "ipu.compile_ahead", path], env=environ,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True,
                                   cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    except OSError:
        os.unlink(path)
        return None
    _handed.update(todo)
    for m, n, storages in todo:
        if storages is not None:
            pending[(id(getattr(sys.modules[m], n)), storages)] = _lock_path(cache, m, n, storages)
    return _worker


def _lock_path(cache: str, module: str, name: str, storages: tuple) -> str:
    """The lock file of one codelet job, held by whichever process compiles it."""
    key = hashlib.sha1(repr((module, name, tuple(str(s) for s in storages))).encode()).hexdigest()[:16]
    return os.path.join(cache, f"compile_ahead.{key}.lock")


def claim(kern, types) -> None:
    """Before this process first calls a codelet kernel for field types `types` (or compiles it):
    if it handed that job to a worker, make sure only one of the two compiles it. The worker holds
    the job's lock while compiling it: wait for it, then load its machine code from the cache;
    otherwise compile it here under the lock, so the worker skips it. Nothing when the job was
    never handed over (`pending` is empty when no worker was started)."""
    storages = tuple(np.dtype(t.storage) for t in types)
    path = pending.pop((id(kern), storages), None)
    if path is None:
        return
    sig = kernel_signature(storages)
    if sig in kern.overloads:
        return
    try:
        lock = open(path, "a")
    except OSError:
        return  # the call compiles it, as without a worker
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # the worker is compiling it
            with compile_progress.waiting_for(kern):
                fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            kern.compile(sig)  # from the cache when the worker finished it, else compiled here
        except Exception:  # noqa: BLE001 - the call itself raises the kernel's error, as before
            pass


class _ByReference(pickle.Pickler):
    """Pickles a kernel as the module-level name it is (unpickling imports its module), not as
    Numba pickles a dispatcher (a copy of its function, which Numba would not cache)."""

    def reducer_override(self, obj):
        if isinstance(obj, Dispatcher):
            return obj.__qualname__  # a global of obj.__module__
        return NotImplemented


def main(path: str) -> int:
    """The worker: compile the codelet kernels of the jobs in `path` last first, then the
    compile-time kernels; nothing when another worker holds the cache's lock."""
    cache = _cache_dir()
    try:
        with open(path, "rb") as f:
            todo = pickle.load(f)  # (kernel, storage dtypes or None: a compile-time kernel)
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
        examples = {id(k): args for k, args in interpreted.compile_time_kernels()}
        codelet_jobs = [j for j in todo if j[1] is not None]
        for kern, storages in codelet_jobs[::-1] + [j for j in todo if j[1] is None]:
            try:
                if storages is None:
                    kern(*examples[id(kern)])
                else:
                    _compile_unless_claimed(cache, kern, storages)
            except Exception:  # noqa: BLE001 - the program's process compiles it if it must
                pass
    return 0


def _compile_unless_claimed(cache: str, kern, storages: tuple) -> None:
    """The worker compiles a codelet job under its lock, or skips it when the program's process
    holds the lock (it is compiling that kernel itself)."""
    with open(_lock_path(cache, kern.py_func.__module__, kern.py_func.__qualname__, storages), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return
        kern.compile(kernel_signature(storages))


if __name__ == "__main__":
    try:
        os.nice(10)
    except OSError:
        pass
    sys.exit(main(sys.argv[1]))
