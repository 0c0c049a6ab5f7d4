"""Element-wise popxl ops through Session on a small simulated IPU, against NumPy."""
import numpy as np
import pytest

import popxl.ops as ops

from helpers import run_popxl

RNG = np.random.default_rng(1234)
SHAPES = [(1,), (7,), (13, 5), (2, 3, 97)]


def _gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def _erf(x):
    from math import erf
    return np.vectorize(erf)(x.astype(np.float64))


UNARY = {
    "exp": (ops.exp, np.exp, (-3, 3)),
    "log": (ops.log, np.log, (0.1, 5)),
    "sqrt": (ops.sqrt, np.sqrt, (0, 9)),
    "relu": (ops.relu, lambda x: np.maximum(x, 0), (-2, 2)),
    "gelu": (ops.gelu, _gelu, (-3, 3)),
    "geluerf": (ops.geluerf, lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))), (-3, 3)),
    "tanh": (ops.tanh, np.tanh, (-3, 3)),
    "sin": (ops.sin, np.sin, (-3, 3)),
    "cos": (ops.cos, np.cos, (-3, 3)),
    "abs": (ops.abs, np.abs, (-3, 3)),
    "negate": (ops.negate, np.negative, (-3, 3)),
    "floor": (ops.floor, np.floor, (-3, 3)),
    "ceil": (ops.ceil, np.ceil, (-3, 3)),
    "sign": (ops.sign, np.sign, (-3, 3)),
    "swish": (ops.swish, lambda x: x / (1 + np.exp(-x)), (-3, 3)),
    # ONNX ops beyond PopXL's API, each one op table entry (docs/codelets.md, "Adding an op code to UnaryOp")
    "sigmoid": (ops.sigmoid, lambda x: 1 / (1 + np.exp(-x)), (-6, 6)),
    "reciprocal": (ops.reciprocal, lambda x: 1 / x, (0.25, 4)),
    "erf": (ops.erf, _erf, (-3, 3)),
}


def _tol(dtype):
    return dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_unary(name, dtype):
    fn, ref, (lo, hi) = UNARY[name]
    for shape in SHAPES[:3]:
        x = RNG.uniform(lo, hi, shape).astype(dtype)
        out, _ = run_popxl(fn, [x])
        want = ref(x.astype(np.float32)).astype(dtype)
        np.testing.assert_allclose(out.astype(np.float32), want.astype(np.float32), **_tol(dtype))
        assert out.dtype == dtype and out.shape == x.shape


BINARY = {
    "add": (ops.add, np.add), "sub": (ops.sub, np.subtract), "mul": (ops.mul, np.multiply),
    "div": (ops.div, np.divide), "pow": (ops.pow, np.power),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shapes", [((7,), (7,)), ((13, 5), (5,)), ((2, 3, 97), (2, 1, 97)), ((1,), (4, 3))])
def test_binary_broadcast(name, dtype, shapes):
    fn, ref = BINARY[name]
    a = RNG.uniform(0.5, 2, shapes[0]).astype(dtype)
    b = RNG.uniform(0.5, 2, shapes[1]).astype(dtype)
    out, _ = run_popxl(fn, [a, b])
    want = ref(a.astype(np.float32), b.astype(np.float32)).astype(dtype)
    np.testing.assert_allclose(out.astype(np.float32), want.astype(np.float32), **_tol(dtype))


@pytest.mark.parametrize("name", ["add", "sub", "mul"])
def test_int32_arithmetic_wraps(name):
    fn, ref = BINARY[name]
    a = RNG.integers(-2**31, 2**31 - 1, (11,), dtype=np.int32)
    b = RNG.integers(-2**31, 2**31 - 1, (11,), dtype=np.int32)
    out, _ = run_popxl(fn, [a, b])
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, ref(a, b))


def test_int32_division_truncates_toward_zero():
    a = np.array([7, -7, 7, -7, 0], np.int32)
    b = np.array([2, 2, -2, -2, 3], np.int32)
    out, _ = run_popxl(ops.div, [a, b])
    np.testing.assert_array_equal(out, [3, -3, -3, 3, 0])


def test_comparisons_and_logic():
    a = RNG.uniform(-1, 1, (9,)).astype(np.float32)
    b = RNG.uniform(-1, 1, (9,)).astype(np.float32)
    outs, _ = run_popxl(lambda x, y: (ops.equal(x, x), ops.greater(x, y), x < y,
                                      ops.logical_and(ops.greater(x, y), ops.greater(x, x * 0.0)),
                                      ops.logical_not(ops.greater(x, y))), [a, b])
    np.testing.assert_array_equal(outs[0], np.ones(9, bool))
    np.testing.assert_array_equal(outs[1], a > b)
    np.testing.assert_array_equal(outs[2], a < b)
    np.testing.assert_array_equal(outs[3], (a > b) & (a > 0))
    np.testing.assert_array_equal(outs[4], ~(a > b))


def test_onnx_comparisons_and_minimum():
    a = RNG.uniform(-1, 1, (5, 9)).astype(np.float32)
    b = np.where(RNG.random((5, 9)) < 0.3, a, RNG.uniform(-1, 1, (5, 9))).astype(np.float32)
    outs, _ = run_popxl(lambda x, y: (ops.less(x, y), ops.not_equal(x, y), ops.minimum(x, y),
                                      ops.minimum(ops.cast(x, __import__("popxl").int32), 0)), [a, b])
    np.testing.assert_array_equal(outs[0], a < b)
    np.testing.assert_array_equal(outs[1], a != b)
    np.testing.assert_array_equal(outs[2], np.minimum(a, b))
    np.testing.assert_array_equal(outs[3], np.minimum(a.astype(np.int32), 0))


