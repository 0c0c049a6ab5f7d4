"""A model split over two IPUs: the first layer on IPU 0, the second on IPU 1 (model sharding).

    python examples/pipeline_two_ipus.py [--steps 20] [--batch-size 16] [--hidden 128]

Ops created inside `with popxl.ipu(n):` run on IPU n, whose tiles hold their tensors; the
activations cross from IPU 0 to IPU 1 with `Tensor.copy_to_ipu` (`ops.ipu_copy`) and the gradients
cross back (autodiff turns each ipu_copy into a copy the other way). The replica takes two IPUs;
every copy between them goes over the IPU-Links, and the profile shows those exchanges and the
syncs across both IPUs. The script trains the MLP with SGD, checks the result against NumPy doing
the same arithmetic, and prints what the copies between the IPUs cost.
"""
from __future__ import annotations

import argparse

import numpy as np
from rich.console import Console

import popxl
import popxl.ops as ops
import popxl.transforms as transforms

console = Console()


def forward(x: popxl.Tensor, w0: popxl.Tensor, b0: popxl.Tensor, w1: popxl.Tensor, b1: popxl.Tensor):
    """Layer 1 on IPU 0, layer 2 on IPU 1; the hidden activations cross over the IPU-Links."""
    with popxl.ipu(0):
        h = ops.gelu(x @ w0 + b0)
        h1 = h.copy_to_ipu(1)
    with popxl.ipu(1):
        return h1 @ w1 + b1


def build(batch: int, features: int, hidden: int, classes: int, lr: float, weights: dict):
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence():
        x_stream = popxl.h2d_stream((batch, features), popxl.float32, "x")
        y_stream = popxl.h2d_stream((batch,), popxl.int32, "labels")
        with popxl.ipu(0):
            w0 = popxl.variable(weights["w0"], name="w0")
            b0 = popxl.variable(weights["b0"], name="b0")
            x = ops.host_load(x_stream, "x")
        with popxl.ipu(1):
            w1 = popxl.variable(weights["w1"], name="w1")
            b1 = popxl.variable(weights["b1"], name="b1")
            labels = ops.host_load(y_stream, "labels")
        spec = popxl.TensorSpec
        fwd = ir.create_graph(forward, spec((batch, features), popxl.float32), spec(w0.shape, popxl.float32),
                              spec(b0.shape, popxl.float32), spec(w1.shape, popxl.float32),
                              spec(b1.shape, popxl.float32))
        params = fwd.inputs[1:]
        bwd = transforms.autodiff(fwd, grads_required=list(params))
        fwd_info = ops.call_with_info(fwd, x, w0, b0, w1, b1)
        with popxl.ipu(1):
            probs = ops.softmax(fwd_info.outputs[0], axis=1)
            loss, dlogits = ops.nll_loss_with_softmax_grad(probs, labels)
        grads = ops.call(bwd.graph, dlogits, inputs_dict=bwd.inputs_dict(fwd_info))
        for var, g, ipu in zip((w0, b0, w1, b1), grads, (0, 0, 1, 1)):
            with popxl.ipu(ipu):
                ops.scaled_add_(var, g, b=-lr)
        with popxl.ipu(1):
            loss_stream = popxl.d2h_stream((), popxl.float32, "loss")
            ops.host_store(loss_stream, loss)
    return ir, x_stream, y_stream, loss_stream, {"w0": w0, "b0": b0, "w1": w1, "b1": b1}


def numpy_step(w: dict, x: np.ndarray, y: np.ndarray, lr: float):
    """The same SGD step in NumPy (tanh-approximated gelu, as PopXL's gelu)."""
    z0 = x @ w["w0"] + w["b0"]
    c = np.sqrt(2 / np.pi)
    t = np.tanh(c * (z0 + 0.044715 * z0 ** 3))
    h = 0.5 * z0 * (1 + t)
    z = h @ w["w1"] + w["b1"]
    e = np.exp(z - z.max(1, keepdims=True))
    p = e / e.sum(1, keepdims=True)
    n = x.shape[0]
    loss = -np.log(p[np.arange(n), y]).mean()
    dz = p.copy()
    dz[np.arange(n), y] -= 1
    dz /= n
    gw1, gb1 = h.T @ dz, dz.sum(0)
    dh = dz @ w["w1"].T
    dgelu = 0.5 * (1 + t) + 0.5 * z0 * (1 - t ** 2) * c * (1 + 3 * 0.044715 * z0 ** 2)
    dz0 = dh * dgelu
    gw0, gb0 = x.T @ dz0, dz0.sum(0)
    new = {"w0": w["w0"] - lr * gw0, "b0": w["b0"] - lr * gb0, "w1": w["w1"] - lr * gw1, "b1": w["b1"] - lr * gb1}
    return {k: v.astype(np.float32) for k, v in new.items()}, float(loss)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--device", default="ipu_model")
    args = ap.parse_args(argv)

    rng = np.random.default_rng(0)
    F, H, C, B = args.features, args.hidden, args.classes, args.batch_size
    centres = rng.normal(0, 1, (C, F)).astype(np.float32)
    labels = rng.integers(0, C, B * args.steps).astype(np.int32)
    data = (centres[labels] + rng.normal(0, 0.7, (labels.size, F))).astype(np.float32)
    weights = {"w0": (rng.normal(0, 1, (F, H)) / np.sqrt(F)).astype(np.float32), "b0": np.zeros(H, np.float32),
               "w1": (rng.normal(0, 1, (H, C)) / np.sqrt(H)).astype(np.float32), "b1": np.zeros(C, np.float32)}

    ir, xs, ys, ls, variables = build(B, F, H, C, args.lr, weights)
    session = popxl.Session(ir, args.device)
    ref = dict(weights)
    losses, ref_losses = [], []
    with session:
        for s in range(args.steps):
            x, y = data[s * B:(s + 1) * B], labels[s * B:(s + 1) * B]
            losses.append(float(session.run({xs: x, ys: y})[ls]))
            ref, rl = numpy_step(ref, x, y, args.lr)
            ref_losses.append(rl)
    trained = {k: session.get_tensor_data(v) for k, v in variables.items()}
    diff = max(float(np.abs(trained[k] - ref[k]).max()) for k in ref)

    exe = session.executable
    tpi = session.target.tiles_per_ipu
    on_ipu = {k: sorted(set((exe.layouts[session._lowered.variables[v].id].tiles // tpi).tolist()))
              for k, v in variables.items()}
    ran = np.flatnonzero(session.engine.step_counts())
    cross = [exe.steps[i] for i in ran.tolist() if "ipu_copy" in exe.steps[i].name]
    link_cycles = sum(st.cycles for st in cross if st.kind == "exchange")
    console.print(f"{session.num_ipus} IPUs ({session.target.name}, {tpi} tiles each); weights on IPUs {on_ipu}")
    console.print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f} (NumPy {ref_losses[0]:.4f} -> {ref_losses[-1]:.4f}); "
                  f"largest weight difference from NumPy {diff:.2g}")
    console.print(f"{session.total_cycles // args.steps:,} cycles per step; the copies between the IPUs "
                  f"(activations forward, gradients back) take {link_cycles:,} cycles per step")
    return {"losses": losses, "ref_losses": ref_losses, "max_diff": diff, "on_ipu": on_ipu, "num_ipus": session.num_ipus,
            "link_cycles": link_cycles}


if __name__ == "__main__":
    main()
