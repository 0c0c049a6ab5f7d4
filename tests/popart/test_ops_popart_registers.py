"""The ONNX ops PopART registers that the frontend translates since the coverage check
(test_popart_registry.py): the trigonometric and hyperbolic family, Shrink, ThresholdedRelu, LRN,
Scatter / ScatterElements, RoiAlign, GRU and RNN, the random generators, Pad's and CumSum's
attributes and integer Div, against NumPy / onnx.reference / PyTorch over awkward shapes, with
their gradients through a TrainingSession. If, Loop and Scan are in test_control_flow_ops.py."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper as oh

import popart

from popart_helpers import check_against_reference, device, reference, run_inference

F, H, I64 = onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.INT64
SHAPES = [(1,), (7,), (3, 5), (2, 1, 13)]

# op -> (input range, NumPy value, derivative)
FAMILY = {
    "Asin": ((-0.95, 0.95), np.arcsin, lambda x: 1 / np.sqrt(1 - x * x)),
    "Acos": ((-0.95, 0.95), np.arccos, lambda x: -1 / np.sqrt(1 - x * x)),
    "Atan": ((-6.0, 6.0), np.arctan, lambda x: 1 / (1 + x * x)),
    "Tan": ((-1.3, 1.3), np.tan, lambda x: 1 / np.cos(x) ** 2),
    "Sinh": ((-3.0, 3.0), np.sinh, np.cosh),
    "Cosh": ((-3.0, 3.0), np.cosh, np.sinh),
    "Asinh": ((-3.0, 3.0), np.arcsinh, lambda x: 1 / np.sqrt(x * x + 1)),
    "Acosh": ((1.1, 6.0), np.arccosh, lambda x: 1 / np.sqrt(x * x - 1)),
    "Atanh": ((-0.9, 0.9), np.arctanh, lambda x: 1 / (1 - x * x)),
    "Shrink": ((-2.0, 2.0), lambda x: np.where(x < -0.7, x + 0.2, np.where(x > 0.7, x - 0.2, 0.0)),
               lambda x: (np.abs(x) > 0.7).astype(np.float64)),
    "ThresholdedRelu": ((-2.0, 2.0), lambda x: np.where(x > 0.3, x, 0.0), lambda x: (x > 0.3).astype(np.float64)),
}
ATTRS = {"Shrink": {"lambd": 0.7, "bias": 0.2}, "ThresholdedRelu": {"alpha": 0.3}}


def _unary(op, shape, elem=F, opset=11):
    node = oh.make_node(op, ["x"], ["y"], **ATTRS.get(op, {}))
    g = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", elem, shape)],
                      [oh.make_tensor_value_info("y", elem, shape)])
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)]).SerializeToString()


def _train_step(b, y, weight, anchors, feeds=None):
    """One step of a TrainingSession on the loss sum(y * weight), at learning rate 0 so the weights
    stay as given: the anchors' values (gradients named with popart.reservedGradientPrefix())."""
    loss = b.aiGraphcore.identityloss([b.aiOnnx.reducesum([b.aiOnnx.mul([y, weight])], keepdims=0)])
    s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, list(anchors)), loss, popart.ConstSGD(0.0),
                               device())
    s.prepareDevice()
    s.weightsFromHost()
    out = s.initAnchorArrays()
    s.run(popart.PyStepIO(feeds or {}, out))
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("op", sorted(FAMILY))
def test_unary_family_matches_numpy(op, dtype, rng):
    (lo, hi), fn, _ = FAMILY[op]
    shape = SHAPES[sum(map(ord, op)) % len(SHAPES)]
    x = rng.uniform(lo, hi, shape).astype(dtype)
    got = run_inference(_unary(op, list(shape), F if dtype == np.float32 else H), {"x": x}, "y")["y"]
    want = fn(x.astype(np.float64))
    tol = dict(rtol=2e-5, atol=2e-6) if dtype == np.float32 else dict(rtol=4e-3, atol=4e-3)
    if op in ("Asinh", "Acosh", "Atanh") and dtype == np.float32:
        tol = dict(rtol=1e-4, atol=2e-5)  # PopART's log forms cancel near 0 / below -1
    np.testing.assert_allclose(got.astype(np.float64), want, **tol)


