"""`import pva`: libpva's Python API over the simulator's profiles (a written profile, and a
Session's own report through `session._pb_session.getReport()`, with profiling on or off)."""
import json

import numpy as np
import pytest

import popxl
import popxl.ops as ops
import pva


@pytest.fixture(autouse=True)
def small_ipu(monkeypatch):
    monkeypatch.setenv("IPU_SIM_TARGET", "small:4")
    monkeypatch.delenv("POPLAR_ENGINE_OPTIONS", raising=False)
    monkeypatch.delenv("IPU_SIM_PROFILE", raising=False)


def _session(replication=1, ipus=1):
    ir = popxl.Ir(replication=replication)
    with ir.main_graph:
        xs = popxl.h2d_stream((4, 8), popxl.float32, "xs")
        w = popxl.variable(np.ones((8, 8), np.float32), name="w")
        x = ops.host_load(xs)
        y = x @ w
        if ipus > 1:
            y = ops.ipu_copy(y, 1)
            with popxl.ipu(1):
                y = ops.relu(y)
        else:
            y = ops.relu(y)
        o = popxl.d2h_stream(y.shape, y.dtype, "o")
        ops.host_store(o, y)
    s = popxl.Session(ir, "ipu_model")
    with s:
        for _ in range(2):
            s.run({xs: np.ones(((replication,) if replication > 1 else ()) + (4, 8), np.float32)})
    return s


def test_a_session_report_without_profiling_has_its_steps_and_runs():
    s = _session()
    r = s._pb_session.getReport()
    assert isinstance(r, pva.Report) and isinstance(r, pva.pva_core.Report)
    steps = r.execution.steps
    assert len(steps) > 0 and sum(st.cycles for st in steps) == s.total_cycles
    copies = [st for st in steps if st.program.type == pva.pva_core.Program.Type.StreamCopyMid]
    assert [c.program.kind for c in copies] == ["host_to_device", "device_to_host"] * 2
    assert [c.ipus[0].dataIn for c in copies[:2]] == [4 * 8 * 4, 0]
    assert [c.ipus[0].dataOut for c in copies[:2]] == [0, 4 * 8 * 4]
    assert any(st.program.type == pva.Program.Type.OnTileExecute for st in steps)
    assert any(st.program.type == pva.Program.Type.Sync for st in steps)
    runs = r.execution.runs
    assert len(runs) == 2 and runs[0].cyclesTo == runs[1].cyclesFrom
    assert runs[1].microseconds.end == pytest.approx(s.total_cycles / r.compilation.target.clockFrequency * 1e6)
    assert [st.program.name for st in runs[0].steps] == [st.program.name for st in runs[1].steps]
    for st in steps:
        ipu = st.ipus[0]
        assert ipu.activeCycles.cyclesFrom.max == st.cyclesFrom
        assert ipu.activeCycles.cyclesTo.max == st.cyclesFrom + int(st.program.tile_cycles.max(initial=0)) or \
            not ipu.activeTiles
        assert 0.0 <= ipu.tileBalance <= ipu.activeTileBalance <= 1.0


def test_open_report_reads_a_written_profile_with_libpva_names(tmp_path, monkeypatch):
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", json.dumps({"autoReport.all": "true",
                                                            "autoReport.directory": str(tmp_path)}))
    s = _session(replication=2, ipus=2)
    del s  # the profile is written when the session exits
    r = pva.openReport(str(tmp_path / "profile.json"))
    t = r.compilation.target
    assert (t.numIPUs, t.tilesPerIpu, t.numTiles, t.numReplicas, t.ipusPerReplica) == (2, 4, 8, 2, 2)
    assert t.type == pva.Target.Type.IpuModel and t.bytesPerIPU == 4 * t.bytesPerTile
    assert len(r.compilation.ipus) == 2 and all(len(i.tiles) == 4 for i in r.compilation.ipus)
    tile = r.compilation.tiles[0]
    assert tile.memory.total.excludingGaps == sum(v for _, v in tile.memory.category.items())
    assert tile.memory.overflowed.includingGaps == 0
    assert {v.name for v in r.compilation.alwaysLiveVariables} >= {"w"}
    assert max(st.notAlwaysLiveMemory.bytes for st in r.compilation.livenessProgramSteps) > 0
    assert any(st.program.type == pva.Program.Type.GlobalExchange for st in r.execution.steps)
    assert r.version.major == 1 and "no Poplar" in r.poplarVersion.string
