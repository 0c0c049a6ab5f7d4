"""gather, tied_gather, grouped_gather, scatter, scatter_reduce, dynamic_slice, dynamic_update(_)
and onehot through popxl.Session on a small simulated IPU, against NumPy."""
import numpy as np
import pytest

import popxl
import popxl.ops as ops

from helpers import run_popxl

TYPES = [np.float32, np.float16, np.int32]


def _data(rng, shape, dt):
    if np.dtype(dt).kind == "i":
        return rng.integers(-1000, 1000, shape).astype(dt)
    return rng.standard_normal(shape).astype(dt)


def _compute_tiles(session, name):
    """Tiles that do work in the compute steps whose name contains `name`."""
    tiles = set()
    for s in session.executable.steps:
        if s.kind == "compute" and name in s.name and s.tile_cycles is not None:
            tiles |= set(np.flatnonzero(s.tile_cycles).tolist())
    return tiles


# -- gather -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("shape, axis, ishape", [
    ((7,), 0, (3,)), ((1,), 0, (5,)), ((5, 13), 0, (4,)), ((5, 13), 1, (2, 3)), ((3, 7, 11), 1, (6,)),
    ((2, 3, 5), 2, ()), ((97, 3), 0, (13,)), ((4, 200), 0, (7,))])
def test_gather(dt, shape, axis, ishape):
    rng = np.random.default_rng(sum(shape) + axis)
    x = _data(rng, shape, dt)
    idx = rng.integers(0, shape[axis], ishape).astype(np.int32)
    out, _ = run_popxl(lambda a, b: ops.gather(a, b, axis=axis), [x, idx])
    np.testing.assert_array_equal(out, np.take(x, idx, axis=axis))


def test_gather_spreads_a_wide_table_by_columns_over_tiles():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 300)).astype(np.float32)
    idx = rng.integers(0, 50, 9).astype(np.int32)
    out, session = run_popxl(lambda a, b: ops.gather(a, b), [x, idx])
    np.testing.assert_array_equal(out, x[idx])
    assert len(_compute_tiles(session, "gather")) == 6


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("groups, ishape", [(None, (96, 64)), (None, (97, 5)), (3, (3, 60))])
def test_gather_of_many_lookups_from_a_narrow_table_splits_the_lookups(dt, groups, ishape):
    """T5's relative-position bias looks up (seq x seq) indices in a (32 x heads) table: the
    table's few columns sit on one tile, so its output would too (2 MiB at seq 512). The lookups
    are split into chunks, each with its own copy of the table on other tiles (popops' lookup
    split); a count of lookups with no divisor to split by (97 x 5 = 5 x 97) still gathers right."""
    rng = np.random.default_rng(ishape[0])
    if groups is None:
        x = _data(rng, (32, 2), dt)
        idx = rng.integers(-1, 33, ishape).astype(np.int32)
        out, session = run_popxl(lambda a, b: ops.gather(a, b, zero_OOR=True), [x, idx])
        ok = (idx >= 0) & (idx < 32)
        expect = np.zeros(ishape + (2,), dt)
        expect[ok] = x[idx[ok]]
    else:
        x = _data(rng, (groups, 16, 2), dt)
        idx = rng.integers(0, 16, ishape).astype(np.int32)
        out, session = run_popxl(lambda a, b: ops.groupedgather(a, b, axis=0, group_size=groups), [x, idx])
        expect = np.stack([x[g][idx[g]] for g in range(groups)])
    np.testing.assert_array_equal(out, expect)
    if ishape[0] % 2 == 0:
        assert len(_compute_tiles(session, "gather")) == 6  # the whole small target, not one tile


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("shape", [(1000,), (500, 2), (301, 3)])
def test_gather_from_a_tall_table_splits_rows_and_sums_partials(monkeypatch, dt, shape):
    """A table taller than a tile's budget is split into row groups on their own tiles; each gives
    zeros for indices outside its rows and the partials are summed (popops' lookup split)."""
    from popxl.lowering.rules import indexing

    monkeypatch.setattr(indexing, "TABLE_SHARE_OF_TILE", 600 / ipu_bytes_per_tile())
    rng = np.random.default_rng(shape[0])
    x = _data(rng, shape, dt)
    idx = rng.integers(-2, shape[0] + 2, 17).astype(np.int32)
    out, session = run_popxl(lambda a, b: ops.gather(a, b, zero_OOR=True), [x, idx])
    ok = (idx >= 0) & (idx < shape[0])
    expect = np.zeros((17,) + shape[1:], dt)
    expect[ok] = x[idx[ok]]
    np.testing.assert_array_equal(out, expect)
    assert len(_compute_tiles(session, "gather")) >= 4
    assert any("row_groups" in s.name for s in session.executable.steps)


