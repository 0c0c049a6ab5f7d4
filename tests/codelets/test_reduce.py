"""Reduce: every op, type and layout over awkward shapes; bit-exact against the reference (the
kernel's own accumulation order), close to float64 NumPy; cycles against the cost model."""
import numpy as np
import pytest

import ipu
from codelets.reduce import PARTIALS, REDUCE_OPS, ROWS, reduce_cycles

REDUCE = ipu.get_codelet("Reduce")
FLOAT_OPS = ["sum", "max", "min", "prod", "sum_squares", "abs_sum", "log_sum_exp"]
SHAPES = [(1, 1), (1, 97), (7, 13), (13, 7), (3, 8), (2, 17), (5, 0)]  # (outputs, k)


def _run(x, out_dtype, op, n_out, k, layout, cl, extra=None):
    """One vertex per (shape) on tile 1, plus the same vertex again on tile 0 and a second vertex
    on tile 0 reducing the same data in the other layout (several vertices per compute set)."""
    n_in = n_out * k
    x2 = np.concatenate([x, x]) if n_in else x
    other = PARTIALS if layout == ROWS else ROWS
    variables = {"x0": (x.dtype, x2 if n_in else 1, 0), "x1": (x.dtype, x if n_in else 1, 1),
                 "y0": (out_dtype, 2 * n_out, 0), "y1": (out_dtype, n_out, 1)}
    params = {"op": REDUCE_OPS[op], "inner": k, "layout": layout}
    vertices = [(1, {"in": ("x1", 0, n_in), "out": ("y1", 0, n_out)}, params),
                (0, {"in": ("x0", 0, n_in), "out": ("y0", 0, n_out)}, params),
                (0, {"in": ("x0", n_in, n_in), "out": ("y0", n_out, n_out)}, dict(params, layout=other))]
    run = cl.run_vertices("Reduce", variables, vertices)
    return run.out["y1"], run.out["y0"][:n_out], run.out["y0"][n_out:], run


def _f64(x, op, n_out, k, layout):
    v = x.astype(np.float64).reshape(n_out, k) if layout == ROWS or n_out == 1 else \
        x.astype(np.float64).reshape(k, n_out).T
    with np.errstate(all="ignore"):
        if op == "sum":
            return v.sum(1)
        if op == "sum_squares":
            return (v * v).sum(1)
        if op == "abs_sum":
            return np.abs(v).sum(1)
        if op == "prod":
            return v.prod(1)
        if op == "max":
            return v.max(1) if k else np.full(n_out, -np.inf)
        if op == "min":
            return v.min(1) if k else np.full(n_out, np.inf)
        if k == 0:
            return np.full(n_out, -np.inf)
        m = v.max(1)
        return m + np.log(np.exp(v - m[:, None]).sum(1))


@pytest.mark.parametrize("layout", [ROWS, PARTIALS])
@pytest.mark.parametrize("types", [("float32", "float32"), ("float16", "float16"), ("float16", "float32"),
                                   ("float32", "float16")])
@pytest.mark.parametrize("op", FLOAT_OPS)
def test_reduce_float(op, types, layout, rng, cl):
    tin, tout = types
    for n_out, k in SHAPES:
        x = rng.standard_normal(n_out * k) * (0.7 if op == "prod" else 3.0)
        x = x.astype(tin)
        got, again, other, _ = _run(x, tout, op, n_out, k, layout, cl)
        ref = REDUCE.reference(x, op, n_out, layout, tout)
        exact = op != "log_sum_exp"
        what = f"{op} {tin}->{tout} layout {layout} shape {(n_out, k)}"
        cl.assert_close(got, ref, exact=exact, what=what)
        cl.assert_close(again, ref, exact=exact, what=what)
        cl.assert_close(other, REDUCE.reference(x, op, n_out, 1 - layout, tout), exact=exact, what=what + " other")
        # independent: float64 NumPy, within float32 accumulation error, then one rounding
        expect = _f64(x, op, n_out, k, layout)
        scale = _f64(np.abs(x.astype(np.float64)), "sum" if op != "sum_squares" else "sum_squares", n_out, k, layout)
        with np.errstate(all="ignore"):
            half_ulp = np.spacing(np.abs(expect).astype(np.float16)).astype(np.float64) if tout == "float16" else 0
        tol = 1e-5 * (np.abs(expect) + scale + 1) + half_ulp
        if op == "prod":
            tol = 1e-5 * np.abs(expect) + half_ulp + 1e-30
        fin = np.isfinite(expect)
        np.testing.assert_array_equal(got[~fin], expect[~fin].astype(tout), err_msg=what)
        assert np.all(np.abs(got[fin].astype(np.float64) - expect[fin]) <= tol[fin]), (what, got, expect)


