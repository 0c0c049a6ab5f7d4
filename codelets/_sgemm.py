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
sgemm's packing copies the block costs 0.3-0.8x sgemm's time (`_rows16`: 8-wide vector fused
multiply-adds over batches of rows that share each load of b and keep up to 12 chains in flight,
as many as AVX2's 16 vector registers hold beside b and a's broadcasts, written straight to c).
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
_CHUNK = 64  # output columns of a small block summed at once in the scratch (its floats 8..71)
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
    sgemm's store into its zeroed output does). Blocks at most 16 wide go in two vector registers a
    row (`_narrow`: a 1x8x10 block 65 -> 40 ns, 3x40x16 550 -> 150 ns); wider ones _CHUNK columns at
    a time through the scratch, each column's sum in the same order whatever the chunk."""
    raise NotImplementedError


def _narrow(rows: int):
    """An intrinsic summing `rows` rows of a block at most 16 wide (1 <= n <= 16) into c: per row
    one chain over k in order per output, as _small_rows, in two 8-wide vectors whose lanes past n
    are masked off (loads and stores touch no byte outside the block). The rows' chains overlap."""

    @intrinsic
    def run(typingctx, a, a0, b, b0, c, c0, k, n, accumulate):
        sig = types.void(a, a0, b, b0, c, c0, k, n, accumulate)

        def codegen(context, builder, signature, args):
            f32 = ir.FloatType()
            v8 = ir.VectorType(f32, 8)
            m8 = ir.VectorType(ir.IntType(1), 8)
            i32 = ir.IntType(32)
            i64 = ir.IntType(64)
            vptr = v8.as_pointer()
            mload = cgutils.get_or_insert_function(builder.module, ir.FunctionType(v8, [vptr, i32, m8, v8]),
                                                   "llvm.masked.load.v8f32.p0")
            mstore = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [v8, vptr, i32, m8]),
                                                    "llvm.masked.store.v8f32.p0")
            fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(v8, [v8, v8, v8]), "llvm.fma.v8f32")
            ad, bd, cd = (context.make_array(signature.args[i])(context, builder, args[i]).data for i in (0, 2, 4))
            a064, b064, c064, k64, n64 = (context.cast(builder, args[i], signature.args[i], types.int64)
                                          for i in (1, 3, 5, 6, 7))
            acc_flag = context.cast(builder, args[8], signature.args[8], types.boolean)
            zero = ir.Constant(v8, [0.0] * 8)
            align = ir.Constant(i32, 4)

            def const(v):
                return ir.Constant(i64, v)

            def lanes_below(count):  # lanes j < count
                v = builder.insert_element(ir.Constant(ir.VectorType(i64, 8), ir.Undefined), count,
                                           ir.Constant(i32, 0))
                v = builder.shuffle_vector(v, ir.Constant(ir.VectorType(i64, 8), ir.Undefined),
                                           ir.Constant(ir.VectorType(i32, 8), [0] * 8))
                return builder.icmp_signed("<", ir.Constant(ir.VectorType(i64, 8), list(range(8))), v)

            masks = [lanes_below(n64), lanes_below(builder.sub(n64, const(8)))]

            def vec_at(data, at):
                return builder.bitcast(builder.gep(data, [at]), vptr)

            accs = [[cgutils.alloca_once_value(builder, zero) for _ in range(2)] for _ in range(rows)]
            with cgutils.for_range(builder, k64) as loop:
                kk = loop.index
                brow = builder.add(b064, builder.mul(kk, n64))
                bv = [builder.call(mload, [vec_at(bd, builder.add(brow, const(8 * h))), align, masks[h], zero])
                      for h in range(2)]
                for r in range(rows):
                    x = builder.load(builder.gep(ad, [builder.add(builder.add(a064, builder.mul(const(r), k64)), kk)]))
                    xv = builder.insert_element(ir.Constant(v8, ir.Undefined), x, ir.Constant(i32, 0))
                    xv = builder.shuffle_vector(xv, ir.Constant(v8, ir.Undefined),
                                                ir.Constant(ir.VectorType(i32, 8), [0] * 8))
                    for h in range(2):
                        builder.store(builder.call(fma, [xv, bv[h], builder.load(accs[r][h])]), accs[r][h])
            for r in range(rows):
                for h in range(2):
                    p = vec_at(cd, builder.add(c064, builder.add(builder.mul(const(r), n64), const(8 * h))))
                    old = builder.call(mload, [p, align, masks[h], zero])
                    v = builder.load(accs[r][h])
                    # added to the old output, or stored plus +0.0 (a -0.0 sum becomes +0.0)
                    v = builder.select(acc_flag, builder.fadd(old, v), builder.fadd(v, zero))
                    builder.call(mstore, [v, p, align, masks[h]])
            return context.get_dummy_value()

        return sig, codegen

    return run


