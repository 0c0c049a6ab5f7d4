"""concat as PopART's ConcatOpx lays it out (a clone of the concatenated inputs: copies stay on
their tiles), fill inputs (init zeros, one-valued constants) written by Fill vertices."""
import numpy as np
import pytest

import ipu
import popxl
import popxl.ops as ops

from .helpers import run_popxl


@pytest.fixture
def concat_code(monkeypatch):
    """Exchange code of the steps named .../concat, summed over the tiles, as the compile counts it."""
    got = []
    orig = ipu.compiler.Compiler.add_exchange_code

    def spy(self, tile_bytes, owner=""):
        if owner.endswith("/concat"):
            got.append(int(np.asarray(tile_bytes).sum()))
        return orig(self, tile_bytes, owner)

    monkeypatch.setattr(ipu.compiler.Compiler, "add_exchange_code", spy)
    return got


def _zeros(shape, dt):
    return ops.init(tuple(shape), dt, "z", "zero")


CASES = [  # (input shapes, axis, which inputs are fills: None data, else "zero" / a constant value)
    ([(4, 3), (4, 5)], 1, [None, None]),
    ([(1, 7), (3, 7), (2, 7)], 0, [None, "zero", None]),
    ([(2, 3, 5, 1), (2, 3, 5, 1)], 3, [None, "zero"]),  # a strided gradient's interleaved zeros
    ([(2, 3, 1, 11), (2, 3, 1, 11)], 2, ["zero", None]),
    ([(5, 2), (5, 3), (5, 1)], 1, [-np.inf, None, -np.inf]),  # max pool's padding
    ([(3, 13), (3, 2)], 1, [None, -0.0]),
    ([(2, 17), (2, 5)], 1, [1.5, 2.5]),  # fills only
    ([(6,), (1,)], 0, [None, None]),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shapes, axis, fills", CASES)
def test_concat_matches_numpy_and_stays_on_tile(shapes, axis, fills, dtype, concat_code):
    rng = np.random.default_rng(3)
    data = [rng.normal(0, 1, s).astype(dtype) for s, f in zip(shapes, fills) if f is None]
    want = [d for d in data]
    parts_np = []
    it = iter(want)
    for s, f in zip(shapes, fills):
        if f is None:
            parts_np.append(next(it))
        elif f == "zero":
            parts_np.append(np.zeros(s, dtype))
        else:
            parts_np.append(np.full(s, f, dtype))

    def build(*xs):
        it = iter(xs)
        parts = []
        for s, f in zip(shapes, fills):
            if f is None:
                parts.append(next(it))
            elif f == "zero":
                parts.append(_zeros(s, popxl.dtype.as_dtype(dtype)))
            else:
                parts.append(popxl.constant(np.full(s, f, dtype)))
        return ops.concat(parts, axis)

    got, _ = run_popxl(build, data, target="small:7")
    expect = np.concatenate(parts_np, axis)
    np.testing.assert_array_equal(got.view(np.uint16 if dtype == np.float16 else np.uint32),
                                  expect.view(np.uint16 if dtype == np.float16 else np.uint32))
    assert sum(concat_code) == 0  # every copy stays on its tile


def test_concat_of_a_transposed_view_still_matches_numpy(concat_code):
    """An input read through a reordering view (not cloned: the output keeps the mapping policy)."""
    rng = np.random.default_rng(4)
    a = rng.normal(0, 1, (6, 5)).astype(np.float32)
    b = rng.normal(0, 1, (5, 4)).astype(np.float32)
    got, _ = run_popxl(lambda x, y: ops.concat([ops.transpose_(x), y], 1), [a, b], target="small:7")
    np.testing.assert_array_equal(got, np.concatenate([a.T, b], 1))
