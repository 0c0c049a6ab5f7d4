"""Convolution vertices for grouped and depthwise convolutions, as poplin has them.

`ConvPartialHorizontalMac` (poplin's HMAC method, lib/poplin/codelets/ConvPartialHorizontalMac.cpp):
the forward pass (and the input gradient) of a convolution whose channels per group are too few
for the AMP. One vertex per tile and batch element runs every conv group, output channel and input
channel of its tile over its part of the field:

    out[cg][og][o] = sum over ig, kernel position k, of  in[cg][ig][i(o, k)] * weights[cg][og][ig][k]

with the field positions taken from work lists: for each kernel position and worker context, a
list of entries (outOffset, numConv, inOffset) saying that outputs outOffset + j * outStride read
inputs inOffset + j * inStride, j < numConv (a run of one output row). Entries only cover outputs
whose input lies inside the image, so padding costs nothing: the vertex zeroes its output first
(poplin's `zerosInfo`). The work lists depend on the field partition only, never on the number of
conv groups, which is why code and state grow with the plan and not with the group count.

`ConvPartialVerticalMac` (poplin's VMAC method, ConvPartialVerticalMac.cpp): the weight update of
such a convolution, which sums over the field instead of the kernel:

    out[cg][m][c][k] = sum over entries e of kernel position k:  sum_j in[cg][c][inOffset_e + j * inStride]
                                                                        * weights[cg][m][wOffset_e + j]

`weights` here are the output gradients (the "weights" of the weight-update convolution). Each
worker context accumulates its own partial sums of every kernel position; the vertex then adds
the six partials (poplin's in-vertex reduction).

Layouts (ours; the vertex arithmetic is poplin's): channels per group in and out are one each
(inChansPerGroup = outChansPerGroup = 1, float partials), and a tile's conv groups and channels
are outer dimensions of its blocks, so the blocks keep the NCHW rows of the activations and the
exchange moves whole rows. The work-list field holds a table of (kernelSize x 6 + 1) list starts
(the DeltaN descriptor of poplin's VectorList) followed by the entries; it is a constant on the
vertex's tile (poplin builds work lists with graph.addConstant), in uint16 when every value fits
(poplin's "limited" vertex version) and uint32 otherwise.

Cost models: poplin's estimators (lib/poplin/PerformanceEstimation.hpp and
poplinCycleEstimators.cpp, newest stored versions), from per-worker summaries of the work lists
(entries and field positions per worker, int parameters written by the builder from the same
lists). Vertex state follows the vertices' state layout (conv_hzmac_float_float.S: a 44-byte
supervisor state, 2-byte scaled pointers per region, 4 bytes per work list).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

import ipu
from ipu import IN, OUT, Codelet, Field
from ipu.half import load

WORKERS = 6  # worker contexts; the work lists are per context (the target's count must match)
_FLOATS = (ipu.FLOAT32, ipu.FLOAT16)
_LISTS = (ipu.UINT16, ipu.UINT32)

# ------------------------------------------------------------------------------------------------
# work lists


def partition_rows(num_rows: int, workers: int = WORKERS):
    """poplin's partitionConvOutputBetweenWorkers (ConvVertices.cpp) for rows of a field: every
    row is cut into workers / gcd(workers, rows) parts so that the workers get equal shares; returns
    per worker a list of (row, split_begin, split_end, split_factor)."""
    out: list[list[tuple[int, int, int, int]]] = [[] for _ in range(workers)]
    if num_rows <= 0:
        return out
    sf = workers // math.gcd(workers, num_rows)
    parts = num_rows * sf
    for w in range(workers):
        for pr in range(w * parts // workers, (w + 1) * parts // workers):
            row, part = divmod(pr, sf)
            lst = out[w]
            if lst and lst[-1][0] == row:
                lst[-1] = (row, lst[-1][1], part + 1, sf)
            else:
                lst.append((row, part, part + 1, sf))
    return out


def _valid_out_range(o_lo, o_hi, k, stride, dilation, pad, size):
    """Outputs o in [o_lo, o_hi) whose input o * stride - pad + k * dilation lies in [0, size)."""
    start = k * dilation - pad  # input index of output 0
    lo = max(o_lo, -(-(-start) // stride) if start < 0 else 0)
    hi = min(o_hi, (size - 1 - start) // stride + 1 if size - 1 - start >= 0 else 0)
    return lo, max(lo, hi)


def hmac_worklists(batch, out_lo, out_hi, in_lo, in_sizes, kernel, strides, dilations, pads, image):
    """Work lists of a ConvPartialHorizontalMac vertex over a sub-field.

    batch: batch elements of the vertex's blocks; out_lo / out_hi: the output range per spatial
    dimension (global indices); in_lo / in_sizes: the input window the block holds per dimension
    (global start, size); image: the full input size per dimension. Returns (lists, entries):
    lists[k * 6 + w] is a list of entry indices, entries an int64 array (E, 3) of (outOffset,
    numConv, inOffset) in the blocks' flat [batch][field] order."""
    nsp = len(kernel)
    out_sizes = [out_hi[d] - out_lo[d] for d in range(nsp)]
    out_field = int(np.prod(out_sizes))
    in_field = int(np.prod(in_sizes))
    lists = [[] for _ in range(int(np.prod(kernel)) * WORKERS)]
    entries = []
    for kf, kc in enumerate(np.ndindex(*kernel)):
        ranges = [_valid_out_range(out_lo[d], out_hi[d], kc[d], strides[d], dilations[d], pads[d], image[d])
                  for d in range(nsp)]
        if any(hi <= lo for lo, hi in ranges):
            continue
        outer = [range(lo, hi) for lo, hi in ranges[:-1]]
        rows = [(b,) + o for b in range(batch) for o in np.ndindex(*[len(r) for r in outer])]
        xlo, xhi = ranges[-1]
        width = xhi - xlo
        for w, slices in enumerate(partition_rows(len(rows), WORKERS)):
            for row, sb, se, sf in slices:
                x0 = xlo + width * sb // sf
                x1 = xlo + width * se // sf
                if x1 <= x0:
                    continue
                b = rows[row][0]
                oidx = [outer[d][rows[row][1 + d]] for d in range(nsp - 1)] + [x0]
                iidx = [oidx[d] * strides[d] - pads[d] + kc[d] * dilations[d] for d in range(nsp)]
                ooff = b * out_field + int(np.ravel_multi_index([oidx[d] - out_lo[d] for d in range(nsp)], out_sizes))
                ioff = b * in_field + int(np.ravel_multi_index([iidx[d] - in_lo[d] for d in range(nsp)], in_sizes))
                lists[kf * WORKERS + w].append(len(entries))
                entries.append((ooff, x1 - x0, ioff))
    return lists, np.asarray(entries, np.int64).reshape(-1, 3)


