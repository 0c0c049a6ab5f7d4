"""Inference of a two-layer MLP on the simulated GC200, checked against NumPy.

Run it with `python examples/mlp_inference.py`; `--batch`, `--hidden` change the sizes.
"""
import argparse

import numpy as np
import popxl
import popxl.ops as ops


class Linear(popxl.Module):
    def __init__(self, out_features: int):
        self.out_features = out_features
        self.W = None
        self.b = None

    def build(self, x: popxl.Tensor) -> popxl.Tensor:
        self.W = popxl.graph_input((x.shape[-1], self.out_features), popxl.float32, "W")
        self.b = popxl.graph_input((self.out_features,), popxl.float32, "b")
        return x @ self.W + self.b


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--features", type=int, default=784)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--classes", type=int, default=10)
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    w1 = rng.normal(0, 0.05, (args.features, args.hidden)).astype(np.float32)
    b1 = np.zeros(args.hidden, np.float32)
    w2 = rng.normal(0, 0.05, (args.hidden, args.classes)).astype(np.float32)
    b2 = np.zeros(args.classes, np.float32)
    images = rng.random((args.batch, args.features), dtype=np.float32)

    ir = popxl.Ir()
    with ir.main_graph:
        x_stream = popxl.h2d_stream((args.batch, args.features), popxl.float32, name="images")
        x = ops.host_load(x_stream)
        W1, B1 = popxl.variable(w1, name="W1"), popxl.variable(b1, name="b1")
        W2, B2 = popxl.variable(w2, name="W2"), popxl.variable(b2, name="b2")
        layer1 = ir.create_graph(Linear(args.hidden), x)
        h = ops.call(layer1, x, inputs_dict={layer1.inputs[1]: W1, layer1.inputs[2]: B1})[0]
        h = ops.gelu(h)
        layer2 = ir.create_graph(Linear(args.classes), h)
        logits = ops.call(layer2, h, inputs_dict={layer2.inputs[1]: W2, layer2.inputs[2]: B2})[0]
        probs = ops.softmax(logits, axis=1)
        out_stream = popxl.d2h_stream(probs.shape, probs.dtype, name="probs")
        ops.host_store(out_stream, probs)

    session = popxl.Session(ir, "ipu_model")
    with session:
        out = session.run({x_stream: images})[out_stream]

    def gelu(v):
        return 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3)))

    logits_ref = gelu(images @ w1 + b1) @ w2 + b2
    ref = np.exp(logits_ref - logits_ref.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    err = float(np.abs(out - ref).max())
    t = session.target
    seconds = session.total_cycles / t.clock_hz
    print(f"MLP {args.features}-{args.hidden}-{args.classes}, batch {args.batch}, on a simulated {t.name} "
          f"({t.num_tiles} tiles)")
    print(f"  predicted classes: {out.argmax(1)[:10].tolist()} ...")
    print(f"  max |probs - NumPy| = {err:.2e}")
    print(f"  simulated cycles: {session.total_cycles:,} ({seconds * 1e6:.1f} us at {t.clock_hz / 1e9:.2f} GHz)")
    print(f"  compile {session.compile_seconds:.2f} s, run {session.run_seconds:.3f} s wall")
    assert err < 1e-4, err
    return out


if __name__ == "__main__":
    main()
