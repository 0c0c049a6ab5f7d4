"""Code loading from streaming memory: a large graph whose code is loaded before each call.

A model of a few blocks (a float16 transformer-style block graph, called once per layer) and a
float32 classification head runs twice: once with all code resident in tile memory, once with
`ops.remote_code_load(graph, "executable")` before every call. With loading, a graph's vertex code
is live only from its load to its call, so the block's and the head's code never sit on the tiles
together: peak code memory on the busiest tile drops, at the price of the load steps' cycles.

Run it with `python examples/code_loading.py` (`--layers`, `--seq`, `--hidden`); profile it with
`IPU_SIM_PROFILE=out python examples/code_loading.py` and read `ipu-profile report out`.
"""
import argparse

import numpy as np
import popxl
import popxl.ops as ops


def block(x: popxl.Tensor, wq: popxl.Tensor, wk: popxl.Tensor, wv: popxl.Tensor, w1: popxl.Tensor,
          w2: popxl.Tensor, g: popxl.Tensor, b: popxl.Tensor) -> popxl.Tensor:
    """A pre-norm transformer block in float16."""
    h = ops.layer_norm(x, g, b)
    q, k, v = h @ wq, h @ wk, h @ wv
    att = ops.softmax((q @ k.T) * (1.0 / np.sqrt(x.shape[-1])), axis=-1)
    x = x + att @ v
    h = ops.layer_norm(x, g, b)
    return x + ops.gelu(h @ w1) @ w2


def head(x: popxl.Tensor, w: popxl.Tensor) -> popxl.Tensor:
    """Mean over the sequence, a float32 projection, log-softmax."""
    pooled = ops.mean(ops.cast(x, popxl.float32), axis=0, keepdims=True)
    logits = pooled @ w
    return logits - ops.logsumexp(logits, axis=1, keepdims=True)


def build(args, load_code: bool):
    rng = np.random.default_rng(0)
    S, H = args.seq, args.hidden

    def w(*shape, dtype=np.float16, scale=0.05):
        return rng.normal(0, scale, shape).astype(dtype)

    ir = popxl.Ir()
    with ir.main_graph:
        layers = [[popxl.variable(w(H, H), name=f"l{i}_{n}") for n in ("wq", "wk", "wv")]
                  + [popxl.variable(w(H, 4 * H), name=f"l{i}_w1"), popxl.variable(w(4 * H, H), name=f"l{i}_w2"),
                     popxl.variable(np.ones(H, np.float16), name=f"l{i}_g"),
                     popxl.variable(np.zeros(H, np.float16), name=f"l{i}_b")] for i in range(args.layers)]
        w_head = popxl.variable(w(H, 10, dtype=np.float32), name="w_head")
    block_g = ir.create_graph(block, popxl.TensorSpec((S, H), popxl.float16), *layers[0])
    head_g = ir.create_graph(head, popxl.TensorSpec((S, H), popxl.float16), w_head)
    with ir.main_graph, popxl.in_sequence():
        s_in = popxl.h2d_stream((S, H), popxl.float16, name="tokens")
        x = ops.host_load(s_in)
        for params in layers:
            if load_code:
                ops.remote_code_load(block_g, destination="executable")
            x, = ops.call(block_g, x, *params)
        if load_code:
            ops.remote_code_load(head_g, destination="executable")
        y, = ops.call(head_g, x, w_head)
        s_out = popxl.d2h_stream(y.shape, y.dtype, name="log_probs")
        ops.host_store(s_out, y)
    return ir, s_in, s_out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--hidden", type=int, default=64)
    args = p.parse_args(argv)
    tokens = np.random.default_rng(1).normal(0, 1, (args.seq, args.hidden)).astype(np.float16)
    runs = {}
    for load_code in (False, True):
        ir, s_in, s_out = build(args, load_code)
        session = popxl.Session(ir, "ipu_model")
        with session:
            out = session.run({s_in: tokens})[s_out]
        runs[load_code] = (out, session)
    (out_res, res), (out_load, load) = runs[False], runs[True]
    assert np.array_equal(out_res, out_load), "code loading must not change results"

    t = load.target
    cl = load.executable.code_liveness
    cats_res, cats_load = res.executable.plan.categories, load.executable.plan.categories
    code_res = cats_res["vertex_code"]
    code_load = cats_load["vertex_code"] + cats_load["code_loaded"]
    busiest_res, busiest_load = int(np.argmax(code_res)), int(np.argmax(code_load))
    print(f"{args.layers} float16 blocks (seq {args.seq}, hidden {args.hidden}) + a float32 head on a simulated "
          f"{t.name} ({t.num_tiles} tiles)")
    print("peak vertex code on the busiest tile:")
    print(f"  all code resident:        {int(code_res[busiest_res]):7,} bytes (tile {busiest_res})")
    print(f"  loaded before each call:  {int(code_load[busiest_load]):7,} bytes (tile {busiest_load}: "
          f"{int(cats_load['vertex_code'][busiest_load]):,} resident + {int(cats_load['code_loaded'][busiest_load]):,} "
          f"loaded at peak)")
    print(f"  saved over all tiles:     {int(cl.saved.sum()):7,} bytes "
          f"({int(code_res.sum()):,} -> {int(code_load.sum()):,})")
    for name, f in cl.functions.items():
        print(f"  {name}: {f['total']:,} bytes of code in streaming memory ({f['max_tile']:,} on its busiest tile), "
              f"live over {len(f['intervals'])} intervals")
    print("code-load steps:")
    steps = load.executable.steps
    for sid in cl.load_steps:
        s = steps[sid]
        print(f"  step {sid:4d} {s.name:28s} {s.bytes_moved:10,} bytes {s.cycles:8,} cycles")
    counts = load.engine.step_counts()
    load_cycles = sum(steps[i].cycles * int(counts[i]) for i in range(len(counts)) if steps[i].kind == "code_load")
    print(f"total cycles: resident {res.total_cycles:,}, with code loading {load.total_cycles:,} "
          f"({load_cycles:,} in code loads)")
    assert code_load.max() < code_res.max()
    return {"resident": code_res, "loaded": code_load, "load_cycles": load_cycles, "code_liveness": cl,
            "cycles": (res.total_cycles, load.total_cycles)}


if __name__ == "__main__":
    main()
