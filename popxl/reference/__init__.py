"""popxl.reference: the NumPy definition of every op type, and an interpreter of popxl programs.

Each op type of `popxl.op_table` has one reference rule (``popxl/reference/rules/<family>.py``,
registered with `reference_rule` beside its lowering and gradient rules), built on the codelets'
NumPy references where a codelet defines the arithmetic (element-wise ops, casts, random numbers).
It is the oracle for the simulator (fuzzing, PopART) and a fast check users can run on the CPU:

    import popxl.reference

    outputs = popxl.reference.run(ir, {x_stream: x})      # {d2h stream: array}, as Session.run
    interp = popxl.reference.Interpreter(ir)               # variables kept between runs
    interp.run(inputs); interp.get_tensor_data(w)

    env = popxl.reference.evaluate(graph, [x, y])          # one graph: {tensor: array}
    outs = popxl.reference.run_graph(graph, [x, y])        # one graph: its outputs

Numerics follow the IPU's: float16 is computed in float32 and rounded once per op, float32 sums
accumulate in float32, int32 wraps, integer division truncates. ``upcast=True`` computes
float16 / float32 in float64 instead (finite differences).
"""
from __future__ import annotations

from typing import Optional, Sequence

from .interpreter import Evaluator, Interpreter, ReferenceError, RuleContext, Shared
from .registry import REFERENCE_RULES, get_reference_rule, reference_rule

__all__ = ["evaluate", "run_graph", "run", "Interpreter", "Evaluator", "RuleContext", "ReferenceError", "Shared",
           "reference_rule", "get_reference_rule", "REFERENCE_RULES"]


def evaluate(graph, inputs: Sequence, upcast: bool = False, env: Optional[dict] = None) -> dict:
    """Run `graph` on one array per graph input (not changed); returns {tensor: array} of every
    tensor it computed. Variables hold their initial values; host and collective ops need `run`."""
    return Evaluator(upcast).evaluate(graph, inputs, env)


def run_graph(graph, inputs: Sequence, upcast: bool = False) -> list:
    """The outputs of `graph` run on one array per graph input."""
    return Evaluator(upcast).run_graph(graph, inputs)


def run(ir, inputs: Optional[dict] = None, upcast: bool = False) -> dict:
    """Run an Ir's main graph once, as `Session(ir).run(inputs)` does: {DeviceToHostStream: array}."""
    return Interpreter(ir, upcast).run(inputs)
