"""Shape rules shared by the op families: broadcasting, axes, reductions, matmul, windows."""
from typing import Iterable, Optional, Sequence, Tuple, Union

from popxl import dtypes
from popxl.tensor import Tensor, constant
from ._op_builder import not_a_tensor

Shape = Tuple[int, ...]


def broadcast_shapes(*shapes: Sequence[int], what: str = "operands") -> Shape:
    """NumPy broadcasting of ``shapes``; ValueError if they are incompatible."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        dims = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0}
        dims.discard(1)
        if len(dims) > 1:
            raise ValueError(f"Shapes {', '.join(str(tuple(s)) for s in shapes)} of the {what} cannot be "
                             "broadcast together (NumPy broadcasting rules).")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    """``axis`` in ``[-rank, rank)`` as a non-negative axis; ValueError otherwise."""
    if isinstance(axis, bool) or not isinstance(axis, int):
        try:
            axis = int(axis)
        except (TypeError, ValueError):
            raise TypeError(f"{what} must be an integer, not {axis!r}.") from None
    if not -rank <= axis < rank:
        raise ValueError(f"{what} {axis} is out of range for a tensor of rank {rank}.")
    return axis + rank if axis < 0 else axis


def normalize_axes(axis: Optional[Union[int, Iterable[int]]], rank: int, what: str = "axis") -> Shape:
    """Sorted non-negative axes; ``None`` means every axis."""
    if axis is None:
        return tuple(range(rank))
    axes = [axis] if isinstance(axis, int) else list(axis)
    out = sorted(normalize_axis(a, rank, what) for a in axes)
    if len(set(out)) != len(out):
        raise ValueError(f"Repeated {what} in {axis}.")
    return tuple(out)


def reduced_shape(shape: Shape, axes: Shape, keepdims: bool) -> Shape:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def matmul_shape(a: Shape, b: Shape) -> Shape:
    """Output shape of ``numpy.matmul`` (1-D operands, batch broadcasting); ValueError if invalid."""
    if len(a) == 0 or len(b) == 0:
        raise ValueError(f"matmul operands must have rank >= 1, got shapes {a} and {b}.")
    a2 = (1,) + tuple(a) if len(a) == 1 else tuple(a)
    b2 = tuple(b) + (1,) if len(b) == 1 else tuple(b)
    if a2[-1] != b2[-2]:
        raise ValueError(f"matmul: the contracting dimensions of shapes {a} and {b} differ "
                         f"({a2[-1]} != {b2[-2]}).")
    batch = broadcast_shapes(a2[:-2], b2[:-2], what="matmul batch dimensions")
    rows = () if len(a) == 1 else (a2[-2],)
    cols = () if len(b) == 1 else (b2[-1],)
    return batch + rows + cols


def as_tensor(value, like: Tensor, what: str = "operand") -> Tensor:
    """``value`` if it is a tensor, else a constant of it in the current graph with ``like``'s dtype."""
    if isinstance(value, Tensor):
        return value
    try:
        return constant(value, like.dtype)
    except (TypeError, ValueError) as e:
        raise TypeError(f"The {what} {value!r} is neither a Tensor nor convertible to one: {e}") from e


def coerce_operands(*values, what: str = "operands") -> Tuple[Tensor, ...]:
    """Turn the non-tensor values into constants of the dtype of the first tensor among ``values``."""
    like = next((v for v in values if isinstance(v, Tensor)), None)
    if like is None:
        raise TypeError(f"At least one of the {what} must be a popxl Tensor, got "
                        f"{', '.join(type(v).__name__ for v in values)}.")
    return tuple(as_tensor(v, like) for v in values)


def check_same_dtype(op: str, *ts: Tensor) -> dtypes.dtype:
    dt = ts[0].dtype
    for t in ts[1:]:
        if t.dtype != dt:
            raise TypeError(f"{op}: the inputs must have the same dtype, got "
                            f"{', '.join(f'{x.id}: {x.dtype.name}' for x in ts)}. Use ops.cast first.")
    return dt


def float8_unsupported(op: str, t: Tensor) -> TypeError:
    return TypeError(
        f"{op} does not take float8 tensors ({t.id} is {t.dtype.name}): float8 data only goes into "
        "ops.matmul_pow2scaled, ops.conv_pow2scaled, ops.conv_transpose_pow2scaled and "
        "ops.pow2scale_cast_from_fp8; convert it with ops.pow2scale_cast_from_fp8 first.")


