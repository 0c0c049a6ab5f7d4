"""The torchvision CNN zoo (benchmarks/model_zoo.py: random weights, batch norms with non-trivial
statistics) exported by PyTorch to ONNX and run unchanged through popart.InferenceSession on a
simulated GC200 (1,472 tiles, 624 KiB each), against PyTorch on the CPU; and MobileNetV2 /
EfficientNet-B0 trained a few SGD steps at batch 8 through popart.TrainingSession.

Real model sizes: every test here is slow (minutes and GBs each; run one at a time, -m slow)."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

import popart  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "benchmarks"))
import model_zoo as zoo  # noqa: E402

pytestmark = pytest.mark.slow

CNNS = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "shufflenet_v2_x1_0",
        "densenet121", "squeezenet1_1",
        # weight-bound (133 M / 138 M parameters, 531 / 553 MB in float32): they fit because each
        # weight is stored once, in the layout of the matmul that reads it (popxl/lowering/creators.py)
        "vgg11", "vgg16"]


def _gc200():
    return popart.DeviceManager().createIpuModelDevice({"numIPUs": 1, "tilesPerIPU": 1472})


def relative_error(got, want) -> float:
    """max |got - want| / max |want|: the models' logits differ in scale by orders of magnitude."""
    return float(np.abs(got - want).max() / np.abs(want).max())


@pytest.mark.parametrize("name", CNNS)
def test_cnn_matches_pytorch_at_batch_1(name):
    model = zoo.build(name)
    proto = zoo.export_onnx(model, name, 1)
    x = np.random.default_rng(0).standard_normal(zoo.input_shape(name, 1)).astype(np.float32)
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    s = popart.InferenceSession(proto, popart.DataFlow(1, {"logits": popart.AnchorReturnType("All")}), _gc200())
    s.prepareDevice()
    s.weightsFromHost()
    out = s.initAnchorArrays()
    s.run(popart.PyStepIO({"input": x}, out))
    assert relative_error(out["logits"].reshape(want.shape), want) < 1e-4


# Not yet: float32 training at batch 8 does not fit one GC200. MobileNetV2: over on 1,458 tiles, worst
# (tile 514) 1,173,204 B (temporaries 385,992, exchange code 368,688, vertex state 298,252, control code
# 48,664); the average tile's live temporaries alone (the activations kept for the backward pass) are
# ~341 KB of its 624 KiB. EfficientNet-B0 (last measured before the two changes below): over on 1,469
# tiles, worst 1,859,714 B (temporaries 585,008, vertex state 571,418, exchange code 512,288). Fixed so
# far: the weight-gradient exchanges (a batch's windows move as runs; dW = dy @ windows), ReLU6's Clamp
# vertices (poplibs' 2D vertex), the op of UnaryOp / BinaryOp / Reduce vertices counted as the template
# parameter it is in poplibs, not vertex state (worst tile 1,248,728 -> 1,194,120 B), and gradients laid
# out like the activations as popnn lays them (batch norm's backward pass no longer rearranges its operands:
# -> 1,173,204 B, exchange code 413,148 -> 368,688). What remains is the NCHW layout of the convolutions' outputs:
# a tile holds ~20 (image, channel) runs of each activation, so every per-channel step of batch norm
# (forward and backward) and the non-linearities cost a vertex per run (~21 KB of state each on that
# tile) where poplin's grouped layout ([N][C/G][H][W][G]) gives a few per tile; then the stride-2
# input gradients' zero interleave (concat: 38.7 KB of exchange code), matmul partials and the
# activations themselves. strict: the day it fits, this marker must go.
@pytest.mark.xfail(reason="MobileNetV2 / EfficientNet-B0 float32 training at batch 8 does not fit one GC200 yet "
                   "(MobileNetV2: worst tile 1,173,204 B of 638,976, 1,458 tiles over: activations, per-channel "
                   "vertex state over NCHW conv outputs, exchange code)", raises=Exception, strict=True)
@pytest.mark.parametrize("name", ["mobilenet_v2", "efficientnet_b0"])
def test_cnn_trains_like_pytorch_at_batch_8(name, steps=3, batch=8, lr=0.05):
    """SGD steps of softmax + NLL over the exported training graph (batch norm on batch statistics):
    the loss of every step and the weights after the last against torch.optim.SGD."""
    model = zoo.build(name)
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    model.train()
    proto = zoo.export_onnx(model, name, batch, training=True)
    b = popart.Builder(proto)
    (logits,) = b.getOutputTensorIds()
    label = b.addInputTensor(popart.TensorInfo("INT32", [batch]), "label")
    loss = b.aiGraphcore.nllloss([b.aiOnnx.softmax([logits], axis=1), label], popart.ReductionType.Mean)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((steps, batch, 3, 224, 224)).astype(np.float32)
    y = rng.integers(0, 1000, (steps, batch)).astype(np.int32)
    s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, {loss: popart.AnchorReturnType("All")}), loss,
                               popart.ConstSGD(lr), _gc200())
    s.prepareDevice()
    s.weightsFromHost()
    out = s.initAnchorArrays()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for i in range(steps):
        s.run(popart.PyStepIO({"input": x[i], label: y[i]}, out))
        opt.zero_grad()
        want = torch.nn.functional.cross_entropy(model(torch.from_numpy(x[i])), torch.from_numpy(y[i]).long())
        want.backward()
        opt.step()
        assert abs(float(out[loss]) - float(want)) <= 1e-4 * abs(float(want)), i
    s.weightsToHost()
    mp = onnx.load_from_string(proto)
    params = {k: v.detach().numpy() for k, v in model.named_parameters()}
    init = {t.name: t for t in mp.graph.initializer if t.name in params}
    got = {k: np.zeros(onnx.numpy_helper.to_array(t).shape, np.float32) for k, t in init.items()}
    s.readWeights(popart.PyWeightsIO(got))
    assert got
    worst = max(relative_error(got[k], params[k]) for k in got)
    assert worst < 1e-3, worst
