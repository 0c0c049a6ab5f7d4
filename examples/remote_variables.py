"""Weights in streaming memory: every layer's weight matrix is a remote variable, streamed onto the
tiles when its layer runs, updated there, and stored back; checked against NumPy.

The layers run in a `repeat` loop whose counter is the remote-buffer offset, so one compiled layer
serves them all (PopXL's "phased execution" pattern): tile memory holds one layer's weights at a
time, streaming memory holds all of them. Each layer computes h = relu(x @ W) and nudges W towards
reproducing its input: W -= lr * x^T (h - x) / batch.

Run it with `python examples/remote_variables.py`; `--layers`, `--width`, `--batch`, `--steps`.
"""
import argparse

import numpy as np
import popxl
import popxl.ops as ops


def reference(x, weights, lr, steps):
    ws = [w.copy() for w in weights]
    outs = []
    for _ in range(steps):
        h = x
        for i, w in enumerate(ws):
            new = np.maximum(h @ w, 0)
            ws[i] = w - lr * (h.T @ (new - h)) / h.shape[0]
            h = new
        outs.append(h)
    return outs, ws


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.05)
    args = p.parse_args(argv)
    L, d, B = args.layers, args.width, args.batch
    rng = np.random.default_rng(0)
    weights = [(np.eye(d) + rng.normal(0, 0.05, (d, d))).astype(np.float32) for _ in range(L)]
    x_host = rng.random((B, d), dtype=np.float32)

    ir = popxl.Ir()
    with ir.main_graph:
        buf = popxl.remote_buffer((d, d), popxl.float32, entries=L)
        remote_ws = [popxl.remote_variable(w, buf, i, name=f"W{i}") for i, w in enumerate(weights)]

    def layer(x: popxl.Tensor, i: popxl.Tensor):
        w = ops.remote_load(buf, i, name="W")  # the entry is the loop counter, read at run time
        h = ops.relu(x @ w)
        w_new = w - (x.T @ (h - x)) * (args.lr / B)
        ops.remote_store(buf, i, w_new)
        return h, i + 1

    layer_graph = ir.create_graph(layer, popxl.TensorSpec((B, d), popxl.float32), popxl.TensorSpec((), popxl.int32))
    with ir.main_graph, popxl.in_sequence():
        x_stream = popxl.h2d_stream((B, d), popxl.float32, name="x")
        x = ops.host_load(x_stream)
        first = popxl.constant(0, popxl.int32, name="first_layer")
        h, _ = ops.repeat(layer_graph, L, x, first)
        out_stream = popxl.d2h_stream((B, d), popxl.float32, name="h")
        ops.host_store(out_stream, h)

    session = popxl.Session(ir, "ipu_model")
    outs = []
    with session:
        for _ in range(args.steps):
            outs.append(session.run({x_stream: x_host})[out_stream])
    final = [session.get_tensor_data(w) for w in remote_ws]

    ref_outs, ref_ws = reference(x_host, weights, args.lr, args.steps)
    err_out = max(float(np.abs(o - r).max() / (np.abs(r).max() + 1e-6)) for o, r in zip(outs, ref_outs))
    err_w = max(float(np.abs(w - r).max()) for w, r in zip(final, ref_ws))
    exe, t = session.executable, session.target
    cycles = session.engine.cycles_by_kind()
    loads = [s for s in exe.steps if s.kind in ("remote_load", "remote_store")]
    print(f"{L} layers of {d}x{d} float32 weights in streaming memory ({L * d * d * 4 / 2**20:.2f} MiB), batch {B}, "
          f"{args.steps} steps on a simulated {t.name} ({t.num_tiles} tiles)")
    print(f"  max relative |h - NumPy| = {err_out:.2e}, max |W - NumPy| = {err_w:.2e}")
    print(f"  weights in tile memory: {int(exe.plan.categories['variables'].sum()):,} bytes; streamed per layer: "
          f"{d * d * 4:,} bytes each way")
    for s in loads:
        print(f"  {s.kind:12s} {s.name:40s} {s.cycles:7,} cycles ({s.bytes_moved / (s.cycles / t.clock_hz) / 1e9:.1f} GB/s)")
    print(f"  cycles: remote_load {cycles.get('remote_load', 0):,}, remote_store {cycles.get('remote_store', 0):,}, "
          f"total {session.total_cycles:,}")
    assert err_out < 1e-4 and err_w < 1e-4, (err_out, err_w)
    return {"outputs": outs, "weights": final, "errors": (err_out, err_w)}


if __name__ == "__main__":
    main()