@pytest.mark.parametrize("op", sorted(FAMILY))
def test_unary_family_gradient(op, rng):
    """The gradient of sum(op(x)) with respect to the input x, through a TrainingSession."""
    (lo, hi), _, dfn = FAMILY[op]
    x_val = rng.uniform(lo, hi, (3, 7)).astype(np.float32)
    if op in ("Shrink", "ThresholdedRelu"):  # away from the kinks
        x_val = np.where(np.abs(np.abs(x_val) - (0.7 if op == "Shrink" else 0.3)) < 0.05, 1.5, x_val)
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [3, 7]), "x")
    w = b.addInitializedInputTensor(np.ones((3, 7), np.float32), "w")
    y = getattr(b.aiOnnxOpset11, op.lower())([b.aiOnnx.mul([x, w])], **ATTRS.get(op, {}))
    loss = b.aiGraphcore.identityloss([b.aiOnnx.reducesum([y], keepdims=0)])
    grad = popart.reservedGradientPrefix() + w
    s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, [grad]), loss, popart.ConstSGD(0.0), device())
    s.prepareDevice()
    s.weightsFromHost()
    out = s.initAnchorArrays()
    s.run(popart.PyStepIO({x: x_val}, out))
    np.testing.assert_allclose(out[grad], x_val * dfn(x_val.astype(np.float64)), rtol=1e-4, atol=1e-5)


def _lrn_numpy(x, size, alpha, beta, bias):
    """ONNX LRN: floor((size - 1) / 2) channels before, ceil((size - 1) / 2) after, cut at the edges."""
    x = x.astype(np.float64)
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    c = x.shape[1]
    sq = np.zeros_like(x)
    for ch in range(c):
        sq[:, ch] = (x[:, max(0, ch - before):min(c, ch + after + 1)] ** 2).sum(axis=1)
    return x / (bias + alpha / size * sq) ** beta


@pytest.mark.parametrize("shape,size", [((1, 1, 1, 1), 1), ((2, 7, 3, 5), 5), ((1, 5, 2, 3), 2), ((3, 3, 1, 7), 4),
                                        ((1, 13, 2), 3)])
def test_lrn_matches_numpy(shape, size, rng):
    alpha, beta, bias = 0.02, 0.75, 2.0
    x = rng.normal(0, 2, shape).astype(np.float32)
    node = oh.make_node("LRN", ["x"], ["y"], size=size, alpha=alpha, beta=beta, bias=bias)
    g = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", F, shape)],
                      [oh.make_tensor_value_info("y", F, shape)])
    proto = oh.make_model(g, opset_imports=[oh.make_opsetid("", 11)]).SerializeToString()
    got = run_inference(proto, {"x": x}, "y")["y"]
    np.testing.assert_allclose(got, _lrn_numpy(x, size, alpha, beta, bias), rtol=2e-5, atol=1e-6)


