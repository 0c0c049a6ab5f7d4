"""Variables laid out by their consumer (popxl/lowering/creators.py): a weight a matmul reads,
directly or through a transpose, is stored as the matmul's operand blocks, so nothing copies it;
its values, host transfers and updates are the user's as before."""
import os

import numpy as np
import pytest

import popxl
import popxl.ops as ops

from .helpers import run_popxl


@pytest.fixture
def small_target():
    old = os.environ.get("IPU_SIM_TARGET")
    os.environ["IPU_SIM_TARGET"] = "small:16"
    yield
    if old is None:
        os.environ.pop("IPU_SIM_TARGET", None)
    else:
        os.environ["IPU_SIM_TARGET"] = old


def _run(build, x, w_data, weights_out=False):
    """y = build(x, w) with w a variable holding w_data: (y, the session, w's value read back)."""
    ir = popxl.Ir()
    with ir.main_graph:
        s_in = popxl.h2d_stream(x.shape, popxl.float32, "x")
        w = popxl.variable(w_data, name="w")
        y = build(ops.host_load(s_in), w)
        s_out = popxl.d2h_stream(y.shape, y.dtype, "y")
        ops.host_store(s_out, y)
    session = popxl.Session(ir, "ipu_model")
    with session:
        got = session.run({s_in: x})[s_out]
    return got, session, session.get_tensor_data(w)


def _variable_of(session, name):
    return session._lowered.variables[next(v for v in session._lowered.variables if v.name == name)]


@pytest.mark.parametrize("m, k, n", [(1, 96, 40), (1, 37, 29), (1, 1, 300), (2, 130, 3)])
def test_weight_read_by_a_matmul_is_stored_as_its_blocks(small_target, m, k, n):
    rng = np.random.default_rng(0)
    x = rng.normal(0, 1, (m, k)).astype(np.float32)
    w = rng.normal(0, 1, (k, n)).astype(np.float32)
    got, session, back = _run(lambda a, b: a @ b, x, w)
    np.testing.assert_allclose(got, x @ w, rtol=1e-5, atol=1e-5 * np.sqrt(k))
    np.testing.assert_array_equal(back, w)  # host sees the user's values in the user's order
    steps = _step_names(session)
    assert not any("exchange b" in s for s in steps), steps


def _step_names(session):
    lowered = session._lowered
    return list(lowered.op_names)


@pytest.mark.parametrize("m, k, n", [(1, 64, 48), (4, 33, 17)])
def test_transposed_weight_needs_no_staging(small_target, m, k, n):
    """ONNX Gemm with transB (torch.nn.Linear): y = x @ w.T, w [n, k]."""
    rng = np.random.default_rng(1)
    x = rng.normal(0, 1, (m, k)).astype(np.float32)
    w = rng.normal(0, 1, (n, k)).astype(np.float32)
    got, session, back = _run(lambda a, b: a @ ops.transpose(b), x, w)
    np.testing.assert_allclose(got, x @ w.T, rtol=1e-5, atol=1e-5 * np.sqrt(k))
    np.testing.assert_array_equal(back, w)
    steps = _step_names(session)
    assert not any("exchange b" in s or "transpose" in s for s in steps), steps


def test_weight_shared_by_two_consumers(small_target):
    """The first matmul lays the weight out; the second (w^T) and an element-wise op read it
    through the view."""
    rng = np.random.default_rng(2)
    x = rng.normal(0, 1, (3, 24)).astype(np.float32)
    w = rng.normal(0, 1, (24, 24)).astype(np.float32)

    def build(a, b):
        h = a @ b
        return (h @ ops.transpose(b)) + ops.sum(b * b)

    got, session, back = _run(build, x, w)
    want = (x @ w) @ w.T + (w * w).sum()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    np.testing.assert_array_equal(back, w)


