"""ArgMinMax, TopK, Median and CumSum alone on a small target: results against the references and
independent NumPy, cycles against the cost models."""
import numpy as np
import pytest

import ipu
from codelets.rowwise import arg_min_max_cycles, cum_sum_cycles, top_k_cycles

TYPES = ["float32", "float16", "int32"]
SHAPES = [(1, 1), (3, 1), (1, 7), (5, 13), (2, 31)]


def _run(cl, codelet, arrays, params, tile=0):
    r = cl.run_vertex(codelet, arrays, params, tile)
    return r.out, r.step


def _data(rng, shape, dt, ties=False):
    if dt == "int32" or ties:
        return rng.integers(-4 if ties else -100, 4 if ties else 100, shape).astype(dt)
    return rng.standard_normal(shape).astype(dt)


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("rows, K", SHAPES)
@pytest.mark.parametrize("op", [0, 1])
def test_arg_min_max(dt, rows, K, op, cl):
    rng = np.random.default_rng(rows * 100 + K + op)
    x = _data(rng, (rows, K), dt, ties=True)  # ties: the first index wins, as NumPy
    res, step = _run(cl, "ArgMinMax", {"in": x.reshape(-1), "out": np.zeros(rows, np.int32)}, {"row": K, "op": op})
    expect = np.argmax(x, 1) if op == 0 else np.argmin(x, 1)
    np.testing.assert_array_equal(res["out"], expect)
    np.testing.assert_array_equal(res["out"], ipu.get_codelet("ArgMinMax").reference(x, K, op))
    assert step.cycles == 6 * int(arg_min_max_cycles(rows, K, ipu.element_type(dt)))


def test_arg_max_nan_is_the_answer_like_numpy(cl):
    x = np.array([[1, np.nan, 5, np.nan], [3, 2, 1, 0]], np.float32)
    res, _ = _run(cl, "ArgMinMax", {"in": x.reshape(-1), "out": np.zeros(2, np.int32)}, {"row": 4, "op": 0})
    np.testing.assert_array_equal(res["out"], np.argmax(x, 1))
    res, _ = _run(cl, "ArgMinMax", {"in": x.reshape(-1), "out": np.zeros(2, np.int32)}, {"row": 4, "op": 1})
    np.testing.assert_array_equal(res["out"], np.argmin(x, 1))


