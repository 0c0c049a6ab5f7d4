"""Layout ops: reshape, flatten, squeeze, transpose, slice, subsample, concat, split.

The ``_`` forms are views: their output aliases input 0 (see ``Op.aliases``). flatten and squeeze
are recorded as ``reshape`` ops.
"""

import builtins
from typing import Iterable, List, Optional, Tuple, Union

import numpy as np

from popxl._casts import integer_dims
from popxl.context import op_debug_context
from popxl.tensor import Tensor

from ._op_builder import create_op, single, not_a_tensor
from ._shapes import normalize_axes, normalize_axis

__all__ = ["reshape", "reshape_", "reshape_handle_negative_axis", "flatten", "flatten_", "squeeze",
           "transpose", "transpose_", "slice", "slice_", "process_args", "subsample", "concat", "concat_",
           "split"]

INT_MIN = -2**31
INT_MAX = 2**31 - 1


def _check_tensor(op: str, t) -> None:
    if not isinstance(t, Tensor):
        raise not_a_tensor("t", t, op)


def _view(op_type: str, t: Tensor, shape, attrs, inplace: bool, name: Optional[str] = None) -> Tensor:
    if inplace:
        return single(op_type, [t], shape, t.dtype, attrs, aliases={0: 0}, name=name,
                      out_names=[f"{op_type}_inplace_out"])
    return single(op_type, [t], shape, t.dtype, attrs, name=name)


