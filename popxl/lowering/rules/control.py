"""call, repeat and conditional: a called graph is lowered once into an ipu.Function; every call
site copies its arguments into the function's input tensors, calls it, and copies results out.
Inputs the graph modifies (passed by reference) are copied back to the caller's tensors. A graph
with one call site in the whole Ir (and on one IPU) is lowered inline instead, as the caller's
own ops, with no copies (`_call_inline`)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import ipu

from ..registry import lowering_rule

if TYPE_CHECKING:
    from popxl.tensor import Tensor


def _graph_inputs_for(op, graph, parent_inputs):
    """Pairs (graph input index, parent tensor) of a call site."""
    mapping = op.attrs.get("input_map")
    if mapping is not None:  # {graph input index: op input index}
        return [(gi, op.inputs[pi]) for gi, pi in sorted(mapping.items())]
    return list(enumerate(parent_inputs))


def _call_into(ctx, lg, pairs, modified_graph_inputs=()):
    for gi, parent in pairs:
        ctx.copy(ctx.value(parent), lg.inputs[gi], f"arg{gi}")
    ctx.emit(ipu.Call(lg.function, name=ctx.name(lg.graph.name)))
    for gi, parent in pairs:
        if gi in modified_graph_inputs:
            ctx.copy(lg.inputs[gi], ctx.value(parent), f"ref{gi}")


def _outputs_from(ctx, op, lg, first=0):
    for j, t_out in enumerate(op.outputs):
        src = lg.outputs[first + j]
        out = ctx.new_var(t_out.shape, ctx.etype(t_out), t_out.id)
        ctx.copy(src, out, f"out{j}")
        ctx.bind(t_out, out)


def _modified_graph_inputs(op, graph, pairs):
    mods = set()
    by_parent_index = {id(p): gi for gi, p in pairs}
    for i in op.modified:
        gi = by_parent_index.get(id(op.inputs[i]))
        if gi is not None:
            mods.add(gi)
    return mods


def _written_inputs(graph) -> set:
    """The graph inputs whose contents ops of the graph change (directly or through a view)."""
    root: dict[int, Tensor] = {}  # id(an op's output) -> the tensor it is a view of

    def r(t: Tensor) -> Tensor:
        while id(t) in root:
            t = root[id(t)]
        return t

    written = set()
    for o in sorted(graph.ops, key=lambda x: x.id):
        for oi, ii in (o.aliases or {}).items():
            root[id(o.outputs[oi])] = r(o.inputs[ii])
        for i in o.modified:
            written.add(id(r(o.inputs[i])))
    return {t for t in graph.inputs if id(t) in written}


def _call_inline(ctx, op, graph):
    """A graph called from one place, lowered as the caller's own ops: its inputs are the caller's
    tensors (a copy only for one it changes that is not passed by reference, so the caller keeps
    its value), its outputs the tensors it computes (a copy only for one that is an input, or
    repeats one)."""
    pairs = _graph_inputs_for(op, graph, op.inputs)
    by_ref = _modified_graph_inputs(op, graph, pairs)
    written = _written_inputs(graph)
    bound = set()
    for gi, parent in pairs:
        t = graph.inputs[gi]
        v = ctx.value(parent)
        if t in written and gi not in by_ref:
            nv = ctx.new_var(t.shape, ctx.etype(t), f"{graph.name}/{t.name}", like=v)
            ctx.copy(v, nv, f"arg{gi}")
            v = nv
        ctx.values[t] = v
        bound.add(v.variable.id)
    saved = ctx.op
    seq = ctx.lower_ops(graph)
    ctx.op = saved
    ctx.emit_inline(seq)
    seen = set()
    for j, t_out in enumerate(op.outputs):
        v = ctx.value(graph.outputs[j])
        if v.variable.id in bound or v.variable.id in seen:
            out = ctx.new_var(t_out.shape, ctx.etype(t_out), t_out.id)
            ctx.copy(v, out, f"out{j}")
            v = out
        seen.add(v.variable.id)
        ctx.bind(t_out, v)


@lowering_rule("call")
def call(ctx, op):
    graph = op.attrs["graph"] if "graph" in op.attrs else op.called_graphs[0]
    if ctx.inlinable(graph):
        _call_inline(ctx, op, graph)
        return
    lg = ctx.lowered(graph)
    pairs = _graph_inputs_for(op, graph, op.inputs)
    _call_into(ctx, lg, pairs, _modified_graph_inputs(op, graph, pairs))
    _outputs_from(ctx, op, lg)


@lowering_rule("repeat")
def repeat(ctx, op):
    graph = op.attrs["graph"] if "graph" in op.attrs else op.called_graphs[0]
    count = int(op.attrs["repeat_count"])
    lg = ctx.lowered(graph)
    pairs = _graph_inputs_for(op, graph, op.inputs)
    mods = _modified_graph_inputs(op, graph, pairs)
    for gi, parent in pairs:
        ctx.copy(ctx.value(parent), lg.inputs[gi], f"arg{gi}")
    # each iteration: run the body, then feed outputs i back into the loop-carried inputs i
    body = ipu.Sequence(ipu.Call(lg.function, name=ctx.name(graph.name)), name=ctx.name("body"))
    for j, src in enumerate(lg.outputs):
        if src.numel:
            body.add(ipu.Copy(src, lg.inputs[j], name=ctx.name(f"carry{j}")))
    ctx.emit(ipu.Repeat(count, body, name=ctx.name("loop")))
    for gi, parent in pairs:
        if gi in mods:
            ctx.copy(lg.inputs[gi], ctx.value(parent), f"ref{gi}")
    # after the loop the carried inputs hold the last outputs (or the inputs if count == 0)
    for j, t_out in enumerate(op.outputs):
        out = ctx.new_var(t_out.shape, ctx.etype(t_out), t_out.id)
        ctx.copy(lg.inputs[j], out, f"out{j}")
        ctx.bind(t_out, out)


@lowering_rule("conditional")
def conditional(ctx, op):
    then_g, else_g = op.attrs["then_branch"], op.attrs["else_branch"]
    cond = ctx.value(op.inputs[0])
    branches = []
    outs = [ctx.new_var(t.shape, ctx.etype(t), t.id) for t in op.outputs]
    for key, graph in (("then", then_g), ("else", else_g)):
        lg = ctx.lowered(graph)
        mapping = op.attrs[f"{key}_input_map"]  # {graph input index: op input index}
        seq = ipu.Sequence(name=ctx.name(key))
        for gi, pi in sorted(mapping.items()):
            if op.inputs[pi].nelms:
                seq.add(ipu.Copy(ctx.value(op.inputs[pi]), lg.inputs[gi], name=ctx.name(f"{key}_arg{gi}")))
        seq.add(ipu.Call(lg.function, name=ctx.name(graph.name)))
        for gi, pi in sorted(mapping.items()):
            if pi in op.modified and op.inputs[pi].nelms:
                seq.add(ipu.Copy(lg.inputs[gi], ctx.value(op.inputs[pi]), name=ctx.name(f"{key}_ref{gi}")))
        for j, out in enumerate(outs):
            if out.numel:
                seq.add(ipu.Copy(lg.outputs[j], out, name=ctx.name(f"{key}_out{j}")))
        branches.append(seq)
    ctx.emit(ipu.If(cond, branches[0], branches[1], name=ctx.name("if")))
    for t, out in zip(op.outputs, outs):
        ctx.bind(t, out)
