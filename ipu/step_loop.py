"""The compiled step loop: `_run_ops` walks a segment's op table in one Numba call.

ipu/native.py cuts a program into segments and builds their tables; this module is what runs
them. Ops: a step's cycles (and its log entry), a kernel group, a copy table (or a staged one), a
host stream element, loops, If / Switch and jumps. Nothing here is compiled per program.

Calling many kernels from one compiled loop: each kernel group's kernel is compiled for the
argument types the Python path uses, and the loop calls that overload's native entry point by
address (`_make_caller`: one Numba intrinsic per number of fields, which builds the typed views
of tile memory in place and calls through Numba's own calling convention). Every 1-D view has the
same machine representation whatever its element type, so the loop itself is compiled once
(and cached) for all programs.

Threads: a group or table the plan marks `SPLIT` runs on every thread, in contiguous chunks the
threads take in turn (an atomic counter), so a thread the host deschedules delays the step by one
chunk, not by its share; one marked `BIG` runs the replicas at once. Each vertex and run computes
what it computes alone, so results do not depend on the thread count or on who ran which chunk.
Host stream buffers arrive by address (the caller keeps them alive through the call).
"""
from __future__ import annotations

import os

import numpy as np
from llvmlite import ir
from numba import carray, njit, prange, typeof, types
from numba.core import cgutils
from numba.core.dispatcher import Dispatcher
from numba.extending import intrinsic

from .copytables import copy_runs, copy_runs_staged

__all__ = ["BIG", "BOOL", "COPY", "END", "FLOAT", "IF", "JUMP", "KERNEL", "LOOP", "MAX_DEPTH", "MAX_FIELDS", "SIGNED",
           "SMALL", "SPLIT", "STAGED", "STEP", "STREAM", "SWITCH", "UNSIGNED", "kernel_address", "kernel_signature",
           "run_ops"]

# OpenMP workers that spin between parallel steps take the core the step loop itself needs (and
# stall badly when the host is shared): let them sleep unless the user chose otherwise. Read by
# libgomp when Numba first starts its thread pool.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

MAX_FIELDS = 8  # kernels with more fields run through the Python path

# op codes of a segment's table (rows of int64[3])
STEP, KERNEL, COPY, STAGED, LOOP, END, STREAM, IF, SWITCH, JUMP = range(10)
# how a branch condition is read (its storage type)
SIGNED, UNSIGNED, FLOAT, BOOL = range(4)
# how a group or table may use threads: not at all (small), replicas at once, or split in parts
SMALL, BIG, SPLIT = range(3)
MAX_DEPTH = 64
CHUNKS_PER_THREAD = 8  # a split group or table is cut in this many chunks per thread, taken in turn


# ------------------------------------------------------------------------------------------------
# calling a kernel by address


def _make_caller(nfields: int):
    view_t = types.Array(types.uint8, 1, "C")
    tup_t = types.UniTuple(view_t, nfields)

    @intrinsic
    def call(typingctx, addr, mem, isz, off, cnt, fp, ip):
        sig = types.int32(addr, mem, isz, off, cnt, fp, ip)

        def codegen(context, builder, signature, args):
            a_addr, a_mem, a_isz, a_off, a_cnt, a_fp, a_ip = args
            memv = context.make_array(signature.args[1])(context, builder, a_mem)
            iszv = context.make_array(signature.args[2])(context, builder, a_isz)
            nbytes = cgutils.unpack_tuple(builder, memv.shape, 1)[0]
            views = []
            for f in range(nfields):
                s = builder.load(builder.gep(iszv.data, [ir.Constant(ir.IntType(64), f)]))
                v = context.make_array(view_t)(context, builder)
                context.populate_array(v, data=memv.data, shape=cgutils.pack_array(builder, [builder.sdiv(nbytes, s)]),
                                       strides=cgutils.pack_array(builder, [s]), itemsize=s, meminfo=memv.meminfo)
                views.append(v._getvalue())
            tup = context.make_tuple(builder, tup_t, views)
            argtypes = [tup_t] + list(signature.args[3:])
            fnty = context.call_conv.get_function_type(types.none, argtypes)
            fn = builder.inttoptr(a_addr, fnty.as_pointer())
            status, _ = context.call_conv.call_function(builder, fn, types.none, argtypes,
                                                        [tup, a_off, a_cnt, a_fp, a_ip])
            return builder.select(status.is_ok, ir.Constant(ir.IntType(32), 0), ir.Constant(ir.IntType(32), 1))

        return sig, codegen

    return call


