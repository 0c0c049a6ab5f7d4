"""float8 ops: the pow2-scaled casts (element-wise vertices, the scale broadcast to each vertex)
and the pow2-scaled matmul (the float8 AMP through the matmul planner); the convolutions are in
conv.py (the same im2col + planned matmul, with the scale)."""
from __future__ import annotations

import ipu
from codelets.plans import build_matmul

from .. import blocks as B
from ..registry import lowering_rule


def check_log2_scale_range(ctx) -> bool:
    """PopART's session option throwIfLog2ScaleTensorNotInRange (default True)."""
    opts = ctx.ir._pb_ir.getSessionOptions()
    return bool(getattr(opts, "throwIfLog2ScaleTensorNotInRange", True))


@lowering_rule("pow2scale_then_cast")
def pow2scale_then_cast(ctx, op):
    x, scale = ctx.value(op.inputs[0]), ctx.value(op.inputs[1])
    t_out = op.outputs[0]
    out = B.elementwise(ctx, "Pow2ScaleThenCast", [x, scale], ["in", "log2_scale"], tuple(t_out.shape),
                        ctx.etype(t_out), ip={"nan_on_overflow": 1, "check_range": int(check_log2_scale_range(ctx))},
                        suffix="pow2scale_then_cast")
    ctx.bind(t_out, out)


@lowering_rule("cast_then_pow2scale")
def cast_then_pow2scale(ctx, op):
    x, scale = ctx.value(op.inputs[0]), ctx.value(op.inputs[1])
    t_out = op.outputs[0]
    out = B.elementwise(ctx, "CastThenPow2Scale", [x, scale], ["in", "log2_scale"], tuple(t_out.shape),
                        ctx.etype(t_out), ip={"check_range": int(check_log2_scale_range(ctx))},
                        suffix="cast_then_pow2scale")
    ctx.bind(t_out, out)


@lowering_rule("matmul_pow2scaled")
def matmul_pow2scaled(ctx, op):
    a, b = ctx.value(op.inputs[0]), ctx.value(op.inputs[1])
    scale = ctx.value(op.inputs[2]).reshape(1)
    t_out = op.outputs[0]
    a2 = a.reshape(1, a.numel) if a.rank == 1 else a
    b2 = b.reshape(b.numel, 1) if b.rank == 1 else b
    from codelets.plans import canonical_problem

    shape = canonical_problem(a2.shape, b2.shape).out_shape
    out = ctx.g.add_variable(t_out.id, shape, ipu.FLOAT16, ipu.TEMPORARY, debug=ctx.name())
    if out.numel:
        ctx.emit(build_matmul(ctx.g, a2, b2, out, name=ctx.name(), log2_scale=scale,
                              check_range=check_log2_scale_range(ctx)))
    ctx.bind(t_out, out.reshape(tuple(t_out.shape)))