def ipu_bytes_per_tile():
    import ipu

    return ipu.get_target("small:6").bytes_per_tile


def test_tied_gather_and_getitem_with_an_int_tensor():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((11, 4)).astype(np.float32)
    idx = np.array([10, 0, 3], np.int32)
    (a, b), _ = run_popxl(lambda t, i: (ops.tied_gather(t, i), t[i]), [x, idx])
    np.testing.assert_array_equal(a, x[idx])
    np.testing.assert_array_equal(b, x[idx])


@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_gather_zero_oor_gives_zeros(dt):
    x = np.arange(1, 16, dtype=dt).reshape(5, 3)
    idx = np.array([0, 5, -1, 4, 100], np.int32)
    out, _ = run_popxl(lambda a, b: ops.gather(a, b, zero_OOR=True), [x, idx])
    expect = np.zeros((5, 3), dt)
    expect[[0, 3]] = x[[0, 4]]
    np.testing.assert_array_equal(out, expect)


def test_gather_with_constant_out_of_range_indices_is_a_build_error():
    ir = popxl.Ir()
    with ir.main_graph:
        t = popxl.variable(np.zeros((4, 2), np.float32))
        g = ops.gather(t, popxl.constant(np.array([1, 4], np.int32)))
        s = popxl.d2h_stream(g.shape, g.dtype)
        ops.host_store(s, g)
    with pytest.raises(ValueError, match="out of range.*zero_OOR"):
        popxl.Session(ir, "ipu_model")


@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("shape, axis, ishape", [((3, 6, 4), 1, (3, 5)), ((2, 7), 1, (2, 3)), ((4, 5, 2, 3), 2, (4, 2, 2))])
def test_grouped_gather(dt, shape, axis, ishape):
    rng = np.random.default_rng(sum(shape))
    x = _data(rng, shape, dt)
    idx = rng.integers(0, shape[axis], ishape).astype(np.int32)
    out, _ = run_popxl(lambda a, b: ops.groupedgather(a, b, axis=axis - 1, group_size=shape[0]), [x, idx])
    expect = np.stack([np.take(x[g], idx[g], axis=axis - 1) for g in range(shape[0])])
    np.testing.assert_array_equal(out, expect)


# -- scatter ----------------------------------------------------------------------------------


def _scatter_elements(t, idx, vals, axis):
    out = t.copy()
    for p in np.ndindex(*idx.shape):
        q = list(p)
        q[axis] = idx[p]
        out[tuple(q)] = vals[p]
    return out


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("shape, axis, ishape", [
    ((5, 7), 0, (3, 7)), ((5, 7), 1, (5, 2)), ((5, 7), 0, (2, 4)), ((1, 3), 1, (1, 1)), ((3, 4, 13), 2, (3, 2, 5))])
