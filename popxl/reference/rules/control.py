"""call, repeat and conditional. A graph input given by reference is the caller's array (the
callee's in-place writes reach the caller); every other input is a copy."""
import numpy as np

from ..registry import reference_rule


def _inputs(op, graph, input_map, ins):
    """The callee's input values: the caller's array for a by-reference input (or one the op marks
    modified, `set_parent_input_modified`), a copy for the others."""
    by_ref = set(op.attrs.get("by_ref", ()))
    vals = [None] * len(graph.inputs)
    for gi, oi in input_map.items():
        shared = gi in by_ref or oi in op.modified
        vals[gi] = ins[oi] if shared else np.array(ins[oi], copy=True)
    return vals


@reference_rule("call")
def call(ctx, op, ins):
    g = op.attrs["graph"]
    vals = _inputs(op, g, op.attrs["input_map"], ins)
    return [np.array(v, copy=True) for v in ctx.run_graph(g, vals)]


@reference_rule("repeat")
def repeat(ctx, op, ins):
    g = op.attrs["graph"]
    vals = _inputs(op, g, op.attrs["input_map"], ins)
    k = op.attrs["num_carried"]
    shared = [any(v is x for x in ins) for v in vals[:k]]
    for _ in range(op.attrs["repeat_count"]):
        outs = ctx.run_graph(g, vals)
        for i, v in enumerate(outs):  # input i <- output i for the next iteration
            if shared[i]:
                np.copyto(vals[i], v)
            else:
                vals[i] = np.array(v, copy=True)
    return [np.array(v, copy=True) for v in vals[:k]]


@reference_rule("conditional")
def conditional(ctx, op, ins):
    key = "then" if bool(np.asarray(ins[0]).reshape(())) else "else"
    g = op.attrs[f"{key}_branch"]
    vals = _inputs(op, g, op.attrs[f"{key}_input_map"], ins)
    return [np.array(v, copy=True) for v in ctx.run_graph(g, vals)]
