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
