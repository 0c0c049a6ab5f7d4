"""The reference-rule registry: one NumPy rule per op type, beside its lowering and gradient rules.

A rule is ``rule(ctx, op, ins) -> outputs``:

- ``op`` is the :class:`popxl.Op`, ``ins`` the NumPy values of its inputs (in order);
- it returns a sequence with one array per output (shapes are checked; dtypes are the outputs'
  dtypes, or float64 for floats when the interpreter runs upcast);
- an op that modifies an input writes the new value with ``ctx.write(i, value)`` (for an output
  that aliases the modified input, returning it is enough);
- ``ctx`` (:class:`popxl.reference.interpreter.RuleContext`) gives ``ctx.dtype(t)`` (the NumPy dtype
  a tensor is computed in), ``ctx.upcast``, ``ctx.run_graph(graph, values)`` for called graphs and
  ``ctx.machine`` (streams, variables, remote buffers, replicas) for host and collective ops.
"""
from __future__ import annotations

from typing import Callable, Dict

__all__ = ["reference_rule", "get_reference_rule", "REFERENCE_RULES"]

REFERENCE_RULES: Dict[str, Callable] = {}


def reference_rule(*op_types: str):
    """Register the decorated function as the reference rule of the given op types."""

    def deco(fn):
        for t in op_types:
            if t in REFERENCE_RULES:
                raise RuntimeError(f"two reference rules for op type {t!r}")
            REFERENCE_RULES[t] = fn
        return fn

    return deco


def get_reference_rule(op_type: str) -> Callable:
    from . import rules  # noqa: F401  (registers the built-in rules)

    rule = REFERENCE_RULES.get(op_type)
    if rule is None:
        raise NotImplementedError(
            f"popxl.reference has no rule for op type {op_type!r}; register one with "
            "popxl.reference.reference_rule.")
    return rule