def vmac_worklists(batch, out_lo, out_hi, in_lo, in_sizes, kernel, strides, dilations, pads, image):
    """Work lists of a ConvPartialVerticalMac (weight update) vertex over a sub-field: for every
    kernel position and output row, the run of the row whose input lies in the image, the rows of
    each kernel position shared out among the workers as the HMAC's are. Returns (lists, entries):
    lists[w] the entries of worker w, entries (E, 4) of (kernel position, offset in the output
    gradient block, offset in the input block, numElems)."""
    lists_h, ent = hmac_worklists(batch, out_lo, out_hi, in_lo, in_sizes, kernel, strides, dilations, pads, image)
    K = int(np.prod(kernel))
    lists = [[] for _ in range(WORKERS)]
    rows = []
    for kf in range(K):
        for w in range(WORKERS):
            for e in lists_h[kf * WORKERS + w]:
                lists[w].append(len(rows))
                rows.append((kf, ent[e, 0], ent[e, 2], ent[e, 1]))
    return lists, np.asarray(rows, np.int64).reshape(-1, 4)


def pack_worklists(lists, entries) -> np.ndarray:
    """The work-list field: the list starts (len(lists) + 1, in entries) then the flat entries."""
    order = np.asarray([e for lst in lists for e in lst], np.int64)
    starts = np.concatenate(([0], np.cumsum([len(lst) for lst in lists]))).astype(np.int64)
    return np.concatenate((starts, entries[order].reshape(-1) if order.size else np.zeros(0, np.int64)))


