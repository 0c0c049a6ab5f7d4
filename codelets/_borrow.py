"""Borrowed slices for kernels: a vertex's piece of a view without a reference count.

A kernel walks thousands of vertices, each taking slices of its views (`x[a:b]`). A Numba slice
shares its parent's memory record, so making one and dropping it costs two atomic reference
counts, and a slice passed into a helper takes more: ~5-10 ns each, which for the common vertex
of a few dozen elements is more than its arithmetic. `borrow(x, start, count)` builds the same
array (same type, same data pointer) with no memory record, so nothing is counted; it is valid
while `x` is, which in a kernel is the whole call (the engine owns the memory). Only the
kernel's own loops may use it; it must not be returned or stored.
"""
from __future__ import annotations

from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["borrow", "piece"]


@intrinsic
def borrow(typingctx, arr, start, count):
    """arr[start:start + count] as a borrowed 1-D C-contiguous array (no bounds check: callers check)."""
    if not (isinstance(arr, types.Array) and arr.ndim == 1 and arr.layout == "C"):
        return None
    sig = arr(arr, start, count)

    def codegen(context, builder, signature, args):
        src = context.make_array(signature.args[0])(context, builder, args[0])
        out = context.make_array(signature.return_type)(context, builder)
        itemsize = context.get_constant(types.intp, context.get_abi_sizeof(context.get_data_type(arr.dtype)))
        n = context.cast(builder, args[2], signature.args[2], types.intp)
        data = builder.gep(src.data, [context.cast(builder, args[1], signature.args[1], types.intp)])
        context.populate_array(out, data=data, shape=cgutils.pack_array(builder, [n]),
                               strides=cgutils.pack_array(builder, [itemsize]), itemsize=itemsize,
                               meminfo=None)
        return out._getvalue()

    return sig, codegen


@njit(inline="always")
def piece(arr, start, count):
    """borrow() after checking that the piece lies inside `arr`."""
    if start < 0 or count < 0 or start + count > arr.shape[0]:
        raise IndexError("a vertex's piece reaches outside its view")
    return borrow(arr, start, count)
