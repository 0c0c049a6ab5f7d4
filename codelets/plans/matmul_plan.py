"""The matmul planner: choose how C = A @ B is split over the tiles (see matmul_build.py for the program
it leads to).

A product of canonical shape [G, M, K] x [G, K, N] (NumPy batch broadcasting; a shared operand
folds the batch into M or N) is cut into a grid of G x M x N x K chunks, one cell per tile.
`plan_matmul` chooses the split minimising the estimated cycles

    exchange(A blocks) + exchange(B blocks) + AMP compute + exchange(partials) + reduction

among the splits whose temporaries fit in tile memory (serial passes when none does).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

import ipu
from ipu import OutOfMemoryError
from ipu import costs as ipu_costs

from ..matmul import amp_geometry, matmul_block_cycles, reduce_partials_cycles

_ALIGN = 8
# Code and fixed exchange/control bytes the plan adds on a tile besides its data (MatMulBlock and
# MatMulReducePartials code, vertex state, the exchange phases' entry/exit code): a margin kept
# free when checking that a split fits.
_CODE_MARGIN = 1536 + 512 + 256
_EXCHANGE_BYTES_PER_RUN = 8


# ------------------------------------------------------------------------------------------------
# problems and plans


@dataclass(frozen=True)
class Problem:
    """A matmul in canonical form: G independent [M, K] x [K, N] products.

    batch_shape: the broadcast batch dimensions of the user's operands; fold: how they became G,
    M or N ('none': G = prod(batch_shape); 'm': B is shared, the batch is stacked into M; 'n': A
    is shared, the batch is stacked into N)."""

    batch_shape: tuple
    fold: str
    G: int
    M: int
    K: int
    N: int
    m: int  # the user's per-batch M and N
    n: int

    @property
    def out_shape(self) -> tuple:
        return tuple(self.batch_shape) + (self.m, self.n)


def canonical_problem(a_shape, b_shape) -> Problem:
    """The canonical [G, M, K] x [G, K, N] problem of a NumPy-style matmul of operands of these
    shapes (rank >= 2; batch dimensions broadcast)."""
    a_shape = tuple(int(d) for d in a_shape)
    b_shape = tuple(int(d) for d in b_shape)
    if len(a_shape) < 2 or len(b_shape) < 2:
        raise ValueError(f"build_matmul needs operands of rank >= 2, got shapes {a_shape} and {b_shape}; "
                         f"reshape vectors to [1, K] / [K, 1] first")
    m, k = a_shape[-2:]
    k2, n = b_shape[-2:]
    if k != k2:
        raise ValueError(f"matmul: a is {a_shape} and b is {b_shape}: contraction sizes {k} and {k2} differ")
    try:
        bs = tuple(np.broadcast_shapes(a_shape[:-2], b_shape[:-2]))
    except ValueError:
        raise ValueError(f"matmul: batch dimensions of {a_shape} and {b_shape} do not broadcast") from None
    bt = int(np.prod(bs, dtype=np.int64))
    a_shared = int(np.prod(a_shape[:-2], dtype=np.int64)) == 1
    b_shared = int(np.prod(b_shape[:-2], dtype=np.int64)) == 1
    if bt <= 1:
        return Problem(bs, "none", 1, m, k, n, m, n)
    if b_shared:
        return Problem(bs, "m", 1, bt * m, k, n, m, n)
    if a_shared:
        return Problem(bs, "n", 1, m, k, bt * n, m, n)
    return Problem(bs, "none", bt, m, k, n, m, n)


def _canon_a(idx, p: Problem, reshape=np.reshape):
    """a's index array as (groups, m, K); `reshape` is np.reshape, or one that never copies
    (views of a position probe: matmul_operands.reshape_view)."""
    bt = max(1, int(np.prod(p.batch_shape, dtype=np.int64)))
    x = reshape(np.broadcast_to(idx, p.batch_shape + (p.m, p.K)), (bt, p.m, p.K))
    if p.fold == "m":
        return reshape(x, (1, bt * p.m, p.K))
    if p.fold == "n":
        return x[:1]
    return x


def _canon_b(idx, p: Problem, reshape=np.reshape):
    """b's index array as (groups, K, n) (`reshape` as in _canon_a)."""
    bt = max(1, int(np.prod(p.batch_shape, dtype=np.int64)))
    x = reshape(np.broadcast_to(idx, p.batch_shape + (p.K, p.n)), (bt, p.K, p.n))
    if p.fold == "m":
        return x[:1]
    if p.fold == "n":
        return reshape(x.transpose(1, 0, 2), (1, p.K, bt * p.n))
    return x


