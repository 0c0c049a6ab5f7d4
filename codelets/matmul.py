"""Matrix-multiply vertices: the AMP block product and the reduction of its partials.

`MatMulBlock` is the counterpart of poplin's ConvPartial1x1Out supervisor vertex (the AMP unit) used
as a matrix product: out[m, n] (=|+=) a[m, k] @ b[k, n], all three contiguous on the vertex's tile,
row-major. The matmul as a 1x1 convolution: the m rows are the field (output positions, split over
the 6 workers), k is the input channels and n the output channels.

`MatMulReducePartials` sums P partial blocks laid out one after another ([P, len] contiguous) into
`out` (float32, or float16 rounded to nearest even): poplin's ReduceAdd over the k-split of a plan.

The kernels do their arithmetic at the host's BLAS speed: each vertex hands its contiguous blocks of
tile memory to SciPy's `sgemm` (codelets/_sgemm.py: the routine `np.dot` uses, without Numba's
per-call wrapping, which costs more than a small block's arithmetic). float16 operands are widened to
float32 first, as the AMP accumulates halves into float partials, and a float16 output is rounded
to nearest even. Both conversions work on the bits of whole blocks (`_widen_half`, `_narrow_half`,
through ipu.half's run converters): exactly what `ipu.load` / `ipu.store` give, at about 1 ns per
element instead of 5-10.
"""
from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

import ipu
from ipu import IN, INOUT, OUT, Codelet, Field
from ipu.half import f32_to_half_bits, half_bits_to_f32

from ._borrow import borrow, piece
from ._sgemm import gemm_rows, gemm_scratch

_FLOATS = (ipu.FLOAT32, ipu.FLOAT16)

# ------------------------------------------------------------------------------------------------
# kernels


def _block_product(ov, o0, av, a0, bv, b0, m, k, n, accumulate, scratch):  # pragma: no cover - Numba overload
    """ov[o0:o0 + m*n] (=|+=) av[a0:] @ bv[b0:] in float32 arithmetic, written in ov's type."""
    raise NotImplementedError


def _is_f32(view) -> bool:
    return isinstance(view, types.Array) and view.dtype == types.float32


@njit(cache=True)
def _widen_half(view, start, count):
    """float32 copy of `count` halves of a half view from `start` (exactly ipu.load's values)."""
    out = np.empty(count, np.float32)
    half_bits_to_f32(view[start:start + count].view(np.uint16), out)
    return out


@njit(cache=True)
def _narrow_half(view, start, values):
    """Write float32 `values` into a half view from `start`, rounded to nearest even (ipu.store)."""
    f32_to_half_bits(values, view[start:start + values.size].view(np.uint16))


def _as_f32(view, start, count):  # pragma: no cover - replaced by the Numba overload
    """(a float32 array, the block's offset in it): a float32 view itself, else a widened copy."""
    raise NotImplementedError


def _all_f32(a, b, c):  # pragma: no cover - replaced by the Numba overload
    """True (a compile-time constant) when the three views are float32."""
    raise NotImplementedError


@overload(_as_f32, inline="always")
def _ov_as_f32(view, start, count):
    if _is_f32(view):
        return lambda view, start, count: (view, start)
    return lambda view, start, count: (_widen_half(view, start, count), 0)


@overload(_all_f32, inline="always")
def _ov_all_f32(a, b, c):
    flag = _is_f32(a) and _is_f32(b) and _is_f32(c)
    return lambda a, b, c: flag


