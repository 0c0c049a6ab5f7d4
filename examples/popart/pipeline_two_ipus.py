"""A two-stage pipelined model over 2 IPUs, trained with gradient accumulation, in PopART.

    python examples/popart/pipeline_two_ipus.py [--steps 8] [--accumulation 4] [--batch-size 8]

`builder.virtualGraph(n)` / `builder.pipelineStage(n)` put the first layer on IPU 0 and the
second layer and the loss on IPU 1; SessionOptions turn on Manual virtual graphs, pipelining and
gradient accumulation. Activations cross to IPU 1 and gradients back over the IPU-Links. The
weights after training are checked against NumPy doing the same accumulated SGD (a pipeline
computes exactly what sequential gradient accumulation computes). The simulator runs the stages'
micro-batches one after another: numbers and per-op cycles are those of the pipeline's work,
the overlap of the two IPUs in time is not modelled.
"""
from __future__ import annotations

import argparse

import numpy as np
from rich.console import Console

import popart

console = Console()


def build(batch, features, hidden, classes, weights):
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [batch, features]), "x")
    y = b.addInputTensor(popart.TensorInfo("INT32", [batch]), "labels")
    with b.virtualGraph(0), b.pipelineStage(0):
        w0 = b.addInitializedInputTensor(weights["w0"], "w0")
        b0 = b.addInitializedInputTensor(weights["b0"], "b0")
        h = b.aiOnnx.relu([b.aiOnnx.add([b.aiOnnx.matmul([x, w0]), b0])])
    with b.virtualGraph(1), b.pipelineStage(1):
        w1 = b.addInitializedInputTensor(weights["w1"], "w1")
        logits = b.aiOnnx.matmul([h, w1])
        probs = b.aiOnnx.softmax([logits], axis=1)
        loss = b.aiGraphcore.nllloss([probs, y], popart.ReductionType.Mean)
    return b.getModelProto(), x, y, loss


def numpy_step(w, xs, ys, lr):
    """One optimizer step from the gradients summed over the micro-batches (PopART's default)."""
    g = {k: np.zeros_like(v, dtype=np.float64) for k, v in w.items()}
    losses = []
    for x, y in zip(xs, ys):
        z0 = x @ w["w0"] + w["b0"]
        h = np.maximum(z0, 0)
        z = h @ w["w1"]
        e = np.exp(z - z.max(1, keepdims=True))
        p = e / e.sum(1, keepdims=True)
        n = len(y)
        losses.append(-np.log(p[np.arange(n), y]).mean())
        dz = p.copy()
        dz[np.arange(n), y] -= 1
        dz /= n
        g["w1"] += h.T @ dz
        dh = dz @ w["w1"].T * (z0 > 0)
        g["w0"] += x.T @ dh
        g["b0"] += dh.sum(0)
    return {k: w[k] - lr * g[k] for k in w}, losses


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--accumulation", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--features", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--tiles", type=int, default=1472)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    B, F, H, C, A = args.batch_size, args.features, args.hidden, 10, args.accumulation
    weights = {"w0": (rng.normal(size=(F, H)) / np.sqrt(F)).astype(np.float32), "b0": np.zeros(H, np.float32),
               "w1": (rng.normal(size=(H, C)) / np.sqrt(H)).astype(np.float32)}
    centres = rng.normal(size=(C, F)).astype(np.float32)
    labels = rng.integers(0, C, (args.steps, A, B)).astype(np.int32)
    data = (centres[labels] + rng.normal(0, 0.5, labels.shape + (F,))).astype(np.float32)

    proto, x, y, loss = build(B, F, H, C, weights)
    opts = popart.SessionOptions()
    opts.virtualGraphMode = popart.VirtualGraphMode.Manual
    opts.enablePipelining = True
    opts.enableGradientAccumulation = True
    opts.accumulationFactor = A
    opts.instrumentWithHardwareCycleCounter = True
    device = popart.DeviceManager().createIpuModelDevice({"numIPUs": 2, "tilesPerIPU": args.tiles})
    session = popart.TrainingSession(proto, popart.DataFlow(1, {loss: popart.AnchorReturnType("All")}), loss,
                                     popart.SGD({"defaultLearningRate": (args.lr, True)}), device, userOptions=opts)
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    ref = {k: v.astype(np.float64) for k, v in weights.items()}
    losses, ref_losses, cycles = [], [], 0
    for s in range(args.steps):
        session.run(popart.PyStepIO({x: data[s], y: labels[s]}, anchors))
        cycles += session.getCycleCount()
        losses.extend(anchors[loss].tolist())
        ref, rl = numpy_step(ref, data[s], labels[s], args.lr)
        ref_losses.extend(rl)
    session.weightsToHost()
    got = {k: np.zeros_like(v) for k, v in weights.items()}
    session.readWeights(popart.PyWeightsIO(got))
    diff = max(float(np.abs(got[k] - ref[k]).max()) for k in ref)
    console.print(f"2 IPUs, {A} micro-batches per step: loss {np.mean(losses[:A]):.3f} -> {np.mean(losses[-A:]):.3f} "
                  f"(NumPy {np.mean(ref_losses[:A]):.3f} -> {np.mean(ref_losses[-A:]):.3f}); largest weight "
                  f"difference from NumPy {diff:.2g}")
    console.print(f"{cycles:,} cycles for {args.steps} steps ({cycles // args.steps:,} per step)")
    return {"losses": losses, "ref_losses": ref_losses, "max_diff": diff, "num_ipus": device.numIpus,
            "cycles": cycles}


if __name__ == "__main__":
    res = main()
    assert res["max_diff"] < 1e-4 and res["num_ipus"] == 2, res
