"""Data-parallel training over 4 replicas with PopART's replicated graphs.

    python examples/popart/replicated_training.py [--replicas 4] [--steps 10] [--batch-size 8]

`SessionOptions.enableReplicatedGraphs` / `replicatedGraphCount` run the model on every replica
(one simulated IPU each); each run feeds each replica its own batch (inputs shaped
[batchesPerStep, replicas, ...]) and the gradients are summed over the replicas with a
replicated all-reduce over the IPU-Links before the SGD update (PopART's default
accumulationAndReplicationReductionType, Sum). The weights after training are compared with
NumPy doing the same; all replicas hold the same weights.
"""
from __future__ import annotations

import argparse

import numpy as np
from rich.console import Console

import popart

console = Console()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batches-per-step", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--features", type=int, default=16)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--tiles", type=int, default=1472)
    args = ap.parse_args(argv)
    R, B, F, bps = args.replicas, args.batch_size, args.features, args.batches_per_step
    rng = np.random.default_rng(0)
    true_w = rng.normal(size=(F, 1)).astype(np.float32)
    w0 = np.zeros((F, 1), np.float32)

    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [B, F]), "x")
    t = b.addInputTensor(popart.TensorInfo("FLOAT", [B, 1]), "target")
    w = b.addInitializedInputTensor(w0, "w")
    err = b.aiOnnx.sub([b.aiOnnx.matmul([x, w]), t])
    loss = b.aiGraphcore.l1loss([err], 1.0, reduction=popart.ReductionType.Mean)

    opts = popart.SessionOptions()
    opts.enableReplicatedGraphs = True
    opts.replicatedGraphCount = R
    device = popart.DeviceManager().createIpuModelDevice({"numIPUs": R, "tilesPerIPU": args.tiles})
    session = popart.TrainingSession(b.getModelProto(), popart.DataFlow(bps, {loss: popart.AnchorReturnType("All")}),
                                     loss, popart.SGD({"defaultLearningRate": (args.lr, True)}), device,
                                     userOptions=opts)
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    assert anchors[loss].shape == ((bps, R) if bps > 1 else (R,))
    ref = w0.astype(np.float64)
    losses = []
    for s in range(args.steps):
        xs = rng.normal(size=(bps, R, B, F)).astype(np.float32)
        ts = (xs @ true_w).astype(np.float32)
        session.run(popart.PyStepIO({x: xs, t: ts}, anchors))
        losses.append(float(np.mean(anchors[loss])))
        for k in range(bps):  # NumPy: the L1 gradient of every replica, summed, then one update
            g = sum(xs[k, r].T @ np.sign(xs[k, r] @ ref - ts[k, r]) / B for r in range(R))
            ref = ref - args.lr * g
    session.weightsToHost()
    got = {"w": np.zeros_like(w0)}
    session.readWeights(popart.PyWeightsIO(got))
    diff = float(np.abs(got["w"] - ref).max())
    console.print(f"{R} replicas: loss {losses[0]:.3f} -> {losses[-1]:.3f}; largest weight difference from NumPy "
                  f"{diff:.2g}")
    return {"losses": losses, "max_diff": diff}


if __name__ == "__main__":
    res = main()
    assert res["max_diff"] < 1e-4 and res["losses"][-1] < res["losses"][0], res