def _canon_c(idx, p: Problem):
    bt = max(1, int(np.prod(p.batch_shape, dtype=np.int64)))
    x = np.asarray(idx).reshape(bt, p.m, p.n)
    if p.fold == "m":
        return x.reshape(1, bt * p.m, p.n)
    if p.fold == "n":
        return x.transpose(1, 0, 2).reshape(1, p.m, bt * p.n)
    return x


@dataclass
class MatMulPlan:
    """A split of the canonical problem over tiles: a grid of parts = (batch, m, n, k) cells of at
    most chunks = (batch, m, n, k) elements; `tiles[ig, im, in, ik]` is the tile of each cell."""

    target: ipu.Target
    dtype: ipu.ElementType  # operands
    out_dtype: ipu.ElementType
    G: int
    M: int
    K: int
    N: int
    parts: tuple
    chunks: tuple
    tiles: np.ndarray
    estimate: dict = field(default_factory=dict)  # estimated cycles by phase, and 'total'
    bytes_per_tile: int = 0  # estimated peak bytes on the busiest tile (plan temporaries + reserved)
    problem: Problem | None = None
    # serial splitting, when no single pass fits in tile memory: the product is done in `serial`
    # passes over slices of `serial_axis` ('g', 'm' or 'n') of at most `serial_chunk` elements, each
    # pass planned by `sub` (the last, smaller slice is planned again when built)
    code_bytes: int = 0  # estimated exchange and control code per tile (not freed between passes)
    serial: int = 1
    serial_axis: str = ""
    serial_chunk: int = 0
    sub: "MatMulPlan | None" = None
    # the AMP's partial sums: float32 (poplin's default), or float16 for half operands (poplin's
    # partialsType option, PopXL's matmul partials_type)
    partials_dtype: ipu.ElementType = ipu.FLOAT32
    available_memory_proportion: float | None = None  # the limit it was planned under

    @property
    def num_tiles_used(self) -> int:
        if self.sub is not None:
            return self.sub.num_tiles_used
        return int(np.prod(self.parts))

    @property
    def num_partials(self) -> int:
        return self.parts[3] if self.K > 0 else 0

    def __repr__(self) -> str:
        if self.sub is not None:
            return (f"<MatMulPlan [{self.G}x{self.M}x{self.K}] x [{self.K}x{self.N}] {self.dtype.name}: "
                    f"{self.serial} serial passes over {self.serial_axis} chunks of {self.serial_chunk}, "
                    f"each {self.sub.parts} over {self.sub.num_tiles_used} tiles, "
                    f"~{self.estimate.get('total', 0):,} cycles>")
        return (f"<MatMulPlan [{self.G}x{self.M}x{self.K}] x [{self.K}x{self.N}] {self.dtype.name}: "
                f"parts (g, m, n, k) = {self.parts}, chunks {self.chunks}, {self.num_tiles_used} tiles, "
                f"~{self.estimate.get('total', 0):,} cycles>")


# ------------------------------------------------------------------------------------------------
# the cost of a split (vectorised over candidate splits)


