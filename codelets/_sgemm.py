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

Blocks 16 wide (n = 16, the AMP's 16 output channels: most blocks of a GC200 plan) and at most
SMALL_DEPTH deep are also summed here, in the order of those kernels for a 16-wide block (measured
output by output against sgemm on this project's host: m 1-40, k 1-320, all bits equal): the rows
go in panels of 12, then 8, 4, 2, 1; rows 0-5 of a 12-panel and the rows of 8- and 4-panels keep
two chains, one over the even k and one over the odd k below the last multiple of 8, the rest of
k on the first chain, then the two added; the other rows keep one chain over k in order. Without
sgemm's packing copies the block costs 0.5-0.8x sgemm's time (`_rows16`: 8-wide vector fused
multiply-adds, 4 or 2 rows of one kind at once so that their chains overlap).
"""
from __future__ import annotations

import llvmlite.binding as llvm
import numpy as np
from numba import carray, njit, types
from numba.core import cgutils
from llvmlite import ir
from numba.extending import get_cython_function_address, intrinsic, overload

from ._borrow import borrow
from ._by_address import by_address

__all__ = ["SMALL_DEPTH", "SMALL_ROWS", "WIDE", "gemm_rows", "gemm_scratch", "sgemm_rows"]

_SYMBOL = "ipu_sim_scipy_sgemm"
llvm.add_symbol(_SYMBOL, get_cython_function_address("scipy.linalg.cython_blas", "sgemm"))

# sgemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc): every argument by pointer
_sgemm = types.ExternalFunction(_SYMBOL, types.void(*([types.voidptr] * 13)))

_N = 78  # ord("N"): no transpose

SMALL_ROWS = 3  # blocks of at most this many rows ...
SMALL_DEPTH = 320  # ... and at most this deep are multiplied in place (module docstring)
WIDE = 16  # blocks this wide (and at most SMALL_DEPTH deep) are summed in place too
_CHUNK = 64  # output columns summed at once in the scratch (its floats 8..71): 4 rows of a wide block
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


def _small_rows_compiled(ap, a0, bp, b0, cp, c0, m, k, n, accumulate, scratchp):
    a = carray(ap, a0 + m * k)
    b = carray(bp, b0 + k * n)
    c = carray(cp, c0 + m * n)
    scratch = carray(scratchp, _ACC + _CHUNK)
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


_F32P = types.CPointer(types.float32)
_I64 = types.int64
# one compiled function called by address (not inlined or linked into every kernel: that cost
# seconds of compile per kernel; codelets/_by_address.py)
_small_rows_f32 = by_address("ipu_sim_small_rows_f32",
                             types.void(_F32P, _I64, _F32P, _I64, _F32P, _I64, _I64, _I64, _I64, _I64, _F32P),
                             _small_rows_compiled)


@overload(_small_rows, inline="always")
def _ov_small_rows(a, a0, b, b0, c, c0, m, k, n, accumulate, scratch):
    if all(isinstance(x, types.Array) and x.dtype == types.float32 for x in (a, b, c)):
        return lambda a, a0, b, b0, c, c0, m, k, n, accumulate, scratch: _small_rows_f32(
            a, a0, b, b0, c, c0, m, k, n, accumulate, scratch)
    # other views only reach gemm_rows in branches a kernel never takes (typed all the same)
    return lambda a, a0, b, b0, c, c0, m, k, n, accumulate, scratch: None


def _rows16(rows: int):
    """An intrinsic summing `rows` consecutive rows of a 16-wide block (rows r of a from a[ai + r*k])
    into out[0:16 * rows]: per row two 8-wide halves, with two chains (`two`: even / odd k below
    q8, then the rest of k on the first, the chains added at the end) or one (k in order)."""

    @intrinsic
    def run(typingctx, a, ai, b, b0, k, q8, two, out):
        sig = types.void(a, ai, b, b0, k, q8, two, out)

        def codegen(context, builder, signature, args):
            v8 = ir.VectorType(ir.FloatType(), 8)
            i64 = ir.IntType(64)
            fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(v8, [v8, v8, v8]), "llvm.fma.v8f32")
            ad, bd, od = (context.make_array(signature.args[i])(context, builder, args[i]).data for i in (0, 2, 7))
            ai64, b064, k64, q864 = (context.cast(builder, args[i], signature.args[i], types.int64)
                                     for i in (1, 3, 4, 5))
            both = context.cast(builder, args[6], signature.args[6], types.boolean)
            vptr = v8.as_pointer()

            def const(v):
                return ir.Constant(i64, v)

            # accumulators [row][first chain low, high, second chain low, high], promoted to registers
            accs = [[cgutils.alloca_once_value(builder, ir.Constant(v8, [0.0] * 8)) for _ in range(4)]
                    for _ in range(rows)]

            def b_half(kk, half):  # b[kk, 8*half : 8*half + 8]
                at = builder.add(b064, builder.add(builder.mul(kk, const(16)), const(8 * half)))
                return builder.load(builder.bitcast(builder.gep(bd, [at]), vptr), align=4)

            def a_splat(r, kk):  # a[row r, kk] in all 8 lanes
                x = builder.load(builder.gep(ad, [builder.add(builder.add(ai64, builder.mul(const(r), k64)), kk)]))
                v = builder.insert_element(ir.Constant(v8, ir.Undefined), x, ir.Constant(ir.IntType(32), 0))
                return builder.shuffle_vector(v, ir.Constant(v8, ir.Undefined),
                                              ir.Constant(ir.VectorType(ir.IntType(32), 8), [0] * 8))

            def fma_into(acc, x, y):
                builder.store(builder.call(fma, [x, y, builder.load(acc)]), acc)

            pairs_end = builder.select(both, q864, const(0))
            with cgutils.for_range(builder, builder.sdiv(pairs_end, const(2))) as loop:
                k0 = builder.mul(loop.index, const(2))
                k1 = builder.add(k0, const(1))
                even, odd = (b_half(k0, 0), b_half(k0, 1)), (b_half(k1, 0), b_half(k1, 1))
                for r in range(rows):
                    x, y = a_splat(r, k0), a_splat(r, k1)
                    for h in range(2):
                        fma_into(accs[r][h], x, even[h])
                        fma_into(accs[r][2 + h], y, odd[h])
            with cgutils.for_range_slice(builder, pairs_end, k64, const(1), inc=True) as (kk, _):
                row_k = (b_half(kk, 0), b_half(kk, 1))
                for r in range(rows):
                    x = a_splat(r, kk)
                    for h in range(2):
                        fma_into(accs[r][h], x, row_k[h])
            with builder.if_then(both):
                for r in range(rows):
                    for h in range(2):
                        builder.store(builder.fadd(builder.load(accs[r][h]), builder.load(accs[r][2 + h])), accs[r][h])
            for r in range(rows):
                for h in range(2):
                    dst = builder.bitcast(builder.gep(od, [const(16 * r + 8 * h)]), vptr)
                    builder.store(builder.load(accs[r][h]), dst, align=4)
            return context.get_dummy_value()

        return sig, codegen

    return run


_rows16_1, _rows16_2, _rows16_4 = (_rows16(r) for r in (1, 2, 4))


@njit(cache=True, nogil=True, inline="always")
def _two_chains(i, full, rest):
    """Whether row i of a 16-wide block of full + rest rows (full: its 12-row panels) keeps two chains."""
    if i < full:
        return i % 12 < 6
    return i - full < (rest & 12)  # the rows of its 8- and 4-row panels


def _wide_rows(a, a0, b, b0, c, c0, m, k, accumulate, scratch):  # pragma: no cover - Numba overload
    """gemm_rows for a block 16 wide (module docstring): rows of one kind up to 4 at a time into
    the scratch, then added to the old output or stored (+0.0, as in _small_rows)."""
    raise NotImplementedError


def _wide_rows_compiled(ap, a0, bp, b0, cp, c0, m, k, accumulate, scratchp):
    a = carray(ap, a0 + m * k)
    b = carray(bp, b0 + k * WIDE)
    c = carray(cp, c0 + m * WIDE)
    scratch = carray(scratchp, _ACC + _CHUNK)
    q8 = k - k % 8
    full = m - m % 12
    rest = m - full
    tmp = borrow(scratch, _ACC, _CHUNK)
    i = 0
    while i < m:
        two = _two_chains(i, full, rest)
        n = 1
        while n < 4 and i + n < m and _two_chains(i + n, full, rest) == two:
            n += 1
        if n == 4:
            _rows16_4(a, a0 + i * k, b, b0, k, q8, two, tmp)
        elif n >= 2:
            n = 2
            _rows16_2(a, a0 + i * k, b, b0, k, q8, two, tmp)
        else:
            _rows16_1(a, a0 + i * k, b, b0, k, q8, two, tmp)
        out = borrow(c, c0 + i * WIDE, WIDE * n)
        if accumulate:
            for j in range(WIDE * n):
                out[j] = out[j] + tmp[j]
        else:
            for j in range(WIDE * n):
                out[j] = tmp[j] + np.float32(0.0)
        i += n


_wide_rows_f32 = by_address("ipu_sim_wide_rows_f32",
                            types.void(_F32P, _I64, _F32P, _I64, _F32P, _I64, _I64, _I64, _I64, _F32P),
                            _wide_rows_compiled)


@overload(_wide_rows, inline="always")
def _ov_wide_rows(a, a0, b, b0, c, c0, m, k, accumulate, scratch):
    if all(isinstance(x, types.Array) and x.dtype == types.float32 for x in (a, b, c)):
        return lambda a, a0, b, b0, c, c0, m, k, accumulate, scratch: _wide_rows_f32(
            a, a0, b, b0, c, c0, m, k, accumulate, scratch)
    return lambda a, a0, b, b0, c, c0, m, k, accumulate, scratch: None


@njit(cache=True, nogil=True, inline="always")
def gemm_rows(a, a0, b, b0, c, c0, m, k, n, accumulate, scratch):
    """c[c0:] (=|+=) a[a0:] @ b[b0:] for row-major m x k and k x n float32 blocks (m, k, n >= 1).

    Inlined, and handing sgemm addresses only: a call that passed the arrays on would take and
    release a reference to each (atomic counts), which cost more than a small block's arithmetic."""
    if a0 < 0 or b0 < 0 or c0 < 0 or a0 + m * k > a.size or b0 + k * n > b.size or c0 + m * n > c.size:
        raise IndexError("gemm_rows: a block reaches outside its array")
    if m <= SMALL_ROWS and k <= SMALL_DEPTH:
        _small_rows(a, a0, b, b0, c, c0, m, k, n, accumulate, scratch)
    elif n == WIDE and k <= SMALL_DEPTH:
        _wide_rows(a, a0, b, b0, c, c0, m, k, accumulate, scratch)
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