def test_lrn_gradient_matches_torch(rng):
    """AlexNet's LRN (size 5): the input gradient of sum(LRN(x) * r) against PyTorch's autograd
    (whose window is ONNX's for an odd size)."""
    torch = pytest.importorskip("torch")
    shape, r_val = (2, 7, 3, 3), rng.normal(size=(2, 7, 3, 3)).astype(np.float32)
    x_val = rng.normal(0, 2, shape).astype(np.float32)
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", list(shape)), "x")
    w = b.addInitializedInputTensor(np.ones(shape, np.float32), "w")
    r = b.aiOnnx.constant(r_val)
    y = b.aiOnnx.lrn([b.aiOnnx.mul([x, w])], size=5, alpha=1e-2, beta=0.75, bias=1.5)
    grad = popart.reservedGradientPrefix() + w
    out = _train_step(b, y, r, [grad], {x: x_val})
    wt = torch.ones(shape, dtype=torch.float64, requires_grad=True)
    yt = torch.nn.functional.local_response_norm(torch.tensor(x_val, dtype=torch.float64) * wt, 5, 1e-2, 0.75, 1.5)
    (yt * torch.tensor(r_val, dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(out[grad], wt.grad.numpy(), rtol=1e-4, atol=1e-5)


def _unique_indices(rng, shape, axis, dim):
    """Indices of `shape` along `axis` into an axis of `dim`, no two equal along the axis (ONNX
    leaves duplicates undefined), some of them negative."""
    idx = np.zeros(shape, np.int64)
    it = np.ndindex(*[s for a, s in enumerate(shape) if a != axis])
    for pos in it:
        sl = list(pos)
        sl.insert(axis, slice(None))
        idx[tuple(sl)] = rng.permutation(dim)[:shape[axis]]
    return np.where(rng.random(shape) < 0.3, idx - dim, idx)


def _scatter_numpy(data, idx, upd, axis):
    out = data.copy()
    dim = data.shape[axis]
    for pos in np.ndindex(*idx.shape):
        tgt = list(pos)
        tgt[axis] = idx[pos] % dim
        out[tuple(tgt)] = upd[pos]
    return out


@pytest.mark.parametrize("op,opset", [("Scatter", 9), ("Scatter", 10), ("ScatterElements", 11)])
@pytest.mark.parametrize("data_shape,idx_shape,axis", [((1,), (1,), 0), ((7, 3), (2, 3), 0), ((5, 11), (5, 4), 1),
                                                       ((2, 3, 13), (2, 2, 5), -1)])
@pytest.mark.parametrize("device_indices", [False, True])
def test_scatter_matches_numpy(op, opset, data_shape, idx_shape, axis, device_indices, rng):
    data = rng.normal(size=data_shape).astype(np.float32)
    upd = rng.normal(size=idx_shape).astype(np.float32)
    idx = _unique_indices(rng, idx_shape, axis % len(data_shape), data_shape[axis])
    inputs = [oh.make_tensor_value_info("data", F, data_shape), oh.make_tensor_value_info("upd", F, idx_shape)]
    inits = []
    if device_indices:
        inputs.append(oh.make_tensor_value_info("idx", I64, idx_shape))
        idx = idx % data_shape[axis]  # the device's gather / scatter takes indices in range
    else:
        inits.append(onnx.numpy_helper.from_array(idx, "idx"))
    node = oh.make_node(op, ["data", "idx", "upd"], ["y"], axis=axis)
    g = oh.make_graph([node], "g", inputs, [oh.make_tensor_value_info("y", F, data_shape)], inits)
    proto = oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)]).SerializeToString()
    feeds = {"data": data, "upd": upd, **({"idx": idx.astype(np.int32)} if device_indices else {})}
    got = run_inference(proto, feeds, "y")["y"]
    np.testing.assert_array_equal(got, _scatter_numpy(data, idx, upd, axis % len(data_shape)))


def test_scatter_gradients(rng):
    """PopART's ScatterDataGrad (the gradient with the scattered positions zeroed) and
    ScatterUpdateGrad (the gradient gathered at the indices)."""
    data_val = rng.normal(size=(5, 7)).astype(np.float32)
    upd_val = rng.normal(size=(5, 3)).astype(np.float32)
    r_val = rng.normal(size=(5, 7)).astype(np.float32)
    idx = _unique_indices(rng, (5, 3), 1, 7)
    b = popart.Builder()
    d = b.addInitializedInputTensor(data_val, "d")
    u = b.addInitializedInputTensor(upd_val, "u")
    y = b.aiOnnxOpset11.scatterelements([d, b.aiOnnx.constant(idx), u], axis=1)
    gd, gu = (popart.reservedGradientPrefix() + t for t in (d, u))
    out = _train_step(b, y, b.aiOnnx.constant(r_val), [gd, gu])
    want_d = r_val.copy()
    np.put_along_axis(want_d, idx % 7, 0.0, axis=1)
    np.testing.assert_allclose(out[gd], want_d, rtol=1e-6)
    np.testing.assert_allclose(out[gu], np.take_along_axis(r_val, idx % 7, axis=1), rtol=1e-6)


