"""ScaledAdd (data = a * data + b * deltas, in place) at every type it takes, over awkward sizes,
against float32 NumPy arithmetic rounded once to the data's type; cycles against the cost model."""
import numpy as np
import pytest

import ipu
from codelets.scaled_add import scaled_add_cycles

from .conftest import SIZES, layout_pieces, run_vertices

SCALED_ADD = ipu.get_codelet("ScaledAdd")


def _run(dtype, data, deltas, a, b):
    pieces = layout_pieces(SIZES)
    variables = {"data": (dtype, data, 0), "deltas": (dtype, deltas, 0)}
    vertices = [(0, {"data": ("data", s, n), "deltas": ("deltas", s, n)}, {"a": a, "b": b}) for s, n, _ in pieces]
    return run_vertices("ScaledAdd", variables, vertices)


@pytest.mark.parametrize("a", [1.0, 0.75])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_scaled_add_float(dtype, a, rng):
    n = sum(SIZES)
    data = (rng.standard_normal(n) * 4).astype(dtype)
    deltas = (rng.standard_normal(n) * 4).astype(dtype)
    data[:3] = [np.inf, -0.0, 60000.0]  # inf stays inf; a sum past half's range overflows to inf
    deltas[:3] = [1.0, -0.0, 60000.0]
    b = -0.375
    run = _run(dtype, data, deltas, a, b)
    f32 = np.float32
    if a == 1.0:
        expect = data.astype(f32) + f32(b) * deltas.astype(f32)
    else:
        expect = f32(a) * data.astype(f32) + f32(b) * deltas.astype(f32)
    with np.errstate(over="ignore"):
        expect = expect.astype(dtype)
    np.testing.assert_array_equal(run.out["data"].view(f"u{np.dtype(dtype).itemsize}"),
                                  expect.view(f"u{np.dtype(dtype).itemsize}"))
    np.testing.assert_array_equal(run.out["deltas"], deltas)  # the input is left alone


def test_scaled_add_int32(rng):
    n = sum(SIZES)
    data = rng.integers(-1000, 1000, n).astype(np.int32)
    deltas = rng.integers(-1000, 1000, n).astype(np.int32)
    run = _run("int32", data, deltas, 1.0, 2.0)
    np.testing.assert_array_equal(run.out["data"], data + 2 * deltas)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_scaled_add_cycles_equal_cost_model(dtype, rng):
    n = sum(SIZES)
    x = rng.standard_normal(n).astype(dtype)
    run = _run(dtype, x, x, 0.5, 1.0)
    t = ipu.element_type(dtype)
    per_vertex = scaled_add_cycles(np.array(SIZES), t.itemsize, True, np.ones(len(SIZES), bool))
    # supervisor vertices on one tile run one after another
    assert run.cycles >= int(per_vertex.sum())
    assert int(run.step.tile_cycles[0]) == int(per_vertex.sum())


@pytest.mark.parametrize("a", [1.0, 0.75])
@pytest.mark.parametrize("data_dtype,delta_dtype", [("float32", "float16"), ("float16", "float32")])
def test_scaled_add_mixed_precision(data_dtype, delta_dtype, a, rng):
    """poplibs' mixed ScaledAdd vertices: float32 arithmetic, rounded once to data's type."""
    n = sum(SIZES)
    data = (rng.standard_normal(n) * 4).astype(data_dtype)
    deltas = (rng.standard_normal(n) * 4).astype(delta_dtype)
    deltas[:2] = [1e-5, 70000.0 if delta_dtype == "float32" else 60000.0]  # below half's precision / past its range
    pieces = layout_pieces(SIZES)
    variables = {"data": (data_dtype, data, 0), "deltas": (delta_dtype, deltas, 0)}
    vertices = [(0, {"data": ("data", s, k), "deltas": ("deltas", s, k)}, {"a": a, "b": -0.375}) for s, k, _ in pieces]
    run = run_vertices("ScaledAdd", variables, vertices)
    f32 = np.float32
    with np.errstate(over="ignore"):
        expect = (f32(a) * data.astype(f32) + f32(-0.375) * deltas.astype(f32)).astype(data_dtype)
        np.testing.assert_array_equal(run.out["data"], expect)
        assert np.array_equal(SCALED_ADD.reference(data, deltas, a, -0.375), expect)
    np.testing.assert_array_equal(run.out["deltas"], deltas)
    di, ei = np.dtype(data_dtype).itemsize, np.dtype(delta_dtype).itemsize
    per_vertex = scaled_add_cycles(np.array(SIZES), di, True, np.full(len(SIZES), a != 1.0), delta_itemsize=ei)
    assert int(run.step.tile_cycles[0]) == int(per_vertex.sum())


def test_scaled_add_mixed_cycles_follow_poplibs():
    """Worked values of poplibs' getScaledArithmeticSupervisorCycleEstimate for the mixed pairs."""
    # float data, half deltas, 12 floats: 6 vectors, one per worker; inner loop 4 (not 3) cycles
    same = scaled_add_cycles(np.array([12, 100]), 4, True, np.zeros(2, bool))
    mixed = scaled_add_cycles(np.array([12, 100]), 4, True, np.zeros(2, bool), delta_itemsize=2)
    assert mixed[0] == same[0]  # one vector a worker: no loop iterations to differ
    assert mixed[1] - same[1] == 6 * (100 // 2 // 6 - 1)  # one cycle more per extra vector, six workers
    # half data, float deltas, n = 4 * 6 + 3: one vector each, 3 halves left on worker 0:
    # supervisor 21 + 6 + 11 + 13 + 12 = 63; worker 16 + 8 + 2 + 1 + (2 + 5 + 2 + 7) + 1 = 44
    assert scaled_add_cycles(np.array([27]), 2, True, np.zeros(1, bool), delta_itemsize=4)[0] == 63 + 6 * 44


def test_scaled_add_refuses_int_with_float():
    with pytest.raises(TypeError, match="mixes only float32 and float16"):
        SCALED_ADD.check((ipu.INT32, ipu.FLOAT32), np.array([[4, 4]]), None, None)