_c1, _c2, _c3, _c4, _c5, _c6, _c7, _c8 = (_make_caller(f) for f in range(1, MAX_FIELDS + 1))


@njit(cache=True, nogil=True)
def _call_kernel(addr, nf, mem, isz, off, cnt, fp, ip):
    if nf == 1:
        return _c1(addr, mem, isz, off, cnt, fp, ip)
    if nf == 2:
        return _c2(addr, mem, isz, off, cnt, fp, ip)
    if nf == 3:
        return _c3(addr, mem, isz, off, cnt, fp, ip)
    if nf == 4:
        return _c4(addr, mem, isz, off, cnt, fp, ip)
    if nf == 5:
        return _c5(addr, mem, isz, off, cnt, fp, ip)
    if nf == 6:
        return _c6(addr, mem, isz, off, cnt, fp, ip)
    if nf == 7:
        return _c7(addr, mem, isz, off, cnt, fp, ip)
    return _c8(addr, mem, isz, off, cnt, fp, ip)


_A2I = typeof(np.zeros((1, 1), np.int64))
_A2F = typeof(np.zeros((1, 1), np.float64))


def kernel_signature(storages) -> tuple:
    """The argument types the Python path calls a codelet kernel with: views of tile memory as
    the fields' storage dtypes, then the vertices' offsets, counts and parameters."""
    return (typeof(tuple(np.zeros(1, s) for s in storages)), _A2I, _A2I, _A2F, _A2I)


def kernel_address(group):
    """The native entry point of the group's kernel for the Python path's argument types, or
    None when the kernel cannot be called from compiled code."""
    kern = group.codelet.kernel()
    if not isinstance(kern, Dispatcher) or not 1 <= len(group.types) <= MAX_FIELDS:
        return None
    sig = kernel_signature([t.storage for t in group.types])
    try:
        kern.compile(sig)
        cres = kern.overloads[sig]
    except Exception:  # noqa: BLE001 - a kernel that does not compile for these types: Python path
        return None
    return int(cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name))


# ------------------------------------------------------------------------------------------------
# the loop


@intrinsic
def _byte_pointer(typingctx, address):
    """A uint8 pointer from an address (a host stream buffer the caller keeps alive)."""
    sig = types.CPointer(types.uint8)(types.int64)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(signature.return_type))

    return sig, codegen


@njit(cache=True, nogil=True, inline="always")
def _unsigned_le(m, off, size):
    """The unsigned little-endian integer of `size` bytes at m[off] (from the bytes, not a view of
    another type: each `.view` compiles Numba's layout checks, a second of CPU on a new install)."""
    v = np.int64(0)
    for i in range(size):
        v |= np.int64(m[off + i]) << (8 * i)
    return v


@njit(cache=True, nogil=True)
def _condition(m, off, kind, size):
    """A branch condition as the Python walk reads it: the scalar's value (float16: its bits);
    a float becomes 1 when nonzero (If only: NaN counts as nonzero, as `if v` does)."""
    if kind == FLOAT:  # float32: zero when every bit but the sign is clear (+0 and -0)
        return 0 if _unsigned_le(m, off, 4) & 0x7FFFFFFF == 0 else 1
    if kind == BOOL:
        return 1 if m[off] != 0 else 0
    n = size if size < 4 else 4  # 1, 2 or 4 bytes (the device's integer types)
    v = _unsigned_le(m, off, n)
    if kind == SIGNED and v >= np.int64(1) << (8 * n - 1):
        v -= np.int64(1) << (8 * n)
    return v


@njit(cache=True, nogil=True)
def _call_range(addr, nf, m, isz, off_all, cnt_all, fp_all, ip_all, o0, f0, i0, nfp, nip, v0, v1):
    """The group's vertices [v0, v1): their rows of the flat tables, then the kernel."""
    k = v1 - v0
    return _call_kernel(addr, nf, m, isz, off_all[o0 + v0 * nf:o0 + v1 * nf].reshape((k, nf)),
                        cnt_all[o0 + v0 * nf:o0 + v1 * nf].reshape((k, nf)),
                        fp_all[f0 + v0 * nfp:f0 + v1 * nfp].reshape((k, nfp)),
                        ip_all[i0 + v0 * nip:i0 + v1 * nip].reshape((k, nip)))


