"""Gradient rules used by :func:`popxl.transforms.autodiff`, one per op type, grouped by op family
as popxl/ops is (elementwise, reduce, shape, indexing, matmul, nn, misc, random, conv, control,
collectives). Each op type's gradient kind (a rule, none, missing) is in popxl.op_table.

Register a rule for a new op type with::

    from popxl.transforms.grad_rules import grad_rule

    @grad_rule("my_op")
    def _my_op(ctx, op, grads):
        (g,) = grads
        return [ops.mul(g, ctx.input(1)), None]

See ``_registry.py`` for the contract and :class:`popxl.transforms.autodiff.RuleContext` for ``ctx``.
"""
from ._registry import GRAD_RULES, NON_DIFFERENTIABLE, get_grad_rule, grad_rule, has_grad_rule, non_differentiable
from . import collectives, control, conv, elementwise, indexing, matmul, misc, nn, random, reduce, shape  # noqa: E402,F401,I001

__all__ = ["grad_rule", "get_grad_rule", "has_grad_rule", "non_differentiable", "GRAD_RULES", "NON_DIFFERENTIABLE"]
