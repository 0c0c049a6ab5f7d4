"""profiler.testing: assert cycles against figures with a tolerance and a recorded source."""
import json
import os
import subprocess
import sys

import pytest

from profiler import build_profile
from profiler.testing import CycleMismatch, Expected, GoldenCycles, assert_cycles, cycles_of, simulator_source
from profiler_helpers import SCALED_ADD_256, known_program


@pytest.fixture(scope="module")
def doc():
    exe, engine, expected = known_program()
    engine.run()
    d = build_profile(exe, engine)
    d["_expected"] = expected
    return d


def test_cycles_of_a_program_a_step_and_a_kind(doc):
    assert cycles_of(doc) == doc["_expected"]
    compute = [s for s in doc["steps"] if s["kind"] == "compute"]
    assert cycles_of(doc, kind="compute") == sum(s["executed_cycles"] for s in compute)
    one = compute[0]
    assert cycles_of(doc, step=one["name"], executed=False) >= SCALED_ADD_256
    with pytest.raises(KeyError, match="no step of the profile matches op='nothing'"):
        cycles_of(doc, op="nothing")


def test_assert_cycles_passes_within_tolerance_and_says_where_the_figure_came_from():
    assert_cycles(567, 567, source="poplibs estimate")
    assert_cycles(590, 567, rel=0.05, source="poplibs estimate")
    with pytest.raises(CycleMismatch) as e:
        assert_cycles(665, 567, rel=0.05, source="poplibs getScaledArithmeticSupervisorCycleEstimate")
    msg = str(e.value)
    assert "got 665, expected 567 (+17.28%)" in msg and "tolerance 5%" in msg
    assert "from: poplibs getScaledArithmeticSupervisorCycleEstimate" in msg
    with pytest.raises(ValueError, match="say where the expected figure comes from"):
        assert_cycles(1, 1)
    assert_cycles(1040, Expected(1043, "measured on a Mk2 IPU", abs=5))


def test_golden_file_reports_every_mismatch_with_its_source(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"figures": {
        "scaled_add_256": {"cycles": 569, "source": "Mk2 hardware, 665 less 96 probe cycles", "rel": 0.05},
        "exchange": {"cycles": 100, "source": "poplibs estimate"},
    }}))
    g = GoldenCycles(str(path))
    assert g.check("scaled_add_256", 567)
    assert not g.check("exchange", 112)
    assert not g.check("new_figure", 7)
    with pytest.raises(CycleMismatch) as e:
        g.assert_ok()
    text = str(e.value)
    assert "2 figure(s) differ" in text
    assert "exchange" in text and "+12.00%" in text and "poplibs estimate" in text
    assert "new_figure" in text and "no expected figure recorded" in text
    assert "IPU_SIM_UPDATE_GOLDEN=1" in text


def test_golden_update_records_figures_with_the_simulator_as_source(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"figures": {"kept": {"cycles": 10, "source": "poplibs estimate"}}}))
    g = GoldenCycles(str(path), update=True)
    g.check("kept", 10)
    g.check("new", 20)
    g.assert_ok()
    data = json.loads(path.read_text())["figures"]
    assert data["kept"] == {"cycles": 10, "source": "poplibs estimate"}
    assert data["new"] == {"cycles": 20, "source": simulator_source()}
    assert GoldenCycles(str(path)).check("new", 20)


def test_golden_file_needs_sources(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"figures": {"x": {"cycles": 1}}}))
    with pytest.raises(ValueError, match="needs 'cycles' and 'source'"):
        GoldenCycles(str(path))


def test_pytest_fixture_checks_the_golden_file_when_the_test_ends(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["profiler.testing"]\n')
    (tmp_path / "test_user.py").write_text(
        "def test_step(golden_cycles):\n    golden_cycles.check('step', 120)\n")
    (tmp_path / "golden").mkdir()
    (tmp_path / "golden" / "test_user.json").write_text(json.dumps(
        {"figures": {"step": {"cycles": 100, "source": "poplibs estimate", "rel": 0.1}}}))
    env = {**os.environ, "PYTHONPATH": root}
    env.pop("IPU_SIM_UPDATE_GOLDEN", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", str(tmp_path)]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert p.returncode == 1 and "step" in p.stdout and "+20.00%" in p.stdout and "poplibs estimate" in p.stdout
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env={**env, "IPU_SIM_UPDATE_GOLDEN": "1"})
    assert p.returncode == 0, p.stdout
    fig = json.loads((tmp_path / "golden" / "test_user.json").read_text())["figures"]["step"]
    assert fig["cycles"] == 120 and fig["source"].startswith("this simulator")
