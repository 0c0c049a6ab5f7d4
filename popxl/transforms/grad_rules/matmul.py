"""Gradient of matmul (NumPy rules: 1-D operands, broadcast batch axes)."""
import popxl.ops as ops
from popxl.ops._shapes import matmul_shape

from ._registry import grad_rule
from ._util import no_grads, unbroadcast


def _swap_last(t):
    perm = list(range(t.rank))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return ops.transpose(t, perm)


@grad_rule("matmul")
def _matmul(ctx, op, grads):
    """Y = A @ B: dA = dY @ B^T, dB = A^T @ dY, summed over broadcast batch axes."""
    g = grads[0]
    a, b = op.inputs
    partials = op.attrs.get("partials_type")
    amp = op.attrs.get("available_memory_proportion")
    a2_shape = (1,) + a.shape if a.rank == 1 else a.shape
    b2_shape = b.shape + (1,) if b.rank == 1 else b.shape
    g2_shape = matmul_shape(a2_shape, b2_shape)
    g2 = g if g.shape == g2_shape else ops.reshape(g, g2_shape)
    if g2.dtype != a.dtype:
        g2 = ops.cast(g2, a.dtype)
    out = no_grads(2)
    if ctx.wants(0):
        bv = ctx.input(1)
        b2 = bv if bv.shape == b2_shape else ops.reshape(bv, b2_shape)
        da = ops.matmul(g2, _swap_last(b2), amp, partials_type=partials)
        da = unbroadcast(da, a2_shape)
        out[0] = da if da.shape == a.shape else ops.reshape(da, a.shape)
    if ctx.wants(1):
        av = ctx.input(0)
        a2 = av if av.shape == a2_shape else ops.reshape(av, a2_shape)
        db = ops.matmul(_swap_last(a2), g2, amp, partials_type=partials)
        db = unbroadcast(db, b2_shape)
        out[1] = db if db.shape == b.shape else ops.reshape(db, b.shape)
    return out
