"""popxl-addons' GradReduceSquareAdd (ops/grad_reduce_square_add/*_binding.cpp): the float32
scalar scale x sum(t^2) (popops::reduce SQUARE_ADD with a scale tensor, float partials), for the
norm of a loss-scaled gradient. No gradient op."""
from __future__ import annotations

import popxl
from popxl import ops
from popxl.custom_op import CustomOp, register_custom_op

from ._binding import binding_class, create_in_graph


@register_custom_op
class GradReduceSquareAdd(CustomOp):
    """scale * sum(t ** 2), a float32 scalar."""
    op_type = "grad_reduce_square_add"
    pb_type = "GradReduceSquareAdd"
    gradient = "none"
    input_names = ("t", "scale")

    def infer(self, inputs):
        t, scale = inputs
        if not t.dtype.is_floating_point:
            raise TypeError(f"GradReduceSquareAdd: t must be float16 or float32, not {t.dtype.name}")
        if scale.nelms != 1:
            raise ValueError(f"GradReduceSquareAdd: the scale must have one element, not shape {scale.shape}")
        return [((), popxl.float32)]

    def expand(self, t, scale):
        x = t.reshape((t.nelms,))
        if x.dtype != popxl.float32:
            x = ops.cast(x, popxl.float32)
        s = scale.reshape(())
        if s.dtype != popxl.float32:
            s = ops.cast(s, popxl.float32)
        return ops.sumsquare(x) * s


def _create(graph, inputs, outputs, settings=None):
    return create_in_graph(GradReduceSquareAdd(), graph, inputs, outputs, {}, settings)


BINDING_CLASSES = {"grad_reduce_square_add_binding": [
    binding_class("GradReduceSquareAddOp", GradReduceSquareAdd(), _create)]}
