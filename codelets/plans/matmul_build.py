"""The matmul programs: C = A @ B on the tiles as AMP blocks, following a plan (matmul_plan.py).

The counterpart of poplin's matmul, built only on `ipu/` and the codelets. Every cell of the plan's
grid is one tile: it receives its A block [g, m, k] and B block [g, k, n] in two exchange phases
(one Copy per operand: sources that several tiles need are sent once, the exchange multicasts),
computes a float32 partial [g, m, n] with `MatMulBlock` vertices (the AMP), and the partials then
cross one more exchange to the tiles that own each output element, where `MatMulReducePartials`
sums the k-split (casting to float16 for a half output). How operand blocks reach their tiles,
transposed operands included, is matmul_operands.py.
"""
from __future__ import annotations

import numpy as np

import ipu
from ipu import MappingError
from ipu import costs as ipu_costs
from ipu import replay
from ipu.tensor import TEMPORARY, IndexRuns

from ..matmul import reduce_partials_cycles

from .matmul_operands import _blocks_variable, _exchange_operand, _view, blocks_in_place
from .matmul_plan import (_ALIGN, _CODE_MARGIN, _EXCHANGE_BYTES_PER_RUN, MatMulPlan, Problem,  # noqa: F401
                          _align, _canon_a, _canon_b, _canon_c, _ceil, _phase, canonical_problem,
                          plan_for_shapes, plan_matmul, reduction_grain, reduction_shares)

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
    block split into contiguous (in block order) shares among the first of the pk tiles that
    computed it, a whole number of reduction grains each (reduction_shares)."""
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
    grain = reduction_grain(plan.dtype, plan.out_dtype, plan.target)
    blk = gs * ms * ns
    grains = -(-blk // grain)
    share = (e // grain) * reduction_shares(blk, pk, grain) // grains
    return plan.tiles[ig, im, in_, share]


def _owner_serial(plan: MatMulPlan) -> np.ndarray:
    """_owner_canonical for serial passes: every pass's slice of the output laid out as that pass's
    own reduction wants it (spread over all the tiles, not a pass on some tiles and the next on
    others, which would give each pass's reduction half the tiles), the last, smaller slice
    spread evenly."""
    G, M, N = plan.G, plan.M, plan.N
    owner = np.empty((G, M, N), np.int64)
    size = {"g": G, "m": M, "n": N}[plan.serial_axis]
    axis = "gmn".index(plan.serial_axis)
    T = plan.target.num_tiles
    for s_ in range(plan.serial):
        lo = s_ * plan.serial_chunk
        hi = min(size, lo + plan.serial_chunk)
        idx = [slice(None)] * 3
        idx[axis] = slice(lo, hi)
        part = owner[tuple(idx)]
        if hi - lo == plan.serial_chunk:
            assert plan.sub is not None  # a serial plan carries its passes' plan
            part[...] = _owner_canonical(plan.sub)
        else:
            part[...] = (np.arange(part.size, dtype=np.int64) * T // max(part.size, 1)).reshape(part.shape)
    return owner


def mapping_for_output(plan: MatMulPlan, out_shape=None) -> np.ndarray:
    """The tile of every element of the output (flat, row-major over `out_shape`, by default the
    shape of the problem the plan was made for) that keeps the reduction next to the partials:
    each output block is shared out among the pk tiles that computed its partials."""
    owner = _owner_serial(plan) if plan.sub is not None else _owner_canonical(plan)
    p = plan.problem
    if p is None:
        default = (plan.M, plan.N) if plan.G == 1 else (plan.G, plan.M, plan.N)
        shape = tuple(out_shape) if out_shape is not None else default
        if int(np.prod(shape, dtype=np.int64)) != owner.size:
            raise ValueError(f"out_shape {shape} does not hold the plan's {owner.size} outputs")
        return owner.reshape(-1).astype(np.int32)
    pos = _canon_c(np.arange(int(np.prod(p.out_shape, dtype=np.int64)), dtype=np.int64), p)
    tiles = np.empty(pos.size, np.int32)
    tiles[pos.reshape(-1)] = owner.reshape(-1)
    return tiles


def _plan_key(plan: MatMulPlan):
    """What mapping_for_output and _owner_canonical read of a plan (None for a serial plan)."""
    if plan.sub is not None:
        return None
    return (plan.G, plan.M, plan.N, plan.parts, plan.chunks, plan.tiles.shape, plan.tiles.tobytes(), plan.problem)


def _memo(graph: ipu.Graph, key, build) -> np.ndarray:
    """build() once per key in this graph (a model's layers repeat the same products): the
    array is read only, so no caller can change what the next one gets."""
    if key is None:
        return build()
    cache = graph.__dict__.setdefault("_matmul_mapping_memo", {})
    hit = cache.get(key)
    if hit is None:
        hit = cache[key] = build()
        hit.flags.writeable = False
    return hit


def map_output(graph: ipu.Graph, out: ipu.Tensor, plan: MatMulPlan) -> None:
    """Map `out` (a view of the product's shape) with mapping_for_output(plan)."""
    key = _plan_key(plan)
    tiles = _memo(graph, key and ("output", key, tuple(out.shape)), lambda: mapping_for_output(plan, out.shape))
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
    if t.is_identity and t.variable.unmapped() == t.numel:  # as runs: no per-element tile table
        t.variable.set_tile_runs(tiles[starts], stops - starts)
        return
    mapping: dict = {}
    for s, e, tl in zip(starts.tolist(), stops.tolist(), tiles[starts].tolist()):
        mapping.setdefault(tl, []).append((s, e))
    graph.set_tile_mapping(t, mapping)


# ------------------------------------------------------------------------------------------------
# building the programs


def _products_code(graph: ipu.Graph) -> int:
    """The exchange code of the program's products when the lowering estimated it up front
    (popxl/lowering/rules/matmul.py reserve_products_code): code is loaded for the whole program,
    never freed, so a product is planned around all of it."""
    return int(graph.__dict__.get("_products_code_bytes", 0))


def _reserved_bytes(graph: ipu.Graph, exclude=None) -> int:
    """The most always-live bytes (variables, constants) any tile already holds (but `exclude`).

    Each variable's bytes per tile are counted once and remembered with the tiles of its pieces
    (a model with many matmuls would otherwise recount every variable at every matmul)."""
    T = graph.target.num_tiles
    per_tile = np.zeros(T, np.int64)
    cache = graph.__dict__.setdefault("_reserved_by_variable", {})
    for v in graph.variables:
        if v.category == TEMPORARY or v.numel == 0 or v is exclude:
            continue
        key = v.pieces()[2]  # the tiles of its pieces: changes when the mapping does
        hit = cache.get(v.id)
        if hit is None or not np.array_equal(hit[0], key):
            hit = cache[v.id] = (key, v.tiles_per_element_count(T) * v.dtype.itemsize)
        per_tile += hit[1]
    return int(per_tile.max(initial=0))


def _mapped_bytes(t: ipu.Tensor):
    """Bytes of the view's variable on its busiest tile, or None when it is not mapped yet."""
    v = t.variable
    if v.numel == 0 or v.unmapped():
        return None
    return int(v.tiles_per_element_count(1).max()) * v.dtype.itemsize


def choose_plan(graph: ipu.Graph, a: ipu.Tensor, b: ipu.Tensor, out: ipu.Tensor, plan: MatMulPlan | None = None,
                available_memory_proportion: float | None = None, partials_dtype=None) -> MatMulPlan:
    """The plan build_matmul follows for out = a @ b: `plan` when given (checked against the
    operands), else one made around the always-live bytes and the program's code."""
    target = graph.target
    prob = canonical_problem(a.shape, b.shape)
    if plan is None:
        def planned(reserved):
            return plan_for_shapes(a.shape, b.shape, a.dtype, target, out_dtype=out.dtype, reserved_bytes=reserved,
                                   out_live_bytes=_mapped_bytes(out),
                                   available_memory_proportion=available_memory_proportion,
                                   partials_dtype=partials_dtype)

        reserved = _reserved_bytes(graph, exclude=out.variable)
        try:  # around the program's code; when nothing fits so, the memory plan says what overflows
            plan = planned(reserved + _products_code(graph))
        except ipu.OutOfMemoryError:
            if not _products_code(graph):
                raise
            plan = planned(reserved)
    else:
        if (plan.G, plan.M, plan.K, plan.N) != (prob.G, prob.M, prob.K, prob.N):
            raise ValueError(f"build_matmul: the plan is for [{plan.G}x{plan.M}x{plan.K}] x [{plan.K}x{plan.N}], "
                             f"these operands make [{prob.G}x{prob.M}x{prob.K}] x [{prob.K}x{prob.N}]")
        if plan.target.num_tiles != target.num_tiles:
            raise ValueError("build_matmul: the plan was made for another target")
        if plan.problem is None:
            plan.problem = prob
    return plan


def build_matmul(graph: ipu.Graph, a: ipu.Tensor, b: ipu.Tensor, out: ipu.Tensor, plan: MatMulPlan | None = None,
                 name: str = "matmul", log2_scale: ipu.Tensor | None = None, check_range: bool = False,
                 available_memory_proportion: float | None = None, partials_dtype=None) -> ipu.Program:
    """out = a @ b (NumPy matmul rules, batch dims broadcast) on the tiles, as a program.

    a [..., M, K], b [..., K, N] (float32, or float16) and out [..., M, N] (float32; float16 or
    float32 for half operands) are views mapped however the caller mapped them. If out is not
    mapped at all it is mapped with mapping_for_output. The program: Copy A blocks to their tiles,
    Copy B blocks, one compute set of MatMulBlock vertices (float32 partials), Copy the partials to
    the tiles that own each output element, one compute set of MatMulReducePartials summing them
    into out (and, when out's elements on a tile are too scattered to reduce in place, a last local
    Copy from a per-tile result into out).

    float8 operands (either format each) need `log2_scale`, a one-element int32 tensor: out (float16)
    = (a @ b) x 2**log2_scale, the scale sent to every AMP tile and applied by the
    MatMulBlockPow2Scaled vertices (`check_range`: stop the program if it is outside [-32, 32)).

    available_memory_proportion: poplibs' option, the share of tile memory the product's
    temporaries may take (None: all the tile has); see plan_matmul.
    partials_dtype: the AMP's partials (float32 by default; float16 for half operands, poplin's
    partialsType), when no plan is given.
    """
    for t, what in ((a, "a"), (b, "b"), (out, "out")):
        if not isinstance(t, ipu.Tensor):
            raise TypeError(f"build_matmul: {what} must be an ipu.Tensor, got {type(t).__name__}")
    float8 = a.dtype.is_float8
    if float8:
        if not b.dtype.is_float8:
            raise TypeError(f"build_matmul: a is {a.dtype.name} but b is {b.dtype.name}; both must be float8")
        if out.dtype != ipu.FLOAT16:
            raise TypeError(f"build_matmul: a float8 product is float16, not {out.dtype.name}")
        if not isinstance(log2_scale, ipu.Tensor) or log2_scale.numel != 1 or log2_scale.dtype != ipu.INT32:
            raise TypeError("build_matmul: float8 operands need log2_scale, a one-element int32 tensor")
    elif log2_scale is not None:
        raise TypeError("build_matmul: log2_scale is only for float8 operands")
    if a.dtype != b.dtype and not float8:
        raise TypeError(f"build_matmul: a is {a.dtype.name} but b is {b.dtype.name}")
    if a.dtype not in (ipu.FLOAT32, ipu.FLOAT16) and not float8:
        raise TypeError(f"build_matmul: operands must be float32, float16 or float8, not {a.dtype.name}")
    if out.dtype not in (ipu.FLOAT32, ipu.FLOAT16) or (a.dtype == ipu.FLOAT32 and out.dtype != ipu.FLOAT32):
        raise TypeError(f"build_matmul: a {a.dtype.name} product cannot be written to a {out.dtype.name} output")
    prob = canonical_problem(a.shape, b.shape)
    if tuple(out.shape) != prob.out_shape:
        raise ValueError(f"build_matmul: out has shape {tuple(out.shape)}, a @ b has shape {prob.out_shape}")
    plan = choose_plan(graph, a, b, out, plan, available_memory_proportion, partials_dtype)
    if plan.G * plan.M * plan.N == 0:
        return ipu.Sequence(name=name)

    # which operands already are the plan's blocks (read where they live): decided before the
    # memo, since it is all the build reads of an operand's mapping
    in_place = None
    if plan.sub is None and plan.K > 0 and out.variable is not a.variable and out.variable is not b.variable:
        in_place = _operands_in_place(a, b, plan, prob)

    def build():
        return _build(graph, a, b, out, plan, prob, name, log2_scale, check_range, available_memory_proportion,
                      in_place)

    if log2_scale is not None:  # (a float8 product reads one more variable, its scale: built each time)
        return build()
    # a model's layers repeat the same products (over weights mapped from other tiles: what the
    # build reads of an operand is its index, not its mapping): built once, replayed on the next
    # layer's variables (ipu/replay.py), the same graph as a build would make
    inputs = list(dict.fromkeys((a.variable, b.variable, out.variable)))
    operands = (None, None) if in_place is None else tuple(x is not None for x in in_place)
    key = ("matmul", _plan_fingerprint(plan), operands, replay.view_key(a, mapping=in_place is None),
           replay.view_key(b, mapping=in_place is None), replay.view_key(out),
           tuple(inputs.index(t.variable) for t in (a, b, out)), bool(check_range), available_memory_proportion)
    memo = graph.__dict__.setdefault("_matmul_build_memo", {})
    return replay.build_or_replay(graph, memo, key, inputs, name, build)


_A_AXES, _B_AXES = (("m0", "ms"), ("k0", "ks")), (("k0", "ks"), ("n0", "ns"))


def _operands_in_place(a, b, plan, prob) -> tuple:
    """(a's variable or None, b's or None): the operands created in the plan's layout (a weight:
    popxl/lowering/creators.py), which the AMP reads where they live; the others are gathered
    into blocks on the cells' tiles."""
    cells = _cells(plan)
    a_sizes = cells["gs"] * cells["ms"] * cells["ks"]
    b_sizes = cells["gs"] * cells["ks"] * cells["ns"]
    return (blocks_in_place(a, _canon_a, prob, cells, _A_AXES, a_sizes),
            blocks_in_place(b, _canon_b, prob, cells, _B_AXES, b_sizes))


def _plan_fingerprint(plan: MatMulPlan) -> tuple:
    """Everything _build reads of a plan."""
    return (plan.target.name, plan.target.num_tiles, plan.dtype.name, plan.out_dtype.name, plan.G, plan.M, plan.K,
            plan.N, tuple(plan.parts), tuple(plan.chunks), plan.tiles.shape, plan.tiles.tobytes(), repr(plan.problem),
            plan.serial, plan.serial_axis, plan.serial_chunk, plan.partials_dtype.name,
            plan.available_memory_proportion, None if plan.sub is None else _plan_fingerprint(plan.sub))


def _build(graph, a, b, out, plan, prob, name, log2_scale, check_range, available_memory_proportion,
           in_place=None):
    """build_matmul's programs for a plan (the operands and the plan checked)."""
    float8 = a.dtype.is_float8
    target = graph.target
    M, K, N = plan.M, plan.K, plan.N
    seq = ipu.Sequence(name=name)
    C = _canon_c(out.index(), prob)
    c_flat = np.ascontiguousarray(C).reshape(-1)
    out_var = out.variable
    owners = out_var.tiles_at(c_flat)
    mapped_here = bool((owners < 0).any())
    if mapped_here:
        if not (owners < 0).all():
            raise MappingError(f"build_matmul: out {out.name!r} is only partly mapped; map all of it or none")
        map_output(graph, out, plan)
        owners = out_var.tiles_at(c_flat)
    if plan.sub is not None:
        return _build_serial(graph, a, b, out, plan, prob, C, name, seq, log2_scale, check_range,
                             available_memory_proportion)

    cells = _cells(plan)
    tiles = cells["tile"]
    P = plan.num_partials
    isz_t = a.dtype

    # 1. operand blocks to their tiles (one exchange phase per operand)
    if K > 0:
        a_sizes = cells["gs"] * cells["ms"] * cells["ks"]
        b_sizes = cells["gs"] * cells["ks"] * cells["ns"]
        p_sizes = cells["gs"] * cells["ms"] * cells["ns"]
        a_axes, b_axes = _A_AXES, _B_AXES
        a_in_place, b_in_place = _operands_in_place(a, b, plan, prob) if in_place is None else in_place
        a_blocks, b_blocks = a_in_place, b_in_place
        a_off, b_off = np.cumsum(a_sizes) - a_sizes, np.cumsum(b_sizes) - b_sizes
        if a_blocks is None:
            a_blocks, a_off = _blocks_variable(graph, f"{name}/a_blocks", isz_t, tiles, a_sizes)
        if b_blocks is None:
            b_blocks, b_off = _blocks_variable(graph, f"{name}/b_blocks", b.dtype, tiles, b_sizes)
        pdt = ipu.FLOAT32 if float8 else plan.partials_dtype  # (the float8 AMP writes float32 partials)
        partials, p_off = _blocks_variable(graph, f"{name}/partials", pdt, tiles, p_sizes)
        if a_in_place is None:
            _exchange_operand(graph, seq, a, _canon_a(a.index(), prob), cells, a_axes, a_blocks, a_off, a_sizes,
                              f"{name}/exchange a")
        if b_in_place is None:
            _exchange_operand(graph, seq, b, _canon_b(b.index(), prob), cells, b_axes, b_blocks, b_off, b_sizes,
                              f"{name}/exchange b")

        # 2. the AMP: one MatMulBlock per (cell, batch element of the cell)
        cs = graph.add_compute_set(f"{name}/amp")
        gs = cells["gs"]
        cell_of = np.repeat(np.arange(gs.size), gs)
        local = np.arange(cell_of.size) - np.repeat(np.cumsum(gs) - gs, gs)
        ms, ks, ns = cells["ms"][cell_of], cells["ks"][cell_of], cells["ns"][cell_of]
        keep = (ms > 0) & (ns > 0)
        cell_of, local, ms, ks, ns = cell_of[keep], local[keep], ms[keep], ks[keep], ns[keep]
        fields = {
            "a": (a_blocks, a_off[cell_of] + local * ms * ks, ms * ks),
            "b": (b_blocks, b_off[cell_of] + local * ks * ns, ks * ns),
            "out": (partials, p_off[cell_of] + local * ms * ns, ms * ns),
        }
        if float8:  # the scale, once on every AMP tile (one multicast exchange)
            assert log2_scale is not None  # checked at the top: float8 operands need it
            used = np.unique(tiles[cell_of])
            scales, _ = _blocks_variable(graph, f"{name}/log2_scale", ipu.INT32, used, np.ones(used.size, np.int64))
            src = np.repeat(log2_scale.index().reshape(-1)[:1], used.size)
            seq.add(ipu.Copy(ipu.Tensor(log2_scale.variable, src, src.shape), scales, name=f"{name}/exchange scale"))
            fields["log2_scale"] = (scales, np.searchsorted(used, tiles[cell_of]), np.ones(cell_of.size, np.int64))
            graph.add_vertices(cs, "MatMulBlockPow2Scaled", tiles[cell_of], fields,
                               ip={"m": ms, "k": ks, "n": ns, "check_range": int(check_range)})
        else:
            graph.add_vertices(cs, "MatMulBlock", tiles[cell_of], fields,
                               ip={"m": ms, "k": ks, "n": ns, "accumulate": 0})
        seq.add(ipu.Execute(cs, name=f"{name}/amp"))

    # 3. partials to the tiles that reduce them: the owners of the outputs when out is spread
    # about evenly or was laid out for this plan (the reduction then writes out in place), else
    # the plan's own spread (mapping_for_output) into a result that a last Copy moves into out
    even = -(-owners.size // target.num_tiles)
    spread = mapped_here or np.bincount(owners, minlength=target.num_tiles).max() <= 2 * even + 16
    if not spread:
        key = _plan_key(plan)
        owners = _memo(graph, key and ("owner", key), lambda: _owner_canonical(plan)).reshape(-1)
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
    pdt = ipu.FLOAT32 if float8 else plan.partials_dtype
    p_float = pdt == ipu.FLOAT32
    nt = target.num_tiles

    if K > 0:
        # every element of `partials`, in memory order, is one output element (its canonical flat
        # index) of one k chunk. The partials Copy reads `partials` in order and scatters into the
        # reduction's inputs, which keeps the host's copy streaming through memory (the simulated
        # exchange is the same set of runs either way). Cells come in a few shapes (the edge cells
        # of each dimension are smaller): per shape, the output positions of a block are one
        # pattern shifted by the block's origin, so a value per output element is spread over the
        # partials' elements a shape at a time.
        pk_ = plan.parts[3]
        cell_p = np.arange(p_sizes.size, dtype=np.int64) % pk_
        shape_key = (cells["gs"] * (M + 1) + cells["ms"]) * (N + 1) + cells["ns"]
        groups = []
        for key in np.unique(shape_key):
            sel = np.flatnonzero(shape_key == key)
            gs_, ms_, ns_ = (int(cells[x][sel[0]]) for x in ("gs", "ms", "ns"))
            blk = gs_ * ms_ * ns_
            if blk == 0:
                continue
            pattern = ((np.arange(gs_)[:, None, None] * M + np.arange(ms_)[None, :, None]) * N
                       + np.arange(ns_)[None, None, :]).reshape(-1)
            origin = (cells["g0"][sel] * M + cells["m0"][sel]) * N + cells["n0"][sel]
            groups.append((sel, blk, origin, pattern))

        def per_partial(value, per_chunk=None):
            """value[o] (+ k chunk x per_chunk[o]) for the output element o of every partial, in
            the partials' memory order, as IndexRuns: a run per block row, cut where the row's
            values stop being consecutive (a row crossing two reduction groups)."""
            # the rows of every block, in the partials' memory order: canonical first output,
            # length, k chunk
            nrows = np.where(p_sizes > 0, p_sizes // np.maximum(cells["ns"], 1), 0)
            roff = np.cumsum(nrows) - nrows
            row_o = np.empty(int(nrows.sum()), np.int64)
            row_n = np.empty(row_o.size, np.int64)
            row_p = np.empty(row_o.size, np.int64)
            for sel, blk, origin, pattern in groups:
                ns_ = int(cells["ns"][sel[0]])
                where = (roff[sel][:, None] + np.arange(blk // ns_)[None, :]).reshape(-1)
                row_o[where] = (origin[:, None] + pattern[None, ::ns_]).reshape(-1)
                row_n[where] = ns_
                row_p[where] = np.repeat(cell_p[sel], blk // ns_)
            # where consecutive outputs stop mapping to consecutive values
            cont = np.zeros(value.size, bool)
            cont[1:] = value[1:] == value[:-1] + 1
            if per_chunk is not None:
                cont[1:] &= per_chunk[1:] == per_chunk[:-1]
            cut_at = np.flatnonzero(~cont)  # sorted
            cuts_upto = np.cumsum(~cont)  # cuts at indices <= o
            first_cut = cuts_upto[row_o]  # index into cut_at of the first cut after row_o
            inner = cuts_upto[row_o + row_n - 1] - first_cut  # cuts strictly inside each row
            runs_per_row = 1 + inner
            run_row = np.repeat(np.arange(row_o.size), runs_per_row)
            k = np.arange(run_row.size) - np.repeat(np.cumsum(runs_per_row) - runs_per_row, runs_per_row)
            o = row_o[run_row]
            start = np.where(k == 0, o, cut_at[np.minimum(first_cut[run_row] + k - 1, max(cut_at.size - 1, 0))]
                             if cut_at.size else o)
            last = k == inner[run_row]
            end = np.where(last, o + row_n[run_row],
                           cut_at[np.minimum(first_cut[run_row] + k, max(cut_at.size - 1, 0))] if cut_at.size else 0)
            v = value[start]
            if per_chunk is not None:
                v = v + row_p[run_row] * per_chunk[start]
            return IndexRuns(v, end - start)

    if K > 0 and P == 1 and out.dtype == pdt:
        # nothing to add up: the partials are the result
        dst = per_partial(c_flat)
        seq.add(ipu.Copy(partials, _view(out_var, dst), name=f"{name}/exchange partials"))
        return seq

    # reduce each run of out in place, or each tile's elements into a contiguous result then copy
    # them into out locally: whichever the cost models make cheaper on the busiest tile
    run_tile = own[run_start]
    direct = np.bincount(run_tile, weights=reduce_partials_cycles(run_len, P, out_float, target.worker_contexts,
                                                                  partials_float=p_float),
                         minlength=nt).max()
    tile_ids, tile_start, tile_len = np.unique(own, return_index=True, return_counts=True)
    via_temp = (reduce_partials_cycles(tile_len, P, out_float, target.worker_contexts, partials_float=p_float).max()
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
        red_in, red_off = _blocks_variable(graph, f"{name}/reduce_in", pdt, grp_tile, P * grp_len)
        # by canonical output element: its group's start in reduce_in plus its place in the group,
        # and the group's length (one partial per k chunk, each a group's length apart)
        rank = np.empty(total, np.int64)
        rank[q] = np.arange(total, dtype=np.int64)
        base = (red_off[grp_of] + pos_in)[rank]
        dst = per_partial(base, grp_len[grp_of][rank])
        seq.add(ipu.Copy(partials, _view(red_in, dst), name=f"{name}/exchange partials"))
        red_fields = (red_in, red_off, P * grp_len)
    else:
        # k = 0: nothing to add, the reduction writes zeros; one float per tile to connect to
        dummy_tiles = np.unique(grp_tile)
        dummy, _ = _blocks_variable(graph, f"{name}/no_partials", ipu.FLOAT32, dummy_tiles,
                                    np.ones(dummy_tiles.size, np.int64))
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


def _build_serial(graph, a, b, out, plan, prob, C, name, seq, log2_scale=None, check_range=False,
                  available_memory_proportion=None):
    """The passes of a serially split plan, each a full build over a slice of the canonical
    problem (views of the same variables); their temporaries are dead between passes, so the
    memory planner reuses them. A last, smaller pass is planned again under the same limits
    (available_memory_proportion, partials)."""
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
                             ipu.Tensor(out.variable, Cs, Cs.shape), plan=sub, name=f"{name}/pass{s_}",
                             log2_scale=log2_scale, check_range=check_range,
                             available_memory_proportion=(plan.available_memory_proportion
                                                          if available_memory_proportion is None
                                                          else available_memory_proportion),
                             partials_dtype=plan.partials_dtype))
    return seq
