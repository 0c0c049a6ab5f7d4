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

Blocks of at most SMALL_ROWS rows and SMALL_DEPTH deep are multiplied here instead (`_small_rows`):
sgemm's fixed cost (argument checks, a buffer from its pool, packing both operands) is ~150 ns a
call, more than the arithmetic of the 1-3 row blocks a matmul's narrow side makes (an MNIST step
at batch 32 runs ~3,000 of them). Each output is one chain of fused multiply-adds over k from
zero, in order, then added to the old output (accumulate) or stored: the order in which
OpenBLAS's sgemm kernels sum a block of fewer than four rows within one pass over k (its
Haswell / Zen kernels take k <= 320 in one pass), so on such hosts the bits are sgemm's
(tests/codelets/test_matmul.py compares the two wherever the host's sgemm agrees on a probe, and
always checks the order itself).
"""
from __future__ import annotations

import llvmlite.binding as llvm
import numpy as np
from numba import njit, types
from numba.core import cgutils
from llvmlite import ir
from numba.extending import get_cython_function_address, intrinsic, overload

from ._borrow import borrow

__all__ = ["SMALL_DEPTH", "SMALL_ROWS", "gemm_rows", "gemm_scratch", "sgemm_rows"]

_SYMBOL = "ipu_sim_scipy_sgemm"
llvm.add_symbol(_SYMBOL, get_cython_function_address("scipy.linalg.cython_blas", "sgemm"))

# sgemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc): every argument by pointer
_sgemm = types.ExternalFunction(_SYMBOL, types.void(*([types.voidptr] * 13)))

_N = 78  # ord("N"): no transpose

SMALL_ROWS = 3  # blocks of at most this many rows ...
SMALL_DEPTH = 320  # ... and at most this deep are multiplied in place (module docstring)
_CHUNK = 64  # output columns summed at once in the scratch (its floats 8..71)
_ACC = 8  # the first float of that room in the scratch (after sgemm's 24 bytes of arguments)


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
def _fma(typingctx, x, y, z):
    """x * y + z for float32, rounded once (LLVM's fma: the instruction where the host has it)."""
    if not all(t == types.float32 for t in (x, y, z)):
        return None
    sig = types.float32(x, y, z)

    def codegen(context, builder, signature, args):
        f32 = ir.FloatType()
        fn = builder.module.declare_intrinsic("llvm.fma", [f32], ir.FunctionType(f32, [f32, f32, f32]))
        return builder.call(fn, args)

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
    (int32 n, m, k, then float32 alpha, beta, then the transpose flag: 24 bytes), then room for
    _CHUNK float32 sums of a small block. Keep it referenced until the kernel's last gemm_rows
    call: the sgemm calls see only its address."""
    buf = np.zeros(_ACC + _CHUNK, np.float32)
    _store(_address(buf, 0), 20, np.uint8(_N))
    return buf


def _small_rows(a, a0, b, b0, c, c0, m, k, n, accumulate, scratch):  # pragma: no cover - Numba overload
    """gemm_rows for a block of m <= SMALL_ROWS rows: per output, fused multiply-adds over k from
    zero in order, then added to the old output or stored (+0.0 turns a -0.0 sum into +0.0, as
    sgemm's store into its zeroed output does). Columns go _CHUNK at a time through the scratch,
    each column's sum in the same order whatever the chunk."""
    raise NotImplementedError


def _small_rows_f32(a, a0, b, b0, c, c0, m, k, n, accumulate, scratch):
    for i in range(m):
        row = borrow(a, a0 + i * k, k)
        for j0 in range(0, n, _CHUNK):
            w = min(_CHUNK, n - j0)
            acc = borrow(scratch, _ACC, w)
            for j in range(w):
                acc[j] = np.float32(0.0)
            for kk in range(k):
                x = row[kk]
                brow = borrow(b, b0 + kk * n + j0, w)
                for j in range(w):
                    acc[j] = _fma(x, brow[j], acc[j])
            out = borrow(c, c0 + i * n + j0, w)
            if accumulate:
                for j in range(w):
                    out[j] = out[j] + acc[j]
            else:
                for j in range(w):
                    out[j] = acc[j] + np.float32(0.0)


@overload(_small_rows, inline="always")
def _ov_small_rows(a, a0, b, b0, c, c0, m, k, n, accumulate, scratch):
    if all(isinstance(x, types.Array) and x.dtype == types.float32 for x in (a, b, c)):
        return _small_rows_f32
    # other views only reach gemm_rows in branches a kernel never takes (typed all the same)
    return lambda a, a0, b, b0, c, c0, m, k, n, accumulate, scratch: None


@njit(cache=True, nogil=True, inline="always")
def gemm_rows(a, a0, b, b0, c, c0, m, k, n, accumulate, scratch):
    """c[c0:] (=|+=) a[a0:] @ b[b0:] for row-major m x k and k x n float32 blocks (m, k, n >= 1).

    Inlined, and handing sgemm addresses only: a call that passed the arrays on would take and
    release a reference to each (atomic counts), which cost more than a small block's arithmetic."""
    if a0 < 0 or b0 < 0 or c0 < 0 or a0 + m * k > a.size or b0 + k * n > b.size or c0 + m * n > c.size:
        raise IndexError("gemm_rows: a block reaches outside its array")
    if m <= SMALL_ROWS and k <= SMALL_DEPTH:
        _small_rows(a, a0, b, b0, c, c0, m, k, n, accumulate, scratch)
    else:
        sgemm_rows(a, a0, b, b0, c, c0, m, k, n, accumulate, scratch)


@njit(cache=True, nogil=True, inline="always")
def sgemm_rows(a, a0, b, b0, c, c0, m, k, n, accumulate, scratch):
    """gemm_rows through sgemm whatever the block's size (bounds checked by the caller)."""
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
