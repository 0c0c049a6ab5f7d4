"""The float8 ops on a simulated GC200, next to the leanest host code doing the same maths.

    python benchmarks/bench_float8.py [--n 1048576] [--size 512] [--repeats 3]

Rows: pow2scale_cast_to_fp8 (float16 -> float8_143) and pow2scale_cast_from_fp8 (float8 ->
float16) of n elements, against ml_dtypes' casts in NumPy; matmul_pow2scaled size^3 (float8 ->
float16) against NumPy's float32 product of the decoded operands; and, for the cycle comparison,
the float16 matmul of the same size. Each row: simulated cycles of the run (streaming the result
to the host included) and of its compute steps, wall time of Session.run (best of --repeats) and
its ratio to the host code (NumPy / ml_dtypes).
"""
from __future__ import annotations

import argparse
import os
import sys

import _timing  # noqa: E402  (before NumPy)
from _timing import load_average, times_of  # noqa: E402

# one BLAS thread: the 512^3 product measured 47 ms with the default pool, 2.4 ms with one thread
_timing.one_blas_thread()

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import popxl  # noqa: E402
import popxl.ops as ops  # noqa: E402
from popxl.fp8_utils import host_pow2scale_cast_to_fp8  # noqa: E402


def session_row(build, repeats):
    """(cycles of one run, its compute-step cycles, wall seconds of Session.run (a Spread), compile
    seconds). The run's cycles include streaming the result to the host."""
    ir = popxl.Ir()
    with ir.main_graph:
        y = build()
        st = popxl.d2h_stream(y.shape, y.dtype)
        ops.host_store(st, y)
    sess = popxl.Session(ir, "ipu_model")
    with sess:
        sess.run()  # warm the kernels
        c0 = sess.total_cycles
        sess.run()
        cycles = sess.total_cycles - c0
        wall = times_of(sess.run, repeats)
        compute = sum(st.cycles for st in sess.executable.steps if st.kind == "compute")  # each runs once
    return cycles, compute, wall, sess.compile_seconds


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    os.environ.pop("IPU_SIM_TARGET", None)
    rng = np.random.default_rng(0)
    n, m = args.n, args.size
    x16 = (rng.standard_normal(n) * 10).astype(np.float16)
    x8 = host_pow2scale_cast_to_fp8(x16.astype(np.float32), popxl.float8_143, 0)
    a32 = rng.standard_normal((m, m)).astype(np.float32)
    b32 = rng.standard_normal((m, m)).astype(np.float32)
    a8 = host_pow2scale_cast_to_fp8(a32, popxl.float8_143)
    b8 = host_pow2scale_cast_to_fp8(b32, popxl.float8_152)
    e4 = ml_dtypes.float8_e4m3fnuz
    a_dec = a8.view(np.uint8).view(e4).astype(np.float32)
    b_dec = b8.view(np.uint8).view(ml_dtypes.float8_e5m2fnuz).astype(np.float32)

    def scale(s):
        return popxl.constant(s, popxl.int32)

    rows = []
    c, cc, w, comp = session_row(lambda: ops.pow2scale_cast_to_fp8(popxl.variable(x16), scale(1), popxl.float8_143),
                             args.repeats)
    host = times_of(lambda: (x16.astype(np.float32) * 2.0).astype(e4), args.repeats)
    rows.append((f"pow2scale_cast_to_fp8 float16 -> float8_143, {n:,}", c, cc, w, host, comp))
    c, cc, w, comp = session_row(lambda: ops.pow2scale_cast_from_fp8(popxl.variable(x8, popxl.float8_143), scale(-1),
                                                                 popxl.float16), args.repeats)
    x8e = x8.view(np.uint8).view(e4)
    host = times_of(lambda: (x8e.astype(np.float32) * 0.5).astype(np.float16), args.repeats)
    rows.append((f"pow2scale_cast_from_fp8 float8_143 -> float16, {n:,}", c, cc, w, host, comp))
    c, cc, w, comp = session_row(lambda: ops.matmul_pow2scaled(popxl.variable(a8, popxl.float8_143),
                                                           popxl.variable(b8, popxl.float8_152), scale(-2)),
                             args.repeats)
    host = times_of(lambda: (a_dec @ b_dec * 0.25).astype(np.float16), args.repeats)
    rows.append((f"matmul_pow2scaled {m}^3 float8 -> float16", c, cc, w, host, comp))
    c16, cc16, w16, comp16 = session_row(lambda: ops.matmul(popxl.variable(a32.astype(np.float16)),
                                                      popxl.variable(b32.astype(np.float16))), args.repeats)
    a16, b16 = a32.astype(np.float16), b32.astype(np.float16)
    host16 = times_of(lambda: (a16.astype(np.float32) @ b16.astype(np.float32)).astype(np.float16), args.repeats)
    rows.append((f"matmul {m}^3 float16 (for comparison)", c16, cc16, w16, host16, comp16))

    t = Table(title="float8 ops on a simulated GC200 (1472 tiles), against the host doing the same maths")
    for col in ("op", "cycles", "compute", "sim run", "host", "ratio", "compile"):
        t.add_column(col, justify="left" if col == "op" else "right")
    for name, cyc, comp_cyc, wall, host, comp in rows:
        t.add_row(name, f"{cyc:,}", f"{comp_cyc:,}", wall.ms(1), host.ms(2), wall.ratio(host), f"{comp:.2f} s")
    Console(width=max(Console().width, 180)).print(t)
    print(f"load average {load_average()} (times: best, median (p10-p90) of {args.repeats})")
    return rows


if __name__ == "__main__":
    main()
