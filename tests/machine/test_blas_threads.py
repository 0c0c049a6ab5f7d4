"""The kernels' BLAS runs on one thread while an engine runs (ipu/blas.py): results are bitwise the
same as with SciPy's default pool, and NumPy's BLAS setting is never touched."""
import os
import threading

import numpy as np
import pytest

threadpoolctl = pytest.importorskip("threadpoolctl")

import ipu  # noqa: E402
from ipu import blas  # noqa: E402
from codelets.plans import build_matmul  # noqa: E402


def _numpy_blas():
    """Controllers of NumPy's own BLAS (its wheel's copy), apart from the kernels' one."""
    kernel = {lib.filepath for lib in blas.kernel_blas_libraries() or []}
    root = os.path.dirname(os.path.realpath(np.__file__))
    libs = [lib for lib in threadpoolctl.ThreadpoolController().lib_controllers
            if lib.user_api == "blas" and lib.filepath not in kernel
            and os.path.realpath(lib.filepath).startswith(root)]
    if not libs:
        pytest.skip("NumPy has no BLAS of its own here (it shares SciPy's)")
    return libs


def _matmul_engine(n=192):
    """A product big enough per vertex (4 tiles) for OpenBLAS to use its threads, fed random data."""
    g = ipu.Graph(ipu.small_target(4, bytes_per_tile=4 << 20))
    a, b, o = (g.add_variable(name, (n, n), "float32") for name in "abo")
    for v in (a, b, o):
        g.map_linearly(v)
    engine = ipu.Engine(ipu.compile(g, build_matmul(g, a, b, o)))
    rng = np.random.default_rng(7)
    engine.write_tensor(a, rng.standard_normal((n, n)).astype(np.float32))
    engine.write_tensor(b, rng.standard_normal((n, n)).astype(np.float32))
    return engine, o


def _run_watching(engine, libs):
    """Run once; returns the thread counts `libs` had while the program ran."""
    seen = []
    walk = engine.walk

    def watched(*args):
        seen.append(tuple(lib.get_num_threads() for lib in libs))
        return walk(*args)

    engine.walk = watched
    try:
        engine.run()
    finally:
        del engine.walk
    return set(seen)


def test_bitwise_same_with_and_without_the_limit(monkeypatch):
    engine, o = _matmul_engine()
    engine.run()  # loads the kernels (and SciPy's BLAS bindings)
    libs = blas.kernel_blas_libraries()
    assert libs, "SciPy's BLAS should be found once a matmul kernel is loaded"
    outs = {}
    for env in ("0", "1"):  # 0: SciPy's pool as it is (2 threads here); 1: the default
        monkeypatch.setenv("IPU_SIM_BLAS_THREADS", env)
        engine.write_tensor(o, np.zeros(o.shape, np.float32))  # each run writes the product afresh
        with threadpoolctl.threadpool_limits(2, user_api="blas"):
            seen = _run_watching(engine, libs)
            assert seen == ({(2,) * len(libs)} if env == "0" else {(1,) * len(libs)})
            assert all(lib.get_num_threads() == 2 for lib in libs)  # put back after the run
        outs[env] = engine.read_tensor(o).copy()
    assert outs["0"].tobytes() == outs["1"].tobytes()


def test_numpy_blas_untouched_during_and_after_runs():
    engine, _ = _matmul_engine(64)
    engine.run()
    mine = _numpy_blas()
    for threads in (1, 2):
        with threadpoolctl.threadpool_limits(threads, user_api="blas"):
            kernel = blas.kernel_blas_libraries()
            assert _run_watching(engine, mine) == {(threads,) * len(mine)}
            assert [lib.get_num_threads() for lib in mine] == [threads] * len(mine)
            assert [lib.get_num_threads() for lib in kernel] == [threads] * len(kernel)


def test_limit_is_reentrant_and_shared_across_threads():
    engine, _ = _matmul_engine(64)
    engine.run()
    libs = blas.kernel_blas_libraries()
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        limit = blas.single_threaded_kernel_blas
        inside, go = threading.Event(), threading.Event()

        def other_run():
            with limit:
                inside.set()
                go.wait(5)

        t = threading.Thread(target=other_run)
        with limit:
            t.start()
            inside.wait(5)
        # this run left first: the other still runs, so the limit stays
        assert [lib.get_num_threads() for lib in libs] == [1] * len(libs)
        go.set()
        t.join(5)
        assert [lib.get_num_threads() for lib in libs] == [2] * len(libs)


@pytest.mark.parametrize("value", ["two", "-1", "1.5"])
def test_bad_thread_count_is_refused(monkeypatch, value):
    monkeypatch.setenv("IPU_SIM_BLAS_THREADS", value)
    engine, _ = _matmul_engine(16)
    with pytest.raises(ValueError, match="IPU_SIM_BLAS_THREADS"):
        engine.run()
