"""Lowering: popxl Ir -> ipu.Graph + programs (tile mappings, compute sets, exchanges, control).

One rule per op type lives in `popxl/lowering/rules/`, registered with `lowering_rule`.
"""
import codelets  # noqa: F401  (registers the built-in vertex types the rules name)

from .context import LoweredIr, Lowering
from .registry import LOWERING_RULES, lowering_rule


def lower(ir, target, options=None) -> LoweredIr:
    """Lower a popxl Ir for an ipu.Target, with a session's options (popxl._run_options.RunOptions;
    default: resolved now)."""
    lowering = Lowering(ir, target)
    if options is not None:  # the debug.checkIndices option as the session resolved it
        lowering.check_indices = options.check_indices
    return lowering.lower()


__all__ = ["lower", "Lowering", "LoweredIr", "lowering_rule", "LOWERING_RULES"]
