"""MatMulBlockPow2Scaled (the float8 AMP block): products against NumPy through ml_dtypes, every
format pair, k = 0, the scale (wrapping or stopping the program), and the cost model against the
published float8 peak (C600: 560 TFLOPS float8, 280 TFLOPS float16)."""
import ml_dtypes
import numpy as np
import pytest

import ipu
from codelets.float8 import DECODE, F143, F152
from codelets.matmul import matmul_block_cycles

FMTS = {"float8_143": F143, "float8_152": F152}


def _run(cl, a_codes, b_codes, fa, fb, m, k, n, scale, check=0):
    a = a_codes.view(FMTS[fa].numpy)
    b = b_codes.view(FMTS[fb].numpy)
    variables = {"a": (a.dtype, a, 0), "b": (b.dtype, b, 0), "s": (np.int32, np.array([scale], np.int32), 0),
                 "out": (np.float32, m * n, 0)}
    return cl.run_vertices("MatMulBlockPow2Scaled", variables, [
        (0, {"a": ("a", 0, m * k), "b": ("b", 0, k * n), "log2_scale": ("s", 0, 1), "out": ("out", 0, m * n)},
         {"m": m, "k": k, "n": n, "check_range": check})])


@pytest.mark.parametrize("fa", list(FMTS))
@pytest.mark.parametrize("fb", list(FMTS))
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 13, 5), (16, 64, 17), (3, 1, 4)])
def test_block_products(fa, fb, m, k, n, rng, cl):
    # codes of finite values only (NaN propagates as NaN, checked below)
    a = rng.integers(0, 256, m * k).astype(np.uint8)
    b = rng.integers(0, 256, k * n).astype(np.uint8)
    a[a == 0x80] = 0
    b[b == 0x80] = 0
    A = a.view(FMTS[fa].ml_dtype).astype(np.float64).reshape(m, k)  # ml_dtypes decodes
    B = b.view(FMTS[fb].ml_dtype).astype(np.float64).reshape(k, n)
    np.testing.assert_array_equal(A.reshape(-1), DECODE[fa][a])
    for s in (-5, 0, 3):
        got = _run(cl, a, b, fa, fb, m, k, n, s).out["out"].reshape(m, n)
        ref = A @ B * 2.0 ** s
        # float32 accumulation: within a few float32 ulps of the sum of the products' magnitudes
        bound = 2.0 ** -20 * (np.abs(A) @ np.abs(B)) * 2.0 ** s
        assert np.all(np.abs(got - ref) <= bound), np.max(np.abs(got - ref) - bound)


def test_nan_code_propagates(cl):
    a = np.array([0x80, 0x40], np.uint8)  # NaN, 1.0
    b = np.array([0x40, 0x40], np.uint8)
    out = _run(cl, a, b, "float8_143", "float8_143", 1, 2, 1, 0).out["out"]
    assert np.isnan(out).all()


def test_scale_range(cl):
    a = np.full(4, 0x40, np.uint8)
    b = np.full(4, 0x40, np.uint8)
    wrapped = _run(cl, a, b, "float8_143", "float8_143", 2, 2, 2, 40).out["out"]
    np.testing.assert_array_equal(wrapped, np.full(4, 2.0 * 2.0 ** -24, np.float32))  # 40 wraps to -24
    with pytest.raises(ipu.ApplicationRuntimeError, match="out of range"):
        _run(cl, a, b, "float8_143", "float8_143", 2, 2, 2, 40, check=1)


def test_cost_model_reaches_the_float8_peak():
    """Large blocks approach 256 FLOP/cycle/tile, twice the half AMP's 128: the C600's 560 / 280
    TFLOPS (float8 / float16) over 1472 tiles at ~1.49 GHz."""
    t = ipu.GC200
    m, k, n = 1200, 1024, 16
    f8 = 2 * m * k * n / int(matmul_block_cycles(m, k, n, False, False, t, float8=True))
    f16 = 2 * m * k * n / int(matmul_block_cycles(m, k, n, False, True, t))
    assert 0.9 * 256 < f8 <= 256 and 0.9 * 128 < f16 <= 128
    assert f8 / f16 == pytest.approx(2.0, rel=0.05)
    assert 256 * 1472 * 1.486e9 == pytest.approx(560e12, rel=0.01)


def test_vertex_cycles_follow_the_model(cl):
    m, k, n = 24, 96, 16
    a = np.full(m * k, 0x40, np.uint8)
    b = np.full(k * n, 0x40, np.uint8)
    run = _run(cl, a, b, "float8_143", "float8_152", m, k, n, 0)
    want = int(matmul_block_cycles(m, k, n, False, False, ipu.small_target(2), float8=True)) + 6
    assert int(run.step.tile_cycles[0]) == want
    np.testing.assert_array_equal(run.out["out"], np.full(m * n, float(k), np.float32))
    assert ml_dtypes.float8_e4m3fnuz(1.0).view(np.uint8) == 0x40
