"""Data-parallel MNIST training on several replicas, the way PopXL scales a model out.

    python examples/data_parallel_mnist.py [--replicas 4] [--batch-size 8] [--steps 30] [--rts]
    poprun --num-instances 2 --num-replicas 4 python examples/data_parallel_mnist.py --popdist [--rts]

Every replica runs the MLP of examples/mnist.py on its own micro-batch; the gradients are averaged
over the replicas with `ops.collectives.replicated_all_reduce(g, "mean")` before the SGD update,
so all replicas keep the same weights, which are the weights one replica would reach on the
replicas x batch-size batch. The script trains both ways and compares them.

With --rts the weight matrices are replica-sharded variables (`popxl.replica_sharded_variable`):
each replica stores 1 / replicas of each matrix, gathers the whole matrix for the forward pass
(`replicated_all_gather`), and updates only its shard with the mean gradient's shard
(`replicated_reduce_scatter(..., "mean", configure_output_for_replicated_tensor_sharding=True)`),
as in the PopXL user guide's "MNIST with replication and RTS". The result is the same.

With --popdist the replicas come from PopRun (`popxl.Ir(replication="popdist")`): each instance
runs its own replicas on its share of every step's batch, the collectives cross the instances
through MPI, and at the end instance 0 trains the same model on all the replicas in one process
and checks the weights are bitwise identical (`--save FILE` keeps them in an .npz).
"""
from __future__ import annotations

import argparse
import os
import runpy
import time

import numpy as np
from rich.console import Console
from rich.table import Table

import popxl
import popxl.ops as ops
import popxl.transforms as transforms

console = Console()
_MNIST = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "mnist.py"), run_name="mnist_lib")
Net, init_weights, synthetic_mnist, fwd_bwd, NAMES = (_MNIST[k] for k in ("Net", "init_weights", "synthetic_mnist",
                                                                          "_fwd_bwd", "NAMES"))
SHARDED = ("fc1.W", "fc2.W")  # the matrices; the biases stay ordinary (replicated) variables


def train_ir(replicas, batch: int, hidden: int, lr: float, weights: dict, rts: bool = False):
    """An Ir of one SGD step on `replicas` replicas of `batch` images each (replicas="popdist":
    those PopRun describes)."""
    ir = popxl.Ir(replication=replicas)
    with ir.main_graph, popxl.in_sequence():
        img_stream = popxl.h2d_stream((batch, 28, 28), popxl.float32, "images")
        label_stream = popxl.h2d_stream((batch,), popxl.int32, "labels")
        handles, params, shards = {}, {}, {}
        for k, v in weights.items():
            if rts and k in SHARDED:
                handles[k], shards[k] = popxl.replica_sharded_variable(v, popxl.float32, name=k)
                params[k] = ops.collectives.replicated_all_gather(shards[k])  # the whole matrix, every replica
            else:
                handles[k] = params[k] = popxl.variable(v, name=k)
        images = ops.host_load(img_stream, "images")
        labels = ops.host_load(label_stream, "labels")

        net = Net(hidden)
        net_graph = ir.create_graph(net, popxl.TensorSpec((batch, 28, 28), popxl.float32))
        grad_info = transforms.autodiff(net_graph, grads_required=[net.fc1.W, net.fc1.b, net.fc2.W, net.fc2.b])
        loss, grads = fwd_bwd(net_graph, net, grad_info, params, images, labels)

        for k in NAMES:
            if k in shards:  # this replica's shard of the mean gradient updates its shard
                g = ops.collectives.replicated_reduce_scatter(grads[k], "mean",
                                                              configure_output_for_replicated_tensor_sharding=True)
                ops.scaled_add_(shards[k], g, b=-lr)
            else:  # the mean gradient over the replicas, on every replica
                g = ops.collectives.replicated_all_reduce(grads[k], "mean")
                ops.scaled_add_(handles[k], g, b=-lr)
        loss_stream = popxl.d2h_stream((), popxl.float32, "loss")
        ops.host_store(loss_stream, ops.collectives.replicated_all_reduce(loss, "mean"))
    return ir, {"images": img_stream, "labels": label_stream, "loss": loss_stream, "variables": handles}


