"""Wall time of a PopART MNIST training step on the simulated GC200, next to NumPy doing the same step.

    python benchmarks/bench_popart.py [--batches 32 128] [--hidden 256] [--steps 10]

The model is examples/popart/mnist.py's MLP (784-hidden-10, relu, softmax + NLL) built with
popart.Builder and trained by a TrainingSession with SGD. Prints the time to build the session
(ONNX check and translation into the popxl IR), to compile it (prepareDevice: lowering and
ipu.compile), the wall time of one `session.run` (median of --steps) and of the same maths in
NumPy (float32), their ratio, and the simulated cycles per step.
"""
from __future__ import annotations

import argparse
import os
import runpy
import sys
import time

import _timing  # noqa: E402  (before NumPy)

_timing.one_blas_thread()  # as bench_mnist.py (the same step written in popxl)

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import popart  # noqa: E402

example = runpy.run_path(os.path.join(ROOT, "examples", "popart", "mnist.py"), run_name="bench")


def numpy_step(w, x, y, lr):
    """The same SGD step in NumPy float32; updates w in place, returns the loss."""
    n = len(x)
    a0 = x.reshape(n, -1)
    z1 = a0 @ w["w1"] + w["b1"]
    a1 = np.maximum(z1, 0)
    z2 = a1 @ w["w2"] + w["b2"]
    e = np.exp(z2 - z2.max(1, keepdims=True))
    p = e / e.sum(1, keepdims=True)
    loss = -np.log(p[np.arange(n), y]).mean()
    d = p
    d[np.arange(n), y] -= 1
    d /= n
    g = {"w2": a1.T @ d, "b2": d.sum(0)}
    dz1 = (d @ w["w2"].T) * (z1 > 0)
    g["w1"], g["b1"] = a0.T @ dz1, dz1.sum(0)
    for k in w:
        w[k] -= lr * g[k]
    return loss


def bench(batch, hidden, steps, lr=0.05):
    weights = example["init_weights"]("mlp", hidden)
    x, y = example["synthetic_mnist"](batch * steps)
    x = x.reshape(-1, 1, 28, 28)
    t0 = time.perf_counter()
    proto, img, lbl, loss, _ = example["build"]("mlp", batch, weights)
    device = popart.DeviceManager().createIpuModelDevice({"numIPUs": 1})
    opts = popart.SessionOptions()
    opts.instrumentWithHardwareCycleCounter = True
    session = popart.TrainingSession(proto, popart.DataFlow(1, [loss]), loss,
                                     popart.SGD({"defaultLearningRate": (lr, True)}), device, userOptions=opts)
    t1 = time.perf_counter()
    session.prepareDevice()
    session.weightsFromHost()
    t2 = time.perf_counter()
    anchors = session.initAnchorArrays()
    times, cycles = [], 0
    for s in range(steps):
        sl = slice(s * batch, (s + 1) * batch)
        t = time.perf_counter()
        session.run(popart.PyStepIO({img: x[sl], lbl: y[sl]}, anchors))
        times.append(time.perf_counter() - t)
        cycles = session.getCycleCount()
    w = {k: v.copy() for k, v in weights.items()}
    numpy_step({k: v.copy() for k, v in w.items()}, x[:batch], y[:batch], lr)  # warm-up, as the first run above
    np_times = []
    for s in range(steps):
        sl = slice(s * batch, (s + 1) * batch)
        t = time.perf_counter()
        numpy_step(w, x[sl], y[sl], lr)
        np_times.append(time.perf_counter() - t)
    st, nt = _timing.Spread(times[1:] or times), _timing.Spread(np_times)
    return {"build": t1 - t0, "compile": t2 - t1, "step": st.median, "numpy": nt.median, "cycles": cycles,
            "step_spread": st, "numpy_spread": nt}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[32, 128])
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args(argv)
    table = Table(title=f"PopART MNIST MLP training step (784-{args.hidden}-10) on a simulated GC200")
    for col in ("batch", "build s", "compile s", "step", "NumPy", "ratio", "cycles / step"):
        table.add_column(col, justify="right")
    rows = []
    for b in args.batches:
        r = bench(b, args.hidden, args.steps)
        rows.append(r)
        table.add_row(str(b), f"{r['build']:.2f}", f"{r['compile']:.2f}", r["step_spread"].ms(2),
                      r["numpy_spread"].ms(3), r["step_spread"].ratio(r["numpy_spread"]), f"{r['cycles']:,}")
    Console(width=max(Console().width, 170)).print(table)
    print(f"load average {_timing.load_average()} (steps: best, median (p10-p90))")
    return rows


if __name__ == "__main__":
    main()
