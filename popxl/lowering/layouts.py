"""Layouts that element-wise ops inherit: Poplar's `graph.clone` for views of a whole variable.

A producer may store an activation in an order of its own (a convolution's output in the order of
its matmul's cells: each tile's block contiguous, codelets/plans/matmul_output.py) and hand out a
view of that storage in the user's NCHW order. An element-wise op reading such a view creates its
output as popops does (`createOutputForElementWiseOp`: `graph.clone` of an input): a new variable
with the input's storage shape and tile mapping, returned through the same view, and its vertices
made over the storage's contiguous runs (popops' getSortedContiguousRegions), not over the view's.
Every other input is read in that storage order: an input that is the same view of a variable
with the same mapping is its variable as it lies; a per-channel input broadcast along runs of the
storage is handed to each vertex as one element (blocks.elementwise's scalar fields).
"""
from __future__ import annotations

import numpy as np

import ipu


def storage_order(view: ipu.Tensor) -> np.ndarray | ipu.IndexBlocks | None:
    """For a view holding every element of its variable once (a permutation), the view's flat
    element at each storage position; else None."""
    var = view.variable
    if view.is_identity or view.numel != var.numel or view.numel < 2:
        return None
    if view.blocks is not None:  # kept block by block (a permutation): its inverse, block by block
        return view.blocks.inverse()
    flat = view.flat_index()
    order = np.full(var.numel, -1, np.int64)
    order[flat] = np.arange(flat.size, dtype=np.int64)
    return None if (order < 0).any() else order


def in_order(v: ipu.Tensor, order) -> ipu.Tensor:
    """v's flat elements at `order` (an index array or IndexBlocks); the variable itself when that
    is all of it in its order."""
    if isinstance(order, ipu.IndexBlocks):
        flat = v.flatten()
        index = order if flat.is_identity else order.gather(flat.flat_index())
        t = ipu.Tensor(v.variable, index, (order.size,))
    else:
        t = v.flatten()[order]
    return t.variable if t.numel == t.variable.numel and t.contiguous_range() == (0, t.numel) else t


def same_view(a: ipu.Tensor, b: ipu.Tensor) -> bool:
    """a and b read their variables at the same positions, and the variables lie alike (same
    storage shape and tiles): element-wise, b's storage lines up with a's."""
    if a.shape != b.shape or a.variable.shape != b.variable.shape:
        return False
    if a._index is not b._index:
        if a.is_identity or b.is_identity or not np.array_equal(a.flat_index(), b.flat_index()):
            return False
    return a.variable is b.variable or a.variable.same_mapping(b.variable)


def clone_source(ctx, inputs, shape, first: int = 0) -> tuple[ipu.Tensor, np.ndarray] | None:
    """The input whose layout an element-wise output of `shape` clones, and its storage order: the
    first input of that shape (from inputs[first] on) that is a permuted view of a whole, mapped
    variable of more than one element. None when there is none (the output is then laid out as
    blocks.elementwise does)."""
    for v in list(inputs[first:]) + list(inputs[:first]):
        if tuple(v.shape) != tuple(shape) or v.is_identity or v.numel < 2 or v.numel != v.variable.numel:
            continue
        if v.variable.unmapped() or v.blocks is not None:
            continue
        order = _cached_order(ctx, v)
        if order is not None:
            return v, order
    return None


def _cached_order(ctx, v: ipu.Tensor):
    """storage_order(v), remembered per index object (a model's activations pass through several
    element-wise ops with one view)."""
    cache = ctx.__dict__.setdefault("_storage_orders", {})
    key = id(v._index)
    hit = cache.get(key)
    if hit is not None and hit[0] is v._index:
        return hit[1]
    order = storage_order(v)
    if len(cache) > 64:
        cache.clear()
    cache[key] = (v._index, order)  # keeps the index alive, so its id stays its own
    return order


def broadcast_sources(v: ipu.Tensor, shape, order: np.ndarray) -> np.ndarray:
    """The flat element of v's variable each storage position reads, v broadcast to `shape`."""
    if v.numel == 1:
        return np.full(order.size, int(v.flat_index()[0]), np.int64)
    return np.broadcast_to(v.index(), tuple(shape)).reshape(-1)[order]


def like_view(ctx, v: ipu.Tensor, ref: ipu.Tensor, suffix: str = "rearrange") -> ipu.Tensor:
    """v's values in ref's layout (ref a view of a whole variable, v of ref's shape): v itself when
    it already lies so, else a clone of ref's variable filled by a Copy, as the same view."""
    if same_view(ref, v):
        return v
    var = ref.variable
    out = ctx.g.add_variable(ctx.name(suffix), var.shape, v.dtype, ipu.TEMPORARY, debug=ctx.name())
    out.map_like(var)
    view = ipu.Tensor(out, ref._index, ref.shape)
    ctx.copy(v, view, suffix)
    return view
