"""A Session's options are resolved once, when it is made (popxl._run_options): the Ir's engine
options under POPLAR_ENGINE_OPTIONS, and the IPU_SIM_* variables; lowering, engine and profiler
take them from the session."""
import json

import numpy as np
import pytest

import popxl
import popxl.ops as ops
from popxl._run_options import resolve


def _ir(engine_options=None):
    ir = popxl.Ir()
    ir._pb_ir.getSessionOptions().engineOptions.update(engine_options or {})
    with ir.main_graph:
        s = popxl.h2d_stream((4,), popxl.int32, "i")
        table = popxl.variable(np.arange(12, dtype=np.float32).reshape(4, 3))
        o = popxl.d2h_stream((4, 3), popxl.float32, "o")
        ops.host_store(o, ops.gather(table, ops.host_load(s)))
    return ir, s, o


def test_engine_options_from_the_ir_and_the_environment():
    ir, _, _ = _ir({"debug.checkIndices": "true", "autoReport.all": "true", "autoReport.directory": "/tmp/x"})
    r = resolve(ir, {})
    assert r.check_indices and r.profile.directory == "/tmp/x" and r.compiled and r.threads is None
    assert r.engine_options["debug.checkIndices"] == "true"
    # POPLAR_ENGINE_OPTIONS wins over the Ir's options, IPU_SIM_CHECK_INDICES over both
    r = resolve(ir, {"POPLAR_ENGINE_OPTIONS": json.dumps({"debug.checkIndices": "false"})})
    assert not r.check_indices and r.engine_options["debug.checkIndices"] == "false"
    assert resolve(ir, {"IPU_SIM_CHECK_INDICES": "0"}).check_indices is False
    assert resolve(_ir()[0], {"IPU_SIM_CHECK_INDICES": "1"}).check_indices is True
    r = resolve(_ir()[0], {"IPU_SIM_PROFILE": "/tmp/p", "IPU_SIM_COMPILED": "0", "IPU_SIM_THREADS": "3"})
    assert (r.profile.directory, r.compiled, r.threads) == ("/tmp/p", False, 3)
    assert resolve(_ir()[0], {}).profile is None
    with pytest.raises(ValueError, match="IPU_SIM_THREADS='many'"):
        resolve(_ir()[0], {"IPU_SIM_THREADS": "many"})
    # the machine's variables: target, BLAS threads, huge pages
    r = resolve(_ir()[0], {})
    assert (r.target, r.blas_threads, r.huge_pages) == (None, 1, True)
    r = resolve(_ir()[0], {"IPU_SIM_TARGET": "small:8", "IPU_SIM_BLAS_THREADS": "0", "IPU_SIM_HUGE_PAGES": "0"})
    assert (r.target, r.blas_threads, r.huge_pages) == ("small:8", 0, False)
    with pytest.raises(ValueError, match="IPU_SIM_BLAS_THREADS must be >= 0"):
        resolve(_ir()[0], {"IPU_SIM_BLAS_THREADS": "-1"})


def test_a_session_reads_its_options_once(monkeypatch, tmp_path):
    monkeypatch.setenv("IPU_SIM_TARGET", "small:4")
    monkeypatch.delenv("IPU_SIM_PROFILE", raising=False)
    monkeypatch.delenv("POPLAR_ENGINE_OPTIONS", raising=False)
    monkeypatch.setenv("IPU_SIM_COMPILED", "0")
    monkeypatch.setenv("IPU_SIM_THREADS", "2")
    monkeypatch.setenv("IPU_SIM_CHECK_INDICES", "1")
    ir, s, o = _ir()
    monkeypatch.setenv("IPU_SIM_BLAS_THREADS", "0")
    session = popxl.Session(ir, "ipu_model")
    assert (session.engine.compiled, session.engine.threads, session.engine.blas_threads) == (False, 2, 0)
    assert session.target.num_tiles == 4 and session.options.target == "small:4"
    assert session._compiled_for[2] == 4  # its device has the session's target
    # what the session resolved holds for its life: a profile asked for now is not written
    monkeypatch.setenv("IPU_SIM_PROFILE", str(tmp_path))
    monkeypatch.setenv("IPU_SIM_CHECK_INDICES", "0")
    with session:
        got = session.run({s: np.array([3, 0, 1, 2], np.int32)})[o]
        np.testing.assert_array_equal(got, np.arange(12, dtype=np.float32).reshape(4, 3)[[3, 0, 1, 2]])
        with pytest.raises(Exception, match="index"):  # the lowering added the checks
            session.run({s: np.array([4, 0, 1, 2], np.int32)})
    assert session.options.profile is None and not list(tmp_path.iterdir())
