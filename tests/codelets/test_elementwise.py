"""UnaryOp and BinaryOp: every op at every type it takes, over awkward sizes, against the codelet's
reference and an independent float64 NumPy expression; in-place and broadcast forms; cycles
against the cost model; clear errors."""
import math

import numpy as np
import pytest
from scipy import special

import ipu
from codelets.elementwise import (BINARY_OPS, UNARY_OPS, binary_cycles, nonlinearity_1d_cycles,
                                  unary_cycles)

UNARY = ipu.get_codelet("UnaryOp")
BINARY = ipu.get_codelet("BinaryOp")

FLOAT_UNARY = [n for n in UNARY_OPS if n not in ("isnan", "isinf", "isfinite", "logical_not")]
INT_UNARY = ["negate", "abs", "square", "relu", "sign"]
PRED_UNARY = ["isnan", "isinf", "isfinite", "logical_not"]
# ops whose float32 result is exactly rounded on both sides (IEEE basic operations)
EXACT_UNARY = {"negate", "abs", "square", "relu", "floor", "ceil", "round", "trunc", "sign", "reciprocal",
               "sqrt", "rsqrt"}

ARITH = ["add", "sub", "mul", "div", "pow", "max", "min", "fmod", "rem", "atan2"]
INT_ARITH = ["add", "sub", "mul", "div", "pow", "max", "min", "fmod", "rem"]
COMPARE = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or"]
EXACT_BINARY = {"add", "sub", "mul", "div", "max", "min", "fmod", "rem"}


def _unary_input(name, rng, n, dtype):
    if name in ("log", "sqrt", "rsqrt"):
        x = rng.uniform(0.05, 20.0, n)
    elif name == "log1p":
        x = rng.uniform(-0.9, 20.0, n)
    elif name == "asin":
        x = rng.uniform(-0.99, 0.99, n)
    elif name == "tan":
        x = rng.uniform(-1.3, 1.3, n)
    elif name == "reciprocal":
        x = rng.uniform(0.1, 5.0, n) * rng.choice([-1, 1], n)
    elif name in ("exp", "expm1", "sigmoid", "swish"):
        x = rng.uniform(-8.0, 8.0, n)
    else:
        x = rng.standard_normal(n) * 3.0
    return x.astype(dtype)


def _check_half_against_f64(got, expect, what, atol=0.0):
    """float16 results within one half ulp of the float64 value (infinite where it overflows)."""
    with np.errstate(over="ignore", invalid="ignore"):
        e16 = expect.astype(np.float16)
        big = ~np.isfinite(e16)
        np.testing.assert_array_equal(got[big], e16[big], err_msg=what)
        tol = np.spacing(np.abs(e16[~big])).astype(np.float64) * 1.01 + atol
    assert np.all(np.abs(got[~big].astype(np.float64) - expect[~big]) <= tol), what


# independent float64 definitions
_SQRT2 = math.sqrt(2.0)
F64 = {
    "negate": lambda x: -x, "abs": np.abs, "exp": np.exp, "log": np.log, "log1p": np.log1p, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "square": lambda x: x * x, "relu": lambda x: np.maximum(x, 0),
    "gelu": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
    "geluerf": lambda x: 0.5 * x * (1 + special.erf(x / _SQRT2)), "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "swish": lambda x: x / (1 + np.exp(-x)), "sin": np.sin,
    "cos": np.cos, "floor": np.floor, "ceil": np.ceil, "round": np.round, "sign": np.sign,
    "reciprocal": lambda x: 1 / x, "expm1": np.expm1, "erf": special.erf, "trunc": np.trunc, "tan": np.tan,
    "asin": np.arcsin,
}


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", FLOAT_UNARY)
def test_unary_float(name, dtype, rng, cl):
    n = sum(cl.SIZES)
    x = _unary_input(name, rng, n, dtype)
    got, run = cl.elementwise_run("UnaryOp", {"in": x}, dtype, {"op": UNARY_OPS[name]})
    ref = UNARY.reference(x, name)
    cl.assert_close(got, ref, exact=(dtype == "float32" and name in EXACT_UNARY), what=f"{name} {dtype}")
    # independent: float64 maths, rounded to the type
    expect = F64[name](x.astype(np.float64))
    if dtype == "float32":
        np.testing.assert_allclose(got.astype(np.float64), expect, rtol=3e-6, atol=3e-6, err_msg=name)
    else:
        _check_half_against_f64(got, expect, name, atol=1e-7)


