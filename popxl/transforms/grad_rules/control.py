"""Gradients of the ops that run other graphs (popxl/ops/control.py).

call
    The called graph's gradient graph (``called_graphs_grad_info`` or a recursive autodiff, which
    adds the activations it needs as outputs of the called graph and of its call ops) is called
    with the gradients of the call's outputs and the activations found at the call site.

repeat
    The body B (k loop-carried inputs, then loop-invariant inputs) is differentiated without
    changing it. Its gradient reads, per iteration, some body tensors: loop-invariant inputs are
    passed once; every other tensor it needs (carried inputs, intermediates, outputs) is *stacked*
    by the forward loop: the repeat op is rewritten to run a copy of B that carries an iteration
    counter and one stack of shape (repeat_count, *shape) per such tensor, written with
    ``dynamic_update_`` at the counter. The stacks are extra outputs of the repeat op (Fwd
    connections of the enclosing gradient graph). The gradient is a repeat, ``repeat_count``
    times, of a body that takes the stacked activations at a counter running backwards, calls B's
    gradient graph, carries the gradients of the carried values and accumulates the gradients of
    the loop-invariant inputs. Any loop-carried dependency is supported; the cost is the memory of
    the stacks (no recomputation).

conditional
    Both branches are differentiated; the intermediates their gradients need become extra outputs
    of (copies of) the branches (the branch that did not run outputs zeros for the other one's).
    The gradient is a conditional on the same condition of two wrapper graphs that call the branch
    gradient graphs and output a gradient for every differentiable input of the conditional op
    (zeros for inputs of the other branch).
"""
from typing import Dict, List

import numpy as np

import popxl.ops as ops
from popxl import dtypes
from popxl.context import get_current_context
from popxl.tensor import Tensor, constant, graph_input, graph_output

from .._graph_edit import add_op_output, clone_graph, clone_ops_into, move_ops_before, placement
from ._registry import grad_rule
from ._util import const, zeros

GRAD_PREFIX = "Gradient___"
COUNTER_DTYPE = dtypes.int32  # iteration counters of the stacking loops


def _types():
    from popxl.transforms.autodiff import ExpectedConnectionType
    return ExpectedConnectionType


def _add_to(res: Dict[int, Tensor], i: int, g: Tensor) -> None:
    res[i] = g if i not in res else ops.add(res[i], g)


def _short(t) -> str:
    return t.name.split("/")[-1]


# -- call -------------------------------------------------------------------------------------------
@grad_rule("call")
def _call(ctx, op, grads):
    ECT = _types()
    C = op.attrs["graph"]
    info = ctx.grad_info(C)
    input_map = op.attrs["input_map"]
    c_in: Dict[Tensor, int] = {}  # the called graph's input -> its first index
    for i, t in enumerate(C.inputs):
        c_in.setdefault(t, i)
    c_out: Dict[Tensor, int] = {}
    for i, t in enumerate(C.outputs):
        c_out.setdefault(t, i)
    args = []
    n_grad = 0
    for conn in info.expected_inputs:
        t = conn.fwd_tensor
        if conn.connection_type is ECT.FwdGrad:
            # the k-th provided gradient is normally that of output k (grads_provided = outputs)
            k = n_grad if n_grad < len(C.outputs) and C.outputs[n_grad] is t else c_out.get(t)
            n_grad += 1
            g = grads[k] if k is not None and k < len(grads) else None
            args.append(g if g is not None else zeros(t.shape, t.dtype))
        elif t in c_in:
            gi = c_in[t]
            if gi not in input_map:
                raise ValueError(f"autodiff: the gradient of {C} needs its input {t.id}, which is not connected at "
                                 f"the call site '{op.name}'.")
            args.append(ctx.fwd(op.inputs[input_map[gi]]))
        elif t in c_out:
            args.append(ctx.fwd(op.outputs[c_out[t]]))
        else:
            raise ValueError(f"autodiff: the gradient graph {info.graph} of {C} needs the tensor {t.id}, which is "
                             f"neither an input nor an output of {C}.")
    outs = ops.call(info.graph, *args)
    res: Dict[int, Tensor] = {}
    for j, conn in enumerate(info.expected_outputs):
        t = conn.fwd_tensor
        ci = c_in.get(t)
        if ci is None or ci not in input_map:
            continue
        oi = input_map[ci]
        if ctx.wants(oi):
            _add_to(res, oi, outs[j])
    return res


