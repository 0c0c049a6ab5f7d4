"""Matrix multiplication with NumPy ``matmul`` shape rules."""
from typing import Optional

from popxl import dtypes
from popxl.context import op_debug_context
from popxl.tensor import Tensor

from ._op_builder import single
from ._shapes import check_float, check_float8, check_log2_scale, check_same_dtype, coerce_operands, matmul_shape

__all__ = ["matmul", "matmul_pow2scaled"]


@op_debug_context
def matmul(lhs: Tensor, rhs: Tensor, available_memory_proportion: Optional[float] = None,
           output_type: Optional[dtypes.dtype] = None, partials_type: Optional[dtypes.dtype] = None) -> Tensor:
    """Matrix product of ``lhs`` and ``rhs`` (NumPy rules: 1-D operands, broadcast batch axes).

    Args:
        output_type: dtype of the result (default: the inputs' dtype).
        partials_type: float32 (default) or float16 accumulation.
    """
    lhs, rhs = coerce_operands(lhs, rhs, what="matmul operands")
    dt = check_same_dtype("matmul", lhs, rhs)
    check_float("matmul", lhs)
    shape = matmul_shape(lhs.shape, rhs.shape)
    partials = dtypes.float32 if partials_type is None else dtypes.dtype.as_dtype(partials_type)
    if partials not in (dtypes.float16, dtypes.float32):
        raise ValueError(f"matmul: partials_type {partials} is not valid, it must be float16 or float32.")
    out_dtype = dt if output_type is None else dtypes.dtype.as_dtype(output_type)
    attrs = {"available_memory_proportion": available_memory_proportion, "output_type": out_dtype,
             "partials_type": partials}
    return single("matmul", [lhs, rhs], shape, out_dtype, attrs, input_names=["lhs", "rhs"])


@op_debug_context
def matmul_pow2scaled(lhs: Tensor, rhs: Tensor, log2_scale: Tensor,
                      available_memory_proportion: Optional[float] = None) -> Tensor:
    """``matmul(lhs, rhs) * 2 ** log2_scale`` of two float8 tensors, a float16 result.

    Args:
        lhs, rhs: float8_143 or float8_152 tensors (the formats may differ), NumPy matmul shapes.
        log2_scale: a scalar int32 tensor, in [-32, 32) when the program runs.
    Raises:
        TypeError: if an operand is not float8 or log2_scale is not int32.
        ValueError: if log2_scale is not a scalar, or the shapes do not multiply.
    """
    op = "matmul_pow2scaled"
    check_float8(op, lhs, "lhs")
    check_float8(op, rhs, "rhs")
    check_log2_scale(op, log2_scale)
    shape = matmul_shape(lhs.shape, rhs.shape)
    attrs = {"available_memory_proportion": available_memory_proportion, "output_type": dtypes.float16,
             "partials_type": dtypes.float16}
    return single(op, [lhs, rhs, log2_scale], shape, dtypes.float16, attrs,
                  input_names=["lhs", "rhs", "log2_scale"])
