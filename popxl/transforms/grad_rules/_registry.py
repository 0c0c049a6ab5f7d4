"""The gradient-rule registry.

A rule is ``rule(ctx, op, grads) -> grads_of_inputs``:

- ``op`` is the forward :class:`popxl.Op`;
- ``grads`` has one entry per forward output: the gradient tensor (in the gradient graph) of that
  output, or None when no gradient reaches it;
- the rule returns a sequence with one entry per forward input (or a dict {input index: grad});
  None means "no gradient" (the input is not differentiable, or ``ctx.wants(i)`` is False).

Rules run inside the gradient graph and build the backward computation with the public popxl ops.
They read forward values through ``ctx`` (:class:`RuleContext`): ``ctx.fwd(t)`` / ``ctx.input(i)``
/ ``ctx.output(i)`` give the forward tensor's value in the gradient graph (a Fwd connection of the
gradient graph, or a copy of a constant).
"""
from typing import Callable, Dict, Set

__all__ = ["grad_rule", "get_grad_rule", "has_grad_rule", "GRAD_RULES", "NON_DIFFERENTIABLE", "non_differentiable"]

GRAD_RULES: Dict[str, Callable] = {}

# Op types that stop gradients: their outputs are never differentiable (integer / boolean results,
# random numbers, fresh tensors, explicit stops).
NON_DIFFERENTIABLE: Set[str] = set()


def grad_rule(*op_types: str):
    """Register the decorated function as the gradient rule of ``op_types``."""

    def deco(fn):
        for t in op_types:
            if t in GRAD_RULES:
                raise RuntimeError(f"two gradient rules for op type {t!r}")
            GRAD_RULES[t] = fn
        return fn

    return deco


def non_differentiable(*op_types: str) -> None:
    """Declare op types through which no gradient flows."""
    NON_DIFFERENTIABLE.update(op_types)


def has_grad_rule(op_type: str) -> bool:
    _load()
    return op_type in GRAD_RULES


def get_grad_rule(op_type: str) -> Callable:
    _load()
    rule = GRAD_RULES.get(op_type)
    if rule is None:
        raise NotImplementedError(
            f"autodiff: there is no gradient rule for op type {op_type!r}, so gradients cannot flow through it. "
            "Detach its inputs (ops.detach) if no gradient is needed there, or add a rule with "
            "popxl.transforms.grad_rules.grad_rule.")
    return rule


def _load():
    import popxl.transforms.grad_rules  # noqa: F401  (the package registers the built-in rules)
