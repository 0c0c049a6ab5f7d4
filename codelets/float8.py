"""The IPU's two float8 formats and their conversions, for kernels and host code.

Graphcore's 1-4-3 and 1-5-2 formats (poplar QUARTER, PopXL float8_143 / float8_152): a sign bit,
4 or 5 exponent bits and 3 or 2 mantissa bits, exponent biases 8 and 16, subnormals, no
infinities, and one NaN code, 0x80 (the bit pattern of negative zero, so zero is unsigned). These
are exactly ml_dtypes' float8_e4m3fnuz and float8_e5m2fnuz:

- PopXL's own float8 helpers describe the formats as FpDef(4, 3, bias 8) and FpDef(5, 2, bias 16),
  with denormals and without a reserved all-ones NaN exponent (graphcore/popart,
  python/popxl/python_files/fp8_utils.py, `float8_143_def` / `float8_152_def`);
- LLVM's APFloat added Float8E4M3FNUZ (bias 8) and Float8E5M2FNUZ (bias 16) for "the 8-bit floats
  implemented in Graphcore hardware" (the IPU21 Tile Vertex ISA 1.3.1), NaN = 0x80 and no
  negative zero (reviews.llvm.org D141863); ml_dtypes implements those two APFloat types.

`check_ml_dtypes_agree` verifies the equivalence at import time of the tests (bias, max, smallest
subnormal and NaN code from ml_dtypes' finfo).

Host conversion and the references use ml_dtypes. The device kernels (Numba) do their own
rounding, `encode`: scale by 2**log2_scale exactly (in float64), round to nearest even at the
format's precision (subnormals included), then handle overflow: the NaN code, or the largest
finite code of the value's sign when saturating. NaN stays NaN; anything that rounds to zero is
the (unsigned) zero code. The tests check it against ml_dtypes bit for bit. Decoding is a
256-entry table per format (`DECODE`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np
from numba import njit

NAN_CODE = 0x80


@dataclass(frozen=True)
class Float8Format:
    name: str            # the element type's name (float8_143 / float8_152)
    exponent_bits: int
    mantissa_bits: int
    bias: int
    ml_dtype: type       # ml_dtypes' scalar type of the same format

    @property
    def numpy(self) -> np.dtype:
        """The host encoding: a structured dtype of one uint8 field named after the format."""
        return np.dtype([(self.name, np.uint8)])

    @property
    def max(self) -> float:
        return math.ldexp(2.0 - 2.0 ** -self.mantissa_bits, (1 << self.exponent_bits) - 1 - self.bias)

    @property
    def min_exponent(self) -> int:
        """Unbiased exponent of the smallest normal number."""
        return 1 - self.bias

    @property
    def smallest_subnormal(self) -> float:
        return math.ldexp(1.0, self.min_exponent - self.mantissa_bits)


F143 = Float8Format("float8_143", 4, 3, 8, ml_dtypes.float8_e4m3fnuz)
F152 = Float8Format("float8_152", 5, 2, 16, ml_dtypes.float8_e5m2fnuz)
FORMATS = {F143.name: F143, F152.name: F152}


def check_ml_dtypes_agree() -> None:
    """Raise AssertionError if ml_dtypes' types differ from the formats described above."""
    for f in FORMATS.values():
        fi = ml_dtypes.finfo(f.ml_dtype)
        assert float(fi.max) == f.max, (f.name, float(fi.max), f.max)
        assert float(fi.smallest_subnormal) == f.smallest_subnormal, f.name
        assert int(fi.nexp) == f.exponent_bits and int(fi.nmant) == f.mantissa_bits, f.name
        assert int(fi.minexp) == f.min_exponent, f.name
        nan = np.array([NAN_CODE], np.uint8).view(f.ml_dtype).astype(np.float32)
        assert np.isnan(nan).all(), f.name


def format_of(x) -> Float8Format:
    """The format of an element type, dtype name or host float8 dtype."""
    name = getattr(x, "name", x)
    if isinstance(x, np.dtype):
        name = x.names[0] if x.names else str(x)
    try:
        return FORMATS[str(name)]
    except KeyError:
        raise TypeError(f"{x!r} is not a float8 type; use float8_143 or float8_152") from None


def _decode_table(f: Float8Format) -> np.ndarray:
    return np.arange(256, dtype=np.uint8).view(f.ml_dtype).astype(np.float32)


DECODE = {name: _decode_table(f) for name, f in FORMATS.items()}
DECODE_143 = DECODE["float8_143"]
DECODE_152 = DECODE["float8_152"]


