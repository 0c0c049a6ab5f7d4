"""The matrix-multiply planner: spread C = A @ B over the tiles as AMP blocks.

The counterpart of poplin's matmul planner, built only on `ipu/` and the codelets. A product of
canonical shape [G, M, K] x [G, K, N] (batch dimensions broadcast as NumPy's `matmul` does; a
shared operand folds the batch into M or N) is cut into a grid of G x M x N x K chunks. Every cell
of the grid is one tile: it receives its A block [g, m, k] and B block [g, k, n] in two exchange
phases (one Copy per operand: sources that several tiles need are sent once, the exchange
multicasts), computes a float32 partial [g, m, n] with `MatMulBlock` vertices (the AMP), and the
partials then cross one more exchange to the tiles that own each output element, where
`MatMulReducePartials` sums the k-split (casting to float16 for a half output).

`plan_matmul` chooses the split that minimises the estimated cycles

    exchange(A blocks) + exchange(B blocks) + AMP compute + exchange(partials) + reduction

(each exchange: sync + fixed overhead + max(bytes sent, bytes received) / 4 per cycle on the
busiest tile, as ipu.costs prices it; compute from the codelets' cost models) among the splits
whose temporaries fit in tile memory.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

import ipu
from ipu import MappingError, OutOfMemoryError
from ipu import costs as ipu_costs
from ipu.tensor import TEMPORARY

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


def _canon_a(idx, p: Problem):
    bt = max(1, int(np.prod(p.batch_shape, dtype=np.int64)))
    x = np.broadcast_to(idx, p.batch_shape + (p.m, p.K)).reshape(bt, p.m, p.K)
    if p.fold == "m":
        return x.reshape(1, bt * p.m, p.K)
    if p.fold == "n":
        return x[:1]
    return x


def _canon_b(idx, p: Problem):
    bt = max(1, int(np.prod(p.batch_shape, dtype=np.int64)))
    x = np.broadcast_to(idx, p.batch_shape + (p.K, p.n)).reshape(bt, p.K, p.n)
    if p.fold == "m":
        return x[:1]
    if p.fold == "n":
        return x.transpose(1, 0, 2).reshape(1, p.K, bt * p.n)
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


def _estimate(target, dtype, out_dtype, G, M, K, N, pg, pm, pn, pk, cg, cm, cn, ck):
    """Estimated cycles (by phase) and peak bytes per tile of candidate splits (arrays)."""
    T = target.num_tiles
    isz = dtype.itemsize
    osz = out_dtype.itemsize
    is_half = dtype == ipu.FLOAT16
    out_float = out_dtype == ipu.FLOAT32
    # operands and outputs are assumed spread evenly over all tiles (the caller's mapping is not
    # known here): each source tile sends its share once (multicast), each cell receives its block
    a_share = _ceil(G * M * K, T) * isz
    b_share = _ceil(G * K * N, T) * isz
    out_pt = int(_ceil(G * M * N, T))
    a_blk = cg * cm * ck * isz
    b_blk = cg * ck * cn * isz
    p_blk = cg * cm * cn * 4
    zero = np.zeros_like(a_blk)
    if K == 0:
        ex_a = ex_b = compute = ex_p = zero
        red = zero + int(reduce_partials_cycles(out_pt, 0, out_float, target.worker_contexts))
        red_bytes = zero + _align(out_pt * osz)
    else:
        ex_a = _phase(target, a_share, a_blk)
        ex_b = _phase(target, b_share, b_blk)
        compute = cg * matmul_block_cycles(cm, ck, cn, not is_half, True, target)
        ex_p = _phase(target, p_blk, pk * out_pt * 4)
        needs_reduce = (pk > 1) | (not out_float)
        red = np.where(needs_reduce,
                       reduce_partials_cycles(np.full_like(pk, out_pt), pk, out_float, target.worker_contexts), 0)
        # the reduction's input [pk, outputs] and (when out's elements are scattered) a result
        red_bytes = np.where(needs_reduce, _align(pk * out_pt * 4) + _align(out_pt * osz), 0)
    total = ex_a + ex_b + compute + ex_p + red
    # exchange code: a run per block row received and about as many sent, for both operands; a
    # partial row sent per block row, and pk runs per output row piece received
    runs = (2 * cg * cm + 2 * cg * ck + cg * cm + pk * (_ceil(out_pt, np.maximum(cn, 1)) + 2)) * 5 // 4
    data = np.maximum(_align(a_blk) + _align(b_blk) + _align(p_blk), _align(p_blk) + red_bytes)
    code = runs * _EXCHANGE_BYTES_PER_RUN + 4 * 16  # exchange code: per run, and per phase
    mem = data + code + _CODE_MARGIN + target.stack_bytes_per_tile
    phases = {"exchange_a": ex_a, "exchange_b": ex_b, "compute": compute, "exchange_partials": ex_p,
              "reduce": red}
    return total, phases, mem, code


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
                reserved_bytes: int = 0, max_tiles: int | None = None, serial_ok: bool = True) -> MatMulPlan:
    """Choose how to spread `batch` products [m, k] x [k, n] of `dtype` (float32 or float16) over the
    tiles of `target`, with float32 partials and an `out_dtype` result (float32 by default for
    float32 operands, float16 for float16 ones).

    reserved_bytes: bytes already taken on every tile (always-live data), kept free.
    When no split fits in one pass, the product is split serially (see MatMulPlan.serial); with
    serial_ok=False, or when even that does not fit, raises OutOfMemoryError."""
    dtype = ipu.element_type(dtype)
    if dtype not in (ipu.FLOAT32, ipu.FLOAT16):
        raise TypeError(f"plan_matmul: operands must be float32 or float16, not {dtype.name}")
    out_dtype = ipu.element_type(out_dtype) if out_dtype is not None else dtype
    if dtype == ipu.FLOAT32 and out_dtype != ipu.FLOAT32:
        raise TypeError("plan_matmul: float32 operands give a float32 result")
    G, M, K, N = (int(batch), int(m), int(k), int(n))
    if min(G, M, K, N) < 0:
        raise ValueError(f"plan_matmul: negative size in batch={G}, m={M}, k={K}, n={N}")
    T = int(max_tiles or target.num_tiles)
    T = max(1, min(T, target.num_tiles))
    geo = amp_geometry(dtype == ipu.FLOAT16, target)

    if G * M * N == 0:
        return MatMulPlan(target, dtype, out_dtype, G, M, K, N, (1, 1, 1, 1), (G, M, N, K),
                          np.zeros((1, 1, 1, 1), np.int64), {"total": 0}, int(reserved_bytes))

    gp, gc = _splits(G, 1, T)
    mp, mc = _splits(M, 1, T)
    np_, nc = _splits(N, geo["out_chans"], T)
    kp, kc = _splits(K, geo["in_chans"], T)
    # the grid of candidates, pruned to at most T cells as it is built
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
    total, phases, mem, code = _estimate(target, dtype, out_dtype, G, M, K, N, *P, *C)
    mem = mem + int(reserved_bytes)
    fits = mem <= target.bytes_per_tile
    if not fits.any():
        serial = _serial_plan(target, dtype, out_dtype, G, M, K, N, reserved_bytes, max_tiles, serial_ok)
        if serial is not None:
            return serial
        best = int(np.argmin(mem))
        raise OutOfMemoryError(
            f"matmul [{G}x{M}x{K}] x [{K}x{N}] {dtype.name} does not fit on {target.name}: the smallest "
            f"split needs ~{int(mem[best]):,} bytes on a tile ({int(reserved_bytes):,} already reserved) of "
            f"{target.bytes_per_tile:,}. Use a target with more tiles or IPUs, or a smaller product.",
            [],
        )
    cells = P[0] * P[1] * P[2] * P[3]
    # minimise cycles; then fewer tiles; then less memory
    key = np.where(fits, total, np.iinfo(np.int64).max)
    order = np.lexsort((mem, cells, key))
    best = int(order[0])
    parts = tuple(int(x[best]) for x in P)
    chunks = tuple(int(x[best]) for x in C)
    used = int(np.prod(parts))
    # spread the cells evenly over the tiles (and so over the IPUs of a multi-IPU target)
    tiles = (np.arange(used, dtype=np.int64) * T // used).reshape(parts)
    est = {k_: int(v[best]) for k_, v in phases.items()}
    est["total"] = int(total[best])
    return MatMulPlan(target, dtype, out_dtype, G, M, K, N, parts, chunks, tiles, est, int(mem[best]),
                      code_bytes=int(code[best]))


def _serial_plan(target, dtype, out_dtype, G, M, K, N, reserved_bytes, max_tiles, serial_ok):
    """Split G, M or N into the fewest serial passes whose plan fits (trying each axis, keeping the
    cheapest estimate), or None."""
    if not serial_ok:
        return None
    best = None
    for axis, size in (("g", G), ("m", M), ("n", N)):
        tried = set()
        count = 2
        while count <= size:
            chunk = -(-size // count)
            count = count + 1 if count < 64 else count * 2
            if chunk in tried:
                continue
            tried.add(chunk)
            dims = {"g": G, "m": M, "n": N, axis: chunk}
            try:
                sub = plan_matmul(dims["m"], K, dims["n"], dtype, target, batch=dims["g"], out_dtype=out_dtype,
                                  reserved_bytes=reserved_bytes, max_tiles=max_tiles, serial_ok=False)
            except OutOfMemoryError:
                continue
            passes = -(-size // chunk)
            # code is not freed between passes: every pass's exchange code stays on the tiles
            mem = sub.bytes_per_tile + (passes - 1) * (sub.code_bytes + 64)
            if mem > target.bytes_per_tile:
                continue
            est = {k_: v * passes for k_, v in sub.estimate.items()}
            if best is None or est["total"] < best.estimate["total"]:
                best = MatMulPlan(target, dtype, out_dtype, G, M, K, N, sub.parts, sub.chunks, sub.tiles, est,
                                  mem, code_bytes=passes * sub.code_bytes, serial=passes, serial_axis=axis,
                                  serial_chunk=chunk, sub=sub)
            break
    return best


def plan_for_shapes(a_shape, b_shape, dtype, target: ipu.Target, out_dtype=None, reserved_bytes: int = 0,
                    max_tiles: int | None = None) -> MatMulPlan:
    """plan_matmul for a NumPy-style matmul of operands of these shapes (batch dims broadcast)."""
    p = canonical_problem(a_shape, b_shape)
    plan = plan_matmul(p.M, p.K, p.N, dtype, target, batch=p.G, out_dtype=out_dtype,
                       reserved_bytes=reserved_bytes, max_tiles=max_tiles)
    plan.problem = p
    return plan


# ------------------------------------------------------------------------------------------------
# the cells of a plan


def _cells(plan: MatMulPlan):
    """Per cell (C order over the grid): origin and size in (g, m, n, k), and its tile."""
    pg, pm, pn, pk = plan.parts
    cg, cm, cn, ck = plan.chunks
    ig, im, in_, ik = (x.ravel() for x in np.meshgrid(np.arange(pg), np.arange(pm), np.arange(pn),
                                                       np.arange(pk), indexing="ij"))
    g0, m0, n0, k0 = ig * cg, im * cm, in_ * cn, ik * ck
    gs = np.clip(plan.G - g0, 0, cg)
    ms = np.clip(plan.M - m0, 0, cm)
    ns = np.clip(plan.N - n0, 0, cn)
    ks = np.clip(plan.K - k0, 0, ck)
    return dict(g0=g0, m0=m0, n0=n0, k0=k0, gs=gs, ms=ms, ns=ns, ks=ks, tile=plan.tiles.ravel())


def _owner_canonical(plan: MatMulPlan) -> np.ndarray:
    """For mapping_for_output: the tile of every canonical output element [G, M, N], each output
    block split into pk contiguous (in block order) shares among the tiles that computed it."""
    pg, pm, pn, pk = plan.parts
    cg, cm, cn, _ = plan.chunks
    G, M, N = plan.G, plan.M, plan.N
    g = np.arange(G)[:, None, None]
    i = np.arange(M)[None, :, None]
    j = np.arange(N)[None, None, :]
    ig, im, in_ = g // cg, i // cm, j // cn
    gs = np.minimum(cg, G - ig * cg)
    ms = np.minimum(cm, M - im * cm)
    ns = np.minimum(cn, N - in_ * cn)
    e = ((g - ig * cg) * ms + (i - im * cm)) * ns + (j - in_ * cn)
    share = e * pk // (gs * ms * ns)
    return plan.tiles[ig, im, in_, share]


def mapping_for_output(plan: MatMulPlan, out_shape=None) -> np.ndarray:
    """The tile of every element of the output (flat, row-major over `out_shape`, by default the
    shape of the problem the plan was made for) that keeps the reduction next to the partials:
    each output block is shared out among the pk tiles that computed its partials."""
    if plan.sub is not None:
        # serial passes: spread the output evenly (each pass reduces onto wherever it lives)
        total = plan.G * plan.M * plan.N
        T = plan.target.num_tiles
        return (np.arange(total, dtype=np.int64) * T // max(total, 1)).astype(np.int32)
    owner = _owner_canonical(plan)
    p = plan.problem
    if p is None:
        shape = tuple(out_shape) if out_shape is not None else ((plan.M, plan.N) if plan.G == 1 else (plan.G, plan.M, plan.N))
        if int(np.prod(shape, dtype=np.int64)) != owner.size:
            raise ValueError(f"out_shape {shape} does not hold the plan's {owner.size} outputs")
        return owner.reshape(-1).astype(np.int32)
    pos = _canon_c(np.arange(int(np.prod(p.out_shape, dtype=np.int64)), dtype=np.int64), p)
    tiles = np.empty(pos.size, np.int32)
    tiles[pos.reshape(-1)] = owner.reshape(-1)
    return tiles


def map_output(graph: ipu.Graph, out: ipu.Tensor, plan: MatMulPlan) -> None:
    """Map `out` (a view of the product's shape) with mapping_for_output(plan)."""
    tiles = mapping_for_output(plan, out.shape)
    if tiles.size != out.numel:
        raise ValueError(f"map_output: {out.name!r} has {out.numel} elements, the plan makes {tiles.size}")
    _set_mapping(graph, out, tiles)


def _set_mapping(graph, t: ipu.Tensor, tiles: np.ndarray) -> None:
    """Map the view's flat elements to `tiles` (one per element) through set_tile_mapping."""
    tiles = np.asarray(tiles).reshape(-1)
    if tiles.size == 0:
        return
    brk = np.flatnonzero(tiles[1:] != tiles[:-1]) + 1
    starts = np.concatenate(([0], brk))
    stops = np.concatenate((brk, [tiles.size]))
    mapping: dict = {}
    for s, e, tl in zip(starts.tolist(), stops.tolist(), tiles[starts].tolist()):
        mapping.setdefault(tl, []).append((s, e))
    graph.set_tile_mapping(t, mapping)


# ------------------------------------------------------------------------------------------------
# building the programs


def _reserved_bytes(graph: ipu.Graph) -> int:
    """The most always-live bytes (variables, constants) any tile already holds."""
    T = graph.target.num_tiles
    per_tile = np.zeros(T, np.int64)
    for v in graph.variables:
        if v.category == TEMPORARY or v.numel == 0:
            continue
        t = v.tile_of[v.tile_of >= 0]
        if t.size:
            per_tile += np.bincount(t, minlength=T) * v.dtype.itemsize
    return int(per_tile.max(initial=0))


def _blocks_variable(graph, name, dtype, tiles, sizes):
    """A temporary holding one contiguous block per cell on the cell's tile; returns (var, offsets)."""
    sizes = np.asarray(sizes, np.int64)
    off = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    total = int(sizes.sum())
    var = graph.add_variable(name, (total,), dtype, category=TEMPORARY)
    if total:
        var.tile_of[:] = np.repeat(np.asarray(tiles, np.int32), sizes)
    return var, off


def _gather(src3, cells, axes):
    """Concatenated flat blocks src3[g0:g0+gs, r0:r0+rs, c0:c0+cs] of every cell."""
    (r0k, rsk), (c0k, csk) = axes
    parts = []
    for g0, gs, r0, rs, c0, cs in zip(cells["g0"].tolist(), cells["gs"].tolist(), cells[r0k].tolist(),
                                      cells[rsk].tolist(), cells[c0k].tolist(), cells[csk].tolist()):
        parts.append(src3[g0:g0 + gs, r0:r0 + rs, c0:c0 + cs].reshape(-1))
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def build_matmul(graph: ipu.Graph, a: ipu.Tensor, b: ipu.Tensor, out: ipu.Tensor, plan: MatMulPlan | None = None,
                 name: str = "matmul") -> ipu.Program:
    """out = a @ b (NumPy matmul rules, batch dims broadcast) on the tiles, as a program.

    a [..., M, K], b [..., K, N] (float32, or float16) and out [..., M, N] (float32; float16 or
    float32 for half operands) are views mapped however the caller mapped them. If out is not
    mapped at all it is mapped with mapping_for_output. The program: Copy A blocks to their tiles,
    Copy B blocks, one compute set of MatMulBlock vertices (float32 partials), Copy the partials to
    the tiles that own each output element, one compute set of MatMulReducePartials summing them
    into out (and, when out's elements on a tile are too scattered to reduce in place, a last local
    Copy from a per-tile result into out).
    """
    target = graph.target
    for t, what in ((a, "a"), (b, "b"), (out, "out")):
        if not isinstance(t, ipu.Tensor):
            raise TypeError(f"build_matmul: {what} must be an ipu.Tensor, got {type(t).__name__}")
    if a.dtype != b.dtype:
        raise TypeError(f"build_matmul: a is {a.dtype.name} but b is {b.dtype.name}")
    if a.dtype not in (ipu.FLOAT32, ipu.FLOAT16):
        raise TypeError(f"build_matmul: operands must be float32 or float16, not {a.dtype.name}")
    if out.dtype not in (ipu.FLOAT32, ipu.FLOAT16) or (a.dtype == ipu.FLOAT32 and out.dtype != ipu.FLOAT32):
        raise TypeError(f"build_matmul: a {a.dtype.name} product cannot be written to a {out.dtype.name} output")
    prob = canonical_problem(a.shape, b.shape)
    if tuple(out.shape) != prob.out_shape:
        raise ValueError(f"build_matmul: out has shape {tuple(out.shape)}, a @ b has shape {prob.out_shape}")
    if plan is None:
        plan = plan_for_shapes(a.shape, b.shape, a.dtype, target, out_dtype=out.dtype,
                               reserved_bytes=_reserved_bytes(graph))
    else:
        if (plan.G, plan.M, plan.K, plan.N) != (prob.G, prob.M, prob.K, prob.N):
            raise ValueError(f"build_matmul: the plan is for [{plan.G}x{plan.M}x{plan.K}] x [{plan.K}x{plan.N}], "
                             f"these operands make [{prob.G}x{prob.M}x{prob.K}] x [{prob.K}x{prob.N}]")
        if plan.target.num_tiles != target.num_tiles:
            raise ValueError("build_matmul: the plan was made for another target")
        if plan.problem is None:
            plan.problem = prob
    G, M, K, N = plan.G, plan.M, plan.K, plan.N
    seq = ipu.Sequence(name=name)
    if G * M * N == 0:
        return seq

    C = _canon_c(out.index(), prob)
    c_flat = np.ascontiguousarray(C).reshape(-1)
    out_var = out.variable
    owners = out_var.tile_of[c_flat]
    if (owners < 0).any():
        if not (owners < 0).all():
            raise MappingError(f"build_matmul: out {out.name!r} is only partly mapped; map all of it or none")
        map_output(graph, out, plan)
        owners = out_var.tile_of[c_flat]
    if plan.sub is not None:
        return _build_serial(graph, a, b, out, plan, prob, C, name, seq)

    cells = _cells(plan)
    tiles = cells["tile"]
    P = plan.num_partials
    isz_t = a.dtype

    # 1. operand blocks to their tiles (one exchange phase per operand)
    if K > 0:
        A = _canon_a(a.index(), prob)
        B = _canon_b(b.index(), prob)
        a_sizes = cells["gs"] * cells["ms"] * cells["ks"]
        b_sizes = cells["gs"] * cells["ks"] * cells["ns"]
        p_sizes = cells["gs"] * cells["ms"] * cells["ns"]
        a_blocks, a_off = _blocks_variable(graph, f"{name}/a_blocks", isz_t, tiles, a_sizes)
        b_blocks, b_off = _blocks_variable(graph, f"{name}/b_blocks", isz_t, tiles, b_sizes)
        partials, p_off = _blocks_variable(graph, f"{name}/partials", ipu.FLOAT32, tiles, p_sizes)
        a_src = _gather(A, cells, (("m0", "ms"), ("k0", "ks")))
        b_src = _gather(B, cells, (("k0", "ks"), ("n0", "ns")))
        seq.add(ipu.Copy(ipu.Tensor(a.variable, a_src, a_src.shape), a_blocks, name=f"{name}/exchange a"))
        seq.add(ipu.Copy(ipu.Tensor(b.variable, b_src, b_src.shape), b_blocks, name=f"{name}/exchange b"))

        # 2. the AMP: one MatMulBlock per (cell, batch element of the cell)
        cs = graph.add_compute_set(f"{name}/amp")
        gs = cells["gs"]
        cell_of = np.repeat(np.arange(gs.size), gs)
        local = np.arange(cell_of.size) - np.repeat(np.cumsum(gs) - gs, gs)
        ms, ks, ns = cells["ms"][cell_of], cells["ks"][cell_of], cells["ns"][cell_of]
        keep = (ms > 0) & (ns > 0)
        cell_of, local, ms, ks, ns = cell_of[keep], local[keep], ms[keep], ks[keep], ns[keep]
        graph.add_vertices(cs, "MatMulBlock", tiles[cell_of], {
            "a": (a_blocks, a_off[cell_of] + local * ms * ks, ms * ks),
            "b": (b_blocks, b_off[cell_of] + local * ks * ns, ks * ns),
            "out": (partials, p_off[cell_of] + local * ms * ns, ms * ns),
        }, ip={"m": ms, "k": ks, "n": ns, "accumulate": 0})
        seq.add(ipu.Execute(cs, name=f"{name}/amp"))

    # 3. partials to the tiles that reduce them: the owners of the outputs when out is spread
    # about evenly (the reduction then writes out in place), else the plan's own spread
    # (mapping_for_output) into a result that a last Copy moves into out
    even = -(-owners.size // target.num_tiles)
    spread = np.bincount(owners, minlength=target.num_tiles).max() <= 2 * even + 16
    if not spread:
        owners = _owner_canonical(plan).reshape(-1)
    # the output elements in order of (reducing tile, position in out's variable)
    key_sorted = np.all(owners[1:] >= owners[:-1]) if owners.size > 1 else True
    if key_sorted and (c_flat.size < 2 or np.all(c_flat[1:] > c_flat[:-1])):
        q = np.arange(c_flat.size, dtype=np.int64)
    else:
        q = np.lexsort((c_flat, owners))
    flat = c_flat[q]
    own = owners[q].astype(np.int64)
    total = q.size
    brk = np.ones(total, bool)
    brk[1:] = (own[1:] != own[:-1]) | (flat[1:] != flat[:-1] + 1)
    run_start = np.flatnonzero(brk)
    run_len = np.diff(np.append(run_start, total))
    out_float = out.dtype == ipu.FLOAT32
    nt = target.num_tiles

    if K > 0:
        # for every element of `partials`, in memory order: its output element (its rank in the
        # sorted order above) and its k chunk. The partials Copy then reads `partials` in order and
        # scatters into the reduction's inputs, which keeps the host's copy streaming through
        # memory (the simulated exchange is the same set of runs either way).
        pg_, pm_, pn_, pk_ = plan.parts
        cg_, cm_, cn_, _ = plan.chunks
        rank = np.empty(total, np.int64)
        rank[q] = np.arange(total, dtype=np.int64)
        elem_rank = np.empty(int(p_sizes.sum()), np.int64)
        # cells come in a few shapes (the edge cells of each dimension are smaller): per shape, the
        # output positions of a block are one pattern shifted by the block's origin
        shape_key = (cells["gs"] * (M + 1) + cells["ms"]) * (N + 1) + cells["ns"]
        for key in np.unique(shape_key):
            sel = np.flatnonzero(shape_key == key)
            gs_, ms_, ns_ = (int(cells[x][sel[0]]) for x in ("gs", "ms", "ns"))
            blk = gs_ * ms_ * ns_
            if blk == 0:
                continue
            pattern = ((np.arange(gs_)[:, None, None] * M + np.arange(ms_)[None, :, None]) * N
                       + np.arange(ns_)[None, None, :]).reshape(-1)
            origin = (cells["g0"][sel] * M + cells["m0"][sel]) * N + cells["n0"][sel]
            where = p_off[sel][:, None] + np.arange(blk)[None, :]
            elem_rank[where] = rank[origin[:, None] + pattern[None, :]]
        elem_p = np.repeat(np.arange(p_sizes.size, dtype=np.int64) % pk_, p_sizes)

    if K > 0 and P == 1 and out_float:
        # nothing to add up: the partials are the result
        dst = flat[elem_rank]
        seq.add(ipu.Copy(partials, ipu.Tensor(out_var, dst, dst.shape), name=f"{name}/exchange partials"))
        return seq

    # reduce each run of out in place, or each tile's elements into a contiguous result then copy
    # them into out locally: whichever the cost models make cheaper on the busiest tile
    run_tile = own[run_start]
    direct = np.bincount(run_tile, weights=reduce_partials_cycles(run_len, P, out_float, target.worker_contexts),
                         minlength=nt).max()
    tile_ids, tile_start, tile_len = np.unique(own, return_index=True, return_counts=True)
    via_temp = (reduce_partials_cycles(tile_len, P, out_float, target.worker_contexts).max()
                + ipu_costs.sync_cycles(target) + target.exchange_overhead_cycles
                + int(np.ceil(tile_len.max() * out.dtype.itemsize / target.memory_write_bytes_per_cycle)))
    in_place = spread and direct <= via_temp
    if in_place:
        grp_start, grp_len, grp_tile = run_start, run_len, run_tile
    else:
        grp_start, grp_len, grp_tile = tile_start, tile_len, tile_ids
    grp_of = np.repeat(np.arange(grp_start.size), grp_len)
    pos_in = np.arange(total) - grp_start[grp_of]

    if P > 0:
        red_in, red_off = _blocks_variable(graph, f"{name}/reduce_in", ipu.FLOAT32, grp_tile, P * grp_len)
        grp_e = grp_of[elem_rank]
        dst = red_off[grp_e] + elem_p * grp_len[grp_e] + pos_in[elem_rank]
        seq.add(ipu.Copy(partials, ipu.Tensor(red_in, dst, dst.shape), name=f"{name}/exchange partials"))
        red_fields = (red_in, red_off, P * grp_len)
    else:
        # k = 0: nothing to add, the reduction writes zeros; one float per tile to connect to
        dummy_tiles = np.unique(grp_tile)
        dummy, _ = _blocks_variable(graph, f"{name}/no_partials", ipu.FLOAT32, dummy_tiles, np.ones(dummy_tiles.size, np.int64))
        red_fields = (dummy, np.searchsorted(dummy_tiles, grp_tile), np.zeros(grp_tile.size, np.int64))

    cs = graph.add_compute_set(f"{name}/reduce")
    if in_place:
        dst = (out_var, flat[grp_start], grp_len)
    else:
        result, res_off = _blocks_variable(graph, f"{name}/result", out.dtype, grp_tile, grp_len)
        dst = (result, res_off, grp_len)
    graph.add_vertices(cs, "MatMulReducePartials", grp_tile, {"partials": red_fields, "out": dst},
                       ip={"num_partials": np.full(grp_tile.size, P)})
    seq.add(ipu.Execute(cs, name=f"{name}/reduce"))
    if not in_place:
        seq.add(ipu.Copy(result, ipu.Tensor(out_var, flat, flat.shape), name=f"{name}/write out"))
    return seq


def _build_serial(graph, a, b, out, plan, prob, C, name, seq):
    """The passes of a serially split plan, each a full build over a slice of the canonical
    problem (views of the same variables); their temporaries are dead between passes, so the
    memory planner reuses them."""
    A = _canon_a(a.index(), prob)
    B = _canon_b(b.index(), prob)
    size = {"g": plan.G, "m": plan.M, "n": plan.N}[plan.serial_axis]
    for s_ in range(plan.serial):
        lo = s_ * plan.serial_chunk
        hi = min(size, lo + plan.serial_chunk)
        if plan.serial_axis == "g":
            As, Bs, Cs = A[lo:hi], B[lo:hi], C[lo:hi]
        elif plan.serial_axis == "m":
            As, Bs, Cs = A[:, lo:hi], B, C[:, lo:hi]
        else:
            As, Bs, Cs = A, B[:, :, lo:hi], C[:, :, lo:hi]
        As, Bs, Cs = (np.ascontiguousarray(x) for x in (As, Bs, Cs))
        sub = plan.sub if hi - lo == plan.serial_chunk else None
        seq.add(build_matmul(graph, ipu.Tensor(a.variable, As, As.shape), ipu.Tensor(b.variable, Bs, Bs.shape),
                             ipu.Tensor(out.variable, Cs, Cs.shape), plan=sub, name=f"{name}/pass{s_}"))
    return seq