def worker_summary(lists, entries, size_column: int, singles: bool = False):
    """Per worker: (entries, summed sizes[, entries of size one]) of its lists (lists of kernel x
    worker, or of workers): what the cost models need of the work lists."""
    n_lists = len(lists)
    e = np.zeros(WORKERS, np.int64)
    s = np.zeros(WORKERS, np.int64)
    one = np.zeros(WORKERS, np.int64)
    for i, lst in enumerate(lists):
        w = i % WORKERS if n_lists > WORKERS else i
        if lst:
            idx = np.asarray(lst, np.int64)
            e[w] += idx.size
            s[w] += int(entries[idx, size_column].sum())
            one[w] += int((entries[idx, size_column] == 1).sum())
    return (e, s, one) if singles else (e, s)


def list_dtype(table: np.ndarray) -> ipu.ElementType:
    """uint16 (poplin's limited version) when every value fits in 16 bits, else uint32."""
    return ipu.UINT16 if table.size == 0 or int(table.max()) <= 0xFFFF else ipu.UINT32


# ------------------------------------------------------------------------------------------------
# kernels


@njit(cache=True)
def _hmac_kernel(views, off, cnt, fp, ip):
    """All ConvPartialHorizontalMac vertices of a compute set, in poplin's loop order (conv group,
    output channel, input channel, kernel position, worker context, entry)."""
    inv = views[HF.in_]
    wv = views[HF.weights]
    wl = views[HF.worklists]
    ov = views[HF.out]
    for v in range(off.shape[0]):
        ncg = ip[v, HIP.conv_groups]
        nog = ip[v, HIP.out_groups]
        nig = ip[v, HIP.in_groups]
        K = ip[v, HIP.kernel_size]
        inblk = ip[v, HIP.in_block]
        outblk = ip[v, HIP.out_block]
        istr = ip[v, HIP.in_stride]
        ostr = ip[v, HIP.out_stride]
        i0 = off[v, HF.in_]
        w0 = off[v, HF.weights]
        l0 = off[v, HF.worklists]
        o0 = off[v, HF.out]
        ov[o0:o0 + cnt[v, HF.out]] = 0.0
        nl = K * 6
        e_base = l0 + nl + 1
        for cg in range(ncg):
            for og in range(nog):
                ob = o0 + (cg * nog + og) * outblk
                for ig in range(nig):
                    ib = i0 + (cg * nig + ig) * inblk
                    wb = w0 + ((cg * nog + og) * nig + ig) * K
                    for k in range(K):
                        wk = load(wv, wb + k)
                        for lst in range(k * 6, k * 6 + 6):
                            for e in range(wl[l0 + lst], wl[l0 + lst + 1]):
                                p = e_base + 3 * e
                                oo = ob + np.int64(wl[p])
                                n = np.int64(wl[p + 1])
                                io = ib + np.int64(wl[p + 2])
                                for j in range(n):
                                    ov[oo + j * ostr] += load(inv, io + j * istr) * wk


@njit(cache=True)
def _vmac_kernel(views, off, cnt, fp, ip):
    """All ConvPartialVerticalMac vertices: per (conv group, output channel, input channel) every
    worker sums its entries into its own partials, then the partials of the six workers are added
    in worker order (poplin's in-vertex reduction)."""
    inv = views[VF.in_]
    wv = views[VF.weights]
    wl = views[VF.worklists]
    ov = views[VF.out]
    for v in range(off.shape[0]):
        ncg = ip[v, VIP.conv_groups]
        nm = ip[v, VIP.out_chans]
        nc = ip[v, VIP.in_chans]
        K = ip[v, VIP.kernel_size]
        inblk = ip[v, VIP.in_block]
        wblk = ip[v, VIP.grad_block]
        istr = ip[v, VIP.in_stride]
        i0 = off[v, VF.in_]
        w0 = off[v, VF.weights]
        l0 = off[v, VF.worklists]
        o0 = off[v, VF.out]
        e_base = l0 + 7
        part = np.zeros((6, K), np.float32)
        for cg in range(ncg):
            for m in range(nm):
                wb = w0 + (cg * nm + m) * wblk
                for c in range(nc):
                    ib = i0 + (cg * nc + c) * inblk
                    part[:, :] = 0.0
                    for w in range(6):
                        for e in range(wl[l0 + w], wl[l0 + w + 1]):
                            p = e_base + 4 * e
                            k = np.int64(wl[p])
                            wo = wb + np.int64(wl[p + 1])
                            io = ib + np.int64(wl[p + 2])
                            n = np.int64(wl[p + 3])
                            acc = part[w, k]
                            for j in range(n):
                                acc += load(inv, io + j * istr) * load(wv, wo + j)
                            part[w, k] = acc
                    ob = o0 + ((cg * nm + m) * nc + c) * K
                    for k in range(K):
                        s = part[0, k]
                        for w in range(1, 6):
                            s += part[w, k]
                        ov[ob + k] = s


