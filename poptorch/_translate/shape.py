"""Layout and data-movement ATen ops: views, permutes, slices, select, cat / stack / split, expand,
pad, flip / roll, indexing (index, index_select, gather, embedding, scatter, index_put), the
functional scatters functionalization writes (slice_scatter, select_scatter), casts and copies,
and the factory ops whose result depends on an input's shape only (zeros_like, full_like, ...).
"""
from __future__ import annotations

from typing import List

import numpy as np
import torch

import popxl
import popxl.ops as ops

from .._capture import Value
from .context import Op, aten, host_array
from .elementwise import scalar_like


def _dim(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


def expand_to(t: popxl.Tensor, shape) -> popxl.Tensor:
    """`t` broadcast to `shape` (a copy: the IPU has no strided views of the same data)."""
    shape = tuple(shape)
    if tuple(t.shape) == shape:
        return t
    if t.rank < len(shape):
        t = ops.reshape(t, (1,) * (len(shape) - t.rank) + tuple(t.shape))
        if tuple(t.shape) == shape:
            return t
    if t.dtype == popxl.bool:
        return ops.logical_or(t, popxl.constant(np.zeros(shape, bool), popxl.bool))
    # repeat along the broadcast axes by concatenation when few copies are needed, else add zeros
    copies = int(np.prod([s // d for s, d in zip(shape, t.shape)]))
    if copies <= 8:
        for axis, (s, d) in enumerate(zip(shape, t.shape)):
            if d != s:
                t = ops.concat([t] * s, axis)
        return t
    return ops.add(t, popxl.constant(np.zeros(shape, t.dtype.as_numpy()), t.dtype, name="expand_zeros"))


# -- views ------------------------------------------------------------------------------------------------------

@aten("view", "_unsafe_view", "unsqueeze", "squeeze", "alias")
def view(op: Op):
    x = op.t("self")
    return ops.reshape(x, op.out_shape()) if tuple(x.shape) != op.out_shape() else ops.identity(x)


@aten("permute")
def permute(op: Op):
    x = op.t("self")
    return ops.transpose(x, [_dim(d, x.rank) for d in op.arg("dims")])


@aten("transpose.int")
def transpose(op: Op):
    x = op.t("self")
    perm = list(range(x.rank))
    a = _dim(op.arg("dim0", op.arg("axis0")), x.rank)
    b = _dim(op.arg("dim1", op.arg("axis1")), x.rank)
    perm[a], perm[b] = perm[b], perm[a]
    return ops.transpose(x, perm) if x.rank > 1 else ops.identity(x)


@aten("t")
def t(op: Op):
    x = op.t("self")
    return ops.transpose(x, list(range(x.rank))[::-1]) if x.rank > 1 else ops.identity(x)


def _storage_positions(shape, stride, offset: int) -> np.ndarray:
    """The storage position of each element of a strided tensor, in row-major element order."""
    grid = np.indices(shape, dtype=np.int64).reshape(len(shape), -1)
    return offset + (np.asarray(stride, np.int64).reshape(-1, 1) * grid).sum(axis=0)


@aten("as_strided")  # and as_strided_, by its functional form (find_rule)
def as_strided(op: Op):
    """A view by explicit strides into `self`'s storage. PyTorch writes it when it restrides a result
    to a memory format (adaptive_avg_pool2d on a channels-last input), and user code writes it to
    take windows. Tensors on the IPU are dense, so the view becomes a gather: each storage position
    it reads is found among the positions of `self`'s elements (recorded at capture). A position
    that no element of `self` holds (a view into a larger storage) cannot be expressed."""
    x, v = op.t("self"), op.value("self")
    size, stride = tuple(int(d) for d in op.arg("size")), tuple(int(d) for d in op.arg("stride"))
    if v is None or v.stride is None or v.offset is None:
        raise op.error("the storage layout of its input was not recorded; use view, permute or unfold instead")
    offset = v.offset if op.args.get("storage_offset") is None else int(op.arg("storage_offset"))
    held = _storage_positions(v.shape, v.stride, v.offset)
    want = _storage_positions(size, stride, offset)
    if np.array_equal(held, want) and size == tuple(v.shape):
        return ops.identity(x)  # the same elements in the same order (a memory-format restride)
    order = np.argsort(held, kind="stable")
    ranked = held[order]
    if np.unique(ranked).size != ranked.size:
        raise op.error(f"its input's elements share storage (strides {list(v.stride)} for shape {list(v.shape)}, an "
                       f"expanded tensor); call .contiguous() on it first")
    slot = np.minimum(np.searchsorted(ranked, want), ranked.size - 1) if ranked.size else want
    if want.size and (ranked.size == 0 or not np.array_equal(ranked[slot], want)):
        raise op.error(f"the view (size {list(size)}, stride {list(stride)}, offset {offset}) reads storage that its "
                       f"input (shape {list(v.shape)}, strides {list(v.stride)}) does not hold; only views within "
                       f"the tensor are supported")
    idx = popxl.constant(order[slot].reshape(size).astype(np.int32), popxl.int32, name="as_strided_index")
    return ops.gather(ops.reshape(x, (int(ranked.size),)), idx)


@aten("clone", "detach", "_to_copy")
def copy_cast(op: Op):
    x = op.t("self")
    dt = op.out_dtype()
    return ops.cast(x, dt) if x.dtype != dt else ops.identity(x)


@aten("copy.default")
def copy(op: Op):
    """Functional copy: `src` in the shape and type of `self`."""
    src = op.t("src", op.out_dtype())
    return ops.identity(expand_to(src, op.out_shape()))


# -- slicing ------------------------------------------------------------------------------------------------------

def _slice_bounds(size: int, start, end, step):
    start = 0 if start is None else int(start)
    end = size if end is None else int(end)
    start = start + size if start < 0 else start
    end = end + size if end < 0 else end
    start, end = min(max(start, 0), size), min(max(end, 0), size)
    return start, max(end, start), int(step or 1)


@aten("slice.Tensor")
def slice_(op: Op):
    x = op.t("self")
    d = _dim(op.arg("dim", 0), x.rank)
    start, end, step = _slice_bounds(x.shape[d], op.args.get("start"), op.args.get("end"), op.arg("step", 1))
    if start == 0 and end == x.shape[d] and step == 1:
        return ops.identity(x)
    return ops.slice(x, start=[start], stop=[end], step=[step], axis=[d])


@aten("select.int")
def select(op: Op):
    x = op.t("self")
    d = _dim(op.arg("dim"), x.rank)
    i = int(op.arg("index"))
    i = i + x.shape[d] if i < 0 else i
    s = ops.slice(x, start=[i], stop=[i + 1], step=[1], axis=[d])
    return ops.reshape(s, op.out_shape())


@aten("split.Tensor", "split_with_sizes")
def split(op: Op):
    x = op.t("self")
    d = _dim(op.arg("dim", 0), x.rank)
    sizes = [o.shape[d] for o in op.node.outputs]
    if len(sizes) == 1:
        return [ops.identity(x)]
    return ops.split(x, sizes, d)


@aten("unbind.int")
def unbind(op: Op):
    x = op.t("self")
    d = _dim(op.arg("dim", 0), x.rank)
    out = []
    for i in range(x.shape[d]):
        s = ops.slice(x, start=[i], stop=[i + 1], step=[1], axis=[d])
        out.append(ops.reshape(s, op.out_shape(i)))
    return out


@aten("cat")
def cat(op: Op):
    dt = op.out_dtype()
    ts = [t for t in op.tensors("tensors", dt) if not (t.rank == 1 and t.shape[0] == 0)]  # torch skips empty 1-D
    if len(ts) == 1:
        return ops.identity(ts[0])
    rank = len(op.out_shape())
    return ops.concat(ts, _dim(op.arg("dim", 0), rank))


@aten("stack")
def stack(op: Op):
    dt = op.out_dtype()
    ts = op.tensors("tensors", dt)
    d = _dim(op.arg("dim", 0), ts[0].rank + 1)
    parts = [ops.reshape(t, tuple(t.shape[:d]) + (1,) + tuple(t.shape[d:])) for t in ts]
    return parts[0] if len(parts) == 1 else ops.concat(parts, d)


@aten("expand")
def expand(op: Op):
    x = op.t("self")
    out = expand_to(x, op.out_shape())
    return out if out is not x else ops.identity(x)


@aten("repeat")
def repeat(op: Op):
    x = op.t("self")
    reps = [int(r) for r in op.arg("repeats")]
    if len(reps) > x.rank:
        x = ops.reshape(x, (1,) * (len(reps) - x.rank) + tuple(x.shape))
    for axis, r in enumerate(reps):
        if r != 1:
            x = ops.concat([x] * r, axis) if r > 0 else ops.slice(x, start=[0], stop=[0], step=[1], axis=[axis])
    return x if tuple(x.shape) == op.out_shape() else ops.reshape(x, op.out_shape())


@aten("flip")
def flip(op: Op):
    x = op.t("self")
    for d in op.arg("dims"):
        d = _dim(d, x.rank)
        n = x.shape[d]
        if n > 1:
            idx = popxl.constant(np.arange(n - 1, -1, -1, dtype=np.int32), popxl.int32)
            x = ops.gather(x, idx, axis=d)
    return x if x is not op.t("self") else ops.identity(x)


@aten("roll")
def roll(op: Op):
    x = op.t("self")
    shifts, dims = list(op.arg("shifts")), list(op.arg("dims", []))
    if not dims:
        flat = ops.reshape(x, (int(np.prod(x.shape)),))
        n = flat.shape[0]
        k = int(shifts[0]) % max(n, 1)
        if k:
            flat = ops.concat([ops.slice(flat, start=[n - k], stop=[n], axis=[0]),
                               ops.slice(flat, start=[0], stop=[n - k], axis=[0])], 0)
        return ops.reshape(flat, x.shape)
    for s, d in zip(shifts, dims):
        d = _dim(d, x.rank)
        n = x.shape[d]
        k = int(s) % max(n, 1)
        if k:
            x = ops.concat([ops.slice(x, start=[n - k], stop=[n], axis=[d]),
                            ops.slice(x, start=[0], stop=[n - k], axis=[d])], d)
    return x if x is not op.t("self") else ops.identity(x)


@aten("constant_pad_nd")
def constant_pad_nd(op: Op):
    """torch.nn.functional.pad with a constant: pads (last axis first) as concatenated constant
    blocks; negative pads slice."""
    x = op.t("self")
    pad = list(op.arg("pad"))
    value = op.arg("value", 0)
    for i in range(len(pad) // 2):
        d = x.rank - 1 - i
        before, after = int(pad[2 * i]), int(pad[2 * i + 1])
        if before < 0 or after < 0:
            n = x.shape[d]
            x = ops.slice(x, start=[max(-before, 0)], stop=[n - max(-after, 0)], axis=[d])
            before, after = max(before, 0), max(after, 0)
        parts = []
        for amount in (before, None, after):
            if amount is None:
                parts.append(x)
            elif amount > 0:
                shape = list(x.shape)
                shape[d] = amount
                parts.append(popxl.constant(np.full(shape, value, x.dtype.as_numpy()), x.dtype, name="pad"))
        if len(parts) > 1:
            x = ops.concat(parts, d)
    return x if x is not op.t("self") else ops.identity(x)


@aten("tril", "triu")
def tril_triu(op: Op):
    x = op.t("self")
    rows, cols = x.shape[-2], x.shape[-1]
    k = int(op.arg("diagonal", 0))
    keep = np.tril(np.ones((rows, cols), bool), k) if op.node.packet == "aten::tril" else \
        np.triu(np.ones((rows, cols), bool), k)
    return ops.where(popxl.constant(keep, popxl.bool), x, scalar_like(0, x))


# -- indexing -------------------------------------------------------------------------------------------------------

def _wrap_negative(idx: popxl.Tensor, size: int, known=None) -> popxl.Tensor:
    """PyTorch's negative indices count from the end; the IPU's gather reads them as out of range."""
    if known is not None and (known.numel() == 0 or int(known.min()) >= 0):
        return idx
    return ops.where(ops.less(idx, scalar_like(0, idx)), ops.add(idx, scalar_like(size, idx)), idx)


def _index_tensor(op: Op, v) -> popxl.Tensor:
    t = op.tr.tensor(v)
    return t if t.dtype == popxl.int32 else ops.cast(t, popxl.int32)


@aten("index_select")
def index_select(op: Op):
    x = op.t("self")
    d = _dim(op.arg("dim"), x.rank)
    v = op.value("index")
    idx = _wrap_negative(_index_tensor(op, v), x.shape[d], v.const)
    return ops.gather(x, idx, axis=d, available_memory_proportion=op.attr("available_memory_proportion"))


@aten("embedding")
def embedding(op: Op):
    w = op.t("weight")
    v = op.value("indices")
    idx = _wrap_negative(_index_tensor(op, v), w.shape[0], v.const)
    out = ops.gather(w, idx, axis=0, available_memory_proportion=op.attr("available_memory_proportion"))
    pad = op.arg("padding_idx", -1)
    if pad is not None and int(pad) >= 0:  # no gradient flows to the padding row
        is_pad = ops.equal(idx, scalar_like(int(pad), idx))
        is_pad = ops.reshape(is_pad, tuple(is_pad.shape) + (1,))
        out = ops.where(is_pad, ops.detach(out), out)
    return out


@aten("index.Tensor")
def index(op: Op):
    """Advanced indexing x[i0, i1, ...] with index tensors on some axes (None on the others).
    Boolean masks with a known value become integer indices; the indexed axes are flattened into
    one and gathered with their combined (row-major) index."""
    x = op.t("self")
    entries = list(op.arg("indices"))
    idx_vals: List = []
    for e in entries:
        if isinstance(e, Value) and e.dtype == torch.bool:
            if e.const is None:
                raise op.error("boolean mask indexing with a mask computed on the device gives a data-dependent "
                               "shape; use torch.where(mask, x, other) or masked_fill instead")
            idx_vals.extend(Value(-1, t, "const", const=t) for t in torch.nonzero(e.const, as_tuple=True))
        else:
            idx_vals.append(e)
    idx_vals += [None] * (x.rank - len(idx_vals))
    axes = [i for i, e in enumerate(idx_vals) if e is not None]
    contiguous = axes == list(range(axes[0], axes[-1] + 1))
    if not contiguous:  # PyTorch puts the indexed result first: move those axes to the front
        perm = axes + [i for i in range(x.rank) if i not in axes]
        x = ops.transpose(x, perm)
        idx_vals = [idx_vals[i] for i in perm]
        axes = list(range(len(axes)))
    first = axes[0]
    sizes = [x.shape[a] for a in axes]
    # combine the indices: broadcast together, then linear = sum(i_k * stride_k)
    idx_shape = tuple(np.broadcast_shapes(*[tuple(idx_vals[a].shape) for a in axes]))
    linear = None
    stride = 1
    for a, size in reversed(list(zip(axes, sizes))):
        v = idx_vals[a]
        if v.id < 0:
            it = popxl.constant(host_array(v.const), popxl.int32)
        else:
            it = _index_tensor(op, v)
        it = _wrap_negative(it, size, v.const)
        term = it if stride == 1 else ops.mul(it, scalar_like(stride, it))
        linear = term if linear is None else ops.add(linear, term)
        stride *= size
    if tuple(linear.shape) != idx_shape:
        linear = expand_to(linear, idx_shape)
    if len(axes) > 1:
        x = ops.reshape(x, tuple(x.shape[:first]) + (stride,) + tuple(x.shape[axes[-1] + 1:]))
    out = ops.gather(x, linear, axis=first, available_memory_proportion=op.attr("available_memory_proportion"))
    return out if tuple(out.shape) == op.out_shape() else ops.reshape(out, op.out_shape())


def _flat_index(op: Op, x_shape, d: int) -> popxl.Tensor:
    """For torch.gather / scatter along axis d: the index tensor `index` as flat positions into
    a tensor of `x_shape` (its other coordinates are its own, known when the program is built)."""
    v = op.value("index")
    ishape = tuple(v.shape)
    strides = [int(np.prod(x_shape[a + 1:])) for a in range(len(x_shape))]
    base = np.zeros(ishape, np.int64)
    if ishape:
        for a, g in enumerate(np.meshgrid(*[np.arange(s) for s in ishape], indexing="ij")):
            if a != d:
                base = base + g * strides[a]
    idx = _wrap_negative(_index_tensor(op, v), x_shape[d], v.const)
    return ops.add(ops.mul(idx, scalar_like(strides[d], idx)), popxl.constant(base.astype(np.int32)))


def _scatter_flat(values: popxl.Tensor, flat_idx: popxl.Tensor, x_shape) -> popxl.Tensor:
    """Sum `values` into a zero tensor of `x_shape` at the flat positions `flat_idx`."""
    n = int(np.prod(flat_idx.shape))
    summed = ops.scatter_reduce(ops.reshape(values, (n,)), ops.reshape(flat_idx, (n,)), "sum", axis=0,
                                axis_size=int(np.prod(x_shape)))
    return ops.reshape(summed, tuple(x_shape))


def _src_for(op: Op, x: popxl.Tensor, idx_shape) -> popxl.Tensor:
    if op.has("src") and isinstance(op.args["src"], Value):
        src = op.t("src", x.dtype)
        if tuple(src.shape) != tuple(idx_shape):  # only the index's part of src is used
            src = ops.slice(src, start=[0] * src.rank, stop=list(idx_shape), axis=list(range(src.rank)))
        return src
    return expand_to(scalar_like(op.arg("value"), x), tuple(idx_shape))


@aten("gather")
def gather(op: Op):
    """torch.gather: out[..., j, ...] = x[..., index[..., j, ...], ...] along `dim`."""
    x = op.t("self")
    d = _dim(op.arg("dim"), x.rank)
    flat_idx = _flat_index(op, tuple(x.shape), d)
    return ops.gather(ops.reshape(x, (int(np.prod(x.shape)),)), flat_idx, axis=0)


@aten("scatter.src", "scatter.value")
def scatter(op: Op):
    """x with src written at index along dim: the written places are found by scattering ones,
    the values by a sum-scatter (differentiable in x and src; PyTorch leaves repeated indices
    undefined, here they add)."""
    x = op.t("self")
    d = _dim(op.arg("dim"), x.rank)
    flat_idx = _flat_index(op, tuple(x.shape), d)
    src = _src_for(op, x, flat_idx.shape)
    return _overwrite(x, flat_idx, src)


def _overwrite(x: popxl.Tensor, flat_idx: popxl.Tensor, src: popxl.Tensor) -> popxl.Tensor:
    ones = popxl.constant(np.ones(tuple(flat_idx.shape), np.float32))
    written = _scatter_flat(ones, flat_idx, x.shape)
    values = _scatter_flat(src, flat_idx, x.shape)
    return ops.where(ops.greater(written, popxl.constant(np.float32(0.5))), values, x)


@aten("scatter_add")
def scatter_add(op: Op):
    """x + the sum-scatter of src (repeated indices accumulate)."""
    x = op.t("self")
    d = _dim(op.arg("dim"), x.rank)
    flat_idx = _flat_index(op, tuple(x.shape), d)
    return ops.add(x, _scatter_flat(_src_for(op, x, flat_idx.shape), flat_idx, x.shape))


@aten("index_put")
def index_put(op: Op):
    """x[indices] = values (or += with accumulate): a boolean mask becomes `where`; integer indices
    on the first axes become a scatter of rows."""
    x = op.t("self")
    entries = list(op.arg("indices"))
    vals = op.t("values", x.dtype)
    accumulate = bool(op.arg("accumulate", False))
    if len(entries) == 1 and isinstance(entries[0], Value) and entries[0].dtype == torch.bool:
        mask = op.tr.tensor(entries[0])
        if mask.rank < x.rank:
            mask = ops.reshape(mask, tuple(mask.shape) + (1,) * (x.rank - mask.rank))
        if vals.nelms != 1:
            raise op.error("x[mask] = values is supported with a single value (a scalar); use torch.where")
        new = ops.add(x, ops.reshape(vals, ())) if accumulate else ops.reshape(vals, ())
        return ops.where(expand_to(mask, x.shape), new, x)
    if len(entries) == 1 and isinstance(entries[0], Value):
        v = entries[0]
        idx = _wrap_negative(_index_tensor(op, v), x.shape[0], v.const)
        if idx.rank != 1:
            raise op.error("x[index] = values is supported with a 1-D index on the first axis")
        rows = (idx.shape[0],) + tuple(x.shape[1:])
        vals = expand_to(vals, rows)
        row = int(np.prod(x.shape[1:]))
        flat_idx = ops.add(expand_to(ops.reshape(ops.mul(idx, scalar_like(row, idx)),
                                                 (idx.shape[0],) + (1,) * (x.rank - 1)), rows),
                           popxl.constant(np.arange(row, dtype=np.int32).reshape((1,) + tuple(x.shape[1:]))))
        if accumulate:
            return ops.add(x, _scatter_flat(vals, flat_idx, x.shape))
        return _overwrite(x, flat_idx, vals)
    raise op.error("index_put (x[indices] = values) is supported with one boolean mask or one integer index tensor "
                   "on the first axis")


@aten("slice_scatter")
def slice_scatter(op: Op):
    """`self` with `src` written into self[..., start:end:step, ...] (what functionalization makes
    of a write through a slice)."""
    x = op.t("self")
    src = op.t("src", x.dtype)
    d = _dim(op.arg("dim", 0), x.rank)
    start, end, step = _slice_bounds(x.shape[d], op.args.get("start"), op.args.get("end"), op.arg("step", 1))
    n = x.shape[d]
    if step == 1:
        parts = []
        if start > 0:
            parts.append(ops.slice(x, start=[0], stop=[start], axis=[d]))
        parts.append(src)
        if end < n:
            parts.append(ops.slice(x, start=[end], stop=[n], axis=[d]))
        return parts[0] if len(parts) == 1 else ops.concat(parts, d)
    # strided: gather from the concatenation [x, src] with a known index per position
    sel = np.arange(n)
    written = np.arange(start, end, step)
    sel[written] = n + np.arange(len(written))
    both = ops.concat([x, src], d)
    return ops.gather(both, popxl.constant(sel.astype(np.int32)), axis=d)


@aten("select_scatter")
def select_scatter(op: Op):
    x = op.t("self")
    d = _dim(op.arg("dim"), x.rank)
    i = int(op.arg("index"))
    i = i + x.shape[d] if i < 0 else i
    src = op.t("src", x.dtype)
    src = ops.reshape(src, tuple(x.shape[:d]) + (1,) + tuple(x.shape[d + 1:]))
    n = x.shape[d]
    parts = []
    if i > 0:
        parts.append(ops.slice(x, start=[0], stop=[i], axis=[d]))
    parts.append(src)
    if i + 1 < n:
        parts.append(ops.slice(x, start=[i + 1], stop=[n], axis=[d]))
    return parts[0] if len(parts) == 1 else ops.concat(parts, d)


# -- factories whose values do not depend on the data ---------------------------------------------------------

def _filled(op: Op, value) -> popxl.Tensor:
    dt = op.out_dtype()
    return popxl.constant(np.full(op.out_shape(), value, dt.as_numpy()), dt)


@aten("zeros_like", "empty_like", "new_zeros", "new_empty")
def zeros_like(op: Op):
    return _filled(op, 0)


@aten("ones_like", "new_ones")
def ones_like(op: Op):
    return _filled(op, 1)


@aten("full_like", "new_full")
def full_like(op: Op):
    return _filled(op, op.arg("fill_value"))


@aten("fill.Scalar")
def fill_scalar(op: Op):
    return _filled(op, op.arg("value"))


@aten("fill.Tensor")
def fill_tensor(op: Op):
    return expand_to(op.t("value", op.out_dtype()), op.out_shape())

