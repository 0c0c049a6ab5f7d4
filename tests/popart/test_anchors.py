"""Anchor return types and their array shapes ([batchesPerStep, accumulationFactor,
replicationFactor, *shape] with size-1 dimensions dropped), with several steps per run,
gradient accumulation and replication."""
from __future__ import annotations

import numpy as np
import pytest

import popart

from popart_helpers import device


def _counter_model():
    """y = x * 2; a weight w read and anchored."""
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [3]), "x")
    y = b.aiOnnx.mul([x, b.aiOnnx.constant(np.full(3, 2, np.float32))])
    return b.getModelProto(), x, y


@pytest.mark.parametrize("art,period,shape_fn,value_fn", [
    ("All", None, lambda bps: (bps, 3), lambda d: 2 * d),
    ("Final", None, lambda bps: (3,), lambda d: 2 * d[-1]),
    ("Sum", None, lambda bps: (3,), lambda d: 2 * d.sum(0)),
    ("EveryN", 2, lambda bps: (bps // 2, 3), lambda d: 2 * d[1::2]),
    ("EveryN", 3, lambda bps: (bps // 3, 3), lambda d: 2 * d[2::3]),
])
def test_inference_anchor_types(art, period, shape_fn, value_fn):
    bps = 6
    proto, x, y = _counter_model()
    rt = popart.AnchorReturnType(art, period) if period else popart.AnchorReturnType(art)
    s = popart.InferenceSession(proto, popart.DataFlow(bps, {y: rt}), device())
    s.prepareDevice()
    out = s.initAnchorArrays()
    assert out[y].shape == shape_fn(bps)
    data = np.arange(bps * 3, dtype=np.float32).reshape(bps, 3)
    for _ in range(2):  # the Sum and counters start again every run
        s.run(popart.PyStepIO({x: data}, out))
        np.testing.assert_allclose(out[y], value_fn(data))


def test_everyn_must_divide_batches_per_step():
    proto, x, y = _counter_model()
    with pytest.raises(popart.popart_exception, match="does not divide"):
        popart.InferenceSession(proto, popart.DataFlow(5, {y: popart.AnchorReturnType("EveryN", 2)}), device())


def test_training_anchor_shapes_with_accumulation_and_replication():
    """bps 2, accumulation 3, 2 replicas: All -> (2, 3, 2), Final / Sum -> (2,), inputs (2, 3, 2, *)."""
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [4]), "x")
    w = b.addInitializedInputTensor(np.ones(4, np.float32), "w")
    prod = b.aiOnnx.mul([x, w])
    loss = b.aiGraphcore.identityloss([prod], popart.ReductionType.Sum)
    opts = popart.SessionOptions()
    opts.enableGradientAccumulation = True
    opts.accumulationFactor = 3
    opts.enableReplicatedGraphs = True
    opts.replicatedGraphCount = 2
    anchors = {loss: popart.AnchorReturnType("All"), prod: popart.AnchorReturnType("Final"),
               "Gradient___w": popart.AnchorReturnType("Sum")}
    s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(2, anchors), loss,
                               popart.SGD({"defaultLearningRate": (0.01, True)}), device(num_ipus=2), userOptions=opts)
    s.prepareDevice()
    s.weightsFromHost()
    out = s.initAnchorArrays()
    assert out[loss].shape == (2, 3, 2) and out[prod].shape == (2, 4) and out["Gradient___w"].shape == (2, 4)
    rng = np.random.default_rng(0)
    data = rng.normal(size=(2, 3, 2, 4)).astype(np.float32)
    s.run(popart.PyStepIO({x: data}, out))
    # step 1 with w = 1; the gradient summed over 3 micro-batches and 2 replicas updates w
    np.testing.assert_allclose(out[loss][0], data[0].sum(-1), rtol=1e-5)
    w1 = 1 - 0.01 * data[0].sum((0, 1))
    np.testing.assert_allclose(out[loss][1], (data[1] * w1).sum(-1), rtol=1e-5)
    np.testing.assert_allclose(out[prod], data[1, 2] * w1, rtol=1e-5)      # Final: last micro-batch, each replica
    np.testing.assert_allclose(out["Gradient___w"], data.sum((0, 1)), rtol=1e-5)  # Sum over steps and micro-batches
    s.weightsToHost()
    got = {"w": np.zeros(4, np.float32)}
    s.readWeights(popart.PyWeightsIO(got))
    np.testing.assert_allclose(got["w"], w1 - 0.01 * data[1].sum((0, 1)), rtol=1e-5)


def test_replicated_inference_splits_inputs_over_replicas():
    proto, x, y = _counter_model()
    opts = popart.SessionOptions()
    opts.enableReplicatedGraphs = True
    opts.replicatedGraphCount = 4
    s = popart.InferenceSession(proto, popart.DataFlow(2, [y]), device(num_ipus=4), userOptions=opts)
    s.prepareDevice()
    out = s.initAnchorArrays()
    assert out[y].shape == (2, 4, 3)
    data = np.arange(24, dtype=np.float32).reshape(2, 4, 3)
    s.run(popart.PyStepIO({x: data}, out))
    np.testing.assert_allclose(out[y], 2 * data)


def test_step_io_callback():
    proto, x, y = _counter_model()
    s = popart.InferenceSession(proto, popart.DataFlow(3, [y]), device())
    s.prepareDevice()
    feeds = [np.full(3, i, np.float32) for i in range(3)]
    got, done = [], []
    outs = [np.zeros(3, np.float32) for _ in range(3)]

    def input_cb(tid, prefetch):
        return feeds[len(done)]

    def input_done(tid):
        done.append(tid)

    def output_cb(tid):
        return outs[len(got)]

    def output_done(tid):
        got.append(tid)
    s.run(popart.PyStepIOCallback(input_cb, input_done, output_cb, output_done))
    assert done == [x] * 3 and got == [y] * 3
    np.testing.assert_allclose(np.stack(outs), 2 * np.stack(feeds))


def test_gradient_anchors_of_weights_inputs_and_activations():
    """reservedGradientPrefix() + id anchors the gradient of a weight, an input or an activation."""
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [2, 3]), "x")
    w = b.addInitializedInputTensor(np.full((3, 4), 0.5, np.float32), "w")
    h = b.aiOnnx.matmul([x, w])
    sq = b.aiOnnx.mul([h, h])
    loss = b.aiGraphcore.identityloss([sq], popart.ReductionType.Sum)
    g = popart.reservedGradientPrefix()
    assert g == "Gradient___"
    s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, [loss, g + w, g + x, g + h]), loss,
                               popart.ConstSGD(0.0), device())
    s.prepareDevice()
    s.weightsFromHost()
    out = s.initAnchorArrays()
    X = np.arange(6, dtype=np.float32).reshape(2, 3)
    s.run(popart.PyStepIO({x: X}, out))
    H = X @ np.full((3, 4), 0.5, np.float32)
    np.testing.assert_allclose(out[g + h], 2 * H, rtol=1e-6)
    np.testing.assert_allclose(out[g + w], X.T @ (2 * H), rtol=1e-6)
    np.testing.assert_allclose(out[g + x], (2 * H) @ np.full((4, 3), 0.5), rtol=1e-6)
    assert s.getInfo(g + h).shape() == [2, 4]


def test_everyn_with_gradient_accumulation_returns_every_micro_batch_of_every_nth_step():
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [2]), "x")
    w = b.addInitializedInputTensor(np.ones(2, np.float32), "w")
    loss = b.aiGraphcore.identityloss([b.aiOnnx.mul([x, w])], popart.ReductionType.Sum)
    opts = popart.SessionOptions()
    opts.enableGradientAccumulation = True
    opts.accumulationFactor = 2
    s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(4, {loss: popart.AnchorReturnType("EveryN", 2)}),
                               loss, popart.ConstSGD(0.0), device(), userOptions=opts)
    s.prepareDevice()
    s.weightsFromHost()
    out = s.initAnchorArrays()
    assert out[loss].shape == (2, 2)
    data = np.arange(16, dtype=np.float32).reshape(4, 2, 2)
    s.run(popart.PyStepIO({x: data}, out))
    np.testing.assert_allclose(out[loss], data.sum(-1)[[1, 3]])
