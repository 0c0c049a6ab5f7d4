"""Train an MLP on MNIST on the simulated IPU, the way the PopXL user guide's MNIST chapter does.

    python examples/mnist.py [--epochs 1] [--batch-size 32] [--optimizer sgd|adam] [--lr 0.05 | 0.002]
                             [--micro-batches 1] [--data-dir DIR] [--train-size N]

Linear modules with gelu, `call_with_info`, `transforms.autodiff`, `nll_loss_with_softmax_grad`
and an SGD update with `scaled_add_` (or Adam built from `var_updates`); with `--micro-batches K`
the gradients of K micro-batches are accumulated inside a `repeat` loop before each update. A
test Ir shares the trained weights. With MNIST's idx files (gzipped or not) in --data-dir it
trains on them; otherwise it makes a synthetic MNIST-like data set (no network needed).
"""
from __future__ import annotations

import argparse
import gzip
import os
import time
from typing import Dict, Tuple

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

import popxl
import popxl.ops as ops
import popxl.transforms as transforms
from popxl.ops import var_updates

console = Console()


# -- data -------------------------------------------------------------------------------------

def _read_idx(path: str) -> np.ndarray:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def _find(data_dir: str, stem: str):
    for name in (stem, stem + ".gz", stem.replace("-idx", ".idx"), stem.replace("-idx", ".idx") + ".gz"):
        p = os.path.join(data_dir, name)
        if os.path.exists(p):
            return p
    return None


def load_mnist(data_dir: str | None):
    """(train images, train labels, test images, test labels) from idx files, or None."""
    if not data_dir:
        return None
    stems = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
    paths = [_find(data_dir, s) for s in stems]
    if not all(paths):
        return None
    x_tr, y_tr, x_te, y_te = (_read_idx(p) for p in paths)
    return (x_tr.astype(np.float32) / 255.0, y_tr.astype(np.int32), x_te.astype(np.float32) / 255.0,
            y_te.astype(np.int32))


