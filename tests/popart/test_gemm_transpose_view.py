"""A Gemm's transposed weight (transB = 1, as PyTorch exports nn.Linear) stays a view when the
forward graph keeps it for the backward graph (PopART's Standard recomputation): the backward
matmul reads it through the called graph's input, as Poplar's dimShuffle is a view, and nothing
copies the weight element by element (MobileNetV2's classifier: 10 KB of exchange code on its
worst tile). The numbers are those of the copies: the weight's update, placed in the backward
pass, runs after the view's last reader."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

import popart
from popxl.lowering.rules import shape
from tests.popart.popart_helpers import device

BATCH, CLASSES, C = 4, 5, 8


def _model():
    rng = np.random.default_rng(3)
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [BATCH, 3, 8, 8]), "x")
    w = b.addInitializedInputTensor((rng.standard_normal((C, 3, 3, 3)) * 0.3).astype(np.float32), "w0")
    h = b.aiOnnx.conv([x, w], pads=[1, 1, 1, 1])
    stats = [b.addInitializedInputTensor(v.astype(np.float32), f"bn_{k}")
             for k, v in enumerate((1 + 0.1 * rng.standard_normal(C), 0.1 * rng.standard_normal(C),
                                    np.zeros(C), np.ones(C)))]
    h = b.aiOnnx.relu([b.aiOnnx.batchnormalization([h] + stats, 5)[0]])
    h = b.aiOnnx.reshape([b.aiOnnx.globalaveragepool([h]), b.aiOnnx.constant(np.array([BATCH, C], np.int64))])
    wfc = b.addInitializedInputTensor((rng.standard_normal((CLASSES, C)) * 0.3).astype(np.float32), "wfc")
    bfc = b.addInitializedInputTensor((rng.standard_normal(CLASSES) * 0.1).astype(np.float32), "bfc")
    logits = b.aiOnnx.gemm([h, wfc, bfc], transB=1)
    label = b.addInputTensor(popart.TensorInfo("INT32", [BATCH]), "label")
    loss = b.aiGraphcore.nllloss([b.aiOnnx.softmax([logits], axis=1), label], popart.ReductionType.Mean)
    return b.getModelProto(), loss, label


def _train(mode, monkeypatch, views=True):
    copied = []
    if not views:  # every transpose copied, as before: the reference
        monkeypatch.setattr(shape, "_read_only_by_gathering_ops", lambda op: False)
    orig = shape.materialise

    def spy(ctx, t_out, view, suffix="copy"):
        copied.append(ctx.op.name if ctx.op is not None else "")
        return orig(ctx, t_out, view, suffix)

    monkeypatch.setattr(shape, "materialise", spy)
    proto, loss, label = _model()
    opts = popart.SessionOptions()
    opts.autoRecomputation = mode
    s = popart.TrainingSession(proto, popart.DataFlow(1, {loss: popart.AnchorReturnType("All")}), loss,
                               popart.ConstSGD(0.1), device(tiles=8), userOptions=opts)
    s.prepareDevice()
    s.weightsFromHost()
    out = s.initAnchorArrays()
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(2):
        x = rng.standard_normal((BATCH, 3, 8, 8)).astype(np.float32)
        y = rng.integers(0, CLASSES, BATCH).astype(np.int32)
        s.run(popart.PyStepIO({"x": x, label: y}, out))
        losses.append(float(out[loss]))
    s.weightsToHost()
    inits = onnx.load_from_string(proto).graph.initializer
    weights = {t.name: np.zeros(onnx.numpy_helper.to_array(t).shape, np.float32) for t in inits}
    s.readWeights(popart.PyWeightsIO(weights))
    return losses, weights, copied


@pytest.mark.parametrize("mode", [popart.RecomputationType.Standard, popart.RecomputationType.NoRecompute])
def test_gemm_weight_transpose_is_not_copied(mode, monkeypatch):
    losses, weights, copied = _train(mode, monkeypatch)
    assert not [n for n in copied if "Gemm" in n and "transpose" in n], copied
    monkeypatch.undo()
    ref_losses, ref_weights, ref_copied = _train(mode, monkeypatch, views=False)
    assert [n for n in ref_copied if "Gemm" in n and "transpose" in n]
    # the view reads each weight before its update (the update runs in the backward pass, after
    # the weight's last reader): the same numbers as the copies
    assert losses == ref_losses
    for name, w in weights.items():
        np.testing.assert_array_equal(w, ref_weights[name], err_msg=name)
    assert np.all(np.isfinite(losses)) and losses[1] != losses[0]
