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