def test_scatter(dt, shape, axis, ishape):
    rng = np.random.default_rng(sum(shape) + axis)
    x = _data(rng, shape, dt)
    # distinct indices along the axis, so the result does not depend on the write order
    idx = np.stack([rng.permutation(shape[axis])[:ishape[axis]] for _ in range(int(np.prod(ishape)) // ishape[axis])])
    idx = np.moveaxis(idx.reshape(tuple(d for i, d in enumerate(ishape) if i != axis) + (ishape[axis],)), -1, axis)
    idx = idx.astype(np.int32)
    vals = _data(rng, ishape, dt)
    out, _ = run_popxl(lambda a, b, c: ops.scatter(a, b, c, axis=axis), [x, idx, vals])
    np.testing.assert_array_equal(out, _scatter_elements(x, idx, vals, axis))


def test_scatter_skips_out_of_range_indices():
    x = np.zeros((4, 2), np.float32)
    idx = np.array([[1, -1], [7, 3]], np.int32)
    vals = np.array([[1, 2], [3, 4]], np.float32)
    out, _ = run_popxl(lambda a, b, c: ops.scatter(a, b, c), [x, idx, vals])
    np.testing.assert_array_equal(out, [[0, 0], [1, 0], [0, 0], [0, 4]])


def _scatter_reduce(data, idx, reduction, axis, size, initial):
    dt = data.dtype
    shape = list(data.shape)
    shape[axis] = size
    ident = {"sum": 0, "none": 0, "mul": 1, "max": -np.inf, "min": np.inf}[reduction]
    if dt.kind == "i" and reduction in ("max", "min"):
        ident = np.iinfo(dt).min if reduction == "max" else np.iinfo(dt).max
    out = np.full(shape, ident, dt) if initial is None else initial.copy()
    touched = np.zeros(shape, bool)
    full = np.broadcast_to(idx.reshape([-1 if d == axis else 1 for d in range(data.ndim)]), data.shape) \
        if idx.ndim == 1 and data.ndim > 1 else idx
    for p in np.ndindex(*data.shape):
        q = list(p)
        q[axis] = full[p]
        if not 0 <= q[axis] < size:
            continue
        q = tuple(q)
        v = data[p]
        touched[q] = True
        if reduction == "sum":
            out[q] = out[q] + v
        elif reduction == "mul":
            out[q] = out[q] * v
        elif reduction == "max":
            out[q] = max(out[q], v)
        elif reduction == "min":
            out[q] = min(out[q], v)
        else:
            out[q] = v
    if initial is None and reduction in ("max", "min"):
        out[~touched] = 0
    return out


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("reduction", ["sum", "max", "min", "mul", "none"])
@pytest.mark.parametrize("with_initial", [False, True])
def test_scatter_reduce(dt, reduction, with_initial):
    rng = np.random.default_rng(7)
    data = _data(rng, (6, 5), dt)
    if reduction == "mul" and np.dtype(dt).kind == "f":
        data = (1 + 0.25 * data).astype(dt)
    if reduction == "mul" and np.dtype(dt).kind == "i":
        data = rng.integers(-3, 4, (6, 5)).astype(dt)
    # 'none' with repeated indices depends on the write order: keep them distinct for it
    idx = (rng.permutation(7)[:6] if reduction == "none" else rng.integers(0, 7, 6)).astype(np.int32)
    initial = _data(rng, (7, 5), dt) if with_initial else None
    inputs = [data, idx] + ([initial] if with_initial else [])

    def build(d, i, *init):
        return ops.scatter_reduce(d, i, reduction, initial_values=init[0] if init else None, axis=0, axis_size=7)

    out, _ = run_popxl(build, inputs)
    expect = _scatter_reduce(data, idx, reduction, 0, 7, initial)
    if dt == np.float16 and reduction in ("sum", "mul"):
        np.testing.assert_allclose(out.astype(np.float32), expect.astype(np.float32), rtol=4e-3, atol=4e-3)
    else:
        np.testing.assert_allclose(out, expect, rtol=1e-6)


@pytest.mark.parametrize("reduction", ["sum", "max"])
def test_scatter_reduce_with_full_shape_indices_on_axis_1(reduction):
    rng = np.random.default_rng(3)
    data = rng.standard_normal((3, 8, 2)).astype(np.float32)
    idx = rng.integers(-1, 5, (3, 8, 2)).astype(np.int32)  # -1: skipped
    out, _ = run_popxl(lambda d, i: ops.scatter_reduce(d, i, reduction, axis=1, axis_size=4), [data, idx])
    np.testing.assert_allclose(out, _scatter_reduce(data, idx, reduction, 1, 4, None), rtol=1e-6)


def test_grouped_scatter_reduce():
    rng = np.random.default_rng(4)
    data = rng.standard_normal((2, 6, 3)).astype(np.float32)
    idx = rng.integers(0, 4, (2, 6, 3)).astype(np.int32)
    out, _ = run_popxl(lambda d, i: ops.grouped_scatter_reduce(d, i, "sum", axis=1, axis_size=4, group_size=2),
                       [data, idx])
    np.testing.assert_allclose(out, _scatter_reduce(data, idx, "sum", 1, 4, None), rtol=1e-6)


# -- dynamic slice / update -------------------------------------------------------------------


def _wrapped(n, offset, size):
    o = offset if 0 <= offset < n else 0
    return [(o + j) % n for j in range(size)]


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("shape, axes, sizes, offsets", [
    ((7,), [0], [3], [2]), ((7,), [0], [3], [6]), ((5, 13), [1], [4], [11]), ((6, 5, 4), [0, 2], [3, 2], [4, 1]),
    ((1, 9), [0], [1], [0]), ((4, 3), [0, 1], [4, 3], [9, -2])])
def test_dynamic_slice_and_update(dt, shape, axes, sizes, offsets):
    rng = np.random.default_rng(sum(shape))
    x = _data(rng, shape, dt)
    off = np.array(offsets, np.int32)
    out, _ = run_popxl(lambda a, b: ops.dynamic_slice(a, b, axes=axes, sizes=sizes, no_overlap=False), [x, off])
    idx = [np.arange(n) for n in shape]
    for a, s, o in zip(axes, sizes, offsets):
        idx[a] = np.array(_wrapped(shape[a], o, s))
    np.testing.assert_array_equal(out, x[np.ix_(*idx)])

    upd_shape = list(shape)
    for a, s in zip(axes, sizes):
        upd_shape[a] = s
    upd = _data(rng, tuple(upd_shape), dt)
    out, _ = run_popxl(lambda a, b, c: ops.dynamic_update(a, b, c, axes=axes, sizes=sizes, no_overlap=False),
                       [x, off, upd])
    expect = x.copy()
    expect[np.ix_(*idx)] = upd
    np.testing.assert_array_equal(out, expect)


def test_dynamic_update_inplace_on_a_variable_in_a_loop():
    """The classic use: write one row per iteration into a buffer variable."""
    rows = np.arange(15, dtype=np.float32).reshape(5, 3)
    ir = popxl.Ir()
    with ir.main_graph:
        buf = popxl.variable(np.zeros((5, 3), np.float32), name="buf")
        counter = popxl.variable(np.zeros((1,), np.int32), name="counter")
        src = popxl.variable(rows, name="src")

        class Body(popxl.Module):
            def build(self, b: popxl.TensorByRef, c: popxl.TensorByRef, s: popxl.Tensor):
                row = ops.dynamic_slice(s, c, axes=[0], sizes=[1], no_overlap=True)
                ops.dynamic_update_(b, c, row * 2, axes=[0], sizes=[1], no_overlap=True)
                ops.increment_mod_(c, 1, 5)

        g = ir.create_graph(Body(), buf, counter, src)
        ops.repeat(g, 5, buf, counter, src)
    session = popxl.Session(ir, "ipu_model")
    with session:
        session.run()
    np.testing.assert_array_equal(session.get_tensor_data(buf), rows * 2)


# -- onehot -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dt", [np.float32, np.float16, np.int32])
@pytest.mark.parametrize("shape, classes, axis", [((5,), 4, 1), ((5,), 4, 0), ((2, 3), 7, 1), ((3, 1, 2), 2, -1),
                                                 ((1,), 1, 0), ((41,), 13, 1)])
def test_onehot(dt, shape, classes, axis):
    rng = np.random.default_rng(classes)
    t = rng.integers(-1, classes + 1, shape).astype(np.int32)
    vals = np.array([-1, 3], dt)
    out, _ = run_popxl(lambda a, b: ops.onehot(a, classes, b, axis=axis), [t, vals])
    hot = (t[..., None] == np.arange(classes))
    expect = np.where(hot, vals[1], vals[0]).astype(dt)
    expect = np.moveaxis(expect, -1, axis if axis >= 0 else len(shape) + 1 + axis)
    np.testing.assert_array_equal(out, expect)


def test_dynamic_update_with_a_column_of_offsets():
    """popops takes an offset of shape (number of axes, 1): each axis reads the single offset of
    its row (the Llama application's KV-cache update passes its (2, 1) last-token indices so)."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 3, 4, 6)).astype(np.float32)
    upd = rng.normal(size=(2, 3, 4, 1)).astype(np.float32)
    off = np.array([[0], [4]], np.int32)
    (out, sl), _ = run_popxl(lambda a, b, c: (ops.dynamic_update_(a, b, c, [0, 3], [2, 1], True),
                                              ops.dynamic_slice(c, b, [0, 3], [1, 1], True)), [x, off, upd])
    expect = x.copy()
    expect[:, :, :, 4:5] = upd
    np.testing.assert_array_equal(out, expect)
    np.testing.assert_array_equal(sl, upd[0:1, :, :, 0:1])