def train(replicas, batch: int, hidden: int, lr: float, weights: dict, images: np.ndarray, labels: np.ndarray,
          steps: int, rts: bool = False, device: str = "ipu_model"):
    """Train for `steps` steps of replicas x batch images; returns (weights, losses, session).
    replicas="popdist": this PopRun instance's replicas of the global replication factor."""
    ir, h = train_ir(replicas, batch, hidden, lr, weights, rts)
    session = popxl.Session(ir, device)
    R, local = ir.replication_factor, ir.instance_replication_factor
    first = session._replica_offset  # this instance's first replica (0 without PopDist)
    per_step = R * batch
    losses = []
    with session:
        for s in range(steps):
            # replica r gets images [r b, (r + 1) b) of the step's batch; an instance feeds its own
            x = images[s * per_step + first * batch:s * per_step + (first + local) * batch]
            y = labels[s * per_step + first * batch:s * per_step + (first + local) * batch]
            if local > 1:
                x, y = x.reshape(local, batch, 28, 28), y.reshape(local, batch)
            out = session.run({h["images"]: x, h["labels"]: y})
            losses.append(float(np.ravel(out[h["loss"]])[0]))
    trained = {k: session.get_tensor_data(v) for k, v in h["variables"].items()}
    return trained, losses, session


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=8, help="images per replica per step")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--rts", action="store_true", help="replica-shard the weight matrices")
    ap.add_argument("--device", default="ipu_model")
    ap.add_argument("--popdist", action="store_true", help="take the replicas from PopRun (run under poprun)")
    ap.add_argument("--save", metavar="FILE.npz", help="write the trained weights (instance 0 with --popdist)")
    args = ap.parse_args(argv)
    if args.popdist:
        return main_popdist(args)

    R, b = args.replicas, args.batch_size
    x_tr, y_tr, _, _ = synthetic_mnist(R * b * args.steps, 1)
    weights = init_weights(args.hidden)

    t0 = time.perf_counter()
    par, par_losses, sess = train(R, b, args.hidden, args.lr, weights, x_tr, y_tr, args.steps, args.rts, args.device)
    t_par = time.perf_counter() - t0
    t0 = time.perf_counter()
    one, one_losses, sess1 = train(1, R * b, args.hidden, args.lr, weights, x_tr, y_tr, args.steps, False, args.device)
    t_one = time.perf_counter() - t0

    diff = max(float(np.abs(par[k] - one[k]).max()) for k in NAMES)
    mode = "RTS (sharded weight matrices)" if args.rts else "all-reduced gradients"
    table = Table(title=f"Data-parallel MNIST: {R} replicas x {b} images vs 1 replica x {R * b} images, "
                        f"{args.steps} SGD steps ({mode})")
    for col in ("run", "IPUs", "first loss", "last loss", "simulated cycles / step", "host seconds"):
        table.add_column(col, justify="right")
    table.add_row(f"{R} replicas", str(sess.num_ipus), f"{par_losses[0]:.4f}", f"{par_losses[-1]:.4f}",
                  f"{sess.total_cycles // args.steps:,}", f"{t_par:.1f}")
    table.add_row("1 replica", str(sess1.num_ipus), f"{one_losses[0]:.4f}", f"{one_losses[-1]:.4f}",
                  f"{sess1.total_cycles // args.steps:,}", f"{t_one:.1f}")
    console.print(table)
    console.print(f"largest weight difference after training: {diff:.3g}")
    return {"replicated": par, "single": one, "max_diff": diff, "losses": par_losses, "single_losses": one_losses,
            "cycles_per_step": sess.total_cycles // args.steps}


def main_popdist(args):
    """Train on the replicas PopRun describes; instance 0 checks the weights against one process."""
    import popdist

    R, b = popdist.getNumTotalReplicas(), args.batch_size
    x_tr, y_tr, _, _ = synthetic_mnist(R * b * args.steps, 1)
    weights = init_weights(args.hidden)
    t0 = time.perf_counter()
    par, losses, sess = train("popdist", b, args.hidden, args.lr, weights, x_tr, y_tr, args.steps, args.rts,
                              args.device)
    t_par = time.perf_counter() - t0
    mpi = sess._comm.stats() if sess._comm is not None else {"mpi_seconds": 0.0, "mpi_calls": 0}
    me = popdist.getInstanceIndex()
    console.print(f"instance {me} of {popdist.getNumInstances()}: replicas {sess._replica_offset}.."
                  f"{sess._replica_offset + sess.replication_factor - 1} of {R}, loss {losses[0]:.4f} -> "
                  f"{losses[-1]:.4f}, {sess.total_cycles // args.steps:,} cycles / step, {t_par:.1f} s "
                  f"({mpi['mpi_seconds']:.3f} s in {mpi['mpi_calls']} MPI calls)", soft_wrap=True)
    result = {"replicated": par, "losses": losses, "cycles_per_step": sess.total_cycles // args.steps}
    if me != 0:
        return result
    if args.save:
        np.savez(args.save, **par)
    one, one_losses, _ = train(R, b, args.hidden, args.lr, weights, x_tr, y_tr, args.steps, args.rts, args.device)
    same = all(np.array_equal(par[k].view(np.uint8), one[k].view(np.uint8)) for k in NAMES)
    console.print(f"weights after {args.steps} steps on {popdist.getNumInstances()} instances vs {R} replicas in one "
                  f"process: {'bitwise identical' if same else 'DIFFERENT'}", soft_wrap=True)
    result.update(single=one, identical=same)
    return result


if __name__ == "__main__":
    if main().get("identical") is False:  # poprun then reports instance 0 as failed
        raise SystemExit("the instances' weights differ from one process's")
