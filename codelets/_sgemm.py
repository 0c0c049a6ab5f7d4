"""Row-major float32 products through SciPy's BLAS `sgemm`, called straight from kernels.

Numba's `np.dot` reaches the same BLAS routine (SciPy's `scipy.linalg.cython_blas.sgemm`) but
checks and wraps every call on the way: about 100 ns a call, more than the arithmetic of most AMP
blocks (a 1x8x10 block is 80 multiply-adds; an MNIST step runs ~7,000 blocks). Here the kernels call
the Fortran routine themselves, by a symbol name bound to its address when this module loads, so
cached kernels stay valid across processes. The results are the same bits as `np.dot`'s: the same
routine on the same operands.

    gemm_rows(a, a0, b, b0, c, c0, m, k, n, accumulate, scratch)

c[c0:c0 + m*n] (=|+=) a[a0:a0 + m*k] @ b[b0:b0 + k*n], all row-major float32 1-D arrays (a row-major
product is the column-major product of the transposes: C^T = B^T A^T). `scratch` is the
buffer from gemm_scratch(), made once per kernel call.
"""
from __future__ import annotations

import llvmlite.binding as llvm
import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.extending import get_cython_function_address, intrinsic

__all__ = ["gemm_rows", "gemm_scratch"]

_SYMBOL = "ipu_sim_scipy_sgemm"
llvm.add_symbol(_SYMBOL, get_cython_function_address("scipy.linalg.cython_blas", "sgemm"))

# sgemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc): every argument by pointer
_sgemm = types.ExternalFunction(_SYMBOL, types.void(*([types.voidptr] * 13)))

_N = 78  # ord("N"): no transpose


@intrinsic
def _address(typingctx, arr, index):
    """A void pointer to element `index` of a 1-D array (no bounds check: callers check)."""
    sig = types.voidptr(arr, index)

    def codegen(context, builder, signature, args):
        a = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.bitcast(builder.gep(a.data, [args[1]]), cgutils.voidptr_t)

    return sig, codegen


@intrinsic
def _store(typingctx, ptr, index, value):
    """Store `value` (int32 or float32) as element `index` of the buffer of its type at `ptr`."""
    sig = types.void(ptr, index, value)

    def codegen(context, builder, signature, args):
        ltype = context.get_value_type(signature.args[2])
        typed = builder.bitcast(args[0], ltype.as_pointer())
        builder.store(args[2], builder.gep(typed, [args[1]]))
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _offset(typingctx, ptr, nbytes):
    """ptr + nbytes, a void pointer."""
    sig = types.voidptr(ptr, nbytes)

    def codegen(context, builder, signature, args):
        return builder.gep(args[0], [args[1]])

    return sig, codegen


@njit(cache=True, nogil=True)
def gemm_scratch():
    """The scratch one kernel call hands to every gemm_rows call: sgemm's by-pointer arguments
    (int32 n, m, k, then float32 alpha, beta, then the transpose flag), 24 bytes. Keep it
    referenced until the kernel's last gemm_rows call: the calls see only its address."""
    buf = np.zeros(24, np.uint8)
    buf[20] = _N
    return buf


@njit(cache=True, nogil=True, inline="always")
def gemm_rows(a, a0, b, b0, c, c0, m, k, n, accumulate, scratch):
    """c[c0:] (=|+=) a[a0:] @ b[b0:] for row-major m x k and k x n float32 blocks (m, k, n >= 1).

    Inlined, and handing sgemm addresses only: a call that passed the arrays on would take and
    release a reference to each (atomic counts), which cost more than a small block's arithmetic."""
    if a0 < 0 or b0 < 0 or c0 < 0 or a0 + m * k > a.size or b0 + k * n > b.size or c0 + m * n > c.size:
        raise IndexError("gemm_rows: a block reaches outside its array")
    p = _address(scratch, 0)
    _store(p, 0, np.int32(n))
    _store(p, 1, np.int32(m))
    _store(p, 2, np.int32(k))
    _store(p, 3, np.float32(1.0))
    _store(p, 4, np.float32(1.0) if accumulate else np.float32(0.0))
    t = _offset(p, 20)
    _sgemm(t, t, p, _offset(p, 4), _offset(p, 8), _offset(p, 12),
           _address(b, b0), p, _address(a, a0), _offset(p, 8), _offset(p, 16),
           _address(c, c0), p)
