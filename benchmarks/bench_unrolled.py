"""Large unrolled graphs of small tensors: host cost per op of lowering, compiling and running.

A chain of N ops on 64x64 float32 tensors (an elementwise mix: mul / add / relu, or matmuls) on a
simulated GC200, each size in its own process so that its peak RSS is its own. The table shows the
lowering and compile time, the host memory (peak RSS, and what the session keeps after compiling)
and a run against NumPy doing the same maths. What matters is the per-op figure staying flat as N
grows: the fixed host cost of an op, not of its elements. A chain that does not fit the tiles'
memory (1,200 matmuls: exchange code and vertex state of every op stay resident) is shown as
refused, with the time and memory it took to say so.

    python benchmarks/bench_unrolled.py                 # N = 300, 1200, 2400 for both chains
    python benchmarks/bench_unrolled.py --ops 300 600 2400 --kind matmul
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

_CHILD = r'''
import gc, json, resource, sys, time, tracemalloc
import numpy as np
import popxl, popxl.ops as ops

n, kind = int(sys.argv[1]), sys.argv[2]
rng = np.random.default_rng(0)
w_host = (rng.standard_normal((64, 64)) / 8).astype(np.float32)
x_host = rng.standard_normal((64, 64)).astype(np.float32)

def step(i, x, w):
    if kind == "matmul":
        return x @ w
    if i % 3 == 0:
        return x * w
    if i % 3 == 1:
        return x + w
    return np.maximum(x, 0) if isinstance(x, np.ndarray) else ops.relu(x)

ir = popxl.Ir()
with ir.main_graph:
    s = popxl.h2d_stream((64, 64), popxl.float32, name="x")
    x = ops.host_load(s)
    w = popxl.variable(w_host, name="w")
    for i in range(n):
        x = step(i, x, w)
    o = popxl.d2h_stream((64, 64), popxl.float32, name="y")
    ops.host_store(o, x)
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
t0 = time.perf_counter()
try:
    session = popxl.Session(ir, "ipu_model")
except MemoryError:  # ipu.OutOfMemoryError: the program does not fit the tiles
    print(json.dumps({"oom": time.perf_counter() - t0,
                      "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "before_mb": rss0 / 1024}))
    sys.exit(0)
gc.collect()
kept = tracemalloc.get_traced_memory()[0]
tracemalloc.stop()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with session:
    session.run({s: x_host})  # warm: kernels
    t = time.perf_counter()
    out = session.run({s: x_host})[o]
    run_s = time.perf_counter() - t
def numpy_chain():
    ref = x_host
    for i in range(n):
        ref = step(i, ref, w_host)
    return ref
numpy_chain()  # warm, as the session's first run above
t = time.perf_counter()
ref = numpy_chain()
np_s = time.perf_counter() - t
assert np.allclose(out, ref, rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(ref).max())))
print(json.dumps({"lower": session.lowering_seconds, "compile": session.compile_seconds - session.lowering_seconds,
                  "peak_mb": peak / 1024, "before_mb": rss0 / 1024, "kept_mb": kept / 1e6, "run": run_s,
                  "numpy": np_s, "steps": len(session.executable.steps), "cycles": session.total_cycles // 2}))
'''


def measure(n: int, kind: str) -> dict:
    env = dict(os.environ)
    env.pop("IPU_SIM_TARGET", None)  # a GC200
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    p = subprocess.run([sys.executable, "-c", _CHILD, str(n), kind], env=env, capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(p.stderr[-3000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, nargs="+", default=[300, 1200, 2400])
    ap.add_argument("--kind", choices=["mix", "matmul", "both"], default="both")
    args = ap.parse_args(argv)
    from rich.console import Console
    from rich.table import Table

    table = Table(title="unrolled chains of 64x64 float32 ops on a simulated GC200")
    for col in ("chain", "ops", "steps", "lower s", "compile s", "ms / op", "peak RSS MB", "MB / op",
                "kept MB / op", "run ms", "NumPy ms", "ratio"):
        table.add_column(col, justify="right")
    kinds = ["mix", "matmul"] if args.kind == "both" else [args.kind]
    for kind in kinds:
        for n in args.ops:
            r = measure(n, kind)
            if "oom" in r:
                table.add_row(kind, f"{n:,}", "", "", f"refused: OOM in {r['oom']:.1f} s", "", f"{r['peak_mb']:.0f}",
                              f"{(r['peak_mb'] - r['before_mb']) / n:.2f}", "", "", "", "")
                continue
            build = r["lower"] + r["compile"]
            table.add_row(kind, f"{n:,}", f"{r['steps']:,}", f"{r['lower']:.2f}", f"{r['compile']:.2f}",
                          f"{1e3 * build / n:.1f}", f"{r['peak_mb']:.0f}",
                          f"{(r['peak_mb'] - r['before_mb']) / n:.2f}", f"{r['kept_mb'] / n:.3f}",
                          f"{1e3 * r['run']:.1f}", f"{1e3 * r['numpy']:.2f}", f"{r['run'] / r['numpy']:.2g}x")
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