# ------------------------------------------------------------------------------------------------
# NumPy references (the same arithmetic in the same order, float32)


def _f32(a):
    return np.asarray(a).astype(np.float32)


def hmac_reference(inp, weights, table, shape, out_size):
    """ConvPartialHorizontalMac: `shape` = (convGroups, outGroups, inGroups, kernelSize, inBlock,
    outBlock, inStride, outStride); returns the float32 output block."""
    ncg, nog, nig, K, inblk, outblk, istr, ostr = shape
    inp, weights = _f32(inp), _f32(weights)
    out = np.zeros(out_size, np.float32)
    starts = table[:K * WORKERS + 1]
    ent = table[K * WORKERS + 1:].reshape(-1, 3).astype(np.int64)
    for cg in range(ncg):
        for og in range(nog):
            ob = (cg * nog + og) * outblk
            for ig in range(nig):
                ib = (cg * nig + ig) * inblk
                for k in range(K):
                    wk = weights[((cg * nog + og) * nig + ig) * K + k]
                    for lst in range(k * WORKERS, (k + 1) * WORKERS):
                        for oo, n, io in ent[starts[lst]:starts[lst + 1]]:
                            o = ob + oo + np.arange(n) * ostr
                            out[o] += inp[ib + io + np.arange(n) * istr] * wk
    return out


def vmac_reference(inp, grads, table, shape):
    """ConvPartialVerticalMac: `shape` = (convGroups, outChans, inChans, kernelSize, inBlock,
    gradBlock, inStride); returns the float32 weight-gradient block [cg][m][c][k]."""
    ncg, nm, nc, K, inblk, wblk, istr = shape
    inp, grads = _f32(inp), _f32(grads)
    starts = table[:WORKERS + 1]
    ent = table[WORKERS + 1:].reshape(-1, 4).astype(np.int64)
    out = np.zeros(ncg * nm * nc * K, np.float32)
    for cg in range(ncg):
        for m in range(nm):
            for c in range(nc):
                part = np.zeros((WORKERS, K), np.float32)
                for w in range(WORKERS):
                    for k, wo, io, n in ent[starts[w]:starts[w + 1]]:
                        acc = part[w, k]
                        a = inp[(cg * nc + c) * inblk + io + np.arange(n) * istr]
                        g = grads[(cg * nm + m) * wblk + wo + np.arange(n)]
                        for j in range(n):  # sequential, as the worker adds
                            acc = np.float32(acc + a[j] * g[j])
                        part[w, k] = acc
                s = part[0].copy()
                for w in range(1, WORKERS):
                    s = s + part[w]
                out[((cg * nm + m) * nc + c) * K:((cg * nm + m) * nc + c + 1) * K] = s
    return out


# ------------------------------------------------------------------------------------------------
# cost models


