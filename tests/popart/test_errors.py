"""Bad input gets a clear popart_exception naming what is wrong, early (before any device work)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

import popart

from popart_helpers import device


def _session(anchor=None):
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [2, 3]), "x")
    y = b.aiOnnx.relu([x])
    s = popart.InferenceSession(b.getModelProto(), popart.DataFlow(2, [anchor or y]), device())
    return s, x, y


def test_unknown_op_is_named():
    g = onnx.helper.make_graph([onnx.helper.make_node("Det", ["x"], ["y"])], "g",
                               [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3, 3])],
                               [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [])])
    m = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 11)])
    # PopART registers no Det: its own words ("No class for ai.onnx.Det:0"), then the node
    with pytest.raises(popart.popart_exception, match=r"No class for ai\.onnx\.Det:0 \(node 'y'\)"):
        popart.InferenceSession(m.SerializeToString(), popart.DataFlow(1, ["y"]), device())


def test_unsupported_attribute_is_named():
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [1, 1, 4, 4]), "x")
    y = b.aiOnnx.maxpool([x], 1, [2, 2], storage_order=1)[0]
    with pytest.raises(popart.popart_exception, match="MaxPool node .*storage_order"):
        popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, [y]), device())


def test_shapes_that_do_not_fit_name_the_node_not_the_untyped_output():
    # the Builder cannot type the output of a MatMul of (2, 3) by (4, 4); onnx.checker's complaint
    # about the untyped output comes after the reason
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [2, 3]), "x")
    w = b.addInitializedInputTensor(np.ones((4, 4), np.float32))
    y = b.aiOnnx.matmul([x, w])
    b.addOutputTensor(y)
    with pytest.raises(popart.popart_exception, match=r"not valid: MatMul node .*\(3 != 4\)"):
        popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, [y]), device())


def test_unknown_builder_op_and_argument():
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [2]), "x")
    with pytest.raises(AttributeError, match="no op 'frobnicate'"):
        b.aiOnnx.frobnicate([x])
    with pytest.raises(popart.popart_exception, match="unknown argument 'alpah'"):
        b.aiOnnx.leakyrelu([x], alpah=0.1)
    with pytest.raises(popart.popart_exception, match="tensor 'nope' is not in the model"):
        b.aiOnnx.relu(["nope"])


def test_wrong_input_shape_in_stepio():
    s, x, y = _session()
    s.prepareDevice()
    out = s.initAnchorArrays()
    with pytest.raises(popart.popart_exception, match=r"Input 'x' has shape \[2, 2, 2\]; expected \[2, 2, 3\]"):
        s.run(popart.PyStepIO({x: np.zeros((2, 2, 2), np.float32)}, out))


def test_wrong_input_dtype_in_stepio():
    s, x, y = _session()
    s.prepareDevice()
    out = s.initAnchorArrays()
    with pytest.raises(popart.popart_exception, match=r"Input 'x' is int32; the model's input is float"):
        s.run(popart.PyStepIO({x: np.zeros((2, 2, 3), np.int32)}, out))


def test_missing_and_unknown_inputs():
    s, x, y = _session()
    s.prepareDevice()
    out = s.initAnchorArrays()
    with pytest.raises(popart.popart_exception, match=r"no data for input\(s\) \['x'\]"):
        s.run(popart.PyStepIO({}, out))
    with pytest.raises(popart.popart_exception, match=r"input\(s\) \['z'\] that are not inputs"):
        s.run(popart.PyStepIO({x: np.zeros((2, 2, 3), np.float32), "z": np.zeros(1)}, out))


def test_tensor_id_that_does_not_exist():
    with pytest.raises(popart.popart_exception, match="Tensor 'not_a_tensor' .*is not in the model"):
        _session(anchor="not_a_tensor")
    s, x, y = _session()
    with pytest.raises(popart.popart_exception, match="No tensor 'nope'"):
        s.getInfo("nope")
    b = popart.Builder()
    with pytest.raises(popart.popart_exception, match="tensor 'nope' is not in the model"):
        b.getTensorShape("nope")


def test_training_errors():
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [2, 3]), "x")
    w = b.addInitializedInputTensor(np.ones((3,), np.float32), "w")
    y = b.aiOnnx.mul([x, w])
    opt = popart.ConstSGD(0.1)
    with pytest.raises(popart.popart_exception, match="must be a scalar"):
        popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, [y]), y, opt, device())
    loss = b.aiGraphcore.identityloss([y])
    with pytest.raises(popart.popart_exception, match="'Gradient___nope': 'nope' is not a weight, an input or"):
        popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, ["Gradient___nope"]), loss, opt, device())


def test_bad_files_and_devices(tmp_path):
    with pytest.raises(popart.popart_exception, match="does not exist"):
        popart.InferenceSession(str(tmp_path / "missing.onnx"), popart.DataFlow(1, ["y"]), device())
    with pytest.raises(popart.popart_exception, match="not a serialized ONNX"):
        popart.InferenceSession(b"garbage", popart.DataFlow(1, ["y"]), device())
    s, x, y = _session()
    opts = popart.SessionOptions()
    opts.enableReplicatedGraphs = True
    opts.replicatedGraphCount = 2
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [2]), "x")
    y = b.aiOnnx.relu([x])
    s = popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, [y]), device(num_ipus=1), userOptions=opts)
    with pytest.raises(popart.popart_exception, match=r"needs 2 IPU\(s\) \(2 replica"):
        s.prepareDevice()


def test_session_options_unknown_name_and_warn_once():
    opts = popart.SessionOptions()
    with pytest.raises(AttributeError, match="no attribute 'enableFoo'"):
        opts.enableFoo = True
    opts.enableOutlining = False
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [2]), "x")
    y = b.aiOnnx.relu([x])
    from popart import options as options_module
    options_module._warned.discard("enableOutlining")
    with pytest.warns(UserWarning, match="enableOutlining is recorded but has no effect"):
        popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, [y]), device(), userOptions=opts)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, [y]), device(), userOptions=opts)
    # fields the session does not read warn too, saying what happens here when that is not only speed
    opts = popart.SessionOptions()
    opts.enableStochasticRounding = True
    opts.partialsTypeMatMuls = "half"
    for name in ("enableStochasticRounding", "partialsTypeMatMuls"):
        options_module._warned.discard(name)
    with pytest.warns(UserWarning) as record:
        popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, [y]), device(), userOptions=opts)
    said = " ".join(str(w.message) for w in record)
    assert "enableStochasticRounding is recorded but has no effect in the simulator (float16 results are " \
           "rounded to nearest" in said and "partialsTypeMatMuls is recorded but has no effect" in said


def test_out_of_memory_is_out_of_memory_exception():
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [64, 1024]), "x")
    w = b.addInitializedInputTensor(np.ones((1024, 1024), np.float32), "w")
    y = b.aiOnnx.matmul([x, w])
    s = popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, [y]),
                                popart.DeviceManager().createIpuModelDevice({"tilesPerIPU": 4}))
    with pytest.raises(popart.OutOfMemoryException) as info:
        s.prepareDevice()
    assert "tile" in info.value.getSummaryReport().lower()


def test_int64_inputs_are_narrowed_only_when_they_fit():
    b = popart.Builder()
    i = b.addInputTensor(popart.TensorInfo("INT64", [3]), "i")
    y = b.aiOnnx.add([i, i])
    s = popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, [y]), device())
    s.prepareDevice()
    out = s.initAnchorArrays()
    s.run(popart.PyStepIO({i: np.array([1, -2, 3], np.int64)}, out))
    np.testing.assert_array_equal(out[y], [2, -4, 6])
    with pytest.raises(popart.popart_exception, match="outside the int32 range"):
        s.run(popart.PyStepIO({i: np.array([1, 2 ** 40, 3], np.int64)}, out))


def test_an_unsupported_optional_output_is_an_error_only_when_used():
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [1, 1, 4, 4]), "x")
    y, idx = b.aiOnnx.maxpool([x], 2, [2, 2])
    s = popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, [y]), device())  # fine: idx unused
    s.prepareDevice()
    z = b.aiOnnx.cast([idx], "FLOAT")
    with pytest.raises(popart.popart_exception, match=f"'{idx}', an output of MaxPool node .* is not supported"):
        popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, [z]), device())


def test_missing_output_array_and_bad_callbacks_are_named():
    s, x, y = _session()
    s.prepareDevice()
    data = np.zeros((2, 2, 3), np.float32)
    with pytest.raises(popart.popart_exception, match=r"no output array for anchor\(s\) \['Relu:0'\]"):
        s.run(popart.PyStepIO({x: data}, {}))

    def callbacks(inp, out):
        return popart.PyStepIOCallback(lambda tid, prefetch: inp, lambda tid: None, lambda tid: out, lambda tid: None)
    with pytest.raises(popart.popart_exception, match=r"input_callback\('x'\) returned shape \[3, 3\] for batch 0; "
                                                      r"the input is \[2, 3\]"):
        s.run(callbacks(np.zeros((3, 3), np.float32), np.zeros((2, 3), np.float32)))
    with pytest.raises(popart.popart_exception, match=r"Input 'x' is int32"):
        s.run(callbacks(np.zeros((2, 3), np.int32), np.zeros((2, 3), np.float32)))
    with pytest.raises(popart.popart_exception, match=r"output_callback\('Relu:0'\) returned \[5\] for batch 0; "
                                                      r"the anchor is \[2, 3\]"):
        s.run(callbacks(np.zeros((2, 3), np.float32), np.zeros(5, np.float32)))


def test_an_initializer_where_a_constant_is_needed_gives_its_value():
    """Pad's constant_value from a floating-point initializer: PopART reads the initializer's value
    when it builds the op, and so does the simulator (it is not a weight of the session)."""
    from onnx import helper as oh
    c = onnx.numpy_helper.from_array
    g = oh.make_graph([oh.make_node("Pad", ["x", "pads", "padv"], ["y"])], "g",
                      [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
                      [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3])],
                      [c(np.array([1, 0], np.int64), "pads"), c(np.array(1.5, np.float32), "padv")])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 11)])
    s = popart.InferenceSession(m.SerializeToString(), popart.DataFlow(1, ["y"]), device())
    s.prepareDevice()
    out = s.initAnchorArrays()
    s.run(popart.PyStepIO({"x": np.array([3, 4], np.float32)}, out))
    np.testing.assert_array_equal(out["y"], [1.5, 3, 4])