@pytest.mark.parametrize("out_hw,ratio,scale", [((1, 1), 0, 1.0), ((2, 3), 2, 0.5), ((3, 2), 0, 0.25)])
def test_roi_align_matches_onnx_reference(out_hw, ratio, scale, rng):
    n, c, h, w, k = 2, 3, 11, 7, 5
    x = rng.normal(size=(n, c, h, w)).astype(np.float32)
    lo = rng.uniform(0, 4 / scale, (k, 2))
    rois = np.concatenate([lo, lo + rng.uniform(1, 5 / scale, (k, 2))], axis=1).astype(np.float32)
    batch = rng.integers(0, n, k).astype(np.int64)
    node = oh.make_node("RoiAlign", ["x", "rois", "batch"], ["y"], output_height=out_hw[0], output_width=out_hw[1],
                        sampling_ratio=ratio, spatial_scale=scale)
    g = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", F, x.shape),
                                    oh.make_tensor_value_info("rois", F, rois.shape),
                                    oh.make_tensor_value_info("batch", I64, batch.shape)],
                      [oh.make_tensor_value_info("y", F, (k, c) + out_hw)])
    proto = oh.make_model(g, opset_imports=[oh.make_opsetid("", 10)]).SerializeToString()
    got = run_inference(proto, {"x": x, "rois": rois, "batch": batch.astype(np.int32)}, "y")["y"]
    # opset 10's RoiAlign is opset 16's with coordinate_transformation_mode "output_half_pixel" (no
    # half-pixel offset); onnx.reference applies 16's default "half_pixel" to either, so ask for it
    g.node[0].attribute.append(oh.make_attribute("coordinate_transformation_mode", "output_half_pixel"))
    ref = oh.make_model(g, opset_imports=[oh.make_opsetid("", 16)])
    want = reference(ref, {"x": x, "rois": rois, "batch": batch}, ["y"])[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_roi_align_refuses_the_half_pixel_mode():
    node = oh.make_node("RoiAlign", ["x", "rois", "batch"], ["y"])
    g = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", F, (1, 1, 4, 4)),
                                    oh.make_tensor_value_info("rois", F, (1, 4)),
                                    oh.make_tensor_value_info("batch", I64, (1,))],
                      [oh.make_tensor_value_info("y", F, (1, 1, 1, 1))])
    proto = oh.make_model(g, opset_imports=[oh.make_opsetid("", 16)]).SerializeToString()
    with pytest.raises(popart.popart_exception, match="coordinate_transformation_mode 'half_pixel'"):
        popart.InferenceSession(proto, popart.DataFlow(1, ["y"]), device())


def _random_model(op, **attrs):
    ins, nodes = [oh.make_tensor_value_info("x", F, [4, 3])], []
    if op.endswith("Like"):
        nodes.append(oh.make_node(op, ["x"], ["r"], **attrs))
    else:
        nodes.append(oh.make_node(op, [], ["r"], shape=[4, 3], **attrs))
    nodes.append(oh.make_node("Add", ["x", "r"], ["y"]))
    g = oh.make_graph(nodes, "g", ins, [oh.make_tensor_value_info("y", F, [4, 3])])
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 11)]).SerializeToString()


@pytest.mark.parametrize("op,attrs", [("RandomNormal", {"mean": 1.5, "scale": 0.5}), ("RandomNormalLike", {}),
                                      ("RandomUniform", {"low": -2.0, "high": 3.0}),
                                      ("RandomUniformLike", {"high": 0.25, "seed": 7.0})])
def test_random_generators(op, attrs):
    """The samples of 200 micro-batches have the distribution's mean and spread, every micro-batch
    draws new values, and the session's seed (setRandomSeed) makes a run repeat."""
    bps = 200
    df = popart.DataFlow(bps, {"y": popart.AnchorReturnType("All")})
    s = popart.InferenceSession(_random_model(op, **attrs), df, device())
    s.prepareDevice()
    zeros = {"x": np.zeros((bps, 4, 3), np.float32)}

    def run(seed):
        s.setRandomSeed(seed)
        out = s.initAnchorArrays()
        s.run(popart.PyStepIO(zeros, out))
        return out["y"]
    y = run(11)
    np.testing.assert_array_equal(y, run(11))
    assert not np.array_equal(y, run(12))
    assert not np.array_equal(y[0], y[1])
    if op.startswith("RandomNormal"):
        mean, std = attrs.get("mean", 0.0), attrs.get("scale", 1.0)
        assert abs(y.mean() - mean) < 0.05 * std * 4 and abs(y.std() - std) < 0.05 * std
    else:
        lo, hi = attrs.get("low", 0.0), attrs.get("high", 1.0)
        assert y.min() >= lo and y.max() < hi
        assert abs(y.mean() - (lo + hi) / 2) < 0.02 * (hi - lo) * 4


