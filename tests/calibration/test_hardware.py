"""python -m profiler.calibrate --hardware: published measurements of real IPUs rebuilt as workloads."""
import json
import os
import subprocess
import sys

import pytest

import ipu
from profiler import hardware

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_every_published_row_is_built_and_within_its_limits():
    rows = hardware.simulate(hardware.read_hardware_table())
    assert rows and all(r.simulated is not None for r in rows), [r.reason for r in rows if r.reason]
    assert not hardware.hardware_failures(rows, 0.10, 0.05)
    assert all(r.source and r.conditions for r in rows)  # every figure says where it came from and how


def test_workloads_measure_what_they_say():
    # one ScaledAdd vertex: poplibs' estimate plus the compute set's launch
    c, flops, _ = hardware.WORKLOADS["scaled_add"](ipu.GC200, {"n": "64"})
    assert c == 279 + ipu.GC200.compute_set_launch_cycles and flops == 128
    # an IPU pair of an IPU-M2000: 2 links x 128 Gbit/s x 0.85
    nb = 32 << 20
    c, _, b = hardware.WORKLOADS["ipu_copy"](ipu.GC200, {"bytes": str(nb)})
    assert b / (c / ipu.GC200.clock_hz) == pytest.approx(2 * 16e9 * 0.85, rel=0.02)
    # gc-iputraffictest's pattern: both directions at once, each on its own links
    c, _, b = hardware.WORKLOADS["ipu_traffic"](ipu.GC200, {"device0": "2", "device1": "3", "tiles": "512",
                                                            "bytes_per_tile": str(64 << 10)})
    assert b == 2 * 512 * 64 << 10 and b / (c / ipu.GC200.clock_hz) == pytest.approx(2 * 2 * 16e9 * 0.85, rel=0.02)
    # two C600 cards: one cable of two links
    c, _, b = hardware.WORKLOADS["ipu_copy"](ipu.C600, {"bytes": str(nb)})
    assert b / (c / ipu.C600.clock_hz) == pytest.approx(2 * 16e9 * 0.85, rel=0.02)


def _run(*args):
    return subprocess.run([sys.executable, "-m", "profiler.calibrate", "--hardware", *args], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, "COLUMNS": "200"})


def test_command_prints_the_agreement_and_fails_past_the_limits(tmp_path):
    p = _run("--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["summary"]["max_abs_error"] <= 0.10 and doc["summary"]["median_abs_error"] <= 0.05
    assert {"published", "simulated", "error", "source", "conditions"} <= set(doc["rows"][0])

    bad = tmp_path / "hw.csv"
    bad.write_text("workload,target,params,published,unit,conditions,source\n"
                   "scaled_add,GC200,n=64,200,cycles,made up,made up\n")
    p = _run(str(bad))
    assert p.returncode == 1 and "+59.5%" in p.stderr
    bad.write_text("workload,target,params,published,unit,conditions,source\n"
                   "warp_drive,GC200,,1,cycles,x,y\n")
    p = _run(str(bad))
    assert p.returncode == 2 and "unknown workload 'warp_drive'" in p.stderr
