"""Where a training session updates its weights: with one micro-batch per step on one replica, each
weight's optimizer ops run in the backward pass as soon as its gradient is whole (PopART's scheduler
puts a VarUpdate right after the gradient it consumes), so the gradients of the last layers are not
held while the first layers' gradients are computed. The numbers are those of updating after the
whole backward pass; only the bytes live move."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

import popart
from popart import _program
from tests.popart.popart_helpers import device

BATCH, WIDTH, LAYERS = 4, 48, 4


def _model():
    """LAYERS matmul + tanh layers of WIDTH x WIDTH weights, softmax + NLL."""
    rng = np.random.default_rng(3)
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [BATCH, WIDTH]), "x")
    h = x
    for i in range(LAYERS):
        w = b.addInitializedInputTensor((rng.standard_normal((WIDTH, WIDTH)) * 0.3).astype(np.float32), f"w{i}")
        h = b.aiOnnx.tanh([b.aiOnnx.matmul([h, w])])
    label = b.addInputTensor(popart.TensorInfo("INT32", [BATCH]), "label")
    loss = b.aiGraphcore.nllloss([b.aiOnnx.softmax([h], axis=1), label], popart.ReductionType.Mean)
    return b.getModelProto(), loss, label


def _train(optimizer, recompute=popart.RecomputationType.NoRecompute, steps=2):
    proto, loss, label = _model()
    opts = popart.SessionOptions()
    opts.autoRecomputation = recompute
    opts.instrumentWithHardwareCycleCounter = True
    s = popart.TrainingSession(proto, popart.DataFlow(1, {loss: popart.AnchorReturnType("All")}), loss,
                               optimizer, device(tiles=4), userOptions=opts)
    s.prepareDevice()
    s.weightsFromHost()
    out = s.initAnchorArrays()
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(steps):
        x = rng.standard_normal((BATCH, WIDTH)).astype(np.float32)
        y = rng.integers(0, WIDTH, BATCH).astype(np.int32)
        s.run(popart.PyStepIO({"x": x, label: y}, out))
        losses.append(float(out[loss]))
    s.weightsToHost()
    weights = {t.name: np.zeros(onnx.numpy_helper.to_array(t).shape, np.float32)
               for t in onnx.load_from_string(proto).graph.initializer}
    s.readWeights(popart.PyWeightsIO(weights))
    exe = s._session.executable
    return {"losses": losses, "weights": weights, "cycles": s.getCycleCount(), "live_peak": int(exe.liveness.max()),
            "early": set(s._program.updated_in_backward)}


def _after_backward(monkeypatch):
    monkeypatch.setattr(_program._Builder, "_updates_in_backward", lambda self: False)


@pytest.mark.parametrize("optimizer", [
    lambda: popart.ConstSGD(0.1),
    lambda: popart.SGD({"defaultLearningRate": (0.1, False), "defaultMomentum": (0.9, True),
                        "defaultWeightDecay": (0.01, True)}),
    lambda: popart.Adam({"defaultLearningRate": (0.01, False)}),
], ids=["const_sgd", "sgd_momentum", "adam"])
@pytest.mark.parametrize("recompute", [popart.RecomputationType.NoRecompute, popart.RecomputationType.Standard])
def test_weights_update_in_the_backward_pass_with_the_same_numbers_and_fewer_bytes_live(
        optimizer, recompute, monkeypatch):
    early = _train(optimizer(), recompute)
    assert early["early"] == {f"w{i}" for i in range(LAYERS)}
    with monkeypatch.context() as m:
        _after_backward(m)
        late = _train(optimizer(), recompute)
    assert not late["early"]
    assert early["losses"] == late["losses"]
    for k in late["weights"]:
        np.testing.assert_array_equal(early["weights"][k], late["weights"][k], err_msg=k)
    assert early["live_peak"] < late["live_peak"]  # the last layers' gradients die at their update


def test_accumulation_updates_after_the_step():
    """With gradient accumulation the optimizer reads the accumulated gradients after the last
    micro-batch: nothing is updated in the backward pass."""
    proto, loss, label = _model()
    opts = popart.SessionOptions()
    opts.enableGradientAccumulation = True
    opts.accumulationFactor = 2
    s = popart.TrainingSession(proto, popart.DataFlow(1, {loss: popart.AnchorReturnType("All")}), loss,
                               popart.ConstSGD(0.1), device(tiles=4), userOptions=opts)
    assert s._program.updated_in_backward == frozenset()
