"""Variables laid out by the op that consumes them (PopART's tensor creators).

By default a variable is spread linearly over the tiles before any op is lowered, and the matmul
that reads it then moves every block its plan wants onto the tile of that block's cell: a second
copy of the weight, and for a transposed weight (ONNX Gemm with transB, autodiff's W^T) a third, the
staging area where the block is transposed. PopART avoids both: before a weight gets a layout it
asks the weight's consumer to create it (poplin's createMatMulInputRHS / createWeights), looking
through the view-changing ops between the two (it "unwinds" transposes and reshapes), so the
weight is born in the layout of the plan that reads it.

The same rule here: for each main-graph variable, its first consumer is followed through ops the
lowering turns into views (an aliasing reshape / transpose / identity, a transpose only matmuls
read: rules/shape.py) and into graphs lowered inline (PopART's session program). When that walk
ends at a matmul operand, or at the weights of a convolution lowered as one matmul, the op is
planned now (the plan is kept for the op's rule, so both agree) and, when every element of the
variable lands in exactly one cell's block, the variable's storage *is* the operand's blocks: one
contiguous block per cell, on the cell's tile, in the order the AMP reads it. The popxl variable
is bound to a view of that storage with its own shape (an index permutation), so every other op,
host weight transfers included (ipu.Engine reads and writes through the view), sees the user's
values in the user's order; build_matmul finds the operand already in place (matmul_operands.
blocks_in_place) and moves nothing. A variable whose blocks several cells share (an m-split of a
weight, a convolution's weights split over output positions) keeps the linear layout.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import ipu

from .rules.shape import _is_view, _read_only_by_gathering_ops

_PASS_THROUGH_VIEWS = ("reshape", "transpose", "identity", "detach")


@dataclass
class _Use:
    """A variable reaching an operand of a planned product."""

    op: Any  # the matmul or conv op (a popxl Op)
    operand: int  # 0: a (lhs), 1: b (rhs) of the product the rule builds
    index: np.ndarray  # the variable's flat element of every element of the operand, operand-shaped


def _first_consumer(t):
    """The op that reads `t` first in lowering order (ops of a graph are lowered by id), and the
    input position it reads t at."""
    best = None
    for op in t.consumers:
        for i, x in enumerate(op.inputs):
            if x is t and (best is None or op.id < best[0].id):
                best = (op, i)
                break
    return best


def _called_graph(op):
    if op.type != "call":
        return None
    return op.attrs["graph"] if "graph" in op.attrs else (op.called_graphs or [None])[0]


def _walk(ctx, t, index: np.ndarray, reshape=np.reshape) -> _Use | None:
    """Follow `t` (whose elements are `index`, flat elements of the variable) to its first
    consumer, through views and inline calls, up to an operand of a planned product. `index` is a
    position probe (matmul_operands.position_probe, reshaped by `reshape`, which never copies) or
    an index array."""
    for _ in range(64):  # a chain of views is short; this only bounds a malformed graph
        first = _first_consumer(t)
        if first is None:
            return None
        op, i = first
        if op.type in _PASS_THROUGH_VIEWS and i == 0:
            if not (_is_view(op) or (op.type == "transpose" and _read_only_by_gathering_ops(op))):
                return None  # the rule copies: the copy has its own layout
            if op.type == "transpose":
                index = np.transpose(index, tuple(op.attrs["permutation"]))
            else:
                index = reshape(index, tuple(op.outputs[0].shape))
            t = op.outputs[0]
            continue
        graph = _called_graph(op)
        if graph is not None:
            if not ctx.inlinable(graph):
                return None  # copied into the function's own input variable
            from .rules.control import _graph_inputs_for, _modified_graph_inputs, _written_inputs

            pairs = _graph_inputs_for(op, graph, op.inputs)
            gi = next((g for g, parent in pairs if parent is t), None)
            if gi is None or (graph.inputs[gi] in _written_inputs(graph)
                              and gi not in _modified_graph_inputs(op, graph, pairs)):
                return None
            t = graph.inputs[gi]
            continue
        if op.type == "matmul" and i in (0, 1):
            if i == 0 and index.ndim == 1:
                index = reshape(index, (1, -1))
            elif i == 1 and index.ndim == 1:
                index = reshape(index, (-1, 1))
            return _Use(op, i, index)
        if op.type == "conv" and i == 1:
            return _Use(op, 0, index)
        return None
    return None


def _conv_problem(ctx, op, w_index, reshape=np.reshape):
    """(a index, a shape, b shape) of the matmul rules/conv.py builds for a dense convolution
    (w_index: the weights' elements), or None when the convolution is lowered otherwise."""
    from .rules.conv import _direct

    x, w, out = op.inputs[0], op.inputs[1], op.outputs[0]
    if len(op.inputs) > 2:  # pow2-scaled: float8, planned with its scale
        return None
    et = ctx.etype(x)
    groups = op.attrs["groups"]
    if et not in (ipu.FLOAT32, ipu.FLOAT16) or _direct(ctx, et, groups, w.shape[1], False):
        return None
    M, Cg = w.shape[0], w.shape[1]
    Kk = int(np.prod(w.shape[2:], dtype=np.int64))
    N = x.shape[0]
    P = int(np.prod(out.shape[2:], dtype=np.int64))
    Mg = M // groups
    if groups == 1:
        return reshape(w_index, (Mg, Cg * Kk)), (Mg, Cg * Kk), (Cg * Kk, N * P)
    return reshape(w_index, (groups, Mg, Cg * Kk)), (groups, Mg, Cg * Kk), (groups, Cg * Kk, N * P)


def _plan(ctx, use: _Use, reserved: int, reshape=np.reshape):
    """The plan the consumer's rule will build (kept on the context for it), and the operand's
    index and canonical problem; None when the product is not planned here."""
    from codelets.plans import canonical_problem, plan_for_shapes

    from .rules.matmul import DEFAULT_AVAILABLE_MEMORY_PROPORTION, partials_type

    op = use.op
    if op.type == "matmul":
        a, b = op.inputs[0], op.inputs[1]
        a_shape = (1, int(np.prod(a.shape))) if len(a.shape) == 1 else tuple(a.shape)
        b_shape = (int(np.prod(b.shape)), 1) if len(b.shape) == 1 else tuple(b.shape)
        et = ctx.etype(a)
        if et not in (ipu.FLOAT32, ipu.FLOAT16) or ctx.etype(b) != et:
            return None
        amp = op.attrs.get("available_memory_proportion")
        options = dict(out_dtype=ctx.etype(op.outputs[0]), partials_dtype=partials_type(op),
                       available_memory_proportion=DEFAULT_AVAILABLE_MEMORY_PROPORTION if amp is None else amp)
        index = use.index
    else:
        got = _conv_problem(ctx, op, use.index, reshape)
        if got is None:
            return None
        index, a_shape, b_shape = got
        et = ctx.etype(op.inputs[0])
        options = dict(out_dtype=ctx.etype(op.outputs[0]))
    if 0 in a_shape or 0 in b_shape or a_shape[-1] == 0:
        return None
    prob = canonical_problem(a_shape, b_shape)
    if int(np.prod(prob.out_shape, dtype=np.int64)) == 0:
        return None
    plan = ctx.planned.get(op)
    if plan is None:
        # the variable's own bytes are held as its blocks (plan_matmul's in_place), not spread
        own = -(-int(np.prod(index.shape, dtype=np.int64)) * et.itemsize // ctx.g.target.num_tiles)
        plan = plan_for_shapes(a_shape, b_shape, et, ctx.g.target, reserved_bytes=max(0, reserved - own),
                               in_place="ab"[use.operand], **options)
        ctx.planned[op] = plan
    return plan, index, prob


def create_variable(ctx, t, reserved: int) -> ipu.Tensor | None:
    """The storage of popxl variable `t` laid out as its consumer's operand blocks, and the view
    of it with t's shape; None when no consumer creates it (the caller maps it linearly)."""
    from codelets.plans.matmul_operands import position_probe, reshape_view

    numel = int(np.prod(t.shape, dtype=np.int64))
    if numel == 0 or ctx.target.num_tiles == 1:
        return None
    try:  # followed as positions (strides of a probe): the layout is built block by block
        probe = True
        use = _walk(ctx, t, position_probe(t.shape), reshape_view)
        got = None if use is None else _plan(ctx, use, reserved, reshape_view)
    except (ValueError, AttributeError):  # a reshape of a transposed view: followed as an index array
        probe = False
        use = _walk(ctx, t, np.arange(numel, dtype=np.int64).reshape(tuple(t.shape)))
        got = None if use is None else _plan(ctx, use, reserved)
    if got is None or use is None:
        return None
    plan, index, prob = got
    if probe:
        laid_out = _blocks_layout_by_probe(ctx, t, use, plan, index, prob, numel)
    else:
        laid_out = _blocks_layout(ctx, t, use, plan, index, prob, numel)
    created = ctx.__dict__.setdefault("_created_for", set())  # ops a variable was laid out for
    if laid_out is not None:
        created.add(use.op)
    elif use.op not in created:  # the rule plans the op as it would for any operand
        ctx.planned.pop(use.op, None)
    return laid_out


def _blocks_layout_by_probe(ctx, t, use, plan, probe, prob, numel):
    """As _blocks_layout, from a position probe: the view of the storage is kept as IndexBlocks
    (a start and strides per block), so host memory grows with the blocks, not the elements."""
    from codelets.plans.matmul_build import _cells
    from codelets.plans.matmul_operands import probe_blocks, reshape_view
    from codelets.plans.matmul_plan import _canon_a, _canon_b

    if plan.sub is not None:  # serial passes: each pass has its own cells
        return None
    cells = _cells(plan)
    try:
        if use.operand == 0:
            src3 = _canon_a(probe, prob, reshape=reshape_view)
            axes = (("m0", "ms"), ("k0", "ks"))
        else:
            src3 = _canon_b(probe, prob, reshape=reshape_view)
            axes = (("k0", "ks"), ("n0", "ns"))
    except (ValueError, AttributeError):
        return None
    # a permutation of the variable: every element once (no broadcast axis, nothing sliced off)
    if src3.size != numel or any(st == 0 and n > 1 for st, n in zip(src3.strides, src3.shape)):
        return None
    e0, es, box, p0, ps = probe_blocks(src3, cells, axes)
    if int(box.prod(axis=1).sum()) != numel:  # blocks shared by several cells
        return None
    blocks = ipu.IndexBlocks(e0, es, p0, ps, box)
    sizes = cells["gs"] * cells[axes[0][1]] * cells[axes[1][1]]
    in_order = blocks.offset() == 0
    var = ctx.g.add_variable(t.id, tuple(t.shape) if in_order else (numel,), ctx.etype(t), ipu.VARIABLE, debug=t.id)
    var.set_tile_runs(cells["tile"], sizes)
    if in_order:  # the blocks follow the variable's own order: only the tiles differ
        return var
    return ipu.Tensor(var, blocks, tuple(t.shape))


def _blocks_layout(ctx, t, use, plan, index, prob, numel):
    """The variable stored as the plan's blocks of the operand, when each of its elements is in
    exactly one cell's block; else None."""
    from codelets.plans.matmul_build import _cells
    from codelets.plans.matmul_plan import _canon_a, _canon_b

    if plan.sub is not None:  # serial passes: each pass has its own cells
        return None
    cells = _cells(plan)
    if use.operand == 0:
        src3 = _canon_a(index, prob)
        r0, rs, c0, cs = "m0", "ms", "k0", "ks"
    else:
        src3 = _canon_b(index, prob)
        r0, rs, c0, cs = "k0", "ks", "n0", "ns"
    sizes = cells["gs"] * cells[rs] * cells[cs]
    if int(sizes.sum()) != numel:  # blocks shared by several cells (or a broadcast operand)
        return None
    order = np.empty(numel, np.int64)  # order[p]: the variable's element at storage position p
    p = 0
    for k in np.flatnonzero(sizes):
        g0, gs = int(cells["g0"][k]), int(cells["gs"][k])
        a0, a1 = int(cells[r0][k]), int(cells[r0][k] + cells[rs][k])
        b0, b1 = int(cells[c0][k]), int(cells[c0][k] + cells[cs][k])
        blk = src3[g0:g0 + gs, a0:a1, b0:b1].reshape(-1)
        order[p:p + blk.size] = blk
        p += blk.size
    position = np.full(numel, -1, np.int64)
    position[order] = np.arange(numel, dtype=np.int64)
    if (position < 0).any():  # some element in no block, another in two
        return None
    in_order = bool(np.array_equal(order, np.arange(numel, dtype=np.int64)))
    var = ctx.g.add_variable(t.id, tuple(t.shape) if in_order else (numel,), ctx.etype(t), ipu.VARIABLE, debug=t.id)
    var.set_tile_runs(cells["tile"], sizes)
    if in_order:  # the blocks follow the variable's own order: only the tiles differ
        return var
    return ipu.Tensor(var, position.reshape(tuple(t.shape)), tuple(t.shape))


def reserved_estimate(ctx, graph) -> int:
    """The bytes per tile the graph's variables and constants take spread evenly: what planning
    before any tensor is mapped assumes (as precheck_matmuls does)."""
    T = ctx.g.target.num_tiles
    total = sum(int(np.prod(t.shape, dtype=np.int64)) * ctx.etype(t).itemsize
                for t in list(graph.variables) + list(graph.constants))
    return -(-total // T)
