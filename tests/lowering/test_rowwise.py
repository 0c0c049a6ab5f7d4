"""argmax, argmin, topk, median and cumsum through popxl.Session on a small simulated IPU."""
import numpy as np
import pytest

import popxl.ops as ops

from helpers import run_popxl

TYPES = [np.float32, np.float16, np.int32]
CASES = [((1,), 0), ((7,), 0), ((5, 13), 0), ((5, 13), 1), ((3, 7, 11), 1), ((2, 3, 97), 2), ((97, 2), 0),
         ((1, 1, 5), 0)]


def _data(rng, shape, dt, ties=True):
    if np.dtype(dt).kind == "i" or ties:
        return rng.integers(-8, 8, shape).astype(dt)  # many ties: the lower index must win
    return rng.standard_normal(shape).astype(dt)


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("shape, axis", CASES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_argmax_argmin(dt, shape, axis, keepdims):
    rng = np.random.default_rng(sum(shape) + axis)
    x = _data(rng, shape, dt)
    (mx, mn), _ = run_popxl(lambda a: (ops.argmax(a, axis, keepdims), ops.argmin(a, axis, keepdims)), [x])
    np.testing.assert_array_equal(mx, np.argmax(x, axis, keepdims=keepdims))
    np.testing.assert_array_equal(mn, np.argmin(x, axis, keepdims=keepdims))
    assert mx.dtype == np.int32


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("shape, axis", CASES)
@pytest.mark.parametrize("largest", [True, False])
def test_topk(dt, shape, axis, largest):
    rng = np.random.default_rng(sum(shape) * 3 + axis)
    x = _data(rng, shape, dt)
    n = shape[axis]
    for k in sorted({1, n, (n + 1) // 2}):
        (v, i), _ = run_popxl(lambda a: ops.topk(a, k, axis, largest, sorted=True), [x])
        key = -x.astype(np.float64) if largest else x.astype(np.float64)
        order = np.take(np.argsort(key, axis=axis, kind="stable"), np.arange(k), axis=axis)
        np.testing.assert_array_equal(i, order)
        np.testing.assert_array_equal(v, np.take_along_axis(x, order, axis))
        assert i.dtype == np.int32 and v.dtype == x.dtype


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("shape, axes", [((7,), None), ((5, 13), 1), ((5, 13), 0), ((3, 4, 5), [0, 2]), ((2, 2), None),
                                         ((6, 1), 0)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_median(dt, shape, axes, keepdims):
    rng = np.random.default_rng(sum(shape))
    x = _data(rng, shape, dt, ties=False)
    out, session = run_popxl(lambda a: ops.median(a, axes, keepdims), [x])
    ax = tuple(range(len(shape))) if axes is None else tuple(np.atleast_1d(axes))
    kept = [d for d in range(len(shape)) if d not in ax]
    rows = x.transpose(kept + list(ax)).reshape(int(np.prod([shape[d] for d in kept])), -1)
    lower = np.sort(rows, axis=1)[:, (rows.shape[1] - 1) // 2]
    expect_shape = tuple(1 if d in ax else shape[d] for d in range(len(shape))) if keepdims else \
        tuple(shape[d] for d in kept)
    np.testing.assert_array_equal(out, lower.reshape(expect_shape))


def test_median_indices_output():
    import popxl

    x = np.array([[3, 1, 2, 5], [9, 7, 8, 7]], np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        t = popxl.variable(x)
        m = ops.median(t, 1)
        idx = m.producer.outputs[1]
        s1, s2 = popxl.d2h_stream(m.shape, m.dtype), popxl.d2h_stream(idx.shape, idx.dtype)
        ops.host_store(s1, m)
        ops.host_store(s2, idx)
    session = popxl.Session(ir, "ipu_model")
    with session:
        res = session.run()
    np.testing.assert_array_equal(res[s1], [2, 7])
    np.testing.assert_array_equal(res[s2], [2, 3])  # position 1 of the stable order 7(1), 7(3), 8, 9


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("shape, axis", CASES)
def test_cumsum(dt, shape, axis):
    rng = np.random.default_rng(sum(shape) + axis)
    x = _data(rng, shape, dt, ties=False)
    out, _ = run_popxl(lambda a: ops.cumsum(a, axis), [x])
    if dt == np.float16:
        expect = np.cumsum(x.astype(np.float32), axis=axis).astype(np.float16)
        np.testing.assert_array_equal(out, expect)
    elif dt == np.float32:
        np.testing.assert_allclose(out, np.cumsum(x, axis=axis), rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(out, np.cumsum(x, axis=axis).astype(np.int32))


def test_rows_already_whole_on_tiles_need_no_exchange():
    # a (3, 4) float tensor is small: the allocator keeps it whole on one tile, so every row already
    # lies on one tile and argmax over the last axis reads it in place
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    out, session = run_popxl(lambda a: ops.argmax(a, 1), [x])
    np.testing.assert_array_equal(out, [3, 3, 3])
    names = [s.name for s in session.executable.steps if s.kind == "exchange"]
    assert not any("rows" in n for n in names)


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("shape, axis", [((3000,), 0), ((2, 1001), 1), ((997, 3), 0)])
def test_argmax_of_rows_too_long_for_a_tile_runs_in_two_stages(monkeypatch, dt, shape, axis):
    from popxl.lowering.rules import rowwise

    monkeypatch.setattr(rowwise, "ROW_SHARE_OF_TILE", 1000 / 638976)  # rows over 1000 bytes are split
    rng = np.random.default_rng(sum(shape))
    x = _data(rng, shape, dt)  # many ties: the first index must still win across chunks
    (mx, mn), session = run_popxl(lambda a: (ops.argmax(a, axis), ops.argmin(a, axis)), [x])
    np.testing.assert_array_equal(mx, np.argmax(x, axis))
    np.testing.assert_array_equal(mn, np.argmin(x, axis))
    assert any("combine" in s.name for s in session.executable.steps)
