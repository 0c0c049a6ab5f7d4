"""The torchvision CNN zoo (benchmarks/model_zoo.py: random weights, batch norms with non-trivial
statistics) exported by PyTorch to ONNX and run unchanged through popart.InferenceSession on a
simulated GC200 (1,472 tiles, 624 KiB each), against PyTorch on the CPU; and MobileNetV2 /
EfficientNet-B0 trained a few SGD steps at batch 8 through popart.TrainingSession.

Real model sizes: every test here is slow (minutes and GBs each; run one at a time, -m slow)."""
from __future__ import annotations

import copy
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


# Float32 training at batch 8 with PopART's Standard recomputation (the activations a backward op
# needs are recomputed from the kept conv / norm outputs, as Graphcore's CNN applications train).
# MobileNetV2 fits one GC200 (worst tile 565,684 B of 638,976 at 4a4c3d4). EfficientNet-B0 does not
# yet: 947 tiles over, worst (tile 0) 710,762 B (exchange code 237,252, temporaries 188,288, constants
# 100,704, vertex state 79,866, control code 72,892); strict, so the day it fits its marker must go.
_EFFICIENTNET_OVER = pytest.mark.xfail(
    reason="EfficientNet-B0 float32 training at batch 8 does not fit one GC200 yet (worst tile 710,762 B of "
           "638,976: exchange code, temporaries)", raises=popart.OutOfMemoryException, strict=True)


@pytest.mark.parametrize("name", ["mobilenet_v2", pytest.param("efficientnet_b0", marks=_EFFICIENTNET_OVER)])
def test_cnn_trains_like_pytorch_at_batch_8(name, steps=3, batch=8, lr=0.005):
    """SGD steps of softmax + NLL over the exported training graph (batch norm on batch statistics),
    against torch.optim.SGD in float64. Random weights at batch 8 make this training ill-conditioned:
    after three steps PyTorch's own float32 run is ~19% (of a tensor's largest weight) away from its
    float64 run at 224 px (measured at 4a4c3d4; ours 18.8%, PyTorch 18.9%). So every step's loss and the
    final weights must be as close to float64 as PyTorch's float32 (within 2x), and the first loss,
    before any update, within 1e-4."""
    model = zoo.build(name)
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    model.train()
    start = copy.deepcopy(model)
    proto = zoo.export_onnx(model, name, batch, training=True)
    b = popart.Builder(proto)
    (logits,) = b.getOutputTensorIds()
    label = b.addInputTensor(popart.TensorInfo("INT32", [batch]), "label")
    loss = b.aiGraphcore.nllloss([b.aiOnnx.softmax([logits], axis=1), label], popart.ReductionType.Mean)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((steps, batch, 3, 224, 224)).astype(np.float32)
    y = rng.integers(0, 1000, (steps, batch)).astype(np.int32)
    opts = popart.SessionOptions()
    opts.autoRecomputation = popart.RecomputationType.Standard
    s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, {loss: popart.AnchorReturnType("All")}), loss,
                               popart.ConstSGD(lr), _gc200(), userOptions=opts)
    s.prepareDevice()
    s.weightsFromHost()
    out = s.initAnchorArrays()
    ours = []
    for i in range(steps):
        s.run(popart.PyStepIO({"input": x[i], label: y[i]}, out))
        ours.append(float(out[loss]))
    s.weightsToHost()
    mp = onnx.load_from_string(proto)
    named = dict(start.named_parameters())
    init = {t.name: t for t in mp.graph.initializer if t.name in named}
    got = {k: np.zeros(onnx.numpy_helper.to_array(t).shape, np.float32) for k, t in init.items()}
    s.readWeights(popart.PyWeightsIO(got))
    assert got

    def torch_sgd(dtype):
        m = copy.deepcopy(start).to(dtype).train()
        opt, losses = torch.optim.SGD(m.parameters(), lr=lr), []
        for i in range(steps):
            opt.zero_grad()
            step_loss = torch.nn.functional.cross_entropy(m(torch.from_numpy(x[i]).to(dtype)),
                                                          torch.from_numpy(y[i]).long())
            step_loss.backward()
            opt.step()
            losses.append(float(step_loss))
        return {k: v.detach().double().numpy() for k, v in m.named_parameters()}, losses

    w32, l32 = torch_sgd(torch.float32)
    w64, l64 = torch_sgd(torch.float64)
    assert abs(ours[0] - l64[0]) <= 1e-4 * abs(l64[0]), (ours, l64)
    for i in range(1, steps):
        assert abs(ours[i] - l64[i]) <= 2 * abs(l32[i] - l64[i]) + 1e-4 * abs(l64[i]), (i, ours, l32, l64)

    def worst(weights):
        return max(np.abs(weights[k] - w64[k]).max() / np.abs(w64[k]).max() for k in got)

    assert worst(got) <= 2 * worst(w32) + 1e-4, (worst(got), worst(w32))