@pytest.mark.parametrize("name", INT_UNARY)
def test_unary_int32(name, rng, cl):
    n = sum(cl.SIZES)
    x = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32)
    x[:3] = [-2 ** 31, 0, 2 ** 31 - 1]  # wrap-around cases
    got, _ = cl.elementwise_run("UnaryOp", {"in": x}, "int32", {"op": UNARY_OPS[name]})
    cl.assert_close(got, UNARY.reference(x, name), what=name)
    v = x.astype(np.int64)
    expect = {"negate": -v, "abs": np.abs(v), "square": v * v, "relu": np.maximum(v, 0), "sign": np.sign(v)}[name]
    np.testing.assert_array_equal(got, (expect % 2 ** 32).astype(np.uint32).view(np.int32))


SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -2.5, 65504.0, 1e-30], np.float64)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", PRED_UNARY)
def test_unary_predicates(name, dtype, rng, cl):
    x = np.concatenate([SPECIALS, rng.standard_normal(sum(cl.SIZES) - SPECIALS.size)]).astype(dtype)
    got, _ = cl.elementwise_run("UnaryOp", {"in": x}, "bool", {"op": UNARY_OPS[name]})
    expect = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite, "logical_not": lambda v: v == 0}[name](x)
    np.testing.assert_array_equal(got, expect)
    np.testing.assert_array_equal(got, UNARY.reference(x, name))


@pytest.mark.parametrize("dtype", ["int32", "bool"])
def test_unary_logical_not_int_bool(dtype, rng, cl):
    x = (rng.integers(-2, 3, sum(cl.SIZES))).astype(dtype)
    got, _ = cl.elementwise_run("UnaryOp", {"in": x}, "bool", {"op": UNARY_OPS["logical_not"]})
    np.testing.assert_array_equal(got, x == 0)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_unary_special_values_match_reference(dtype, cl):
    x = np.resize(SPECIALS, sum(cl.SIZES)).astype(dtype)
    for name in FLOAT_UNARY:
        got, _ = cl.elementwise_run("UnaryOp", {"in": x}, dtype, {"op": UNARY_OPS[name]})
        cl.assert_close(got, UNARY.reference(x, name), what=f"{name} {dtype} specials")


def test_unary_in_place(rng, cl):
    x = rng.standard_normal(sum(cl.SIZES)).astype(np.float32)
    got, _ = cl.elementwise_run("UnaryOp", {"in": x}, None, {"op": UNARY_OPS["exp"]}, alias_out="in")
    cl.assert_close(got, UNARY.reference(x, "exp"))
    xh = x.astype(np.float16)
    got, _ = cl.elementwise_run("UnaryOp", {"in": xh}, None, {"op": UNARY_OPS["tanh"]}, alias_out="in")
    cl.assert_close(got, UNARY.reference(xh, "tanh"))


def _binary_inputs(name, rng, n, dtype):
    if dtype == "int32":
        a = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32)
        b = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32)
        if name == "pow":
            a = rng.integers(-9, 10, n).astype(np.int32)
            b = rng.integers(-3, 40, n).astype(np.int32)
        elif name in ("div", "fmod", "rem"):
            b = rng.integers(-50, 50, n).astype(np.int32)  # includes 0: result 0
            b[0] = -1
            a[0] = -2 ** 31  # INT_MIN / -1 wraps
        return a, b
    a = rng.standard_normal(n) * 4
    b = rng.standard_normal(n) * 4
    if name == "pow":
        a = np.abs(a) + 0.1
    if name in ("equal", "not_equal", "less_equal", "greater_equal"):
        b[::3] = a[::3]  # some equal pairs
    if name in ("logical_and", "logical_or"):
        a[::4] = 0
        b[1::4] = 0
    return a.astype(dtype), b.astype(dtype)


