"""MultiSlice, MultiUpdate, DynamicSlice, DynamicUpdate and EncodeOneHot alone on a small target:
results against the codelets' references and independent NumPy, cycles against the cost models."""
import numpy as np
import pytest

import ipu
from codelets.indexing import (dynamic_slice_cycles, encode_one_hot_cycles, multi_slice_cycles,
                                 multi_update_cycles)

TYPES = ["float32", "float16", "int32"]


def _run(cl, codelet, arrays, params, tile=1):
    """One vertex of `codelet` on `tile`: the fields' contents after the run, the run's cycles and
    the compute step."""
    r = cl.run_vertex(codelet, arrays, params, tile)
    return r.out, r.cycles, r.step


def _data(rng, shape, dt):
    if dt == "int32":
        return rng.integers(-50, 50, shape).astype(np.int32)
    return rng.standard_normal(shape).astype(dt)


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("rows, region, m", [(1, 1, 1), (7, 3, 5), (13, 1, 17), (5, 11, 2)])
def test_multi_slice(dt, rows, region, m, cl):
    rng = np.random.default_rng(rows * 100 + region * 10 + m)
    base = _data(rng, (rows, region), dt)
    offsets = rng.integers(-2, rows + 2, m).astype(np.int32)
    out0 = np.full(m * region, 7, dt)
    res, cycles, step = _run(cl, "MultiSlice", {"base": base.reshape(-1), "offsets": offsets, "out": out0},
                             {"region": region, "rows": rows, "row_base": 0})
    got = res["out"].reshape(m, region)
    expect = np.zeros((m, region), dt)
    for i, o in enumerate(offsets):
        if 0 <= o < rows:
            expect[i] = base[o]
    np.testing.assert_array_equal(got, expect)
    ref = ipu.get_codelet("MultiSlice").reference(base.reshape(-1), offsets, region, rows)
    np.testing.assert_array_equal(got.reshape(-1), ref)
    # one worker vertex: the tile is busy 6 x its thread cycles
    assert step.cycles == 6 * int(multi_slice_cycles(m, region, ipu.element_type(dt)))
    assert cycles == step.cycles


def test_multi_slice_row_base_selects_a_window_of_rows(cl):
    base = np.arange(12, dtype=np.float32)  # rows 10..13 of a larger table, region 3
    offsets = np.array([9, 10, 13, 14], np.int32)
    res, _, _ = _run(cl, "MultiSlice", {"base": base, "offsets": offsets, "out": np.zeros(12, np.float32)},
                     {"region": 3, "rows": 4, "row_base": 10})
    np.testing.assert_array_equal(res["out"].reshape(4, 3), [[0, 0, 0], [0, 1, 2], [9, 10, 11], [0, 0, 0]])


def test_multi_slice_cost_model_matches_poplibs_formula():
    # poplibs getMultiSliceCycleEstimate per worker: 30 + m x (19 + cpv x ceil(region / vw))
    assert multi_slice_cycles(10, 8, ipu.FLOAT32) == 30 + 10 * (19 + 2 * 4)
    assert multi_slice_cycles(10, 8, ipu.FLOAT16) == 30 + 10 * (19 + 2 * 4)
    assert multi_slice_cycles(10, 8, ipu.UINT8) == 30 + 10 * (19 + 3 * 2)


