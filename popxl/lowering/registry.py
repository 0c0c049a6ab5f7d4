"""The lowering-rule registry: one rule per op type.

A rule is `rule(ctx: Lowering, op: popxl Op) -> None`. It reads its inputs with `ctx.value(t)`,
creates its outputs with `ctx.new_output(op, i, ...)` (or binds views with `ctx.bind`), and
appends programs (compute sets, copies, calls) with `ctx.emit`.
"""
from __future__ import annotations

from typing import Callable

LOWERING_RULES: dict[str, Callable] = {}


def lowering_rule(*op_types: str):
    """Register the decorated function as the lowering rule of the given op types."""

    def deco(fn):
        for t in op_types:
            if t in LOWERING_RULES:
                raise RuntimeError(f"two lowering rules for op type {t!r}")
            LOWERING_RULES[t] = fn
        return fn

    return deco


def get_rule(op_type: str):
    from . import rules  # noqa: F401  (registers the built-in rules)

    rule = LOWERING_RULES.get(op_type)
    if rule is None:
        raise NotImplementedError(
            f"The simulator cannot lower op type {op_type!r} yet (no lowering rule is registered for it)."
        )
    return rule