@overload(_block_product, inline="always")
def _ov_block_product(ov, o0, av, a0, bv, b0, m, k, n, accumulate, scratch):
    """The general block product (float16 operands or output, or k = 0); the kernel calls
    gemm_rows itself for the all-float32 case, so that case only zeroes here (k = 0): a second
    inlined gemm_rows would cost seconds of compile for a branch never taken."""
    if _is_f32(ov) and _is_f32(av) and _is_f32(bv):
        def impl_zero(ov, o0, av, a0, bv, b0, m, k, n, accumulate, scratch):
            if not accumulate:
                for i in range(m * n):
                    ov[o0 + i] = 0.0
        return impl_zero
    if _is_f32(ov):
        def impl(ov, o0, av, a0, bv, b0, m, k, n, accumulate, scratch):
            if k != 0:
                a, a_at = _as_f32(av, a0, m * k)
                b, b_at = _as_f32(bv, b0, k * n)
                gemm_rows(a, a_at, b, b_at, ov, o0, m, k, n, accumulate, scratch)
            elif not accumulate:
                ov[o0:o0 + m * n] = 0.0
    else:
        def impl(ov, o0, av, a0, bv, b0, m, k, n, accumulate, scratch):
            c = np.zeros(m * n, np.float32)
            if k != 0:
                a, a_at = _as_f32(av, a0, m * k)
                b, b_at = _as_f32(bv, b0, k * n)
                gemm_rows(a, a_at, b, b_at, c, 0, m, k, n, False, scratch)
            if accumulate:  # the float32 sum, rounded once to half
                c += _widen_half(ov, o0, m * n)
            _narrow_half(ov, o0, c)
    return impl


@njit(cache=True)
def _matmul_block_kernel(views, off, cnt, fp, ip):
    """All MatMulBlock vertices of a compute set: out (=|+=) a @ b per vertex, float32 arithmetic."""
    av = views[MM_F.a]
    bv = views[MM_F.b]
    ov = views[MM_F.out]
    scratch = gemm_scratch()
    all_f32 = _all_f32(av, bv, ov)
    for v in range(off.shape[0]):
        m = ip[v, MM_IP.m]
        k = ip[v, MM_IP.k]
        n = ip[v, MM_IP.n]
        acc = ip[v, MM_IP.accumulate] != 0
        if m == 0 or n == 0:
            continue
        if all_f32 and k != 0:
            # BLAS reads and writes tile memory in place, called right here: a helper taking the
            # arrays would count references per vertex (atomics), more than a 1x8x10 block's work
            gemm_rows(av, off[v, MM_F.a], bv, off[v, MM_F.b], ov, off[v, MM_F.out], m, k, n, acc, scratch)
        else:
            _block_product(ov, off[v, MM_F.out], av, off[v, MM_F.a], bv, off[v, MM_F.b], m, k, n, acc, scratch)


@njit(cache=True, inline="always")
def _gather_rows(view, ip, v, at, count, rows, width, into):
    """into[:rows * width] = the rows of a row-read field (Codelet.rows_kernel's segments from ip[v, at])."""
    for i in range(count):
        r0 = ip[v, at + 2 * i]
        r1 = ip[v, at + 2 * i + 2] if i + 1 < count else rows
        src = ip[v, at + 2 * i + 1]
        n = (r1 - r0) * width
        if src < 0 or src + n > view.size or r1 * width > into.size:
            raise IndexError("MatMulBlock: a row segment reaches outside its view")
        into[r0 * width:r0 * width + n] = view[src:src + n]