def test_weights_from_host_write_through_the_layout(small_target):
    """A new host value of a laid-out weight reaches the device in the layout's order."""
    rng = np.random.default_rng(3)
    x = rng.normal(0, 1, (2, 40)).astype(np.float32)
    w = rng.normal(0, 1, (40, 30)).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        s_in = popxl.h2d_stream(x.shape, popxl.float32, "x")
        wv = popxl.variable(w, name="w")
        y = ops.host_load(s_in) @ wv
        s_out = popxl.d2h_stream(y.shape, y.dtype, "y")
        ops.host_store(s_out, y)
    session = popxl.Session(ir, "ipu_model")
    w2 = rng.normal(0, 1, w.shape).astype(np.float32)
    with session:
        session.write_variable_data(wv, w2)
        got = session.run({s_in: x})[s_out]
        back = session.get_tensor_data(wv)
    np.testing.assert_allclose(got, x @ w2, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(back, w2)


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("m, k, n", [(4, 48, 20), (1, 37, 29), (3, 130, 7), (2, 1, 5)])
def test_trained_with_sgd(small_target, transposed, m, k, n):
    """Three SGD steps of a linear layer (loss = sum(y^2) / 2, so dL/dy = y; w -= lr * dL/dw)
    against NumPy: the update applies to the weight in its consumer's layout, a transposed weight
    (torch.nn.Linear's, ONNX Gemm transB) too: the forward transpose stays a view, since the
    update comes after every matmul that reads it."""
    rng = np.random.default_rng(4)
    lr, steps = 0.01, 3
    x = rng.normal(0, 1, (m, k)).astype(np.float32)
    w0 = rng.normal(0, 0.2, (n, k) if transposed else (k, n)).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        s_in = popxl.h2d_stream(x.shape, popxl.float32, "x")
        w = popxl.variable(w0, name="w")
        xin = ops.host_load(s_in)
        y = xin @ (ops.transpose(w) if transposed else w)
        dw = ops.transpose(y) @ xin if transposed else ops.transpose(xin) @ y
        ops.scaled_add_(w, dw, b=-lr)
    session = popxl.Session(ir, "ipu_model")
    want = w0.astype(np.float64)
    with session:
        for _ in range(steps):
            session.run({s_in: x})
            g = x.T @ (x @ (want.T if transposed else want))
            want = want - lr * (g.T if transposed else g)
        got = session.get_tensor_data(w)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # read by the forward matmul first: laid out as its blocks, updated there
    names = _step_names(session)
    assert not any("write_back" in s or "seed" in s for s in names), names
    assert not any(s.startswith("transpose") for s in names), names  # no copy of w^T
    if not transposed and k > 1:
        assert names.index("matmul/amp") < names.index("matmul/exchange b")  # only the gradient's b moves


def _temporaries_per_tile(session):
    return session.executable.plan.categories["temporaries"]


def test_weight_bound_product_holds_its_weight_once(small_target):
    """y = x @ w^T with a large w [n, k]: as a variable the weight is read where it lives, as a
    streamed activation of the same shape it is gathered into blocks and staged for its
    transpose; the variable saves both copies on every tile."""
    rng = np.random.default_rng(5)
    m, k, n = 1, 512, 384
    x = rng.normal(0, 1, (m, k)).astype(np.float32)
    w = rng.normal(0, 1, (n, k)).astype(np.float32)
    got, session, _ = _run(lambda a, b: a @ ops.transpose(b), x, w)
    np.testing.assert_allclose(got, x @ w.T, rtol=1e-5, atol=1e-4)
    got2, streamed = run_popxl(lambda a, b: a @ ops.transpose(b), [x, w], target="small:16", reference=False)
    np.testing.assert_allclose(got2, x @ w.T, rtol=1e-5, atol=1e-4)
    per_tile = w.nbytes / 16
    with_var = _temporaries_per_tile(session).max()
    with_stream = _temporaries_per_tile(streamed).max()
    # streamed: the loaded w, its blocks and their staging (three copies), the variable none
    assert with_stream - with_var >= 1.5 * per_tile, (with_var, with_stream, per_tile)
    assert with_var < 0.25 * per_tile, (with_var, per_tile)
    plan = session.executable.plan
    assert plan.categories["variables"].max() <= 1.1 * per_tile + 64


def test_plan_costs_an_operand_created_in_place_as_held_not_moved():
    """plan_matmul(in_place="b"): where no two cells share a B block (no m-split) the weight is not
    exchanged and is no temporary; the plan's memory counts its blocks as held."""
    import ipu
    from codelets.plans import plan_for_shapes
    from ipu.target import GC200

    moved = plan_for_shapes((1, 4096), (4096, 4096), ipu.FLOAT32, GC200)
    held = plan_for_shapes((1, 4096), (4096, 4096), ipu.FLOAT32, GC200, in_place="b")
    assert moved.estimate["exchange_b"] > 0
    assert held.parts[1] == 1 and held.estimate["exchange_b"] == 0
    assert held.estimate["total"] < moved.estimate["total"]
    pm, pn, pk = held.parts[1:]
    assert held.bytes_per_tile >= 4 * -(-4096 // pk) * -(-4096 // pn)  # its B block is on the tile


@pytest.mark.parametrize("n, k", [(1, 1), (37, 29), (300, 1), (3, 130), (97, 61)])
def test_transposed_weight_is_viewed_block_by_block(small_target, n, k):
    """A transposed weight's view of its storage steps by the block's width along its rows: it is
    kept as ipu.IndexBlocks (a start and strides per block), not an index per element, and host
    reads and writes go through it exactly."""
    rng = np.random.default_rng(6)
    x = rng.normal(0, 1, (2, k)).astype(np.float32)
    w = rng.normal(0, 1, (n, k)).astype(np.float32)
    got, session, back = _run(lambda a, b: a @ ops.transpose(b), x, w)
    np.testing.assert_allclose(got, x @ w.T, rtol=1e-5, atol=1e-5 * np.sqrt(k))
    np.testing.assert_array_equal(back, w)
    view = next(t for p, t in session._lowered.variables.items() if p.name == "w")
    if view.is_identity:  # blocks in the weight's own order (one row of blocks)
        return
    assert view.blocks is not None
    assert view.blocks.nbytes <= 120 * view.blocks.e0.size
    # the same element order as the plan's blocks gathered one element at a time
    stored = session.engine.read_tensor(view.variable).reshape(-1)
    np.testing.assert_array_equal(stored[view.flat_index()].reshape(w.shape), w)
    w2 = rng.normal(0, 1, w.shape).astype(np.float32)
    with session:
        session.write_variable_data(_popxl_var(session, "w"), w2)
        np.testing.assert_array_equal(session.get_tensor_data(_popxl_var(session, "w")), w2)


def _popxl_var(session, name):
    return next(p for p in session._lowered.variables if p.name == name)


def test_transposed_weight_through_the_executable_cache(small_target, tmp_path):
    """An executable whose weight is viewed block by block is saved and loaded with that view:
    the loaded session runs and reads the weight as the first did."""
    rng = np.random.default_rng(7)
    x = rng.normal(0, 1, (3, 41)).astype(np.float32)
    w = rng.normal(0, 1, (53, 41)).astype(np.float32)

    def session_of():
        ir = popxl.Ir()
        with ir.main_graph:
            s_in = popxl.h2d_stream(x.shape, popxl.float32, "x")
            wv = popxl.variable(w, name="w")
            y = ops.host_load(s_in) @ ops.transpose(wv)
            s_out = popxl.d2h_stream(y.shape, y.dtype, "y")
            ops.host_store(s_out, y)
        opts = ir._pb_ir.getSessionOptions()
        opts.enableEngineCaching = True
        opts.cachePath = str(tmp_path)
        return popxl.Session(ir, "ipu_model"), s_in, s_out, wv

    outs = []
    for _ in range(2):
        session, s_in, s_out, wv = session_of()
        with session:
            outs.append(session.run({s_in: x})[s_out])
            np.testing.assert_array_equal(session.get_tensor_data(wv), w)
    assert session.loaded_from_cache
    view = next(t for p, t in session._lowered.variables.items() if p.name == "w")
    assert view.blocks is not None
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[1], x @ w.T, rtol=1e-5, atol=1e-4)
