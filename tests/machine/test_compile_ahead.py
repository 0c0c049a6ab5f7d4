"""ipu/compile_ahead.py: the worker that compiles, in a second process, the kernels a program will
call that are not in the kernel cache yet."""
import fcntl
import glob
import os
import pickle
import subprocess
import sys

import numpy as np

import ipu
from ipu import compile_ahead, env, interpreted

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _graph():
    g = ipu.Graph(ipu.small_target(2))
    x = g.add_variable("x", (16,), "float32")
    g.map_linearly(x)
    h = g.add_variable("h", (16,), "float16")
    g.map_linearly(h)
    for k in range(2):  # the same kernel and types twice: one job
        cs = g.add_compute_set(f"inc{k}")
        starts, stops, tiles = x.pieces()
        for a, b, t in zip(starts, stops, tiles):
            one = g.add_constant(f"one{k}_{a}", np.ones(b - a, np.float32), tile=int(t))
            g.add_vertex(cs, "ScaledAdd", int(t), data=x.flatten()[a:b], deltas=one, a=1.0, b=1.0)
    cs = g.add_compute_set("fill")
    g.add_vertex(cs, "Fill", 0, out=h.flatten()[0:8], value=2.0)
    return g


def test_jobs_list_each_kernel_and_types_once_in_order_then_the_compile_time_kernels(monkeypatch):
    monkeypatch.setattr(interpreted, "ready", lambda kernel: False)  # as on a new install
    got = compile_ahead.jobs(_graph())
    codelet_jobs = [j for j in got if j[2] is not None]
    assert [(m.split(".")[0], s) for m, _, s in codelet_jobs] == [
        ("codelets", (np.dtype(np.float32), np.dtype(np.float32))),
        ("codelets", (ipu.FLOAT16.storage,))]
    assert got[:2] == codelet_jobs  # the codelet kernels first
    assert sorted((m, n) for m, n, s in got if s is None) == [
        ("ipu.copytables", "_merge_kernel"), ("ipu.copytables", "_runs_kernel"), ("ipu.costs", "_exchange_kernel"),
        ("ipu.costs", "_schedule"),
        ("ipu.executable", "_lookup_addresses"), ("ipu.executable", "_split_runs"),
        ("ipu.placement", "_patterns"), ("ipu.placement", "_place")]
    monkeypatch.setattr(interpreted, "ready", lambda kernel: True)  # all cached: nothing to do
    assert compile_ahead.jobs(_graph()) == []


def test_turned_off_or_nothing_to_compile_starts_no_worker(monkeypatch):
    monkeypatch.setenv("IPU_SIM_COMPILE_AHEAD", "0")
    assert not env.compile_ahead() and compile_ahead.start(_graph()) is None
    monkeypatch.delenv("IPU_SIM_COMPILE_AHEAD")
    monkeypatch.setattr(interpreted, "ready", lambda kernel: True)
    assert env.compile_ahead() and compile_ahead.start(_graph()) is None


def _no_worker_yet(monkeypatch, tmp_path, popen):
    """A process that has handed nothing to a worker yet, whose worker would start as ``popen``."""
    monkeypatch.setattr(interpreted, "ready", lambda kernel: False)
    monkeypatch.setattr(compile_ahead, "_cache_dir", lambda: str(tmp_path))
    monkeypatch.setattr(compile_ahead, "_handed", set())
    monkeypatch.setattr(compile_ahead, "_worker", None)
    monkeypatch.setattr(compile_ahead, "pending", {})
    monkeypatch.setattr(compile_ahead.subprocess, "Popen", popen)


def test_each_job_goes_to_a_worker_once_per_process(monkeypatch, tmp_path):
    started = []

    class Finished:
        def __init__(self, argv, **kw):
            started.append([(k.py_func.__module__, k.__qualname__, s)
                            for k, s in pickle.loads(open(argv[-1], "rb").read())])

        def poll(self):
            return 0  # done: the next compile may start another

    _no_worker_yet(monkeypatch, tmp_path, Finished)
    assert compile_ahead.start(_graph()) is not None
    assert compile_ahead.start(_graph()) is None  # the same kernels: not handed again
    assert started == [compile_ahead.jobs(_graph())]


def _worker(tmp_path, todo):
    path = tmp_path / "cache" / "x.jobs"
    path.parent.mkdir(exist_ok=True)
    with open(path, "wb") as f:
        compile_ahead._ByReference(f).dump(todo)
    environ = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=ROOT, IPU_SIM_PROGRESS="0")
    subprocess.run([sys.executable, "-m", "ipu.compile_ahead", str(path)], env=environ, check=True, timeout=600)
    assert not path.exists()  # the worker removes its job file
    return sorted(os.path.basename(p) for p in glob.glob(str(tmp_path / "cache" / "**" / "*.nbi"), recursive=True))


