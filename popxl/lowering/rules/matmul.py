"""matmul: planned over the tiles by codelets.plans.matmul_build (AMP blocks, partials reduced)."""
from __future__ import annotations

from typing import Any, Tuple

import numpy as np

import ipu
from codelets.plans.matmul_build import build_matmul

from ..registry import lowering_rule

# poplin's matmul / convolution option availableMemoryProportion defaults to 0.6 (Graphcore's
# technical note "Optimising Temporary Memory Usage for Convolutions and Matmuls on the IPU")
DEFAULT_AVAILABLE_MEMORY_PROPORTION = 0.6


@lowering_rule("matmul")
def matmul(ctx, op):
    a, b = ctx.value(op.inputs[0]), ctx.value(op.inputs[1])
    t_out = op.outputs[0]
    et = ctx.etype(t_out)
    if a.dtype not in (ipu.FLOAT32, ipu.FLOAT16):
        raise TypeError(f"{op.name}: matmul on the IPU takes float32 or float16 operands, not {a.dtype.name}")
    # NumPy's 1-D rules: a vector is a row (lhs) or a column (rhs) that disappears from the result
    a2 = a.reshape(1, a.numel) if a.rank == 1 else a
    b2 = b.reshape(b.numel, 1) if b.rank == 1 else b
    from codelets.plans.matmul_build import canonical_problem

    shape = canonical_problem(a2.shape, b2.shape).out_shape
    out = ctx.g.add_variable(t_out.id, shape, et, ipu.TEMPORARY, debug=ctx.name())
    # poplibs' availableMemoryProportion: the op's own, else poplibs' default (0.6 of a tile)
    amp = op.attrs.get("available_memory_proportion")
    if out.numel:
        # the plan a variable operand was laid out for (creators.py), else planned now
        ctx.emit(build_matmul(ctx.g, a2, b2, out, plan=ctx.planned.get(op), name=ctx.name(),
                              available_memory_proportion=DEFAULT_AVAILABLE_MEMORY_PROPORTION if amp is None else amp,
                              partials_dtype=partials_type(op)))
    ctx.bind(t_out, out.reshape(tuple(t_out.shape)))


def partials_type(op):
    """The op's partials_type (PopXL: float32 by default, or float16) as an ipu element type."""
    pt = op.attrs.get("partials_type")
    return None if pt is None else ipu.element_type(getattr(pt, "name", pt))


