"""How fast the engine simulates: cycles per host second and host time per exchanged MB.

    python benchmarks/bench_engine.py [--runs 5] [--programs mnist matmul bert] [--seq 128]

Three programs on a simulated GC200: one MNIST training step (784-256-10 ReLU MLP, batch 128,
examples/mnist.py), a 1024^3 float32 matmul (codelets.plans.build_matmul) and one BERT-base
encoder layer forward (hidden 768, 12 heads, FFN 3072, --seq tokens: attention, layer norms,
gelu). Each runs with the Python walk over the steps (the reference) and with the compiled step
loop on 1 and 2 host threads. Per row: host time per run (best of --runs; the CPU time of all
the process's threads beside it, the measure a shared host disturbs least), simulated cycles per
host second, the bytes the run's exchanges move, host time per exchanged MB, and a memcpy of the
same bytes as the reference for moving them.
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

import ipu  # noqa: E402
import popxl  # noqa: E402
from popxl import ops  # noqa: E402

CONFIGS = (("Python loop", False, 1), ("compiled, 1 thread", True, 1), ("compiled, 2 threads", True, 2))


def mnist_program():
    mnist = runpy.run_path(os.path.join(ROOT, "examples", "mnist.py"), run_name="bench")
    batch, hidden = 128, 256
    ir, h = mnist["train_ir"](batch, hidden, 0.05, mnist["init_weights"](hidden), "sgd", 1, "relu")
    session = popxl.Session(ir, "ipu_model")
    x, y, _, _ = mnist["synthetic_mnist"](batch, 1)
    feed = {h["images"]: x.reshape(1, batch, 28, 28), h["labels"]: y.reshape(1, batch)}
    session.__enter__()
    return session.engine, lambda: session.run(feed)


def matmul_program(n=1024):
    from codelets.plans import build_matmul

    g = ipu.Graph(ipu.GC200)
    vs = [g.add_variable(name, (n, n), "float32") for name in ("a", "b", "o")]
    for v in vs:
        g.map_linearly(v)
    engine = ipu.Engine(ipu.compile(g, build_matmul(g, *vs)))
    rng = np.random.default_rng(0)
    for v in vs[:2]:
        engine.write_tensor(v, rng.standard_normal((n, n)).astype(np.float32))
    return engine, engine.run


def bert_layer_program(seq=128, hidden=768, heads=12, ffn=3072):
    rng = np.random.default_rng(0)
    ir = popxl.Ir()
    d = hidden // heads

    def w(shape, name, scale=0.02):
        return popxl.variable((rng.standard_normal(shape) * scale).astype(np.float32), name=name)

    with ir.main_graph, popxl.in_sequence():
        x = w((seq, hidden), "x", 1.0)
        q, k, v = (x @ w((hidden, hidden), f"W{c}") for c in "qkv")
        q, k, v = (t.reshape((seq, heads, d)).transpose((1, 0, 2)) for t in (q, k, v))
        scores = (q @ k.transpose((0, 2, 1))) * popxl.constant(np.float32(1 / np.sqrt(d)))
        ctx = ops.softmax(scores, axis=2) @ v
        ctx = ctx.transpose((1, 0, 2)).reshape((seq, hidden))
        h = ops.layer_norm(ctx @ w((hidden, hidden), "Wo") + x, w((hidden,), "g1", 1.0), w((hidden,), "b1"))
        f = ops.gelu(h @ w((hidden, ffn), "W1")) @ w((ffn, hidden), "W2")
        out = ops.layer_norm(f + h, w((hidden,), "g2", 1.0), w((hidden,), "b2"))
        y = popxl.variable(np.zeros((seq, hidden), np.float32), name="y")
        ops.var_updates.copy_var_update_(y, out)
    session = popxl.Session(ir, "ipu_model")
    session.__enter__()
    return session.engine, session.run


def exchange_bytes_table(engine) -> np.ndarray:
    """Bytes each step moves if it is an exchange, else 0."""
    return np.array([s.bytes_moved if s.kind == "exchange" else 0 for s in engine.exe.steps], np.int64)


def measure(engine, run, runs):
    rows = []
    for label, compiled, threads in CONFIGS:
        engine.compiled, engine.threads = compiled, threads
        run()  # warm: builds the step tables on the first compiled run
        best, cpu, cycles, moved, times = float("inf"), float("inf"), 0, 0, []
        per_step = exchange_bytes_table(engine)
        for _ in range(runs):
            c0, n0 = engine.cycles, engine.step_counts()
            t0, p0 = time.perf_counter(), time.process_time()
            run()
            dt, dp = time.perf_counter() - t0, time.process_time() - p0
            cpu = min(cpu, dp)
            times.append(dt)
            if dt < best:
                best, cycles = dt, engine.cycles - c0
                moved = int(((engine.step_counts() - n0) * per_step).sum())
        rows.append((label, best, cpu, cycles, moved, _timing.Spread(times)))
    return rows


PROGRAMS = {"mnist": ("MNIST step (ReLU, batch 128)", mnist_program),
            "matmul": ("matmul 1024^3 float32", matmul_program),
            "bert": ("BERT-base layer forward", bert_layer_program)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--programs", nargs="+", default=list(PROGRAMS), choices=list(PROGRAMS))
    args = ap.parse_args(argv)
    table = Table(title="Engine speed on a simulated GC200")
    for col in ("program", "engine", "host time / run", "CPU time / run", "cycles / host s", "exchanged / run", "host ms / MB",
                "memcpy ms / MB", "vs Python loop"):
        table.add_column(col, justify="right")
    results = {}
    for key in args.programs:
        title, make = PROGRAMS[key]
        t0 = time.perf_counter()
        engine, run = make()
        build = time.perf_counter() - t0
        rows = measure(engine, run, args.runs)
        results[key] = rows
        base = rows[0][1]
        for label, best, cpu, cycles, moved, spread in rows:
            mb = moved / 1e6
            table.add_row(f"{title} (built in {build:.1f} s)" if label == rows[0][0] else "", label,
                          spread.ms(1), f"{cpu * 1e3:.1f} ms", f"{cycles / best / 1e6:.2f} M", f"{mb:.1f} MB",
                          f"{best * 1e3 / mb:.3f}" if mb else "-",
                          f"{_timing.memcpy_seconds(moved, reps=5) * 1e3 / mb:.3f}" if mb else "-", f"{base / best:.2f}x")
    Console(width=max(Console().width, 180)).print(table)
    print(f"load average {_timing.load_average()} (host time: best, median (p10-p90) of {args.runs})")
    return results


if __name__ == "__main__":
    main()