# -- repeat -----------------------------------------------------------------------------------------
def _stack_forward(ctx, op, B, k: int, n: int, stacked) -> List:
    """Rewrite the repeat op to run a copy of B that stacks ``stacked`` (tensors of B) per
    iteration. Returns the parent tensors holding the stacks."""
    G = op.graph
    ir = G.ir
    input_map = dict(op.attrs["input_map"])
    p = len(stacked)
    Bp = ir.create_empty_graph(f"{B.id}_stacked")
    with get_current_context()._without_name_scope():
        with Bp:
            tmap = {}
            for t in B.inputs[:k]:
                tmap[t] = graph_input(t.shape, t.dtype, t.name, by_ref=t in B._by_ref_inputs, meta_shape=t.meta_shape)
            counter = graph_input((1,), COUNTER_DTYPE, "stack_counter")
            stacks = [graph_input((n,) + t.shape, t.dtype, f"stack_{_short(t)}") for t in stacked]
            for t in B.inputs[k:]:
                tmap[t] = graph_input(t.shape, t.dtype, t.name, by_ref=t in B._by_ref_inputs, meta_shape=t.meta_shape)
            clone_ops_into(B, tmap)
            outs = [tmap[o] for o in B.outputs]
            with placement(op):
                upd = [ops.dynamic_update_(s, counter, ops.reshape(tmap[t], (1,) + t.shape), [0], [1], True)
                       for s, t in zip(stacks, stacked)]
                nxt = ops.add(counter, const([1], COUNTER_DTYPE))
            for o in outs + [nxt] + upd:
                graph_output(o)
        with G:
            with placement(op):
                inits = [ops.init((n,) + t.shape, t.dtype, f"stack_{_short(t)}_init", "zero") for t in stacked]
            counter0 = constant(np.zeros((1,), np.int32), COUNTER_DTYPE, "stack_counter_init")
    move_ops_before(G, [t._producer_op() for t in inits], op)

    old_inputs = tuple(op.inputs)
    new_inputs: List[Tensor] = []
    new_map: Dict[int, int] = {}  # graph input -> position in new_inputs
    for gi in range(k):
        if gi not in input_map:
            raise ValueError(f"autodiff: the loop-carried input {gi} of repeat '{op.name}' is not connected.")
        new_map[gi] = len(new_inputs)
        new_inputs.append(old_inputs[input_map[gi]])
    new_map[k] = len(new_inputs)
    new_inputs.append(counter0)
    for j, t in enumerate(inits):
        new_map[k + 1 + j] = len(new_inputs)
        new_inputs.append(t)
    for gi in range(k, len(B.inputs)):
        if gi in input_map:
            new_map[gi + 1 + p] = len(new_inputs)
            new_inputs.append(old_inputs[input_map[gi]])
    for t in [counter0] + inits:
        t._add_consumer(op)
    by_ref = tuple(i for i, t in enumerate(Bp.inputs) if t in Bp._by_ref_inputs)
    op.inputs = tuple(new_inputs)
    op.attrs["graph"] = Bp
    op.attrs["input_map"] = new_map
    op.attrs["by_ref"] = by_ref
    op.attrs["num_carried"] = k + 1 + p
    op.called_graphs = (Bp,)
    op.modified = tuple(sorted(new_map[gi] for gi in by_ref if gi in new_map))
    add_op_output(op, (1,), COUNTER_DTYPE, "stack_counter_out")
    return [add_op_output(op, (n,) + t.shape, t.dtype, f"stack_{_short(t)}") for t in stacked]


