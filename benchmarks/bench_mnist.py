"""Wall time of one MNIST training step on the simulated GC200, next to NumPy doing the same step.

    python benchmarks/bench_mnist.py [--batches 32 128] [--hidden 256] [--steps 10]

The step is examples/mnist.py's: forward (784-hidden-10 MLP with gelu), softmax + NLL loss and its
gradient, backward, SGD update. Prints the Session compile time, the wall time of one
`session.run` (median of --steps) and of the same maths in NumPy (float32), their ratio, and the
simulated cycles per step.
"""
from __future__ import annotations

import argparse
import os
import runpy
import sys
import time

import numpy as np
from rich.console import Console
from rich.table import Table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import popxl  # noqa: E402

mnist = runpy.run_path(os.path.join(ROOT, "examples", "mnist.py"), run_name="bench")


def numpy_step(w, x, y, lr):
    """The same SGD step in NumPy: returns the loss; updates w in place."""
    x = x.reshape(len(x), -1)
    h = x @ w["fc1.W"] + w["fc1.b"]
    c = np.float32(np.sqrt(2 / np.pi))
    t = np.tanh(c * (h + np.float32(0.044715) * h ** 3))
    g = 0.5 * h * (1 + t)
    logits = g @ w["fc2.W"] + w["fc2.b"]
    e = np.exp(logits - logits.max(1, keepdims=True))
    p = e / e.sum(1, keepdims=True)
    n = len(x)
    loss = -np.log(p[np.arange(n), y]).mean()
    d = p
    d[np.arange(n), y] -= 1
    d /= n
    dW2 = g.T @ d
    db2 = d.sum(0)
    dg = d @ w["fc2.W"].T
    dgelu = 0.5 * (1 + t) + 0.5 * h * (1 - t * t) * c * (1 + 3 * np.float32(0.044715) * h * h)
    dh = dg * dgelu
    dW1 = x.T @ dh
    db1 = dh.sum(0)
    for k, gr in (("fc1.W", dW1), ("fc1.b", db1), ("fc2.W", dW2), ("fc2.b", db2)):
        w[k] -= lr * gr
    return loss


def bench(batch, hidden, steps, lr=0.05):
    weights = mnist["init_weights"](hidden)
    x, y, _, _ = mnist["synthetic_mnist"](batch * steps, 10)
    t0 = time.perf_counter()
    ir, h = mnist["train_ir"](batch, hidden, lr, weights, "sgd", 1)
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    session = popxl.Session(ir, "ipu_model")
    compile_s = time.perf_counter() - t0
    times = []
    with session:
        for s in range(steps):
            feed = {h["images"]: x[s * batch:(s + 1) * batch].reshape(1, batch, 28, 28),
                    h["labels"]: y[s * batch:(s + 1) * batch].reshape(1, batch)}
            t0 = time.perf_counter()
            session.run(feed)
            times.append(time.perf_counter() - t0)
    cycles = session.total_cycles / steps
    w = {k: v.copy() for k, v in weights.items()}
    np_times = []
    for s in range(steps):
        t0 = time.perf_counter()
        numpy_step(w, x[s * batch:(s + 1) * batch], y[s * batch:(s + 1) * batch], lr)
        np_times.append(time.perf_counter() - t0)
    step = float(np.median(times[1:] if steps > 1 else times))
    np_step = float(np.median(np_times[1:] if steps > 1 else np_times))
    return build, compile_s, step, np_step, cycles, session.target


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[32, 128])
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args(argv)
    table = Table(title=f"MNIST MLP 784-{args.hidden}-10 training step on a simulated GC200")
    for col in ("batch", "IR build", "Session compile", "step (sim)", "step (NumPy)", "ratio", "cycles/step"):
        table.add_column(col, justify="right")
    results = []
    for b in args.batches:
        build, comp, step, np_step, cycles, target = bench(b, args.hidden, args.steps)
        results.append((b, step / np_step, comp))
        table.add_row(str(b), f"{build:.2f} s", f"{comp:.2f} s", f"{step * 1e3:.1f} ms", f"{np_step * 1e3:.2f} ms",
                      f"{step / np_step:.1f}x", f"{cycles:,.0f} ({cycles / target.clock_hz * 1e6:.0f} us)")
    Console().print(table)
    return results


if __name__ == "__main__":
    main()
