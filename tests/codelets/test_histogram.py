"""Histogram and HistogramCombine alone on a small target: NumPy results and cost models."""
import numpy as np
import pytest

import ipu
from codelet_targets import vertex_target
from codelets.histogram import histogram_combine_cycles, histogram_cycles


def _one(codelet, arrays, params):
    g = ipu.Graph(vertex_target(2))
    vs = {}
    for name, arr in arrays.items():
        v = g.add_variable(name, (arr.size,), arr.dtype)
        g.set_tile_mapping(v, 0)
        vs[name] = v
    cs = g.add_compute_set("cs")
    g.add_vertex(cs, codelet, 0, **vs, **params)
    exe = ipu.compile(g, ipu.Execute(cs))
    e = ipu.Engine(exe)
    for name, arr in arrays.items():
        e.write_tensor(vs[name], arr)
    e.run()
    step = [s for s in exe.steps if s.kind == "compute"][0]
    return {n: e.read_tensor(v) for n, v in vs.items()}, step


@pytest.mark.parametrize("dt", ["float32", "float16"])
@pytest.mark.parametrize("n", [1, 2, 3, 7, 500])
@pytest.mark.parametrize("absolute", [0, 1])
def test_histogram(dt, n, absolute):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(dt)
    if n > 3:
        x[:3] = [np.nan, 0.5, -0.5]  # NaN -> last bin; values equal to a limit go up
    limits = np.array([-1.0, -0.5, 0.0, 0.5, 2.0], dt)
    res, step = _one("Histogram", {"data": x, "limits": limits, "out": np.zeros(6, np.uint32)},
                     {"absolute": absolute})
    v = np.abs(x) if absolute else x
    expect = np.array([np.sum(v < limits[0])] + [np.sum((v >= a) & (v < b)) for a, b in zip(limits[:-1], limits[1:])]
                      + [np.sum(v >= limits[-1]) + np.sum(np.isnan(v))])
    np.testing.assert_array_equal(res["out"], expect)
    np.testing.assert_array_equal(res["out"], ipu.get_codelet("Histogram").reference(x, limits, bool(absolute)))
    assert step.cycles == 6 * int(histogram_cycles(n, 5, absolute, ipu.element_type(dt)))


def test_histogram_cost_is_poplibs_histogram2d():
    # float, 9 elements, 2 limits, not absolute: 7 + 3 + (10 + 2 + 3 x 4 + 5) x 2 + 3 + 10 + 4
    assert histogram_cycles(9, 2, 0, ipu.FLOAT32) == 7 + 3 + (10 + 2 + 12 + 5) * 2 + 3 + 10 + 4


def test_histogram_combine():
    parts = np.random.default_rng(0).integers(0, 100, (7, 4)).astype(np.uint32)
    res, step = _one("HistogramCombine", {"partials": parts.reshape(-1), "out": np.zeros(4, np.uint32)}, {})
    np.testing.assert_array_equal(res["out"], parts.sum(0))
    assert step.cycles == 6 * int(histogram_combine_cycles(7, 4))
