"""Shared pieces of the variable-update ops."""
from collections import namedtuple
from typing import Any, Dict, Optional, Tuple

from popxl.tensor import Tensor

from .._op_builder import single

__all__ = ["OptimizerValue", "handle_optimizer_value"]

OptimizerValue = namedtuple("OptimizerValue", ["val", "is_const"])
OptimizerValue.__doc__ = """A hyper-parameter: a Python float known at build time (``is_const``), or a
tensor input of the op (``val`` is None then)."""


def handle_optimizer_value(f: Any, ins: Dict[int, Tensor], index: int) -> OptimizerValue:
    """A float ``f`` is a constant; a tensor ``f`` becomes input ``index`` in ``ins``; None is absent."""
    if isinstance(f, Tensor):
        if f.nelms != 1:
            raise ValueError(f"An optimizer value tensor must be a scalar, got {f}.")
        ins[index] = f
        return OptimizerValue(None, False)
    if f is None:
        return OptimizerValue(None, True)
    return OptimizerValue(float(f), True)


def var_update(op_type: str, ins: Dict[int, Tensor], names: Dict[int, str], attrs: Dict[str, Any],
               shape: Tuple[int, ...], dtype, updated: Optional[int] = 0, extra_modified: Tuple[int, ...] = ()):
    """Record a variable-update op: inputs in PopART index order (absent ones skipped, their names
    in ``attrs['input_names']``); the output aliases and modifies input ``updated``."""
    order = sorted(ins)
    inputs = [ins[i] for i in order]
    input_names = [names[i] for i in order]
    position = {idx: pos for pos, idx in enumerate(order)}
    modified = [position[i] for i in ((updated,) if updated is not None else ()) + tuple(extra_modified)
                if i in position]
    aliases = {0: position[updated]} if updated is not None else {}
    attrs = dict(attrs, input_names=tuple(input_names))
    suffix = "_inplace_out" if updated is not None else "_out"
    return single(op_type, inputs, shape, dtype, attrs, input_names=input_names, modified=modified,
                  aliases=aliases, out_names=[op_type + suffix])