# ------------------------------------------------------------------------------------------------
# the device rounding (Numba), checked against ml_dtypes by the tests


@njit(cache=True)
def encode(x, log2_scale, exponent_bits, mantissa_bits, bias, nan_on_overflow):
    """The float8 code of x * 2**log2_scale (x a float32 or float64 number).

    Rounds to nearest even; subnormals kept; overflow gives the NaN code, or the largest finite
    code of x's sign when nan_on_overflow is False; NaN gives the NaN code; zero is unsigned."""
    y = np.float64(x)
    if y != y:
        return np.uint8(NAN_CODE)
    neg = y < 0.0
    a = abs(y)
    max_field = (1 << exponent_bits) - 1
    max_code = np.uint8((max_field << mantissa_bits) | ((1 << mantissa_bits) - 1))
    if a == np.inf:
        if nan_on_overflow:
            return np.uint8(NAN_CODE)
        return np.uint8(max_code | 0x80) if neg else max_code
    a = math.ldexp(a, log2_scale)  # exact: a power of two times a float32/float64 value
    if a == 0.0:
        return np.uint8(0)
    m, ex = math.frexp(a)  # a = m * 2**ex, m in [0.5, 1)
    e = ex - 1
    emin = 1 - bias
    if e < emin:
        e = emin  # subnormal range: the quantum is that of the smallest normals
    n = np.rint(math.ldexp(a, mantissa_bits - e))  # the value in quanta, rounded to nearest even
    if n == 0.0:
        return np.uint8(0)
    n_int = np.int64(n)
    if n_int >= (2 << mantissa_bits):  # rounding carried into the next binade
        n_int >>= 1
        e += 1
    if n_int < (1 << mantissa_bits):  # subnormal (only possible at e == emin)
        field = 0
        mant = n_int
    else:
        field = e + bias
        mant = n_int - (1 << mantissa_bits)
    if field > max_field:
        if nan_on_overflow:
            return np.uint8(NAN_CODE)
        return np.uint8(max_code | 0x80) if neg else max_code
    code = np.uint8((field << mantissa_bits) | mant)
    if neg:
        code = np.uint8(code | 0x80)
    return code


@njit(cache=True)
def encode_array(x, log2_scale, exponent_bits, mantissa_bits, bias, nan_on_overflow, out):
    """out[i] = encode(x[i], ...) for a float32 or float64 array x and a uint8 array out."""
    for i in range(x.shape[0]):
        out[i] = encode(x[i], log2_scale, exponent_bits, mantissa_bits, bias, nan_on_overflow)


def device_encode(x: np.ndarray, fmt, log2_scale: int = 0, nan_on_overflow: bool = True) -> np.ndarray:
    """The device kernels' rounding over a host array (codes as uint8), for tests and tools."""
    f = format_of(fmt)
    x = np.ascontiguousarray(np.asarray(x).reshape(-1))
    if x.dtype == np.float16:
        x = x.astype(np.float32)  # exact
    out = np.empty(x.size, np.uint8)
    encode_array(x, int(log2_scale), f.exponent_bits, f.mantissa_bits, f.bias, bool(nan_on_overflow), out)
    return out


# ------------------------------------------------------------------------------------------------
# host conversion through ml_dtypes (PopXL's fp8_utils semantics)

LOG2_SCALE_RANGE = (-32, 32)  # [-32, 32): the 6-bit signed scale of the quarter metadata


def host_encode(src: np.ndarray, fmt, log2_scale: int = 0, nan_on_overflow: bool = True) -> np.ndarray:
    """uint8 codes of cast(src * 2**log2_scale) (ml_dtypes' round to nearest even); values beyond
    the format's range become the NaN code, or the largest finite value of their sign when
    nan_on_overflow is False."""
    f = format_of(fmt)
    y = np.asarray(src, np.float64) * math.ldexp(1.0, int(log2_scale))
    if not nan_on_overflow:
        y = np.clip(y, -f.max, f.max)  # NaN passes through clip unchanged
    return y.astype(f.ml_dtype).view(np.uint8)


def host_decode(codes: np.ndarray, fmt, log2_scale: int = 0) -> np.ndarray:
    """float64 values of uint8 codes times 2**log2_scale (exact)."""
    f = format_of(fmt)
    v = np.asarray(codes, np.uint8).view(f.ml_dtype).astype(np.float64)
    return v * math.ldexp(1.0, int(log2_scale))
