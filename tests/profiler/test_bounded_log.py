"""Long runs with profiling on keep a bounded trace; counts and totals still cover every run."""
import numpy as np
import pytest

import popxl
import popxl.ops as ops
from popxl import _profiling as autoreport
from profiler import _format


@pytest.fixture(autouse=True)
def small_ipu(monkeypatch):
    monkeypatch.setenv("IPU_SIM_TARGET", "small:4")
    monkeypatch.delenv("POPLAR_ENGINE_OPTIONS", raising=False)


def _ir():
    ir = popxl.Ir()
    with ir.main_graph:
        s = popxl.h2d_stream((4,), popxl.float32, name="x")
        o = popxl.d2h_stream((4,), popxl.float32, name="y")
        ops.host_store(o, ops.host_load(s) * 2.0)
    return ir, s, o


def test_trace_is_capped_and_counts_cover_every_run(monkeypatch, tmp_path):
    monkeypatch.setenv("IPU_SIM_PROFILE", str(tmp_path))
    monkeypatch.setattr(autoreport, "MAX_TRACE_ENTRIES", 50)
    ir, s, o = _ir()
    with popxl.Session(ir, "ipu_model") as sess:
        for _ in range(40):
            sess.run({s: np.ones(4, np.float32)})
    per_run = len(sess.engine.log) // 40
    assert per_run > 2
    assert len(sess.engine.log.step_ids) == 50 < len(sess.engine.log)
    doc = _format.load(tmp_path)
    ex = doc["execution"]
    assert ex["steps_executed"] == 40 * per_run and ex["trace_truncated"]
    ids, _ = _format.decode_trace(doc)
    assert ids.size == 50
    assert sum(st["executions"] for st in doc["steps"]) == 40 * per_run
    assert ex["total_cycles"] == sess.total_cycles == sum(st["executed_cycles"] for st in doc["steps"])
    with pytest.raises(Exception, match="step_counts"):
        sess.engine.executed_steps()


def test_run_count_option_caps_the_trace_after_n_runs(monkeypatch, tmp_path):
    monkeypatch.delenv("IPU_SIM_PROFILE", raising=False)
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", '{"autoReport.all":"true","autoReport.directory":"%s",'
                       '"autoReport.executionProfileProgramRunCount":"2"}' % tmp_path)
    ir, s, o = _ir()
    with popxl.Session(ir, "ipu_model") as sess:
        for _ in range(10):
            sess.run({s: np.ones(4, np.float32)})
    per_run = len(sess.engine.log) // 10
    assert len(sess.engine.log.step_ids) == 2 * per_run  # the trace stopped growing after run 2
    doc = _format.load(tmp_path)
    assert _format.decode_trace(doc)[0].size == 2 * per_run
    assert doc["execution"]["steps_executed"] == 10 * per_run


def test_profiling_off_keeps_only_the_first_steps(monkeypatch):
    """With profiling off a session keeps a bounded trace (its first QUIET_TRACE_ENTRIES steps, for
    session._pb_session.getReport()); the counts cover every run."""
    from popxl import _profiling
    monkeypatch.delenv("IPU_SIM_PROFILE", raising=False)
    monkeypatch.delenv("POPLAR_ENGINE_OPTIONS", raising=False)
    monkeypatch.setattr(_profiling, "QUIET_TRACE_ENTRIES", 10)
    ir, s, o = _ir()
    with popxl.Session(ir, "ipu_model") as sess:
        for _ in range(5):
            sess.run({s: np.ones(4, np.float32)})
    assert len(sess.engine.log.step_ids) == 10 and len(sess.engine.log) > 10
    kinds = sess.engine.cycles_by_kind()
    assert sum(kinds.values()) == sess.total_cycles
