"""Helpers shared by the gradient rules (all build ops in the current graph: the gradient graph)."""
from typing import List, Optional, Sequence, Tuple

import numpy as np

import popxl.ops as ops
from popxl import dtypes
from popxl.tensor import Tensor, constant

__all__ = ["Grads", "no_grads", "zeros", "const", "unbroadcast", "expand", "mask", "keepdims_shape",
           "reshape_keepdims", "invert_perm", "scatter_strided", "flip"]


Grads = List[Optional[Tensor]]
"""What a rule returns: one gradient per forward input, None where none flows."""


def no_grads(n: int) -> Grads:
    """``n`` inputs without a gradient yet (a rule fills in the ones ``ctx.wants``)."""
    return [None] * n


def zeros(shape: Sequence[int], dtype: "dtypes.dtype", name: str = "zero_grad") -> Tensor:
    """A zero tensor (``ops.init`` zero), as PopXL uses for gradients that do not exist."""
    return ops.init(tuple(shape), dtype, name, "zero")


def const(value, dtype: "dtypes.dtype", name: Optional[str] = None) -> Tensor:
    return constant(np.asarray(value, dtype=dtype.as_numpy()), dtype, name)


def unbroadcast(g: Tensor, shape: Sequence[int]) -> Tensor:
    """Reduce-sum ``g`` over the axes NumPy broadcasting added or stretched to reach ``g.shape``
    from ``shape``, and return it with shape ``shape``."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    lead = g.rank - len(shape)
    axes = list(range(lead)) + [lead + i for i, s in enumerate(shape) if s == 1 and g.shape[lead + i] != 1]
    if axes:
        g = ops.sum(g, axes, keepdims=False)
    if g.shape != shape:
        g = ops.reshape(g, shape)
    return g


def expand(t: Tensor, shape: Sequence[int]) -> Tensor:
    """``t`` broadcast to ``shape`` (added to a zero tensor of that shape)."""
    shape = tuple(shape)
    if t.shape == shape:
        return t
    return ops.add(zeros(shape, t.dtype, "expand_zero"), t)


def mask(cond: Tensor, dtype: "dtypes.dtype") -> Tensor:
    """A bool tensor as 0 / 1 of ``dtype``."""
    return ops.cast(cond, dtype)


def keepdims_shape(shape: Sequence[int], axes: Sequence[int]) -> Tuple[int, ...]:
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


def reshape_keepdims(t: Tensor, in_shape: Sequence[int], axes: Sequence[int]) -> Tensor:
    """A reduction result (with or without keepdims) reshaped to keep the reduced axes as size 1."""
    ks = keepdims_shape(in_shape, axes)
    return t if t.shape == ks else ops.reshape(t, ks)


def invert_perm(perm: Sequence[int]) -> Tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def flip(t: Tensor, axis: int) -> Tensor:
    """``t`` reversed along ``axis``."""
    return ops.slice(t, start=[-1], stop=[-t.shape[axis] - 1], step=[-1], axis=[axis])


def scatter_strided(g: Tensor, axis: int, start: int, step: int, size: int) -> Tensor:
    """The adjoint of taking ``range(start, stop, step)`` along ``axis``: a tensor of ``size``
    entries along ``axis`` holding ``g``'s entries at those positions and zeros elsewhere."""
    n = g.shape[axis]
    if n == 0:
        shape = list(g.shape)
        shape[axis] = size
        return zeros(shape, g.dtype)
    if step < 0:
        g = flip(g, axis)
        start = start + step * (n - 1)
        step = -step
    if step > 1:
        # interleave step - 1 zero rows after each row: (.., n, 1, ..) ++ zeros(.., n, step-1, ..)
        pre, post = g.shape[:axis], g.shape[axis + 1:]
        g1 = ops.reshape(g, pre + (n, 1) + post)
        z = zeros(pre + (n, step - 1) + post, g.dtype)
        g = ops.reshape(ops.concat([g1, z], axis + 1), pre + (n * step,) + post)
        g = ops.slice(g, start=[0], stop=[(n - 1) * step + 1], step=[1], axis=[axis])
    covered = g.shape[axis]
    before, after = start, size - start - covered
    parts = []
    if before > 0:
        parts.append(zeros(g.shape[:axis] + (before,) + g.shape[axis + 1:], g.dtype))
    parts.append(g)
    if after > 0:
        parts.append(zeros(g.shape[:axis] + (after,) + g.shape[axis + 1:], g.dtype))
    return parts[0] if len(parts) == 1 else ops.concat(parts, axis)
