"""ONNX control flow through PopART's frontend (popart/_translate/control.py): If with a condition
known on the host or computed on the device, Loop with a host trip count, Scan in either direction
over any axes, against onnx.reference, with gradients through a TrainingSession."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper as oh

import popart

from popart_helpers import check_against_reference, device, run_inference

F = onnx.TensorProto.FLOAT


def _if_model(cond_nodes, cond_inputs, inits=()):
    """y = If(cond, then: x * w + 1 (a branch initializer), else: Relu(x) - w)."""
    one = onnx.numpy_helper.from_array(np.ones((2, 3), np.float32), "one")
    then = oh.make_graph([oh.make_node("Mul", ["x", "w"], ["t0"]), oh.make_node("Add", ["t0", "one"], ["t1"])],
                         "then", [], [oh.make_tensor_value_info("t1", F, [2, 3])], [one])
    other = oh.make_graph([oh.make_node("Relu", ["x"], ["e0"]), oh.make_node("Sub", ["e0", "w"], ["e1"])],
                          "else", [], [oh.make_tensor_value_info("e1", F, [2, 3])])
    nodes = cond_nodes + [oh.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other)]
    ins = [oh.make_tensor_value_info("x", F, [2, 3])] + cond_inputs
    wv = onnx.numpy_helper.from_array(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3), "w")
    g = oh.make_graph(nodes, "g", ins, [oh.make_tensor_value_info("y", F, [2, 3])], [wv, *inits])
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 11)]).SerializeToString()


@pytest.mark.parametrize("flag", [True, False])
def test_if_with_a_host_condition_translates_its_branch(flag, rng):
    """cond from the shape of x (what exporters write): known when the program is built."""
    dim = 2 if flag else 5
    nodes = [oh.make_node("Shape", ["x"], ["s"]), oh.make_node("Gather", ["s", "i0"], ["d0"], axis=0),
             oh.make_node("Equal", ["d0", "two"], ["cond"])]
    inits = [onnx.numpy_helper.from_array(np.array(0, np.int64), "i0"),
             onnx.numpy_helper.from_array(np.array(dim, np.int64), "two")]
    proto = _if_model(nodes, [], inits)
    s = popart.InferenceSession(proto, popart.DataFlow(1, ["y"]), device())
    assert not any(op.type == "conditional" for op in s._program.ir.main_graph.ops)
    check_against_reference(proto, {"x": rng.normal(size=(2, 3)).astype(np.float32)}, ["y"])


def test_if_with_a_device_condition_is_a_conditional(rng):
    proto = _if_model([oh.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                       oh.make_node("Greater", ["s", "zero"], ["cond"])], [],
                      [onnx.numpy_helper.from_array(np.array(0.0, np.float32), "zero")])
    s = popart.InferenceSession(proto, popart.DataFlow(1, ["y"]), device())
    assert any(op.type == "conditional" for op in s._program.ir.main_graph.ops)
    for sign in (1.0, -1.0):  # each branch
        x = (sign * np.abs(rng.normal(size=(2, 3))) + sign * 0.1).astype(np.float32)
        check_against_reference(proto, {"x": x}, ["y"])


def test_if_gradient_follows_the_branch_taken(rng):
    """Training through a device-side If: d/dw of sum(If(sum(x) > 0, x * w + 1, relu(x) - w))."""
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [2, 3]), "x")
    w_val = rng.normal(size=(2, 3)).astype(np.float32)
    w = b.addInitializedInputTensor(w_val, "w")
    proto = onnx.load_from_string(_if_model([oh.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                                             oh.make_node("Greater", ["s", "zero"], ["cond"])], [],
                                            [onnx.numpy_helper.from_array(np.array(0.0, np.float32), "zero")]))
    m = onnx.load_from_string(b.getModelProto())
    del m.graph.node[:]
    m.graph.node.extend(proto.graph.node)
    m.graph.initializer.extend(t for t in proto.graph.initializer if t.name != "w")
    m.graph.node.extend([oh.make_node("ReduceSum", ["y"], ["ys"], keepdims=0),
                         oh.make_node("IdentityLoss", ["ys"], ["loss"], domain="ai.graphcore", reduction=2)])
    del m.graph.output[:]
    m.graph.output.append(oh.make_tensor_value_info("loss", F, []))
    grad = popart.reservedGradientPrefix() + w
    s = popart.TrainingSession(m.SerializeToString(), popart.DataFlow(1, [grad]), "loss", popart.ConstSGD(0.0),
                               device())
    s.prepareDevice()
    s.weightsFromHost()
    for sign in (1.0, -1.0):
        x_val = (sign * np.abs(rng.normal(size=(2, 3))) + sign * 0.1).astype(np.float32)
        out = s.initAnchorArrays()
        s.run(popart.PyStepIO({x: x_val}, out))
        np.testing.assert_allclose(out[grad], x_val if sign > 0 else -np.ones_like(x_val), rtol=1e-6)


def _loop_model(trips, body_cond="identity", n=3):
    """y_final, scan = Loop(M=trips, cond=true, acc0): acc = acc * w + iteration (a carried value
    reading an outer weight and the iteration number), scan output acc * 2 each iteration."""
    i64 = onnx.TensorProto.INT64
    nodes = [oh.make_node("Cast", ["it"], ["itf"], to=onnx.TensorProto.FLOAT),
             oh.make_node("Mul", ["acc_in", "w"], ["m"]), oh.make_node("Add", ["m", "itf"], ["acc_out"]),
             oh.make_node("Mul", ["acc_out", "two"], ["scan"])]
    if body_cond == "identity":
        nodes.append(oh.make_node("Identity", ["c_in"], ["c_out"]))
    else:  # computed on the device: a while loop
        nodes += [oh.make_node("ReduceSum", ["acc_out"], ["tot"], keepdims=0),
                  oh.make_node("Less", ["tot", "limit"], ["c_out"])]
    body = oh.make_graph(nodes, "body", [oh.make_tensor_value_info("it", i64, []),
                                         oh.make_tensor_value_info("c_in", onnx.TensorProto.BOOL, []),
                                         oh.make_tensor_value_info("acc_in", F, [n])],
                         [oh.make_tensor_value_info("c_out", onnx.TensorProto.BOOL, []),
                          oh.make_tensor_value_info("acc_out", F, [n]), oh.make_tensor_value_info("scan", F, [n])],
                         [onnx.numpy_helper.from_array(np.array(2.0, np.float32), "two")])
    inits = [onnx.numpy_helper.from_array(np.array(trips, np.int64), "M"),
             onnx.numpy_helper.from_array(np.array(True), "cond"),
             onnx.numpy_helper.from_array(np.array(100.0, np.float32), "limit"),
             onnx.numpy_helper.from_array(np.linspace(0.5, 1.5, n).astype(np.float32), "w")]
    node = oh.make_node("Loop", ["M", "cond", "x"], ["acc", "scans"], name="loop", body=body)
    g = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", F, [n])],
                      [oh.make_tensor_value_info("acc", F, [n]), oh.make_tensor_value_info("scans", F, [trips, n])],
                      inits)
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 11)]).SerializeToString()


@pytest.mark.parametrize("trips", [1, 5])
def test_loop_with_a_trip_count_matches_reference(trips, rng):
    proto = _loop_model(trips)
    s = popart.InferenceSession(proto, popart.DataFlow(1, ["acc"]), device())
    assert any(op.type == "repeat" for op in s._program.ir.main_graph.ops)
    check_against_reference(proto, {"x": rng.normal(size=3).astype(np.float32)}, ["acc", "scans"])


def test_a_while_loop_is_refused():
    with pytest.raises(popart.popart_exception, match="computes its condition on the device"):
        popart.InferenceSession(_loop_model(3, body_cond="device"), popart.DataFlow(1, ["acc"]), device())


def test_loop_gradient(rng):
    """Training through the repeat: d/dx of sum(acc) after 3 iterations of acc = acc * w + i is w^3."""
    m = onnx.load_from_string(_loop_model(3))
    m.graph.node.extend([oh.make_node("ReduceSum", ["acc"], ["tot"], keepdims=0),
                         oh.make_node("IdentityLoss", ["tot"], ["loss"], domain="ai.graphcore", reduction=2)])
    m.opset_import.append(oh.make_opsetid("ai.graphcore", 1))
    x_val = rng.normal(size=3).astype(np.float32)
    xi = onnx.numpy_helper.from_array(x_val, "x")
    del m.graph.input[:]
    m.graph.initializer.append(xi)
    del m.graph.output[:]
    m.graph.output.append(oh.make_tensor_value_info("loss", F, []))
    grad = popart.reservedGradientPrefix() + "x"
    s = popart.TrainingSession(m.SerializeToString(), popart.DataFlow(1, [grad]), "loss", popart.ConstSGD(0.0),
                               device())
    s.prepareDevice()
    s.weightsFromHost()
    out = s.initAnchorArrays()
    s.run(popart.PyStepIO({}, out))
    np.testing.assert_allclose(out[grad], np.linspace(0.5, 1.5, 3) ** 3, rtol=1e-6)


@pytest.mark.parametrize("in_axis,in_dir,out_axis,out_dir", [(0, 0, 0, 0), (0, 1, 0, 0), (1, 0, 1, 1), (1, 1, 0, 1)])
def test_scan_matches_reference(in_axis, in_dir, out_axis, out_dir, rng):
    """A running sum and a scaled copy of it: state s (3,), scan input x (5 steps along in_axis)."""
    steps, n = 5, 3
    nodes = [oh.make_node("Add", ["s_in", "x_t"], ["s_out"]), oh.make_node("Mul", ["s_out", "w"], ["y_t"])]
    body = oh.make_graph(nodes, "body", [oh.make_tensor_value_info("s_in", F, [n]),
                                         oh.make_tensor_value_info("x_t", F, [n])],
                         [oh.make_tensor_value_info("s_out", F, [n]), oh.make_tensor_value_info("y_t", F, [n])])
    x_shape = [steps, n] if in_axis == 0 else [n, steps]
    y_shape = [steps, n] if out_axis == 0 else [n, steps]
    node = oh.make_node("Scan", ["s0", "xs"], ["s", "ys"], body=body, num_scan_inputs=1,
                        scan_input_axes=[in_axis], scan_input_directions=[in_dir], scan_output_axes=[out_axis],
                        scan_output_directions=[out_dir])
    ins = [oh.make_tensor_value_info("s0", F, [n]), oh.make_tensor_value_info("xs", F, x_shape)]
    w = np.array([0.5, -1.0, 2.0], np.float32)
    g = oh.make_graph([node], "g", ins, [oh.make_tensor_value_info("s", F, [n]),
                                         oh.make_tensor_value_info("ys", F, y_shape)],
                      [onnx.numpy_helper.from_array(w, "w")])
    proto = oh.make_model(g, opset_imports=[oh.make_opsetid("", 11)]).SerializeToString()
    s0, xs = rng.normal(size=n).astype(np.float32), rng.normal(size=x_shape).astype(np.float32)
    got = run_inference(proto, {"s0": s0, "xs": xs}, ["s", "ys"])
    # ONNX's definition, in NumPy (onnx.reference runs only axis 0, forward)
    state, ys = s0.astype(np.float64), np.zeros([steps, n])
    xt = np.moveaxis(xs, in_axis, 0)
    for i in range(steps):
        state = state + xt[steps - 1 - i if in_dir else i]
        ys[steps - 1 - i if out_dir else i] = state * w
    np.testing.assert_allclose(got["s"], state, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got["ys"], np.moveaxis(ys, 0, out_axis), rtol=1e-6, atol=1e-6)
