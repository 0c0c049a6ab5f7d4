"""Tensors with a size-0 axis, as NumPy and Poplar allow them: they hold no memory, an exchange or
host transfer of one moves nothing (and needs no sync), compute sets over them have no vertices.
Each program runs on the simulator and on popxl.reference and is checked against NumPy."""
import numpy as np
import pytest

import popxl
import popxl.ops as ops
import popxl.reference

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _small_target(monkeypatch):
    monkeypatch.setenv("IPU_SIM_TARGET", "small:4")


def _run(build, *arrays):
    """build(*input tensors) -> output tensor(s), with every array a host-loaded input; returns the
    simulator's outputs after checking the reference interpreter agrees (same shapes and values)."""
    ir = popxl.Ir()
    with ir.main_graph:
        ins = [popxl.h2d_stream(a.shape, popxl.dtype.as_dtype(a.dtype), f"in{i}") for i, a in enumerate(arrays)]
        outs = build(*[ops.host_load(s) for s in ins])
        outs = outs if isinstance(outs, (tuple, list)) else [outs]
        d2h = []
        for i, y in enumerate(outs):
            d = popxl.d2h_stream(y.shape, y.dtype, f"out{i}")
            ops.host_store(d, y)
            d2h.append(d)
    feed = dict(zip(ins, arrays))
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run(feed)
    want = popxl.reference.Interpreter(ir).run(feed)
    for d in d2h:
        assert got[d].shape == want[d].shape == tuple(d.shape)
        np.testing.assert_array_equal(got[d], want[d])
    return [got[d] for d in d2h]


def _f(*shape):
    return RNG.uniform(-2, 2, shape).astype(np.float32)


@pytest.mark.parametrize("shape_a, shape_b", [((0, 3), (0, 3)), ((0, 3), (3,)), ((4, 0), (1, 0)),
                                              ((2, 0, 5), (2, 1, 5)), ((0,), ())])
def test_elementwise_with_broadcast(shape_a, shape_b):
    a, b = _f(*shape_a), _f(*shape_b)
    add, mul, relu = _run(lambda x, y: (x + y, x * y, ops.relu(x)), a, b)
    assert add.shape == (a + b).shape
    np.testing.assert_array_equal(add, a + b)
    np.testing.assert_array_equal(mul, a * b)
    np.testing.assert_array_equal(relu, np.maximum(a, 0))


def test_reductions_over_non_empty_axes_of_empty_tensors():
    a = _f(0, 4, 3)
    s, m = _run(lambda x: (ops.sum(x, axis=1), ops.max(x, axis=2)), a)
    np.testing.assert_array_equal(s, a.sum(axis=1))
    assert m.shape == (0, 4)


def test_reduction_over_an_empty_axis_is_still_refused_early():
    with pytest.raises(Exception, match="empty"):
        _run(lambda x: ops.max(x, axis=0), _f(0, 3))


def test_matmul_with_empty_inner_and_outer_dims():
    a, b = _f(4, 0), _f(0, 5)
    (k0,) = _run(lambda x, y: ops.matmul(x, y), a, b)  # k = 0: zeros, as NumPy
    np.testing.assert_array_equal(k0, np.zeros((4, 5), np.float32))
    ir = popxl.Ir()  # the zeros are written by the product, not left from fresh memory
    with ir.main_graph:
        y = ops.matmul(ops.host_load(sa := popxl.h2d_stream((4, 0), popxl.float32, "a")),
                       ops.host_load(sb := popxl.h2d_stream((0, 5), popxl.float32, "b")))
        ops.host_store(d := popxl.d2h_stream(y.shape, y.dtype, "y"), y)
    with popxl.Session(ir, "ipu_model") as sess:
        sess.engine.memory[:] = 0x7F
        np.testing.assert_array_equal(sess.run({sa: a, sb: b})[d], np.zeros((4, 5), np.float32))
    (m0,) = _run(lambda x, y: ops.matmul(x, y), _f(0, 3), _f(3, 5))
    assert m0.shape == (0, 5)


def test_shape_ops():
    a, b = _f(0, 3), _f(2, 3)
    cat, sl, rs, tr = _run(lambda x, y: (ops.concat([x, y], axis=0), y[1:1], ops.reshape(x, (3, 0)),
                                         ops.transpose(x)), a, b)
    np.testing.assert_array_equal(cat, np.concatenate([a, b]))
    assert sl.shape == (0, 3) and rs.shape == (3, 0) and tr.shape == (3, 0)
    parts = _run(lambda y: ops.split(y, [0, 2, 0], axis=0), b)
    assert [p.shape for p in parts] == [(0, 3), (2, 3), (0, 3)]
    np.testing.assert_array_equal(parts[1], b)


def test_gather_with_no_indices_and_cast():
    a = _f(5, 3)
    idx = np.zeros((0,), np.int32)
    g, c = _run(lambda x, i: (ops.gather(x, i), ops.cast(x[0:0], popxl.float16)), a, idx)
    assert g.shape == (0, 3) and c.shape == (0, 3) and c.dtype == np.float16


def test_topk_zero():
    a = _f(4, 6)
    vals, idx = _run(lambda x: ops.topk(x, 0, axis=1, largest=True, sorted=True), a)
    assert vals.shape == (4, 0) and idx.shape == (4, 0)


