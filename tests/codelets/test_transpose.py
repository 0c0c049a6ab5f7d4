"""Transpose2d: every type, awkward shapes, several matrices per vertex; the poplibs estimator."""
import numpy as np
import pytest

import ipu
from codelets.transpose import transpose2d_cycles

T2D = ipu.get_codelet("Transpose2d")
TYPES = [t.name for t in ipu.ALL_TYPES]
SHAPES = [(1, 1, 1), (1, 7, 1), (13, 1, 2), (3, 5, 1), (4, 8, 3), (7, 13, 2), (16, 16, 1), (97, 2, 1)]


@pytest.mark.parametrize("dtype", TYPES)
def test_transpose_matches_numpy(dtype, rng, cl):
    for rows, cols, mats in SHAPES:
        n = rows * cols * mats
        x = rng.integers(0, 120, n).astype(dtype)
        # two vertices: the matrices on tile 0, the same data transposed again on tile 1
        run = cl.run_vertices("Transpose2d", {"x": (dtype, x, 0), "y": (dtype, n, 0), "x1": (dtype, x, 1),
                                              "y1": (dtype, n, 1)},
                              [(0, {"src": ("x", 0, n), "dst": ("y", 0, n)}, {"rows": rows, "cols": cols}),
                               (1, {"src": ("x1", 0, n), "dst": ("y1", 0, n)}, {"rows": cols, "cols": rows})])
        expect = x.reshape(mats, rows, cols).transpose(0, 2, 1).reshape(-1)
        np.testing.assert_array_equal(run.out["y"], expect)
        np.testing.assert_array_equal(run.out["y"], T2D.reference(x, rows, cols))
        np.testing.assert_array_equal(run.out["y1"], x.reshape(mats, cols, rows).transpose(0, 2, 1).reshape(-1))


def test_transpose_keeps_half_bits(cl):
    x = np.array([np.nan, -0.0, 1.0, np.inf, 6e-8, -2.5], np.float16)
    run = cl.run_vertices("Transpose2d", {"x": ("float16", x, 0), "y": ("float16", 6, 0)},
                          [(0, {"src": ("x", 0, 6), "dst": ("y", 0, 6)}, {"rows": 2, "cols": 3})])
    np.testing.assert_array_equal(run.out["y"].view(np.uint16), x.reshape(2, 3).T.reshape(-1).view(np.uint16))


def test_bad_shapes_are_refused(cl):
    with pytest.raises(ValueError, match="whole number of rows x cols"):
        cl.run_vertices("Transpose2d", {"x": ("float32", 10, 0), "y": ("float32", 10, 0)},
                        [(0, {"src": ("x", 0, 10), "dst": ("y", 0, 10)}, {"rows": 3, "cols": 3})])


# values worked by hand from poplibs popopsCycleEstimators.cpp Transpose2d (SDK 3.x)
@pytest.mark.parametrize("rows, cols, mats, isz, expect", [
    (8, 16, 1, 4, 27 + (11 + 4 * (6 + 3 * 7))),  # float fast path
    (8, 16, 3, 4, 27 + 3 * (11 + 4 * (6 + 3 * 7))),
    (7, 16, 1, 4, 13 + (8 + 16 * (5 + 14))),  # odd rows: slow path
    (512, 2, 1, 4, 13 + (8 + 2 * (5 + 1024))),  # rows >= 512: slow path
    (8, 16, 2, 2, 37 + 2 * (12 + 2 * (15 + 4 * 2))),  # half fast path
    (4, 4, 5, 2, 32 + 15 * 5),  # half 4x4
    (12, 4, 1, 2, 28 + (17 + (20 + 4 * 1))),  # half Nx4
    (6, 6, 1, 2, 15 + (8 + 6 * (5 + 15))),  # half slow path
])
def test_cycles_follow_the_poplibs_estimator(rows, cols, mats, isz, expect):
    assert int(transpose2d_cycles(rows, cols, mats, isz)) == expect


def test_step_cycles_are_the_estimate(cl):
    n = 8 * 16 * 3
    run = cl.run_vertices("Transpose2d", {"x": ("float32", n, 0), "y": ("float32", n, 0)},
                          [(0, {"src": ("x", 0, n), "dst": ("y", 0, n)}, {"rows": 8, "cols": 16})])
    # one worker vertex: the tile's time is 6 issue slots x the thread cycles (round robin)
    assert run.step.tile_cycles[0] == 6 * int(transpose2d_cycles(8, 16, 3, 4))