def _independent_update(base, offsets, updates, op, per_column, init, track):
    base = base.astype(np.float64).copy()
    rows, region = base.shape
    if init is not None:
        base[:] = init
    touched = np.zeros_like(base, bool)
    for k in range(updates.shape[0]):
        for j in range(region):
            r = offsets[k, j] if per_column else offsets[k]
            if not 0 <= r < rows:
                continue
            u = float(updates[k, j])
            a = base[r, j]
            base[r, j] = {"none": u, "sum": a + u, "max": max(a, u), "min": min(a, u), "mul": a * u}[op]
            touched[r, j] = True
    if track:
        base[~touched] = 0
    return base


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("op", ["none", "sum", "max", "min", "mul"])
@pytest.mark.parametrize("per_column", [False, True])
def test_multi_update(dt, op, per_column, cl):
    from codelets.indexing import UPDATE_OPS

    rng = np.random.default_rng(TYPES.index(dt) * 100 + UPDATE_OPS[op] * 10 + int(per_column))
    rows, region, k = 5, 3, 7
    base = _data(rng, (rows, region), dt)
    upd = _data(rng, (k, region), dt)
    if op == "mul" and dt != "int32":
        upd = (1 + 0.1 * upd).astype(dt)
    offsets = rng.integers(-1, rows + 1, (k, region) if per_column else k).astype(np.int32)
    params = {"region": region, "rows": rows, "row_base": 0, "op": UPDATE_OPS[op], "per_column": int(per_column),
              "init": 0, "track": 0, "init_value": 0.0}
    res, cycles, step = _run(cl, "MultiUpdate", {"base": base.reshape(-1), "offsets": offsets.reshape(-1),
                                             "updates": upd.reshape(-1)}, params)
    got = res["base"].reshape(rows, region)
    ref = ipu.get_codelet("MultiUpdate").reference(base, offsets, upd, region, rows, op=op, per_column=per_column)
    np.testing.assert_array_equal(got.reshape(-1), ref)
    expect = _independent_update(base, offsets, upd, op, per_column, None, False)
    if dt == "float16":
        np.testing.assert_allclose(got.astype(np.float64), expect, rtol=2e-3, atol=1e-3)
    elif dt == "float32":
        np.testing.assert_allclose(got, expect, rtol=1e-6)
    else:
        np.testing.assert_array_equal(got, expect.astype(np.int64).astype(np.int32))
    et = ipu.element_type(dt)
    model = multi_update_cycles(k, region, rows, UPDATE_OPS[op], int(per_column), 0, 0, et)
    assert step.cycles == 6 * int(model)


@pytest.mark.parametrize("op, init", [("max", -np.inf), ("min", np.inf), ("sum", 0.0), ("mul", 1.0)])
def test_multi_update_init_and_untouched_rows(op, init, cl):
    from codelets.indexing import UPDATE_OPS

    rows, region = 6, 2
    base = np.full(rows * region, 123.0, np.float32)  # garbage: init overwrites it
    offsets = np.array([1, 4, 1], np.int32)
    upd = np.array([[1, -2], [3, 4], [-5, 6]], np.float32)
    track = op in ("max", "min")
    params = {"region": region, "rows": rows, "row_base": 0, "op": UPDATE_OPS[op], "per_column": 0,
              "init": 1, "track": int(track), "init_value": init}
    res, _, step = _run(cl, "MultiUpdate", {"base": base, "offsets": offsets, "updates": upd.reshape(-1)}, params)
    expect = _independent_update(base.reshape(rows, region), offsets, upd, op, False, init, track)
    np.testing.assert_array_equal(res["base"].reshape(rows, region), expect.astype(np.float32))
    model = multi_update_cycles(3, region, rows, UPDATE_OPS[op], 0, 1, int(track), ipu.FLOAT32)
    assert step.cycles == 6 * int(model)


def test_multi_update_int_max_init_uses_the_int_range(cl):
    from codelets.indexing import UpdateOpCode

    base = np.zeros(4, np.int32)
    res, _, _ = _run(cl, "MultiUpdate", {"base": base, "offsets": np.array([2], np.int32),
                                     "updates": np.array([-7], np.int32)},
                     {"region": 1, "rows": 4, "row_base": 0, "op": UpdateOpCode.MAX, "per_column": 0, "init": 1, "track": 0,
                      "init_value": float(np.iinfo(np.int32).min)})
    np.testing.assert_array_equal(res["base"], [np.iinfo(np.int32).min] * 2 + [-7, np.iinfo(np.int32).min])


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("rows, region, n, first, offset", [
    (1, 1, 1, 0, 0), (7, 3, 4, 0, 5), (7, 3, 2, 2, 6), (5, 2, 5, 0, 9), (11, 4, 3, 0, -3)])
