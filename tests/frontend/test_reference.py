"""popxl.reference, the NumPy interpreter of popxl programs, against the simulator: memory semantics
(views, in-place ops, by-reference graph inputs), control flow, streams, variables across runs,
remote buffers, random numbers (bit for bit) and replicas meeting at collectives."""
import numpy as np
import pytest

import popxl
import popxl.ops as ops
import popxl.reference
from helpers import assert_matches_reference

RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _small_target(monkeypatch):
    monkeypatch.setenv("IPU_SIM_TARGET", "small:4")


def _both(ir, inputs, runs=1, variables=()):
    """Run an Ir `runs` times on the simulator and on the reference; compare every output and the
    variables afterwards."""
    interp = popxl.reference.Interpreter(ir)
    with popxl.Session(ir, "ipu_model") as sess:
        for _ in range(runs):
            got = sess.run(inputs)
            want = interp.run(inputs)
            assert set(got) == set(want)
            for s in got:
                assert_matches_reference(got[s], want[s], s.tensor_id)
        for v in variables:
            assert_matches_reference(sess.get_tensor_data(v), interp.get_tensor_data(v), v.id)
    return want


def test_views_and_in_place_ops_reach_their_base():
    ir = popxl.Ir()
    a = RNG.uniform(-2, 2, (4, 6)).astype(np.float32)
    with ir.main_graph:
        s = popxl.h2d_stream(a.shape, popxl.float32, "a")
        x = ops.host_load(s)
        v = ops.slice_(x, start=1, stop=3, axis=0)
        ops.add_(v, ops.reshape_(ops.transpose_(x)[0:6:3], (2, 4))[:, :1] * 0.0 + 1.0)
        flat = ops.reshape_(x, (24,))
        ops.relu_(flat)
        d = popxl.d2h_stream(x.shape, popxl.float32, "x")
        ops.host_store(d, x)
    out = _both(ir, {s: a})[d]
    want = a.copy()
    want[1:3] += 1.0
    np.testing.assert_allclose(out, np.maximum(want, 0), rtol=1e-6)


def test_calls_by_reference_repeat_and_conditional():
    ir = popxl.Ir()
    x0 = RNG.uniform(-1, 1, (5,)).astype(np.float32)
    with ir.main_graph:
        acc = popxl.variable(np.zeros(5, np.float32), name="acc")

        def accumulate(a: popxl.TensorByRef, t):
            ops.add_(a, t)
            return t * 2.0

        g_acc = ir.create_graph(accumulate, acc, popxl.TensorSpec((5,), popxl.float32))

        def body(t, a: popxl.TensorByRef):
            (y,) = ops.call(g_acc, a, t)
            return ops.tanh(y)

        g_body = ir.create_graph(body, popxl.TensorSpec((5,), popxl.float32), acc)
        then_g = ir.create_graph(lambda t: t + 1.0, popxl.TensorSpec((5,), popxl.float32))
        else_g = ir.create_graph(lambda t: t - 1.0, popxl.TensorSpec((5,), popxl.float32))
        s = popxl.h2d_stream((5,), popxl.float32, "x")
        c = popxl.h2d_stream((), popxl.bool, "c")
        x = ops.host_load(s)
        (y,) = ops.repeat(g_body, 3, x, acc)
        (z,) = ops.conditional(ops.host_load(c), then_g, else_g, [y], [y])
        d = popxl.d2h_stream((5,), popxl.float32, "z")
        ops.host_store(d, z)
    for flag in (True, False):
        out = _both(ir, {s: x0, c: np.array(flag)}, runs=2, variables=[acc])[d]
        t = x0.copy()
        for _ in range(3):
            t = np.tanh(t * 2.0)
        np.testing.assert_allclose(out, t + (1.0 if flag else -1.0), rtol=1e-5)


def test_streams_with_host_transfers_variables_and_remote_buffers():
    ir = popxl.Ir()
    ir.num_host_transfers = 3
    xs = RNG.uniform(-1, 1, (3, 4)).astype(np.float32)
    with ir.main_graph:
        w = popxl.variable(np.ones(4, np.float32), name="w")
        buf = popxl.remote_buffer((4,), popxl.float32, 2)
        s = popxl.h2d_stream((4,), popxl.float32, "x")
        d = popxl.d2h_stream((4,), popxl.float32, "y")

        def step(wt: popxl.TensorByRef):
            x = ops.host_load(s)
            ops.remote_store(buf, 1, x)
            back = ops.remote_load(buf, 1)
            ops.var_updates.accumulate_(wt, back, 0.5)
            ops.host_store(d, wt * back)

        g = ir.create_graph(step, w)
        ops.repeat(g, 3, w)
    _both(ir, {s: xs}, runs=2, variables=[w])