def precheck_matmuls(ctx, graph) -> None:
    """Refuse, before any tensor is mapped, a matmul of `graph` that cannot fit: plan it with the
    graph's variables and constants assumed spread evenly over the tiles (the least they can
    take on a tile, so this never refuses what the real plan would accept). Planning needs no
    per-element table, so a product too big for the target fails in seconds whatever its size."""
    from codelets.plans import canonical_problem, plan_for_shapes

    T = ctx.g.target.num_tiles
    persistent = sum(int(np.prod(t.shape, dtype=np.int64)) * ctx.etype(t).itemsize
                     for t in list(graph.variables) + list(graph.constants))
    reserved = -(-persistent // T)
    seen = set()
    for op in graph.ops:
        if op.type != "matmul":
            continue
        a, b = op.inputs[0], op.inputs[1]
        a_shape = (1, int(np.prod(a.shape))) if len(a.shape) == 1 else tuple(a.shape)
        b_shape = (int(np.prod(b.shape)), 1) if len(b.shape) == 1 else tuple(b.shape)
        et = ctx.etype(a)
        if et not in (ipu.FLOAT32, ipu.FLOAT16) or 0 in a_shape or 0 in b_shape:
            continue  # the rule itself reports these
        if int(np.prod(canonical_problem(a_shape, b_shape).out_shape, dtype=np.int64)) == 0:
            continue
        amp = op.attrs.get("available_memory_proportion")
        key = (a_shape, b_shape, et, ctx.etype(op.outputs[0]), amp, partials_type(op))
        if key in seen:  # the same product (a layer's Q / K / V, say) is planned once
            continue
        seen.add(key)
        try:
            plan_for_shapes(a_shape, b_shape, et, ctx.g.target, out_dtype=ctx.etype(op.outputs[0]),
                            reserved_bytes=reserved, partials_dtype=partials_type(op),
                            available_memory_proportion=DEFAULT_AVAILABLE_MEMORY_PROPORTION if amp is None else amp)
        except ipu.OutOfMemoryError as e:
            raise type(e)(f"{op.name}: {e}", getattr(e, "report", [])) from None


def reserve_products_code(ctx) -> None:
    """Estimate, before any product is built, the exchange code every matmul and dense convolution
    of the Ir will leave on a tile (MatMulPlan.code_bytes of each op's plan: the busiest tile's, as
    plans spread over all the tiles) and keep it free when each of them is planned: Poplar loads a
    program's code for the whole run, so a product lowered early shares its tiles with the code of
    the ones lowered after it (VGG-11: ~60 KB of a tile whose weights take 360 KB)."""
    from codelets.plans import canonical_problem, plan_for_shapes

    from ..creators import _conv_problem

    T = ctx.g.target.num_tiles
    persistent = sum(int(np.prod(t.shape, dtype=np.int64)) * ctx.etype(t).itemsize
                     for t in list(ctx.ir.main_graph.variables) + list(ctx.ir.main_graph.constants))
    reserved = -(-persistent // T)
    plans: dict = {}
    total = 0
    for graph in ctx.ir.graphs:
        for op in graph.ops:
            plan = ctx.planned.get(op)
            if plan is None and op.type in ("matmul", "conv"):
                try:
                    key = _product(ctx, op, _conv_problem)
                except TypeError:  # a dtype the IPU has not: the op's rule says so
                    continue
                if key is None:
                    continue
                if key not in plans:
                    a_shape, b_shape, et, options = key[0], key[1], key[2], dict(key[3])
                    if int(np.prod(canonical_problem(a_shape, b_shape).out_shape, dtype=np.int64)) == 0:
                        plans[key] = None
                    else:
                        try:
                            plans[key] = plan_for_shapes(a_shape, b_shape, et, ctx.g.target,
                                                         reserved_bytes=reserved, **options)
                        except ipu.OutOfMemoryError:
                            plans[key] = None  # the op's rule reports it
                plan = plans[key]
            if plan is not None:
                total += plan.code_bytes
    ctx.g.__dict__["_products_code_bytes"] = int(total)


def _product(ctx, op, conv_problem):
    """(a shape, b shape, dtype, options) of the product an op's rule plans, or None."""
    if op.type == "matmul":
        a, b = op.inputs[0], op.inputs[1]
        a_shape = (1, int(np.prod(a.shape))) if len(a.shape) == 1 else tuple(a.shape)
        b_shape = (int(np.prod(b.shape)), 1) if len(b.shape) == 1 else tuple(b.shape)
        et = ctx.etype(a)
        amp = op.attrs.get("available_memory_proportion")
        options: Tuple[Tuple[str, Any], ...] = (
            ("out_dtype", ctx.etype(op.outputs[0])), ("partials_dtype", partials_type(op)),
            ("available_memory_proportion", DEFAULT_AVAILABLE_MEMORY_PROPORTION if amp is None else amp))
    else:
        w = op.inputs[1]
        got = conv_problem(ctx, op, np.zeros(tuple(w.shape), np.int8))
        if got is None:
            return None
        _, a_shape, b_shape = got
        et = ctx.etype(op.inputs[0])
        options = (("out_dtype", ctx.etype(op.outputs[0])),)
    if et not in (ipu.FLOAT32, ipu.FLOAT16) or 0 in a_shape or 0 in b_shape:
        return None
    return a_shape, b_shape, et, options
