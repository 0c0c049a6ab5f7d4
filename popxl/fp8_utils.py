"""Host-side float8 helpers, as PopXL's ``popxl.fp8_utils``.

float8 host data is a NumPy array of structured dtype ``np.dtype([("float8_143", "u1")])`` (or
``float8_152``) holding the encoded bytes. The conversions use ml_dtypes (Graphcore's formats are
its float8_e4m3fnuz / float8_e5m2fnuz, see codelets/float8.py), with PopXL's semantics:

- ``host_pow2scale_cast_to_fp8(src, dtype, log2_scale, nan_on_overflow)``: cast(src * 2**log2_scale),
  rounding to nearest even; values beyond the format become NaN, or the largest finite value of
  their sign when ``nan_on_overflow=False``;
- ``host_pow2scale_cast_from_fp8(src, dtype, log2_scale)``: cast(src, dtype) * 2**log2_scale;
- ``host_fp8_mse_scale(src, dtype)``: the log2 scale whose cast loses least (lowest mean squared
  error), from a histogram of the data's exponents (the method PopXL describes);
  ``host_fp8_mse_scale_pb`` measures the error of every candidate exactly instead.
"""
from __future__ import annotations

from collections import namedtuple
from typing import Optional

import numpy as np

from codelets import float8 as _f8
from popxl import dtypes

__all__ = ["FpDef", "find_exponential_range", "log_histogram", "CandidateConfig", "calculate_metric_mse",
           "calculate_candidate_metric", "host_fp8_mse_scale", "host_pow2scale_cast_to_fp8",
           "host_pow2scale_cast_from_fp8", "host_fp8_mse_scale_pb"]

max_scaling_bias = 31
min_scaling_bias = -31

# A floating point format: exponent bits, mantissa bits, exponent bias, whether subnormals count,
# whether a whole exponent code is taken by infinities / NaNs.
FpDef = namedtuple("FpDef", ["num_exp_bits", "num_mantissa_bits", "fix_exponent_bias", "include_denorm",
                             "has_nans"])

ieee_fp32_no_denorms = FpDef(8, 23, 127, False, True)
ieee_fp16_denorms = FpDef(5, 10, 15, True, True)
float8_143_def = FpDef(4, 3, 8, True, False)
float8_152_def = FpDef(5, 2, 16, True, False)


def _torch_to_numpy(x):
    if hasattr(x, "detach") and hasattr(x, "numpy") and not isinstance(x, np.ndarray):
        return x.detach().cpu().numpy()
    return x


def _float8_dtype(dtype, what: str) -> "dtypes.dtype":
    try:
        dt = dtypes.dtype.as_dtype(dtype) if dtype is not None else None
    except ValueError:
        dt = None
    if dt not in dtypes.FLOAT8_DTYPES:
        raise RuntimeError(f"{what}: dtype {dtype} is not supported; use popxl.float8_143 or popxl.float8_152.")
    return dt


def _check_log2_scale(log2_scale, what: str) -> int:
    if isinstance(log2_scale, (bool, np.bool_)) or not isinstance(log2_scale, (int, np.integer)):
        raise TypeError(f"{what}: log2_scale must be an int, got {log2_scale!r}.")
    lo, hi = _f8.LOG2_SCALE_RANGE
    if not lo <= int(log2_scale) < hi:
        raise RuntimeError(f"{what}: log2_scale {int(log2_scale)} is outside the supported range [{lo}, {hi}).")
    return int(log2_scale)


def host_pow2scale_cast_to_fp8(src, dtype: Optional["dtypes.dtype"] = None, log2_scale: int = 0,
                               nan_on_overflow: bool = True) -> np.ndarray:
    """``cast(src * 2**log2_scale, dtype)`` on the host: float16/32/64 data (NumPy array, sequence or
    torch tensor) to a float8 array (structured dtype of the encoded bytes).

    Args:
        src: the data.
        dtype: ``popxl.float8_143`` or ``popxl.float8_152``.
        log2_scale: an int in [-32, 32).
        nan_on_overflow: values beyond the format's range become NaN if True, else the largest
            finite value of their sign.
    Raises:
        RuntimeError: for another dtype, a scale out of range or source data that is not float.
    """
    what = "host_pow2scale_cast_to_fp8"
    dt = _float8_dtype(dtype, what)
    s = _check_log2_scale(log2_scale, what)
    src = _torch_to_numpy(src)
    arr = np.asarray(src)
    if arr.dtype not in (np.float16, np.float32, np.float64):
        if arr.dtype.kind in "iub":
            arr = arr.astype(np.float64)  # integer data: exact in float64 (up to 2**53)
        else:
            raise RuntimeError(f"{what}: src.dtype {arr.dtype} is not supported; give float16, float32 or "
                               "float64 data.")
    with np.errstate(over="ignore", invalid="ignore"):
        codes = _f8.host_encode(arr, dt.name, s, bool(nan_on_overflow))
    return np.ascontiguousarray(codes.reshape(arr.shape)).view(dt.as_numpy())


