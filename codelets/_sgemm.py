"""Row-major float32 products through SciPy's BLAS `sgemm`, called straight from kernels.

Numba's `np.dot` reaches the same BLAS routine (SciPy's `scipy.linalg.cython_blas.sgemm`) but
checks and wraps every call on the way: about 100 ns a call, more than the arithmetic of most AMP
blocks (a 1x8x10 block is 80 multiply-adds; an MNIST step runs ~7,000 blocks). Here the kernels call
the Fortran routine themselves, by a symbol name bound to its address when this module loads, so
cached kernels stay valid across processes. The results are the same bits as `np.dot`'s: the same
routine on the same operands.

    gemm_rows(a, a0, b, b0, c, c0, m, k, n, accumulate, scratch)

c[c0:c0 + m*n] (=|+=) a[a0:a0 + m*k] @ b[b0:b0 + k*n], all row-major float32 1-D arrays (a row-major
product is the column-major product of the transposes: C^T = B^T A^T). `scratch` is an int32
array of at least 4 elements and a float32 array of at least 2, made once per kernel call.
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


@njit(cache=True, nogil=True)
def gemm_scratch():
    """The scratch one kernel call hands to every gemm_rows call: (int32[4], float32[2], uint8[1])."""
    ints = np.zeros(4, np.int32)
    floats = np.zeros(2, np.float32)
    trans = np.full(1, _N, np.uint8)
    return ints, floats, trans


@njit(cache=True, nogil=True)
def gemm_rows(a, a0, b, b0, c, c0, m, k, n, accumulate, scratch):
    """c[c0:] (=|+=) a[a0:] @ b[b0:] for row-major m x k and k x n float32 blocks (m, k, n >= 1)."""
    if a0 < 0 or b0 < 0 or c0 < 0 or a0 + m * k > a.size or b0 + k * n > b.size or c0 + m * n > c.size:
        raise IndexError("gemm_rows: a block reaches outside its array")
    ints, floats, trans = scratch
    ints[0] = n
    ints[1] = m
    ints[2] = k
    floats[0] = 1.0
    floats[1] = 1.0 if accumulate else 0.0
    t = _address(trans, 0)
    _sgemm(t, t, _address(ints, 0), _address(ints, 1), _address(ints, 2), _address(floats, 0),
           _address(b, b0), _address(ints, 0), _address(a, a0), _address(ints, 2), _address(floats, 1),
           _address(c, c0), _address(ints, 0))