def test_empty_variables_hold_no_memory_and_round_trip():
    ir = popxl.Ir()
    ir.num_host_transfers = 3  # three transfers per run: host buffers of shape (3, 0, 4)
    with ir.main_graph:
        v = popxl.variable(np.zeros((0, 4), np.float32), name="v")
        w = popxl.variable(np.ones((2,), np.float32), name="w")
        s = popxl.h2d_stream((0, 4), popxl.float32, "x")
        d = popxl.d2h_stream((0, 4), popxl.float32, "y")
        with popxl.in_sequence():
            for _ in range(3):
                x = ops.host_load(s)
                ops.var_updates.accumulate_(v, x)
                ops.host_store(d, v * 2)
    feed = {s: np.zeros((3, 0, 4), np.float32)}
    with popxl.Session(ir, "ipu_model") as sess:
        out = sess.run(feed)
        assert out[d].shape == (3, 0, 4)
        assert sess.get_tensor_data(v).shape == (0, 4)
        sess.write_variable_data(v, np.zeros((0, 4), np.float32))
        sess.write_variables_data({v: np.zeros((0, 4), np.float32), w: np.full(2, 3, np.float32)})
        np.testing.assert_array_equal(sess.get_tensor_data(w), [3, 3])
        with pytest.raises(ValueError, match="shape"):
            sess.write_variable_data(v, np.zeros((1, 4), np.float32))
        report = sess.memory_report() if hasattr(sess, "memory_report") else None
    want = popxl.reference.Interpreter(ir).run(feed)
    assert want[d].shape == (3, 0, 4)
    del report



def test_call_and_repeat_with_empty_inputs():
    a, b = _f(0, 3), _f(2, 3)

    def build(x, y):
        ir = popxl.gcg().ir
        g = ir.create_graph(lambda p, q: (ops.relu(p) + 1, q * 2), x, y)
        r = ir.create_graph(lambda p: p * 3, x)
        c0, c1 = ops.call(g, x, y)
        (rep,) = ops.repeat(r, 4, x)
        return c0, c1, rep

    c0, c1, rep = _run(build, a, b)
    assert c0.shape == (0, 3) and rep.shape == (0, 3)
    np.testing.assert_array_equal(c1, b * 2)


def test_normalisations_and_softmax_over_an_empty_batch():
    w, b = _f(4), _f(4)
    ln, gn, sm = _run(lambda x, p, q: (ops.layer_norm(x, p, q), ops.group_norm(ops.reshape(x, (0, 4, 1)), p, q, 2),
                                      ops.softmax(x, axis=1)), _f(0, 4), w, b)
    assert ln.shape == (0, 4) and gn.shape == (0, 4, 1) and sm.shape == (0, 4)


def test_a_variable_of_size_zero_stored_to_a_stream():
    """The QA report's program: it failed at Session with 'has no memory (is it empty?)'."""
    ir = popxl.Ir()
    with ir.main_graph:
        y = popxl.variable(np.zeros((0, 3), np.float32)) + 1
        d = popxl.d2h_stream(y.shape, y.dtype, "y")
        ops.host_store(d, y)
    with popxl.Session(ir, "ipu_model") as sess:
        assert sess.run()[d].shape == (0, 3)


def test_remote_store_and_load_of_empty_entries():
    ir = popxl.Ir()
    with ir.main_graph:
        rb = popxl.remote_buffer((0, 3), popxl.float32, entries=2)
        x = ops.host_load(s := popxl.h2d_stream((0, 3), popxl.float32, "x"))
        with popxl.in_sequence():
            ops.remote_store(rb, 1, x)
            y = ops.remote_load(rb, 1) + 1
        ops.host_store(d := popxl.d2h_stream(y.shape, y.dtype, "y"), y)
    feed = {s: np.zeros((0, 3), np.float32)}
    with popxl.Session(ir, "ipu_model") as sess:
        assert sess.run(feed)[d].shape == (0, 3)
    assert popxl.reference.Interpreter(ir).run(feed)[d].shape == (0, 3)


@pytest.mark.parametrize("dtype", [np.float16, np.int32])
def test_other_element_types(dtype):
    a = np.zeros((0, 5), dtype)
    add, cast = _run(lambda x: (x + x, ops.cast(x, popxl.float32)), a)
    assert add.dtype == dtype and add.shape == (0, 5) and cast.shape == (0, 5)


def test_replicas_with_empty_streams_variables_and_collectives():
    ir = popxl.Ir()
    ir.replication_factor = 2
    with ir.main_graph:
        v = popxl.variable(np.zeros((0, 3), np.float32), name="v")
        x = ops.host_load(s := popxl.h2d_stream((0, 3), popxl.float32, "x"))
        y = ops.collectives.replicated_all_reduce(x + v)
        ops.host_store(d := popxl.d2h_stream(y.shape, y.dtype, "y"), y)
    with popxl.Session(ir, "ipu_model") as sess:
        assert sess.run({s: np.zeros((2, 0, 3), np.float32)})[d].shape == (2, 0, 3)
        assert sess.get_tensor_data(v).shape == (0, 3)