def check_float(op: str, t: Tensor) -> None:
    if not t.dtype.is_floating_point:
        raise TypeError(f"{op} needs a floating point input, got {t.id} of dtype {t.dtype.name}.")
    if t.dtype in dtypes.FLOAT8_DTYPES:
        raise float8_unsupported(op, t)


def check_numeric(op: str, t: Tensor) -> None:
    if t.dtype == dtypes.bool:
        raise TypeError(f"{op} needs a numeric input, got the bool tensor {t.id}.")
    if t.dtype in dtypes.FLOAT8_DTYPES:
        raise float8_unsupported(op, t)


def check_float8(op: str, t: Tensor, what: str = "t") -> None:
    if not isinstance(t, Tensor):
        raise not_a_tensor(what, t, op)
    if t.dtype not in dtypes.FLOAT8_DTYPES:
        raise TypeError(f"{op}: the {what} {t.id} must be popxl.float8_143 or popxl.float8_152, not "
                        f"{t.dtype.name}. Convert float16/float32 data with ops.pow2scale_cast_to_fp8.")


def check_log2_scale(op: str, log2_scale: Tensor) -> None:
    """A log2 scale is a scalar int32 tensor (ValueError for another shape, TypeError otherwise)."""
    if not isinstance(log2_scale, Tensor):
        raise TypeError(f"{op}: log2_scale must be a scalar popxl.int32 Tensor, got {type(log2_scale).__name__}: "
                        f"{log2_scale!r}. Use popxl.constant(s, popxl.int32) or a variable.")
    if log2_scale.rank > 0:
        raise ValueError(f"{op}: log2_scale must be a scalar tensor, got {log2_scale.id} of shape "
                         f"{log2_scale.shape}.")
    if log2_scale.dtype != dtypes.int32:
        raise TypeError(f"{op}: log2_scale must be of type popxl.int32, got {log2_scale.id} of dtype "
                        f"{log2_scale.dtype.name}.")


def check_int(op: str, t: Tensor, what: str = "indices") -> None:
    if not t.dtype.is_int:
        raise TypeError(f"{op}: {what} must have an integer dtype, got {t.id} of dtype {t.dtype.name}.")


def check_seed(op: str, seed: Tensor) -> None:
    if not isinstance(seed, Tensor):
        raise TypeError(f"{op}: the seed must be a Tensor of shape (2,) and dtype uint32, got {seed!r}.")
    if seed.shape != (2,) or seed.dtype != dtypes.uint32:
        raise ValueError(f"{op}: the seed tensor must have shape (2,) and dtype uint32. Provided {seed}.")


def int_tuple(values, n: Optional[int] = None, what: str = "value") -> Shape:
    if isinstance(values, int):
        values = (values,) * (n or 1)
    out = tuple(int(v) for v in values)
    if n is not None and len(out) != n:
        raise ValueError(f"{what} must have {n} entries, got {out}.")
    return out


def window_output_shape(in_spatial: Shape, kernel: Shape, strides: Shape, pads: Shape, dilations: Shape,
                        auto_pad: str = "not_set", ceil_mode: bool = False,
                        what: str = "window") -> Tuple[Shape, Shape]:
    """Spatial output shape and resolved pads (begins then ends) of a conv / pool window."""
    n = len(in_spatial)
    if auto_pad in ("same_upper", "same_lower"):
        out = tuple(-(-i // s) for i, s in zip(in_spatial, strides))
        total = [max(0, (o - 1) * s + (k - 1) * d + 1 - i)
                 for o, s, k, d, i in zip(out, strides, kernel, dilations, in_spatial)]
        small = [p // 2 for p in total]
        big = [p - p // 2 for p in total]
        pads = tuple(small + big) if auto_pad == "same_upper" else tuple(big + small)
        return out, pads
    if auto_pad == "valid":
        pads = (0,) * (2 * n)
    elif auto_pad != "not_set":
        raise ValueError(f"{what}: pad type must be 'not_set', 'same_upper', 'same_lower' or 'valid', "
                         f"not {auto_pad!r}.")
    dims = []
    for i in range(n):
        span = in_spatial[i] + pads[i] + pads[n + i] - dilations[i] * (kernel[i] - 1) - 1
        if span < 0:
            raise ValueError(f"{what}: the window (kernel {kernel}, dilation {dilations}) is larger than the "
                             f"padded input {in_spatial} (pads {pads}).")
        dims.append((-(-span // strides[i]) if ceil_mode else span // strides[i]) + 1)
    return tuple(dims), tuple(pads)
