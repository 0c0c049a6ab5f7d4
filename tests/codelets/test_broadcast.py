"""BroadcastVectorOuter (a vector along the rows of a 2D region) at float32 and float16 over
awkward shapes (one row, one column, primes, a vector shorter than the rows: it repeats), against
NumPy; cycles against the poplibs estimator's formula; state that does not grow with the rows."""
import numpy as np
import pytest

import ipu
from codelets.broadcast import BROADCAST_VECTOR_OPS, broadcast_vector_outer_cycles, by_column

from .conftest import run_vertices

CODELET = ipu.get_codelet("BroadcastVectorOuter")

# (columns, rows, B elements): B repeats when shorter than the rows (a region over several images)
SHAPES = [(1, 1, 1), (7, 1, 1), (1, 13, 13), (13, 7, 7), (49, 5, 5), (3, 12, 4), (97, 3, 2), (16, 6, 6)]


def _params(op, cols, rows, t):
    return {"op": BROADCAST_VECTOR_OPS[op], "by_column": int(by_column(cols, t)),
            "misaligned": int(cols % (8 // t.itemsize) != 0), "columns": cols, "rows": rows}


def _run(dtype, op, shapes, rng):
    """One vertex per shape, alternately on tiles 0 and 1, each over its own part of one data
    variable (so regions start at odd offsets) and its own part of one B variable."""
    t = ipu.element_type(dtype)
    sizes = [c * r for c, r, _ in shapes]
    blens = [k for _, _, k in shapes]
    data = (rng.standard_normal(sum(sizes)) * 3).astype(dtype)
    B = (rng.standard_normal(sum(blens)) * 2).astype(dtype)
    variables = {}
    for tile in (0, 1):
        variables[f"data{tile}"] = (dtype, data, tile)
        variables[f"B{tile}"] = (dtype, B, tile)
        variables[f"out{tile}"] = (dtype, sum(sizes), tile)
    vertices, s, sb = [], 0, 0
    for i, (c, r, k) in enumerate(shapes):
        tile = i % 2
        vertices.append((tile, {"data": (f"data{tile}", s, c * r), "B": (f"B{tile}", sb, k),
                                "out": (f"out{tile}", s, c * r)}, _params(op, c, r, t)))
        s += c * r
        sb += k
    run = run_vertices("BroadcastVectorOuter", variables, vertices)
    return data, B, run


@pytest.mark.parametrize("op", ["add", "sub", "mul"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_broadcast_vector_outer_matches_numpy(dtype, op, rng):
    data, B, run = _run(dtype, op, SHAPES, rng)
    s = sb = 0
    for i, (c, r, k) in enumerate(SHAPES):
        got = run.out[f"out{i % 2}"][s:s + c * r]
        x = data[s:s + c * r].reshape(r, c).astype(np.float32)
        b = B[sb:sb + k][np.arange(r) % k].astype(np.float32)[:, None]
        expect = {"add": x + b, "sub": x - b, "mul": x * b}[op].astype(dtype).reshape(-1)
        np.testing.assert_array_equal(got, expect, err_msg=f"shape {(c, r, k)}")
        np.testing.assert_array_equal(CODELET.reference(data[s:s + c * r], B[sb:sb + k], op, c, r), expect)
        s += c * r
        sb += k


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_broadcast_vector_outer_cycles_follow_the_estimator(dtype, rng):
    t = ipu.element_type(dtype)
    _, _, run = _run(dtype, "mul", SHAPES, rng)
    per_tile = [0, 0]
    for i, (c, r, _) in enumerate(SHAPES):
        per_tile[i % 2] += int(broadcast_vector_outer_cycles(c, r, "mul", t, by_column(c, t), c % t_vw(t) != 0))
    assert [int(x) for x in run.step.tile_cycles[:2]] == per_tile


def t_vw(t):
    return 8 // t.itemsize


def test_estimator_by_hand():
    """poplibs' BroadcastVectorOuterCycleEstimate worked by hand: float MULTIPLY (1 cycle a loop,
    natural vector width 2) plus 1 cycle of loop overhead."""
    f32 = ipu.FLOAT32
    # basicOpLoopCycles multiplies before it divides: 2 x (n + 1) / 2 in integers
    # ByRow, 8 columns, 12 rows, aligned: each worker takes 2 rows of 7 + 2 x 9 / 2 = 16
    assert int(broadcast_vector_outer_cycles(8, 12, "mul", f32, False, False)) == (15 + 2 * 16) * 6 + 11
    # ByColumn, 49 columns, 3 rows, misaligned: each worker does every row of 25 + 2 x 10 / 2 = 35
    assert int(broadcast_vector_outer_cycles(49, 3, "mul", f32, True, True)) == (15 + 3 * 35) * 6 + 11


def test_state_does_not_grow_with_rows(rng):
    """One vertex over many rows (the channels of a batch norm's block on a tile) holds the same
    state as one over a single row."""
    t = ipu.FLOAT32
    few = CODELET.vertex_state_bytes((t, t, t), np.array([[16, 1, 16]]), np.array([[2, 0, 0, 16, 1]]))
    many = CODELET.vertex_state_bytes((t, t, t), np.array([[16 * 500, 500, 16 * 500]]), np.array([[2, 0, 0, 16, 500]]))
    assert int(few[0]) == int(many[0]) == 20


@pytest.mark.parametrize("bad,match", [
    ({"op": 3}, "not add, sub or mul"),
    ({"columns": 0}, "columns must be"),
    ({"misaligned": 0, "columns": 7, "rows": 1}, "misaligned=1"),
])
def test_bad_vertices_are_refused(bad, match):
    t = ipu.FLOAT32
    params = {**_params("mul", 8, 1, t), **bad}
    n = params["columns"] * params["rows"]
    with pytest.raises(ValueError, match=match):
        run_vertices("BroadcastVectorOuter", {"d": ("float32", max(n, 1), 0), "b": ("float32", 1, 0),
                                              "o": ("float32", max(n, 1), 0)},
                     [(0, {"data": ("d", 0, n), "B": ("b", 0, 1), "out": ("o", 0, n)}, params)])