F64B = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power,
    "max": np.maximum, "min": np.minimum, "fmod": np.fmod, "rem": np.remainder, "atan2": np.arctan2,
}


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", ARITH)
def test_binary_float(name, dtype, rng, cl):
    a, b = _binary_inputs(name, rng, sum(cl.SIZES), dtype)
    got, _ = cl.elementwise_run("BinaryOp", {"a": a, "b": b}, dtype, {"op": BINARY_OPS[name]})
    cl.assert_close(got, BINARY.reference(a, b, name), exact=(dtype == "float32" and name in EXACT_BINARY),
                    what=f"{name} {dtype}")
    expect = F64B[name](a.astype(np.float64), b.astype(np.float64))
    if dtype == "float32":
        if name in ("fmod", "rem"):  # exact in float32 too; compare with the float32 operands
            np.testing.assert_array_equal(got, F64B[name](a, b))
        else:
            np.testing.assert_allclose(got.astype(np.float64), expect, rtol=3e-6, atol=1e-6, err_msg=name)
    else:
        _check_half_against_f64(got, expect, name)


@pytest.mark.parametrize("name", INT_ARITH)
def test_binary_int32(name, rng, cl):
    a, b = _binary_inputs(name, rng, sum(cl.SIZES), "int32")
    got, _ = cl.elementwise_run("BinaryOp", {"a": a, "b": b}, "int32", {"op": BINARY_OPS[name]})
    cl.assert_close(got, BINARY.reference(a, b, name), what=name)
    # independent: Python integers, C semantics, wrapped to 32 bits
    def c_op(x, y):
        if name == "add":
            return x + y
        if name == "sub":
            return x - y
        if name == "mul":
            return x * y
        if name == "max":
            return max(x, y)
        if name == "min":
            return min(x, y)
        if name == "pow":
            if y < 0:
                return 1 if x == 1 else ((-1) ** y if x == -1 else 0)
            return x ** y
        if y == 0:
            return 0
        q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
        if name == "div":
            return q
        r = x - q * y
        if name == "rem" and r != 0 and (r < 0) != (y < 0):
            r += y
        return r
    expect = np.array([((c_op(int(x), int(y)) + 2 ** 31) % 2 ** 32) - 2 ** 31 for x, y in zip(a, b)], np.int32)
    np.testing.assert_array_equal(got, expect)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "bool"])
@pytest.mark.parametrize("name", COMPARE)
def test_binary_compare(name, dtype, rng, cl):
    n = sum(cl.SIZES)
    if dtype == "bool":
        a, b = rng.integers(0, 2, n).astype(bool), rng.integers(0, 2, n).astype(bool)
    elif dtype == "int32":
        a = rng.integers(-5, 5, n).astype(np.int32)
        b = rng.integers(-5, 5, n).astype(np.int32)
    else:
        a, b = _binary_inputs(name, rng, n, dtype)
        a[5], b[6] = np.nan, np.nan
    got, _ = cl.elementwise_run("BinaryOp", {"a": a, "b": b}, "bool", {"op": BINARY_OPS[name]})
    expect = {"equal": a == b, "not_equal": a != b, "less": a < b, "less_equal": a <= b, "greater": a > b,
              "greater_equal": a >= b, "logical_and": (a != 0) & (b != 0),
              "logical_or": (a != 0) | (b != 0)}[name]
    np.testing.assert_array_equal(got, expect)
    np.testing.assert_array_equal(got, BINARY.reference(a, b, name))


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("name", ["mul", "sub", "div", "max", "less"])
def test_binary_broadcast_scalar(name, dtype, rng, cl):
    """b with one element per vertex (x * 0.5), and a scalar first operand (2 - x)."""
    n = sum(cl.SIZES)
    a = (rng.standard_normal(n) * 4).astype(dtype) if dtype != "int32" else rng.integers(-99, 99, n).astype(np.int32)
    s = np.array([0.5, -3.0, 7.0, 2.0][:len(cl.SIZES)], np.float64).astype(dtype)
    out_dt = "bool" if name == "less" else dtype
    got, run = cl.elementwise_run("BinaryOp", {"a": a, "b": s}, out_dt, {"op": BINARY_OPS[name]})
    pieces = cl.layout_pieces(cl.SIZES)
    expect = np.concatenate([BINARY.reference(a[st:st + k], s[i:i + 1], name) for i, (st, k, _) in enumerate(pieces)])
    cl.assert_close(got, expect, exact=True, what=name)
    got2, _ = cl.elementwise_run("BinaryOp", {"a": s, "b": a}, out_dt, {"op": BINARY_OPS[name]})
    expect2 = np.concatenate([BINARY.reference(s[i:i + 1], a[st:st + k], name) for i, (st, k, _) in enumerate(pieces)])
    cl.assert_close(got2, expect2, exact=True, what=name)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_binary_in_place(dtype, rng, cl):
    n = sum(cl.SIZES)
    a = (rng.standard_normal(n) * 4).astype(dtype) if dtype != "int32" else rng.integers(-99, 99, n).astype(np.int32)
    b = (rng.standard_normal(n) * 4).astype(dtype) if dtype != "int32" else rng.integers(-99, 99, n).astype(np.int32)
    got, _ = cl.elementwise_run("BinaryOp", {"a": a, "b": b}, None, {"op": BINARY_OPS["add"]}, alias_out="a")
    cl.assert_close(got, BINARY.reference(a, b, "add"), exact=True)
    got, _ = cl.elementwise_run("BinaryOp", {"a": a, "b": b}, None, {"op": BINARY_OPS["mul"]}, alias_out="b")
    cl.assert_close(got, BINARY.reference(a, b, "mul"), exact=True)