def test_arg_min_max_cost_model_is_the_popnn_estimate():
    # ReduceMaxClassSparse: 5 + 2 + 3 + 3 + 1 + 3 (K - 1) + 3 + 6 + 4 for float, 5 + 18 + 6 K for int
    assert arg_min_max_cycles(1, 10, ipu.FLOAT32) == 27 + 27
    assert arg_min_max_cycles(1, 10, ipu.INT32) == 5 + 18 + 60


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("rows, K", SHAPES)
@pytest.mark.parametrize("largest", [True, False])
def test_top_k(dt, rows, K, largest, cl):
    rng = np.random.default_rng(rows * 100 + K + largest)
    x = _data(rng, (rows, K), dt, ties=K > 5)
    for k in sorted({1, K, max(1, K // 2)}):
        res, step = _run(cl, "TopK", {"in": x.reshape(-1), "values": np.zeros(rows * k, dt),
                                  "indices": np.zeros(rows * k, np.int32)},
                         {"row": K, "k": k, "largest": int(largest), "sorted": 1})
        key = -x.astype(np.float64) if largest else x.astype(np.float64)
        order = np.argsort(key, axis=1, kind="stable")[:, :k]
        np.testing.assert_array_equal(res["indices"].reshape(rows, k), order)
        np.testing.assert_array_equal(res["values"].reshape(rows, k), np.take_along_axis(x, order, 1))
        rv, ri = ipu.get_codelet("TopK").reference(x, K, k, largest)
        np.testing.assert_array_equal(res["values"], rv)
        np.testing.assert_array_equal(res["indices"], ri)
        assert step.cycles == 6 * int(top_k_cycles(rows, K, k, 1))


def test_top_k_nan_ranks_above_everything(cl):
    x = np.array([1, np.nan, np.inf, -np.inf, 0], np.float32)
    res, _ = _run(cl, "TopK", {"in": x, "values": np.zeros(3, np.float32), "indices": np.zeros(3, np.int32)},
                  {"row": 5, "k": 3, "largest": 1, "sorted": 1})
    np.testing.assert_array_equal(res["indices"], [1, 2, 0])
    res, _ = _run(cl, "TopK", {"in": x, "values": np.zeros(3, np.float32), "indices": np.zeros(3, np.int32)},
                  {"row": 5, "k": 3, "largest": 0, "sorted": 1})
    np.testing.assert_array_equal(res["indices"], [3, 4, 0])


def test_top_k_cost_model_is_the_popnn_estimate():
    import math

    # ReduceMaxNClassSparse, K = 10, k = 3, sorted
    expect = 12 + 23 + int(13 + 20 * math.log(1)) + int(13 + 20 * math.log(2)) + int(7 * (13 + 20 * math.log(3))) \
        + 24 + sum(10 + int(20 * math.log(i)) for i in (3, 2, 1))
    assert top_k_cycles(1, 10, 3, 1) == expect


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("rows, K", SHAPES)
def test_median(dt, rows, K, cl):
    rng = np.random.default_rng(rows * 10 + K)
    x = _data(rng, (rows, K), dt, ties=K > 5)
    res, step = _run(cl, "Median",
                     {"in": x.reshape(-1), "values": np.zeros(rows, dt), "indices": np.zeros(rows, np.int32)},
                     {"row": K})
    order = np.argsort(x.astype(np.float64), axis=1, kind="stable")[:, (K - 1) // 2]
    np.testing.assert_array_equal(res["indices"], order)
    np.testing.assert_array_equal(res["values"], np.sort(x, axis=1)[:, (K - 1) // 2])
    rv, ri = ipu.get_codelet("Median").reference(x, K)
    np.testing.assert_array_equal(res["values"], rv)
    np.testing.assert_array_equal(res["indices"], ri)
    assert step.cycles == 6 * int(top_k_cycles(rows, K, (K - 1) // 2 + 1, 0))


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("rows, K", SHAPES)
@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cum_sum(dt, rows, K, exclusive, reverse, cl):
    rng = np.random.default_rng(rows * 10 + K)
    x = _data(rng, (rows, K), dt)
    res, step = _run(cl, "CumSum", {"in": x.reshape(-1), "out": np.zeros(rows * K, dt)},
                     {"row": K, "exclusive": exclusive, "reverse": reverse})
    acc = np.float32 if dt == "float16" else x.dtype
    y = x[:, ::-1] if reverse else x
    c = np.cumsum(y.astype(acc), axis=1)
    if exclusive:
        c = np.concatenate([np.zeros((rows, 1), acc), c[:, :-1]], 1)
    if reverse:
        c = c[:, ::-1]
    got = res["out"].reshape(rows, K)
    if dt == "float32":
        np.testing.assert_allclose(got, c, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, c.astype(dt))
    np.testing.assert_array_equal(res["out"], ipu.get_codelet("CumSum").reference(x, K, exclusive, reverse))
    assert step.cycles == 6 * int(cum_sum_cycles(rows * K, K, ipu.element_type(dt)))


def test_cum_sum_int32_wraps(cl):
    x = np.array([2**31 - 1, 1, 1], np.int32)
    res, _ = _run(cl, "CumSum", {"in": x, "out": np.zeros(3, np.int32)}, {"row": 3, "exclusive": 0, "reverse": 0})
    np.testing.assert_array_equal(res["out"], [2**31 - 1, -2**31, -2**31 + 1])


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("op", [0, 1])
def test_arg_min_max_two_stages(dt, op, cl):
    rng = np.random.default_rng(5 + op)
    x = _data(rng, 50, dt, ties=True)
    chunks = [(0, 7), (7, 20), (20, 50)]
    vals, idxs = [], []
    for a, b in chunks:
        res, step = _run(cl, "ArgMinMaxPartial",
                         {"in": x[a:b], "value": np.zeros(1, dt), "index": np.zeros(1, np.int32)},
                         {"op": op, "base": a})
        v, i = ipu.get_codelet("ArgMinMaxPartial").reference(x[a:b], op, a)
        assert res["value"][0] == v and res["index"][0] == i
        assert step.cycles == 6 * int(arg_min_max_cycles(1, b - a, ipu.element_type(dt)))
        vals.append(res["value"][0])
        idxs.append(res["index"][0])
    res, step = _run(cl, "ArgMinMaxCombine", {"values": np.array(vals, dt), "indices": np.array(idxs, np.int32),
                                          "out": np.zeros(1, np.int32)}, {"op": op})
    assert res["out"][0] == (np.argmax(x) if op == 0 else np.argmin(x))
    assert step.cycles == 6 * int(arg_min_max_cycles(1, 3, ipu.element_type(dt)))
