"""Transposes as contiguous block exchanges plus on-tile Transpose2d vertices: results, exchange
code and cycles."""
import numpy as np
import pytest

import ipu
import popxl.ops as ops
from codelets.transpose import transpose2d_cycles

from .helpers import run_popxl


@pytest.fixture
def rng():
    return np.random.default_rng(10)


def _exchange_code(session):
    return session.executable.plan.categories["exchange_code"]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("k, m, n", [(96, 64, 48), (37, 13, 29), (1, 5, 3), (64, 1, 7)])
def test_matmul_of_a_transposed_operand_matches_numpy(dtype, k, m, n, rng):
    _transposed_matmul(dtype, k, m, n, rng)


def _transposed_matmul(dtype, k, m, n, rng):
    """x^T @ w on a 16-tile IPU, checked against NumPy: (x, the session)."""
    x = rng.normal(0, 1, (k, m)).astype(dtype)
    w = rng.normal(0, 1, (k, n)).astype(dtype)
    got, session = run_popxl(lambda a, b: ops.transpose(a) @ b, [x, w], target="small:16")
    tol = 1e-4 if dtype == np.float32 else 2e-2
    np.testing.assert_allclose(got.astype(np.float32), x.astype(np.float32).T @ w.astype(np.float32),
                               rtol=tol, atol=tol * np.sqrt(k))
    return x, session


def test_batched_head_transposes_match_numpy(rng):
    """Attention's head reshuffle: K^T per head is a transposed view the matmul gathers by blocks."""
    s, h, d = 24, 3, 8
    q = rng.normal(0, 1, (s, h * d)).astype(np.float32)
    k = rng.normal(0, 1, (s, h * d)).astype(np.float32)

    def build(a, b):
        qh = ops.transpose(a.reshape((s, h, d)), (1, 0, 2))
        kt = ops.transpose(b.reshape((s, h, d)), (1, 2, 0))
        return qh @ kt

    got, session = run_popxl(build, [q, k], target="small:16")
    expect = q.reshape(s, h, d).transpose(1, 0, 2) @ k.reshape(s, h, d).transpose(1, 2, 0)
    np.testing.assert_allclose(got, expect, rtol=1e-5, atol=1e-5)
    assert any(st.kind == "compute" and "transpose" in st.name for st in session.executable.steps)


def test_exchange_code_of_a_transpose_is_small(rng):
    """x^T @ w moves x as contiguous runs: within twice the exchange code of x @ w with x already
    in the right order (the regrouping before the multicast adds a phase of runs of at least 32
    bytes), and far less than a transpose copied element by element."""
    k, m, n = 128, 96, 64
    x = rng.normal(0, 1, (k, m)).astype(np.float32)
    w = rng.normal(0, 1, (k, n)).astype(np.float32)
    _, s_view = run_popxl(lambda a, b: ops.transpose(a) @ b, [x, w], target="small:16")
    _, s_plain = run_popxl(lambda a, b: a @ b, [np.ascontiguousarray(x.T), w], target="small:16")
    # an element-by-element transpose: the transposed tensor is also read by an add, so it is copied
    _, s_elem = run_popxl(lambda a, b: ops.transpose(a) + 0.0, [x, w], target="small:16")
    view, plain, elem = (int(_exchange_code(s).sum()) for s in (s_view, s_plain, s_elem))
    assert view <= 2 * plain, (view, plain)
    assert view * 4 < elem, (view, elem)


