"""Lowering: popxl Ir -> ipu.Graph + programs (tile mappings, compute sets, exchanges, control).

One rule per op type lives in `popxl/lowering/rules/`, registered with `lowering_rule`.
"""
import codelets  # noqa: F401  (registers the built-in vertex types the rules name)

from .context import LoweredIr, Lowering
from .registry import LOWERING_RULES, lowering_rule


def lower(ir, target) -> LoweredIr:
    """Lower a popxl Ir for an ipu.Target."""
    return Lowering(ir, target).lower()


__all__ = ["lower", "Lowering", "LoweredIr", "lowering_rule", "LOWERING_RULES"]
