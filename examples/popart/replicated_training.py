"""Data-parallel training over 4 replicas with PopART's replicated graphs.

    python examples/popart/replicated_training.py [--replicas 4] [--steps 10] [--batch-size 8]
    poprun --num-instances 2 --num-replicas 4 python examples/popart/replicated_training.py --popdist

`SessionOptions.enableReplicatedGraphs` / `replicatedGraphCount` run the model on every replica
(one simulated IPU each); each run feeds each replica its own batch (inputs shaped
[batchesPerStep, replicas, ...]) and the gradients are summed over the replicas with a
replicated all-reduce over the IPU-Links before the SGD update (PopART's default
accumulationAndReplicationReductionType, Sum). With `--popdist` under poprun, each instance runs
its share of the replicas (`popdist.popart.configureSessionOptions` / `getDevice`) and the
all-reduce reaches the other instances' replicas over MPI. The weights after training are
compared with NumPy doing the same.
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
    ap.add_argument("--popdist", action="store_true", help="run under poprun: this instance's replicas only")
    ap.add_argument("--save", default=None, help="write the trained weight to this .npy file")
    args = ap.parse_args(argv)
    B, F, bps = args.batch_size, args.features, args.batches_per_step
    opts = popart.SessionOptions()
    if args.popdist:
        import popdist
        import popdist.popart
        popdist.popart.configureSessionOptions(opts)
        R, local, offset = popdist.getNumTotalReplicas(), popdist.getNumLocalReplicas(), popdist.getReplicaIndexOffset()
        device = popdist.popart.getDevice()
    else:
        R = local = args.replicas
        offset = 0
        opts.enableReplicatedGraphs = True
        opts.replicatedGraphCount = R
        device = popart.DeviceManager().createIpuModelDevice({"numIPUs": R, "tilesPerIPU": args.tiles})
    rng = np.random.default_rng(0)
    true_w = rng.normal(size=(F, 1)).astype(np.float32)
    w0 = np.zeros((F, 1), np.float32)

    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [B, F]), "x")
    t = b.addInputTensor(popart.TensorInfo("FLOAT", [B, 1]), "target")
    w = b.addInitializedInputTensor(w0, "w")
    err = b.aiOnnx.sub([b.aiOnnx.matmul([x, w]), t])
    loss = b.aiGraphcore.l1loss([err], 1.0, reduction=popart.ReductionType.Mean)

    session = popart.TrainingSession(b.getModelProto(), popart.DataFlow(bps, {loss: popart.AnchorReturnType("All")}),
                                     loss, popart.SGD({"defaultLearningRate": (args.lr, True)}), device,
                                     userOptions=opts)
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    lead = tuple(d for d in (bps, local) if d > 1)
    assert anchors[loss].shape == lead
    ref = w0.astype(np.float64)
    losses = []
    for s in range(args.steps):
        xs = rng.normal(size=(bps, R, B, F)).astype(np.float32)  # every replica's batches; this instance
        ts = (xs @ true_w).astype(np.float32)                     # feeds its own
        mine = slice(offset, offset + local)
        session.run(popart.PyStepIO({x: xs[:, mine].reshape(lead + (B, F)), t: ts[:, mine].reshape(lead + (B, 1))},
                                    anchors))
        losses.append(float(np.mean(anchors[loss])))
        for k in range(bps):  # NumPy: the L1 gradient of every replica, summed, then one update
            g = sum(xs[k, r].T @ np.sign(xs[k, r] @ ref - ts[k, r]) / B for r in range(R))
            ref = ref - args.lr * g
    session.weightsToHost()
    got = {"w": np.zeros_like(w0)}
    session.readWeights(popart.PyWeightsIO(got))
    diff = float(np.abs(got["w"] - ref).max())
    where = f"replicas {offset}..{offset + local - 1} of {R}" if args.popdist else f"{R} replicas"
    console.print(f"{where}: loss {losses[0]:.3f} -> {losses[-1]:.3f}; largest weight difference from NumPy "
                  f"{diff:.2g}")
    if args.save:
        np.save(args.save, got["w"])
    return {"losses": losses, "max_diff": diff, "weights": got["w"]}


if __name__ == "__main__":
    res = main()
    assert res["max_diff"] < 1e-4 and res["losses"][-1] < res["losses"][0], res
