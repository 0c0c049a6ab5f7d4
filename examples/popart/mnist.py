"""Train an MLP or a small CNN, built with popart.Builder, on MNIST-like data with PopART's
TrainingSession on a simulated IPU.

    python examples/popart/mnist.py [--model mlp|cnn] [--optimizer sgd|adam] [--steps 40]
                                    [--batch-size 32] [--batches-per-step 4] [--lr 0.05]

The first step is checked against NumPy doing the same forward pass, backward pass and
optimizer update (seed 002's SGD / Adam formulas); then the loss must fall. The data is the
synthetic MNIST-like set of examples/mnist.py (ten stroke templates, shifted, scaled, noisy).
"""
from __future__ import annotations

import argparse
import os
import runpy

import numpy as np
from rich.console import Console

import popart

console = Console()
HERE = os.path.dirname(os.path.abspath(__file__))


def synthetic_mnist(n: int, seed: int = 0):
    data = runpy.run_path(os.path.join(HERE, "..", "mnist.py"), run_name="data")["synthetic_mnist"]
    x, y, _, _ = data(n, 1, seed)
    return x, y


# -- the models --------------------------------------------------------------------------------------

def init_weights(model: str, hidden: int, seed: int = 1):
    rng = np.random.default_rng(seed)

    def glorot(*shape, fan_in, fan_out):
        lim = np.sqrt(6 / (fan_in + fan_out))
        return rng.uniform(-lim, lim, shape).astype(np.float32)
    if model == "mlp":
        return {"w1": glorot(784, hidden, fan_in=784, fan_out=hidden), "b1": np.zeros(hidden, np.float32),
                "w2": glorot(hidden, 10, fan_in=hidden, fan_out=10), "b2": np.zeros(10, np.float32)}
    return {"conv_w": glorot(8, 1, 3, 3, fan_in=9, fan_out=72), "conv_b": np.zeros(8, np.float32),
            "w2": glorot(8 * 13 * 13, 10, fan_in=8 * 13 * 13, fan_out=10), "b2": np.zeros(10, np.float32)}


def build(model: str, batch: int, weights: dict):
    """The ONNX model: logits, softmax, nll loss. Returns (proto, image id, label id, loss id, weight ids)."""
    b = popart.Builder()
    img = b.addInputTensor(popart.TensorInfo("FLOAT", [batch, 1, 28, 28]), "image")
    lbl = b.addInputTensor(popart.TensorInfo("INT32", [batch]), "label")
    ids = {k: b.addInitializedInputTensor(v, k) for k, v in weights.items()}
    if model == "mlp":
        x = b.reshape_const(b.aiOnnx, [img], [batch, 784])
        x = b.aiOnnx.relu([b.aiOnnx.gemm([x, ids["w1"], ids["b1"]])])
    else:
        with b.nameScope("conv"):
            x = b.aiOnnx.conv([img, ids["conv_w"], ids["conv_b"]], kernel_shape=[3, 3], strides=[1, 1],
                              pads=[0, 0, 0, 0])
            x = b.aiOnnx.relu([x])
            x = b.aiOnnx.maxpool([x], 1, kernel_shape=[2, 2], strides=[2, 2])[0]
        x = b.aiOnnx.flatten([x], axis=1)
    logits = b.aiOnnx.gemm([x, ids["w2"], ids["b2"]])
    probs = b.aiOnnx.softmax([logits], axis=1)
    loss = b.aiGraphcore.nllloss([probs, lbl], popart.ReductionType.Mean)
    return b.getModelProto(), img, lbl, loss, ids


# -- NumPy: the same step -------------------------------------------------------------------------------

def _windows(x, k):  # (N, C, H, W) -> (N, C, H-k+1, W-k+1, k, k)
    return np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))


