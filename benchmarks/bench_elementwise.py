"""Wall time of a 4M-element float32 add through the simulated GC200, next to NumPy.

    python benchmarks/bench_elementwise.py [--n 4194304] [--repeats 5]

Written directly against ipu/: a, b and out mapped linearly over all 1472 tiles, one compute set
with a BinaryOp vertex per tile piece split over the 6 workers. Prints compile time, the run time
of engine.run() (best of --repeats) against NumPy's `np.add(a, b, out=...)`, and the cycles.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ipu  # noqa: E402
from _timing import load_average, times_of  # noqa: E402
from codelets.elementwise import BINARY_OPS  # noqa: E402


def build(n: int, target: ipu.Target):
    g = ipu.Graph(target)
    a, b, out = (g.add_variable(name, (n,), "float32") for name in ("a", "b", "out"))
    for v in (a, b, out):
        g.map_linearly(v, grain=2)
    starts, stops, tiles = out.pieces()
    # one vertex per worker: each tile piece cut into 6 parts
    w = target.worker_contexts
    parts = [(t, s + k * -(-(e - s) // w), min(e, s + (k + 1) * -(-(e - s) // w)))
             for s, e, t in zip(starts, stops, tiles) for k in range(w)]
    parts = [(t, s, e) for t, s, e in parts if e > s]
    pt = np.array([p[0] for p in parts])
    ps = np.array([p[1] for p in parts])
    pc = np.array([p[2] - p[1] for p in parts])
    cs = g.add_compute_set("add")
    g.add_vertices(cs, "BinaryOp", pt, {"a": (a, ps, pc), "b": (b, ps, pc), "out": (out, ps, pc)},
                   ip={"op": BINARY_OPS["add"]})
    return g, (a, b, out), ipu.Execute(cs)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4 * 1024 * 1024)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    target = ipu.GC200
    t0 = time.perf_counter()
    g, (a, b, out), prog = build(args.n, target)
    exe = ipu.compile(g, prog)
    compile_s = time.perf_counter() - t0
    engine = ipu.Engine(exe, log_steps=False)
    rng = np.random.default_rng(0)
    av = rng.random(args.n, dtype=np.float32)
    bv = rng.random(args.n, dtype=np.float32)
    engine.write_tensor(a, av)
    engine.write_tensor(b, bv)
    cycles = engine.run()  # also warms the kernel
    run = times_of(engine.run, args.repeats)
    run_s = run.best
    res = np.empty_like(av)
    np_t = times_of(lambda: np.add(av, bv, out=res), args.repeats)
    np_s = np_t.best
    ok = np.array_equal(engine.read_tensor(out), av + bv)

    t = Table(title=f"{args.n:,}-element float32 add on a simulated {target.name} ({target.num_tiles} tiles)")
    t.add_column("")
    t.add_column("value", justify="right")
    t.add_column("ratio", justify="right")
    t.add_row("graph build + compile", f"{compile_s:.3f} s", "")
    t.add_row("engine.run()", run.ms(2), f"{run.ratio(np_t)} NumPy")
    t.add_row("NumPy np.add(a, b, out=)", np_t.ms(2), "")
    t.add_row("simulated cycles", f"{cycles:,}", f"{cycles / target.clock_hz * 1e6:.1f} us at {target.clock_ghz:.2f} GHz")
    t.add_row("result equals NumPy", str(ok), "")
    Console(width=max(Console().width, 120)).print(t)
    print(f"load average {load_average()} (times: best, median (p10-p90) of {args.repeats})")
    return run_s / np_s


if __name__ == "__main__":
    main()
