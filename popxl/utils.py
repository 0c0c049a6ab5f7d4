"""Host-side helpers: converting user data to NumPy and printing tables."""
from typing import TYPE_CHECKING, Optional, Sequence

import numpy as np

from popxl import dtypes

if TYPE_CHECKING:
    from popxl.tensor import HostScalarTensor

__all__ = ["to_numpy", "table_to_string", "host_pow2scale_then_cast", "host_cast_then_pow2scale"]


def to_numpy(x: "HostScalarTensor", dtype: Optional["dtypes.dtype"] = None, downcast: bool = True,
             copy: bool = True, log2_scale: int = None, nan_on_overflow: bool = None) -> np.ndarray:
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
        raise NotImplementedError(f"popxl.{dtype.name} host data: float8 arrives later.")
    if log2_scale is not None:
        raise RuntimeError("`log2_scale` is only supported for the float8 dtypes "
                           "popxl.float8_143 and popxl.float8_152.")
    if nan_on_overflow is not None:
        raise RuntimeError("`nan_on_overflow` is only supported for the float8 dtypes "
                           "popxl.float8_143 and popxl.float8_152.")
    if hasattr(x, "detach") and hasattr(x, "numpy") and not isinstance(x, np.ndarray):
        x = x.detach().cpu().numpy()  # torch.Tensor
    from popxl.tensor import Tensor
    if isinstance(x, Tensor):
        raise TypeError(f"Expected host data (NumPy array, scalar or sequence), got the popxl tensor {x}.")

    if dtype is not None:
        arr = np.array(x, dtype=dtype.as_numpy(), order="C", copy=True if copy else None)
    else:
        arr = np.array(x, order="C", copy=True if copy else None)
        if downcast and arr.dtype in dtypes.downcast_np_dtypes:
            arr = arr.astype(dtypes.downcast_np_dtypes[arr.dtype], order="C")
    if arr.dtype == object:
        raise TypeError(f"Cannot convert value of type {type(x)} to a numeric array: {x!r}")
    if not arr.flags.c_contiguous:
        arr = np.array(arr, order="C")
    return arr


def table_to_string(rows: Sequence[Sequence], delimiter: str = " | ", header: bool = True) -> str:
    """Render rows as a text table with aligned columns.

    If ``header`` the first row is separated from the others by a line of dashes.
    """
    rows = [[str(c) for c in r] for r in rows]
    if not rows:
        return ""
    ncols = max(len(r) for r in rows)
    rows = [r + [""] * (ncols - len(r)) for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(ncols)]
    lines = [delimiter.join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    if header and len(lines) > 0:
        lines.insert(1, "-" * (sum(widths) + len(delimiter) * (ncols - 1)))
    return "\n".join(lines)


def host_pow2scale_then_cast(src: np.ndarray, dtype: "dtypes.dtype" = None, log2_scale: int = 0,
                             nan_on_overflow: bool = True):
    """``cast(src * 2 ** log2_scale, dtype)`` on the host, for float8 data."""
    raise NotImplementedError("popxl.utils.host_pow2scale_then_cast: float8 arrives later.")


def host_cast_then_pow2scale(src: np.ndarray, dtype: "dtypes.dtype" = None, log2_scale: int = 0):
    """``cast(src, dtype) * 2 ** log2_scale`` on the host, for float8 data."""
    raise NotImplementedError("popxl.utils.host_cast_then_pow2scale: float8 arrives later.")
