"""profiler.calibrate: the shipped table, its sync with the poplibs transcriptions, the command."""
import json
import os
import subprocess
import sys

import pytest

import make_reference_table
from profiler import calibrate

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_shipped_table_matches_the_transcriptions():
    with open(calibrate.DEFAULT_TABLE, encoding="utf-8") as fh:
        assert fh.read() == make_reference_table.render(), (
            "codelets/reference_cycles.csv is out of date: python tests/calibration/make_reference_table.py")


def test_every_shipped_row_is_within_ten_percent():
    # (the hardware measurements are workloads: codelets/reference_hardware.csv, test_hardware.py)
    rows = calibrate.compute(calibrate.read_table(calibrate.DEFAULT_TABLE))
    assert not calibrate.failures(rows, 0.10)
    s = calibrate.summary(rows)
    assert s["scored"] > 500 and s["uncomputed"] == 0 and s["pearson_r"] > 0.999


def test_every_codelet_is_in_the_table():
    """Each registered codelet has rows, or a row saying it has no (transcribed) poplibs estimator."""
    import ipu

    text = open(calibrate.DEFAULT_TABLE, encoding="utf-8").read()
    covered = {
        "ScaledAdd": "ScaledAddSupervisor", "BinaryOp": "BinaryOp1D", "UnaryOp": "UnaryOp1D", "Cast": "Cast1D",
        "DynamicSlice": "DynamicSlice1D", "DynamicUpdate": "DynamicSlice1D", "Fill": "popops::Fill",
        "MultiSlice": "popops::MultiSlice", "MatMulBlock": "poplin::ConvPartial1x1Out,float,",
        "MatMulReducePartials": "poplin::ReduceAdd,float->half", "MultiUpdate": "popops::MultiUpdateOp,float,", "Reduce": "popops::Reduce,float->float,",
        "Select": "popops::Select", "Clamp": "popops::Clamp", "Arange": "popops::Iota,int,",
        "EncodeOneHot": "EncodeOneHotCustomValues", "Histogram": "popops::Histogram2D,float,", "HistogramCombine": "HistogramCombine",
        "ArgMinMax": "popnn::ReduceMaxClassSparse,float,", "ArgMinMaxPartial": "ReduceMaxClassSparse",
        "ArgMinMaxCombine": "ArgMinMaxCombine", "TopK": "popnn::ReduceMaxNClassSparse,float,", "Median": "ipu::Median",
        "CumSum": "ipu::CumSum", "RandomUniform": "UniformSupervisor", "RandomNormal": "poprand::NormalSupervisor,float,",
        "Dropout": "poprand::DropoutSupervisor,float,", "ModifySeed": "ipu::ModifySeed", "Copy": "ipu::Copy",
        "Transpose2d": "popops::Transpose2d,float,", "RoiAlign": "ipu::RoiAlign", "RoiAlignGrad": "ipu::RoiAlignGrad",
        "CastThenPow2Scale": "ipu::CastThenPow2Scale", "Pow2ScaleThenCast": "ipu::Pow2ScaleThenCast",
        "MatMulBlockPow2Scaled": "quart,64,m=8;k=32;n=8",
        "ConvPartialHorizontalMac": "poplin::ConvPartialHorizontalMac,float,",
        "ConvPartialVerticalMac": "poplin::ConvPartialVerticalMac,half,", "NonLinearityGrad": "popnn::NonLinearityGrad1D,float,",
        "BroadcastVectorOuter": "popops::BroadcastVectorOuterByColumnSupervisor,half,",
    }
    from ipu.codelet import registered_codelets

    ipu.get_codelet("ScaledAdd")  # load the built-in codelets
    for name, codelet in registered_codelets().items():
        if not type(codelet).__module__.startswith("codelets."):
            continue  # a codelet another test (or a user) registered, not a built-in one
        assert name in covered, f"codelet {name} has no row in codelets/reference_cycles.csv (add one, or one " \
                                "saying it has no poplibs estimator, in tests/calibration/make_reference_table.py)"
        assert covered[name] in text, name


def _run(*args, table=None):
    cmd = [sys.executable, "-m", "profiler.calibrate", *( [table] if table else []), *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "COLUMNS": "200"})


def test_command_json_and_exit_codes(tmp_path):
    p = _run("--json", "--max-error", "0.10")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert set(doc) == {"rows", "summary"}
    row = doc["rows"][0]
    assert {"vertex", "dtype", "n", "params", "reference", "model", "error"} <= set(row)
    assert doc["summary"]["within_10pct"] == 1.0

    bad = tmp_path / "t.csv"
    bad.write_text("vertex,dtype,n,params,cycles,source\n"
                   "popops::ScaledAddSupervisor,float,64,op=ADD,200,made up\n"
                   "popops::Nonsense,float,64,,100,made up\n"
                   "popops::CumSumThing,float,64,,,no estimator\n")
    p = _run("--json", "--max-error", "0.10", table=str(bad))
    assert p.returncode == 1
    doc = json.loads(p.stdout)
    sa, unknown, noref = doc["rows"]
    assert sa["model"] == 279 and sa["error"] == pytest.approx(0.395)
    assert unknown["model"] is None and "no model adapter" in unknown["reason"]
    assert noref["reference"] is None and noref["error"] is None
    assert "line 2" in p.stderr and "+39.5%" in p.stderr
    # without --max-error the command reports and succeeds
    p = _run(table=str(bad))
    assert p.returncode == 0 and "ScaledAddSupervisor" in p.stdout


def test_malformed_tables_get_clear_errors(tmp_path):
    t = tmp_path / "t.csv"
    t.write_text("vertex,dtype,n\nx,float,3\n")
    p = _run(table=str(t))
    assert p.returncode == 2 and "missing column(s) params, cycles, source" in p.stderr
    t.write_text("vertex,dtype,n,params,cycles,source\npopops::Fill,float,many,,3,x\n")
    p = _run(table=str(t))
    assert p.returncode == 2 and "line 2: n must be an integer" in p.stderr
    p = _run(table=str(tmp_path / "missing.csv"))
    assert p.returncode == 2 and "no such file" in p.stderr
