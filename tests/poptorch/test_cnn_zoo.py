"""The torchvision CNN zoo (benchmarks/model_zoo.py) wrapped by poptorch.inferenceModel, unchanged, on a
simulated GC200, against PyTorch on the CPU: the same models as tests/popart/test_cnn_zoo.py, captured
at the ATen level instead of exported to ONNX.

Real model sizes: every test here is slow (tens of seconds and GBs each; run one at a time, -m slow)."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import poptorch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "benchmarks"))
import model_zoo as zoo  # noqa: E402

pytestmark = pytest.mark.slow

# the CNNs of issue 30 and ViT-B/16 (on a 2-core host: DenseNet-121 about 60 s, ViT-B/16 about 70 s)
MODELS = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "shufflenet_v2_x1_0",
          "squeezenet1_1", "densenet121", "vit_b_16"]


@pytest.mark.parametrize("name", MODELS)
def test_cnn_through_poptorch_matches_pytorch_at_batch_1(name):
    model = zoo.build(name).eval()
    x = torch.from_numpy(np.random.default_rng(0).standard_normal(zoo.input_shape(name, 1)).astype(np.float32))
    with torch.no_grad():
        want = model(x).numpy()
    got = poptorch.inferenceModel(model)(x).numpy()
    assert float(np.abs(got - want).max() / np.abs(want).max()) < 1e-4
