"""Reductions across many tiles in stages, as popops reduces (popxl/lowering/reduction_stages.py):
partials move as regions (one run per source tile for a block of outputs), an intermediate stage
when each output has many partials, and the receiving tiles' exchange code bounded."""
import numpy as np
import pytest

import ipu
import popxl.ops as ops

from .helpers import run_popxl

RNG = np.random.default_rng(30)


@pytest.fixture
def reduce_code(monkeypatch):
    """{step name: most exchange code on a tile} of the reductions' gathers (the steps after
    the on-tile stage), as the compile counts it."""
    got = {}
    orig = ipu.compiler.Compiler.add_exchange_code

    def spy(self, tile_bytes, owner=""):
        if owner.endswith("/gather"):
            got[owner] = max(got.get(owner, 0), int(np.asarray(tile_bytes).max()))
        return orig(self, tile_bytes, owner)

    monkeypatch.setattr(ipu.compiler.Compiler, "add_exchange_code", spy)
    return got


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_column_sum_over_many_tiles_is_staged(reduce_code, dtype):
    # NHWC-like: every tile holds a few positions of all 32 channels, so each channel's partials
    # come from all 256 tiles: more than 32 a channel, so an intermediate stage first
    x = RNG.uniform(-1, 1, (4096, 32)).astype(dtype)
    out, _ = run_popxl(lambda t: (ops.sum(t, axis=0), ops.max(t, axis=0)), [x], target="small:256")
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(out[0].astype(np.float64), x.astype(np.float64).sum(0), **tol)
    np.testing.assert_array_equal(out[1], x.max(0))
    assert any("/stage0/" in s for s in reduce_code), reduce_code
    # in one stage an output tile took a message from each of the 256 tiles (1,284 B of code);
    # staged, each tile receives a run from each of at most 32 sources (max: pieces of 2
    # columns, 8 groups of 32) and sends one run per piece
    assert max(reduce_code.values()) <= 32 * 4 + 16 * 8 + 16, reduce_code


@pytest.mark.parametrize("n, c, hw, most_code", [(8, 16, 12, 160), (2, 7, 5, None), (3, 24, 9, 260)])
def test_batch_norm_statistics_of_a_conv_output(reduce_code, n, c, hw, most_code):
    """A convolution's per-channel sum and sum of squares (a batch norm's statistics) over its
    output laid out in the plan's cells: each tile's block of channels arrives as one run per
    source tile, not one message per channel."""
    x = RNG.uniform(-1, 1, (n, 5, hw, hw)).astype(np.float32)
    w = RNG.uniform(-1, 1, (c, 5, 3, 3)).astype(np.float32)

    def build(t, wt):
        y = ops.conv(t, wt, padding=(1, 1, 1, 1))
        return ops.sum(y, axis=(0, 2, 3)), ops.sumsquare(y, axis=(0, 2, 3))

    out, _ = run_popxl(build, [x, w], target="small:64")
    y = _conv_ref(x.astype(np.float64), w.astype(np.float64))
    np.testing.assert_allclose(out[0], y.sum((0, 2, 3)), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out[1], (y * y).sum((0, 2, 3)), rtol=1e-4, atol=1e-4)
    if most_code:  # one message per channel and source tile took 408 and 356 B on a tile
        assert max(reduce_code.values()) <= most_code, reduce_code


def _conv_ref(x, w):
    n, ci, h, wd = x.shape
    co, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = np.zeros((n, co, h, wd))
    for i in range(kh):
        for j in range(kw):
            y += np.einsum("nchw,oc->nohw", xp[:, :, i:i + h, j:j + wd], w[:, :, i, j])
    return y
