"""Models exported from PyTorch to ONNX, run with popart.InferenceSession and compared with PyTorch.

    python examples/popart/pytorch_onnx.py

Two models: a small CNN (conv, batch norm, relu, max pool, flatten, linear, gelu, softmax) and an
LSTM sequence classifier. Each is exported with torch.onnx.export (opset 11, the TorchScript
exporter), read from the exported bytes by PopART, run on a simulated IPU, and its output
compared with PyTorch's. Needs torch (not a dependency of this project): without it the script
says so and exits.
"""
from __future__ import annotations

import io
import sys
import warnings

import numpy as np
from rich.console import Console

import popart

console = Console()


def _models(torch):
    nn = torch.nn

    class SmallCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 6, 3, padding=1)
            self.bn = nn.BatchNorm2d(6)
            self.fc = nn.Linear(6 * 7 * 7, 10)

        def forward(self, x):
            x = nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
            return torch.softmax(nn.functional.gelu(self.fc(torch.flatten(x, 1))), dim=1)

    class LSTMClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(input_size=8, hidden_size=16)
            self.fc = nn.Linear(16, 4)

        def forward(self, x):  # x: (seq, batch, 8)
            out, (h, c) = self.lstm(x)
            return torch.sigmoid(self.fc(out[-1]))

    return {"cnn": (SmallCNN(), (4, 1, 14, 14)), "lstm": (LSTMClassifier(), (5, 3, 8))}


def export(torch, model, shape) -> bytes:
    model.eval()
    with torch.no_grad():  # give the batch norm non-trivial running statistics
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.randn(*shape),), buf, opset_version=11, input_names=["input"],
                          output_names=["output"], dynamo=False, do_constant_folding=False)
    return buf.getvalue()


def main(argv=None):
    try:
        import torch
    except ImportError:
        console.print("[yellow]torch is not installed: nothing to export (pip install torch to run this example)")
        return None
    torch.manual_seed(0)
    results = {}
    for name, (model, shape) in _models(torch).items():
        proto = export(torch, model, shape)
        x = np.random.default_rng(1).normal(size=shape).astype(np.float32)
        with torch.no_grad():
            want = model(torch.from_numpy(x)).numpy()
        dataflow = popart.DataFlow(1, {"output": popart.AnchorReturnType("All")})
        device = popart.DeviceManager().createIpuModelDevice({"numIPUs": 1, "tilesPerIPU": 64})
        session = popart.InferenceSession(fnModel=proto, dataFlow=dataflow, deviceInfo=device)
        session.prepareDevice()
        anchors = session.initAnchorArrays()
        session.run(popart.PyStepIO({"input": x}, anchors))
        diff = float(np.abs(anchors["output"] - want).max())
        import onnx
        ops = sorted({n.op_type for n in onnx.load_from_string(proto).graph.node})
        console.print(f"{name}: ONNX ops {', '.join(ops)}; output {anchors['output'].shape}, largest difference "
                      f"from PyTorch {diff:.2g}")
        results[name] = diff
    return results


if __name__ == "__main__":
    res = main()
    if res is None:
        sys.exit(0)
    assert all(d < 1e-4 for d in res.values()), res
