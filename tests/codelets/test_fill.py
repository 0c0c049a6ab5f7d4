"""Fill, Copy and Arange: every type, awkward sizes, several vertices per compute set; cycles."""
import numpy as np
import pytest

import ipu
from codelets.fill import arange_cycles, copy_cycles, fill_cycles

FILL = ipu.get_codelet("Fill")
TYPES = [t.name for t in ipu.ALL_TYPES]
VALUES = [0.0, 1.0, -3.7, 0.1, 300.5, 1e10, -1e10, np.inf]


@pytest.mark.parametrize("dtype", TYPES)
def test_fill_every_type(dtype, cl):
    sizes = (1, 7, 13, 97, 64, 3)
    pieces = cl.layout_pieces(sizes)
    values = [VALUES[i % len(VALUES)] for i in range(len(pieces))]
    n = sum(sizes)
    run = cl.run_vertices("Fill", {"y0": (dtype, n, 0), "y1": (dtype, n, 1)},
                          [(t, {"out": (f"y{t}", s, k)}, {"value": v}) for (s, k, t), v in zip(pieces, values)])
    for (s, k, t), v in zip(pieces, values):
        got = run.out[f"y{t}"][s:s + k]
        with np.errstate(over="ignore", invalid="ignore"):
            np.testing.assert_array_equal(got, FILL.reference(k, v, dtype))
            dt = np.dtype(dtype)
            if dt == np.bool_:
                expect = np.full(k, v != 0)
            elif dt.kind in "iu":
                info = np.iinfo(dt)
                expect = np.full(k, int(np.clip(np.trunc(v), info.min, info.max)), dt)
            else:
                expect = np.full(k, v, dt)
        np.testing.assert_array_equal(got, expect)


@pytest.mark.parametrize("dtype", TYPES)
def test_copy_every_type(dtype, rng, cl):
    n = 97
    x = rng.integers(0, 255, n).astype(dtype)
    pieces = cl.layout_pieces((1, 7, 13, 76))
    run = cl.run_vertices("Copy", {"x0": (dtype, x, 0), "x1": (dtype, x, 1), "y0": (dtype, n, 0), "y1": (dtype, n, 1)},
                          [(t, {"in": (f"x{t}", s, k), "out": (f"y{t}", s, k)}, None) for s, k, t in pieces])
    got = np.concatenate([run.out[f"y{t}"][s:s + k] for s, k, t in pieces])
    np.testing.assert_array_equal(got, x)


def test_copy_keeps_half_bits_and_in_place(cl):
    x = np.array([np.nan, -0.0, 1.0, np.inf, 6e-8], np.float16)
    run = cl.run_vertices("Copy", {"x": ("float16", x, 0), "y": ("float16", 5, 0)},
                          [(0, {"in": ("x", 0, 5), "out": ("y", 0, 5)}, None),
                           (0, {"in": ("x", 1, 3), "out": ("x", 1, 3)}, None)])
    np.testing.assert_array_equal(run.out["y"].view(np.uint16), x.view(np.uint16))
    np.testing.assert_array_equal(run.out["x"].view(np.uint16), x.view(np.uint16))


def test_arange(cl):
    pieces = cl.layout_pieces((1, 7, 13, 97))
    starts = [0, -5, 2 ** 31 - 3, 1000]
    run = cl.run_vertices("Arange", {"y0": ("int32", 118, 0), "y1": ("int32", 118, 1)},
                          [(t, {"out": (f"y{t}", s, k)}, {"start": st}) for (s, k, t), st in zip(pieces, starts)])
    for (s, k, t), st in zip(pieces, starts):
        got = run.out[f"y{t}"][s:s + k]
        np.testing.assert_array_equal(got, ipu.get_codelet("Arange").reference(k, st))
        np.testing.assert_array_equal(got, [((st + i + 2 ** 31) % 2 ** 32) - 2 ** 31 for i in range(k)])
    with pytest.raises(TypeError, match="cannot be float32"):
        g = ipu.Graph(ipu.small_target(1))
        y = g.add_variable("y", (4,), "float32")
        g.set_tile_mapping(y, 0)
        g.add_vertex(g.add_compute_set("cs"), "Arange", 0, out=y, start=0)


@pytest.mark.parametrize("n", [1, 2, 3, 63, 64, 97, 1000])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "bool", "uint8"])
def test_worker_cycles(dtype, n, cl):
    """Worker vertices: one alone costs 6 x its thread cycles; six on one tile run in parallel."""
    t = ipu.element_type(dtype)
    run = cl.run_vertices("Fill", {"y": (dtype, n, 0)}, [(0, {"out": ("y", 0, n)}, {"value": 1.0})])
    assert run.cycles == 6 * int(fill_cycles(np.array([n]), t)[0])
    run = cl.run_vertices("Copy", {"x": (dtype, n, 0), "y": (dtype, n, 0)},
                          [(0, {"in": ("x", 0, n), "out": ("y", 0, n)}, None)])
    assert run.cycles == 6 * int(copy_cycles(np.array([n]), t)[0])


def test_six_workers_in_parallel_and_a_seventh(cl):
    n = 60
    six = [(0, {"out": ("y", 10 * i, 10)}, {"value": float(i)}) for i in range(6)]
    run = cl.run_vertices("Fill", {"y": ("float32", n + 10, 0)}, six)
    one = int(fill_cycles(10, ipu.FLOAT32))
    assert run.cycles == 6 * one
    run = cl.run_vertices("Fill", {"y": ("float32", n + 10, 0)}, six + [(0, {"out": ("y", 60, 10)}, {"value": 9.0})])
    assert run.cycles == 6 * 2 * one
    np.testing.assert_array_equal(run.out["y"], np.repeat(np.array([0, 1, 2, 3, 4, 5, 9], np.float32), 10))


def test_cost_formulas_by_hand():
    f32, f16, u8, i32 = ipu.FLOAT32, ipu.FLOAT16, ipu.UINT8, ipu.INT32
    assert fill_cycles(7, f32) == 16 + 3 + 6 + 1 + 1
    assert fill_cycles(1, f16) == 15 and fill_cycles(2, f16) == 21 and fill_cycles(10, f16) == 26 + 2
    assert fill_cycles(100, u8) == 39 + 12 and fill_cycles(10, u8) == 28 + 2
    assert copy_cycles(7, f32) == 12 + 35 + 7
    assert copy_cycles(3, f16) == 12 + 35 + 1 + 2 * 5
    assert arange_cycles(7, i32) == 14 + 3 * 4