def test_the_worker_compiles_its_jobs_into_the_cache(tmp_path):
    from ipu import costs

    todo = [(costs._schedule, None)]
    assert [n.split("-")[0] for n in _worker(tmp_path, todo)] == ["costs._schedule"]


def test_a_second_worker_leaves_the_cache_to_the_first(tmp_path):
    (tmp_path / "cache").mkdir()
    with open(tmp_path / "cache" / compile_ahead.LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a worker holds the lock
        assert _worker(tmp_path, [(interpreted.compile_time_kernels()[0][0], None)]) == []


def test_the_example_arguments_give_the_signatures_the_compiler_calls_with(monkeypatch):
    kernels = interpreted.compile_time_kernels()
    for kern, args in kernels:
        kern(*args)
    monkeypatch.setattr(interpreted, "ready", lambda kernel: True)  # the compiled kernels from here on
    import popxl
    import popxl.ops as ops

    ir = popxl.Ir()
    with ir.main_graph:
        s = popxl.h2d_stream((8, 5), popxl.float32, "x")
        x = ops.host_load(s)
        y = ops.matmul(ops.relu(x), popxl.variable(np.ones((5, 3), np.float32)))
        o = popxl.d2h_stream(y.shape, y.dtype, "y")
        ops.host_store(o, y)
    with popxl.Session(ir, "ipu_model") as session:
        session.run({s: np.ones((8, 5), np.float32)})
    for kern, _ in kernels:  # a second signature would be a compile the worker did not do
        assert len(kern.signatures) == 1, (kern, kern.signatures)


class _Kernel:
    """A kernel's compile, recorded: whether the job's lock was free to others while it ran."""

    def __init__(self, lock_path):
        self.overloads = {}
        self.lock_path = lock_path
        self.compiled_with_lock_held = []

    def compile(self, sig):
        with open(self.lock_path, "a") as other:  # another open file: conflicts with a holder's flock
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = False
            except OSError:
                held = True
        self.compiled_with_lock_held.append(held)
        self.overloads[sig] = object()


def _pending_job(monkeypatch, tmp_path):
    kern = _Kernel(str(tmp_path / "job.lock"))
    types = (ipu.FLOAT32, ipu.FLOAT32)
    storages = tuple(np.dtype(t.storage) for t in types)
    monkeypatch.setattr(compile_ahead, "pending", {(id(kern), storages): kern.lock_path})
    return kern, types


def test_claim_compiles_a_handed_kernel_here_under_its_lock_so_the_worker_skips_it(monkeypatch, tmp_path):
    kern, types = _pending_job(monkeypatch, tmp_path)
    compile_ahead.claim(kern, types)
    assert kern.compiled_with_lock_held == [True] and compile_ahead.pending == {}
    compile_ahead.claim(kern, types)  # claimed once: later calls cost nothing
    assert kern.compiled_with_lock_held == [True]


def test_claim_waits_for_the_worker_compiling_the_kernel_then_loads_it(monkeypatch, tmp_path):
    import threading
    import time

    kern, types = _pending_job(monkeypatch, tmp_path)
    released = []
    with open(kern.lock_path, "a") as worker:
        fcntl.flock(worker, fcntl.LOCK_EX)  # the worker compiles it

        def finish():
            time.sleep(0.3)
            released.append(True)
            fcntl.flock(worker, fcntl.LOCK_UN)

        t = threading.Thread(target=finish)
        t.start()
        compile_ahead.claim(kern, types)
        t.join()
    assert released == [True] and len(kern.compiled_with_lock_held) == 1  # (a load from the cache)


def test_the_worker_skips_a_job_the_program_is_compiling(monkeypatch, tmp_path):
    from ipu.step_loop import kernel_signature

    calls = []

    class Kern:
        py_func = test_the_worker_skips_a_job_the_program_is_compiling

        def compile(self, sig):
            calls.append(sig)

    storages = (np.dtype(np.float32),)
    kern = Kern()
    path = compile_ahead._lock_path(str(tmp_path), Kern.py_func.__module__, Kern.py_func.__qualname__, storages)
    with open(path, "a") as program:
        fcntl.flock(program, fcntl.LOCK_EX)
        compile_ahead._compile_unless_claimed(str(tmp_path), kern, storages)
        assert calls == []
    compile_ahead._compile_unless_claimed(str(tmp_path), kern, storages)
    assert calls == [kernel_signature(storages)]


def test_a_started_worker_leaves_its_codelet_jobs_pending_for_claim(monkeypatch, tmp_path):
    class Running:
        def __init__(self, argv, **kw):
            pass

        def poll(self):
            return None

    _no_worker_yet(monkeypatch, tmp_path, Running)
    assert compile_ahead.start(_graph()) is not None
    codelet_jobs = [(m, n, s) for m, n, s in compile_ahead.jobs(_graph()) if s is not None]
    assert sorted(compile_ahead.pending) == sorted((id(getattr(sys.modules[m], n)), s) for m, n, s in codelet_jobs)
    assert len(set(compile_ahead.pending.values())) == len(codelet_jobs)
