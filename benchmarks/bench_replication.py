"""What replication costs the simulator: host wall time of one training step of a small model on
1, 2, 4 and 8 replicas, and the simulated cycles of the step and of its collectives.

    python benchmarks/bench_replication.py [--replicas 1 2 4 8] [--batch-size 8] [--hidden 64] [--steps 10]

The step is examples/data_parallel_mnist.py's (the MNIST MLP of examples/mnist.py, gradients
averaged with replicated_all_reduce before SGD), on the simulated GC200. Every replica runs the
same program on its own memory, so the host time grows with the number of replicas: 8 replicas of
the default small model cost about 8 x one. The simulated cycles per step stay nearly flat: the
replicas run in parallel on the machine and only the all-reduce grows (2 (n - 1) ring steps).

The host time stays about linear while all replicas' memory ("MB / replica" x replicas) fits the
host's last-level cache; beyond that each replica's steps read their memory from DRAM and the ratio
rises (hidden 256, batch 32: about 12-13 x for 8 replicas of 7 MB each on a 32 MB L3), however the
steps are ordered (running each replica through a run of steps before the next measured no better).
"""
from __future__ import annotations

import argparse
import os
import runpy
import statistics
import sys
import time

from rich.console import Console
from rich.table import Table

import _timing  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import popxl  # noqa: E402

dp = runpy.run_path(os.path.join(ROOT, "examples", "data_parallel_mnist.py"), run_name="bench")


def bench(replicas: int, batch: int, hidden: int, steps: int, lr: float = 0.05):
    weights = dp["init_weights"](hidden)
    x, y, _, _ = dp["synthetic_mnist"](replicas * batch * (steps + 1), 1)
    t0 = time.perf_counter()
    ir, h = dp["train_ir"](replicas, batch, hidden, lr, weights)
    session = popxl.Session(ir, "ipu_model")
    compile_s = time.perf_counter() - t0
    times = []
    with session:
        for s in range(steps + 1):
            xs = x[s * replicas * batch:(s + 1) * replicas * batch]
            ys = y[s * replicas * batch:(s + 1) * replicas * batch]
            if replicas > 1:
                xs, ys = xs.reshape(replicas, batch, 28, 28), ys.reshape(replicas, batch)
            c0 = session.total_cycles
            t = time.perf_counter()
            session.run({h["images"]: xs, h["labels"]: ys})
            if s:  # the first run warms the kernels up
                times.append(time.perf_counter() - t)
            cycles = session.total_cycles - c0
    exe = session.executable
    counts = session.engine.step_counts()  # every step ran once per run (steps + 1 runs)
    coll = sum(exe.steps[i].cycles * int(counts[i]) for i in range(len(counts))
               if "all_reduce" in exe.steps[i].name) // (steps + 1)
    return {"compile": compile_s, "run": statistics.median(times), "spread": _timing.Spread(times), "cycles": cycles,
            "collective": coll,
            "ipus": session.num_ipus, "mb": exe.total_bytes / 1e6}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args(argv)
    os.environ.pop("IPU_SIM_TARGET", None)
    console = Console(width=max(Console().width, 150))
    table = Table(title=f"MNIST MLP (hidden {args.hidden}), {args.batch_size} images per replica, simulated GC200")
    for col in ("replicas", "IPUs", "MB / replica", "compile s", "host / step", "x 1 replica (median)", "cycles / step",
                "all-reduce cycles"):
        table.add_column(col, justify="right")
    base = None
    rows = []
    for r in args.replicas:
        res = bench(r, args.batch_size, args.hidden, args.steps)
        base = base or res["run"]
        rows.append((r, res))
        table.add_row(str(r), str(res["ipus"]), f"{res['mb']:.1f}", f"{res['compile']:.2f}", res["spread"].ms(1),
                      f"{res['run'] / base:.2f}", f"{res['cycles']:,}", f"{res['collective']:,}")
    console.print(table)
    print(f"load average {_timing.load_average()} (host / step: best, median (p10-p90) of {args.steps})")
    return rows


if __name__ == "__main__":
    main()
