"""matmul: planned over the tiles by codelets.plans.matmul_build (AMP blocks, partials reduced)."""
from __future__ import annotations

import ipu
from codelets.plans.matmul_build import build_matmul

from ..registry import lowering_rule


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
    if out.numel:
        ctx.emit(build_matmul(ctx.g, a2, b2, out, name=ctx.name()))
    ctx.bind(t_out, out.reshape(tuple(t_out.shape)))