_narrow1, _narrow2, _narrow3 = (_narrow(r) for r in (1, 2, 3))


def _small_rows_compiled(ap, a0, bp, b0, cp, c0, m, k, n, accumulate, scratchp):
    a = carray(ap, a0 + m * k)
    b = carray(bp, b0 + k * n)
    c = carray(cp, c0 + m * n)
    if n <= WIDE:  # rows in vectors, masked past n
        if m == 1:
            _narrow1(a, a0, b, b0, c, c0, k, n, accumulate)
        elif m == 2:
            _narrow2(a, a0, b, b0, c, c0, k, n, accumulate)
        else:
            _narrow3(a, a0, b, b0, c, c0, k, n, accumulate)
        return
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


def _rows16(two: int, one: int):
    """An intrinsic computing `two` rows with two chains then `one` rows with one chain (consecutive
    rows r of a from a[ai + r*k]) of a 16-wide block and writing them to c[ci + 16*r:] (added to
    the old output, or stored plus +0.0). Per row two 8-wide halves; a two-chain row keeps a chain
    over the even and one over the odd k below q8, then the rest of k on the first, the two added
    at the end; a one-chain row one chain over k in order. The rows of a call share each load of b
    and their chains overlap: at most 12 accumulators (the 16 vector registers of AVX2 hold them,
    the b rows and the broadcasts of a without spilling)."""

    @intrinsic
    def run(typingctx, a, ai, b, b0, k, q8, c, ci, accumulate):
        sig = types.void(a, ai, b, b0, k, q8, c, ci, accumulate)

        def codegen(context, builder, signature, args):
            v8 = ir.VectorType(ir.FloatType(), 8)
            i64 = ir.IntType(64)
            fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(v8, [v8, v8, v8]), "llvm.fma.v8f32")
            ad, bd, cd = (context.make_array(signature.args[i])(context, builder, args[i]).data for i in (0, 2, 6))
            ai64, b064, k64, q864, ci64 = (context.cast(builder, args[i], signature.args[i], types.int64)
                                           for i in (1, 3, 4, 5, 7))
            acc_flag = context.cast(builder, args[8], signature.args[8], types.boolean)
            vptr = v8.as_pointer()
            rows = two + one

            def const(v):
                return ir.Constant(i64, v)

            # accumulators [row][first chain low, high, (two-chain rows) second chain low, high]
            accs = [[cgutils.alloca_once_value(builder, ir.Constant(v8, [0.0] * 8)) for _ in range(4 if r < two else 2)]
                    for r in range(rows)]

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

            pairs_end = q864 if two else const(0)
            if two:
                with cgutils.for_range(builder, builder.sdiv(pairs_end, const(2))) as loop:
                    k0 = builder.mul(loop.index, const(2))
                    k1 = builder.add(k0, const(1))
                    even, odd = (b_half(k0, 0), b_half(k0, 1)), (b_half(k1, 0), b_half(k1, 1))
                    for r in range(rows):
                        x, y = a_splat(r, k0), a_splat(r, k1)
                        for h in range(2):
                            fma_into(accs[r][h], x, even[h])
                            # a one-chain row takes k0 then k1 on its one chain
                            fma_into(accs[r][2 + h] if r < two else accs[r][h], y, odd[h])
            with cgutils.for_range_slice(builder, pairs_end, k64, const(1), inc=True) as (kk, _):
                row_k = (b_half(kk, 0), b_half(kk, 1))
                for r in range(rows):
                    x = a_splat(r, kk)
                    for h in range(2):
                        fma_into(accs[r][h], x, row_k[h])
            sums = []
            for r in range(rows):
                for h in range(2):
                    v = builder.load(accs[r][h])
                    if r < two:
                        v = builder.fadd(v, builder.load(accs[r][2 + h]))
                    sums.append(v)
            dst = [builder.bitcast(builder.gep(cd, [builder.add(ci64, const(8 * j))]), vptr) for j in range(2 * rows)]
            with builder.if_else(acc_flag) as (added, stored):
                with added:
                    for p, v in zip(dst, sums):
                        builder.store(builder.fadd(builder.load(p, align=4), v), p, align=4)
                with stored:  # +0.0 turns a -0.0 sum into +0.0 (as in _small_rows)
                    zero = ir.Constant(v8, [0.0] * 8)
                    for p, v in zip(dst, sums):
                        builder.store(builder.fadd(v, zero), p, align=4)
            return context.get_dummy_value()

        return sig, codegen

    return run


