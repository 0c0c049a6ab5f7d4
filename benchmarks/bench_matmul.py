"""Wall time of a 1024^3 matmul run through the simulated GC200, next to NumPy's `a @ b`, and its
simulated cycles phase by phase against the AMP peak bound.

    python benchmarks/bench_matmul.py [--n 1024] [--dtype float32|float16] [--repeats 5]

The product is written directly against ipu/: a and b mapped linearly over all 1472 tiles, the
plan and programs from codelets.plans.build_matmul. Prints the compile time separately, the run
time (engine.run() only, best of --repeats) against NumPy's (best of --repeats), simulated cycles
against the AMP peak bound, a table of the phases (exchanges, AMP compute, reduction, syncs: the
simulated cycles, the planner's estimate, and each against the peak bound) with the floor of the
machine model (compute at the AMP peak plus the least exchange any split of the product over the
tiles needs), and where the host time of a run goes, step by step.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ipu  # noqa: E402
from codelets.plans import build_matmul, plan_for_shapes  # noqa: E402
from codelets.plans.matmul_build import _mapped_bytes, _reserved_bytes  # noqa: E402
from ipu.blas import single_threaded_kernel_blas  # noqa: E402
from _timing import best_of, load_average, times_of  # noqa: E402


_PHASES = (("exchange a", "exchange_a"), ("exchange b", "exchange_b"), ("amp", "compute"),
           ("exchange partials", "exchange_partials"), ("reduce", "reduce"))


def phase_table(exe, plan, bound):
    """[(phase, simulated cycles, planner estimate or None)] of the matmul's steps: its phases by
    name (summed over serial passes), then the syncs between them."""
    rows = []
    est = (plan.estimate if plan is not None else {}) or {}
    for label, key in _PHASES:
        cyc = sum(int(s.cycles) for s in exe.steps if s.name.endswith("/" + label))
        if cyc or key in est:
            rows.append((label, cyc, est.get(key)))
    other = sum(int(s.cycles) for s in exe.steps if s.kind != "sync"
                and not any(s.name.endswith("/" + lb) for lb, _ in _PHASES))
    if other:
        rows.append(("other (writing out)", other, None))
    sync = sum(int(s.cycles) for s in exe.steps if s.kind == "sync")
    rows.append(("syncs", sync, None))
    return rows


def exchange_floor(n, itemsize, target):
    """The least exchange time of any split of an n^3 product over the tiles, in the machine
    model: a tile computing W = n^3 / tiles multiply-adds of an (m, k) x (k, n') block receives
    m k + k n' operand elements and sends m n' partial sums, and m k + k n' + m n' >= 3 W^(2/3)
    (arithmetic-geometric means), at exchange_bytes_per_cycle (4 B/cycle, ipu/costs.py)."""
    w = n ** 3 / target.num_tiles
    return 3 * w ** (2 / 3) * itemsize / target.exchange_bytes_per_cycle


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--dtype", default="float32", choices=["float32", "float16"])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    n, dt = args.n, args.dtype
    target = ipu.GC200

    t0 = time.perf_counter()
    g = ipu.Graph(target)
    a = g.add_variable("a", (n, n), dt)
    b = g.add_variable("b", (n, n), dt)
    o = g.add_variable("o", (n, n), dt)
    for v in (a, b, o):
        g.map_linearly(v)
    plan = plan_for_shapes(a.shape, b.shape, dt, target, reserved_bytes=_reserved_bytes(g, exclude=o),
                           out_live_bytes=_mapped_bytes(o))
    prog = build_matmul(g, a, b, o, plan=plan)
    t1 = time.perf_counter()
    exe = ipu.compile(g, prog)
    t2 = time.perf_counter()
    engine = ipu.Engine(exe)
    rng = np.random.default_rng(0)
    av = rng.standard_normal((n, n)).astype(dt)
    bv = rng.standard_normal((n, n)).astype(dt)
    engine.write_tensor(a, av)
    engine.write_tensor(b, bv)
    cycles = engine.run()  # first run: loads cached kernels (every run takes the same cycles)
    run = times_of(engine.run, args.repeats)
    run_s = run.best
    got = engine.read_tensor(o)

    a32, b32 = av.astype(np.float32), bv.astype(np.float32)
    ref = a32 @ b32
    np_t = times_of(lambda: a32 @ b32, args.repeats)
    np_s = np_t.best
    err = float(np.abs(got.astype(np.float32) - ref).max() / np.abs(ref).max())

    peak_flops = target.peak_flops_per_cycle_float if dt == "float32" else target.peak_flops_per_cycle_half
    bound = 2 * n ** 3 / (peak_flops * target.num_tiles)
    phases = phase_table(exe, plan, bound)
    floor = bound + exchange_floor(n, np.dtype(dt).itemsize, target)

    # host time per step of one run
    steps = []
    for s in exe.steps:
        if s.kind == "sync":
            continue
        if not hasattr(engine, "_run_step"):  # the engine's step runner is private and may move
            continue
        with single_threaded_kernel_blas:  # as Engine.run holds the kernels' BLAS (ipu/blas.py)
            t = best_of(lambda s=s: engine._run_step(s, [0], 0), max(1, args.repeats // 2))
        steps.append((s.kind, s.name, s.cycles, s.bytes_moved, t))

    rows = [
        ("graph build + plan", f"{t1 - t0:.3f} s", ""),
        ("compile", f"{t2 - t1:.3f} s", ""),
        ("engine.run()", run.ms(1), f"{run.ratio(np_t)} NumPy"),
        (f"NumPy a @ b ({'float32' if dt == 'float32' else 'float32 of the halves'})", np_t.ms(1), ""),
        ("simulated cycles", f"{cycles:,}", f"{cycles / bound:.2f}x the peak bound"),
        ("peak bound 2n^3 / (FLOP/cycle x tiles)", f"{bound:,.0f}", f"{peak_flops} FLOP/cycle/tile"),
        ("machine-model floor (peak + least exchange)", f"{floor:,.0f}", f"{floor / bound:.2f}x the peak bound"),
        ("simulated time at 1.33 GHz", f"{target.cycles_to_seconds(cycles) * 1e6:.1f} us", ""),
        ("max relative error", f"{err:.2e}", ""),
        ("host load average (1 min)", load_average(), f"times: best, median (p10-p90) of {args.repeats}"),
    ]
    title = f"{n}x{n}x{n} {dt} matmul on a simulated {target.name} ({target.num_tiles} tiles)"
    try:
        from rich.console import Console
        from rich.table import Table

        con = Console()
        tab = Table(title=title)
        for c in ("", "value", "ratio"):
            tab.add_column(c)
        for r in rows:
            tab.add_row(*r)
        con.print(tab)
        pt = Table(title="simulated cycles by phase")
        for c in ("phase", "cycles", "share", "planner estimate", "x peak bound"):
            pt.add_column(c, justify="left" if c == "phase" else "right")
        for name, cyc, est in phases:
            pt.add_row(name, f"{cyc:,}", f"{100 * cyc / cycles:.1f}%", "" if est is None else f"{est:,}",
                       f"{cyc / bound:.2f}")
        pt.add_row("total", f"{cycles:,}", "100%", "", f"{cycles / bound:.2f}")
        con.print(pt)
        st = Table(title="host time of one run, by step")
        for c in ("kind", "step", "cycles", "bytes moved", "host ms"):
            st.add_column(c)
        for kind, name, cyc, moved, t in steps:
            st.add_row(kind, name, f"{cyc:,}", f"{moved:,}" if moved else "", f"{t * 1e3:.1f}")
        con.print(st)
    except ImportError:  # pragma: no cover - rich is a dependency, but keep plain output working
        print(title)
        for r in rows:
            print(f"  {r[0]:<42} {r[1]:>14}  {r[2]}")
        print("simulated cycles by phase:")
        for name, cyc, est in phases:
            print(f"  {name:<24} {cyc:>9,} {'' if est is None else f'{est:,}':>9} {cyc / bound:6.2f}x")
        print("host time of one run, by step:")
        for kind, name, cyc, moved, t in steps:
            print(f"  {kind:<9} {name:<32} {cyc:>9,} cycles {moved:>12,} B {t * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
