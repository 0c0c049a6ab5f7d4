"""The float8 casts: Pow2ScaleThenCast (float16/float32 -> float8) and CastThenPow2Scale (float8 ->
float16/float32), poplibs' popops::cast to and from QUARTER with a metadata scale.

Fields `in`, `log2_scale` (one int32 element on the vertex's tile, read when the vertex runs) and
`out`; int params `nan_on_overflow` (to float8) and `check_range`.

- to float8: out = cast(in x 2**log2_scale) (codelets.float8.encode: round to nearest even,
  subnormals kept, overflow to the NaN code or, with nan_on_overflow = 0, saturated);
- from float8: out = decode(in) x 2**log2_scale, rounded to out's type (nearest even; float16
  overflow gives inf, as any float32 -> float16 conversion).

The scale lives in the 6-bit signed field of the quarter metadata (poplar QuarterFloat.hpp,
unpackMetadata: 6-bit scale, sign-extended), so a value outside [-32, 32) wraps as the hardware
would; with `check_range` (PopART's session option throwIfLog2ScaleTensorNotInRange, which adds
createAssertLog2ScaleInRangeProg before the cast) the vertex stops the program with
ipu.ApplicationRuntimeError instead.

Cost: poplibs' castWorkerCycles (lib/popops/PerformanceEstimation.cpp, SDK 3.0) has no QUARTER
case in its public version; the IPU21 conversions are assembly loops over 4 one-byte elements
like its 8-bit <-> half paths (CastToInt8.S / CastFromInt8.S), so we use those figures
(`codelets.cast.cast_worker_cycles` with an 8-bit type in place of QUARTER) plus, for float32,
the float <-> half step of each 4-element atom (2 cycles: f32v2tof16 twice per 4 elements, or
f16v2tof32 twice) and 6 cycles to read the scale and set the metadata register ($FP_SCL).
Vertices are MultiVertex (all six workers): 19 supervisor + 6 x (23 + worker cycles), as Cast1D.
"""
from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

import ipu
from ipu import IN, OUT, Codelet, Field

from ._costs import ceil_div
from ._kernels import from_f32, to_f32
from .cast import cast_worker_cycles
from .float8 import DECODE_143, DECODE_152, FORMATS, encode, format_of

_FLOATS = (ipu.FLOAT32, ipu.FLOAT16)
_FLOAT8 = (ipu.FLOAT8_143, ipu.FLOAT8_152)
LOG2_SCALE_MIN, LOG2_SCALE_MAX = -32, 32  # [min, max)
SCALE_SETUP_CYCLES = 6  # read the int32 scale, pack the metadata, put $FP_SCL (assumption)


class Log2ScaleOutOfRange(ipu.ApplicationRuntimeError):
    """A log2 scale tensor held a value outside [-32, 32) while throwIfLog2ScaleTensorNotInRange
    was set."""


def _float8_name(nbtype) -> str:
    if isinstance(nbtype, types.Record) and len(nbtype.fields) == 1:
        name = next(iter(nbtype.fields))
        if name in FORMATS:
            return name
    raise TypeError(f"{nbtype} is not a float8 view")


def fmt_params(view):  # pragma: no cover - replaced by the Numba overload
    """(exponent_bits, mantissa_bits, bias) of a float8 view's format."""
    raise NotImplementedError


@overload(fmt_params)
def _ov_fmt_params(view):
    f = FORMATS[_float8_name(view.dtype)]
    e, m, b = f.exponent_bits, f.mantissa_bits, f.bias
    return lambda view: (e, m, b)


def decode_table(view):  # pragma: no cover - replaced by the Numba overload
    """The 256 float32 values of a float8 view's format."""
    raise NotImplementedError


@overload(decode_table)
def _ov_decode_table(view):
    if _float8_name(view.dtype) == "float8_143":
        return lambda view: DECODE_143
    return lambda view: DECODE_152


@njit(cache=True)
def effective_scale(s, check):
    """The scale the hardware uses: the 6-bit signed metadata field (wraps), or an error."""
    if s < LOG2_SCALE_MIN or s >= LOG2_SCALE_MAX:
        if check:
            raise Log2ScaleOutOfRange("log2 scale tensor value out of range [-32, 32): ", s)
        s = ((s + 32) & 63) - 32
    return s


