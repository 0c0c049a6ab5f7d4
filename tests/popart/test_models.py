"""Whole-model behaviours: dropout and batch norm in training, synthetic data, ONNX files of newer
and older opsets, Manual virtual graphs."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper as oh

import popart

from popart_helpers import check_against_reference, device, run_inference


def test_dropout_in_training_masks_and_scales_and_differs_per_step():
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [64]), "x")
    w = b.addInitializedInputTensor(np.ones(64, np.float32), "w")
    h = b.aiOnnx.mul([x, w])
    d = b.aiOnnx.dropout([h], 1, ratio=0.25)[0]
    loss = b.aiGraphcore.identityloss([d], popart.ReductionType.Sum)
    s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(2, [d, popart.reservedGradientPrefix() + w]), loss,
                               popart.ConstSGD(0.0), device())
    s.prepareDevice()
    s.weightsFromHost()
    out = s.initAnchorArrays()
    s.run(popart.PyStepIO({x: np.ones((2, 64), np.float32)}, out))
    kept = out[d] != 0
    assert set(np.unique(out[d])) <= {0.0, np.float32(1 / 0.75)}
    assert 0.5 < kept.mean() < 0.95 and not np.array_equal(kept[0], kept[1])
    # the gradient goes through the same mask
    np.testing.assert_allclose(out[popart.reservedGradientPrefix() + w], out[d])
    # inference: dropout is the identity
    got = run_inference(b.getModelProto(), {x: np.ones(64, np.float32)}, [d])
    np.testing.assert_array_equal(got[d], 1.0)


def test_batch_norm_in_training_uses_batch_statistics():
    rng = np.random.default_rng(3)
    X = rng.normal(2, 3, (4, 3, 2, 2)).astype(np.float32)
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", list(X.shape)), "x")
    scale = b.addInitializedInputTensor(np.full(3, 1.5, np.float32), "scale")
    bias = b.addInitializedInputTensor(np.full(3, 0.5, np.float32), "bias")
    mean = b.addInitializedInputTensor(np.zeros(3, np.float32), "mean")
    var = b.addInitializedInputTensor(np.ones(3, np.float32), "var")
    y, run_mean, run_var, _, _ = b.aiOnnx.batchnormalization([x, scale, bias, mean, var], 5, epsilon=1e-5,
                                                              momentum=0.9)
    loss = b.aiGraphcore.identityloss([b.aiOnnx.mul([y, y])])
    s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, [y, run_mean, run_var]), loss,
                               popart.ConstSGD(0.0), device())
    s.prepareDevice()
    s.weightsFromHost()
    out = s.initAnchorArrays()
    s.run(popart.PyStepIO({x: X}, out))
    m = X.mean((0, 2, 3))
    v = X.var((0, 2, 3))
    want = 1.5 * (X - m[None, :, None, None]) / np.sqrt(v[None, :, None, None] + 1e-5) + 0.5
    np.testing.assert_allclose(out[y], want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out[run_mean], 0.1 * m, rtol=1e-5)
    np.testing.assert_allclose(out[run_var], 0.9 + 0.1 * v, rtol=1e-5)


@pytest.mark.parametrize("mode", ["Zeros", "RandomNormal", "RandomUniform"])
def test_synthetic_data_needs_no_inputs(mode):
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [1000]), "x")
    y = b.aiOnnx.identity([x])
    opts = popart.SessionOptions()
    opts.syntheticDataMode = getattr(popart.SyntheticDataMode, mode)
    s = popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, [y]), device(), userOptions=opts)
    s.prepareDevice()
    out = s.initAnchorArrays()
    s.run(popart.PyStepIO({}, out))
    v = out[y]
    if mode == "Zeros":
        assert not v.any()
    elif mode == "RandomNormal":
        assert abs(v.mean()) < 0.15 and 0.85 < v.std() < 1.15
    else:
        assert v.min() >= 0 and v.max() < 1 and 0.4 < v.mean() < 0.6


def _file_model(opset, nodes, inputs, outputs, inits=()):
    g = oh.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)])


def test_opset13_model_from_a_file(tmp_path, rng):
    """Squeeze / Unsqueeze / ReduceSum take their axes as inputs from opset 13; Softmax is one axis."""
    F = onnx.TensorProto.FLOAT
    axes = onnx.numpy_helper.from_array(np.array([1], np.int64), "axes")
    nodes = [oh.make_node("Unsqueeze", ["x", "axes"], ["u"]), oh.make_node("ReduceSum", ["u", "axes"], ["r"],
                                                                            keepdims=1),
             oh.make_node("Squeeze", ["r", "axes"], ["s"]), oh.make_node("Softmax", ["s"], ["y"], axis=-1),
             oh.make_node("Erf", ["y"], ["z"])]
    m = _file_model(13, nodes, [oh.make_tensor_value_info("x", F, [3, 5])], [oh.make_tensor_value_info("z", F, [3, 5])],
                    [axes])
    path = tmp_path / "m13.onnx"
    onnx.save(m, path)
    check_against_reference(str(path), {"x": rng.normal(size=(3, 5)).astype(np.float32)}, ["y", "z"])


def test_old_opset_model_is_converted(rng):
    F = onnx.TensorProto.FLOAT
    m = _file_model(5, [oh.make_node("Relu", ["x"], ["y"])], [oh.make_tensor_value_info("x", F, [4])],
                    [oh.make_tensor_value_info("y", F, [4])])
    m.ir_version = 3
    X = rng.normal(size=4).astype(np.float32)
    got = run_inference(m.SerializeToString(), {"x": X}, ["y"])
    np.testing.assert_allclose(got["y"], np.maximum(X, 0))


def test_dynamic_input_shape_needs_input_shape_info(rng):
    F = onnx.TensorProto.FLOAT
    m = _file_model(11, [oh.make_node("Relu", ["x"], ["y"])], [oh.make_tensor_value_info("x", F, ["batch", 4])],
                    [oh.make_tensor_value_info("y", F, ["batch", 4])])
    with pytest.raises(popart.popart_exception, match="dynamic dimension 'batch'.*InputShapeInfo"):
        popart.InferenceSession(m.SerializeToString(), popart.DataFlow(1, ["y"]), device())
    info = popart.InputShapeInfo()
    info.add("x", popart.TensorInfo("FLOAT", [2, 4]))
    s = popart.InferenceSession(m.SerializeToString(), popart.DataFlow(1, ["y"]), device(), inputShapeInfo=info)
    s.prepareDevice()
    out = s.initAnchorArrays()
    X = rng.normal(size=(2, 4)).astype(np.float32)
    s.run(popart.PyStepIO({"x": X}, out))
    np.testing.assert_allclose(out["y"], np.maximum(X, 0))


def test_manual_virtual_graphs_place_ops_on_ipus(rng):
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [4, 8]), "x")
    with b.virtualGraph(0):
        h = b.aiOnnx.relu([x])
    with b.virtualGraph(1):
        y = b.aiOnnx.exp([h])
    opts = popart.SessionOptions()
    opts.virtualGraphMode = popart.VirtualGraphMode.Manual
    s = popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, [y]), device(num_ipus=2), userOptions=opts)
    s.prepareDevice()
    out = s.initAnchorArrays()
    X = rng.normal(size=(4, 8)).astype(np.float32)
    s.run(popart.PyStepIO({x: X}, out))
    np.testing.assert_allclose(out[y], np.exp(np.maximum(X, 0)), rtol=1e-6)
    exe = s._session.executable
    assert any("ipu_copy" in st.name for st in exe.steps)
    # without a virtual graph on every op, Manual mode is an error naming the op
    b2 = popart.Builder()
    x2 = b2.addInputTensor(popart.TensorInfo("FLOAT", [2]), "x")
    y2 = b2.aiOnnx.relu([x2])
    with pytest.raises(popart.popart_exception, match="Relu node .* has no virtual graph"):
        popart.InferenceSession(b2.getModelProto(), popart.DataFlow(1, [y2]), device(num_ipus=2), userOptions=opts)


def test_auto_virtual_graphs_shard_the_model_over_the_ipus(rng):
    """VirtualGraphMode.Auto splits the ops over the IPUs of a replica (here 2), numbers unchanged;
    with pipelining and no gradient accumulation, as older PopART tutorials run."""
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [4, 16]))
    lbl = b.addInputTensor(popart.TensorInfo("INT32", [4]))
    h = x
    for i in range(4):
        h = b.aiOnnx.relu([b.aiOnnx.matmul([h, b.addInitializedInputTensor(
            (rng.normal(size=(16, 16)) / 4).astype(np.float32))])])
    probs = b.aiOnnx.softmax([h])
    loss = b.aiGraphcore.nllloss([probs, lbl], popart.ReductionType.Sum, debugPrefix="nllLossVal")
    X = rng.normal(size=(4, 16)).astype(np.float32)
    L = np.array([0, 3, 5, 7], np.int32)
    results = []
    for mode, ipus in ((popart.VirtualGraphMode.Off, 1), (popart.VirtualGraphMode.Auto, 2)):
        opts = popart.SessionOptions()
        opts.virtualGraphMode = mode
        opts.enablePipelining = mode == popart.VirtualGraphMode.Auto
        s = popart.TrainingSession(fnModel=b.getModelProto(), loss=loss, deviceInfo=device(num_ipus=ipus),
                                   optimizer=popart.ConstSGD(0.01), dataFlow=popart.DataFlow(2, [loss]),
                                   userOptions=opts)
        s.prepareDevice()
        s.setRandomSeed(1)
        s.weightsFromHost()
        out = s.initAnchorArrays()
        s.run(popart.PyStepIO({x: np.stack([X, X]), lbl: np.stack([L, L])}, out))
        results.append(out[loss].copy())
        if ipus == 2:
            assert any("ipu_copy" in st.name for st in s._session.executable.steps)
    np.testing.assert_allclose(results[0], results[1], rtol=1e-5)


def test_get_logger(monkeypatch):
    from popxl import _logging
    monkeypatch.setattr(_logging, "_chosen", {})  # the levels are process-wide: later tests start clean
    popart.getLogger("ir").setLevel("TRACE")
    popart.getLogger("devicex").setLevel("CRITICAL")
    assert popart.getLogger("devicex").getLevel() == "CRITICAL"
    with pytest.raises(ValueError, match="Unknown log level"):
        popart.getLogger().setLevel("LOUD")


def test_newer_onnx_ops_from_files(rng):
    """Ops of later opsets that exported models carry (Gelu-20, HardSwish, Mish, Trilu, OneHot,
    DepthToSpace / SpaceToDepth, CastLike, IsInf), against onnx.reference."""
    F, I = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64
    c = onnx.numpy_helper.from_array
    inits = [c(np.array(1, np.int64), "k"), c(np.array(5, np.int64), "depth"),
             c(np.array([0.0, 2.0], np.float32), "vals"), c(np.zeros(1, np.int32), "int_like")]
    nodes = [oh.make_node("Gelu", ["x"], ["gelu"]), oh.make_node("Gelu", ["x"], ["gelu_t"], approximate="tanh"),
             oh.make_node("HardSwish", ["x"], ["hswish"]), oh.make_node("Mish", ["x"], ["mish"]),
             oh.make_node("Trilu", ["x", "k"], ["triu"]), oh.make_node("Trilu", ["x"], ["tril"], upper=0),
             oh.make_node("OneHot", ["idx", "depth", "vals"], ["onehot"], axis=1),
             oh.make_node("DepthToSpace", ["img"], ["d2s"], blocksize=2, mode="CRD"),
             oh.make_node("DepthToSpace", ["img"], ["d2s_dcr"], blocksize=2),
             oh.make_node("SpaceToDepth", ["d2s"], ["s2d"], blocksize=2),
             oh.make_node("CastLike", ["x", "int_like"], ["casted"]), oh.make_node("IsInf", ["x"], ["isinf"])]
    outs = ["gelu", "gelu_t", "hswish", "mish", "triu", "tril", "onehot", "d2s", "d2s_dcr", "s2d", "casted", "isinf"]
    m = _file_model(20, nodes, [oh.make_tensor_value_info("x", F, [4, 6]), oh.make_tensor_value_info("idx", I, [3]),
                                oh.make_tensor_value_info("img", F, [1, 8, 2, 3])],
                    [oh.make_tensor_value_info("gelu", F, [4, 6])], inits)
    X = rng.normal(0, 3, (4, 6)).astype(np.float32)
    check_against_reference(m.SerializeToString(), {"x": X, "idx": np.array([0, 4, 2], np.int64),
                                                    "img": rng.normal(size=(1, 8, 2, 3)).astype(np.float32)},
                            outs, rtol=2e-5, atol=2e-5)