def test_random_numbers_are_bit_for_bit_the_simulators():
    ir = popxl.Ir()
    with ir.main_graph:
        seed = popxl.variable(np.array([7, 11], np.uint32), popxl.uint32, name="seed")
        s1, s2 = ops.split_random_seed(seed)
        x = ops.random_normal(s1, (5, 7), 0.5, 2.0)
        u = ops.random_uniform(s2, (9,), -1.0, 3.0, popxl.float16)
        dr = ops.dropout(x, s2, 0.3)
        outs = {}
        for name, t in (("x", x), ("u", u), ("dr", dr)):
            outs[name] = popxl.d2h_stream(t.shape, t.dtype, name)
            ops.host_store(outs[name], t)
    interp = popxl.reference.Interpreter(ir)
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run()
    want = interp.run()
    for name, st in outs.items():
        np.testing.assert_array_equal(got[st], want[st], err_msg=name)


def test_training_steps_match_the_simulator():
    """A small SGD loop: matmul, softmax loss with its gradient, var updates, over several runs."""
    from popxl.transforms import autodiff

    ir = popxl.Ir()
    x_data = RNG.normal(size=(8, 6)).astype(np.float32)
    labels = RNG.integers(0, 3, (8,)).astype(np.int32)
    with ir.main_graph:
        w = popxl.variable(RNG.normal(size=(6, 3)).astype(np.float32) * 0.3, name="w")
        sx = popxl.h2d_stream((8, 6), popxl.float32, "x")
        sl = popxl.h2d_stream((8,), popxl.int32, "labels")

        def fwd(x, w):
            return ops.matmul(x, w)

        fg = ir.create_graph(fwd, popxl.TensorSpec((8, 6), popxl.float32), w.spec)
        bg = autodiff(fg, grads_required=[fg.inputs[1]])
        x = ops.host_load(sx)
        lab = ops.host_load(sl)
        info = ops.call_with_info(fg, x, w)
        logits = info.parent_output(0)
        probs = ops.softmax(logits, axis=1)
        loss, dlogits = ops.nll_loss_with_softmax_grad(probs, lab)
        (dw,) = ops.call(bg.graph, dlogits, inputs_dict=bg.inputs_dict(info))
        ops.scaled_add_(w, dw, 1.0, -0.5)
        dl = popxl.d2h_stream((), popxl.float32, "loss")
        ops.host_store(dl, loss)
    _both(ir, {sx: x_data, sl: labels}, runs=3, variables=[w])


def test_replicas_meet_at_collectives():
    ir = popxl.Ir(replication=4)
    data = RNG.uniform(-1, 1, (4, 6)).astype(np.float32)
    with ir.main_graph:
        s = popxl.h2d_stream((6,), popxl.float32, "x")
        x = ops.host_load(s)
        pairs = ir.replica_grouping(group_size=2)
        outs = {
            "sum": ops.collectives.replicated_all_reduce(x),
            "pair_max": ops.collectives.replicated_all_reduce(x, op="max", group=pairs),
            "gather": ops.collectives.replicated_all_gather(x),
            "scatter": ops.collectives.replicated_reduce_scatter(x, op="add"),
        }
        d = {}
        for name, t in outs.items():
            d[name] = popxl.d2h_stream(t.shape, t.dtype, name)
            ops.host_store(d[name], t)
    want = _both(ir, {s: data})
    np.testing.assert_allclose(want[d["sum"]], np.broadcast_to(data.sum(0), (4, 6)), rtol=1e-6)
    np.testing.assert_allclose(want[d["gather"]][2], data.reshape(-1), rtol=0)


def test_graph_evaluation_refuses_host_ops_with_a_clear_error():
    ir = popxl.Ir()
    with ir.main_graph:
        s = popxl.h2d_stream((2,), popxl.float32, "x")
        ops.host_load(s)
    with pytest.raises(popxl.reference.ReferenceError, match="whole-Ir run"):
        popxl.reference.evaluate(ir.main_graph, [])
    with pytest.raises(popxl.reference.ReferenceError, match="no input for stream"):
        popxl.reference.run(ir, {})