@njit(cache=True)
def _matmul_block_rows_kernel(views, off, cnt, fp, ip):
    """MatMulBlock vertices (float32) some of whose a or b rows are read where an exchange's
    sources hold them (ipu/forwarding.py): those operands are gathered into a scratch block first,
    then multiplied as _matmul_block_kernel does (the same gemm_rows on the same values)."""
    av = views[MM_F.a]
    bv = views[MM_F.b]
    ov = views[MM_F.out]
    scratch = gemm_scratch()
    nv = off.shape[0]
    la = lb = 1
    for v in range(nv):
        la = max(la, cnt[v, MM_F.a])
        lb = max(lb, cnt[v, MM_F.b])
    sa = np.empty(la, np.float32)
    sb = np.empty(lb, np.float32)
    at_a = MM_NIP + 2  # after the int parameters: S, then a's segment count, then S pairs, then b's
    for v in range(nv):
        at_b = MM_NIP + 3 + 2 * ip[v, MM_NIP]
        m = ip[v, MM_IP.m]
        k = ip[v, MM_IP.k]
        n = ip[v, MM_IP.n]
        acc = ip[v, MM_IP.accumulate] != 0
        if m == 0 or n == 0:
            continue
        if k == 0:
            if not acc:
                o0 = off[v, MM_F.out]
                for i in range(m * n):
                    ov[o0 + i] = 0.0
            continue
        a, a0 = av, off[v, MM_F.a]
        b, b0 = bv, off[v, MM_F.b]
        if ip[v, at_a - 1] > 0:
            _gather_rows(av, ip, v, at_a, ip[v, at_a - 1], m, k, sa)
            a, a0 = sa, 0
        if ip[v, at_b - 1] > 0:
            _gather_rows(bv, ip, v, at_b, ip[v, at_b - 1], k, n, sb)
            b, b0 = sb, 0
        gemm_rows(a, a0, b, b0, ov, off[v, MM_F.out], m, k, n, acc, scratch)


@njit(cache=True)
def _sum_partials(parts, n, num, acc):
    """acc[:n] = sum over p of parts[p*n:][:n], in float32 from 0 in order p = 0, 1, ... Long
    rows (32 or more, enough for the vector loop) are summed row by row, rows under 8 down their
    columns, and the rest down their columns eight at a time in eight registers (independent
    chains, so the adds overlap instead of waiting on each other), then one column at a time."""
    if n < 8:
        for j in range(n):
            total = np.float32(0.0)
            for p in range(num):
                total += parts[p * n + j]
            acc[j] = total
        return
    if n >= 32:
        acc[:] = 0.0
        for p in range(num):
            row = borrow(parts, p * n, n)  # inside `parts` (checked by the caller)
            for j in range(n):
                acc[j] += row[j]
        return
    j = 0
    while j + 8 <= n:
        s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = np.float32(0.0)
        for p in range(num):
            c = borrow(parts, p * n + j, 8)
            s0 += c[0]
            s1 += c[1]
            s2 += c[2]
            s3 += c[3]
            s4 += c[4]
            s5 += c[5]
            s6 += c[6]
            s7 += c[7]
        acc[j] = s0
        acc[j + 1] = s1
        acc[j + 2] = s2
        acc[j + 3] = s3
        acc[j + 4] = s4
        acc[j + 5] = s5
        acc[j + 6] = s6
        acc[j + 7] = s7
        j += 8
    for c in range(j, n):
        total = np.float32(0.0)
        for p in range(num):
            total += parts[p * n + c]
        acc[c] = total


def _reduce_into(ov, o0, pv, p0, n, num, scratch):  # pragma: no cover - replaced by the Numba overload
    """ov[o0:o0 + n] = the float32 sums of the partials, in ov's type."""
    raise NotImplementedError


@overload(_reduce_into)
def _ov_reduce_into(ov, o0, pv, p0, n, num, scratch):
    if _is_f32(pv):
        if _is_f32(ov):  # summed straight into the output (a variable apart from the partials)
            return lambda ov, o0, pv, p0, n, num, scratch: _sum_partials(piece(pv, p0, n * num), n, num,
                                                                         piece(ov, o0, n))

        def impl(ov, o0, pv, p0, n, num, scratch):
            acc = borrow(scratch, 0, n)
            _sum_partials(piece(pv, p0, n * num), n, num, acc)
            _narrow_half(ov, o0, acc)
        return impl
    # half partials: widened exactly, summed in float32, rounded once into a half output
    if _is_f32(ov):
        return lambda ov, o0, pv, p0, n, num, scratch: _sum_partials(_widen_half(pv, p0, n * num), n, num,
                                                                     piece(ov, o0, n))

    def impl_half(ov, o0, pv, p0, n, num, scratch):
        acc = borrow(scratch, 0, n)
        _sum_partials(_widen_half(pv, p0, n * num), n, num, acc)
        _narrow_half(ov, o0, acc)
    return impl_half