@grad_rule("repeat")
def _repeat(ctx, op, grads):
    ECT = _types()
    B = op.attrs["graph"]
    n = int(op.attrs["repeat_count"])
    k = int(op.attrs["num_carried"])
    input_map = dict(op.attrs["input_map"])
    old_inputs = tuple(op.inputs)
    if n == 0:  # the outputs are the carried inputs
        res: Dict[int, Tensor] = {}
        for i in range(k):
            if i in input_map and grads[i] is not None and ctx.wants(input_map[i]):
                _add_to(res, input_map[i], grads[i])
        return res
    F = [i for i in range(k) if B.inputs[i].dtype.is_floating_point]
    inv_wanted = [gi for gi in range(k, len(B.inputs)) if gi in input_map and ctx.wants(input_map[gi])
                  and B.inputs[gi].dtype.is_floating_point]
    gp = [B.outputs[i] for i in F]
    gr = [B.inputs[i] for i in F] + [B.inputs[gi] for gi in inv_wanted]
    gb_graph, gb_in, _ = ctx.build_unstitched(B, gp, gr)

    b_in: Dict[Tensor, int] = {}  # the body's input -> its first index
    for i, t in enumerate(B.inputs):
        b_in.setdefault(t, i)
    stacked, invariant = [], []
    for conn in gb_in:
        if conn.connection_type is not ECT.Fwd:
            continue
        t = conn.fwd_tensor
        if t in b_in and b_in[t] >= k:
            if b_in[t] not in input_map:
                raise ValueError(f"autodiff: the gradient of repeat '{op.name}' needs the body input {t.id}, which "
                                 "is not connected.")
            invariant.append(t)
        else:
            stacked.append(t)
    stack_parents = _stack_forward(ctx, op, B, k, n, stacked) if stacked else []

    ir = B.ir
    RB = ir.create_empty_graph(f"{B.id}_grad_loop")
    with RB:
        dc = [graph_input(B.outputs[i].shape, B.outputs[i].dtype, GRAD_PREFIX + _short(B.outputs[i])) for i in F]
        rc = [graph_input((1,), COUNTER_DTYPE, "reverse_counter")] if stacked else []
        acc = [graph_input(B.inputs[gi].shape, B.inputs[gi].dtype, f"{GRAD_PREFIX}{_short(B.inputs[gi])}_acc")
               for gi in inv_wanted]
        st = [graph_input((n,) + t.shape, t.dtype, f"stack_{_short(t)}") for t in stacked]
        inv = {t: graph_input(t.shape, t.dtype, t.name) for t in invariant}
        args, n_grad = [], 0
        with placement(op):
            for conn in gb_in:
                if conn.connection_type is ECT.FwdGrad:
                    args.append(dc[n_grad])
                    n_grad += 1
                elif conn.fwd_tensor in inv:
                    args.append(inv[conn.fwd_tensor])
                else:
                    t = conn.fwd_tensor
                    j = stacked.index(t)
                    args.append(ops.reshape(ops.dynamic_slice(st[j], rc[0], [0], [1], True), t.shape))
            outs = ops.call(gb_graph, *args)
            new_dc = list(outs[:len(F)])
            new_acc = [ops.add(a, g) for a, g in zip(acc, outs[len(F):])]
            rc_next = [ops.sub(rc[0], const([1], COUNTER_DTYPE))] if stacked else []
        for o in new_dc + rc_next + new_acc:
            graph_output(o)

    dc0 = [grads[i] if i < len(grads) and grads[i] is not None else zeros(B.outputs[i].shape, B.outputs[i].dtype)
           for i in F]
    rc0 = [const([n - 1], COUNTER_DTYPE)] if stacked else []
    acc0 = [zeros(B.inputs[gi].shape, B.inputs[gi].dtype) for gi in inv_wanted]
    st_vals = [ctx.fwd(t) for t in stack_parents]
    inv_vals = [ctx.fwd(old_inputs[input_map[b_in[t]]]) for t in invariant]
    outs = ops.repeat(RB, n, *(dc0 + rc0 + acc0 + st_vals + inv_vals))
    res = {}
    for pos, i in enumerate(F):
        oi = input_map.get(i)
        if oi is not None and ctx.wants(oi):
            _add_to(res, oi, outs[pos])
    for j, gi in enumerate(inv_wanted):
        _add_to(res, input_map[gi], outs[len(F) + len(rc0) + j])
    return res