def host_pow2scale_cast_from_fp8(src: np.ndarray, dtype: Optional["dtypes.dtype"] = None,
                                 log2_scale: int = 0) -> np.ndarray:
    """``cast(src, dtype) * 2**log2_scale`` on the host: a float8 array (structured dtype) to
    float16, float32 or float64 (default float32)."""
    what = "host_pow2scale_cast_from_fp8"
    src = np.asarray(_torch_to_numpy(src))
    if src.dtype not in (dtypes.np_dtype_float8_143, dtypes.np_dtype_float8_152):
        raise RuntimeError(f"{what}: src.dtype {src.dtype} is not supported; give a float8 array "
                           "(popxl.dtypes.np_dtype_float8_143 or np_dtype_float8_152), as "
                           "host_pow2scale_cast_to_fp8 and Session.get_tensor_data return.")
    out = dtypes.float32 if dtype is None else dtypes.dtype.as_dtype(dtype)
    if out not in (dtypes.float16, dtypes.float32, dtypes.float64):
        raise RuntimeError(f"{what}: dtype {out} is not supported; use popxl.float16, float32 or float64.")
    s = _check_log2_scale(log2_scale, what)
    fmt = dtypes.dtype.as_dtype(src.dtype).name  # the float8 format of the structured dtype
    with np.errstate(over="ignore"):
        values = _f8.host_decode(np.ascontiguousarray(src).view(np.uint8), fmt, s)
    return values.astype(out.as_numpy()).reshape(src.shape)


# ------------------------------------------------------------------------------------------------
# choosing a scale


def find_exponential_range(fp_def: FpDef):
    """(lowest, highest) power-of-two exponent the format represents without a scale (the lowest
    counts subnormals when the format has them)."""
    lo = 1 - fp_def.fix_exponent_bias
    hi = (1 << fp_def.num_exp_bits) - 1 - int(fp_def.has_nans) - fp_def.fix_exponent_bias
    if fp_def.include_denorm:
        lo -= fp_def.num_mantissa_bits
    return lo, hi


def log_histogram(src: np.ndarray, ftype: FpDef):
    """Counts of |src| per power-of-two bin of the source format's range: (histogram, limits), with
    limits = [2**lo, ..., 2**(hi - 1)], histogram[0] the values below limits[0] (underflow) and
    histogram[-1] those above limits[-1] (overflow)."""
    lo, hi = find_exponential_range(ftype)
    limits = [2.0 ** i for i in range(lo, hi)]
    a = np.abs(np.asarray(src, np.float64).reshape(-1))
    hist = np.zeros(len(limits) + 1)
    under = a < limits[0]
    over = a > limits[-1]
    hist[0] += under.sum()
    hist[-1] += over.sum()
    mid = a[~under & ~over]
    if mid.size:
        _, e = np.frexp(mid)
        np.add.at(hist, e - lo, 1)
    return hist, limits


class CandidateConfig:
    """The float8 format a histogram is fitted to, and which source exponents its scales reach."""

    def __init__(self, format, src_ftype: FpDef, dest_ftype: FpDef, src_type):
        self.format = format
        self.exponent_size = dest_ftype.num_exp_bits
        self.mantissa_size = dest_ftype.num_mantissa_bits
        self.fix_exponent_bias = dest_ftype.fix_exponent_bias
        src_mant = ieee_fp32_no_denorms.num_mantissa_bits if np.dtype(src_type) == np.float32 \
            else ieee_fp16_denorms.num_mantissa_bits
        # relative squared error of rounding away the mantissa bits the format lacks
        self.quantisation_error = 2.0 ** (-2.0 * (src_mant - self.mantissa_size))
        src_lo, src_hi = find_exponential_range(src_ftype)
        dst_lo, dst_hi = find_exponential_range(dest_ftype)
        self.format_span = dst_hi - dst_lo + 1
        self.min_src_exp_index = max(dst_lo + min_scaling_bias - src_lo, 0)
        self.max_src_exp_index = min(dst_lo + max_scaling_bias - src_lo, src_hi - src_lo)
        self.num_exp_src = self.max_src_exp_index - self.min_src_exp_index + 1


