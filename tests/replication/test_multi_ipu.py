"""Programs over several IPUs of one replica: popxl.ipu(n), ipu_copy / copy_to_ipu, all_reduce
across IPUs, and IPU-Link costs."""
import numpy as np
import pytest

import popxl
import popxl.ops as ops
import popxl.transforms as transforms


def _run(ir, inputs=None):
    with popxl.Session(ir, "ipu_model") as s:
        out = s.run(inputs or {})
    return out, s


def _ipus_of(session, popxl_var):
    v = session._lowered.variables[popxl_var]
    return sorted(set((session.executable.layouts[v.id].tiles // session.target.tiles_per_ipu).tolist()))


def test_two_ipu_model_matches_numpy_and_places_tensors():
    rng = np.random.default_rng(0)
    w0, w1 = rng.normal(size=(8, 16)).astype(np.float32), rng.normal(size=(16, 4)).astype(np.float32)
    x = rng.normal(size=(5, 8)).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream(x.shape, popxl.float32, "x")
        with popxl.ipu(0):
            a = popxl.variable(w0, name="w0")
            h = ops.relu(ops.host_load(xs) @ a)
            h1 = h.copy_to_ipu(1)
            assert h1.ipu == 1 and h.ipu == 0
        with popxl.ipu(1):
            b = popxl.variable(w1, name="w1")
            y = h1 @ b
            ys = popxl.d2h_stream(y.shape, y.dtype, "y")
            ops.host_store(ys, y)
    out, s = _run(ir, {xs: x})
    np.testing.assert_allclose(out[ys], np.maximum(x @ w0, 0) @ w1, rtol=1e-5, atol=1e-5)
    assert s.ipus_per_replica == 2 and s.num_ipus == 2 and s.target.num_tiles == 2 * s.target.tiles_per_ipu
    assert _ipus_of(s, a) == [0] and _ipus_of(s, b) == [1]
    # the copy crosses the IPU-Links: an exchange with the link term plus the inter-IPU sync
    copy = [st for st in s.executable.steps if st.kind == "exchange" and "ipu_copy" in st.name]
    assert copy and copy[0].cycles > copy[0].tile_cycles.max()


def test_ipu_copy_needs_a_source_it_can_infer():
    ir = popxl.Ir()
    with ir.main_graph:
        v = popxl.variable(np.zeros(3, np.float32))
        with pytest.raises(ValueError, match="specify `source`"):
            ops.ipu_copy(v, 1)
        c = ops.ipu_copy(v, 1, 0)
        assert c.ipu == 1 and v.ipu == 0 and c.producer.attrs == {"source": 0, "destination": 1}


@pytest.mark.parametrize("variant", ["all_reduce", "all_reduce_identical_inputs", "all_reduce_identical_grad_inputs"])
@pytest.mark.parametrize("op", ["add", "mean", "max"])
def test_all_reduce_across_ipus(variant, op):
    if variant == "all_reduce_identical_inputs" and op != "add":
        pytest.skip("identity forward")
    data = [np.arange(6, dtype=np.float32) * (i + 1) - i for i in range(3)]
    ir = popxl.Ir()
    with ir.main_graph:
        ts = []
        for i, d in enumerate(data):
            with popxl.ipu(i):
                ts.append(popxl.variable(d, name=f"v{i}") + 0.0)
        outs = getattr(ops.collectives, variant)(ts, op=op)
        streams = []
        for i, o in enumerate(outs):
            assert o.ipu == i
            st = popxl.d2h_stream(o.shape, o.dtype, f"o{i}")
            with popxl.ipu(i):
                ops.host_store(st, o)
            streams.append(st)
    out, s = _run(ir)
    assert s.ipus_per_replica == 3
    ref = {"add": np.sum, "mean": np.mean, "max": np.max}[op](np.stack(data), axis=0)
    for i, st in enumerate(streams):
        want = data[i] if variant == "all_reduce_identical_inputs" else ref
        np.testing.assert_allclose(out[st], want, rtol=1e-6)


def test_gradient_flows_back_through_ipu_copy():
    ir = popxl.Ir()
    with ir.main_graph:
        def fwd(x, w):
            with popxl.ipu(0):
                y = (x * w).copy_to_ipu(1)
            with popxl.ipu(1):
                return ops.sum(y * y)
        spec = popxl.TensorSpec((4,), popxl.float32)
        g = ir.create_graph(fwd, spec, spec)
        info = transforms.autodiff(g)
        types = [o.type for o in info.graph.ops]
        assert "ipu_copy" in types
        back = [o for o in info.graph.ops if o.type == "ipu_copy"][0]
        assert back.attrs["source"] == 1 and back.attrs["destination"] == 0
        xv = popxl.variable(np.arange(4, dtype=np.float32), name="x")
        wv = popxl.variable(np.full(4, 2.0, np.float32), name="w")
        call = ops.call_with_info(g, xv, wv)
        with popxl.ipu(1):
            seed = popxl.constant(1.0)
        gx, gw = ops.call(info.graph, seed, inputs_dict=info.inputs_dict(call))
        streams = []
        for t, n in ((gx, "gx"), (gw, "gw")):
            st = popxl.d2h_stream(t.shape, t.dtype, n)
            with popxl.ipu(0):
                ops.host_store(st, t)
            streams.append(st)
    out, _ = _run(ir)
    x, w = np.arange(4, dtype=np.float32), np.full(4, 2.0, np.float32)
    np.testing.assert_allclose(out[streams[0]], 2 * x * w * w)
    np.testing.assert_allclose(out[streams[1]], 2 * x * w * x)


def test_replicas_of_a_two_ipu_program():
    """2 replicas x 2 IPUs: replica data stays separate, IPU 1 gets each replica's activations."""
    R = 2
    x = np.arange(R * 4, dtype=np.float32).reshape(R, 4)
    ir = popxl.Ir(replication=R)
    with ir.main_graph:
        xs = popxl.h2d_stream((4,), popxl.float32, "x")
        with popxl.ipu(0):
            h = ops.host_load(xs) * 2.0
        with popxl.ipu(1):
            y = ops.collectives.replicated_all_reduce(h.copy_to_ipu(1) + 1.0)
            ys = popxl.d2h_stream(y.shape, y.dtype, "y")
            ops.host_store(ys, y)
    out, s = _run(ir, {xs: x})
    assert s.num_ipus == 4 and s.replication_factor == 2 and s.ipus_per_replica == 2
    np.testing.assert_allclose(out[ys], np.broadcast_to((x * 2 + 1).sum(0), (R, 4)))
    # the collective's syncs span both replicas' IPUs: 2 x 2 = 4
    assert any("sync (4 IPUs)" in st.name for st in s.executable.steps)


@pytest.mark.parametrize("variant", ["all_reduce", "all_reduce_identical_inputs", "all_reduce_identical_grad_inputs"])
def test_all_reduce_across_ipus_gradients(variant):
    """identical_inputs: identity forward, all-reduced gradient; identical_grad_inputs: all-reduce
    forward, identity gradient; plain: all-reduce both ways."""
    c = [np.array([1.0, 2.0], np.float32), np.array([10.0, 20.0], np.float32)]
    ir = popxl.Ir()
    with ir.main_graph:
        def f(a, b):
            with popxl.ipu(0):
                a1 = a * 1.0
            with popxl.ipu(1):
                b1 = b * 1.0
            y0, y1 = getattr(ops.collectives, variant)([a1, b1])
            with popxl.ipu(0):
                l0 = ops.sum(y0 * popxl.constant(c[0]))
            with popxl.ipu(1):
                l1 = ops.sum(y1 * popxl.constant(c[1])).copy_to_ipu(0)
            with popxl.ipu(0):
                return l0 + l1
        spec = popxl.TensorSpec((2,), popxl.float32)
        g = ir.create_graph(f, spec, spec)
        info = transforms.autodiff(g)
        with popxl.ipu(0):
            av = popxl.variable(np.zeros(2, np.float32), name="a") + 0.0
        with popxl.ipu(1):
            bv = popxl.variable(np.zeros(2, np.float32), name="b") + 0.0
        call = ops.call_with_info(g, av, bv)
        with popxl.ipu(0):
            seed = popxl.constant(1.0)
        ga, gb = ops.call(info.graph, seed, inputs_dict=info.inputs_dict(call))
        outs = []
        for t, n, i in ((ga, "ga", 0), (gb, "gb", 1)):
            st = popxl.d2h_stream(t.shape, t.dtype, n)
            with popxl.ipu(i):
                ops.host_store(st, t)
            outs.append(st)
    out, _ = _run(ir)
    if variant == "all_reduce_identical_grad_inputs":
        want = c  # identity gradient: each input gets its own output's gradient
    else:
        want = [c[0] + c[1]] * 2
    np.testing.assert_allclose(out[outs[0]], want[0])
    np.testing.assert_allclose(out[outs[1]], want[1])