def test_float16_rounds_once(cl):
    # 1 + 2**-11 is exactly half-way between two halves: the float32 sum rounds to even
    a = np.array([1.0, 1.0, 2048.0, 65504.0], np.float16)
    b = np.array([2.0 ** -11, 3 * 2.0 ** -11, 1.0, 16.0], np.float16)
    got, _ = cl.elementwise_run("BinaryOp", {"a": a, "b": b}, "float16", {"op": BINARY_OPS["add"]}, sizes=(4,))
    np.testing.assert_array_equal(got, np.array([1.0, 1.0 + 2.0 ** -9, 2048.0, np.inf], np.float16))


# -- cycles --------------------------------------------------------------------------------------


def cl_run_single(cl, codelet, arrays, params, tile=0):
    return cl.run_vertex(codelet, arrays, params, tile).cycles


@pytest.mark.parametrize("n", [1, 7, 64, 97, 1000])
@pytest.mark.parametrize("name,dtype", [("exp", "float32"), ("exp", "float16"), ("relu", "float16"),
                                        ("negate", "int32"), ("gelu", "float32"), ("swish", "float16"),
                                        ("isnan", "float32"), ("log1p", "float32")])
def test_unary_cycles_equal_cost_model(name, dtype, n, cl):
    x = np.ones(n, dtype)
    out_dt = "bool" if name == "isnan" else dtype
    cycles = cl_run_single(cl, "UnaryOp", {"in": x, "out": np.zeros(n, out_dt)}, {"op": UNARY_OPS[name]})
    t = ipu.element_type(dtype)
    assert cycles == int(unary_cycles(np.array([n]), name, t)[0])
    assert UNARY.supervisor  # tile cycles: the run costs exactly the vertex


