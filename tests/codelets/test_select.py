"""Select and Clamp: every type, awkward sizes, broadcast scalars, in place; cycles."""
import numpy as np
import pytest

import ipu
from codelets.select import clamp_cycles, select_cycles

SELECT = ipu.get_codelet("Select")
CLAMP = ipu.get_codelet("Clamp")


def _data(dtype, rng, n):
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(bool)
    if dtype == "int32":
        return rng.integers(-1000, 1000, n).astype(np.int32)
    x = (rng.standard_normal(n) * 10).astype(dtype)
    x[::11] = np.nan
    return x


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "bool"])
def test_select(dtype, rng, cl):
    n = sum(cl.SIZES)
    c = rng.random(n) < 0.5
    a, b = _data(dtype, rng, n), _data(dtype, rng, n)
    got, _ = cl.elementwise_run("Select", {"cond": c, "a": a, "b": b}, dtype, None)
    np.testing.assert_array_equal(got.view(np.uint8), np.where(c, a, b).view(np.uint8))  # bit for bit
    np.testing.assert_array_equal(got.view(np.uint8), SELECT.reference(c, a, b).view(np.uint8))


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "bool"])
def test_select_broadcast_scalars_and_in_place(dtype, rng, cl):
    n = sum(cl.SIZES)
    c = rng.random(n) < 0.5
    a = _data(dtype, rng, n)
    s = _data(dtype, rng, len(cl.SIZES))
    pieces = cl.layout_pieces(cl.SIZES)
    got, _ = cl.elementwise_run("Select", {"cond": c, "a": a, "b": s}, dtype, None)
    expect = np.concatenate([np.where(c[st:st + k], a[st:st + k], s[i]) for i, (st, k, _) in enumerate(pieces)])
    np.testing.assert_array_equal(got.view(np.uint8), expect.view(np.uint8))
    s2 = _data(dtype, rng, len(cl.SIZES))
    got, _ = cl.elementwise_run("Select", {"cond": c, "a": s, "b": s2}, dtype, None)
    expect = np.concatenate([np.where(c[st:st + k], s[i], s2[i]) for i, (st, k, _) in enumerate(pieces)])
    np.testing.assert_array_equal(got.view(np.uint8), expect.view(np.uint8))
    b = _data(dtype, rng, n)
    got, _ = cl.elementwise_run("Select", {"cond": c, "a": a, "b": b}, None, None, alias_out="a")
    np.testing.assert_array_equal(got.view(np.uint8), np.where(c, a, b).view(np.uint8))


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("lo,hi", [(-1.5, 2.5), (0.0, np.inf), (-np.inf, -3.0), (0.1, 0.1), (5.0, -5.0),
                                   (-1e12, 1e12)])
def test_clamp(dtype, lo, hi, rng, cl):
    n = sum(cl.SIZES)
    x = _data(dtype, rng, n)
    got, _ = cl.elementwise_run("Clamp", {"in": x}, dtype, {"lo": lo, "hi": hi})
    np.testing.assert_array_equal(got, CLAMP.reference(x, lo, hi))
    if dtype == "int32":
        ilo = max(int(np.trunc(max(lo, -2.0 ** 31))), -2 ** 31)
        ihi = min(int(np.trunc(min(hi, 2.0 ** 31))), 2 ** 31 - 1)
        expect = np.minimum(np.maximum(x.astype(np.int64), ilo), ihi).astype(np.int32)
    else:
        with np.errstate(invalid="ignore"):
            expect = np.minimum(np.maximum(x.astype(np.float32), np.float32(lo)), np.float32(hi)).astype(dtype)
    np.testing.assert_array_equal(got, expect)
    got, _ = cl.elementwise_run("Clamp", {"in": x}, None, {"lo": lo, "hi": hi}, alias_out="in")
    np.testing.assert_array_equal(got, expect)


@pytest.mark.parametrize("n", [1, 2, 7, 97, 1000])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "bool"])
def test_select_and_clamp_cycles(dtype, n, cl):
    t = ipu.element_type(dtype)
    for sa, sb in [(False, False), (True, True), (False, True)]:
        run = cl.run_vertices("Select", {"c": ("bool", n, 0), "a": (dtype, 1 if sa else n, 0),
                                         "b": (dtype, 1 if sb else n, 0), "y": (dtype, n, 0)},
                              [(0, {"cond": ("c", 0, n), "a": ("a", 0, 1 if sa else n), "b": ("b", 0, 1 if sb else n),
                                    "out": ("y", 0, n)}, None)])
        assert run.cycles == 6 * int(select_cycles(np.array([n]), t, np.array([sa and n > 1]),
                                                   np.array([sb and n > 1]))[0])
    if dtype != "bool":
        run = cl.run_vertices("Clamp", {"x": (dtype, n, 0), "y": (dtype, n, 0)},
                              [(0, {"in": ("x", 0, n), "out": ("y", 0, n)}, {"lo": 0.0, "hi": 1.0})])
        assert run.cycles == 6 * int(clamp_cycles(np.array([n]), t)[0])


def test_cost_formulas_by_hand():
    assert select_cycles(10, ipu.FLOAT32, False, False) == 5 + 6 + 50
    assert select_cycles(10, ipu.FLOAT32, True, True) == 10 + 5 + 40 + 3
    assert select_cycles(9, ipu.FLOAT16, True, True) == 10 + 23 + 36
    assert clamp_cycles(9, ipu.FLOAT32) == 11 + 5 * 2
    assert clamp_cycles(9, ipu.FLOAT16) == 11 + 3 * 2
    assert clamp_cycles(9, ipu.INT32) == 11 + 63


def test_errors():
    g = ipu.Graph(ipu.small_target(1))
    c = g.add_variable("c", (4,), "bool")
    x = g.add_variable("x", (4,), "float32")
    h = g.add_variable("h", (4,), "float16")
    for v in (c, x, h):
        g.set_tile_mapping(v, 0)
    cs = g.add_compute_set("cs")
    with pytest.raises(TypeError, match="one type"):
        g.add_vertex(cs, "Select", 0, cond=c, a=x, b=h, out=x)
    with pytest.raises(TypeError, match="cannot be float32"):
        g.add_vertex(cs, "Select", 0, cond=x, a=x, b=x, out=x)
    with pytest.raises(ValueError, match="cond must have"):
        g.add_vertex(cs, "Select", 0, cond=c[:3], a=x[:2], b=x[:2], out=x[:2])
    with pytest.raises(ValueError, match="must not be NaN"):
        g.add_vertex(cs, "Clamp", 0, **{"in": x, "out": x}, lo=np.nan, hi=1.0)
    with pytest.raises(TypeError, match="in is float32 but out is float16"):
        g.add_vertex(cs, "Clamp", 0, **{"in": x, "out": h}, lo=0.0, hi=1.0)
