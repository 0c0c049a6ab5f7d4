"""Wall time of one MNIST training step on the simulated GC200, next to NumPy doing the same step
and next to the floor of a faithful simulator.

    python benchmarks/bench_mnist.py [--batches 32 128] [--hidden 256] [--steps 10] [--models relu gelu]

The step is examples/mnist.py's: forward (784-hidden-10 MLP with ReLU or gelu), softmax + NLL loss
and its gradient, backward, SGD update. Per row: the Session compile time, the wall time of one
`session.run` (a new batch each step, the loss read back) and of the same maths in NumPy (float32),
each as the best of --steps, the median and the 10th-90th percentile range, and the floor: the best
NumPy step plus a memcpy of the bytes the simulated program exchanges per step (what any simulator
that moves the program's data must pay), both measured in this run; then simulator / NumPy (best
over best, and median over median), simulator / floor, the same ratio in CPU time (all threads of
the process, medians: the figure a busy shared host disturbs least), the simulated cycles per step
and the bytes exchanged per step.
"""
from __future__ import annotations

import argparse
import os
import runpy
import sys
import time

import _timing  # noqa: E402  (before NumPy)

_timing.one_blas_thread()  # threads are the engine's business (Engine(threads=...))

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import popxl  # noqa: E402

mnist = runpy.run_path(os.path.join(ROOT, "examples", "mnist.py"), run_name="bench")

_C = np.float32(np.sqrt(2 / np.pi))


def numpy_step(w, x, y, lr, activation="gelu"):
    """The same SGD step in NumPy: returns the loss; updates w in place."""
    x = x.reshape(len(x), -1)
    h = x @ w["fc1.W"] + w["fc1.b"]
    if activation == "relu":
        g = np.maximum(h, 0)
    else:
        t = np.tanh(_C * (h + np.float32(0.044715) * h ** 3))
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
    if activation == "relu":
        dh = dg * (h > 0)
    else:
        dgelu = 0.5 * (1 + t) + 0.5 * h * (1 - t * t) * _C * (1 + 3 * np.float32(0.044715) * h * h)
        dh = dg * dgelu
    dW1 = x.T @ dh
    db1 = dh.sum(0)
    for k, gr in (("fc1.W", dW1), ("fc1.b", db1), ("fc2.W", dW2), ("fc2.b", db2)):
        w[k] -= lr * gr
    return loss


def exchanged_bytes_per_run(session) -> int:
    """Bytes the exchange steps of one run move (from how often each step ran)."""
    counts = session.engine.step_counts()
    moved = sum(int(counts[s.id]) * s.bytes_moved for s in session.executable.steps if s.kind == "exchange")
    return moved // max(session.engine.runs, 1)


def bench(batch, hidden, steps, activation="gelu", lr=0.05):
    weights = mnist["init_weights"](hidden)
    x, y, _, _ = mnist["synthetic_mnist"](batch * steps, 10)
    ir, h = mnist["train_ir"](batch, hidden, lr, weights, "sgd", 1, activation)
    t0 = time.perf_counter()
    session = popxl.Session(ir, "ipu_model")
    compile_s = time.perf_counter() - t0
    times, cpu = [], []
    with session:
        for s in range(steps):
            feed = {h["images"]: x[s * batch:(s + 1) * batch].reshape(1, batch, 28, 28),
                    h["labels"]: y[s * batch:(s + 1) * batch].reshape(1, batch)}
            t0, c0 = time.perf_counter(), time.process_time()
            loss = session.run(feed)[h["loss"]]
            float(np.asarray(loss).ravel()[0])  # read back, as a training loop logs it
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    cycles = session.total_cycles / steps
    moved = exchanged_bytes_per_run(session)
    w = {k: v.copy() for k, v in weights.items()}
    np_times, np_cpu = [], []
    for s in range(steps):
        t0, c0 = time.perf_counter(), time.process_time()
        numpy_step(w, x[s * batch:(s + 1) * batch], y[s * batch:(s + 1) * batch], lr, activation)
        np_times.append(time.perf_counter() - t0)
        np_cpu.append(time.process_time() - c0)
    # the best shows the code's own cost (the host is shared, and its noise only ever adds time), the
    # median and spread what a user's loop meets; the first run builds the step tables
    step = _timing.Spread(times[1:] if steps > 1 else times)
    np_step = _timing.Spread(np_times[1:] if steps > 1 else np_times)
    # CPU time (all threads of the process): what the step costs however busy the host is
    cpu_ratio = float(np.median(cpu[1:] if steps > 1 else cpu)) / max(float(np.median(np_cpu)), 1e-9)
    return dict(compile=compile_s, step=step, numpy=np_step, copy=_timing.memcpy_seconds(moved), cycles=cycles,
                moved=moved, target=session.target, cpu_ratio=cpu_ratio)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[32, 128])
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--models", nargs="+", default=["relu", "gelu"], choices=["relu", "gelu"])
    args = ap.parse_args(argv)
    table = Table(title=f"MNIST MLP 784-{args.hidden}-10 training step on a simulated GC200")
    for col in ("model", "batch", "Session compile", "step (sim)", "step (NumPy)", "floor", "sim / NumPy",
                "sim / floor", "CPU sim / NumPy", "cycles/step", "exchanged/step"):
        table.add_column(col, justify="right")
    results = []
    for model in args.models:
        for b in args.batches:
            r = bench(b, args.hidden, args.steps, model)
            floor = r["numpy"].best + r["copy"]
            r.update(model=model, batch=b, floor=floor)
            results.append(r)
            table.add_row(model, str(b), f"{r['compile']:.2f} s", r["step"].ms(1), r["numpy"].ms(2),
                          f"{floor * 1e3:.2f} ms ({r['numpy'].best * 1e3:.2f} + {r['copy'] * 1e3:.2f})",
                          r["step"].ratio(r["numpy"]), f"{r['step'].best / floor:.1f}x", f"{r['cpu_ratio']:.1f}x",
                          f"{r['cycles']:,.0f} ({r['cycles'] / r['target'].clock_hz * 1e6:.0f} us)",
                          f"{r['moved'] / 1e6:.1f} MB")
    Console(width=max(Console().width, 190)).print(table)
    print(f"host: {os.cpu_count()} CPUs, load average {_timing.load_average()} (steps: best, median (p10-p90))")
    return results


if __name__ == "__main__":
    main()
