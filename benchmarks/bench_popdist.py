"""Wall time of the 4-replica MNIST training step run as 1, 2 and 4 PopDist instances (poprun over
MPI), with the time the instances spend in MPI, next to NumPy doing the same step.

    python benchmarks/bench_popdist.py [--instances 1 2 4] [--replicas 4] [--batch-size 8] [--steps 10]

The step is examples/data_parallel_mnist.py's (MNIST MLP, gradients averaged with
replicated_all_reduce before SGD) on simulated GC200s. Each configuration is launched with
`poprun --num-instances N --num-replicas R`; every instance times its `session.run` calls (median
over --steps, after one warm-up run) and the MPI calls inside them, and the table shows the slowest
instance. The simulated cycles per step are the same whatever the number of instances: the
collectives cost what they cost on one IPU-POD. NumPy's step is the same maths on all R x batch
images in one process (what data parallelism computes). On this 2-core machine more instances than
cores share the cores, so host time stops falling at 2 instances.
"""
from __future__ import annotations

import argparse
import json
import os
import runpy
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def worker(out_dir: str, batch: int, hidden: int, steps: int, lr: float = 0.05) -> None:
    """One instance: time the training step of this instance's replicas."""
    import popdist
    import popxl

    dp = runpy.run_path(os.path.join(ROOT, "examples", "data_parallel_mnist.py"), run_name="bench")
    R, first, local = popdist.getNumTotalReplicas(), popdist.getReplicaIndexOffset(), popdist.getNumLocalReplicas()
    weights = dp["init_weights"](hidden)
    x, y, _, _ = dp["synthetic_mnist"](R * batch * (steps + 1), 1)
    t0 = time.perf_counter()
    ir, h = dp["train_ir"]("popdist", batch, hidden, lr, weights)
    session = popxl.Session(ir, "ipu_model")
    compile_s = time.perf_counter() - t0
    comm = session._comm
    times, mpi = [], []
    with session:
        for s in range(steps + 1):
            lo, hi = s * R * batch + first * batch, s * R * batch + (first + local) * batch
            xs, ys = x[lo:hi], y[lo:hi]
            if local > 1:
                xs, ys = xs.reshape(local, batch, 28, 28), ys.reshape(local, batch)
            m0 = comm.mpi_seconds if comm is not None else 0.0
            c0 = session.total_cycles
            t = time.perf_counter()
            session.run({h["images"]: xs, h["labels"]: ys})
            if s:  # the first run warms the kernels up
                times.append(time.perf_counter() - t)
                mpi.append((comm.mpi_seconds if comm is not None else 0.0) - m0)
            cycles = session.total_cycles - c0
    res = {"instance": popdist.getInstanceIndex(), "local": local, "compile": compile_s,
           "run": statistics.median(times), "best": min(times), "p10": float(np.percentile(times, 10)),
           "p90": float(np.percentile(times, 90)), "mpi": statistics.median(mpi), "cycles": cycles,
           "collective": session.collective_cycles() // (steps + 1)}
    with open(os.path.join(out_dir, f"instance{res['instance']}.json"), "w") as fh:
        json.dump(res, fh)


def launch(instances: int, replicas: int, batch: int, hidden: int, steps: int) -> list:
    with tempfile.TemporaryDirectory(prefix="bench-popdist-") as out:
        cmd = [sys.executable, "-m", "popdist.poprun", "--num-instances", str(instances), "--num-replicas",
               str(replicas), sys.executable, os.path.abspath(__file__), "--worker", out, "--batch-size", str(batch),
               "--hidden", str(hidden), "--steps", str(steps)]
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        env.pop("IPU_SIM_TARGET", None)
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if p.returncode:
            raise SystemExit(f"poprun failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
        return [json.load(open(os.path.join(out, f))) for f in sorted(os.listdir(out))]


def numpy_seconds(replicas: int, batch: int, hidden: int, steps: int) -> float:
    """NumPy's step, timed in a process of its own with single-threaded BLAS: for a step this small,
    BLAS threads (NumPy's and SciPy's pools on 2 cores) only wait for each other."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--numpy", "--replicas", str(replicas),
                        "--batch-size", str(batch), "--hidden", str(hidden), "--steps", str(steps)],
                       capture_output=True, text=True, env=env, check=True)
    return float(p.stdout.strip().splitlines()[-1])


def _numpy_seconds(replicas: int, batch: int, hidden: int, steps: int, lr: float = 0.05) -> float:
    bm = runpy.run_path(os.path.join(ROOT, "benchmarks", "bench_mnist.py"), run_name="bench")
    mn = bm["mnist"]
    w = mn["init_weights"](hidden)
    x, y, _, _ = mn["synthetic_mnist"](replicas * batch * steps, 1)
    n = replicas * batch
    times = []
    for s in range(steps):
        t0 = time.perf_counter()
        bm["numpy_step"](w, x[s * n:(s + 1) * n], y[s * n:(s + 1) * n], lr)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=8, help="images per replica per step")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--worker", metavar="DIR", help=argparse.SUPPRESS)
    ap.add_argument("--numpy", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.numpy:
        return print(_numpy_seconds(args.replicas, args.batch_size, args.hidden, args.steps))
    if args.worker:
        return worker(args.worker, args.batch_size, args.hidden, args.steps)

    from rich.console import Console
    from rich.table import Table

    np_s = numpy_seconds(args.replicas, args.batch_size, args.hidden, args.steps)
    console = Console(width=max(Console().width, 120))
    table = Table(title=f"MNIST MLP (hidden {args.hidden}) on {args.replicas} replicas x {args.batch_size} images, "
                        f"simulated GC200s, as PopDist instances (NumPy step: {np_s * 1e3:.2f} ms)")
    for col in ("instances", "replicas / instance", "compile s", "host ms / step: median (p10-p90)", "best",
                "MPI ms / step", "MPI %",
                "x 1 instance", "x NumPy", "cycles / step", "collective cycles / step"):
        table.add_column(col, justify="right")
    base, rows = None, []
    for n in args.instances:
        res = launch(n, args.replicas, args.batch_size, args.hidden, args.steps)
        run = max(r["run"] for r in res)
        slow = max(res, key=lambda r: r["run"])  # the slowest instance sets the pace
        mpi = max(r["mpi"] for r in res)
        base = base or run
        rows.append((n, res))
        table.add_row(str(n), str(res[0]["local"]), f"{max(r['compile'] for r in res):.2f}",
                      f"{run * 1e3:.1f} ({slow['p10'] * 1e3:.1f}-{slow['p90'] * 1e3:.1f})",
                      f"{slow['best'] * 1e3:.1f}",
                      f"{mpi * 1e3:.2f}", f"{100 * mpi / run:.0f}", f"{run / base:.2f}", f"{run / np_s:.0f}",
                      f"{res[0]['cycles']:,}", f"{res[0]['collective']:,}")
    console.print(table)
    print(f"load average {os.getloadavg()[0]:.1f}")
    return rows


if __name__ == "__main__":
    main()