def test_where_clip_maximum_cast_scaled_add():
    a = RNG.uniform(-2, 2, (6, 7)).astype(np.float32)
    b = RNG.uniform(-2, 2, (6, 7)).astype(np.float32)
    outs, _ = run_popxl(lambda x, y: (ops.where(ops.greater(x, y), x, y), ops.clip(x, -0.5, 0.5),
                                      ops.maximum(x, y, x * 0.5), ops.cast(x, __import__("popxl").int32),
                                      ops.scaled_add(x, y, 0.5, 2.0)), [a, b])
    np.testing.assert_allclose(outs[0], np.where(a > b, a, b))
    np.testing.assert_allclose(outs[1], np.clip(a, -0.5, 0.5))
    np.testing.assert_allclose(outs[2], np.maximum(np.maximum(a, b), a * 0.5))
    np.testing.assert_array_equal(outs[3], a.astype(np.int32))
    np.testing.assert_allclose(outs[4], 0.5 * a + 2 * b, rtol=1e-6)


def test_in_place_ops_on_views():
    a = RNG.uniform(-2, 2, (4, 6)).astype(np.float32)
    b = RNG.uniform(-2, 2, (2, 6)).astype(np.float32)

    def build(x, y):
        v = ops.slice_(x, start=1, stop=3, axis=0)  # rows 1..2 as a view of x
        ops.add_(v, y)
        ops.relu_(x)
        return x

    out, _ = run_popxl(build, [a, b])
    want = a.copy()
    want[1:3] += b
    np.testing.assert_allclose(out, np.maximum(want, 0), rtol=1e-6)


def test_increment_mod():
    a = np.array([0, 1, 5, 9], np.int32)
    out, _ = run_popxl(lambda x: ops.increment_mod(x, 3, 10), [a])
    np.testing.assert_array_equal(out, (a + 3) % 10)


def test_row_broadcast_is_not_materialised():
    # x - max(x, axis=1, keepdims): the row value goes to each vertex once, not once per element
    x = RNG.normal(size=(37, 100)).astype(np.float32)
    out, sess = run_popxl(lambda t: (t - ops.max(t, axis=1, keepdims=True), ops.softmax(t, axis=1)), [x])
    np.testing.assert_allclose(out[0], x - x.max(1, keepdims=True), rtol=1e-6)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(out[1], e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    copies = [s for s in sess.executable.steps if s.kind == "exchange" and "broadcast" in s.name]
    assert copies and max(s.bytes_moved for s in copies) <= 4 * 2 * 37 * 8  # ~ one float per vertex


@pytest.mark.parametrize("seed", range(12))
def test_broadcast_fuzz(seed):
    """Random shapes with size-1 trailing (and missing leading) axes on either side, so both the
    copied-broadcast and the one-element-per-vertex paths are taken."""
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 4))
    shape = tuple(int(rng.choice([1, 2, 3, 7, 33, 40, 97])) for _ in range(rank))
    bshape = list(shape)
    for i in range(rank - int(rng.integers(0, rank + 1)), rank):
        bshape[i] = 1
    if rng.random() < 0.3 and len(bshape) > 1:
        bshape = bshape[1:]
    name = str(rng.choice(sorted(BINARY)))
    dtype = [np.float32, np.float16][seed % 2]
    a = rng.uniform(0.5, 2, shape).astype(dtype)
    b = rng.uniform(0.5, 2, tuple(bshape)).astype(dtype)
    fn, ref = BINARY[name]
    swap = bool(seed % 3 == 0)
    out, _ = run_popxl((lambda x, y: fn(y, x)) if swap else fn, [a, b])
    x32, y32 = a.astype(np.float32), b.astype(np.float32)
    want = (ref(y32, x32) if swap else ref(x32, y32)).astype(dtype)
    np.testing.assert_allclose(out.astype(np.float32), want.astype(np.float32), **_tol(dtype))


@pytest.mark.parametrize("x_dtype,y_dtype", [(np.float32, np.float16), (np.float16, np.float32)])
@pytest.mark.parametrize("scales", ["floats", "tensors"])
@pytest.mark.parametrize("inplace", [False, True])
def test_scaled_add_mixed_precision(x_dtype, y_dtype, scales, inplace):
    """PopART's ScaledAddOp takes X and Y of float32 and float16 in either order (poplibs' mixed
    scaledAddTo); the result has X's type and is computed in float32."""
    import popxl

    for shape in [(1,), (13, 5), (2, 3, 97)]:
        x = RNG.uniform(-2, 2, shape).astype(x_dtype)
        y = RNG.uniform(-2, 2, shape).astype(y_dtype)
        y.flat[0] = 1e-4  # below float16's step near 2 (a float16 X rounds it away only once)

        def build(xt, yt):
            if scales == "floats":
                a, b = 0.5, -1.25
            else:
                a, b = popxl.constant(0.5, popxl.float32), popxl.constant(-1.25, popxl.float16)
            fn = ops.scaled_add_ if inplace else ops.scaled_add
            return fn(xt, yt, a, b)

        out, _ = run_popxl(build, [x, y])
        want = (np.float32(0.5) * x.astype(np.float32) - np.float32(1.25) * y.astype(np.float32)).astype(x_dtype)
        assert out.dtype == x_dtype and out.shape == shape
        np.testing.assert_allclose(out.astype(np.float32), want.astype(np.float32),
                                   rtol=1e-6 if x_dtype == np.float32 else 1e-3, atol=1e-6)
