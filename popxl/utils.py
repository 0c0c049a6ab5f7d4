"""Host-side helpers: converting user data to NumPy and printing tables."""
from typing import TYPE_CHECKING, Optional, Sequence

import numpy as np

from popxl import dtypes

if TYPE_CHECKING:
    from popxl.tensor import HostScalarTensor

__all__ = ["to_numpy", "table_to_string", "host_pow2scale_then_cast", "host_cast_then_pow2scale",  # noqa: F822
           "host_pow2scale_cast_to_fp8", "host_pow2scale_cast_from_fp8", "np_dtype_float8_143",
           "np_dtype_float8_152"]  # the two *_fp8 names come from __getattr__ below

np_dtype_float8_143 = dtypes.np_dtype_float8_143
np_dtype_float8_152 = dtypes.np_dtype_float8_152


def __getattr__(name):  # popxl.utils.host_pow2scale_cast_to_fp8 / _from_fp8, as PopXL's tests import them
    if name in ("host_pow2scale_cast_to_fp8", "host_pow2scale_cast_from_fp8"):
        from popxl import fp8_utils
        return getattr(fp8_utils, name)
    raise AttributeError(f"module 'popxl.utils' has no attribute {name!r}")


def to_numpy(x: "HostScalarTensor", dtype: Optional["dtypes.dtype"] = None, downcast: bool = True,
             copy: bool = True, log2_scale: Optional[int] = None, nan_on_overflow: Optional[bool] = None) -> np.ndarray:
    """Convert host data (NumPy array, scalar, nested sequence, torch tensor) to a C-ordered array.

    Args:
        x: the data.
        dtype: the popxl dtype to convert to. If None NumPy infers it.
        downcast: if True and ``dtype`` is None, 64-bit floats/ints become their 32-bit types.
        copy: if True the result never shares memory with ``x``.
        log2_scale, nan_on_overflow: only meaningful for float8 dtypes.
    """
    if dtype is not None:
        dtype = dtypes.dtype.as_dtype(dtype)
    if dtype in dtypes.FLOAT8_DTYPES:
        return _float8_to_numpy(x, dtype, copy, log2_scale, nan_on_overflow)
    if isinstance(x, np.ndarray) and x.dtype in (dtypes.np_dtype_float8_143, dtypes.np_dtype_float8_152):
        if dtype is None and log2_scale is None and nan_on_overflow is None:
            return np.array(x, order="C", copy=True if copy else None)  # already encoded float8
        raise TypeError(f"The data is float8 ({dtypes.dtype.as_dtype(x.dtype).name}) but dtype={dtype}: decode it "
                        "first with popxl.fp8_utils.host_pow2scale_cast_from_fp8.")
    if log2_scale is not None:
        raise RuntimeError("`log2_scale` is only supported for the float8 dtypes "
                           "popxl.float8_143 and popxl.float8_152.")
    if nan_on_overflow is not None:
        raise RuntimeError("`nan_on_overflow` is only supported for the float8 dtypes "
                           "popxl.float8_143 and popxl.float8_152.")
    detach = getattr(x, "detach", None)  # a torch.Tensor
    if detach is not None and hasattr(x, "numpy") and not isinstance(x, np.ndarray):
        x = detach().cpu().numpy()
    from popxl.tensor import Tensor
    if isinstance(x, Tensor):
        raise TypeError(f"Expected host data (NumPy array, scalar or sequence), got the popxl tensor {x}.")

    from popxl._casts import checked_downcast

    if dtype is not None:
        src = np.asarray(x)
        target = np.dtype(dtype.as_numpy())
        if src.dtype != target and src.dtype.kind == target.kind and src.dtype.kind in "iu" \
                and src.dtype.itemsize > target.itemsize:
            # an integer narrowing the user asked for: allowed, but a value that does not fit is refused
            # rather than wrapped (floats narrow as IEEE does: out of range is inf)
            arr = np.array(checked_downcast(src, target, f"host data converted to {dtype.name}"), order="C")
        else:
            arr = np.array(x, dtype=target, order="C", copy=True if copy else None)
    else:
        arr = np.array(x, order="C", copy=True if copy else None)
        if downcast and arr.dtype in dtypes.downcast_np_dtypes:
            narrow = dtypes.downcast_np_dtypes[arr.dtype]
            arr = np.array(checked_downcast(arr, narrow, f"64-bit host data downcast to {narrow}"), order="C")
    if arr.dtype == object:
        raise TypeError(f"Cannot convert value of type {type(x)} to a numeric array: {x!r}")
    if not arr.flags.c_contiguous:
        arr = np.array(arr, order="C")
    return arr


