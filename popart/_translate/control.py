"""ONNX If (PopART's IfOp, If_1 / If_11). A condition known on the host (computed from shapes and
constants, as exporters often write it) picks its branch, whose nodes are translated in place; a
condition computed on the device becomes popxl's `conditional` over the two branches, each
translated into a graph of its own that takes the outer tensors it reads as inputs."""
from __future__ import annotations

from typing import List

import numpy as np
import onnx
from onnx import numpy_helper

import popxl
import popxl.ops as ops

from .context import Translation, _safe, onnx_op


def _outer_names(g: onnx.GraphProto) -> List[str]:
    """The tensors of enclosing graphs a graph reads (its nodes' and nested graphs' inputs that
    nothing in it makes), in first-use order."""
    made = {i.name for i in g.initializer} | {i.name for i in g.input}
    out: List[str] = []
    for n in g.node:
        reads = list(n.input)
        for a in n.attribute:
            for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                reads += _outer_names(sub)
        out += [t for t in reads if t and t not in made and t not in out]
        made.update(o for o in n.output if o)
    return out


def _translate_branch(tr: Translation, g: onnx.GraphProto) -> None:
    for init in g.initializer:
        tr.consts[init.name] = numpy_helper.to_array(init)
    for n in g.node:
        tr.run_node(n)


@onnx_op("If", attrs=("then_branch", "else_branch"))
def if_(node):
    tr = node.tr
    then_g, else_g = node.attr("then_branch"), node.attr("else_branch")
    for g in (then_g, else_g):
        if len(g.output) != node.num_outputs:
            raise node.error(f"branch {g.name!r} has {len(g.output)} outputs; the node has {node.num_outputs}")
    if node.is_const(0):  # the branch is known when the program is built
        g = then_g if bool(np.asarray(node.const(0, "cond")).reshape(-1)[0]) else else_g
        _translate_branch(tr, g)
        return [tr.consts[o.name] if o.name in tr.consts and o.name not in tr.values else tr.tensor(o.name)
                for o in g.output]
    cond = node.input(0)
    if cond.nelms != 1:
        raise node.error(f"cond must have one element, not shape {cond.shape}")
    if cond.dtype != popxl.bool:
        cond = ops.cast(cond, popxl.bool)
    outer = [t for t in _outer_names(then_g) + _outer_names(else_g) if t not in tr.consts]
    outer = list(dict.fromkeys(outer))
    args = [tr.tensor(t) for t in outer]
    ir = popxl.gcg().ir
    graphs = []
    for g in (then_g, else_g):
        sub_graph = ir.create_empty_graph(_safe(f"{node.name}_{g.name or 'branch'}"))
        with sub_graph:
            sub = Translation(tr.opset, training=tr.training)
            sub.consts.update(tr.consts)
            sub.initial_values, sub.read_at_compile_time = tr.initial_values, tr.read_at_compile_time
            for name, t in zip(outer, args):
                sub.values[name] = popxl.graph_input(t.shape, t.dtype, name=_safe(name))
            _translate_branch(sub, g)
            for o in g.output:
                popxl.graph_output(sub.tensor(o.name))
        graphs.append(sub_graph)
    try:
        return list(ops.conditional(cond, graphs[0], graphs[1], then_inputs=args, else_inputs=args))
    except ValueError as e:
        raise node.error(f"{e} (popxl's conditional, as PopART's IfOp, needs the branches' outputs to agree)") from e