def synthetic_mnist(n_train: int, n_test: int, seed: int = 0):
    """An MNIST-like set: ten smooth 28 x 28 stroke templates, each sample a template shifted by a
    pixel or two, scaled, with noise, clipped to [0, 1]."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:28, 0:28]
    templates = np.zeros((10, 28, 28), np.float32)
    for c in range(10):
        for _ in range(3):  # three random strokes per class
            cy, cx = rng.uniform(7, 21, 2)
            ang = rng.uniform(0, np.pi)
            length = rng.uniform(5, 10)
            t = np.linspace(-0.5, 0.5, 24)[:, None, None] * length
            py, px = cy + t * np.sin(ang), cx + t * np.cos(ang)
            d2 = (yy[None] - py) ** 2 + (xx[None] - px) ** 2
            templates[c] = np.maximum(templates[c], np.exp(-d2 / 2.0).max(0))

    def make(n):
        labels = rng.integers(0, 10, n).astype(np.int32)
        imgs = templates[labels]
        shifts = rng.integers(-2, 3, (n, 2))
        out = np.empty_like(imgs)
        for i in range(n):
            out[i] = np.roll(imgs[i], tuple(shifts[i]), axis=(0, 1))
        out = out * rng.uniform(0.7, 1.2, (n, 1, 1)) + rng.normal(0, 0.15, out.shape)
        return np.clip(out, 0, 1).astype(np.float32), labels

    x_tr, y_tr = make(n_train)
    x_te, y_te = make(n_test)
    return x_tr, y_tr, x_te, y_te


# -- model ------------------------------------------------------------------------------------

class Linear(popxl.Module):
    def __init__(self):
        self.W: popxl.Tensor = None
        self.b: popxl.Tensor = None

    def build(self, x: popxl.Tensor, out_features: int, bias: bool = True) -> popxl.Tensor:
        self.W = popxl.graph_input((x.shape[-1], out_features), popxl.float32, "W")
        y = x @ self.W
        if bias:
            self.b = popxl.graph_input((out_features,), popxl.float32, "b")
            y = y + self.b
        return y


class Net(popxl.Module):
    def __init__(self, hidden: int = 256, activation: str = "gelu"):
        self.hidden = hidden
        self.activation = getattr(ops, activation)  # gelu or relu
        self.fc1 = Linear()
        self.fc2 = Linear()

    def build(self, x: popxl.Tensor) -> popxl.Tensor:
        x = x.reshape((-1, 28 * 28))
        x = self.activation(self.fc1(x, self.hidden))
        x = self.fc2(x, 10)
        return x


def init_weights(hidden: int, seed: int = 42) -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def glorot(fan_in, fan_out):
        lim = np.sqrt(6 / (fan_in + fan_out))
        return rng.uniform(-lim, lim, (fan_in, fan_out)).astype(np.float32)

    return {"fc1.W": glorot(784, hidden), "fc1.b": np.zeros(hidden, np.float32),
            "fc2.W": glorot(hidden, 10), "fc2.b": np.zeros(10, np.float32)}


def _net_inputs(net_graph, net: Net, variables: Dict[str, popxl.Variable]):
    return {net.fc1.W: variables["fc1.W"], net.fc1.b: variables["fc1.b"],
            net.fc2.W: variables["fc2.W"], net.fc2.b: variables["fc2.b"]}


def _fwd_bwd(net_graph, net, grad_info, variables, img, lbl):
    """Forward, loss and its gradient, backward: returns (loss, {name: gradient})."""
    fwd_info = ops.call_with_info(net_graph, img, inputs_dict=_net_inputs(net_graph, net, variables))
    probs = ops.softmax(fwd_info.outputs[0], axis=1)
    loss, dlogits = ops.nll_loss_with_softmax_grad(probs, lbl)
    bwd_info = ops.call_with_info(grad_info.graph, dlogits, inputs_dict=grad_info.inputs_dict(fwd_info))
    grads_by_input = grad_info.fwd_graph_ins_to_grad_parent_outs(bwd_info)
    weight_inputs = {"fc1.W": net.fc1.W, "fc1.b": net.fc1.b, "fc2.W": net.fc2.W, "fc2.b": net.fc2.b}
    return loss, {n: grads_by_input[w] for n, w in weight_inputs.items()}


NAMES = ("fc1.W", "fc1.b", "fc2.W", "fc2.b")


def train_ir(batch: int, hidden: int, lr: float, weights: Dict[str, np.ndarray], optimizer: str,
             micro_batches: int, activation: str = "gelu") -> Tuple[popxl.Ir, dict]:
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence():
        img_stream = popxl.h2d_stream((micro_batches, batch, 28, 28), popxl.float32, "images")
        label_stream = popxl.h2d_stream((micro_batches, batch), popxl.int32, "labels")
        variables = {k: popxl.variable(v, name=k) for k, v in weights.items()}
        images = ops.host_load(img_stream, "images")
        labels = ops.host_load(label_stream, "labels")

        net = Net(hidden, activation)
        net_graph = ir.create_graph(net, popxl.TensorSpec((batch, 28, 28), popxl.float32))
        # gradients of the weights only (the image needs none)
        grad_info = transforms.autodiff(net_graph, grads_required=[net.fc1.W, net.fc1.b, net.fc2.W, net.fc2.b])

        if micro_batches == 1:
            loss, grads = _fwd_bwd(net_graph, net, grad_info, variables, images.reshape((batch, 28, 28)),
                                   labels.reshape((batch,)))
        else:
            # gradient accumulation: a repeat loop over the micro-batches; the step counter, the
            # gradient accumulators and the loss sum are loop-carried
            def accumulate(step, g0, g1, g2, g3, loss_sum, imgs, lbls, w0, w1, w2, w3):
                img = ops.dynamic_slice(imgs, step, axes=[0], sizes=[1], no_overlap=True).reshape((batch, 28, 28))
                lbl = ops.dynamic_slice(lbls, step, axes=[0], sizes=[1], no_overlap=True).reshape((batch,))
                ws = dict(zip(NAMES, (w0, w1, w2, w3)))
                loss, grads = _fwd_bwd(net_graph, net, grad_info, ws, img, lbl)
                accs = [g + grads[n] for g, n in zip((g0, g1, g2, g3), NAMES)]
                return (step + popxl.constant(np.ones(1, np.int32), popxl.int32), *accs, loss_sum + loss)

            specs = [popxl.TensorSpec(variables[n].shape, popxl.float32) for n in NAMES]
            accum_graph = ir.create_graph(accumulate, popxl.TensorSpec((1,), popxl.int32), *specs,
                                          popxl.TensorSpec((), popxl.float32), images, labels, *specs)
            step0 = popxl.constant(np.zeros(1, np.int32), popxl.int32, name="step0")
            zeros = [ops.init(variables[n].shape, popxl.float32, f"zero_{n}") for n in NAMES]
            loss0 = ops.init((), popxl.float32, "zero_loss")
            outs = ops.repeat(accum_graph, micro_batches, step0, *zeros, loss0, images, labels,
                              *[variables[n] for n in NAMES])
            inv = 1.0 / micro_batches
            grads = {n: g * inv for n, g in zip(NAMES, outs[1:5])}
            loss = outs[5] * inv

        for n in NAMES:
            g = grads[n]
            if optimizer == "sgd":
                ops.scaled_add_(variables[n], g, b=-lr)
            else:  # Adam from var_updates, with bias correction
                m = popxl.variable(np.zeros_like(weights[n]), name=f"{n}.adam_m")
                v = popxl.variable(np.zeros_like(weights[n]), name=f"{n}.adam_v")
                t = popxl.variable(np.zeros((), np.float32), name=f"{n}.adam_step")
                var_updates.accumulate_moving_average_(m, g, f=0.9)
                var_updates.accumulate_moving_average_square_(v, g, f=0.999)
                upd = var_updates.adam_updater(m, v, time_step=t, beta1=0.9, beta2=0.999, epsilon=1e-7)
                var_updates.adam_var_update(variables[n], upd, None, None, learning_rate=lr)
        loss_stream = popxl.d2h_stream((), popxl.float32, "loss")
        ops.host_store(loss_stream, loss)
    return ir, {"images": img_stream, "labels": label_stream, "loss": loss_stream, "variables": variables}


def test_ir(batch: int, hidden: int, weights: Dict[str, np.ndarray]):
    ir = popxl.Ir()
    with ir.main_graph:
        img_stream = popxl.h2d_stream((batch, 28, 28), popxl.float32, "images")
        variables = {k: popxl.variable(v, name=k) for k, v in weights.items()}
        img = ops.host_load(img_stream, "images")
        net = Net(hidden)
        net_graph = ir.create_graph(net, img)
        logits = ops.call(net_graph, img, inputs_dict=_net_inputs(net_graph, net, variables))[0]
        pred = ops.argmax(logits, dim=1)
        out_stream = popxl.d2h_stream(pred.shape, pred.dtype, "predictions")
        ops.host_store(out_stream, pred)
    return ir, img_stream, out_stream, variables


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1 (a batch of 0 images trains nothing)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {v}")
    return v


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch-size", type=positive_int, default=32)
    ap.add_argument("--test-batch-size", type=positive_int, default=100)
    ap.add_argument("--epochs", type=positive_int, default=1)
    ap.add_argument("--lr", type=float, default=None, help="learning rate (default 0.05 for sgd, 0.002 for adam)")
    ap.add_argument("--hidden", type=positive_int, default=256)
    ap.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    ap.add_argument("--micro-batches", type=positive_int, default=1)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--train-size", type=positive_int, default=3200)
    ap.add_argument("--test-size", type=positive_int, default=1000)
    ap.add_argument("--device", default="ipu_model")
    args = ap.parse_args(argv)

    data = load_mnist(args.data_dir)
    if data is None:
        if args.data_dir:
            console.print(f"[yellow]No MNIST idx files in {args.data_dir}: using synthetic data[/yellow]")
        data = synthetic_mnist(args.train_size, args.test_size)
        source = "synthetic MNIST-like data"
    else:
        source = f"MNIST from {args.data_dir}"
    x_tr, y_tr, x_te, y_te = data
    if args.data_dir is not None and source.startswith("MNIST"):
        x_tr, y_tr = x_tr[:args.train_size], y_tr[:args.train_size]
        x_te, y_te = x_te[:args.test_size], y_te[:args.test_size]
    if args.lr is None:
        args.lr = 0.05 if args.optimizer == "sgd" else 0.002
    per_update = args.batch_size * args.micro_batches
    steps = len(x_tr) // per_update
    if steps == 0:
        ap.error(f"a training step takes {per_update} images (--batch-size x --micro-batches), more than the "
                 f"{len(x_tr)} training images: use a smaller batch or a larger --train-size")
    if args.test_batch_size > len(x_te):
        ap.error(f"--test-batch-size {args.test_batch_size} is more than the {len(x_te)} test images")

    weights = init_weights(args.hidden)
    ir, handles = train_ir(args.batch_size, args.hidden, args.lr, weights, args.optimizer, args.micro_batches)
    t0 = time.perf_counter()
    session = popxl.Session(ir, args.device)
    console.print(f"Training on {source}: {len(x_tr)} images, batch {args.batch_size} x {args.micro_batches} "
                  f"micro-batches, {args.optimizer}, lr {args.lr}, on a simulated {session.target.name} "
                  f"(compiled in {time.perf_counter() - t0:.2f} s)")
    losses = []
    with session:
        for epoch in range(args.epochs):
            order = np.random.default_rng(epoch).permutation(len(x_tr))
            epoch_losses = []
            with Progress(TextColumn("epoch {task.fields[epoch]}"), BarColumn(), TextColumn("loss {task.fields[loss]}"),
                          TimeRemainingColumn(), console=console, transient=True) as progress:
                task = progress.add_task("train", total=steps, epoch=epoch + 1, loss="-")
                for s in range(steps):
                    idx = order[s * per_update:(s + 1) * per_update]
                    imgs = x_tr[idx].reshape(args.micro_batches, args.batch_size, 28, 28)
                    lbls = y_tr[idx].reshape(args.micro_batches, args.batch_size)
                    out = session.run({handles["images"]: imgs, handles["labels"]: lbls})
                    epoch_losses.append(float(out[handles["loss"]]))
                    progress.update(task, advance=1, loss=f"{np.mean(epoch_losses[-20:]):.4f}")
            losses.append(float(np.mean(epoch_losses)))
            console.print(f"epoch {epoch + 1}: mean loss {losses[-1]:.4f} (first batches {np.mean(epoch_losses[:5]):.4f}, "
                          f"last {np.mean(epoch_losses[-5:]):.4f})")
        trained = {k: session.get_tensor_data(v) for k, v in handles["variables"].items()}

    # test with a separate Ir sharing the trained weights
    tb = args.test_batch_size
    tir, img_stream, pred_stream, _ = test_ir(tb, args.hidden, trained)
    test_session = popxl.Session(tir, args.device)
    correct = 0
    n_test = (len(x_te) // tb) * tb
    with test_session:
        for s in range(0, n_test, tb):
            pred = test_session.run({img_stream: x_te[s:s + tb]})[pred_stream]
            correct += int((pred == y_te[s:s + tb]).sum())
    accuracy = correct / max(n_test, 1)
    console.print(f"test accuracy: {accuracy * 100:.2f}% on {n_test} images")
    console.print(f"simulated: {session.total_cycles:,} cycles for {args.epochs * steps} training steps "
                  f"({session.total_cycles / max(args.epochs * steps, 1):,.0f} cycles per step)")
    return {"losses": losses, "accuracy": accuracy, "first_losses": epoch_losses[:5]}


if __name__ == "__main__":
    main()