def _dense_dot_cycles(vector_width: int, float_acts: bool, size: int) -> int:
    """poplin getDenseDotProductCycles (PerformanceEstimation.hpp) with float partials: a
    (1 + 2) + 3 + 1 cycle frame, then size / width vector steps (2 cycles each, and a cycle to
    warm up, when narrower than 64 bits)."""
    acts_per_64 = 2 if float_acts else 4
    inner = 3 + 3 + 1
    i = int(math.ceil(math.log2(vector_width))) if vector_width > 1 else 0
    while i >= 0:
        width = 1 << i
        if size % width == 0:
            per = 1 if width >= acts_per_64 else 2
            extra = 1 if width < acts_per_64 else 0
            return inner + extra + (size // width) * per
        i -= 1
    raise AssertionError("unreachable")


def _zero_supervisor_cycles(per_worker_elems, groups, float_partials: bool, data_path_bits: int = 64):
    """poplin getZeroSupervisorVertexCycleEstimate: the slowest worker's vectors plus 14 (float) /
    15 (half), less the 9 / 10 cycles of state retention, x 6 contexts x regions."""
    width = data_path_bits // (32 if float_partials else 16)
    vectors = -(-np.asarray(per_worker_elems, np.int64) // width)
    per = vectors + (14 if float_partials else 15) - (9 if float_partials else 10)
    return per * WORKERS * np.asarray(groups, np.int64)


def hmac_cycles(ncg, nog, nig, K, out_block, entries, positions, float_acts: bool):
    """Tile cycles of ConvPartialHorizontalMac vertices (arrays over vertices; entries /
    positions: (V, 6) per worker). Source: poplinCycleEstimators.cpp MAKE_PERF_ESTIMATOR_NAME(
    ConvPartialHorizontalMac) and PerformanceEstimation.hpp (newest stored version), float partials,
    one input and one output channel per group:

      zero     = getZeroSupervisorVertexCycleEstimate(ceil(zerosInfo / 6) per worker, out regions)
      worker   = 16 + K x 16 + sum over entries (19 + numConv x (7 + dot(1)))   per context
               (getConvPartialHorizontalMacCycleEstimate per kernel position; 7 for an empty entry,
               never made here)
      inner    = max(6 x slowest worker, 6 x fastest worker)
      cycles   = zero + overhead (58 float / 63 half activations) + 6 x 9 (retention)
               + convGroups x (23 + inGroups x (15 + outGroups x (10 + inner)))
    """
    ncg, nog, nig, K = (np.asarray(a, np.int64) for a in (ncg, nog, nig, K))
    entries = np.asarray(entries, np.int64).reshape(-1, WORKERS)
    positions = np.asarray(positions, np.int64).reshape(-1, WORKERS)
    dot = _dense_dot_cycles(2 if float_acts else 4, float_acts, 1)
    worker = 16 + K[:, None] * 16 + 19 * entries + positions * (7 + dot)
    inner = WORKERS * worker.max(axis=1)  # all six contexts have lists, so the fastest is not idle
    zero = _zero_supervisor_cycles(-(-np.asarray(out_block, np.int64) // WORKERS), nog * ncg, True)
    overhead = 58 if float_acts else 63
    conv = ncg * (23 + nig * (15 + nog * (10 + inner)))
    return np.where(nig > 0, zero + overhead + WORKERS * 9 + conv, zero + overhead).astype(np.int64)


def hmac_further_batch_cycles(ncg, nog, nig, K, out_block, entries, positions, float_acts: bool):
    """Tile cycles a further batch element adds to a ConvPartialHorizontalMac vertex (poplin folds
    the batch into the vertex's field: its rows are more work-list entries of the same vertex).
    From the estimator of `hmac_cycles`: the zeroing of its output region and each context's
    entries; the supervisor overhead, the retention, the group loops' 23 / 15 / 10 and each
    context's 16 + K x 16 are paid once by the vertex. A context's entries over the batch are
    summed as each element's slowest context (the estimator's max over the summed lists is at most
    that)."""
    ncg, nog, nig = (np.asarray(a, np.int64) for a in (ncg, nog, nig))
    entries = np.asarray(entries, np.int64).reshape(-1, WORKERS)
    positions = np.asarray(positions, np.int64).reshape(-1, WORKERS)
    dot = _dense_dot_cycles(2 if float_acts else 4, float_acts, 1)
    inner = WORKERS * (19 * entries + positions * (7 + dot)).max(axis=1)
    zero = _zero_supervisor_cycles(-(-np.asarray(out_block, np.int64) // WORKERS), nog * ncg, True)
    return (zero + ncg * nig * nog * inner).astype(np.int64)


def vmac_groups_per_group(float_acts: bool) -> int:
    """Conv groups a VMAC vertex processes side by side: 4 halves per 64-bit vector (poplin's
    half VMAC), 2 floats (the float lanes: hasAssembly's convGroupsImplemented for float)."""
    return 2 if float_acts else 4


def vmac_cycles(groups, K, entries, positions, float_acts: bool, singles=None):
    """Tile cycles of ConvPartialVerticalMac vertices (arrays over vertices; groups = conv groups x
    output channels x input channels of the vertex; entries / positions / singles (V, 6): per
    worker, its entries, their summed numElems and how many have one element). Source:
    poplinCycleEstimators.cpp
    MAKE_PERF_ESTIMATOR_NAME(ConvPartialVerticalMac) and PerformanceEstimation.hpp
    (getConvPartialVerticalMacSupervisorCycleEstimate), float partials, numInGroups = 1, the
    groups processed convGroupsPerGroup at a time:

      worker    = 19 + sum over entries (7 + 5 + 3 + 2 x (numElems - 2) x lanes / lanes)
                  (the estimator is handed numElems - 1 and takes one more off; clamped at 0)
      inner     = max(6 x slowest worker, 6 x fastest worker)
      zero      = 4 + ceil(K x lanes / 2)
      reduction = 9 + (9 + 2 x 5) x ceil(K x lanes / 6) / lanes
      cycles    = 61 + 14 + 1 + ceil(groups / lanes) x (zero + 32 + 24 + inner + reduction)

    poplin's VMAC is half only (4 conv groups per vector); for float activations the same loop on
    float pairs (f32v2mac: 2 groups per 64-bit vector, 2 cycles per element) is a derivation. The
    `25 + floatPartials ? 1 : 0` retention term evaluates to 1 in poplin's C++ and is kept so."""
    lanes = vmac_groups_per_group(float_acts)
    groups, K = np.asarray(groups, np.int64), np.asarray(K, np.int64)
    entries = np.asarray(entries, np.int64).reshape(-1, WORKERS)
    positions = np.asarray(positions, np.int64).reshape(-1, WORKERS)
    # sum over entries of 2 x max(numElems - 2, 0): an entry of one element costs no MAC cycles
    singles = np.zeros_like(entries) if singles is None else np.asarray(singles, np.int64).reshape(-1, WORKERS)
    mac = 2 * (positions - 2 * entries + singles)
    worker = 19 + entries * (7 + 5 + 3) + mac
    worker = np.where(entries > 0, worker, 0)
    inner = WORKERS * worker.max(axis=1)
    out_elems = K * lanes
    zero = 4 + -(-out_elems // 2)
    per_worker = -(-out_elems // WORKERS)
    reduction = 10 - 1 + (7 + 2 + 2 * (WORKERS - 1)) * per_worker // lanes
    cgg = -(-groups // lanes)
    return (61 + 14 + 1 + cgg * (zero + 32 + 24 + inner + reduction)).astype(np.int64)


# ------------------------------------------------------------------------------------------------
# codelets


def _check_blocks(name, t, sizes):
    """Types and sizes of a conv vertex's fields (t: its VertexTable; sizes: per field the elements
    its parameters need)."""
    if t.type.in_ != t.type.weights:
        raise TypeError(f"{name}: in is {t.type.in_.name} but its weights are {t.type.weights.name}")
    if t.type.out != ipu.FLOAT32:
        raise TypeError(f"{name}: partials are float32, not {t.type.out.name}")
    for f, want in sizes.items():
        have = getattr(t.count, f)
        bad = have < want
        if np.any(bad):
            v = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{name}: vertex {v}'s field {f.rstrip('_')} holds {have[v]} elements; its parameters "
                             f"need {want[v]}")


def _per_worker(t, prefix):
    """The (V, 6) columns prefix0 .. prefix5 of a vertex table."""
    return np.stack([getattr(t, f"{prefix}{w}") for w in range(WORKERS)], axis=1)


def calibration_lists(params, vertical: bool):
    """A calibration row's sub-field (tests/calibration/make_reference_table.py: a square image, a
    run of output rows from rowStart, a square kernel with 'same' padding and a stride): the work
    lists' table, their per-worker summaries, and the input and output block sizes."""
    p = {k: int(v) for k, v in params.items()}
    image, r0, rows, k, stride = p["image"], p["rowStart"], p["rows"], p["kernel"], p["stride"]
    pad = k // 2
    out_w = (image + 2 * pad - k) // stride + 1
    lo = max(0, r0 * stride - pad)
    hi = min(image, (r0 + rows - 1) * stride - pad + k)
    build = vmac_worklists if vertical else hmac_worklists
    lists, ent = build(1, (r0, 0), (r0 + rows, out_w), (lo, 0), (hi - lo, image), (k, k), (stride, stride), (1, 1),
                       (pad, pad), (image, image))
    table = pack_worklists(lists, ent)
    summary = worker_summary(lists, ent, 3 if vertical else 1, singles=vertical)
    return p, table, summary, (hi - lo) * image, rows * out_w


def _calibration_vertex(codelet, types, params, vertical):
    (t,) = types
    p, table, summary, inblk, outblk = calibration_lists(params, vertical)
    K, stride = p["kernel"] ** 2, p["stride"]
    cg, og, ig = p["convGroups"], p["outGroups"], p["inGroups"]
    names = ("entries", "positions", "singles") if vertical else ("entries", "positions")
    per = {f"{n}{w}": int(col[w]) for n, col in zip(names, summary) for w in range(WORKERS)}
    if vertical:
        shape = {"conv_groups": cg, "out_chans": og, "in_chans": ig, "kernel_size": K, "in_block": inblk,
                 "grad_block": outblk, "in_stride": stride}
        counts = {"in": cg * ig * inblk, "weights": cg * og * outblk, "worklists": table.size, "out": cg * og * ig * K}
    else:
        shape = {"conv_groups": cg, "out_groups": og, "in_groups": ig, "kernel_size": K, "in_block": inblk,
                 "out_block": outblk, "in_stride": stride, "out_stride": 1}
        counts = {"in": cg * ig * inblk, "weights": cg * og * ig * K, "worklists": table.size, "out": cg * og * outblk}
    return ipu.Vertex({"in": t, "weights": t, "worklists": ipu.UINT16, "out": ipu.FLOAT32}, counts, {**shape, **per})


@ipu.register
class ConvPartialHorizontalMac(Codelet):
    """Forward convolution of one tile's conv groups, output and input channels over its field."""

    name = "ConvPartialHorizontalMac"
    fields = (Field("in", IN), Field("weights", IN), Field("worklists", IN), Field("out", OUT))
    int_params = ("conv_groups", "out_groups", "in_groups", "kernel_size", "in_block", "out_block", "in_stride",
                  "out_stride") + tuple(f"entries{w}" for w in range(WORKERS)) + \
        tuple(f"positions{w}" for w in range(WORKERS))
    supervisor = True
    # rows of one vertex are its batch elements (poplin folds the batch into the field): each row
    # an in and an out region of the vertex, the weights and work lists shared
    multi_region = True
    allowed_types = (_FLOATS, _FLOATS, _LISTS, (ipu.FLOAT32,))
    poplibs_vertices = ("poplin::ConvPartialHorizontalMac",)

    def kernel(self):
        return _hmac_kernel

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt, fp, ip)
        if np.any(ip < 0):
            raise ValueError(f"{self.name}: negative parameter")
        out = t.conv_groups * t.out_groups * t.out_block
        _check_blocks(self.name, t, {"in_": t.conv_groups * t.in_groups * t.in_block,
                                     "weights": t.conv_groups * t.out_groups * t.in_groups * t.kernel_size,
                                     "worklists": t.kernel_size * WORKERS + 1, "out": out})
        if np.any(t.count.out != out):
            raise ValueError(f"{self.name}: out must hold conv_groups x out_groups x out_block elements")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt, fp, ip)
        return hmac_cycles(t.conv_groups, t.out_groups, t.in_groups, t.kernel_size, t.out_block,
                           _per_worker(t, "entries"), _per_worker(t, "positions"), t.type.in_ == ipu.FLOAT32)

    def calibration_vertex(self, vertex, types, n, params):
        return _calibration_vertex(self, types, params, False)

    def code_bytes(self, types):
        # conv_hzmac_float_float.S: ~95 supervisor instructions (4 B) and ~70 worker instructions and
        # bundles (4-8 B), plus the shared field-zeroing worker (convNx1ZeroOutField)
        return 768

    def further_region_cycles(self, types, cnt, fp, ip, target, cycles):
        t = self.table(types, cnt, fp, ip)
        return hmac_further_batch_cycles(t.conv_groups, t.out_groups, t.in_groups, t.kernel_size, t.out_block,
                                         _per_worker(t, "entries"), _per_worker(t, "positions"),
                                         t.type.in_ == ipu.FLOAT32)

    def vertex_state_bytes(self, types, cnt, ip):
        # conv_hzmac_float_float.S's supervisor state (42 bytes of fields, 44 aligned), a 2-byte scaled
        # pointer per region of the weights, and a DeltaN entry (4 bytes) per work list; each batch
        # element (a row, region_state) adds the scaled pointers of its in and out regions
        t = self.table(types or (None,) * len(self.fields), cnt, None, ip)
        return (44 + 2 * t.conv_groups * t.out_groups * t.in_groups + 4 * t.kernel_size * WORKERS).astype(np.int64)

    def region_state(self, types, cnt, ip):
        t = self.table(types or (None,) * len(self.fields), cnt, None, ip)
        return (2 * t.conv_groups * (t.in_groups + t.out_groups)).astype(np.int64)

    def reference(self, inp, weights, table, shape, out_size):
        return hmac_reference(inp, weights, table, shape, out_size)


@ipu.register
class ConvPartialVerticalMac(Codelet):
    """Weight update of one tile's conv groups over its part of the field (float32 partials)."""

    name = "ConvPartialVerticalMac"
    fields = (Field("in", IN), Field("weights", IN), Field("worklists", IN), Field("out", OUT))
    int_params = ("conv_groups", "out_chans", "in_chans", "kernel_size", "in_block", "grad_block", "in_stride") + \
        tuple(f"entries{w}" for w in range(WORKERS)) + tuple(f"positions{w}" for w in range(WORKERS)) + \
        tuple(f"singles{w}" for w in range(WORKERS))
    supervisor = True
    allowed_types = (_FLOATS, _FLOATS, _LISTS, (ipu.FLOAT32,))
    poplibs_vertices = ("poplin::ConvPartialVerticalMac",)

    def kernel(self):
        return _vmac_kernel

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt, fp, ip)
        if np.any(ip < 0):
            raise ValueError(f"{self.name}: negative parameter")
        out = t.conv_groups * t.out_chans * t.in_chans * t.kernel_size
        _check_blocks(self.name, t, {"in_": t.conv_groups * t.in_chans * t.in_block,
                                     "weights": t.conv_groups * t.out_chans * t.grad_block,
                                     "worklists": np.full_like(out, WORKERS + 1), "out": out})
        if np.any(t.count.out != out):
            raise ValueError(f"{self.name}: out must hold conv_groups x out_chans x in_chans x kernel_size elements")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt, fp, ip)
        return vmac_cycles(t.conv_groups * t.out_chans * t.in_chans, t.kernel_size, _per_worker(t, "entries"),
                           _per_worker(t, "positions"), t.type.in_ == ipu.FLOAT32, _per_worker(t, "singles"))

    def calibration_vertex(self, vertex, types, n, params):
        return _calibration_vertex(self, types, params, True)

    def code_bytes(self, types):
        # ConvPartialVerticalMac's supervisor and worker assembly: of the order of the HMAC's
        # (an assumption: zeroing, MAC and reduction workers of ~60 instructions each)
        return 896

    def vertex_state_bytes(self, types, cnt, ip):
        # ConvPartialVerticalMac's fields: in / weights / out vectors of scaled pointers (2 B per
        # region), the partials pointer, zerosInfo, numInGroups, numConvGroupsM1 and the strides
        # (~24 B), and a DeltaN entry (4 B) per worker's list
        t = self.table(types or (None,) * len(self.fields), cnt, None, ip)
        groups = t.conv_groups * t.out_chans * t.in_chans
        regions = t.conv_groups * (t.out_chans + t.in_chans) + groups
        return (24 + 2 * regions + 4 * WORKERS).astype(np.int64)

    def reference(self, inp, grads, table, shape):
        return vmac_reference(inp, grads, table, shape)


HF, HIP = ConvPartialHorizontalMac.F, ConvPartialHorizontalMac.IP  # the kernels' columns, by name
VF, VIP = ConvPartialVerticalMac.F, ConvPartialVerticalMac.IP