def test_dynamic_slice_and_update(dt, rows, region, n, first, offset, cl):
    """A vertex moving rows first .. first + n - 1 of a slice at `offset`."""
    rng = np.random.default_rng(rows + region + n + first)
    base = _data(rng, (rows, region), dt)
    res, cycles, step = _run(cl, "DynamicSlice", {"base": base.reshape(-1), "offset": np.array([offset], np.int32),
                                              "out": np.zeros(n * region, dt)},
                             {"region": region, "rows": rows, "first": first})
    o = offset if 0 <= offset < rows else 0
    expect = np.roll(base, -o, axis=0)[[(first + j) % rows for j in range(n)]]
    np.testing.assert_array_equal(res["out"].reshape(n, region), expect)
    np.testing.assert_array_equal(res["out"], ipu.get_codelet("DynamicSlice").reference(
        base, np.array([offset]), region, rows, n, first))
    et = ipu.element_type(dt)
    assert step.cycles == int(dynamic_slice_cycles(n, region, et))  # a supervisor vertex

    upd = _data(rng, (n, region), dt)
    res, _, step = _run(cl, "DynamicUpdate", {"base": base.reshape(-1), "offset": np.array([offset], np.int32),
                                          "update": upd.reshape(-1)}, {"region": region, "rows": rows, "first": first})
    expect = base.copy()
    for j in range(n):
        expect[(o + first + j) % rows] = upd[j]
    np.testing.assert_array_equal(res["base"].reshape(rows, region), expect)
    assert step.cycles == int(dynamic_slice_cycles(n, region, et))  # a supervisor vertex


def test_dynamic_slice_cost_model_matches_poplibs_formula():
    # poplibs getDynamicSlice1DEstimate: 25 + 6 x (35 + (24 + 2 nCopies) x s), nCopies =
    # floor(ceil(region / 6) / vectorWidth); 8-bit 72 + (70 + 2 nCopies) x s
    assert dynamic_slice_cycles(3, 50, ipu.FLOAT32) == 25 + 6 * (35 + (24 + 2 * 4) * 3)
    assert dynamic_slice_cycles(3, 50, ipu.FLOAT16) == 25 + 6 * (35 + (24 + 2 * 2) * 3)
    assert dynamic_slice_cycles(3, 50, ipu.UINT8) == 25 + 6 * (72 + (70 + 2 * 2) * 3)


@pytest.mark.parametrize("dt", TYPES)
def test_encode_one_hot(dt, cl):
    idx = np.array([0, 3, 4, -1, 2, 9], np.int32)
    vals = np.array([0.25, -3], dt) if dt != "int32" else np.array([5, -3], np.int32)
    res, cycles, step = _run(cl, "EncodeOneHot", {"indices": idx, "values": vals, "out": np.zeros(6 * 5, dt)},
                             {"classes": 5})
    expect = np.full((6, 5), vals[0], dt)
    for i, c in enumerate(idx):
        if 0 <= c < 5:
            expect[i, c] = vals[1]
    np.testing.assert_array_equal(res["out"].reshape(6, 5), expect)
    np.testing.assert_array_equal(res["out"], ipu.get_codelet("EncodeOneHot").reference(idx, vals, 5))
    # the off-value fill (8 bytes per cycle) + poplibs EncodeOneHotCustomValues: 100 cycles per index
    assert step.cycles == 6 * int(encode_one_hot_cycles(6, 5, ipu.element_type(dt)))
    assert encode_one_hot_cycles(6, 5, ipu.FLOAT32) == 10 + 15 + 600


def test_field_checks(cl):
    with pytest.raises(ValueError, match="rows x region"):
        _run(cl, "MultiSlice", {"base": np.zeros(5, np.float32), "offsets": np.zeros(1, np.int32),
                            "out": np.zeros(2, np.float32)}, {"region": 2, "rows": 2, "row_base": 0})
    with pytest.raises(TypeError):
        _run(cl, "MultiSlice", {"base": np.zeros(4, np.float32), "offsets": np.zeros(1, np.float32),
                            "out": np.zeros(2, np.float32)}, {"region": 2, "rows": 2, "row_base": 0})