def numpy_grads(model: str, w: dict, x: np.ndarray, y: np.ndarray):
    """(loss, gradients) of the model in float64."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    n = x.shape[0]
    g = {}
    if model == "mlp":
        a0 = x.reshape(n, 784).astype(np.float64)
        z1 = a0 @ w["w1"] + w["b1"]
        a1 = np.maximum(z1, 0)
    else:
        win = _windows(x.astype(np.float64), 3)                       # (n, 1, 26, 26, 3, 3)
        z1 = np.einsum("nchwij,ocij->nohw", win, w["conv_w"]) + w["conv_b"][None, :, None, None]
        r = np.maximum(z1, 0)
        blocks = r.reshape(n, 8, 13, 2, 13, 2)
        pooled = blocks.max(axis=(3, 5))
        a1 = pooled.reshape(n, -1)
    z2 = a1 @ w["w2"] + w["b2"]
    e = np.exp(z2 - z2.max(1, keepdims=True))
    p = e / e.sum(1, keepdims=True)
    loss = -np.log(p[np.arange(n), y]).mean()
    dz2 = p.copy()
    dz2[np.arange(n), y] -= 1
    dz2 /= n
    g["w2"], g["b2"] = a1.T @ dz2, dz2.sum(0)
    da1 = dz2 @ w["w2"].T
    if model == "mlp":
        dz1 = da1 * (z1 > 0)
        g["w1"], g["b1"] = a0.T @ dz1, dz1.sum(0)
    else:
        dpool = da1.reshape(n, 8, 13, 13)
        mask = blocks == pooled[:, :, :, None, :, None]
        mask = mask / mask.sum(axis=(3, 5), keepdims=True)       # ties share (measure zero with real data)
        dr = (mask * dpool[:, :, :, None, :, None]).reshape(n, 8, 26, 26)
        dz1 = dr * (z1 > 0)
        g["conv_w"] = np.einsum("nchwij,nohw->ocij", win, dz1)
        g["conv_b"] = dz1.sum((0, 2, 3))
    return loss, g


def numpy_update(optimizer: str, w: dict, g: dict, lr: float, t: int = 1, state=None):
    if optimizer == "sgd":
        return {k: w[k] - lr * g[k] for k in w}
    b1, b2, eps = 0.9, 0.999, 1e-6
    out = {}
    for k in w:  # Adam, first step from zero moments
        m = (1 - b1) * g[k]
        v = (1 - b2) * g[k] ** 2
        out[k] = w[k] - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    return out


def make_optimizer(name: str, lr: float):
    if name == "sgd":
        return popart.SGD({"defaultLearningRate": (lr, False)})
    return popart.Adam({"defaultLearningRate": (lr, False), "defaultBeta1": (0.9, True),
                        "defaultBeta2": (0.999, True), "defaultEps": (1e-6, True)}, mode=popart.AdamMode.Adam)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    ap.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--batches-per-step", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--tiles", type=int, default=1472, help="tiles of the simulated IPU (1472: a full GC200)")
    args = ap.parse_args(argv)
    lr = args.lr if args.lr is not None else (0.05 if args.optimizer == "sgd" else 0.002)
    B, bps = args.batch_size, args.batches_per_step
    images, labels = synthetic_mnist(B * bps * args.steps + B)
    images = images.reshape(-1, 1, 28, 28)
    weights = init_weights(args.model, args.hidden)
    proto, img, lbl, loss, ids = build(args.model, B, weights)

    device = popart.DeviceManager().createIpuModelDevice({"numIPUs": 1, "tilesPerIPU": args.tiles})
    # step 1: one batch per run, checked against NumPy
    check = popart.TrainingSession(proto, popart.DataFlow(1, {loss: popart.AnchorReturnType("All")}), loss,
                                   make_optimizer(args.optimizer, lr), device)
    check.prepareDevice()
    check.weightsFromHost()
    anchors = check.initAnchorArrays()
    x0, y0 = images[:B], labels[:B]
    check.run(popart.PyStepIO({img: x0, lbl: y0}, anchors))
    check.weightsToHost()
    got = {k: np.zeros_like(v) for k, v in weights.items()}
    check.readWeights(popart.PyWeightsIO(got))
    ref_loss, grads = numpy_grads(args.model, weights, x0, y0)
    ref = numpy_update(args.optimizer, {k: v.astype(np.float64) for k, v in weights.items()}, grads, lr)
    step_diff = max(float(np.abs(got[k] - ref[k]).max()) for k in ref)
    loss_diff = abs(float(anchors[loss]) - ref_loss)
    console.print(f"{args.model} / {args.optimizer}: step 1 against NumPy: loss {float(anchors[loss]):.5f} "
                  f"(NumPy {ref_loss:.5f}), largest weight difference {step_diff:.2g}")

    # training: batchesPerStep batches per run, the loss of every batch back to the host
    session = popart.TrainingSession(proto, popart.DataFlow(bps, {loss: popart.AnchorReturnType("All")}), loss,
                                     make_optimizer(args.optimizer, lr), device)
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    losses = []
    for s in range(args.steps):
        lo = B + s * B * bps
        xs = images[lo:lo + B * bps].reshape(bps, B, 1, 28, 28)
        ys = labels[lo:lo + B * bps].reshape(bps, B)
        session.run(popart.PyStepIO({img: xs, lbl: ys}, anchors))
        losses.extend(float(v) for v in anchors[loss])
    k = max(1, len(losses) // 5)
    first, last = float(np.mean(losses[:k])), float(np.mean(losses[-k:]))
    console.print(f"loss {first:.3f} -> {last:.3f} over {len(losses)} batches "
                  f"({session._session.total_cycles:,} simulated cycles)")
    return {"step_diff": step_diff, "loss_diff": loss_diff, "first": first, "last": last, "losses": losses}


if __name__ == "__main__":
    res = main()
    assert res["step_diff"] < 1e-4 and res["last"] < res["first"], res