def test_unary_cost_formula_by_hand():
    f32, f16 = ipu.FLOAT32, ipu.FLOAT16
    # UnaryOp1D: 11 + 9 + 6 x (base + loops). exp float32, 100 elements: ceil(100/6) = 17 per
    # worker, EXPONENT float (6 cycles per 2 elements): 9 loops -> 54; base 33.
    assert unary_cycles(100, "exp", f32) == 11 + 9 + 6 * (33 + 54)
    # relu half: (3, unroll 4): ceil(17/4) = 5 loops x 3 = 15; base 17
    assert unary_cycles(100, "relu", f16) == 11 + 9 + 6 * (17 + 15)
    # floor float: natural vector (2 per vector), 2 + 4 cycles per vector: ceil(17/2) = 9 -> 54
    assert unary_cycles(100, "floor", f32) == 11 + 9 + 6 * (17 + 54)
    # abs float: one element per loop, 1 + 4 cycles: 17 x 5 = 85
    assert unary_cycles(100, "abs", f32) == 11 + 9 + 6 * (17 + 85)
    # gelu float, 100 elements: 50 vectors, 9 per worker: 20 + (2 + 10 + 8 x 10 + 1 + 10) + 3
    assert nonlinearity_1d_cycles(100, "gelu", f32) == 9 + 6 * (20 + 103 + 3)
    # cost grows with the element count and transcendental ops cost more than simple ones
    assert unary_cycles(1000, "sin", f32) > unary_cycles(1000, "exp", f32) > unary_cycles(1000, "negate", f32)


def test_binary_cost_formula_by_hand():
    f32, f16, i32 = ipu.FLOAT32, ipu.FLOAT16, ipu.INT32
    # BinaryOp1D add float32, 120 elements: 20 per worker, 10 vectors x (1 + 2) -> 30; base 29
    assert binary_cycles(120, "add", f32, False) == 11 + 6 * (29 + 30)
    # BroadcastScalar1D mul half, 120: 20 per worker, 5 vectors x (1 + 1) -> 10; base 20
    assert binary_cycles(120, "mul", f16, True) == 11 + 6 * (20 + 10)
    # int add: 7 cycles per element: 20 x 7; base 26
    assert binary_cycles(120, "add", i32, False) == 11 + 6 * (26 + 140)
    # less float: 14 cycles per 4 elements: 5 loops -> 70
    assert binary_cycles(120, "less", f32, False) == 11 + 6 * (29 + 70)


@pytest.mark.parametrize("n", [1, 13, 200])
@pytest.mark.parametrize("name,dtype,bcast", [("add", "float32", False), ("add", "float16", True),
                                              ("div", "int32", False), ("less", "float32", False),
                                              ("max", "float16", True), ("logical_or", "bool", False)])
def test_binary_cycles_equal_cost_model(name, dtype, bcast, n, cl):
    a = np.ones(n, dtype)
    b = np.ones(1 if bcast else n, dtype)
    out_dt = "bool" if name in COMPARE else dtype
    cycles = cl_run_single(cl, "BinaryOp", {"a": a, "b": b, "out": np.zeros(n, out_dt)}, {"op": BINARY_OPS[name]})
    assert cycles == int(binary_cycles(np.array([n]), name, ipu.element_type(dtype), np.array([bcast and n > 1]))[0])


def test_supervisor_vertices_on_one_tile_run_one_after_another(cl):
    x = np.ones(300, np.float32)
    run = cl.run_vertices("UnaryOp", {"x": ("float32", x, 0), "y": ("float32", 300, 0)},
                          [(0, {"in": ("x", 0, 100), "out": ("y", 0, 100)}, {"op": UNARY_OPS["exp"]}),
                           (0, {"in": ("x", 100, 200), "out": ("y", 100, 200)}, {"op": UNARY_OPS["sqrt"]})])
    expect = unary_cycles(100, "exp", ipu.FLOAT32) + unary_cycles(200, "sqrt", ipu.FLOAT32)
    assert run.cycles == expect
    np.testing.assert_allclose(run.out["y"][:100], np.exp(1.0), rtol=1e-6)


# -- errors --------------------------------------------------------------------------------------


def _vertex(codelet, arrays, params):
    g = ipu.Graph(ipu.small_target(1))
    vs = {}
    for name, (dt, n) in arrays.items():
        v = g.add_variable(name, (n,), dt)
        g.set_tile_mapping(v, 0)
        vs[name] = v
    g.add_vertex(g.add_compute_set("cs"), codelet, 0, **vs, **params)