def _recurrent_model(op, seq, batch, inp, hid, direction, rng, **attrs):
    g = {"GRU": 3, "RNN": 1}[op]
    nd = 2 if direction == "bidirectional" else 1
    W = rng.normal(0, 0.5, (nd, g * hid, inp)).astype(np.float32)
    R = rng.normal(0, 0.5, (nd, g * hid, hid)).astype(np.float32)
    B = rng.normal(0, 0.3, (nd, 2 * g * hid)).astype(np.float32)
    H0 = rng.normal(0, 0.5, (nd, batch, hid)).astype(np.float32)
    inits = [onnx.numpy_helper.from_array(a, n) for a, n in ((W, "W"), (R, "R"), (B, "B"), (H0, "H0"))]
    node = oh.make_node(op, ["x", "W", "R", "B", "", "H0"], ["y", "yh"], hidden_size=hid, direction=direction,
                        **attrs)
    graph = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", F, [seq, batch, inp])],
                          [oh.make_tensor_value_info("y", F, [seq, nd, batch, hid]),
                           oh.make_tensor_value_info("yh", F, [nd, batch, hid])], inits)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 11)]).SerializeToString()


@pytest.mark.parametrize("op,attrs", [("GRU", {}), ("GRU", {"linear_before_reset": 1}), ("RNN", {})])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_gru_and_rnn_match_reference(op, attrs, direction, rng):
    seq, batch, inp, hid = 5, 3, 2, 7
    proto = _recurrent_model(op, seq, batch, inp, hid, direction, rng, **attrs)
    check_against_reference(proto, {"x": rng.normal(size=(seq, batch, inp)).astype(np.float32)}, ["y", "yh"],
                            rtol=1e-4, atol=1e-5)


def test_rnn_relu_matches_numpy(rng):
    seq, batch, inp, hid = 4, 1, 3, 5
    proto = _recurrent_model("RNN", seq, batch, inp, hid, "reverse", rng, activations=["Relu"])
    m = onnx.load_from_string(proto)
    W, R, B, H0 = (onnx.numpy_helper.to_array(t).astype(np.float64) for t in m.graph.initializer)
    x = rng.normal(size=(seq, batch, inp)).astype(np.float32)
    got = run_inference(proto, {"x": x}, ["y", "yh"])
    h, want = H0[0], np.zeros((seq, 1, batch, hid))
    for t in reversed(range(seq)):
        h = np.maximum(x[t] @ W[0].T + h @ R[0].T + B[0, :hid] + B[0, hid:], 0)
        want[t, 0] = h
    np.testing.assert_allclose(got["y"], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["yh"][0], h, rtol=1e-5, atol=1e-5)


def test_gru_gradient_matches_torch(rng):
    """PyTorch's GRU (linear_before_reset, gates r, z, n in its weights): the loss of a GRU layer
    trained through PopART's TrainingSession, its input-weight gradient against PyTorch's autograd."""
    torch = pytest.importorskip("torch")
    seq, batch, inp, hid = 4, 2, 3, 5
    net = torch.nn.GRU(inp, hid).double()
    x_val = rng.normal(size=(seq, batch, inp))
    wih, whh = net.weight_ih_l0.detach().numpy(), net.weight_hh_l0.detach().numpy()
    bih, bhh = net.bias_ih_l0.detach().numpy(), net.bias_hh_l0.detach().numpy()

    def zrh(a):  # PyTorch's (r, z, n) blocks -> ONNX's (z, r, h)
        r_, z_, n_ = np.split(a, 3, axis=0)
        return np.concatenate([z_, r_, n_], axis=0)
    got = _sum_of_squares_gradient("gru", x_val, zrh(wih), zrh(whh), np.concatenate([zrh(bih), zrh(bhh)]), hid,
                                   "W", linear_before_reset=1)
    yt, _ = net(torch.tensor(x_val))
    (yt * yt).sum().backward()
    np.testing.assert_allclose(got, zrh(net.weight_ih_l0.grad.numpy()), rtol=2e-4, atol=2e-5)