@pytest.mark.parametrize("layout", [ROWS, PARTIALS])
@pytest.mark.parametrize("op", ["sum", "max", "min", "prod"])
def test_reduce_int32(op, layout, rng, cl):
    for n_out, k in SHAPES:
        x = rng.integers(-2 ** 31, 2 ** 31, n_out * k, dtype=np.int64).astype(np.int32)
        if op == "prod":
            x = rng.integers(-9, 10, n_out * k).astype(np.int32)
        got, again, other, _ = _run(x, "int32", op, n_out, k, layout, cl)
        v = x.astype(object).reshape(n_out, k) if layout == ROWS or n_out == 1 else x.astype(object).reshape(k, n_out).T
        if op == "sum":
            e = [sum(r) for r in v]
        elif op == "prod":
            e = [int(np.prod(np.array(r, dtype=object))) if len(r) else 1 for r in v]
        elif op == "max":
            e = [max(r) if len(r) else -2 ** 31 for r in v]
        else:
            e = [min(r) if len(r) else 2 ** 31 - 1 for r in v]
        expect = np.array([((int(t) + 2 ** 31) % 2 ** 32) - 2 ** 31 for t in e], np.int32)
        np.testing.assert_array_equal(got, expect)
        np.testing.assert_array_equal(again, REDUCE.reference(x, op, n_out, layout))
        np.testing.assert_array_equal(other, REDUCE.reference(x, op, n_out, 1 - layout))


@pytest.mark.parametrize("layout", [ROWS, PARTIALS])
@pytest.mark.parametrize("op", ["logical_and", "logical_or", "max", "min"])
def test_reduce_bool(op, layout, rng, cl):
    for n_out, k in SHAPES:
        x = rng.random(n_out * k) < (0.8 if op in ("logical_and", "min") else 0.1)
        got, _, other, _ = _run(x, "bool", op, n_out, k, layout, cl)
        v = x.reshape(n_out, k) if layout == ROWS or n_out == 1 else x.reshape(k, n_out).T
        expect = v.any(1) if op in ("logical_or", "max") else v.all(1)
        np.testing.assert_array_equal(got, expect)
        np.testing.assert_array_equal(other, REDUCE.reference(x, op, n_out, 1 - layout))


def test_reduce_nan_and_inf(cl):
    x = np.array([1.0, np.nan, 2.0, -np.inf, -np.inf, -np.inf, np.inf, 0.0, 5.0], np.float32)
    for op, expect in [("max", [np.nan, -np.inf, np.inf]), ("min", [np.nan, -np.inf, 0.0]),
                       ("sum", [np.nan, -np.inf, np.inf]), ("log_sum_exp", [np.nan, -np.inf, np.inf])]:
        got, _, _, _ = _run(x, "float32", op, 3, 3, ROWS, cl)
        np.testing.assert_array_equal(got, np.array(expect, np.float32), err_msg=op)


def test_two_stage_half_sum_through_float32_partials(rng, cl):
    """The lowering's pattern: float16 rows reduced to float32 partials (ROWS), then the partials
    [k, n] summed (PARTIALS) into float16."""
    n, k1, k2 = 5, 11, 3
    x = (rng.standard_normal(n * k1 * k2) * 2).astype(np.float16)
    # stage 1: partial p of output j reduces x[p, j, :] (a row of k1)
    part, _, _, _ = _run(x, "float32", "sum", n * k2, k1, ROWS, cl)
    out, _, _, _ = _run(part, "float16", "sum", n, k2, PARTIALS, cl)
    expect = x.astype(np.float64).reshape(k2, n, k1).sum(axis=(0, 2))
    assert np.all(np.abs(out.astype(np.float64) - expect) <=
                  np.spacing(np.abs(expect).astype(np.float16)) + 1e-4 * np.abs(expect))