# -- conditional --------------------------------------------------------------------------------------
@grad_rule("conditional")
def _conditional(ctx, op, grads):
    ECT = _types()
    T, E = op.attrs["then_branch"], op.attrs["else_branch"]
    maps = (dict(op.attrs["then_input_map"]), dict(op.attrs["else_input_map"]))
    inputs = tuple(op.inputs)
    n_out = len(grads)
    F = [i for i in range(n_out) if op.outputs[i].dtype.is_floating_point]
    wanted = [p for p in range(1, len(inputs)) if ctx.wants(p)]

    branches = []
    for br, imap in zip((T, E), maps):
        gp = [br.outputs[i] for i in F]
        gr_idx = [gi for gi, p in sorted(imap.items()) if p in wanted and br.inputs[gi].dtype.is_floating_point]
        gg, gin, gout = ctx.build_unstitched(br, gp, [br.inputs[gi] for gi in gr_idx])
        b_in: Dict[Tensor, int] = {}  # the body's input -> its first index
        for i, t in enumerate(br.inputs):
            b_in.setdefault(t, i)
        acts, needed_ins = [], []
        for conn in gin:
            if conn.connection_type is not ECT.Fwd:
                continue
            t = conn.fwd_tensor
            if t in b_in:
                if b_in[t] not in imap:
                    raise ValueError(f"autodiff: the gradient of conditional '{op.name}' needs the branch input "
                                     f"{t.id}, which is not connected.")
                needed_ins.append(t)
            else:
                acts.append(t)
        branches.append(dict(graph=br, imap=imap, gg=gg, gin=gin, gout=gout, b_in=b_in, acts=acts,
                             needed_ins=needed_ins))

    acts_t, acts_e = branches[0]["acts"], branches[1]["acts"]
    if acts_t or acts_e:
        with get_current_context()._without_name_scope():
            Tp, tmap = clone_graph(T, f"{T.id}_fwd", extra_outputs=acts_t)
            with Tp:
                for t in acts_e:
                    graph_output(zeros(t.shape, t.dtype, f"{_short(t)}_unused"))
            Ep, emap = clone_graph(E, f"{E.id}_fwd")
            with Ep:
                for t in acts_t:
                    graph_output(zeros(t.shape, t.dtype, f"{_short(t)}_unused"))
                for t in acts_e:
                    graph_output(emap[t])
        op.attrs["then_branch"], op.attrs["else_branch"] = Tp, Ep
        op.called_graphs = (Tp, Ep)
        parents = [add_op_output(op, t.shape, t.dtype, _short(t)) for t in acts_t + acts_e]
        branches[0]["act_parent"] = dict(zip(acts_t, parents[:len(acts_t)]))
        branches[1]["act_parent"] = dict(zip(acts_e, parents[len(acts_t):]))
    else:
        branches[0]["act_parent"] = branches[1]["act_parent"] = {}

    out_grads = [grads[i] if grads[i] is not None else zeros(op.outputs[i].shape, op.outputs[i].dtype) for i in F]
    wrappers, parent_inputs = [], []
    for b in branches:
        br = b["graph"]
        W = br.ir.create_empty_graph(f"{br.id}_grad_branch")
        with W:
            g_in = [graph_input(op.outputs[i].shape, op.outputs[i].dtype, GRAD_PREFIX + _short(op.outputs[i]))
                    for i in F]
            a_in = {t: graph_input(t.shape, t.dtype, t.name) for t in b["acts"]}
            x_in = {t: graph_input(t.shape, t.dtype, t.name) for t in b["needed_ins"]}
            args, n_grad = [], 0
            for conn in b["gin"]:
                if conn.connection_type is ECT.FwdGrad:
                    args.append(g_in[n_grad])
                    n_grad += 1
                else:
                    t = conn.fwd_tensor
                    args.append(a_in[t] if t in a_in else x_in[t])
            with placement(op):
                outs = ops.call(b["gg"], *args)
                per_p: Dict[int, Tensor] = {}
                for j, conn in enumerate(b["gout"]):
                    _add_to(per_p, b["imap"][b["b_in"][conn.fwd_tensor]], outs[j])
                for p in wanted:
                    graph_output(per_p[p] if p in per_p else zeros(inputs[p].shape, inputs[p].dtype))
        wrappers.append(W)
        parent_inputs.append(out_grads + [ctx.fwd(b["act_parent"][t]) for t in b["acts"]]
                             + [ctx.fwd(inputs[b["imap"][b["b_in"][t]]]) for t in b["needed_ins"]])
    outs = ops.conditional(ctx.fwd(inputs[0]), wrappers[0], wrappers[1], then_inputs=parent_inputs[0],
                           else_inputs=parent_inputs[1])
    return {p: outs[j] for j, p in enumerate(wanted)}