def calculate_metric_mse(histogram, limits, src_bias_starting_indices, candidate: CandidateConfig):
    """(lowest estimated MSE, its scaling bias): per candidate window of format_span bins, values
    below it flush to zero, inside it they lose their extra mantissa bits, above it they clip to
    its top. Among equal errors the middle bias is taken."""
    limits = np.asarray(limits)
    hist = np.asarray(histogram)[1:]
    span = candidate.format_span
    errors = []
    for index, start in enumerate(src_bias_starting_indices):
        start = int(start)
        top = limits[min(start + span, len(limits)) - 1]
        mse = (limits[0] / 2) ** 2 * (start > 0)
        mse += float(np.sum(limits[:start] ** 2 * hist[:start]))
        inside = slice(start, min(start + span, len(limits)))
        mse += float(np.sum(limits[inside] ** 2 * hist[inside])) * candidate.quantisation_error
        above = slice(min(start + span, len(limits)), len(limits))
        mse += float(np.sum((top - limits[above]) ** 2 * hist[above]))
        errors.append((mse, index + min_scaling_bias))
    best = min(e for e, _ in errors)
    ties = sorted(b for e, b in errors if e == best)
    return best, ties[len(ties) // 2]


def calculate_candidate_metric(hist_norm, limits, candidate: CandidateConfig, metric_type=None):
    if metric_type != "MSE":
        raise RuntimeError("Only MSE metric is supported.")
    starts = np.arange(candidate.min_src_exp_index, candidate.min_src_exp_index + candidate.num_exp_src)
    return calculate_metric_mse(hist_norm, limits, starts, candidate)


def _float_source(src, what: str) -> np.ndarray:
    src = np.asarray(_torch_to_numpy(src))
    if src.dtype not in (np.float16, np.float32):
        raise RuntimeError(f"{what}: src.dtype {src.dtype} is not supported; give float16 or float32 data.")
    return np.ascontiguousarray(src).reshape(-1)


def host_fp8_mse_scale(src, dtype: Optional["dtypes.dtype"] = None) -> int:
    """The log2 scale s for which ``host_pow2scale_cast_to_fp8(src, dtype, s)`` should lose least,
    estimated from a histogram of the data's exponents: the format's window of exponents is slid
    over the histogram and each position's MSE estimated (underflow to zero, rounding inside,
    clipping above); the best position gives the scale (PopXL's method)."""
    what = "host_fp8_mse_scale"
    dt = _float8_dtype(dtype if dtype is not None else dtypes.float8_143, what)
    x = _float_source(src, what)
    dest = float8_143_def if dt == dtypes.float8_143 else float8_152_def
    hist, limits = log_histogram(x, ieee_fp32_no_denorms)
    total = hist.sum()
    hist_norm = hist / total if total else hist
    candidate = CandidateConfig(dt, ieee_fp32_no_denorms, dest, x.dtype)
    _, bias = calculate_candidate_metric(hist_norm, limits, candidate, "MSE")
    # the window starting at source exponent index i holds values of 2**(src_lo + i); the scale
    # that maps that window onto the format's exponents is the negated bias
    return int(np.clip(-bias, -max_scaling_bias, max_scaling_bias))


def host_fp8_mse_scale_pb(src, dtype: Optional["dtypes.dtype"] = None) -> int:
    """The log2 scale in [-31, 31] whose float8 cast of ``src`` has the lowest mean squared error,
    measured exactly for every candidate (values beyond the format saturate; ties take the middle
    scale)."""
    what = "host_fp8_mse_scale_pb"
    dt = _float8_dtype(dtype, what)
    x = _float_source(src, what).astype(np.float64)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return 0
    mse = []
    for s in range(min_scaling_bias, max_scaling_bias + 1):
        codes = _f8.host_encode(x, dt.name, s, False)
        back = _f8.host_decode(codes, dt.name, -s)
        mse.append(float(np.mean((back - x) ** 2)))
    errs = np.asarray(mse)
    best = np.flatnonzero(errs == errs.min())
    return int(best[len(best) // 2] + min_scaling_bias)
