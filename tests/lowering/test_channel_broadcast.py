"""A per-channel operand of an element-wise op (batch norm's scale and shift) over NCHW
activations: BroadcastVectorOuter vertices over a tile's regions (popops' lowering), bit for bit
what NumPy computes at float32 and float16, and vertex state that follows a tile's regions, not
the channels and images it holds."""
import os

import numpy as np
import pytest

import popxl
import popxl.ops as ops
from popxl.ops.nn import _batch_norm_training, _batch_norm_training_grad

from helpers import run_popxl

RNG = np.random.default_rng(31)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape,target", [((8, 13, 7, 7), "small:4"), ((2, 7, 11, 3), "small:6"),
                                          ((3, 5, 6, 6), "small:16"), ((4, 11, 37, 5), "small:16"),
                                          ((1, 1, 8, 4), "small:4"), ((5, 3, 1, 97), "small:6")])
def test_per_channel_add_sub_mul_match_numpy(shape, target, dtype):
    """Runs of a channel cut by tile boundaries (a split that does not divide the tiles), one
    channel, one image, prime sizes: out = ((x * a) + b) - c per channel."""
    x = RNG.standard_normal(shape).astype(dtype)
    c = shape[1]
    a, b, s = (RNG.standard_normal((1, c, 1, 1)).astype(dtype) for _ in range(3))

    def build(x, a, b, s):
        return ops.sub(ops.add(ops.mul(x, a), b), s)

    out, _ = run_popxl(build, [x, a, b, s], target=target)
    f = np.float32
    want = ((x.astype(f) * a.astype(f)).astype(dtype).astype(f) + b.astype(f)).astype(dtype).astype(f) - s.astype(f)
    np.testing.assert_array_equal(out, want.astype(dtype))


def _bn_program(batch, channels, tiles=4, hw=7):
    """Batch norm (training) of a (batch, channels, hw, hw) variable and its gradient, for a small
    IPU of `tiles` tiles: the executable."""
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(RNG.standard_normal((batch, channels, hw, hw)).astype(np.float32), name="x")
        g = popxl.variable(RNG.standard_normal((batch, channels, hw, hw)).astype(np.float32), name="g")
        scale = popxl.variable(np.ones(channels, np.float32), name="scale")
        bias = popxl.variable(np.zeros(channels, np.float32), name="bias")
        z, mean, inv_std = _batch_norm_training(x, scale, bias)
        dx, _, _ = _batch_norm_training_grad(g, x, scale, mean, inv_std)
        for t in (z, dx):
            ops.host_store(popxl.d2h_stream(t.shape, t.dtype), t)
    os.environ["IPU_SIM_TARGET"] = f"small:{tiles}"
    try:
        return popxl.Session(ir, "ipu_model").executable
    finally:
        del os.environ["IPU_SIM_TARGET"]


def test_batch_norm_vertex_state_does_not_grow_with_the_channels_on_a_tile():
    """Batch norm over 192 and over 768 channels of 2 images of 6 x 6 on 4 tiles: a tile holds one
    region of 96 or 384 (image, channel) runs. Its per-channel passes take at most three vertices
    a region (a partial run at each end, the whole runs between: BroadcastVectorOuter), not one a
    run (384 vertices a pass at 768 channels before), so the busiest tile's vertex state stays put
    while its channels grow fourfold (both spread their per-channel statistics over every tile)."""
    tiles = 4
    passes = ("scale", "shift", "k1_g", "k2_x", "dx")
    small, large = _bn_program(2, 192, tiles, hw=6), _bn_program(2, 768, tiles, hw=6)
    for exe in (small, large):
        counts = {st.name.split("/")[-1].split(".")[0]: st.vertices for st in exe.steps if st.kind == "compute"}
        for part in passes:
            assert 0 < counts[part] <= 3 * tiles, (part, counts[part])
    state = lambda exe: int(exe.plan.categories["vertex_state"].max())  # noqa: E731
    assert state(large) <= state(small) + 64, (state(small), state(large))