@njit(cache=True)
def _reduce_partials_rows_kernel(views, off, cnt, fp, ip):
    """MatMulReducePartials vertices (float32 partials) some of whose partial rows are read where an
    exchange's sources hold them (ipu/forwarding.py): those partials are gathered into a scratch
    block first, then summed as _reduce_partials_kernel sums them."""
    pv = views[RP_F.partials]
    ov = views[RP_F.out]
    longest = 1
    most = 1
    for v in range(off.shape[0]):
        longest = max(longest, cnt[v, RP_F.out])
        most = max(most, cnt[v, RP_F.partials])
    scratch = np.empty(longest, np.float32)
    rows = np.empty(most, np.float32)
    for v in range(off.shape[0]):
        n = cnt[v, RP_F.out]
        if n == 0:
            continue
        num = ip[v, RP_IP.num_partials]
        if ip[v, RP_NIP + 1] > 0:
            _gather_rows(pv, ip, v, RP_NIP + 2, ip[v, RP_NIP + 1], num, n, rows)
            _reduce_into(ov, off[v, RP_F.out], rows, 0, n, num, scratch)
        else:
            _reduce_into(ov, off[v, RP_F.out], pv, off[v, RP_F.partials], n, num, scratch)


@njit(cache=True)
def _reduce_partials_kernel(views, off, cnt, fp, ip):
    """All MatMulReducePartials vertices: out = sum over p of partials[p, :] (float32 sums, in order
    p = 0, 1, ... from 0), written in out's type; a float16 output is summed in one scratch row
    that serves every vertex."""
    pv = views[RP_F.partials]
    ov = views[RP_F.out]
    longest = 0
    for v in range(off.shape[0]):
        longest = max(longest, cnt[v, RP_F.out])
    scratch = np.empty(longest, np.float32)
    for v in range(off.shape[0]):
        n = cnt[v, RP_F.out]
        if n != 0:
            _reduce_into(ov, off[v, RP_F.out], pv, off[v, RP_F.partials], n, ip[v, RP_IP.num_partials], scratch)


# ------------------------------------------------------------------------------------------------
# cost models