@njit(cache=True)
def _to_float8_kernel(views, off, cnt, fp, ip):
    x = views[F.in_]
    sv = views[F.log2_scale]
    o = views[F.out]
    eb, mb, bias = fmt_params(o)
    for v in range(off.shape[0]):
        n = cnt[v, F.out]
        s = effective_scale(np.int64(sv[off[v, F.log2_scale]]), ip[v, TO_IP.check_range] != 0)
        nan = ip[v, TO_IP.nan_on_overflow] != 0
        t = to_f32(x[off[v, F.in_]:off[v, F.in_] + n], n)
        codes = o[off[v, F.out]:off[v, F.out] + n].view(np.uint8)
        for i in range(n):
            codes[i] = encode(t[i], s, eb, mb, bias, nan)


@njit(cache=True)
def _from_float8_kernel(views, off, cnt, fp, ip):
    x = views[F.in_]
    sv = views[F.log2_scale]
    o = views[F.out]
    table = decode_table(x)
    for v in range(off.shape[0]):
        n = cnt[v, F.out]
        s = effective_scale(np.int64(sv[off[v, F.log2_scale]]), ip[v, FROM_IP.check_range] != 0)
        codes = x[off[v, F.in_]:off[v, F.in_] + n].view(np.uint8)
        t = np.empty(n, np.float32)
        f = np.float64(2.0) ** s
        for i in range(n):
            t[i] = np.float32(np.float64(table[codes[i]]) * f)  # exact unless float32 over/underflows
        from_f32(t, o[off[v, F.out]:off[v, F.out] + n], n)


def float8_cast_worker_cycles(n, t_float: ipu.ElementType) -> np.ndarray:
    """Worker cycles converting n elements between float8 and t_float (either direction; see the
    module docstring for the source)."""
    n = np.asarray(n, np.int64)
    base = cast_worker_cycles(n, ipu.FLOAT16, ipu.UINT8)  # the HALF <-> 8-bit assembly loop
    extra = 2 * ceil_div(n, 4) if t_float == ipu.FLOAT32 else 0
    return base + extra + SCALE_SETUP_CYCLES


def float8_cast_cycles(n, t_float: ipu.ElementType, workers: int = 6) -> np.ndarray:
    """Tile cycles of one float8 cast vertex over n elements (the Cast1D split, see cast_cycles)."""
    n = np.asarray(n, np.int64)
    most = np.minimum(n, 4 * ceil_div(ceil_div(n, 4), workers))
    return 19 + workers * (23 + float8_cast_worker_cycles(most, t_float))


class _Float8Cast(Codelet):
    fields = (Field("in", IN), Field("log2_scale", IN), Field("out", OUT))
    supervisor = True
    takes_float8 = True

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt, fp, ip)
        if np.any(t.count.in_ != t.count.out):
            raise ValueError(f"{self.name}: in and out must have the same number of elements")
        if np.any(t.count.log2_scale != 1):
            raise ValueError(f"{self.name}: log2_scale must be one int32 element")

    def code_bytes(self, types):
        # popops quarter cast assembly plus supervisor, the order of the Cast1D code (assumption)
        return 384


@ipu.register
class Pow2ScaleThenCast(_Float8Cast):
    """out (float8) = cast(in x 2**log2_scale); params nan_on_overflow, check_range."""

    name = "Pow2ScaleThenCast"
    int_params = ("nan_on_overflow", "check_range")
    allowed_types = (_FLOATS, (ipu.INT32,), _FLOAT8)

    def kernel(self):
        return _to_float8_kernel

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt, fp, ip)
        return float8_cast_cycles(t.count.out, t.type.in_, target.worker_contexts)

    def reference(self, x, log2_scale, out_dtype, nan_on_overflow=True):
        from .float8 import host_encode
        x = np.asarray(x)
        codes = host_encode(x.astype(np.float32) if x.dtype == np.float16 else x, out_dtype, log2_scale,
                            nan_on_overflow)
        return codes.view(format_of(out_dtype).numpy)


@ipu.register
class CastThenPow2Scale(_Float8Cast):
    """out (float16/float32) = decode(in) x 2**log2_scale; param check_range."""

    name = "CastThenPow2Scale"
    int_params = ("check_range",)
    allowed_types = (_FLOAT8, (ipu.INT32,), _FLOATS)

    def kernel(self):
        return _from_float8_kernel

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt, fp, ip)
        return float8_cast_cycles(t.count.out, t.type.out, target.worker_contexts)

    def reference(self, codes, log2_scale, out_dtype):
        from .float8 import host_decode
        codes = np.asarray(codes)
        fmt = format_of(codes.dtype)
        with np.errstate(over="ignore"):
            return host_decode(codes.view(np.uint8), fmt, log2_scale).astype(np.float32).astype(out_dtype)


# the kernels' columns, by name (both casts have the same fields)
F, TO_IP, FROM_IP = _Float8Cast.F, Pow2ScaleThenCast.IP, CastThenPow2Scale.IP