def test_transpose_cycles_follow_the_transpose2d_estimator(rng):
    k, m, n = 128, 96, 64
    x = rng.normal(0, 1, (k, m)).astype(np.float32)
    w = rng.normal(0, 1, (k, n)).astype(np.float32)
    _, session = run_popxl(lambda a, b: ops.transpose(a) @ b, [x, w], target="small:16")
    exe = session.executable
    steps = [st for st in exe.steps if st.kind == "compute" and st.name.endswith("/transpose")]
    assert steps
    for st in steps:
        (grp,) = [g for g in st.payload.groups if g.codelet.name == "Transpose2d"]
        rows, cols = grp.ip[:, 0], grp.ip[:, 1]
        expect = transpose2d_cycles(rows, cols, grp.cnt[:, 0] // (rows * cols), 4)
        np.testing.assert_array_equal(grp.vertex_cycles, expect)
        sched = ipu.costs.compute_set_tile_cycles(grp.tiles, expect, np.zeros(len(grp.tiles), bool), exe.target)
        np.testing.assert_array_equal(st.tile_cycles, sched)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_a_shared_transposed_operand_is_transposed_once(dtype, rng):
    """When several tiles need the same block of a transposed operand, the block is regrouped
    (transposed) once, on the tiles, before the multicast: the Transpose2d vertices move each
    element of x once, not once per tile that receives it, spread over the tiles sharing a block."""
    x, session = _transposed_matmul(dtype, 128, 96, 64, rng)
    steps = session.executable.steps
    names = [st.name for st in steps]
    assert "matmul/exchange a/regroup" in names
    (tr,) = [st for st in steps if st.kind == "compute" and st.name == "matmul/exchange a/transpose"]
    (grp,) = tr.payload.groups
    assert int(grp.cnt[:, 0].sum()) == x.size
    assert len(np.unique(grp.tiles)) >= 8


def _dense_conv_weight_gradient(x, w, dy, stride, pads, groups, target="small:16"):
    """dW of conv(x, w) for the output gradient dy through popxl autodiff (compiled, run): (dW, executable)."""
    import os

    import popxl

    ir = popxl.Ir()
    with ir.main_graph:
        xv, wv = popxl.variable(x, name="x"), popxl.variable(w, name="w")
        g = ir.create_graph(lambda a, b: ops.conv(a, b, stride=stride, padding=pads, groups=groups), xv.spec, wv.spec)
        gg = popxl.transforms.autodiff(g)
        info = ops.call_with_info(g, xv, wv)
        dyv = popxl.variable(dy, name="dy")
        _, dw = ops.call(gg.graph, dyv, inputs_dict=gg.inputs_dict(info))
        sw = popxl.d2h_stream(dw.shape, dw.dtype)
        ops.host_store(sw, dw)
    os.environ["IPU_SIM_TARGET"] = target
    try:
        with popxl.Session(ir, "ipu_model") as s:
            return s.run()[sw], s.executable
    finally:
        del os.environ["IPU_SIM_TARGET"]


def _weight_gradient_numpy(x, dy, kernel, stride, pads, groups):
    """float64 dW[m, c, k..] = sum over images and output positions of dy[n, m, p] x window[n, c, p, k]."""
    n, c = x.shape[:2]
    m = dy.shape[1]
    nd = len(kernel)
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(pads[i], pads[nd + i]) for i in range(nd)])
    cg, mg = c // groups, m // groups
    dw = np.zeros((m, cg) + tuple(kernel))
    for k in np.ndindex(*kernel):
        sl = [slice(None), slice(None)] + [slice(k[i], k[i] + stride[i] * (dy.shape[2 + i] - 1) + 1, stride[i])
                                           for i in range(nd)]
        patch = xp[tuple(sl)].reshape(n, groups, cg, -1)
        d = dy.astype(np.float64).reshape(n, groups, mg, -1)
        dw[(slice(None), slice(None)) + k] = np.einsum("ngcp,ngmp->gmc", patch, d).reshape(m, cg)
    return dw


# (x shape, groups, output channels, kernel, stride, pads): batches > 1, so dy^T [N x P, M] runs
# down each image's positions and jumps at the next image
BATCHED_WEIGHT_GRADIENTS = [
    ((3, 5, 7, 6), 1, 4, (3, 3), (1, 1), (1, 1, 1, 1)),
    ((2, 16, 5, 5), 2, 6, (1, 1), (1, 1), (0, 0, 0, 0)),  # 8 channels a group: the AMP matmul, groups as batch
    ((4, 3, 9, 1), 1, 7, (2, 1), (2, 1), (0, 0, 1, 0)),  # one column, stride 2
    ((5, 2, 1, 13), 1, 1, (1, 3), (1, 1), (0, 1, 0, 1)),  # one output channel, prime sizes
    ((2, 11, 17, 3), 1, 13, (1, 1), (1, 1), (0, 0, 0, 0)),
]


