"""Gradients of the random ops (popxl/ops/random.py): dropout masks are recomputed from the same
seed, so the gradient is the dropout of the incoming gradient."""
import popxl.ops as ops

from ._registry import grad_rule, non_differentiable

non_differentiable("random_uniform", "random_normal", "create_random_seed")


@grad_rule("dropout")
def _dropout(ctx, op, grads):
    """y = x * mask / (1 - p): dx = g * mask / (1 - p), the mask drawn again from the same seed."""
    return [ops.dropout(grads[0], ctx.input(1), op.attrs["ratio"]), None]


@grad_rule("shaped_dropout")
def _shaped_dropout(ctx, op, grads):
    return [ops.shaped_dropout(grads[0], ctx.input(1), op.attrs["shape"], op.attrs["ratio"]), None]
