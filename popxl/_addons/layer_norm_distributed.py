"""popxl-addons' LayerNormDistributed (ops/layer_norm_distributed/*.cpp): layer normalisation of
x (N, H_local) whose hidden axis is sharded over the replicas of a group (H = H_local x group size).

Forward (LayerNormDistributedOpx: poplin::distributedNormStatistics with the non-stable
algorithm, float partials, the sums all-reduced over the group; popnn::ln::layerNormalise):
    mean = sum_H(x) / H,  inv_std = 1 / sqrt(sum_H(x^2) / H - mean^2 + epsilon),
    y = (x - mean) inv_std w + b;  outputs y, mean (N,), inv_std (N,).
Gradient (LayerNormDistributedGradOpx): with xw = (x - mean) inv_std,
    dx = inv_std (dy - (sum_H(dy) + xw sum_H(xw dy)) / H)   (sums all-reduced over the group),
    dw = sum_N(xw dy),  db = sum_N(dy).
As in the C++ op, the x gradient is built from dy itself (poplin's statistics gradients are given
the output gradient, not dy x w).
"""
from __future__ import annotations

import popxl
from popxl import ops
from popxl.custom_op import CustomOp, register_custom_op

from ._binding import binding_class, create_in_graph


def _f32(t):
    return t if t.dtype == popxl.float32 else ops.cast(t, popxl.float32)


def _group_sum(t, group):
    return ops.collectives.replicated_all_reduce(t, "add", group) if group.group_size > 1 else t


@register_custom_op
class LayerNormDistributed(CustomOp):
    """Layer norm of (N, H_local) shards of a hidden axis split over a replica group."""
    op_type = "layer_norm_distributed"
    pb_type = "LayerNormDistributed"
    attrs = ("epsilon", "group")
    input_names = ("x", "w", "b")

    def infer(self, inputs, epsilon, group):
        x, w, b = inputs
        if x.rank != 2 or w.rank != 1 or b.rank != 1 or w.shape[0] != x.shape[1] or b.shape[0] != x.shape[1]:
            raise ValueError(f"LayerNormDistributed: x must be (N, H_local) and w, b (H_local,); got {x.shape}, "
                             f"{w.shape}, {b.shape}")
        if not x.dtype.is_floating_point:
            raise TypeError(f"LayerNormDistributed: x must be float16 or float32, not {x.dtype.name}")
        return [(x.shape, x.dtype), ((x.shape[0],), x.dtype), ((x.shape[0],), x.dtype)]

    def expand(self, x, w, b, epsilon, group):
        n_hidden = x.shape[1] * group.group_size
        xf = _f32(x)
        s1 = _group_sum(ops.sum(xf, axis=1), group)
        s2 = _group_sum(ops.sumsquare(xf, axis=1), group)
        mean = s1 / float(n_hidden)
        var = s2 / float(n_hidden) - mean * mean
        inv_std = 1.0 / ops.sqrt(var + float(epsilon))
        y = (xf - mean.reshape((x.shape[0], 1))) * inv_std.reshape((x.shape[0], 1)) * _f32(w) + _f32(b)
        dt = x.dtype
        return [ops.cast(y, dt) if dt != popxl.float32 else y,
                ops.cast(mean, dt) if dt != popxl.float32 else mean,
                ops.cast(inv_std, dt) if dt != popxl.float32 else inv_std]

    def grad(self, ctx, fwd, grads):
        dy = grads[0]
        if dy is None:
            return [None, None, None]
        a = fwd.attrs
        dx, dw, db = LayerNormDistributedGrad.create(dy, ctx.input(0), ctx.input(1), ctx.output(1), ctx.output(2),
                                                     epsilon=a["epsilon"], group=a["group"])
        return [dx, dw, db]


@register_custom_op
class LayerNormDistributedGrad(CustomOp):
    """The gradient of LayerNormDistributed: (dy, x, w, mean, inv_std) -> dx, dw, db."""
    op_type = "layer_norm_distributed_grad"
    pb_type = "LayerNormDistributedGrad"
    attrs = ("epsilon", "group")
    gradient = "missing"
    input_names = ("dy", "x", "w", "mean", "inv_std")

    def infer(self, inputs, epsilon, group):
        dy, x, w, mean, inv_std = inputs
        return [(x.shape, x.dtype), (w.shape, w.dtype), (w.shape, w.dtype)]

    def expand(self, dy, x, w, mean, inv_std, epsilon, group):
        n, h = x.shape
        n_hidden = h * group.group_size
        g = _f32(dy)
        xw = (_f32(x) - _f32(mean).reshape((n, 1))) * _f32(inv_std).reshape((n, 1))
        mean_delta = _group_sum(ops.sum(g, axis=1), group).reshape((n, 1))
        var_delta = _group_sum(ops.sum(xw * g, axis=1), group).reshape((n, 1))
        dx = (g - (mean_delta + xw * var_delta) / float(n_hidden)) * _f32(inv_std).reshape((n, 1))
        dw = ops.sum(xw * g, axis=0)
        db = ops.sum(g, axis=0)
        out = []
        for t, dt in ((dx, x.dtype), (dw, w.dtype), (db, w.dtype)):
            out.append(ops.cast(t, dt) if dt != popxl.float32 else t)
        return out


def _create(graph, inputs, outputs, epsilon, group, settings=None):
    return create_in_graph(LayerNormDistributed(), graph, inputs, outputs,
                           dict(epsilon=float(epsilon), group=group), settings)


BINDING_CLASSES = {"layer_norm_distributed_binding": [
    binding_class("LayerNormDistributedOp", LayerNormDistributed(), _create)]}
