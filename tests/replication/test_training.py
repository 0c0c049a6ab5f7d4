"""Replicated training matches NumPy: data-parallel SGD on 2, 4 and 8 replicas (gradients
all-reduced), RTS training, gradients through the collectives, and the examples."""
import os
import runpy

import numpy as np
import pytest

import popxl
import popxl.ops as ops
import popxl.transforms as transforms

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples")


def _numpy_sgd(w, b, xs, ys, lr, steps):
    """Softmax regression, mean NLL over the whole (replicas x batch) batch."""
    for s in range(steps):
        x, y = xs[s].reshape(-1, xs.shape[-1]), ys[s].reshape(-1)
        z = x @ w + b
        e = np.exp(z - z.max(1, keepdims=True))
        p = e / e.sum(1, keepdims=True)
        d = p.copy()
        d[np.arange(len(y)), y] -= 1
        d /= len(y)
        w = w - lr * (x.T @ d)
        b = b - lr * d.sum(0)
    return w, b


@pytest.mark.parametrize("R", [2, 4, 8])
@pytest.mark.parametrize("rts", [False, True])
def test_data_parallel_training_matches_numpy(R, rts):
    rng = np.random.default_rng(R)
    F, C, B, steps, lr = 12, 5, 3, 4, 0.5
    w0 = rng.normal(0, 0.3, (F, C)).astype(np.float32)
    b0 = np.zeros(C, np.float32)
    xs = rng.normal(size=(steps, R, B, F)).astype(np.float32)
    ys = rng.integers(0, C, (steps, R, B)).astype(np.int32)

    ir = popxl.Ir(replication=R)
    with ir.main_graph, popxl.in_sequence():
        xst = popxl.h2d_stream((B, F), popxl.float32, "x")
        yst = popxl.h2d_stream((B,), popxl.int32, "y")
        if rts:
            W, W_shard = popxl.replica_sharded_variable(w0, popxl.float32, "W")
            w_full = ops.collectives.replicated_all_gather(W_shard)
        else:
            W = w_full = popxl.variable(w0, name="W")
        bias = popxl.variable(b0, name="b")

        def model(x, w, b):
            return x @ w + b

        spec = popxl.TensorSpec
        g = ir.create_graph(model, spec((B, F), popxl.float32), spec((F, C), popxl.float32), spec((C,), popxl.float32))
        grad = transforms.autodiff(g, grads_required=list(g.inputs[1:]))
        info = ops.call_with_info(g, ops.host_load(xst), w_full, bias)
        probs = ops.softmax(info.outputs[0], axis=1)
        loss, dz = ops.nll_loss_with_softmax_grad(probs, ops.host_load(yst))
        gw, gb = ops.call(grad.graph, dz, inputs_dict=grad.inputs_dict(info))
        if rts:
            ops.scaled_add_(W_shard, ops.collectives.replicated_reduce_scatter(
                gw, "mean", configure_output_for_replicated_tensor_sharding=True), b=-lr)
        else:
            ops.scaled_add_(W, ops.collectives.replicated_all_reduce(gw, "mean"), b=-lr)
        ops.scaled_add_(bias, ops.collectives.replicated_all_reduce(gb, "mean"), b=-lr)
    with popxl.Session(ir, "ipu_model") as s:
        for k in range(steps):
            s.run({xst: xs[k], yst: ys[k]})
    w_ref, b_ref = _numpy_sgd(w0, b0, xs, ys, lr, steps)
    np.testing.assert_allclose(s.get_tensor_data(W), w_ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(s.get_tensor_data(bias), b_ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("R", [2, 4])
def test_autodiff_through_collectives(R):
    """The gradient of an all-gather is the replica's own slice of the gradient (PopXL's rule, no
    sum over replicas); of an all-reduce the all-reduce of the gradients; of a reduce-scatter an
    all-gather."""
    n = 3
    c = np.arange(R * n, dtype=np.float32).reshape(R, n) + 1  # per replica weights of the gathered value

    ir = popxl.Ir(replication=R)
    with ir.main_graph:
        cst = popxl.h2d_stream((R * n,), popxl.float32, "c")

        def f(shard, cc):
            full = ops.collectives.replicated_all_gather(shard)  # meta shape (R n,)
            red = ops.collectives.replicated_all_reduce(full * cc)
            sc = ops.collectives.replicated_reduce_scatter(red * cc)
            return ops.sum(sc)

        spec = popxl.TensorSpec
        g = ir.create_graph(f, spec((n,), popxl.float32, (R * n,)), spec((R * n,), popxl.float32))
        info_g = transforms.autodiff(g, grads_required=[g.inputs[0]])
        _, shard = popxl.replica_sharded_variable(np.ones(R * n, np.float32), popxl.float32, "x")
        call = ops.call_with_info(g, shard, ops.host_load(cst))
        one = popxl.constant(1.0)
        (gs,) = ops.call(info_g.graph, one, inputs_dict=info_g.inputs_dict(call))
        out = popxl.d2h_stream(gs.shape, gs.dtype, "g")
        ops.host_store(out, gs)
    cc = np.tile(c.reshape(-1), (R, 1)).reshape(R, R * n)  # every replica gets the same c (full)
    with popxl.Session(ir, "ipu_model") as s:
        got = s.run({cst: cc})[out]
    # forward per replica r: full = x (all ones); red = sum_r' full*c = R*c; sc_r = chunk r of sum_r' red*c
    # loss_r = sum(chunk r of R * R * c * c): d loss_r / d sc_r = 1 on chunk r
    # backward: d sc (chunk r on replica r) -> all_gather -> ones over all chunks, times c -> all_reduce -> R c
    # -> times c -> d full = R c^2 on every replica -> the all-gather's gradient: chunk r of it
    cv = c.reshape(-1)
    for r in range(R):
        np.testing.assert_allclose(got[r], (R * cv * cv)[r * n:(r + 1) * n])


def test_data_parallel_mnist_example_matches_one_replica():
    ex = runpy.run_path(os.path.join(EXAMPLES, "data_parallel_mnist.py"), run_name="example")
    res = ex["main"](["--replicas", "4", "--batch-size", "4", "--steps", "4", "--hidden", "16"])
    assert res["max_diff"] < 1e-5
    assert res["losses"][-1] < res["losses"][0]
    res = ex["main"](["--replicas", "4", "--batch-size", "4", "--steps", "4", "--hidden", "16", "--rts"])
    assert res["max_diff"] < 1e-5


def test_pipeline_example_matches_numpy():
    ex = runpy.run_path(os.path.join(EXAMPLES, "pipeline_two_ipus.py"), run_name="example")
    res = ex["main"](["--steps", "3", "--hidden", "32", "--features", "16"])
    assert res["num_ipus"] == 2 and res["max_diff"] < 1e-5
    assert res["on_ipu"] == {"w0": [0], "b0": [0], "w1": [1], "b1": [1]}
    assert res["link_cycles"] > 0