def amp_geometry(is_half: bool, target, float8: bool = False) -> dict:
    """The AMP unit of a target, as poplin's 1x1 convolution vertex uses it.

    - conv units per tile: 16 on Mk2, 8 on Mk1 (poplar Target getFp32InFp32OutConvUnitsPerTile /
      getFp16InFp32OutConvUnitsPerTile). We derive it from the target's vendor peak (DESIGN.md
      section 6): half peak FLOP/cycle = 2 x 16 input channels x units / 4 cycles, so
      units = peak_half / 8 (128 -> 16 on GC200, 64 -> 8 on GC2);
    - input channels per group (weights per conv unit): 8 for float, 16 for half
      (convChainLength x convInputLoadElems in poplin ConvPartial1x1Out's estimator);
    - output channels per group: one per conv unit, so one output pass per group;
    - core loop: 8 worker cycles per output position for float, 4 for half
      (poplin PerformanceEstimation.hpp, getConvPartial1x1SupervisorInnerLoopCycleEstimate);
    - weight loads per pass: units x 32 weight bytes per unit / coefficient load bytes per cycle
      (16 with ld128 on Mk2, 8 on Mk1) = 32 cycles (getConvPartialAmpSupervisorWeightLoadCycleEstimate).

    Peak: float 8 in x 16 out per 8 cycles = 16 MACs/cycle (32 FLOP); half 16 x 16 per 4 cycles
    = 64 MACs/cycle (128 FLOP), the vendor peaks of 62.5 / 250 TFLOPS on 1472 tiles at 1.33 GHz.

    float8 (the Bow-era AMP, see codelets/matmul_float8.py for the source): twice the half rate,
    32 input channels per group at the half core loop; its weights are one byte, so the weight
    loads take the same cycles as half's.
    """
    units = max(1, int(target.peak_flops_per_cycle_half) // 8)
    if float8:
        return {"units": units, "in_chans": 32, "out_chans": units, "core_cycles": 4,
                "weight_loads": units * 32 // (16 if units >= 16 else 8)}
    in_chans = 16 if is_half else 8
    coeff_bytes_per_cycle = 16 if units >= 16 else 8
    return {
        "units": units,
        "in_chans": in_chans,
        "out_chans": units,
        "core_cycles": 4 if is_half else 8,
        "weight_loads": units * in_chans * (2 if is_half else 4) // coeff_bytes_per_cycle,
    }


def _amp_worker_cycles_1x1(e, zeroing: bool, float_acts: bool, float_partials: bool, units: int, core: int):
    """Worker (thread) cycles of one AMP pass over e >= 1 output positions, poplin's current
    getConvPartial1x1SupervisorInnerLoopCycleEstimateHalfFloat (lib/poplin/PerformanceEstimation.hpp,
    the version with numConvUnits): float activations 47 / 46 / 46 + 8 (e - 3) for 1 / 2 / >= 3
    positions, + 2 + 8 per position when zeroing (8 zeroing cycles per position with 16 conv units,
    4 with float partials, else 2); half activations on the common half / float-partials path
    31 / 40 / 37 + 4 (e - 3) when zeroing (+1 more when not); less the worker-state retention
    saving (7 for half activations with float partials or 16 units)."""
    e = np.asarray(e, np.int64)
    zc = 1 if zeroing else 0
    zero_per = 8 if (float_acts and units == 16) else (4 if float_partials else 2)
    common = (not float_acts and units == 16) or float_partials
    if float_acts:
        c1 = 47 + (2 + zero_per) * zc
        c2 = 46 + (2 + zero_per * 2) * zc
        cn = 46 + (2 + zero_per * e) * zc + (e - 3) * core
    elif common:
        extra = 1 if zeroing else 2
        c1 = 31 + extra + 0 * e
        c2 = 40 + extra + 0 * e
        cn = (37 if zeroing else 38) + (e - 3) * core
    else:
        c1 = 39 + (2 + zero_per) * zc
        c2 = 40 + (2 + zero_per * 2) * zc
        cn = 41 + (2 + zero_per * e) * zc + (e - 3) * core
    saving = 7 if (not float_acts and (float_partials or units == 16)) else 0
    return np.where(e == 1, c1, np.where(e == 2, c2, cn)) - saving


def matmul_block_cycles(m, k, n, float_acts: bool, float_partials: bool, target, float8: bool = False):
    """Tile cycles of one MatMulBlock (AMP) supervisor vertex computing an m x k by k x n product.

    Source: poplin lib/poplin/PerformanceEstimation.hpp, getConvPartial1x1SupervisorCycleEstimate
    (the version with numConvUnits and a QUARTER path) with numConvGroups = 1, numInGroups =
    ceil(k / in_chans), numOutGroups = ceil(n / out_chans), one output pass per group (out_chans =
    conv units), and the m positions split over the 6 workers (ceil / floor of m / 6; a worker with
    no positions has an empty worklist and costs nothing):

      inner(zeroing) = max(6 x slowest worker, 6 x fastest worker + 14)   (_amp_worker_cycles_1x1)
      cycles = 50 + 6 x (r1 + r2 x (in_groups - 1))                     supervisor, state retention
             + 12 + c
             + (in_groups - 1) x (16 - c + out_groups x (19 + 6 + loads + inner(no zeroing)))
             + 11 + out_groups x (19 - c + 7 + loads + inner(zeroing))   first group zeroes partials

    with loads = 32 weight-load cycles per pass (getConvPartialAmpSupervisorWeightLoadCycleEstimate),
    c = 1 on the common half / float-partials code path (float partials, or half activations with
    16 conv units), and (r1, r2) = (7, 3) for half activations with float partials or 16 units,
    else (0, 0). k = 0 zeroes the output (poplin's zero supervisor vertex: 6 x (vectors per worker
    + 14 - 9) for float, + 15 - 10 for half). float8 keeps the model codelets/matmul_float8.py
    describes (the half vertex with 32 input channels per group).
    """
    m = np.asarray(m, np.int64)
    k = np.asarray(k, np.int64)
    n = np.asarray(n, np.int64)
    g = amp_geometry(not float_acts, target, float8)
    w = target.worker_contexts
    in_groups = -(-k // g["in_chans"])
    out_groups = -(-n // g["out_chans"])
    hi = -(-m // w)
    lo = m // w
    loads = g["weight_loads"]
    ig1 = np.maximum(in_groups - 1, 0)
    if float8:
        cycles = _float8_block_cycles(hi, lo, in_groups, out_groups, ig1, loads, g, w)
    else:
        units = g["units"]

        def inner(zeroing):
            a = _amp_worker_cycles_1x1(np.maximum(hi, 1), zeroing, float_acts, float_partials, units,
                                       g["core_cycles"])
            b = np.where(lo > 0, _amp_worker_cycles_1x1(np.maximum(lo, 1), zeroing, float_acts, float_partials,
                                                        units, g["core_cycles"]), 0)
            # fewer positions can cost more (the 1 / 2 position paths); an idle worker costs nothing
            slow = np.maximum(a, b)
            fast = np.where((lo > 0) | (hi == 0), np.minimum(a, b), 0)
            return np.maximum(w * slow, w * fast + 14)

        c = 1 if ((not float_acts and units == 16) or float_partials) else 0
        r1, r2 = (7, 3) if (not float_acts and (float_partials or units == 16)) else (0, 0)
        cycles = (50 + w * (r1 + r2 * ig1) + 12 + c
                  + ig1 * (15 - c + 1 + out_groups * (19 + 6 + loads + inner(False)))
                  + 10 + 1 + out_groups * (19 - c + 7 + loads + inner(True)))
    # k == 0: nothing to multiply; the output block is zeroed by a zero vertex
    vec = 2 if float_partials else 4
    per_worker = -(-(m * n) // w)
    zero = w * (-(-per_worker // vec) + (14 - 9 if float_partials else 15 - 10))
    return np.where(in_groups == 0, zero, cycles).astype(np.int64)


def _float8_block_cycles(hi, lo, in_groups, out_groups, ig1, loads, g, w):
    """The float8 AMP block as codelets/matmul_float8.py models it: poplin's older half 1x1 vertex
    estimate (half activations, half partials) with 32 input channels per group."""
    def worker(e, zeroing):
        zc = 1 if zeroing else 0
        c0 = np.full_like(e, 24)
        c1 = 39 + (2 + 2) * zc
        c2 = 40 + (2 + 2 * 2) * zc
        cn = 41 + (2 + 2 * e) * zc + (e - 3) * g["core_cycles"]
        return np.where(e == 0, c0, np.where(e == 1, c1, np.where(e == 2, c2, cn)))

    def inner(zeroing):
        a, b = worker(hi, zeroing), worker(lo, zeroing)
        return np.maximum(w * np.maximum(a, b), w * np.minimum(a, b) + 14)

    return (50 + 12 + ig1 * (16 + out_groups * (19 + 6 + loads + inner(False)))
            + 11 + out_groups * (19 + 7 + loads + inner(True)))


def reduce_partials_cycles(out_size, num_partials, out_float: bool, workers: int = 6,
                           data_path_bits: int = 64, partials_float: bool = True):
    """Tile cycles of one MatMulReducePartials supervisor vertex (float32 or float16 partials).

    Source: poplin PerformanceEstimation.hpp. P >= 2: getReduceCycleEstimate (the multi-input
    ReduceAdd, no single-input fast path): the workers take an accumulator vector of outputs per
    loop (4 float partials / 8 half) at (vector / partials per 64-bit load + 1 pointer load) cycles
    per partial plus 7 / 6 (float partials, float / half out) or 9 / 8 (half partials) per loop;
    remainders cost 2P + 13 (float) / 2P + 11 (half); 32 fixed; x 6 workers. P = 1: a cast
    (estimateCastCycles: (max(loads of 2 floats / 4 halves, stores of 2 floats / 4 halves) per
    worker + 26) x 6). P = 0: the zero supervisor vertex.
    """
    n = np.asarray(out_size, np.int64)
    p = np.asarray(num_partials, np.int64)
    acc = 4 if partials_float else 8  # accumulator vector width
    per_dp = data_path_bits // (32 if partials_float else 16)
    per_loop = acc // min(acc, per_dp) + 1
    loops = n // acc + (n & 1 != 0) + (n & 2 != 0) + (0 if partials_float else (n & 4 != 0))
    ldw = loops // workers
    rem = loops % workers
    base = np.full_like(n, 32)
    base = base + np.where((rem != 0) & ((n & (acc - 1)) != 0), 2 * p + (13 if partials_float else 11), 0)
    ldw = ldw + np.where((rem != 0) & ((n & (acc - 1)) == 0), 1, 0)
    per_out = (7 if out_float else 6) if partials_float else (9 if out_float else 8)
    red = workers * (base + (per_loop * p + per_out) * ldw)
    out_vec = 2 if out_float else 4
    in_vec = 2 if partials_float else 4
    per_worker = -(-n // workers)
    cast = workers * (np.maximum(-(-per_worker // in_vec), -(-per_worker // out_vec)) + 26)
    zero = workers * (-(-per_worker // out_vec) + (14 - 9 if out_float else 15 - 10))
    return np.where(p >= 2, red, np.where(p == 1, cast, zero)).astype(np.int64)


# ------------------------------------------------------------------------------------------------
# codelets


@ipu.register
class MatMulBlock(Codelet):
    """out[m, n] (=|+=) a[m, k] @ b[k, n]; params m, k, n, accumulate (0: overwrite, 1: add)."""

    name = "MatMulBlock"
    fields = (Field("a", IN), Field("b", IN), Field("out", INOUT))
    int_params = ("m", "k", "n", "accumulate")
    supervisor = True
    allowed_types = (_FLOATS, _FLOATS, _FLOATS)
    poplibs_vertices = ("poplin::ConvPartial1x1Out",)

    def kernel(self):
        return _matmul_block_kernel

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt, fp, ip)
        if t.type.a != t.type.b:
            raise TypeError(f"MatMulBlock: a is {t.type.a.name} but b is {t.type.b.name}")
        if t.type.a == ipu.FLOAT32 and t.type.out != ipu.FLOAT32:
            raise TypeError("MatMulBlock: float32 operands need a float32 output")
        m, k, n = t.m, t.k, t.n
        if np.any(m < 0) or np.any(k < 0) or np.any(n < 0):
            raise ValueError("MatMulBlock: m, k and n must be >= 0")
        c = t.count
        bad = (c.a != m * k) | (c.b != k * n) | (c.out != m * n)
        if np.any(bad):
            v = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"MatMulBlock: vertex {v} has m, k, n = {m[v]}, {k[v]}, {n[v]} but its fields hold "
                f"a {c.a[v]}, b {c.b[v]}, out {c.out[v]} elements (need m*k, k*n, m*n)"
            )

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt, fp, ip)
        float_acts = t.type.a == ipu.FLOAT32
        float_partials = t.type.out == ipu.FLOAT32
        return matmul_block_cycles(t.m, t.k, t.n, float_acts, float_partials, target)

    def calibration_vertex(self, vertex, types, n, params):
        (t,) = types
        m, k, nn = (int(params[x]) for x in ("m", "k", "n"))
        if m * nn != n:
            raise KeyError(f"n ({n}) must be m x n ({m} x {nn}) outputs")
        return ipu.Vertex({"a": t, "b": t, "out": ipu.FLOAT32}, {"a": m * k, "b": k * nn, "out": m * nn},
                          {"m": m, "k": k, "n": nn, "accumulate": 0})

    def code_bytes(self, types):
        # ConvPartial1x1Out supervisor + worker assembly: ~1.5 KiB (assumption, the order of the
        # poplin conv_partial_1x1 .S object code)
        return 1536

    def reads_inout(self, field, ip):
        # out is overwritten (never read) where accumulate is 0: the kernel's `acc` flag
        return ip[:, MM_IP.accumulate] != 0 if field == "out" else None

    row_fields = ("a", "b")

    def read_rows(self, field, types, cnt, ip):
        # the rows kernel gathers float32 operands (rows of k for a, of n for b)
        if field not in self.row_fields or any(t != ipu.FLOAT32 for t in types):
            return None
        return ip[:, MM_IP.k if field == "a" else MM_IP.n]

    def rows_kernel(self):
        return _matmul_block_rows_kernel

    def state_bytes(self):
        # pointers and sizes of the three fields and the parameters, plus the per-worker worklists
        # (6 workers x 3 entries x 2 bytes) the AMP vertex carries
        return super().state_bytes() + 36

    def reference(self, a, b, out=None, accumulate=False):
        c = a.astype(np.float32) @ b.astype(np.float32)
        if accumulate and out is not None:
            c = out.astype(np.float32) + c
        dt = out.dtype if out is not None else np.float32
        return c.astype(dt)


@ipu.register
class MatMulReducePartials(Codelet):
    """out[len] = sum over p of partials[p, len] (float32 or float16 partials, summed in float32;
    out float32 or float16)."""

    name = "MatMulReducePartials"
    fields = (Field("partials", IN), Field("out", OUT))
    int_params = ("num_partials",)
    supervisor = True
    allowed_types = (_FLOATS, _FLOATS)
    poplibs_vertices = ("poplin::ReduceAdd",)

    def kernel(self):
        return _reduce_partials_kernel

    row_fields = ("partials",)

    def read_rows(self, field, types, cnt, ip):
        # the rows kernel gathers float32 partials, rows of the output's length
        if field != "partials" or self.table(types, cnt).type.partials != ipu.FLOAT32:
            return None
        return cnt[:, RP_F.out]

    def rows_kernel(self):
        return _reduce_partials_rows_kernel

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt, fp, ip)
        if np.any(t.num_partials < 0):
            raise ValueError("MatMulReducePartials: num_partials must be >= 0")
        if np.any(t.count.partials != t.num_partials * t.count.out):
            raise ValueError("MatMulReducePartials: partials must hold num_partials x len(out) elements")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt, fp, ip)
        return reduce_partials_cycles(t.count.out, t.num_partials, t.type.out == ipu.FLOAT32, target.worker_contexts,
                                      partials_float=t.type.partials == ipu.FLOAT32)

    def calibration_vertex(self, vertex, types, n, params):
        if len(types) != 2:
            raise KeyError("ReduceAdd's dtype is PARTIALS->OUT, e.g. float->half")
        partials, out = types
        p = int(params["numPartials"])
        return ipu.Vertex({"partials": partials, "out": out}, {"partials": p * n, "out": n}, {"num_partials": p})

    def code_bytes(self, types):
        # poplin ReduceAdd supervisor + worker assembly: ~0.5 KiB (assumption)
        return 512

    def reference(self, partials, num_partials, length, out_dtype=np.float32):
        p = np.asarray(partials, np.float32).reshape(num_partials, length)
        acc = np.zeros(length, np.float32)
        for row in p:
            acc += row
        return acc.astype(out_dtype)


# the kernels' columns, by name
MM_F, MM_IP = MatMulBlock.F, MatMulBlock.IP
MM_NIP = len(MatMulBlock.int_params)  # where the rows kernel's segments start in ip
RP_F, RP_IP = MatMulReducePartials.F, MatMulReducePartials.IP
RP_NIP = len(MatMulReducePartials.int_params)
