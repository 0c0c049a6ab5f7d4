"""Convolution outputs stored in the order of their matmul's cells (each tile's block contiguous,
as poplin's channel-grouped activations) and element-wise ops that clone that layout (Poplar's
graph.clone): results against NumPy over awkward shapes, and vertex state of batch norm + ReLU6
on a 1x1 convolution's output that does not grow with the runs the NCHW order would cut it into."""
import os

import numpy as np
import pytest

import popxl
import popxl.ops as ops
from popxl.ops.nn import _batch_norm_training, _batch_norm_training_grad, _nonlinearity_grad

from helpers import run_popxl

RNG = np.random.default_rng(30)


def _conv_np(x, w):
    """A 1x1 or k x k 'valid' convolution in float64."""
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    out = np.zeros((n, m, h - kh + 1, wd - kw + 1))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,mc->nmhw", x[:, :, i:i + out.shape[2], j:j + out.shape[3]], w[:, :, i, j])
    return out


@pytest.mark.parametrize("x_shape,m,k", [((1, 7, 5, 3), 13, 1), ((3, 8, 1, 1), 1, 1), ((2, 5, 7, 7), 11, 1),
                                         ((4, 3, 6, 5), 17, 3), ((1, 1, 1, 1), 1, 1)])
def test_elementwise_ops_on_a_conv_output_match_numpy(x_shape, m, k):
    """Per-channel scale and shift, clip, a product with the conv output itself (the same view of
    another variable), a sum with a second conv's output (another layout: read in this one's
    order) and a transposed view: bit for bit what NumPy computes from the conv's own result."""
    x = RNG.standard_normal(x_shape).astype(np.float32)
    w = RNG.standard_normal((m, x_shape[1], k, k)).astype(np.float32)
    w2 = RNG.standard_normal((m, x_shape[1], k, k)).astype(np.float32)
    scale = RNG.standard_normal((1, m, 1, 1)).astype(np.float32)
    shift = RNG.standard_normal((1, m, 1, 1)).astype(np.float32)

    def build(x, w, w2, scale, shift):
        y = ops.conv(x, w)
        y2 = ops.conv(x, w2)
        a = ops.add(ops.mul(y, scale), shift)
        c = ops.clip(a, 0.0, 6.0)
        d = ops.mul(c, y)
        e = ops.add(d, y2)
        f = ops.relu(ops.transpose(e, (0, 2, 3, 1)))
        return y, y2, e, f

    (y, y2, e, f), _ = run_popxl(build, [x, w, w2, scale, shift])
    np.testing.assert_allclose(y, _conv_np(x.astype(np.float64), w.astype(np.float64)), rtol=1e-4, atol=1e-4)
    want = np.clip(y * scale + shift, np.float32(0), np.float32(6)) * y + y2
    np.testing.assert_array_equal(e, want)
    np.testing.assert_array_equal(f, np.maximum(want.transpose(0, 2, 3, 1), 0))


def _bn_relu6_program(batch, channels, tiles=4, hw=7):
    """A 1x1 convolution, batch norm (training) and ReLU6, with both their gradients, compiled for
    a small IPU of `tiles` tiles; the executable."""
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(RNG.standard_normal((batch, 16, hw, hw)).astype(np.float32), name="x")
        w = popxl.variable(RNG.standard_normal((channels, 16, 1, 1)).astype(np.float32), name="w")
        scale = popxl.variable(np.ones(channels, np.float32), name="scale")
        bias = popxl.variable(np.zeros(channels, np.float32), name="bias")
        y = ops.conv(x, w)
        z, mean, inv_std = _batch_norm_training(y, scale, bias)
        r = ops.clip(z, 0.0, 6.0)
        g = _nonlinearity_grad(ops.mul(r, y), r, "clip", 0.0, 6.0)  # a gradient in another variable
        dx, _, _ = _batch_norm_training_grad(g, y, scale, mean, inv_std)
        s = popxl.d2h_stream(dx.shape, dx.dtype)
        ops.host_store(s, dx)
    os.environ["IPU_SIM_TARGET"] = f"small:{tiles}"
    try:
        return popxl.Session(ir, "ipu_model").executable
    finally:
        del os.environ["IPU_SIM_TARGET"]


def test_bn_relu6_vertex_state_does_not_grow_with_the_runs_of_a_conv_output():
    """At batch 8 on 16 tiles a tile's block of a 1x1 convolution's 96 output channels is a run per
    channel and image in NCHW order (1,913 vertices a pass, 35,842 bytes of vertex state on the
    busiest tile when it was stored so); stored in the plan's cells it is one run per tile, so
    ReLU6, its gradient and every pass of batch norm take at most a vertex per worker context
    whatever the batch, and the vertex state barely moves from batch 1 to batch 8."""
    tiles, workers = 16, 6
    one, eight = _bn_relu6_program(1, 96, tiles), _bn_relu6_program(8, 96, tiles)
    passes = ("scale", "shift", "clip", "mul", "clip_grad", "g_x", "k1_g", "k2_x", "k1_g_k2_x", "dx")
    for exe in (one, eight):
        counts = {st.name.split("/")[-1].split(".")[0]: st.vertices for st in exe.steps if st.kind == "compute"}
        for part in passes:
            assert 0 < counts[part] <= tiles * workers, (part, counts[part])
    state = lambda exe: int(exe.plan.categories["vertex_state"].max())  # noqa: E731
    assert state(eight) <= 1.5 * state(one)


@pytest.mark.parametrize("x_shape,m", [((8, 16, 7, 7), 96), ((3, 5, 4, 3), 13), ((1, 2, 1, 1), 7)])
def test_batch_norm_statistics_of_a_conv_output_reduce_where_it_lies(x_shape, m):
    """Batch norm's per-channel sums over an output stored in its plan's cells read each (tile,
    channel) run in place (no grouping copy): the statistics and the normalised output against
    NumPy (and popxl.reference, through run_popxl)."""
    x = RNG.standard_normal(x_shape).astype(np.float32)
    w = RNG.standard_normal((m, x_shape[1], 1, 1)).astype(np.float32)
    scale = RNG.uniform(0.5, 2, m).astype(np.float32)
    bias = RNG.standard_normal(m).astype(np.float32)

    def build(x, w, scale, bias):
        y = ops.conv(x, w)
        z, mean, inv_std = _batch_norm_training(y, scale, bias)
        return y, z, mean, inv_std

    (y, z, mean, inv_std), _ = run_popxl(build, [x, w, scale, bias], target="small:16")
    y64 = y.astype(np.float64)
    np.testing.assert_allclose(mean, y64.mean((0, 2, 3)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(inv_std, 1 / np.sqrt(y64.var((0, 2, 3)) + 1e-5), rtol=1e-3)
    want = (y64 - y64.mean((0, 2, 3))[None, :, None, None]) * (scale * inv_std)[None, :, None, None] \
        + bias[None, :, None, None]
    np.testing.assert_allclose(z, want, rtol=1e-3, atol=1e-3)
