"""A float32 tanh that LLVM can vectorise, for the element-wise kernels (tanh, gelu).

`math.tanh` on a float32 calls libm's scalar `tanhf` (~15 ns an element here: most of an MNIST
gelu step's element-wise time). `tanh32` works in float64 with only arithmetic, selects and an
integer shift, so a loop of it becomes SIMD code:

    tanh(x) = sign(x) (e - 1) / (e + 1),  e = exp(2 min(|x|, 10))
    exp(t)  = 2^j exp(r),  j = round(t / ln 2),  r = t - j ln 2 in [-ln2/2, ln2/2]

with exp(r) by its Taylor series to r^13 (truncation below 2e-16 of exp(r)). The float64 result
is within ~1e-12 relative of tanh(x) (above |x| = 1e-4, where (e - 1) loses at most 13 of float64's
digits), so rounding it to float32 gives the correctly rounded tanh except when tanh(x) lies within
~1e-12 of a rounding boundary. Below |x| = 1e-4, tanh(x) rounds to x itself (it differs from x
by x^3 / 3, under a sixth of x's half-ulp). From |x| = 10 on, tanh(x) rounds to +-1. NaN stays NaN.
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["tanh32"]

_LN2 = 0.6931471805599453
_INV_LN2 = 1.4426950408889634
_TINY = 1e-4  # below this |x|, tanh(x) rounds to x in float32
_BIG = 10.0  # from this |x| on, tanh(x) rounds to +-1 in float32


@njit(inline="always", cache=True)
def _exp_reduced(t):
    """exp(t) for 0 <= t <= 2 * _BIG, in float64 arithmetic only (no libm call)."""
    j = np.floor(t * _INV_LN2 + 0.5)
    r = t - j * _LN2
    p = 1.0 / 6227020800.0  # 1 / 13!
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    return p * np.float64(np.int64(1) << np.int64(j))  # 2^j exactly: 0 <= j <= 29


@njit(inline="always", cache=True)
def tanh32(x):
    """tanh of a float32, as a float32 (see the module docstring for the accuracy)."""
    d = np.float64(x)
    a = abs(d)
    t = 2.0 * (a if a < _BIG else _BIG)  # NaN takes the else side; it is put back below
    e = _exp_reduced(t)
    y = (e - 1.0) / (e + 1.0)
    y = d if a < _TINY else (y if d >= 0.0 else -y)
    return np.float32(y if d == d else d)