@pytest.mark.parametrize("op", ["sum", "max", "log_sum_exp", "sum_squares", "logical_or", "prod"])
@pytest.mark.parametrize("layout", [ROWS, PARTIALS])
@pytest.mark.parametrize("shape", [(1, 1), (1, 100), (7, 13), (16, 4), (3, 1000)])
def test_reduce_cycles_equal_cost_model(op, layout, shape, cl):
    n_out, k = shape
    dt = "bool" if op == "logical_or" else "float16"
    out_dt = "bool" if op == "logical_or" else "float32"
    run = cl.run_vertices("Reduce", {"x": (dt, n_out * k, 0), "y": (out_dt, n_out, 0)},
                          [(0, {"in": ("x", 0, n_out * k), "out": ("y", 0, n_out)},
                            {"op": REDUCE_OPS[op], "inner": k, "layout": layout})])
    assert not REDUCE.supervisor
    one = int(reduce_cycles(np.array([n_out]), np.array([k]), op, np.array([layout]), ipu.element_type(dt),
                            ipu.element_type(out_dt))[0])
    assert run.cycles == 6 * one  # a worker vertex alone on its tile


def test_reduce_cost_formulas_by_hand():
    f32, f16 = ipu.FLOAT32, ipu.FLOAT16
    # single input, float sum of 100: accumulator width 4, data path 2 floats: 2 loads per loop of
    # 4 -> 2 x 100 / 4 = 50; 100 % 4 = 0; float out
    assert reduce_cycles(1, 100, "sum", ROWS, f32, f32) == 3 + 6 + 50 + 5 + 0 + 3
    # half in, float out: width 8, data path 4: 2 x 100 / 8 = 25, 100 % 8 = 4
    assert reduce_cycles(1, 100, "sum", ROWS, f16, f32) == 3 + 6 + 25 + 5 + 4 + 3
    # continuous, 7 rows of 13 floats: 7 x (13 / 2) + 2 (odd) + 12 x 7 + 10 + 7
    assert reduce_cycles(7, 13, "sum", ROWS, f32, f32) == 7 * 6 + 2 + 84 + 17
    # strided, 7 outputs x 13 float partials, sum: 15 + ceil(7 / gcd(2, 7)) x (3 + 5 + 3 + 12)
    assert reduce_cycles(7, 13, "sum", PARTIALS, f32, f32) == 15 + 7 * 23
    # strided half max into half: post = 1 + 7
    assert reduce_cycles(8, 5, "max", PARTIALS, f16, f16) == 15 + 2 * (3 + 8 + 3 + 4)


def test_reduce_errors():
    def vertex(tin, tout, n_in, n_out, **params):
        g = ipu.Graph(ipu.small_target(1))
        x = g.add_variable("x", (n_in,), tin)
        y = g.add_variable("y", (n_out,), tout)
        g.set_tile_mapping(x, 0)
        g.set_tile_mapping(y, 0)
        p = {"op": 0, "inner": n_in // max(n_out, 1), "layout": ROWS}
        p.update(params)
        g.add_vertex(g.add_compute_set("cs"), "Reduce", 0, **{"in": x, "out": y}, **p)

    vertex("float32", "float32", 12, 3)
    with pytest.raises(ValueError, match="out count x inner"):
        vertex("float32", "float32", 12, 3, inner=5)
    with pytest.raises(ValueError, match="layout must be"):
        vertex("float32", "float32", 12, 3, layout=2)
    with pytest.raises(TypeError, match="int32 data supports"):
        vertex("int32", "int32", 12, 3, op=REDUCE_OPS["log_sum_exp"])
    with pytest.raises(TypeError, match="float input needs"):
        vertex("float32", "int32", 12, 3)
    with pytest.raises(TypeError, match="bool data supports"):
        vertex("bool", "bool", 12, 3, op=REDUCE_OPS["sum"])
    with pytest.raises(ValueError, match="op code 42"):
        vertex("float32", "float32", 12, 3, op=42)