def _sum_of_squares_gradient(op, x_val, W, R, B, hid, wrt, **attrs):
    """The gradient of sum(y * y) over a one-layer recurrent op's output y, with respect to `wrt`
    (W, R or B), from one step of a PopART TrainingSession."""
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", list(x_val.shape)), "x")
    ids = {name: b.addInitializedInputTensor(np.asarray(v, np.float32)[None], name)
           for name, v in (("W", W), ("R", R), ("B", B))}
    y = getattr(b.aiOnnxOpset11, op)([x, ids["W"], ids["R"], ids["B"]], 2, hidden_size=hid, **attrs)[0]
    grad = popart.reservedGradientPrefix() + ids[wrt]
    out = _train_step(b, y, y, [grad], {x: x_val.astype(np.float32)})
    return out[grad][0]


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("shape,pads", [((1, 5), [0, 2, 0, 3]), ((3, 7), [2, 0, 1, 4]),
                                        ((2, 1, 13), [1, 0, 3, 0, 0, 2]), ((4, 6), [-1, 2, 0, -3])])
@pytest.mark.parametrize("opset", [10, 11])
def test_pad_modes_match_numpy(mode, shape, pads, opset, rng):
    r = len(shape)
    if mode == "reflect" and any(p >= d for p, d in zip(pads[:r] + pads[r:], list(shape) * 2) if p > 0):
        pytest.skip("reflect pads must be smaller than the axis")
    x = rng.normal(size=shape).astype(np.float32)
    ins, inits = [oh.make_tensor_value_info("x", F, shape)], []
    if opset >= 11:
        inits.append(onnx.numpy_helper.from_array(np.asarray(pads, np.int64), "pads"))
        node = oh.make_node("Pad", ["x", "pads"], ["y"], mode=mode)
    else:
        node = oh.make_node("Pad", ["x"], ["y"], mode=mode, pads=pads, value=0.0)
    crop = tuple(slice(max(0, -b), d - max(0, -a)) for b, a, d in zip(pads[:r], pads[r:], shape))
    want = np.pad(x[crop], [(max(0, b), max(0, a)) for b, a in zip(pads[:r], pads[r:])],
                  mode={"constant": "constant", "reflect": "reflect", "edge": "edge"}[mode])
    g = oh.make_graph([node], "g", ins, [oh.make_tensor_value_info("y", F, want.shape)], inits)
    proto = oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)]).SerializeToString()
    np.testing.assert_array_equal(run_inference(proto, {"x": x}, "y")["y"], want)


