"""Checked conversions of host data into a stream's or tensor's type.

PopXL lets a session downcast 64-bit inputs (`downcast_inputs=True`): int64 -> int32,
uint64 -> uint32, float64 -> float32. The cast is allowed, losing values is not: an integer that
does not fit, or a finite float that would become infinite, is refused with the stream's name and
the first value that does not fit (rounding a float64 to the nearest float32 is the cast itself
and is not an error).
"""
from __future__ import annotations

import numpy as np


def _first(mask: np.ndarray, arr: np.ndarray) -> str:
    flat = np.flatnonzero(mask.reshape(-1))
    i = int(flat[0])
    where = np.unravel_index(i, arr.shape) if arr.ndim else ()
    return f"{arr.reshape(-1)[i].item()!r} at index {tuple(int(k) for k in where)} ({flat.size} value(s) do not fit)"


def checked_downcast(arr: np.ndarray, dtype, what: str) -> np.ndarray:
    """`arr` cast to `dtype`, or ValueError naming `what` and the first value that does not fit."""
    dtype = np.dtype(dtype)
    if arr.dtype.kind in "iu" and dtype.kind in "iu":
        info = np.iinfo(dtype)
        bad = (arr < info.min) | (arr > info.max)
        if bad.any():
            raise ValueError(
                f"{what}: {arr.dtype} data does not fit the {dtype} it is downcast to: first value "
                f"{_first(bad, arr)}; {dtype} holds {info.min}..{info.max}. Pass {dtype} data, or scale the values.")
    elif arr.dtype.kind == "f" and dtype.kind == "f":
        with np.errstate(over="ignore", invalid="ignore"):
            out = arr.astype(dtype)
        bad = np.isfinite(arr) & ~np.isfinite(out)
        if bad.any():
            raise ValueError(
                f"{what}: {arr.dtype} data overflows the {dtype} it is downcast to: first value "
                f"{_first(bad, arr)} would become inf; {dtype} holds at most {float(np.finfo(dtype).max):.6g}.")
        return out
    return arr.astype(dtype)


def integer_dims(shape, what: str) -> tuple:
    """`shape` as a tuple of ints; a dimension that is not an integer (2.5, "3") is refused rather
    than truncated. An int alone is a 1-D shape."""
    import operator

    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        dims = list(shape)
    except TypeError:
        raise TypeError(f"{what}: the shape must be a sequence of integers, got {shape!r}") from None
    out = []
    for d in dims:
        if isinstance(d, bool):
            raise TypeError(f"{what}: shape {tuple(dims)} has the boolean {d} as a dimension; dimensions are integers")
        try:
            out.append(operator.index(d))
        except TypeError:
            raise TypeError(f"{what}: shape {tuple(dims)} has {d!r} ({type(d).__name__}) as a dimension; "
                            f"dimensions must be integers (a float is not truncated)") from None
    return tuple(out)