# the row batches _wide_rows_compiled calls: (two-chain rows, one-chain rows), 12 accumulators at most
_R3_0, _R2_0, _R1_0, _R0_6 = _rows16(3, 0), _rows16(2, 0), _rows16(1, 0), _rows16(0, 6)
_R0_1, _R0_2, _R0_3 = _rows16(0, 1), _rows16(0, 2), _rows16(0, 3)
_R1_1, _R1_2, _R1_3, _R2_1, _R2_2 = _rows16(1, 1), _rows16(1, 2), _rows16(1, 3), _rows16(2, 1), _rows16(2, 2)


def _wide_rows(a, a0, b, b0, c, c0, m, k, accumulate):  # pragma: no cover - Numba overload
    """gemm_rows for a block 16 wide (module docstring): the rows of each 12-panel in three batches
    of 3 + 3 two-chain and 6 one-chain rows, then the last m % 12 rows (two-chain rows of an 8- or
    4-panel, then one-chain rows of a 2- and a 1-panel), each batch written straight to c."""
    raise NotImplementedError


def _wide_rows_compiled(ap, a0, bp, b0, cp, c0, m, k, accumulate):
    a = carray(ap, a0 + m * k)
    b = carray(bp, b0 + k * WIDE)
    c = carray(cp, c0 + m * WIDE)
    q8 = k - k % 8
    full = m - m % 12
    for i in range(0, full, 12):
        _R3_0(a, a0 + i * k, b, b0, k, q8, c, c0 + i * WIDE, accumulate)
        _R3_0(a, a0 + (i + 3) * k, b, b0, k, q8, c, c0 + (i + 3) * WIDE, accumulate)
        _R0_6(a, a0 + (i + 6) * k, b, b0, k, q8, c, c0 + (i + 6) * WIDE, accumulate)
    rest = m - full
    two = rest & 12  # the rows of an 8- and a 4-panel: two chains
    one = rest - two  # the rows of a 2- and a 1-panel: one chain
    i = full
    while two > 2:
        _R3_0(a, a0 + i * k, b, b0, k, q8, c, c0 + i * WIDE, accumulate)
        i += 3
        two -= 3
    ai = a0 + i * k
    ci = c0 + i * WIDE
    if two == 2:
        if one == 0:
            _R2_0(a, ai, b, b0, k, q8, c, ci, accumulate)
        elif one == 1:
            _R2_1(a, ai, b, b0, k, q8, c, ci, accumulate)
        elif one == 2:
            _R2_2(a, ai, b, b0, k, q8, c, ci, accumulate)
        else:
            _R2_0(a, ai, b, b0, k, q8, c, ci, accumulate)
            _R0_3(a, ai + 2 * k, b, b0, k, q8, c, ci + 2 * WIDE, accumulate)
    elif two == 1:
        if one == 0:
            _R1_0(a, ai, b, b0, k, q8, c, ci, accumulate)
        elif one == 1:
            _R1_1(a, ai, b, b0, k, q8, c, ci, accumulate)
        elif one == 2:
            _R1_2(a, ai, b, b0, k, q8, c, ci, accumulate)
        else:
            _R1_3(a, ai, b, b0, k, q8, c, ci, accumulate)
    elif one == 1:
        _R0_1(a, ai, b, b0, k, q8, c, ci, accumulate)
    elif one == 2:
        _R0_2(a, ai, b, b0, k, q8, c, ci, accumulate)
    elif one == 3:
        _R0_3(a, ai, b, b0, k, q8, c, ci, accumulate)


_wide_rows_f32 = by_address("ipu_sim_wide_rows_f32",
                            types.void(_F32P, _I64, _F32P, _I64, _F32P, _I64, _I64, _I64, _I64),
                            _wide_rows_compiled)


@overload(_wide_rows, inline="always")
def _ov_wide_rows(a, a0, b, b0, c, c0, m, k, accumulate):
    if all(isinstance(x, types.Array) and x.dtype == types.float32 for x in (a, b, c)):
        return lambda a, a0, b, b0, c, c0, m, k, accumulate: _wide_rows_f32(a, a0, b, b0, c, c0, m, k, accumulate)
    return lambda a, a0, b, b0, c, c0, m, k, accumulate: None


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
        _wide_rows(a, a0, b, b0, c, c0, m, k, accumulate)
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