def test_reflect_pad_gradient(rng):
    """The gradient of a reflect pad sums each mirrored element's gradient into its source."""
    x_val = rng.normal(size=(2, 5)).astype(np.float32)
    r_val = rng.normal(size=(2, 9)).astype(np.float32)
    b = popart.Builder()
    w = b.addInitializedInputTensor(x_val, "w")
    y = b.aiOnnxOpset10.pad([w], pads=[0, 2, 0, 2], mode="reflect")
    grad = popart.reservedGradientPrefix() + w
    out = _train_step(b, y, b.aiOnnx.constant(r_val), [grad])
    src = np.array([2, 1, 0, 1, 2, 3, 4, 3, 2])  # the source column of each padded column
    want = np.zeros_like(x_val)
    for j, c in enumerate(src):
        want[:, c] += r_val[:, j]
    np.testing.assert_allclose(out[grad], want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("shape,axis", [((1,), 0), ((7, 3), 0), ((2, 13), -1)])
def test_cumsum_attributes_and_gradient(exclusive, reverse, shape, axis, rng):
    x_val = rng.normal(size=shape).astype(np.float32)
    r_val = rng.normal(size=shape).astype(np.float32)

    def cums(a, excl, rev):
        a = np.flip(a, axis) if rev else a
        c = np.cumsum(a, axis)
        if excl:
            c = c - a
        return np.flip(c, axis) if rev else c
    b = popart.Builder()
    w = b.addInitializedInputTensor(x_val, "w")
    y = b.aiOnnxOpset11.cumsum([w, b.aiOnnx.constant(np.array(axis, np.int64))], exclusive=exclusive,
                               reverse=reverse)
    grad = popart.reservedGradientPrefix() + w
    out = _train_step(b, y, b.aiOnnx.constant(r_val), [grad, y])
    np.testing.assert_allclose(out[y], cums(x_val.astype(np.float64), exclusive, reverse), rtol=1e-5, atol=1e-5)
    # d/dx of sum(r * cumsum(x)) is the cumsum of r the other way, exclusive as the forward one
    np.testing.assert_allclose(out[grad], cums(r_val.astype(np.float64), exclusive, not reverse), rtol=1e-5,
                               atol=1e-5)


def test_rnn_gradient_matches_torch(rng):
    """torch.nn.RNN (tanh) trained through a TrainingSession: the recurrent weight's gradient."""
    torch = pytest.importorskip("torch")
    seq, batch, inp, hid = 5, 3, 2, 4
    net = torch.nn.RNN(inp, hid).double()
    x_val = rng.normal(size=(seq, batch, inp))
    p = {n: t.detach().numpy() for n, t in net.named_parameters()}
    got = _sum_of_squares_gradient("rnn", x_val, p["weight_ih_l0"], p["weight_hh_l0"],
                                   np.concatenate([p["bias_ih_l0"], p["bias_hh_l0"]]), hid, "R")
    yt, _ = net(torch.tensor(x_val))
    (yt * yt).sum().backward()
    np.testing.assert_allclose(got, net.weight_hh_l0.grad.numpy(), rtol=2e-4, atol=2e-5)


def test_roi_align_image_gradient(rng):
    """PopART's RoiAlignGrad through a TrainingSession: the image gradient of sum(roi_align(x) * r)
    is what the forward pass's linearity gives, roi_align applied to each unit image."""
    n, c, h, w_, k = 1, 2, 5, 4, 2
    x_val = rng.normal(size=(n, c, h, w_)).astype(np.float32)
    rois = np.array([[0.5, 0.5, 3.0, 4.0], [1.0, 0.0, 3.5, 2.5]], np.float32)
    r_val = rng.normal(size=(k, c, 2, 2)).astype(np.float32)
    b = popart.Builder()
    wt = b.addInitializedInputTensor(x_val, "img")
    y = b.aiOnnxOpset10.roialign([wt, b.aiOnnx.constant(rois), b.aiOnnx.constant(np.zeros(k, np.int64))],
                                 output_height=2, output_width=2, sampling_ratio=2, spatial_scale=1.0)
    grad = popart.reservedGradientPrefix() + wt
    out = _train_step(b, y, b.aiOnnx.constant(r_val), [grad])
    from codelets.roi_align import reference as roi_ref
    want = np.zeros_like(x_val, np.float64)
    for idx in np.ndindex(*x_val.shape):
        e = np.zeros_like(x_val)
        e[idx] = 1.0
        want[idx] = (roi_ref(e, rois, np.zeros(k, np.int32), (2, 2), 1.0, 2) * r_val).sum()
    np.testing.assert_allclose(out[grad], want, rtol=1e-5, atol=1e-6)


def test_a_scalar_weight_keeps_its_shape(rng):
    """A 0-d float initializer (exporters write scalar constants so) is a weight of shape (): the
    Builder stores it so, and prepareDevice writes it so."""
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [3]), "x")
    w = b.addInitializedInputTensor(np.array(2.5, np.float32), "w")
    y = b.aiOnnx.mul([x, w])
    assert list(onnx.load_from_string(b.getModelProto()).graph.initializer[0].dims) == []
    x_val = rng.normal(size=3).astype(np.float32)
    np.testing.assert_allclose(run_inference(b.getModelProto(), {x: x_val}, y)[y], x_val * 2.5, rtol=1e-7)


def test_integer_div_truncates_toward_zero(rng):
    """PopART's DivOp on int32 tensors (index arithmetic of detection models): C's truncation."""
    a = rng.integers(-50, 50, (3, 7)).astype(np.int32)
    b = rng.integers(1, 9, (3, 7)).astype(np.int32) * rng.choice([-1, 1], (3, 7)).astype(np.int32)
    i32 = onnx.TensorProto.INT32
    g = oh.make_graph([oh.make_node("Div", ["a", "b"], ["y"])], "g",
                      [oh.make_tensor_value_info("a", i32, [3, 7]), oh.make_tensor_value_info("b", i32, [3, 7])],
                      [oh.make_tensor_value_info("y", i32, [3, 7])])
    proto = oh.make_model(g, opset_imports=[oh.make_opsetid("", 11)]).SerializeToString()
    got = check_against_reference(proto, {"a": a, "b": b}, ["y"])["y"]
    np.testing.assert_array_equal(got, np.trunc(a / b).astype(np.int32))
