"""Profiling a popxl Session: switched on by the environment, the same numbers on or off, and the
`ipu-profile run` command on a script the project never saw."""
import json
import os
import subprocess
import sys

import pytest

from profiler import _format
from profiler.options import options

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = '''
import numpy as np
import popxl
import popxl.ops as ops

ir = popxl.Ir()
with ir.main_graph:
    xs = popxl.h2d_stream((4, 8), popxl.float32, name="xs")
    x = ops.host_load(xs)
    w = popxl.variable(np.arange(32, dtype=np.float32).reshape(4, 8) / 10, name="w")
    with popxl.name_scope("block"):
        y = ops.mul(x, w)
        y = ops.add(y, x)
    z = ops.sum(y, axis=1)
    out = popxl.d2h_stream(z.shape, z.dtype, name="out")
    ops.host_store(out, z)
session = popxl.Session(ir, "ipu_model")
with session:
    for i in range({runs}):
        r = session.run({{xs: np.full((4, 8), i + 1, np.float32)}})[out]
print("RESULT", r.tolist(), session.total_cycles)
'''

_ENV_KEYS = ("IPU_SIM_PROFILE", "POPLAR_ENGINE_OPTIONS", "IPU_SIM_TARGET")


def _run_script(tmp_path, runs=1, env_extra=None, target="small:16"):
    script = tmp_path / f"prog_{runs}.py"
    script.write_text(SCRIPT.format(runs=runs))
    env = {k: v for k, v in os.environ.items() if k not in _ENV_KEYS}
    env["PYTHONPATH"] = ROOT
    env["IPU_SIM_TARGET"] = target
    env.update(env_extra or {})
    p = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("RESULT"))
    return line


def test_options_from_the_environment():
    assert options({}) is None
    assert options({"IPU_SIM_PROFILE": "0"}) is None
    assert options({"IPU_SIM_PROFILE": "d"}).directory == "d"
    assert options({"IPU_SIM_PROFILE": "1"}).directory == "."
    o = options({"POPLAR_ENGINE_OPTIONS": '{"autoReport.all":"true","autoReport.directory":"x"}'})
    assert o.directory == "x" and o.execution and o.run_count is None
    o = options({"POPLAR_ENGINE_OPTIONS": '{"autoReport.outputGraphProfile":"true"}'})
    assert o.directory == "." and not o.execution
    o = options({"POPLAR_ENGINE_OPTIONS": '{"autoReport.all":"true","autoReport.executionProfileProgramRunCount":"2"}'})
    assert o.run_count == 2
    assert options({"POPLAR_ENGINE_OPTIONS": '{"autoReport.all":"false"}'}) is None
    assert options({"POPLAR_ENGINE_OPTIONS": '{"debug.instrument":"true"}'}) is None
    with pytest.warns(UserWarning):
        assert options({"POPLAR_ENGINE_OPTIONS": "not json"}) is None
    o = options({"POPLAR_ENGINE_OPTIONS": '{"autoReport.all":"true","autoReport.directory":"x"}',
                 "IPU_SIM_PROFILE": "y"})
    assert o.directory == "y"


def test_profiling_on_or_off_gives_the_same_numbers_and_cycles(tmp_path):
    off = _run_script(tmp_path, runs=2)
    d = tmp_path / "prof"
    on = _run_script(tmp_path, runs=2, env_extra={"IPU_SIM_PROFILE": str(d)})
    assert on == off  # results and Session.total_cycles
    doc = _format.load(d)
    cycles = int(off.split()[-1])
    assert doc["execution"]["total_cycles"] == cycles
    assert doc["info"]["session_total_cycles"] == cycles
    runs = doc["execution"]["runs"]
    assert len(runs) == 2 and sum(r["cycles"] for r in runs) == cycles
    assert runs[1]["first_entry"] == runs[0]["entries"] and runs[1]["start_cycle"] == runs[0]["cycles"]
    assert doc["wall"]["compile_seconds"] > 0 and doc["wall"]["run_seconds"] > 0
    assert doc["wall"]["simulated_cycles_per_second"] > 0
    # steps are attributed to popxl ops and name scopes
    scoped = [s for s in doc["steps"] if s.get("scope") == "block"]
    assert scoped and {s["op_type"] for s in scoped} <= {"mul", "add"}
    assert any(s.get("op_type") == "host_load" for s in doc["steps"])


def test_poplar_engine_options_switch_and_run_count(tmp_path):
    d = tmp_path / "pop"
    opts = {"autoReport.all": "true", "autoReport.directory": str(d),
            "autoReport.executionProfileProgramRunCount": "1"}
    _run_script(tmp_path, runs=3, env_extra={"POPLAR_ENGINE_OPTIONS": json.dumps(opts)})
    doc = _format.load(d)
    runs = doc["execution"]["runs"]
    assert len(runs) == 3
    assert doc["execution"]["trace"]["length"] == runs[0]["entries"]
    assert doc["execution"]["trace_truncated"]
    assert doc["execution"]["steps_executed"] == sum(r["entries"] for r in runs)


def test_ipu_profile_run_on_an_unseen_script(tmp_path):
    script = tmp_path / "unseen.py"
    script.write_text(SCRIPT.format(runs=1))
    d = tmp_path / "out"
    html = tmp_path / "page.html"
    env = {k: v for k, v in os.environ.items() if k not in _ENV_KEYS}
    env["PYTHONPATH"] = ROOT
    env["IPU_SIM_TARGET"] = "small:16"
    p = subprocess.run([sys.executable, "-m", "profiler", "run", "--dir", str(d), "--json", "--html", str(html),
                        str(script)], env=env, capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:]
    totals = json.loads(p.stdout)  # the script's own output went to stderr
    assert "RESULT" in p.stderr
    doc = _format.load(d)
    assert totals["cycles"]["total"] == doc["execution"]["total_cycles"] > 0
    assert totals["memory"]["total"] == doc["memory"]["total"]
    assert totals["memory"]["by_category"] == doc["memory"]["totals"]
    assert html.exists() and html.stat().st_size > 1000
    # and the human report prints the same total
    p = subprocess.run([sys.executable, "-m", "profiler", "report", str(d)], env=dict(env, COLUMNS="150"),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert f"{doc['execution']['total_cycles']:,}" in p.stdout


def test_profiling_is_off_by_default(tmp_path, monkeypatch):
    for k in _ENV_KEYS[:2]:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.chdir(tmp_path)
    _run_script(tmp_path, runs=1)
    assert not [f for f in os.listdir(tmp_path) if f.startswith("profile")]


def test_auto_report_from_the_irs_session_options(tmp_path, monkeypatch):
    import numpy as np
    import popxl
    import popxl.ops as ops

    monkeypatch.delenv("POPLAR_ENGINE_OPTIONS", raising=False)
    monkeypatch.delenv("IPU_SIM_PROFILE", raising=False)
    monkeypatch.setenv("IPU_SIM_TARGET", "small:4")
    ir = popxl.Ir()
    opts = ir._pb_ir.getSessionOptions()
    opts.engineOptions["autoReport.all"] = "true"
    opts.engineOptions["autoReport.directory"] = str(tmp_path)
    with ir.main_graph:
        x = popxl.variable(np.ones(3, np.float32))
        ops.host_store(popxl.d2h_stream((3,), popxl.float32, name="y"), x * 2.0)
    with popxl.Session(ir, "ipu_model") as s:
        s.run()
    import popxl._profiling as ar
    ar._flush_all()
    assert any(p.name.startswith("profile") and p.suffix == ".json" for p in tmp_path.iterdir())
