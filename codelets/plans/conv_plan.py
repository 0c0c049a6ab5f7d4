"""The planner of grouped and depthwise convolutions (conv_build.py builds the programs).

As poplin plans a convolution, the conv groups are one dimension of a single plan, split over the
tiles together with the batch, the output channels of a group and the field: every tile gets a
sub-convolution (a few conv groups, their channels, some batch elements, some output rows) and
runs it with one vertex per batch element, so the number of vertices, compute sets and exchanges
does not depend on the group count.

Forward pass (`plan_forward`, ConvPartialHorizontalMac vertices): a tile's output block must be
contiguous in the NCHW output of each batch element, so a tile holds either whole output rows of
a range of channels (whole groups, or a range of one group's output channels) or some output rows
(of the first spatial dimension) of a single channel. Weight update (`plan_weight_update`,
ConvPartialVerticalMac vertices): whole groups per tile, the reduction (batch elements and output
rows) split over tiles, whose float partials a last exchange and ReduceAdd sum.

Each candidate split is costed as the program it leads to: exchange of the input window (with its
halo rows) and of the weights, the vertices' estimates (codelets/conv.py), and for the weight
update the partials' exchange and reduction; the fastest candidate whose memory fits is kept.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

import ipu
from ipu import OutOfMemoryError

from ..conv import WORKERS, hmac_cycles, vmac_cycles
from ..matmul import reduce_partials_cycles
from .matmul_plan import _align, _ceil, _phase, _splits

_EXCHANGE_BYTES_PER_RUN = 8  # ipu/costs.exchange_code_bytes: a send and its address per run


@dataclass(frozen=True)
class ConvProblem:
    """A convolution of groups G with Cg input and Mg output channels per group: x (N, G*Cg, *in_sp)
    and w (G*Mg, Cg, *kernel) make y (N, G*Mg, *out_sp); pads are the lower paddings."""

    N: int
    G: int
    Cg: int
    Mg: int
    in_sp: tuple
    kernel: tuple
    strides: tuple
    dilations: tuple
    pads: tuple
    out_sp: tuple

    @property
    def nsp(self) -> int:
        return len(self.kernel)

    @property
    def kernel_size(self) -> int:
        return int(np.prod(self.kernel, dtype=np.int64))

    def in_rows(self, rows):
        """Input rows (of spatial dimension 0) that `rows` output rows need at most."""
        if self.nsp == 0:
            return 1
        need = (np.asarray(rows, np.int64) - 1) * self.strides[0] + (self.kernel[0] - 1) * self.dilations[0] + 1
        return np.clip(need, 0, self.in_sp[0])

    @property
    def in_row_len(self) -> int:
        """Elements of an input row (the spatial dimensions after the first)."""
        return int(np.prod(self.in_sp[1:], dtype=np.int64)) if self.nsp else 1

    @property
    def out_row_len(self) -> int:
        return int(np.prod(self.out_sp[1:], dtype=np.int64)) if self.nsp else 1

    @property
    def out_rows(self) -> int:
        return self.out_sp[0] if self.nsp else 1


@dataclass
class ConvPlan:
    """A split of a grouped convolution over tiles. parts / chunks over (batch, groups, output
    channels of a group, output rows) for the forward pass; for the weight update, over (groups,
    batch, output rows), the last two splitting the reduction."""

    kind: str  # "forward" | "weight_update"
    problem: ConvProblem
    dtype: ipu.ElementType
    parts: tuple
    chunks: tuple
    estimate: dict = field(default_factory=dict)
    bytes_per_tile: int = 0

    @property
    def num_tiles_used(self) -> int:
        return int(np.prod(self.parts))

    def __repr__(self) -> str:
        names = ("batch", "groups", "out_chans", "rows") if self.kind == "forward" else ("groups", "batch", "rows")
        split = ", ".join(f"{n} {p}x{c}" for n, p, c in zip(names, self.parts, self.chunks))
        return (f"<ConvPlan {self.kind} G={self.problem.G} Cg={self.problem.Cg} Mg={self.problem.Mg} "
                f"{self.dtype.name}: {split}; {self.num_tiles_used} tiles, ~{self.estimate.get('total', 0):,} cycles>")


def _fit_or_raise(what, p: ConvProblem, target, mem, ok_cycles, reserved_bytes=0):
    fits = mem <= target.bytes_per_tile
    if not fits.any():
        raise OutOfMemoryError(
            f"{what} (groups {p.G}, {p.Cg} -> {p.Mg} channels per group, batch {p.N}, output {p.out_sp}) does not fit "
            f"on {target.name}: the leanest split needs ~{int(mem.min()):,} bytes on a tile of "
            f"{target.bytes_per_tile:,} ({int(reserved_bytes):,} of them already taken by other always-live tensors "
            f"and constants). Use a target with more tiles or IPUs, or a smaller batch.", [])
    key = np.where(fits, ok_cycles, np.iinfo(np.int64).max)
    return key


def _hmac_vertex_estimate(p: ConvProblem, ncg, nog, rows, float_acts):
    """Estimated cycles of one forward vertex over `rows` outer output rows: every kernel position
    gives each worker ~rows / 6 entries (at least one) of a share of the row positions."""
    K = p.kernel_size
    rows = np.asarray(rows, np.int64)
    outer = rows * (int(np.prod(p.out_sp[1:-1], dtype=np.int64)) if p.nsp > 1 else 1)
    width = p.out_sp[-1] if p.nsp else 1
    ent = K * np.maximum(_ceil(outer, WORKERS), 1)
    pos = K * _ceil(outer * width, WORKERS)
    e = np.repeat(ent[:, None], WORKERS, 1)
    s = np.repeat(pos[:, None], WORKERS, 1)
    n = rows.size
    return hmac_cycles(np.broadcast_to(ncg, n), np.broadcast_to(nog, n), np.full(n, p.Cg), np.full(n, K),
                       outer * width, e, s, float_acts)


def plan_forward(p: ConvProblem, dtype, target: ipu.Target, reserved_bytes: int = 0,
                 available_memory_proportion: float | None = None) -> ConvPlan:
    """Choose the split of the forward pass of `p` (ConvPartialHorizontalMac vertices)."""
    dtype = ipu.element_type(dtype)
    T = target.num_tiles
    isz = dtype.itemsize
    float_acts = dtype == ipu.FLOAT32
    K = p.kernel_size
    HO = p.out_rows
    cands = []  # (pn, cn, pg, cg, pm, cm, ph, ch)
    np_, nc = _splits(p.N, 1, T)
    gp, gc = _splits(p.G, 1, T)
    for pn, cn in zip(np_.tolist(), nc.tolist()):
        for pg, cg in zip(gp.tolist(), gc.tolist()):  # whole groups (all Mg channels) per tile
            if pn * pg > T:
                continue
            cands.append((pn, cn, pg, cg, 1, p.Mg, 1, HO))
            if cg == 1 and p.Mg == 1 and p.nsp >= 2:  # one channel per tile: its rows may be split
                hp, hc = _splits(HO, 1, T // (pn * pg))
                cands += [(pn, cn, pg, cg, 1, 1, ph, ch) for ph, ch in zip(hp.tolist(), hc.tolist()) if ph > 1]
        if pn * p.G <= T and p.Mg > 1:  # one group per tile, its output channels split
            mp, mc = _splits(p.Mg, 1, T // (pn * p.G))
            for pm, cm in zip(mp.tolist(), mc.tolist()):
                if pm == 1:
                    continue
                cands.append((pn, cn, p.G, 1, pm, cm, 1, HO))
                if cm == 1 and p.nsp >= 2:
                    hp, hc = _splits(HO, 1, T // (pn * p.G * pm))
                    cands += [(pn, cn, p.G, 1, pm, 1, ph, ch) for ph, ch in zip(hp.tolist(), hc.tolist()) if ph > 1]
    c = np.asarray(cands, np.int64)
    pn, cn, pg, cg, pm, cm, ph, ch = c.T
    in_rows = p.in_rows(ch)
    in_blk = cn * cg * p.Cg * in_rows * p.in_row_len
    w_blk = cg * cm * p.Cg * K
    out_blk = cn * cg * cm * ch * p.out_row_len
    x_total = p.N * p.G * p.Cg * int(np.prod(p.in_sp, dtype=np.int64))
    w_total = p.G * p.Mg * p.Cg * K
    # sources spread over the tiles; a split of the rows sends the halo rows twice
    halo = np.maximum(1.0, in_rows * ph / max(p.in_sp[0], 1)) if p.nsp else 1.0
    ex_in = _phase(target, np.ceil(x_total / T * halo).astype(np.int64) * isz, in_blk * isz)
    ex_w = _phase(target, _ceil(w_total, T) * isz, w_blk * isz)
    compute = cn * _hmac_vertex_estimate(p, cg, cm, ch, float_acts)
    total = ex_in + ex_w + compute
    # memory on a tile: input window and weights (temporaries), the output block (float32 partials
    # first when the result is half), work lists (6 bytes an entry), vertex state and code, the
    # exchange code of the window's rows and the stack
    entries = K * np.maximum(ch * (p.out_row_len // max(p.out_sp[-1], 1) if p.nsp > 1 else 1), WORKERS)
    lists = (K * WORKERS + 1) * 2 + entries * 6
    out_bytes = out_blk * (4 + (isz if dtype != ipu.FLOAT32 else 0))
    runs = cn * cg * p.Cg * 2 + 2
    code = runs * _EXCHANGE_BYTES_PER_RUN + 2 * 16
    state = cn * (44 + 2 * cg * (p.Cg + cm + cm * p.Cg) + 4 * K * WORKERS)
    temps = _align(in_blk * isz) + _align(w_blk * isz)
    mem = temps + _align(out_bytes) + _align(lists) + state + code + 768 + target.stack_bytes_per_tile + reserved_bytes
    if available_memory_proportion is not None:
        mem = np.where(temps > available_memory_proportion * target.bytes_per_tile, np.iinfo(np.int64).max // 4, mem)
    key = _fit_or_raise("the forward pass of a grouped convolution", p, target, mem, total, reserved_bytes)
    cells = pn * pg * pm * ph
    best = int(np.lexsort((mem, cells, key))[0])
    est = {"exchange_in": int(ex_in[best]), "exchange_weights": int(ex_w[best]), "compute": int(compute[best]),
           "total": int(total[best])}
    return ConvPlan("forward", p, dtype, (int(pn[best]), int(pg[best]), int(pm[best]), int(ph[best])),
                    (int(cn[best]), int(cg[best]), int(cm[best]), int(ch[best])), est, int(mem[best]))


def plan_weight_update(p: ConvProblem, dtype, out_dtype, target: ipu.Target, reserved_bytes: int = 0) -> ConvPlan:
    """Choose the split of the weight update of `p` (ConvPartialVerticalMac vertices, then the
    partials of a split reduction summed by ReduceAdd)."""
    dtype = ipu.element_type(dtype)
    out_dtype = ipu.element_type(out_dtype)
    T = target.num_tiles
    isz = dtype.itemsize
    float_acts = dtype == ipu.FLOAT32
    K = p.kernel_size
    HO = p.out_rows
    gp, gc = _splits(p.G, 1, T)
    np_, nc = _splits(p.N, 1, T)
    cands = []
    for pg, cg in zip(gp.tolist(), gc.tolist()):
        for pn, cn in zip(np_.tolist(), nc.tolist()):
            if pg * pn > T:
                continue
            if p.nsp >= 1:
                hp, hc = _splits(HO, 1, T // (pg * pn))
                cands += [(pg, cg, pn, cn, ph, ch) for ph, ch in zip(hp.tolist(), hc.tolist())]
            else:
                cands.append((pg, cg, pn, cn, 1, 1))
    c = np.asarray(cands, np.int64)
    pg, cg, pn, cn, ph, ch = c.T
    in_rows = p.in_rows(ch)
    in_blk = cg * p.Cg * cn * in_rows * p.in_row_len
    g_blk = cg * p.Mg * cn * ch * p.out_row_len
    part_blk = cg * p.Mg * p.Cg * K
    P = pn * ph
    x_total = p.N * p.G * p.Cg * int(np.prod(p.in_sp, dtype=np.int64))
    dy_total = p.N * p.G * p.Mg * int(np.prod(p.out_sp, dtype=np.int64))
    ex_in = _phase(target, _ceil(x_total, T) * isz, in_blk * isz)
    ex_g = _phase(target, _ceil(dy_total, T) * isz, g_blk * isz)
    outer = cn * ch * (int(np.prod(p.out_sp[1:-1], dtype=np.int64)) if p.nsp > 1 else 1)
    width = p.out_sp[-1] if p.nsp else 1
    e = np.repeat((K * np.maximum(_ceil(outer, WORKERS), 1))[:, None], WORKERS, 1)
    s = np.repeat((K * _ceil(outer * width, WORKERS))[:, None], WORKERS, 1)
    compute = vmac_cycles(cg * p.Mg * p.Cg, np.full(c.shape[0], K), e, s, float_acts)
    share = _ceil(part_blk, P)
    needs_reduce = (P > 1) | (out_dtype != ipu.FLOAT32)
    ex_p = np.where(needs_reduce, _phase(target, part_blk * 4, P * share * 4), 0)
    red = np.where(needs_reduce, reduce_partials_cycles(share, P, out_dtype == ipu.FLOAT32, target.worker_contexts), 0)
    total = ex_in + ex_g + compute + ex_p + red
    lists = (WORKERS + 1) * 2 + e[:, 0] * WORKERS * 8
    runs = cg * (p.Cg + p.Mg) * cn * 2 + P
    code = runs * _EXCHANGE_BYTES_PER_RUN + 4 * 16
    temps = np.maximum(_align(in_blk * isz) + _align(g_blk * isz) + _align(part_blk * 4),
                       _align(part_blk * 4) + _align(P * share * 4))
    mem = temps + _align(lists) + code + 896 + 512 + 200 + target.stack_bytes_per_tile + reserved_bytes
    key = _fit_or_raise("the weight update of a grouped convolution", p, target, mem, total, reserved_bytes)
    best = int(np.lexsort((mem, pg * pn * ph, key))[0])
    est = {"exchange_in": int(ex_in[best]), "exchange_grads": int(ex_g[best]), "compute": int(compute[best]),
           "exchange_partials": int(ex_p[best]), "reduce": int(red[best]), "total": int(total[best])}
    return ConvPlan("weight_update", p, dtype, (int(pg[best]), int(pn[best]), int(ph[best])),
                    (int(cg[best]), int(cn[best]), int(ch[best])), est, int(mem[best]))