@intrinsic
def _take(typingctx, counter):
    """counter[0] += 1 as one atomic step; returns the value before (the index of the chunk taken)."""
    if not (isinstance(counter, types.Array) and counter.dtype == types.int64):
        return None
    sig = types.int64(counter)

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        return builder.atomic_rmw("add", data, ir.Constant(ir.IntType(64), 1), "monotonic")

    return sig, codegen


@njit(cache=True, nogil=True, parallel=True)
def _call_kernel_parts(parts, addr, nf, m, isz, off_all, cnt_all, fp_all, ip_all, nv, o0, f0, i0, nfp, nip):
    """The group's vertices on `parts` threads, in CHUNKS_PER_THREAD x parts contiguous chunks that
    each thread takes one after another while any are left: a thread the host deschedules holds
    back one chunk, not a whole share (static halves made the step wait on a busy host)."""
    chunks = min(nv, parts * CHUNKS_PER_THREAD)
    taken = np.zeros(1, np.int64)
    fails = np.zeros(parts, np.int32)
    for t in prange(parts):
        while True:
            c = _take(taken)
            if c >= chunks:
                break
            if _call_range(addr, nf, m, isz, off_all, cnt_all, fp_all, ip_all, o0, f0, i0, nfp, nip,
                           nv * c // chunks, nv * (c + 1) // chunks) != 0:
                fails[t] = 1
    return 1 if fails.any() else 0


@njit(cache=True, nogil=True)
def _copy_range(m, c_src, c_dst, c_n, a, b):
    copy_runs(m, m, c_src[a:b], c_dst[a:b], c_n[a:b])


@njit(cache=True, nogil=True, parallel=True)
def _call_kernel_reps(memory, reps, addr, nf, isz, off_all, cnt_all, fp_all, ip_all, nv, o0, f0, i0, nfp, nip):
    """The whole group on every replica, the replicas at once (their memories are apart)."""
    fails = np.zeros(reps.size, np.int32)
    for j in prange(reps.size):
        fails[j] = _call_range(addr, nf, memory[reps[j]], isz, off_all, cnt_all, fp_all, ip_all, o0, f0, i0, nfp, nip,
                               0, nv)
    return 1 if fails.any() else 0


@njit(cache=True, nogil=True, parallel=True)
def _copy_reps(memory, reps, c_src, c_dst, c_n, lo, hi):
    """The whole table on every replica, the replicas at once."""
    for j in prange(reps.size):
        _copy_range(memory[reps[j]], c_src, c_dst, c_n, lo, hi)


@njit(cache=True, nogil=True, parallel=True)
def _copy_parts(parts, m, c_src, c_dst, c_n, lo, hi):
    """The table's runs [lo, hi) on `parts` threads, in chunks taken as _call_kernel_parts takes them."""
    chunks = min(hi - lo, parts * CHUNKS_PER_THREAD)
    taken = np.zeros(1, np.int64)
    for t in prange(parts):
        while True:
            c = _take(taken)
            if c >= chunks:
                break
            _copy_range(m, c_src, c_dst, c_n, lo + (hi - lo) * c // chunks, lo + (hi - lo) * (c + 1) // chunks)


@njit(cache=True, nogil=True)
def run_ops(ops, memory, reps, clock, log_on, counts, room, log_ids, log_starts, nthreads,
             buf_addr, buf_len, s_per, s_perrep, s_own, s_pos, h_si, h_dir, h_r0, h_r1, h_src, h_dst, h_n,
             c_off, c_kind, c_size, w_k0, w_k1, w_default, w_keys, w_pcs,
             g_addr, g_nf, g_isz, g_nv, g_off0, g_nfp, g_fp0, g_nip, g_ip0, g_par, off_all, cnt_all, fp_all, ip_all,
             t_r0, t_r1, t_par, c_src, c_dst, c_n, s_src, s_dst, s_n, s_r0, s_r1):
    """Walk a segment's ops; returns (status, clock, steps executed, trace entries recorded, op
    index). With log_on, every executed step is counted in `counts` and the first `room` are
    traced. status != 0: the kernel of the group at that op raised (the caller re-runs it in
    Python for the message)."""
    pc = 0
    nops = ops.shape[0]
    nlog = 0
    executed = 0
    stack = np.zeros(MAX_DEPTH, np.int64)
    depth = 0
    while pc < nops:
        code = ops[pc, 0]
        a = ops[pc, 1]
        if code == STEP:
            if log_on:
                counts[a] += 1
                executed += 1
                if nlog < room:
                    log_ids[nlog] = a
                    log_starts[nlog] = clock
                    nlog += 1
            clock += ops[pc, 2]
        elif code == KERNEL:
            nv = g_nv[a]
            nf = g_nf[a]
            nfp = g_nfp[a]
            nip = g_nip[a]
            o0 = g_off0[a]
            f0 = g_fp0[a]
            i0 = g_ip0[a]
            isz = g_isz[a]
            addr = g_addr[a]
            if nthreads > 1 and reps.size > 1 and g_par[a] >= BIG:
                if _call_kernel_reps(memory, reps, addr, nf, isz, off_all, cnt_all, fp_all, ip_all, nv, o0, f0, i0,
                                     nfp, nip) != 0:
                    return 1, clock, executed, nlog, pc
                pc += 1
                continue
            parts = nthreads if (g_par[a] == SPLIT and nv >= nthreads) else 1
            for r in reps:
                m = memory[r]
                if parts == 1:
                    st = _call_range(addr, nf, m, isz, off_all, cnt_all, fp_all, ip_all, o0, f0, i0, nfp, nip, 0, nv)
                else:
                    st = _call_kernel_parts(parts, addr, nf, m, isz, off_all, cnt_all, fp_all, ip_all, nv, o0, f0, i0,
                                            nfp, nip)
                if st != 0:
                    return 1, clock, executed, nlog, pc
        elif code == COPY:
            lo = t_r0[a]
            hi = t_r1[a]
            if nthreads > 1 and reps.size > 1 and t_par[a] >= BIG:
                _copy_reps(memory, reps, c_src, c_dst, c_n, lo, hi)
                pc += 1
                continue
            parts = nthreads if t_par[a] == SPLIT else 1
            for r in reps:
                m = memory[r]
                if parts == 1:
                    copy_runs(m, m, c_src[lo:hi], c_dst[lo:hi], c_n[lo:hi])
                else:
                    _copy_parts(parts, m, c_src, c_dst, c_n, lo, hi)
        elif code == STAGED:
            r0 = s_r0[a]
            r1 = s_r1[a]
            for r in reps:
                copy_runs_staged(memory[r], s_src[r0:r1], s_dst[r0:r1], s_n[r0:r1])
        elif code == STREAM:  # the stream's next element: same layout as Engine.stream_element
            si = h_si[a]
            buf = carray(_byte_pointer(buf_addr[si]), buf_len[si])
            per = s_per[si]
            k = s_pos[si] % s_perrep[si]
            lo = h_r0[a]
            hi = h_r1[a]
            for r in reps:
                base = ((r if s_own[si] else 0) * s_perrep[si] + k) * per
                if h_dir[a]:
                    copy_runs(buf[base:base + per], memory[r], h_src[lo:hi], h_dst[lo:hi], h_n[lo:hi])
                else:
                    copy_runs(memory[r], buf[base:base + per], h_src[lo:hi], h_dst[lo:hi], h_n[lo:hi])
            s_pos[si] += 1
        elif code == IF:  # one replica (Plan.run_segment): nonzero runs the then-branch
            if _condition(memory[reps[0]], c_off[a], c_kind[a], c_size[a]) == 0:
                pc = ops[pc, 2]  # the else-branch
                continue
        elif code == SWITCH:
            value = _condition(memory[reps[0]], c_off[a], c_kind[a], c_size[a])
            w = ops[pc, 2]
            target = w_default[w]
            for k in range(w_k0[w], w_k1[w]):
                if w_keys[k] == value:
                    target = w_pcs[k]
                    break
            pc = target
            continue
        elif code == JUMP:
            pc = a
            continue
        elif code == LOOP:
            if a == 0:
                pc = ops[pc, 2]  # the matching END: skip the body
            else:
                stack[depth] = a
                depth += 1
        elif code == END:
            stack[depth - 1] -= 1
            if stack[depth - 1] > 0:
                pc = a  # the matching LOOP: the body starts after it
            else:
                depth -= 1
        pc += 1
    return 0, clock, executed, nlog, pc