def _ceil(a, b):
    return -(-np.asarray(a, np.int64) // b)


def _align(x):
    return _ceil(x, _ALIGN) * _ALIGN


def _phase(target, send_bytes, recv_bytes):
    """One Copy: a sync, then the busiest tile's max(sent, received) / 4 plus the phase overhead
    (ipu_costs.exchange_tile_cycles, ipu_costs.sync_cycles)."""
    bpc = target.exchange_bytes_per_cycle
    return (ipu_costs.sync_cycles(target) + target.exchange_overhead_cycles
            + _ceil(np.maximum(send_bytes, recv_bytes), bpc))


def _estimate(target, dtype, out_dtype, G, M, K, N, pg, pm, pn, pk, cg, cm, cn, ck, out_live=None,
              partials_dtype=ipu.FLOAT32, in_place=""):
    """Estimated cycles (by phase) and peak bytes per tile of candidate splits (arrays).

    Memory is counted as the memory plan (ipu/compile.py, ipu/memory.py) counts it: the output
    (live all through the product; `out_live` bytes per tile when the caller knows them, else the
    share mapping_for_output gives each of a block's pk tiles), the operand blocks and partials
    (live together), then the partials and the reduction's inputs, the exchange code (one
    instruction pair per run a tile sends or receives, kept for the whole program), the vertex
    code and state of the two codelets, and the stack.

    in_place names the operands ("a", "b") that will be created in the plan's layout (a variable
    laid out by its consumer: popxl/lowering/creators.py) where no two cells share their blocks (an
    n-split shares A blocks, an m-split B blocks): such an operand is not moved, so it costs no
    exchange, no exchange code and no temporary, only its blocks held where they are read."""
    T = target.num_tiles
    isz = dtype.itemsize
    osz = out_dtype.itemsize
    is_half = dtype == ipu.FLOAT16
    is_f8 = dtype.is_float8  # the float8 AMP: one-byte operands, half partials' cycles
    out_float = out_dtype == ipu.FLOAT32
    p_float = partials_dtype == ipu.FLOAT32
    psz = partials_dtype.itemsize
    # operands and outputs are assumed spread evenly over all tiles (the caller's mapping is not
    # known here): each source tile sends its share once (multicast), each cell receives its block
    a_share = _ceil(G * M * K, T) * isz
    b_share = _ceil(G * K * N, T) * isz
    out_pt = int(_ceil(G * M * N, T))
    blk = cg * cm * cn
    shares = reduction_shares(blk, pk, reduction_grain(dtype, out_dtype, target))
    if out_live is None:
        # the planner maps the output (mapping_for_output): where the reduction grain keeps a
        # block on fewer tiles than computed it, those tiles reduce more than the even share
        red_pt = np.where(shares < pk, np.maximum(out_pt, _ceil(blk, shares)), out_pt)
    else:
        red_pt = np.full_like(pk, out_pt)
    a_blk = cg * cm * ck * isz
    b_blk = cg * ck * cn * isz
    p_blk = cg * cm * cn * psz
    zero = np.zeros_like(a_blk)
    if K == 0:
        ex_a = ex_b = compute = ex_p = zero
        red = zero + target.compute_set_launch_cycles + int(
            reduce_partials_cycles(out_pt, 0, out_float, target.worker_contexts))
        red_bytes = zero + _align(out_pt * osz)
    else:
        # the two tiles of an exchange bus pair hold cells n and n + 1 of one (g, m, k) block row
        # (_place_cells): with an even n split they receive the same A block at twice the rate
        # (ipu_costs.shared_bus_weights; poplin's planner: input elements at 2 x exchange bytes
        # per cycle when outChanSplit % tilesPerSuperTile == 0)
        a_recv = np.where((pn % 2 == 0) & (target.tiles_per_shared_exchange_bus == 2), _ceil(a_blk, 2), a_blk)
        ex_a = _phase(target, a_share, a_recv)
        ex_b = _phase(target, b_share, b_blk)
        # one compute set of AMP vertices, started once on every tile (Target.compute_set_launch_cycles)
        compute = target.compute_set_launch_cycles + cg * (
            matmul_block_cycles(cm, ck, cn, False, False, target, float8=True) if is_f8
            else matmul_block_cycles(cm, ck, cn, not is_half, p_float, target))
        ex_p = _phase(target, p_blk, pk * red_pt * psz)
        needs_reduce = (pk > 1) | (out_dtype != partials_dtype)
        red = np.where(needs_reduce,
                       target.compute_set_launch_cycles
                       + reduce_partials_cycles(red_pt, pk, out_float, target.worker_contexts,
                                                partials_float=p_float), 0)
        # the reduction's input [pk, outputs] and (when out's elements are scattered) a result
        red_bytes = np.where(needs_reduce, _align(pk * red_pt * psz) + _align(red_pt * osz), 0)
    a_fixed = (pn == 1) if "a" in in_place else np.zeros_like(pn, dtype=bool)
    b_fixed = (pm == 1) if "b" in in_place else np.zeros_like(pm, dtype=bool)
    ex_a = np.where(a_fixed, 0, ex_a)
    ex_b = np.where(b_fixed, 0, ex_b)
    total = ex_a + ex_b + compute + ex_p + red
    # exchange code: a run per block row received and about as many sent, for both operands; a
    # partial row sent per block row, and pk runs per output row piece received
    runs = (np.where(a_fixed, 0, 2 * cg * cm) + np.where(b_fixed, 0, 2 * cg * ck) + cg * cm
            + pk * (_ceil(out_pt, np.maximum(cn, 1)) + 2))
    moved = np.where(a_fixed, 0, _align(a_blk)) + np.where(b_fixed, 0, _align(b_blk))
    data = np.maximum(moved + _align(p_blk), _align(p_blk) + red_bytes)
    held = np.where(a_fixed, _align(a_blk), 0) + np.where(b_fixed, _align(b_blk), 0)  # always live
    if out_live is None:  # the output mapped by mapping_for_output: a block shared by its reducing tiles
        out_live = _align(_ceil(blk, shares) * osz)
    code = runs * _EXCHANGE_BYTES_PER_RUN + 4 * 16  # exchange code: per run, and per phase
    mem = data + held + out_live + code + _CODE_MARGIN + target.stack_bytes_per_tile
    phases = {"exchange_a": ex_a, "exchange_b": ex_b, "compute": compute, "exchange_partials": ex_p,
              "reduce": red}
    return total, phases, mem, code, data


def reduction_grain(dtype, out_dtype, target) -> int:
    """Output elements a tile reduces at the least (unless the block is smaller): poplin's
    partialGroupedReduce splits a group's output regions between its tiles in grains of the
    partials' channels per group (the AMP's output channels, our n grain), rounded up to a
    multiple of the result type's vector width (64 bits); source: poplibs
    lib/poplin/ConvReduce.cpp, splitRegions(regions, roundedGrainSize, tiles)."""
    dtype = ipu.element_type(dtype)
    geo = amp_geometry(dtype == ipu.FLOAT16, target, float8=dtype.is_float8)
    width = max(1, 8 // ipu.element_type(out_dtype).itemsize)
    return int(-(-max(int(geo["out_chans"]), width) // width) * width)


def reduction_shares(block, pk, grain):
    """How many of a block's pk tiles reduce its outputs: one grain each at the least, so a
    small block is not cut into pieces of a few elements on every tile that computed a
    partial (each piece a message from every one of them: exchange code)."""
    return np.maximum(np.minimum(pk, _ceil(block, grain)), 1)


def _splits(D: int, grain: int, max_parts: int):
    """Distinct ways to cut D elements into chunks of whole grains: (parts, chunk) arrays."""
    if D <= 0:
        return np.array([1], np.int64), np.array([0], np.int64)
    units = -(-D // grain)
    p = np.arange(1, min(units, max_parts) + 1, dtype=np.int64)
    c = np.minimum(-(-units // p) * grain, D)
    c = np.unique(c)
    return -(-D // c), c


def plan_matmul(m: int, k: int, n: int, dtype, target: ipu.Target, batch: int = 1, out_dtype=None,
                reserved_bytes: int = 0, max_tiles: int | None = None, serial_ok: bool = True,
                out_live_bytes: int | None = None, available_memory_proportion: float | None = None,
                partials_dtype=None, in_place: str = "") -> MatMulPlan:
    """Choose how to spread `batch` products [m, k] x [k, n] of `dtype` (float32 or float16) over the
    tiles of `target`, with float32 partials and an `out_dtype` result (float32 by default for
    float32 operands, float16 for float16 ones).

    reserved_bytes: bytes already taken on every tile (always-live data, not the output), kept free.
    out_live_bytes: the output's bytes on the busiest tile when the caller has mapped it (None:
    the planner maps it, mapping_for_output).
    available_memory_proportion: poplibs' availableMemoryProportion: the share of a tile's memory
    the product's temporaries (operand blocks, partials, the reduction's inputs) may take (None: no
    limit but the tile's). PopXL's matmul passes its own, or poplibs' default 0.6.
    partials_dtype: the AMP's partials, float32 (default) or float16 (half operands only: float32
    operands keep float32 partials, as poplin promotes the partials type to the input type).
    in_place: the operands ("a", "b", "ab") a variable will be created for in the plan's layout
    (_estimate); reserved_bytes then leaves that variable out.
    When no split fits in one pass, the product is split serially (see MatMulPlan.serial); with
    serial_ok=False, or when even that does not fit, raises OutOfMemoryError."""
    dtype = ipu.element_type(dtype)
    if dtype not in (ipu.FLOAT32, ipu.FLOAT16) and not dtype.is_float8:
        raise TypeError(f"plan_matmul: operands must be float32, float16 or float8, not {dtype.name}")
    out_dtype = ipu.element_type(out_dtype) if out_dtype is not None else (ipu.FLOAT16 if dtype.is_float8 else dtype)
    if dtype == ipu.FLOAT32 and out_dtype != ipu.FLOAT32:
        raise TypeError("plan_matmul: float32 operands give a float32 result")
    if dtype.is_float8 and out_dtype != ipu.FLOAT16:
        raise TypeError("plan_matmul: float8 operands give a float16 result")
    partials_dtype = _partials_type(dtype, partials_dtype)
    G, M, K, N = (int(batch), int(m), int(k), int(n))
    if min(G, M, K, N) < 0:
        raise ValueError(f"plan_matmul: negative size in batch={G}, m={M}, k={K}, n={N}")
    T = int(max_tiles or target.num_tiles)
    T = max(1, min(T, target.num_tiles))
    geo = amp_geometry(dtype == ipu.FLOAT16, target, float8=dtype.is_float8)

    if G * M * N == 0:
        return MatMulPlan(target, dtype, out_dtype, G, M, K, N, (1, 1, 1, 1), (G, M, N, K),
                          np.zeros((1, 1, 1, 1), np.int64), {"total": 0}, int(reserved_bytes),
                          partials_dtype=partials_dtype)

    gp, gc = _splits(G, 1, T)
    mp, mc = _splits(M, 1, T)
    np_, nc = _splits(N, geo["out_chans"], T)
    kp, kc = _splits(K, geo["in_chans"], T)
    # the grid of candidates, pruned to at most T cells as it is built
    i: np.ndarray
    j: np.ndarray
    a: np.ndarray
    b: np.ndarray
    i, j = np.meshgrid(np.arange(gp.size), np.arange(mp.size), indexing="ij")
    i, j = i.ravel(), j.ravel()
    ok = gp[i] * mp[j] <= T
    cand = [i[ok], j[ok]]
    for parts in (np_, kp):
        base = np.prod([arr[idx] for arr, idx in zip((gp, mp, np_, kp), cand)], axis=0)
        a, b = np.meshgrid(np.arange(base.size), np.arange(parts.size), indexing="ij")
        a, b = a.ravel(), b.ravel()
        ok = base[a] * parts[b] <= T
        cand = [c[a[ok]] for c in cand] + [b[ok]]
    ig, im, in_, ik = cand
    P = (gp[ig], mp[im], np_[in_], kp[ik])
    C = (gc[ig], mc[im], nc[in_], kc[ik])
    total, phases, mem, code, temps = _estimate(target, dtype, out_dtype, G, M, K, N, *P, *C, out_live=out_live_bytes,
                                                partials_dtype=partials_dtype, in_place=in_place)
    mem = mem + int(reserved_bytes)
    temp_limit = _temp_limit(target, available_memory_proportion)
    fits = (mem <= target.bytes_per_tile) & (temps <= temp_limit)
    if not fits.any():
        serial = _serial_plan(target, dtype, out_dtype, G, M, K, N, reserved_bytes, max_tiles, serial_ok,
                              out_live_bytes, available_memory_proportion, partials_dtype)
        if serial is not None:
            return serial
        best = int(np.argmin(np.maximum(mem, temps + reserved_bytes)))
        amp = ("" if available_memory_proportion is None else
               f" and at most {int(temp_limit):,} bytes of temporaries (available_memory_proportion "
               f"{available_memory_proportion:g})")
        raise OutOfMemoryError(
            f"matmul [{G}x{M}x{K}] x [{K}x{N}] {dtype.name} does not fit on {target.name}: no split, in one pass "
            f"or in serial passes, keeps a tile within {target.bytes_per_tile:,} bytes{amp}; the leanest single "
            f"pass needs ~{int(mem[best]):,} bytes on a tile (~{int(temps[best]):,} of them temporaries; "
            f"{int(reserved_bytes):,} already reserved by other tensors). Use a target with more tiles or IPUs, a "
            f"smaller product" + (", or a larger available_memory_proportion (up to 1.0)" if amp else "") + ".",
            [],
        )
    cells = P[0] * P[1] * P[2] * P[3]
    # minimise cycles; then fewer tiles; then less memory
    key = np.where(fits, total, np.iinfo(np.int64).max)
    order = np.lexsort((mem, cells, key))
    best = int(order[0])
    parts = tuple(int(x[best]) for x in P)
    chunks = tuple(int(x[best]) for x in C)
    tiles = _place_cells(parts, T, target)
    est = {k_: int(v[best]) for k_, v in phases.items()}
    est["total"] = int(total[best])
    return MatMulPlan(target, dtype, out_dtype, G, M, K, N, parts, chunks, tiles, est, int(mem[best]),
                      code_bytes=int(code[best]), partials_dtype=partials_dtype,
                      available_memory_proportion=available_memory_proportion)


def _partials_type(dtype, partials_dtype) -> ipu.ElementType:
    """The partials a product of `dtype` operands gets: float32 unless float16 is asked for half
    operands (poplin takes the wider of the partials and input types; float8's AMP keeps its own)."""
    if partials_dtype is None or dtype != ipu.FLOAT16:
        return ipu.FLOAT32
    partials_dtype = ipu.element_type(partials_dtype)
    if partials_dtype not in (ipu.FLOAT32, ipu.FLOAT16):
        raise TypeError(f"plan_matmul: partials must be float32 or float16, not {partials_dtype.name}")
    return partials_dtype


def _place_cells(parts, T: int, target) -> np.ndarray:
    """The tile of every cell of a (g, m, n, k) grid: cells taken in (g, m, k, n) order, n
    innermost, so that consecutive cells share their A block, and spread evenly over the tiles
    (and so over the IPUs of a multi-IPU target) in consecutive pairs, each pair on the two tiles
    of one exchange bus (Target.tiles_per_shared_exchange_bus), as poplin lays out a
    convolution's tiles with the output-channel split innermost (poplin ConvPlan: the exchange bus
    is shared by the input elements)."""
    pg, pm, pn, pk = parts
    used = pg * pm * pn * pk
    c = np.arange(used, dtype=np.int64)
    if target.tiles_per_shared_exchange_bus == 2 and T % 2 == 0 and used > 1:
        tile = 2 * ((c // 2) * (T // 2) // -(-used // 2)) + c % 2
    else:
        tile = c * T // used
    return tile.reshape(pg, pm, pk, pn).transpose(0, 1, 3, 2).copy()


def _temp_limit(target, available_memory_proportion) -> float:
    if available_memory_proportion is None:
        return float(target.bytes_per_tile)
    amp = float(available_memory_proportion)
    if not 0.0 < amp <= 1.0:
        raise ValueError(f"available_memory_proportion must be in (0, 1], got {available_memory_proportion!r}")
    return amp * target.bytes_per_tile


def _serial_plan(target, dtype, out_dtype, G, M, K, N, reserved_bytes, max_tiles, serial_ok, out_live_bytes,
                 available_memory_proportion=None, partials_dtype=None):
    """Split G, M or N into the fewest serial passes whose plan fits (trying each axis, keeping the
    cheapest estimate), or None. The whole output stays live through every pass (spread evenly
    over the tiles unless the caller mapped it); the passes' operand blocks, partials and
    reduction inputs are dead between passes, so the memory plan reuses them: one pass's
    temporaries count, plus every pass's exchange code (code is not freed)."""
    if not serial_ok:
        return None
    if out_live_bytes is None:
        # the output spread evenly over the tiles (mapping_for_output of a serial plan). It is
        # first written by the first pass's reduction, so the memory plan places it above that
        # pass's operand blocks, and the later passes' blocks must fit around it: count its share
        # twice (derivation from ipu/memory.py place_pieces, which allocates in order of first use)
        T = int(max_tiles or target.num_tiles)
        out_live_bytes = 2 * int(_align(_ceil(G * M * N, T) * out_dtype.itemsize))
    best = None
    for axis, size in (("g", G), ("m", M), ("n", N)):

        def attempt(count, axis=axis, size=size):
            """The plan of `count` passes over `axis`, or None when it does not fit."""
            chunk = -(-size // count)
            dims = {"g": G, "m": M, "n": N, axis: chunk}
            try:
                sub = plan_matmul(dims["m"], K, dims["n"], dtype, target, batch=dims["g"], out_dtype=out_dtype,
                                  reserved_bytes=reserved_bytes, max_tiles=max_tiles, serial_ok=False,
                                  out_live_bytes=out_live_bytes,
                                  available_memory_proportion=available_memory_proportion,
                                  partials_dtype=partials_dtype)
            except OutOfMemoryError:
                return None
            passes = -(-size // chunk)
            # code is not freed between passes: every pass's exchange code stays on the tiles
            mem = sub.bytes_per_tile + (passes - 1) * (sub.code_bytes + 64)
            if mem > target.bytes_per_tile:
                return None
            est = {k_: v * passes for k_, v in sub.estimate.items()}
            return MatMulPlan(target, dtype, out_dtype, G, M, K, N, sub.parts, sub.chunks, sub.tiles, est,
                              mem, code_bytes=passes * sub.code_bytes, serial=passes, serial_axis=axis,
                              serial_chunk=chunk, sub=sub, partials_dtype=sub.partials_dtype,
                              available_memory_proportion=available_memory_proportion)

        # the fewest passes that fit: counts growing by ~1/4 (a sub-plan costs milliseconds), then
        # a bisection between the last count that did not fit and the first that did
        lo, found, count = 1, None, 2
        while count <= size and found is None:
            found = attempt(count)
            if found is None:
                lo, count = count, max(count + 1, count * 5 // 4)
        if found is None:
            continue
        hi = found.serial
        while hi - lo > 1:
            mid = (lo + hi) // 2
            p = attempt(mid)
            if p is None:
                lo = mid
            else:
                hi, found = p.serial, p
        if best is None or found.estimate["total"] < best.estimate["total"]:
            best = found
    return best


def plan_for_shapes(a_shape, b_shape, dtype, target: ipu.Target, out_dtype=None, reserved_bytes: int = 0,
                    max_tiles: int | None = None, out_live_bytes: int | None = None,
                    available_memory_proportion: float | None = None, partials_dtype=None,
                    in_place: str = "") -> MatMulPlan:
    """plan_matmul for a NumPy-style matmul of operands of these shapes (batch dims broadcast)."""
    p = canonical_problem(a_shape, b_shape)
    plan = plan_matmul(p.M, p.K, p.N, dtype, target, batch=p.G, out_dtype=out_dtype,
                       reserved_bytes=reserved_bytes, max_tiles=max_tiles, out_live_bytes=out_live_bytes,
                       available_memory_proportion=available_memory_proportion, partials_dtype=partials_dtype,
                       in_place=in_place)
    plan.problem = p
    return plan