def _float8_to_numpy(x, dtype: "dtypes.dtype", copy: bool, log2_scale, nan_on_overflow) -> np.ndarray:
    """float8 host data: already encoded bytes of this format are kept, anything else is converted
    with host_pow2scale_cast_to_fp8 (default scale 0, NaN on overflow)."""
    from popxl.fp8_utils import host_pow2scale_cast_to_fp8

    if hasattr(x, "detach") and hasattr(x, "numpy") and not isinstance(x, np.ndarray):
        x = x.detach().cpu().numpy()
    arr = np.asarray(x)
    if arr.dtype == dtype.as_numpy():
        if log2_scale not in (None, 0):
            raise RuntimeError(f"The data is already {dtype.name}: log2_scale={log2_scale} cannot be applied to it.")
        return np.array(arr, order="C", copy=True if copy else None)
    if arr.dtype in (dtypes.np_dtype_float8_143, dtypes.np_dtype_float8_152):
        raise TypeError(f"The data is {dtypes.dtype.as_dtype(arr.dtype).name} but dtype is {dtype.name}: decode it "
                        "with popxl.fp8_utils.host_pow2scale_cast_from_fp8 first.")
    return host_pow2scale_cast_to_fp8(arr, dtype, 0 if log2_scale is None else log2_scale,
                                      True if nan_on_overflow is None else nan_on_overflow)


def table_to_string(rows: Sequence[Sequence], delimiter: str = " | ", header: bool = True) -> str:
    """Render rows as a text table with aligned columns.

    If ``header`` the first row is separated from the others by a line of dashes.
    """
    cells = [[str(c) for c in r] for r in rows]
    if not cells:
        return ""
    ncols = max(len(r) for r in cells)
    cells = [r + [""] * (ncols - len(r)) for r in cells]
    widths = [max(len(r[i]) for r in cells) for i in range(ncols)]
    lines = [delimiter.join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    if header and len(lines) > 0:
        lines.insert(1, "-" * (sum(widths) + len(delimiter) * (ncols - 1)))
    return "\n".join(lines)


def host_pow2scale_then_cast(src: np.ndarray, dtype: Optional["dtypes.dtype"] = None, log2_scale: int = 0,
                             nan_on_overflow: bool = True):
    """``cast(src * 2 ** log2_scale, dtype)`` on the host, for float8 data (the 3.1 name of
    ``popxl.fp8_utils.host_pow2scale_cast_to_fp8``)."""
    from popxl.fp8_utils import host_pow2scale_cast_to_fp8
    return host_pow2scale_cast_to_fp8(src, dtype, log2_scale, nan_on_overflow)


def host_cast_then_pow2scale(src: np.ndarray, dtype: Optional["dtypes.dtype"] = None, log2_scale: int = 0):
    """``cast(src, dtype) * 2 ** log2_scale`` on the host, for float8 data (the 3.1 name of
    ``popxl.fp8_utils.host_pow2scale_cast_from_fp8``)."""
    from popxl.fp8_utils import host_pow2scale_cast_from_fp8
    return host_pow2scale_cast_from_fp8(src, dtype, log2_scale)


def _to_device_info(device_type: str, num_ipus: int = 1, use_popdist: bool = False):
    """PopXL's helper: the device (popart.DeviceInfo) a Session of `device_type` compiles for
    ("ipu_hw": an offline device of the simulated system; entering a session acquires one)."""
    from ._devices import to_device_info
    return to_device_info(device_type, num_ipus)
