"""roi_align on the simulated IPU against the NumPy RoIAlign (torchvision's aligned=False
arithmetic, which PopART's RoiAlign follows), in float32 and float16, and its image gradient."""
import numpy as np
import pytest

import popxl
import popxl.ops as ops

from codelets.roi_align import RoiAlign, reference, roi_align_cycles
from helpers import run_popxl


def _case(n, c, h, w, k, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 2, (n, c, h, w)).astype(np.float32)
    corner = rng.uniform(-2, max(h, w) / scale, (k, 2))
    size = rng.uniform(0.2, max(h, w) / scale, (k, 2))
    rois = np.concatenate([corner, corner + size], 1).astype(np.float32)
    batch = rng.integers(0, n, k).astype(np.int32)
    return x, rois, batch


@pytest.mark.parametrize("n,c,h,w,k,out,scale,ratio", [
    (1, 1, 1, 1, 1, (1, 1), 1.0, 1),      # one pixel, one region
    (2, 3, 7, 5, 4, (2, 3), 0.5, 2),
    (3, 13, 6, 9, 11, (3, 2), 0.25, 0),   # adaptive sampling; 13 channels over 6 tiles
    (1, 7, 11, 13, 1, (5, 7), 1.0, 3),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_roi_align_matches_numpy(n, c, h, w, k, out, scale, ratio, dtype):
    x, rois, batch = _case(n, c, h, w, k, n * c + k, scale)
    x, rois = x.astype(dtype), rois.astype(dtype)
    got, _ = run_popxl(lambda a, r, b: ops.roi_align(a, r, b, out, scale, ratio), [x, rois, batch])
    want = reference(x, rois, batch, out, scale, ratio)
    tol = 1e-5 if dtype == np.float32 else 2e-2
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert got.shape == (k, c) + out and got.dtype == dtype


def test_a_batch_index_out_of_range_gives_zeros():
    x, rois, batch = _case(2, 2, 5, 5, 3, 0)
    batch[1] = 7
    got, _ = run_popxl(lambda a, r, b: ops.roi_align(a, r, b, (2, 2), 1.0, 2), [x, rois, batch])
    assert np.all(got[1] == 0)
    np.testing.assert_allclose(got[[0, 2]], reference(x, rois, batch, (2, 2), 1.0, 2)[[0, 2]], rtol=1e-5)


def test_roi_align_gradient_on_the_ipu_matches_the_linear_map():
    x, rois, batch = _case(2, 3, 6, 5, 4, 3, 1.0)
    dy = np.random.default_rng(9).standard_normal((4, 3, 2, 2)).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        xv = popxl.variable(x, name="x")
        rv = popxl.constant(rois)
        bv = popxl.constant(batch)
        g = ir.create_graph(lambda t, r, b: ops.roi_align(t, r, b, (2, 2), 1.0, 2), xv, rv, bv)
        info = popxl.transforms.autodiff(g, grads_required=[g.inputs[0]])
        call = ops.call_with_info(g, xv, rv, bv)
        (dx,) = ops.call(info.graph, popxl.constant(dy), inputs_dict=info.inputs_dict(call))
        o = popxl.d2h_stream(dx.shape, dx.dtype)
        ops.host_store(o, dx)
    with popxl.Session(ir, "ipu_model") as s:
        got = s.run()[o]
    # roi_align is linear in x: the gradient is sum_k dy[k] * d out[k] / d x
    want = np.zeros(x.shape)
    for idx in np.ndindex(*x.shape):
        e = np.zeros(x.shape)
        e[idx] = 1.0
        want[idx] = np.sum(reference(e, rois, batch, (2, 2), 1.0, 2) * dy)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_cost_model_grows_with_the_work():
    ip = np.array([[2, 8, 8, 2, 2, 2, 4], [2, 8, 8, 2, 2, 2, 8], [2, 8, 8, 4, 4, 2, 4]])
    cnt = np.array([[2 * 64 * 4, 40, 10, 10 * 4 * 4]] * 3)
    c = roi_align_cycles(cnt, ip)
    assert c[1] > c[0] and c[2] > c[0]
    # the derivation's terms for the first row: 20 + K (30 + bins (6 + 4 w + S (24 + 8 w)))
    assert c[0] == 20 + 10 * (30 + 4 * (6 + 16 + 4 * (24 + 32)))
    assert RoiAlign().cycles(None, cnt, None, ip, None)[0] == c[0]