@pytest.mark.parametrize("shape,groups,m,kernel,stride,pads", BATCHED_WEIGHT_GRADIENTS)
def test_weight_gradient_over_a_batch_matches_numpy(shape, groups, m, kernel, stride, pads, rng):
    x = rng.normal(0, 1, shape).astype(np.float32)
    w = rng.normal(0, 1, (m, shape[1] // groups) + kernel).astype(np.float32)
    out_sp = [(shape[2 + i] + pads[i] + pads[2 + i] - kernel[i]) // stride[i] + 1 for i in range(2)]
    dy = rng.normal(0, 1, (shape[0], m) + tuple(out_sp)).astype(np.float32)
    got, _ = _dense_conv_weight_gradient(x, w, dy, stride, pads, groups)
    np.testing.assert_allclose(got, _weight_gradient_numpy(x, dy, kernel, stride, pads, groups), rtol=1e-4, atol=1e-4)


def test_weight_gradient_over_a_batch_exchanges_its_operands_as_runs(rng):
    """dW = dy @ windows: the windows of a batch ([N x P, C]) run down each image's positions and
    jump at the next image, a transpose in pieces; they cross the exchange in their own order, as
    runs along each image's positions, and Transpose2d vertices reorder them on the tiles (gathered
    row by row they would be one 4-byte run per element). dy runs along its rows, and the partials
    land in rows of dW."""
    x = rng.normal(0, 1, (4, 16, 12, 12)).astype(np.float32)
    w = rng.normal(0, 1, (24, 16, 1, 1)).astype(np.float32)
    dy = rng.normal(0, 1, (4, 24, 12, 12)).astype(np.float32)
    got, exe = _dense_conv_weight_gradient(x, w, dy, (1, 1), (0, 0, 0, 0), 1)
    np.testing.assert_allclose(got, _weight_gradient_numpy(x, dy, (1, 1), (1, 1), (0, 0, 0, 0), 1),
                               rtol=1e-4, atol=1e-4)
    names = [st.name for st in exe.steps]
    assert any(n.startswith("conv_weights_grad") and n.endswith("exchange b/transpose") for n in names), names
    for operand, size in (("exchange a", dy.nbytes), ("exchange b", x.nbytes), ("exchange partials", w.nbytes)):
        moves = [st for st in exe.steps if st.kind == "exchange" and st.name.startswith("conv_weights_grad")
                 and operand in st.name]
        runs = sum(len(st.payload.nbytes) for st in moves)
        moved = sum(int(st.payload.nbytes.sum()) for st in moves)
        assert moved >= size and moved / runs >= 32, (operand, moved, runs)


def test_short_runs_down_are_not_transposed(rng):
    """A stride-2 convolution's windows [C x K, P] run down only one kernel row (3 elements) and not
    at all along the output positions: moving them in source order would save little exchange code
    and cost a Transpose2d pass, so they are gathered as they are (no transpose step)."""
    x = rng.normal(0, 1, (1, 3, 15, 15)).astype(np.float32)
    w = rng.normal(0, 1, (8, 3, 3, 3)).astype(np.float32)
    got, session = run_popxl(lambda a, b: ops.conv(a, b, stride=(2, 2), padding=(1, 1, 1, 1)), [x, w],
                             target="small:16")
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (1, 1), (1, 1)])
    ref = np.zeros((1, 8, 8, 8))
    for kh in range(3):
        for kw in range(3):
            patch = xp[:, :, kh:kh + 15:2, kw:kw + 15:2]
            ref += np.einsum("nchw,mc->nmhw", patch, w[:, :, kh, kw].astype(np.float64))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    assert not any(st.kind == "compute" and "transpose" in st.name for st in session.executable.steps)
