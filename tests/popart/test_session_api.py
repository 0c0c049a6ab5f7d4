"""Session API beyond run: weights in and out, model to host, tensor info, reports, cycle counts,
devices, and `ipu-profile run` on a PopART script."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import popart

from popart_helpers import device

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _linear(opts=None):
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [2, 3]), "x")
    w = b.addInitializedInputTensor(np.ones((3, 2), np.float32), "w")
    y = b.aiOnnx.matmul([x, w])
    loss = b.aiGraphcore.l1loss([y], 0.5)
    s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, [y, loss]), loss, popart.ConstSGD(0.1), device(),
                               userOptions=opts)
    return s, x, w, y, loss


def test_weights_roundtrip_write_read_and_model_to_host(tmp_path):
    s, x, w, y, loss = _linear()
    s.prepareDevice()
    new = np.arange(6, dtype=np.float32).reshape(3, 2)
    s.writeWeights(popart.PyWeightsIO({w: new}))
    s.weightsFromHost()
    out = s.initAnchorArrays()
    X = np.ones((2, 3), np.float32)
    s.run(popart.PyStepIO({x: X}, out))
    np.testing.assert_allclose(out[y], X @ new)
    s.weightsToHost()
    back = {w: np.zeros((3, 2), np.float32)}
    s.readWeights(popart.PyWeightsIO(back))
    # l1 loss 0.5 * mean over samples of sum |y|: dL/dy = 0.5 * sign(y) / 2
    np.testing.assert_allclose(back[w], new - 0.1 * X.T @ (0.25 * np.sign(X @ new)), rtol=1e-6)
    path = str(tmp_path / "trained.onnx")
    s.modelToHost(path)
    saved = {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    np.testing.assert_allclose(saved[w], back[w])
    with pytest.raises(popart.popart_exception, match="'v' is not a weight"):
        s.writeWeights(popart.PyWeightsIO({"v": new}))
    with pytest.raises(popart.popart_exception, match=r"has shape \[3, 2\], the data has \[2, 3\]"):
        s.writeWeights(popart.PyWeightsIO({w: new.T}))


def test_get_info_and_tensor_ids():
    s, x, w, y, loss = _linear()
    info = s.getInfo(y)
    assert info.shape() == [2, 2] and info.data_type_lcase() == "float"
    assert s.getInfo(popart.reservedGradientPrefix() + w).shape() == [3, 2]
    assert {x, w, y, loss} <= s.getTensorIds()
    assert s.replicationFactor == 1 and s.accumulationFactor == 1


def test_reports_and_cycle_count():
    opts = popart.SessionOptions()
    opts.instrumentWithHardwareCycleCounter = True
    s, x, w, y, loss = _linear(opts)
    with pytest.raises(popart.popart_exception, match="prepareDevice"):
        s.getSummaryReport()
    s.prepareDevice()
    s.weightsFromHost()
    out = s.initAnchorArrays()
    s.run(popart.PyStepIO({x: np.ones((2, 3), np.float32)}, out))
    cycles = s.getCycleCount()
    assert cycles > 0
    s.run(popart.PyStepIO({x: np.ones((2, 3), np.float32)}, out))
    assert s.getCycleCount() == cycles  # the same program, the same cycles
    text = s.getSummaryReport()
    assert "Execution" in text and "Memory" in text
    report = s.getReport()
    assert report.compilation.tiles[0].memory.total.includingGaps > 0
    s2, *_ = _linear()
    s2.prepareDevice()
    with pytest.raises(popart.popart_exception, match="instrumentWithHardwareCycleCounter"):
        s2.getCycleCount()


def test_devices():
    dm = popart.DeviceManager()
    model = dm.createIpuModelDevice({"numIPUs": 2, "tilesPerIPU": 4})
    assert model.numIpus == 2 and model.tilesPerIPU == 4 and model.type == popart.DeviceType.IpuModel
    assert dm.createIpuModelDevice({}).tilesPerIPU == 1472
    assert dm.createIpuModelDevice({"ipuVersion": "ipu1"}).tilesPerIPU == 1216
    assert dm.createCpuDevice().type == popart.DeviceType.Cpu
    with pytest.raises(popart.popart_exception, match="unknown option"):
        dm.createIpuModelDevice({"numIpus": 2})
    devs = dm.enumerateDevices()
    assert len(devs) == 64 and all(d.numIpus == 1 for d in devs)
    assert [d.numIpus for d in dm.enumerateDevices(numIpus=4)] == [4] * 16
    with dm.acquireAvailableDevice(2) as d:
        assert d.isAttached and d.numIpus == 2 and d.tilesPerIPU == 1472
        other = dm.acquireAvailableDevice(2)
        assert set(other.driverIds).isdisjoint(d.driverIds)
        other.detach()
        with pytest.raises(popart.popart_exception, match="attached to another session"):
            dm.acquireDeviceById(d.id)
    assert not d.isAttached
    again = dm.acquireDeviceById(d.id)
    assert again.isAttached
    again.detach()
    with pytest.raises(popart.popart_exception, match=r"1, 2, 4, \.\.\., 64"):
        dm.acquireAvailableDevice(3)


def test_acquired_hardware_device_runs(tmp_path):
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [4]), "x")
    y = b.aiOnnx.exp([x])
    with popart.DeviceManager().acquireAvailableDevice(1) as d:
        s = popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, [y]), d)
        s.prepareDevice()
        out = s.initAnchorArrays()
        s.run(popart.PyStepIO({x: np.zeros(4, np.float32)}, out))
    np.testing.assert_allclose(out[y], 1.0)


def test_ipu_profile_run_on_a_popart_script(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("IPU_SIM_TARGET", None)
    r = subprocess.run([sys.executable, "-m", "profiler", "run", "--dir", str(tmp_path),
                        os.path.join(ROOT, "examples", "popart", "simple_addition.py")],
                       capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Execution" in r.stdout and "Memory" in r.stdout
    import profiler
    doc = profiler.load_profile(str(tmp_path))
    assert doc["info"]["frontend"] == "popart"


def test_engine_options_auto_report_write_a_profile(tmp_path):
    opts = popart.SessionOptions()
    opts.engineOptions = {"autoReport.all": "true", "autoReport.directory": str(tmp_path)}
    s, x, w, y, loss = _linear(opts)
    s.prepareDevice()
    s.weightsFromHost()
    out = s.initAnchorArrays()
    s.run(popart.PyStepIO({x: np.ones((2, 3), np.float32)}, out))
    from popxl import _profiling
    _profiling._flush_all()
    assert os.path.exists(tmp_path / "profile.json")


def test_patterns_as_scripts_use_them():
    p = popart.Patterns(popart.PatternsLevel.NoPatterns)
    p.enableRuntimeAsserts(False)
    p.InPlace = False
    assert not p.isInPlaceEnabled()
    p2 = popart.Patterns(["MulArgGradOp"]).enablePattern("PreUniRepl", True)
    assert p2.isPatternEnabled("PreUniRepl") and p2.isPatternEnabled("MulArgGradOp")
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [2]), "x")
    y = b.aiOnnx.relu([x])
    popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, [y]), device(), patterns=p)


def test_inference_session_from_a_popxl_ir():
    """InferenceSession.fromIr runs a popxl Ir (popart.ir programs' way): streams keyed by tensor id."""
    import popxl
    import popxl.ops as ops
    ir = popxl.Ir()
    with ir.main_graph:
        a_s = popxl.h2d_stream([3], popxl.float32, name="input0_stream")
        a = ops.host_load(a_s, "a")
        o = ops.add(a, popxl.constant(np.ones(3, np.float32)))
        o_s = popxl.d2h_stream(o.shape, o.dtype, name="output_stream")
        ops.host_store(o_s, o)
    s = popart.InferenceSession.fromIr(ir=ir._pb_ir, deviceInfo=device())
    s.prepareDevice()
    anchors = s.initAnchorArrays()
    assert anchors[o_s.tensor_id].shape == (3,)
    data = np.arange(3, dtype=np.float32)
    s.run(popart.PyStepIO({a_s.tensor_id: data}, anchors))
    np.testing.assert_allclose(anchors[o_s.tensor_id], data + 1)
    assert s.getCycleCount() > 0
    with pytest.raises(popart.popart_exception, match="no host_load reads"):
        s.run(popart.PyStepIO({"nope": data}, anchors))


def test_from_ir_with_a_data_flow_and_variables_in_a_conditional():
    """PopXL's test_conditional_variable way: setDataFlow (its batchesPerStep is the Ir's host
    transfers), updateVertices, Default patterns, logIr, then fromIr and weightsFromHost."""
    import popart._internal.ir as _ir
    import popxl
    import popxl.ops as ops
    ir = popxl.Ir()
    nx = np.array([23, 10, 22, 21], np.float32)
    with ir.main_graph:
        x = popxl.variable(nx, name="x")
        cond = popxl.variable(np.array(True), name="cond")
        g = ir.create_graph(lambda a, b: a + b, x, x)
        o = ops.conditional(cond=cond, then_branch=g, else_branch=g, then_inputs=[x, x], else_inputs=[x, x])[0]
        d2h = popxl.d2h_stream(o.shape, o.dtype, name="o_stream")
        ops.host_store(d2h, o)
    pb = ir._pb_ir
    pb.setDataFlow(popart.DataFlow(batchesPerStep=2, anchorTensors={d2h.tensor_id: popart.AnchorReturnType("All")}))
    assert ir.num_host_transfers == 2 and pb.getDataFlow().batchesPerStep() == 2
    pb.updateVertices()
    pb.setPatterns(_ir.patterns.Patterns(_ir.patterns.PatternsLevel.Default))
    pb.logIr()
    s = popart.InferenceSession.fromIr(ir=pb, deviceInfo=device())
    s.prepareDevice()
    anchors = s.initAnchorArrays()
    s.weightsFromHost()
    s.run(popart.PyStepIO({}, anchors))
    np.testing.assert_allclose(anchors[d2h.tensor_id][0], 2 * nx)


def test_engine_caching_loads_the_second_sessions_executable(tmp_path):
    """SessionOptions.enableEngineCaching + cachePath: PopART's engine caching, served by popxl's
    executable cache; the second session of the same model loads and trains the same."""
    results = []
    for _ in range(2):
        opts = popart.SessionOptions()
        opts.enableEngineCaching = True
        opts.cachePath = str(tmp_path / "cache")
        s, x, w, y, loss = _linear(opts)
        s.prepareDevice()
        s.weightsFromHost()
        out = s.initAnchorArrays()
        s.run(popart.PyStepIO({x: np.ones((2, 3), np.float32)}, out))
        results.append((s._session.loaded_from_cache, out[loss].copy()))
    assert [r[0] for r in results] == [False, True]
    np.testing.assert_array_equal(results[0][1], results[1][1])
    assert len(list((tmp_path / "cache").glob("*.popef"))) == 1