def test_errors():
    with pytest.raises(TypeError, match="out must be bool"):
        _vertex("UnaryOp", {"in": ("float32", 4), "out": ("float32", 4)}, {"op": UNARY_OPS["isnan"]})
    with pytest.raises(TypeError, match="in must be float32 or float16"):
        _vertex("UnaryOp", {"in": ("int32", 4), "out": ("int32", 4)}, {"op": UNARY_OPS["exp"]})
    with pytest.raises(TypeError, match="out must have in's type"):
        _vertex("UnaryOp", {"in": ("float32", 4), "out": ("float16", 4)}, {"op": UNARY_OPS["exp"]})
    with pytest.raises(ValueError, match="same number of elements"):
        _vertex("UnaryOp", {"in": ("float32", 4), "out": ("float32", 5)}, {"op": UNARY_OPS["exp"]})
    with pytest.raises(ValueError, match="op code 99"):
        _vertex("UnaryOp", {"in": ("float32", 4), "out": ("float32", 4)}, {"op": 99})
    with pytest.raises(TypeError, match="a is float32 but b is float16"):
        _vertex("BinaryOp", {"a": ("float32", 4), "b": ("float16", 4), "out": ("float32", 4)}, {"op": 0})
    with pytest.raises(ValueError, match="broadcast scalar"):
        _vertex("BinaryOp", {"a": ("float32", 4), "b": ("float32", 3), "out": ("float32", 4)}, {"op": 0})
    with pytest.raises(TypeError, match="out must be bool"):
        _vertex("BinaryOp", {"a": ("float32", 4), "b": ("float32", 4), "out": ("float32", 4)},
                {"op": BINARY_OPS["less"]})
    with pytest.raises(TypeError, match="inputs must be float32 or float16"):
        _vertex("BinaryOp", {"a": ("int32", 4), "b": ("int32", 4), "out": ("int32", 4)}, {"op": BINARY_OPS["atan2"]})
    with pytest.raises(TypeError, match="inputs must be float32 or float16"):
        _vertex("BinaryOp", {"a": ("uint8", 4), "b": ("uint8", 4), "out": ("uint8", 4)}, {"op": BINARY_OPS["atan2"]})


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "uint32"])
@pytest.mark.parametrize("name", ["add", "sub", "mul", "max", "min", "div"])
def test_binary_narrow_and_unsigned_integers_wrap(dtype, name, rng, cl):
    info = np.iinfo(dtype)
    n = sum(cl.SIZES)
    a = rng.integers(info.min, info.max, n, endpoint=True).astype(dtype)
    b = rng.integers(info.min, info.max, n, endpoint=True).astype(dtype)
    if name == "div":
        b[b == 0] = 1
    got, _ = cl.elementwise_run("BinaryOp", {"a": a, "b": b}, dtype, {"op": BINARY_OPS[name]})
    x, y = a.astype(np.int64), b.astype(np.int64)
    ops_ = {"add": lambda: x + y, "sub": lambda: x - y, "mul": lambda: x * y, "max": lambda: np.maximum(x, y),
            "min": lambda: np.minimum(x, y), "div": lambda: np.trunc(x / y).astype(np.int64)}
    want = ops_[name]().astype(dtype)
    np.testing.assert_array_equal(got, want)


def test_tanh_kernel_is_the_correctly_rounded_float32_tanh():
    """codelets/_tanh.py (tanh and gelu's tanh): float64 tanh rounded once to float32, over random
    bit patterns (every exponent), a fine grid over the range that matters and the edge cases."""
    from numba import njit

    from codelets._tanh import tanh32

    @njit(error_model="numpy")
    def run(x, out):
        for i in range(x.size):
            out[i] = tanh32(x[i])

    rng = np.random.default_rng(7)
    x = np.concatenate([
        rng.integers(0, 2 ** 32, 2_000_000, dtype=np.uint64).astype(np.uint32).view(np.float32),
        np.linspace(-11, 11, 1_000_001, dtype=np.float32),
        np.array([0.0, -0.0, np.inf, -np.inf, 1e-4, -1e-4, 9.999999, 10.0, 1e-45, -1e-45, np.nan], np.float32),
    ])
    got = np.empty_like(x)
    run(x, got)
    nan = np.isnan(x)
    assert np.isnan(got[nan]).all()
    with np.errstate(invalid="ignore"):
        expect = np.tanh(x[~nan].astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), expect.view(np.uint32))  # signed zeros too