def reshape_handle_negative_axis(t: Tensor, shape: Iterable[int]) -> Tuple[int, ...]:
    """``shape`` with a single ``-1`` replaced by the size that keeps ``t.nelms`` elements."""
    shape = integer_dims(shape, "reshape")
    if any(s < -1 for s in shape):
        raise ValueError(f"Invalid shape {shape} in reshape: every value must be >= 0 or -1.")
    if shape.count(-1) > 1:
        raise ValueError(f"Invalid shape {shape} in reshape: at most one value can be -1.")
    if -1 in shape:
        known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
        if known == 0 or t.nelms % known:
            raise ValueError(f"Cannot reshape tensor {t.id} of shape {t.shape} into {shape}.")
        shape = tuple(t.nelms // known if s == -1 else s for s in shape)
    return shape


def _reshape(t: Tensor, shape, inplace: bool, name: Optional[str] = None) -> Tensor:
    _check_tensor("reshape", t)
    if isinstance(shape, int):
        shape = (shape,)
    shape = reshape_handle_negative_axis(t, shape)
    if int(np.prod(shape, dtype=np.int64)) != t.nelms:
        raise ValueError(f"Cannot reshape tensor {t.id} of shape {t.shape} ({t.nelms} elements) into "
                         f"shape {shape}.")
    return _view("reshape", t, shape, {"shape": shape}, inplace, name)


@op_debug_context
def reshape(t: Tensor, shape: Iterable[int]) -> Tensor:
    """``t`` with a new shape of the same number of elements (one ``-1`` is inferred)."""
    return _reshape(t, shape, False)


@op_debug_context
def reshape_(t: Tensor, shape: Iterable[int]) -> Tensor:
    """Reshape as a view aliasing ``t``."""
    return _reshape(t, shape, True)


@op_debug_context
def flatten(t: Tensor) -> Tensor:
    """``t`` as a 1-D tensor."""
    return _reshape(t, (-1,), False, name="flatten")


@op_debug_context
def flatten_(t: Tensor) -> Tensor:
    """``t`` as a 1-D view."""
    return _reshape(t, (-1,), True, name="flatten")


@op_debug_context
def squeeze(t: Tensor, axes: Optional[List[int]] = None) -> Tensor:
    """Remove size-1 axes: ``axes`` (which must have size 1), or all of them if None."""
    _check_tensor("squeeze", t)
    if axes is None:
        gone = tuple(i for i, d in enumerate(t.shape) if d == 1)
    else:
        gone = normalize_axes(axes, t.rank, "squeeze axis")
        for a in gone:
            if t.shape[a] != 1:
                raise ValueError(f"squeeze: axis {a} of tensor {t.id} has size {t.shape[a]}, not 1.")
    shape = tuple(d for i, d in enumerate(t.shape) if i not in gone)
    return _view("reshape", t, shape, {"shape": shape}, False, name="squeeze")


def _transpose(t: Tensor, permutation, inplace: bool) -> Tensor:
    _check_tensor("transpose", t)
    if permutation is None:
        perm = tuple(reversed(range(t.rank)))
    else:
        perm = tuple(normalize_axis(p, t.rank, "permutation entry") for p in permutation)
        if sorted(perm) != list(range(t.rank)):
            raise ValueError(f"transpose: {tuple(permutation)} is not a permutation of the {t.rank} axes "
                             f"of tensor {t.id} of shape {t.shape}.")
    shape = tuple(t.shape[p] for p in perm)
    return _view("transpose", t, shape, {"permutation": perm}, inplace)


@op_debug_context
def transpose(t: Tensor, permutation: Optional[Iterable[int]] = None) -> Tensor:
    """Permute the axes of ``t`` (reverse them by default)."""
    return _transpose(t, permutation, False)


@op_debug_context
def transpose_(t: Tensor, permutation: Optional[Iterable[int]] = None) -> Tensor:
    """Permute the axes of ``t`` as a view."""
    return _transpose(t, permutation, True)


def process_args(start=None, stop=None, step=None, axis=None) -> Tuple[List[int], List[int], List[int], List[int]]:
    """Turn the arguments of ``slice`` into equal-length lists (ONNX Slice conventions: a missing
    start is 0 (or -1 stepping backwards), a missing stop is INT_MAX (INT_MIN backwards))."""
    def as_list(v):
        return [v] if isinstance(v, (int, np.integer)) else (None if v is None else list(v))

    start, stop, step, axis = as_list(start), as_list(stop), as_list(step), as_list(axis)
    n = None
    for key, v in (("start", start), ("stop", stop), ("step", step), ("axis", axis)):
        if v is not None:
            if n is None:
                n = len(v)
            elif len(v) != n:
                raise ValueError(f"All inputs must have the same length. `{key}` has length {len(v)} != {n}.")
    n = n or 0
    step = [1] * n if step is None else [1 if s is None else int(s) for s in step]
    axis = list(range(n)) if axis is None else [int(a) for a in axis]
    start = [(0 if st > 0 else -1) if (start is None or start[i] is None) else int(start[i])
             for i, st in enumerate(step)]
    stop = [(INT_MAX if st > 0 else INT_MIN) if (stop is None or stop[i] is None) else int(stop[i])
            for i, st in enumerate(step)]
    return start, stop, step, axis


def _slice(t: Tensor, start, stop, step, axis, inplace: bool) -> Tensor:
    _check_tensor("slice", t)
    if start is None and stop is None and step is None:
        return t
    starts, stops, steps, axes = process_args(start, stop, step, axis)
    axes = [normalize_axis(a, t.rank, "slice axis") for a in axes]
    if len(set(axes)) != len(axes):
        raise ValueError(f"slice: repeated axis in {axes}.")
    index = [builtins.slice(None)] * t.rank
    shape = list(t.shape)
    resolved = []
    for a, s, e, st in zip(axes, starts, stops, steps):
        if st == 0:
            raise ValueError("slice: step cannot be 0.")
        s, e, st = builtins.slice(s, e, st).indices(t.shape[a])
        shape[a] = len(range(s, e, st))
        index[a] = builtins.slice(s, e if e >= 0 else None, st)
        resolved.append((a, s, e, st))
    attrs = {"axes": tuple(r[0] for r in resolved), "starts": tuple(r[1] for r in resolved),
             "stops": tuple(r[2] for r in resolved), "steps": tuple(r[3] for r in resolved),
             "index": tuple(index)}
    return _view("slice", t, tuple(shape), attrs, inplace)


@op_debug_context
def slice(t: Tensor, start: Optional[Union[int, List[Optional[int]]]] = None,
          stop: Optional[Union[int, List[Optional[int]]]] = None,
          step: Optional[Union[int, List[Optional[int]]]] = None,
          axis: Optional[Union[int, List[int]]] = None) -> Tensor:
    """Select ``start:stop:step`` along each of ``axis`` (default axes 0, 1, ...), NumPy style.

    Returns ``t`` itself if no start, stop or step is given.
    """
    return _slice(t, start, stop, step, axis, False)


@op_debug_context
def slice_(t: Tensor, start: Optional[Union[int, List[Optional[int]]]] = None,
           stop: Optional[Union[int, List[Optional[int]]]] = None,
           step: Optional[Union[int, List[Optional[int]]]] = None,
           axis: Optional[Union[int, List[int]]] = None) -> Tensor:
    """Slice as a view aliasing ``t``."""
    return _slice(t, start, stop, step, axis, True)


@op_debug_context
def subsample(t: Tensor, strides: Union[int, Iterable[int]]) -> Tensor:
    """Every ``strides[i]``-th element along each axis ``i``, starting at 0.

    ``strides`` has one entry per axis (a list, tuple, array or any iterable of ints); a single
    int is the list of one stride, as in PopXL, so it suits rank-1 tensors.
    """
    _check_tensor("subsample", t)
    not_strides = TypeError(f"subsample: strides must be an int or an iterable of ints, not {strides!r}.")
    if isinstance(strides, bool):
        raise not_strides
    if isinstance(strides, (int, np.integer)):
        strides = [strides]
    try:
        strides = tuple(int(s) for s in strides)
    except TypeError:
        raise not_strides from None
    if len(strides) != t.rank:
        raise ValueError("The length of subsample `strides` must match the rank of the input tensor. "
                         f"Got {len(strides)} strides {strides} for a tensor of shape {t.shape}.")
    if any(s < 1 for s in strides):
        raise ValueError(f"subsample: strides must be >= 1, got {strides}.")
    shape = tuple(-(-d // s) for d, s in zip(t.shape, strides))
    return single("subsample", [t], shape, t.dtype, {"strides": strides})


def _concat(ts: Iterable[Tensor], axis: int, inplace: bool) -> Tensor:
    ts = list(ts)
    if not ts:
        raise ValueError("concat needs at least one tensor.")
    for t in ts:
        _check_tensor("concat", t)
    types_ = [t.dtype for t in ts]
    if len(set(types_)) > 1:  # PopXL's check and text (ops/concat.py), then which inputs differ
        raise TypeError(f"All inputs to a concat operation must have the same type: {types_} "
                        f"({', '.join(f'{t.id}: {t.dtype.name}' for t in ts)}; use ops.cast first)")
    dt = types_[0]
    rank = ts[0].rank
    if rank == 0:
        raise ValueError("concat: scalars cannot be concatenated; reshape them to shape (1,) first.")
    axis = normalize_axis(axis, rank)
    for t in ts[1:]:
        if t.rank != rank or any(a != b for i, (a, b) in enumerate(zip(t.shape, ts[0].shape)) if i != axis):
            raise ValueError(f"concat: shapes {[x.shape for x in ts]} differ outside axis {axis}.")
    shape = list(ts[0].shape)
    shape[axis] = builtins.sum(t.shape[axis] for t in ts)
    attrs = {"axis": axis}
    if inplace:
        attrs["view"] = True
        return single("concat", ts, tuple(shape), dt, attrs, inplace=True, out_names=["concat_inplace_out"])
    return single("concat", ts, tuple(shape), dt, attrs)


@op_debug_context
def concat(ts: Iterable[Tensor], axis: int = 0) -> Tensor:
    """Join tensors along ``axis``."""
    return _concat(ts, axis, False)


@op_debug_context
def concat_(ts: Iterable[Tensor], axis: int = 0) -> Tensor:
    """Join tensors along ``axis`` as a view of the inputs (``attrs['view']``; no single alias)."""
    return _concat(ts, axis, True)


@op_debug_context
def split(t: Tensor, splits: Union[int, List[int]], axis: int = 0) -> List[Tensor]:
    """Split ``t`` along ``axis`` into ``splits`` equal parts, or parts of the listed sizes."""
    _check_tensor("split", t)
    axis = normalize_axis(axis, t.rank)
    dim = t.shape[axis]
    if isinstance(splits, (int, np.integer)):
        n = int(splits)
        if n < 1 or dim % n:
            raise ValueError(f"split: axis {axis} of size {dim} cannot be split into {n} equal parts.")
        sizes = (dim // n,) * n
    else:
        sizes = tuple(int(s) for s in splits)
        if builtins.sum(sizes) != dim or any(s < 0 for s in sizes):
            raise ValueError(f"split: the sizes {sizes} must be >= 0 and add up to the size {dim} of axis {axis}.")
    outs = [tuple(t.shape[:axis]) + (s,) + tuple(t.shape[axis + 1:]) for s in sizes]
    op = create_op("split", [t], [(s, t.dtype) for s in outs], {"axis": axis, "splits": sizes},
                   out_names=[f"split_out_{i}" for i in range(len(sizes))])
    return list(op.outputs)
