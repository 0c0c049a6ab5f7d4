"""Copy tables: how an element-wise copy becomes runs of bytes, and the compiled copiers.

A copy table lists runs (source byte offset, destination byte offset, bytes) that are contiguous
at both ends. The compiler builds them once (`runs`); the engine copies them with `copy_runs`,
one `memcpy` per run (LLVM's memcpy intrinsic: several times faster than an element loop for
the short runs exchanges are made of), and runs of 4-64 bytes as inlined fixed-size moves.
The compiled step loop copies a table's runs in destination order, neighbours merged
(`merged_runs`), a multicast's repeated blocks whole (`replicated_blocks`).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from . import interpreted

__all__ = ["CopyTable", "copy_runs", "copy_runs_staged", "merge_runs", "merged_runs", "replicated_blocks", "runs"]


class CopyTable:
    """The payload of an exchange step: byte runs within one replica's memory. `staged`: source
    and destination overlap (a copy within one variable), so the sources are read first.

    The runs are kept as int32 when every offset fits (12 bytes per run instead of 24: copy tables
    are the largest host structure of a big model after its simulated memory). They are one tuple
    (`runs`), replaced whole by `share` (the compiled step loop hands over its merged runs, so the
    tables are held once): a reader in another thread sees the old runs or the new, never a mix."""

    __slots__ = ("runs", "staged", "ordered")

    def __init__(self, src_off, dst_off, nbytes, staged: bool = False):
        arrays = [np.asarray(x, np.int64) for x in (src_off, dst_off, nbytes)]
        top = max((int(x.max(initial=0)) for x in arrays), default=0)
        dt = np.int32 if top < 2 ** 31 else np.int64
        self.runs = tuple(np.ascontiguousarray(x, dt) for x in arrays)
        self.staged = bool(staged)
        # 0: the runs may be copied in any order; k > 0: runs k.. copy blocks that runs ..k wrote
        # (`share` with `first`), so they follow them
        self.ordered = 0

    @property
    def src_off(self) -> np.ndarray:
        return self.runs[0]

    @property
    def dst_off(self) -> np.ndarray:
        return self.runs[1]

    @property
    def nbytes(self) -> np.ndarray:
        return self.runs[2]

    def share(self, src_off, dst_off, nbytes, first: int = 0) -> None:
        """Take the same copy as other runs: the table's runs in another order (destinations
        disjoint) or merged where contiguous at both ends, which copy the same bytes; with
        `first` > 0, runs from `first` on copy whole blocks of destination that the runs before
        them wrote (`replicated_blocks`), so they run after those."""
        self.runs = (src_off, dst_off, nbytes)
        self.ordered = int(first)

    def __setstate__(self, state):  # tables pickled before `ordered` existed
        self.ordered = 0
        for k, v in (state[1] if isinstance(state, tuple) else state).items():
            setattr(self, k, v)


def runs(sa, da, st, dt, isz):
    """Group an element-wise copy (byte addresses and tiles of every element at both ends) into
    runs contiguous at both ends on fixed tiles:
    (source offsets, destination offsets, bytes, source tiles, destination tiles)."""
    args = [np.ascontiguousarray(np.asarray(a, np.int64)) for a in (sa, da, st, dt)]
    return interpreted.call(_runs_kernel, args[0].size, *args, isz)


def merge_runs(src, dst, isz):
    """The copy runs of a copy given both ends as address runs (`Layout.run_addresses`: byte
    addresses, tiles and element counts of stretches in the copy's element order): the same
    table `runs` makes from per-element addresses, built in one pass over the runs."""
    (sa, st, sn), (da, dt, dn) = src, dst
    args = [np.ascontiguousarray(a, np.int64) for a in (sa, st, sn, da, dt, dn)]
    return interpreted.call(_merge_kernel, args[0].size + args[3].size, *args, isz)


@njit(cache=True)
def _merge_kernel(sa, st, sn, da, dt, dn, isz):
    cap = sa.shape[0] + da.shape[0]
    so = np.empty(cap, np.int64)
    do = np.empty(cap, np.int64)
    nb = np.empty(cap, np.int64)
    ts = np.empty(cap, np.int64)
    td = np.empty(cap, np.int64)
    i = 0
    j = 0
    ui = 0  # elements of source part i / destination part j already used
    uj = 0
    r = -1
    while i < sa.shape[0] and j < da.shape[0]:
        k = min(sn[i] - ui, dn[j] - uj)
        a = sa[i] + ui * isz
        b = da[j] + uj * isz
        if r >= 0 and so[r] + nb[r] == a and do[r] + nb[r] == b and ts[r] == st[i] and td[r] == dt[j]:
            nb[r] += k * isz  # continues the previous run at both ends
        else:
            r += 1
            so[r] = a
            do[r] = b
            nb[r] = k * isz
            ts[r] = st[i]
            td[r] = dt[j]
        ui += k
        uj += k
        if ui == sn[i]:
            i += 1
            ui = 0
        if uj == dn[j]:
            j += 1
            uj = 0
    return so[:r + 1].copy(), do[:r + 1].copy(), nb[:r + 1].copy(), ts[:r + 1].copy(), td[:r + 1].copy()


@njit(cache=True)
def _runs_kernel(sa, da, st, dt, isz):
    n = sa.shape[0]
    count = 0
    for i in range(n):
        if i == 0 or sa[i] != sa[i - 1] + isz or da[i] != da[i - 1] + isz or st[i] != st[i - 1] \
                or dt[i] != dt[i - 1]:
            count += 1
    so = np.empty(count, np.int64)
    do = np.empty(count, np.int64)
    nb = np.empty(count, np.int64)
    ts = np.empty(count, np.int64)
    td = np.empty(count, np.int64)
    r = -1
    for i in range(n):
        if i == 0 or sa[i] != sa[i - 1] + isz or da[i] != da[i - 1] + isz or st[i] != st[i - 1] \
                or dt[i] != dt[i - 1]:
            r += 1
            so[r] = sa[i]
            do[r] = da[i]
            nb[r] = 0
            ts[r] = st[i]
            td[r] = dt[i]
        nb[r] += isz
    return so, do, nb, ts, td


_Z = np.zeros(0, np.int64)
interpreted.register(_merge_kernel, _Z, _Z, _Z, _Z, _Z, _Z, 4)
interpreted.register(_runs_kernel, _Z, _Z, _Z, _Z, 4)


@intrinsic
def _memcpy(typingctx, dst, dst_off, src, src_off, count):
    """memcpy(dst + dst_off, src + src_off, count elements of the arrays' type)."""
    sig = types.void(dst, dst_off, src, src_off, count)

    def codegen(context, builder, signature, args):
        d, d_off, s, s_off, n = args
        dst_arr = context.make_array(signature.args[0])(context, builder, d)
        src_arr = context.make_array(signature.args[2])(context, builder, s)
        itemsize = context.get_abi_sizeof(context.get_data_type(signature.args[0].dtype))
        cgutils.raw_memcpy(builder, builder.gep(dst_arr.data, [d_off]), builder.gep(src_arr.data, [s_off]), n, itemsize)
        return context.get_dummy_value()

    return sig, codegen


def _fixed_copy(nbytes: int):
    """An intrinsic copying `nbytes` bytes (a constant, so LLVM emits a few vector moves in place
    of a library call) from byte `src_at` of `src` to byte `dst_at` of `dst`."""

    @intrinsic
    def copy(typingctx, dst, dst_at, src, src_at):
        sig = types.void(dst, dst_at, src, src_at)

        def codegen(context, builder, signature, args):
            d, d_at, s, s_at = args
            byte_ptr = ir.IntType(8).as_pointer()
            dp = builder.bitcast(context.make_array(signature.args[0])(context, builder, d).data, byte_ptr)
            sp = builder.bitcast(context.make_array(signature.args[2])(context, builder, s).data, byte_ptr)
            cgutils.raw_memcpy(builder, builder.gep(dp, [d_at]), builder.gep(sp, [s_at]),
                               ir.Constant(ir.IntType(64), nbytes), 1)
            return context.get_dummy_value()

        return sig, codegen

    return copy


_copy4, _copy8, _copy16, _copy32 = (_fixed_copy(n) for n in (4, 8, 16, 32))


@njit(cache=True, nogil=True)
def copy_runs(src, dst, src_off, dst_off, count):
    """Copy runs of elements (in units of the arrays' type, which must be the same); runs must not
    overlap their own destination (sources and destinations of different runs may).

    Most exchange runs are short (an MNIST step: two thirds of 200,000 runs are 17-64 bytes), and
    a library memcpy call costs more than moving them: a run of 4-64 bytes is two fixed-size
    copies of the largest power of two that fits, one from each end (they overlap in the middle,
    writing the same bytes), inlined."""
    isz = src.itemsize
    for i in range(src_off.shape[0]):
        n = count[i] * isz
        s = src_off[i] * isz
        d = dst_off[i] * isz
        if n > 64 or n < 4:
            _memcpy(dst, dst_off[i], src, src_off[i], count[i])
        elif n >= 32:
            _copy32(dst, d, src, s)
            _copy32(dst, d + n - 32, src, s + n - 32)
        elif n >= 16:
            _copy16(dst, d, src, s)
            _copy16(dst, d + n - 16, src, s + n - 16)
        elif n >= 8:
            _copy8(dst, d, src, s)
            _copy8(dst, d + n - 8, src, s + n - 8)
        else:
            _copy4(dst, d, src, s)
            _copy4(dst, d + n - 4, src, s + n - 4)


@njit(cache=True)
def copy_runs_staged(mem, src_off, dst_off, nbytes):
    """Copy runs within one array whose sources and destinations may overlap: read all, then write.
    (memcpy calls, not slice assignments: those compile Numba's shape-mismatch message, 2.8 s of
    CPU on a new install for a check the compiler's tables never fail.)"""
    total = 0
    for i in range(nbytes.shape[0]):
        total += nbytes[i]
    tmp = np.empty(total, np.uint8)
    k = 0
    for i in range(src_off.shape[0]):
        _memcpy(tmp, k, mem, src_off[i], nbytes[i])
        k += nbytes[i]
    k = 0
    for i in range(dst_off.shape[0]):
        _memcpy(mem, dst_off[i], tmp, k, nbytes[i])
        k += nbytes[i]


def merged_runs(src_off, dst_off, nbytes):
    """The runs of a copy table in destination order, runs contiguous at both ends merged (the
    compiler keeps runs per tile for the cost model; memory is one array here), and whether the
    destinations are disjoint (then the runs may be copied in any order, or split over threads).
    Destinations that overlap keep the table's order: the last write wins, as in the table."""
    if nbytes.size == 0:
        return src_off, dst_off, nbytes, True
    o = np.argsort(dst_off, kind="stable")
    d, s, n = dst_off[o], src_off[o], nbytes[o]
    if d.size > 1 and (d[1:] < d[:-1] + n[:-1]).any():
        return src_off, dst_off, nbytes, False
    brk = np.ones(d.size, bool)
    brk[1:] = (d[1:] != d[:-1] + n[:-1]) | (s[1:] != s[:-1] + n[:-1])
    starts = np.flatnonzero(brk)
    return s[starts], d[starts], np.add.reduceat(n, starts), True


# a table's runs are regrouped by `replicated_blocks` only when they are this short on average and
# the regrouping at least this many times fewer (measured on the MNIST batch 128 step's tables, one
# thread: the input gathers, 16 blocks of 100-byte runs from each source, 0.35 -> 0.18 ms; tables of
# runs over 1 KiB or with few repeats were as fast or slower)
REPLICATE_MAX_RUN_BYTES = 512
REPLICATE_MIN_GAIN = 3


def replicated_blocks(src_off, dst_off, nbytes):
    """A multicast's repeats as whole blocks: given runs in destination order with disjoint
    destinations (`merged_runs`), cut them into blocks contiguous in destination; each block whose
    (source, bytes) sequence an earlier block already has is copied from that block's destination
    in one run, after the runs of the blocks copied from the sources. Returns (sources,
    destinations, bytes, first) where runs [first:] are those block copies, or None when it would
    not save enough runs (REPLICATE_*). The bytes written are the table's: every repeat is checked
    run by run against its first block (first source and length only pair candidates), and an exchange's
    sources are apart from its destinations (a copy within one variable is staged, never here), as
    copying in destination order and splitting over threads already take."""
    n_runs = nbytes.size
    if n_runs < 2 * REPLICATE_MIN_GAIN or int(nbytes.sum()) > REPLICATE_MAX_RUN_BYTES * n_runs:
        return None
    d, n = (np.asarray(x, np.int64) for x in (dst_off, nbytes))
    brk = np.ones(n_runs, bool)
    brk[1:] = d[1:] != d[:-1] + n[:-1]
    starts = np.flatnonzero(brk)
    if starts.size * REPLICATE_MIN_GAIN > n_runs:  # not even the blocks alone would save enough
        return None
    s = np.asarray(src_off, np.int64)
    length = np.diff(np.append(starts, n_runs))
    # candidates: blocks of one length starting at one source; a block whose pair no other block
    # has is copied run by run whatever the rest: when those alone keep too many runs, stop here
    pair = s[starts] * (int(length.max()) + 1) + length  # a byte offset times a run count: far below 2^63
    _, first_of, which, count = np.unique(pair, return_index=True, return_inverse=True, return_counts=True)
    which = which.reshape(-1)
    if int(length[count[which] == 1].sum()) * REPLICATE_MIN_GAIN > n_runs:
        return None
    primary = first_of[which]  # each block's first block (destination order) with its pair
    block = np.cumsum(brk) - 1
    pos = np.arange(n_runs) - starts[block]
    mate = starts[primary[block]] + pos  # the same run of that block (same length: inside it)
    differs = (s[mate] != s) | (n[mate] != n)
    repeat = (primary != np.arange(starts.size)) & (np.add.reduceat(differs.astype(np.int64), starts) == 0)
    keep = ~repeat[block]
    if (int(keep.sum()) + int(repeat.sum())) * REPLICATE_MIN_GAIN > n_runs:
        return None
    block_bytes = np.add.reduceat(n, starts)
    out = (np.concatenate([s[keep], d[starts[primary[repeat]]]]), np.concatenate([d[keep], d[starts[repeat]]]),
           np.concatenate([n[keep], block_bytes[repeat]]))
    return (*out, int(keep.sum()))
