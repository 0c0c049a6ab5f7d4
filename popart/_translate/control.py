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

from .context import Translation, _safe, device_numpy_type, onnx_op


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


def _static_shape(node, value_info: onnx.ValueInfoProto) -> tuple:
    """The shape the body declares for a scan output (its buffer is made before the body runs)."""
    dims = value_info.type.tensor_type.shape.dim if value_info.type.tensor_type.HasField("shape") else None
    if dims is None or any(not d.HasField("dim_value") for d in dims):
        raise node.error(f"scan output {value_info.name!r} has no static shape in the body's outputs; export the "
                         f"model with static shapes")
    return tuple(int(d.dim_value) for d in dims)


def _host_true(node, i: int) -> bool:
    return not node.has_input(i) or bool(np.asarray(node.const(i, "cond")).reshape(-1)[0])


@onnx_op("Loop", attrs=("body",))
def loop(node):
    """ONNX Loop (PopART's LoopOp) with a trip count known on the host and a condition that stays
    true (what PyTorch's scripted `for i in range(n)` exports): a popxl `repeat` of the body, the
    loop-carried values as the repeat's carried inputs and each scan output written into its slot
    of a (trip count, ...) tensor with dynamic_update. A condition the body computes on the device
    (a `while` loop) is refused: popxl's repeat runs a fixed number of times."""
    tr = node.tr
    body = node.attr("body")
    if not node.has_input(0):
        raise node.error("a Loop without a trip count M (a while loop) is not supported: the repeat needs its count")
    trips = int(np.asarray(node.const(0, "M")).reshape(-1)[0])
    if not _host_true(node, 1):
        return [node.value(i) for i in range(2, node.num_inputs)] + [None] * (node.num_outputs - node.num_inputs + 2)
    if trips < 1:
        raise node.error(f"a trip count of {trips} is not supported (the loop must run at least once)")
    n_carried = node.num_inputs - 2
    iter_name, cond_name = body.input[0].name, body.input[1].name
    carried_names = [i.name for i in body.input[2:]]
    cond_out = body.output[0].name
    carried_outs = [o.name for o in body.output[1:1 + n_carried]]
    scan_outs = [o.name for o in body.output[1 + n_carried:]]
    init = [tr.tensor(node.proto.input[2 + k]) for k in range(n_carried)]
    outer = [t for t in _outer_names(body) if t not in tr.consts]
    args = [tr.tensor(t) for t in outer]

    def build(buffers):
        """Translate the body into the current graph: its inputs (t, carried, buffers, outer)."""
        sub = Translation(tr.opset, training=tr.training)
        sub.consts.update(tr.consts)
        sub.initial_values, sub.read_at_compile_time = tr.initial_values, tr.read_at_compile_time
        t = popxl.graph_input((1,), popxl.int32, name="loop_iteration")
        sub.values[iter_name] = ops.reshape(t, ())
        sub.consts[cond_name] = np.array(True)
        for name, v in zip(carried_names, init):
            sub.values[name] = popxl.graph_input(v.shape, v.dtype, name=_safe(name))
        bufs = [popxl.graph_input(s, d, name=_safe(f"{n}_scan")) for n, (s, d) in zip(scan_outs, buffers)]
        for name, a in zip(outer, args):
            sub.values[name] = popxl.graph_input(a.shape, a.dtype, name=_safe(name))
        _translate_branch(sub, body)
        if not (cond_out == cond_name or cond_out in sub.consts and bool(np.asarray(sub.consts[cond_out]).all())):
            raise node.error("the body computes its condition on the device (a while loop): not supported, the "
                             "repeat runs a fixed number of times")
        return sub, t, bufs

    scan_specs = [((trips,) + _static_shape(node, o), popxl.dtype.as_dtype(device_numpy_type(
        o.type.tensor_type.elem_type))) for o in body.output[1 + n_carried:]]
    graph = popxl.gcg().ir.create_empty_graph(_safe(f"{node.name}_body"))
    with graph:
        sub, t, bufs = build(scan_specs)
        popxl.graph_output(ops.add(t, popxl.constant(np.array([1], np.int32))))
        for name, v in zip(carried_outs, init):
            out = sub.tensor(name)
            if out.shape != v.shape or out.dtype != v.dtype:
                raise node.error(f"loop-carried {name!r} changes from {v.dtype.name} {v.shape} to {out.dtype.name} "
                                 f"{out.shape}: the repeat needs it fixed")
            popxl.graph_output(out)
        for name, buf in zip(scan_outs, bufs):
            step = ops.reshape(sub.tensor(name), (1,) + tuple(buf.shape[1:]))
            popxl.graph_output(ops.dynamic_update(buf, t, step, [0], [1], True))
    t0 = popxl.constant(np.zeros(1, np.int32), name="loop_t0")
    buf0 = [popxl.constant(np.zeros(s, d.as_numpy()), name="loop_scan0") for s, d in scan_specs]
    outs = ops.repeat(graph, trips, t0, *init, *buf0, *args)
    return list(outs[1:])


@onnx_op("Scan", attrs=("body", "num_scan_inputs", "scan_input_axes", "scan_input_directions", "scan_output_axes",
                        "scan_output_directions"))
def scan(node):
    """ONNX Scan 9 / 11 (PopART's ScanOp): a popxl `repeat` over the scan inputs' axis, the state
    variables carried, each iteration reading its slice of every scan input with dynamic_slice and
    writing its scan outputs' slots with dynamic_update (either direction, any axis)."""
    tr = node.tr
    if node.version < 9:
        raise node.error("Scan 8 (a batch axis and sequence_lens) is not supported; export with opset 9 or later")
    body = node.attr("body")
    m = int(node.attr("num_scan_inputs"))
    n_state = node.num_inputs - m
    k = len(body.output) - n_state
    states = [node.input(i) for i in range(n_state)]
    xs = [node.input(n_state + j) for j in range(m)]

    def ints(name, n, default):
        v = node.attr(name) if node.has_attr(name) else None
        v = [int(a) for a in v] if v else [default] * n
        if len(v) != n:
            raise node.error(f"{name} has {len(v)} entries, not {n}")
        return v
    in_axes = [a % x.rank for a, x in zip(ints("scan_input_axes", m, 0), xs)]
    in_rev = ints("scan_input_directions", m, 0)
    out_elems = [(_static_shape(node, o), popxl.dtype.as_dtype(device_numpy_type(o.type.tensor_type.elem_type)))
                 for o in body.output[n_state:]]
    out_axes = [a % (len(s) + 1) for a, (s, _) in zip(ints("scan_output_axes", k, 0), out_elems)]
    out_rev = ints("scan_output_directions", k, 0)
    lengths = {x.shape[a] for x, a in zip(xs, in_axes)}
    if len(lengths) != 1 or 0 in lengths:
        raise node.error(f"the scan inputs must have one non-zero length along their scan axes, not {sorted(lengths)}")
    steps = lengths.pop()
    buf_specs = [(s[:a] + (steps,) + s[a:], d) for (s, d), a in zip(out_elems, out_axes)]
    outer = [t for t in _outer_names(body) if t not in tr.consts]
    args = [tr.tensor(t) for t in outer]
    graph = popxl.gcg().ir.create_empty_graph(_safe(f"{node.name}_body"))
    with graph:
        sub = Translation(tr.opset, training=tr.training)
        sub.consts.update(tr.consts)
        sub.initial_values, sub.read_at_compile_time = tr.initial_values, tr.read_at_compile_time
        t = popxl.graph_input((1,), popxl.int32, name="scan_iteration")
        back = ops.sub(popxl.constant(np.array([steps - 1], np.int32)), t)
        for i, v in zip(body.input[:n_state], states):
            sub.values[i.name] = popxl.graph_input(v.shape, v.dtype, name=_safe(i.name))
        bufs = [popxl.graph_input(s, d, name=_safe(f"{o.name}_scan")) for o, (s, d) in
                zip(body.output[n_state:], buf_specs)]
        full = [popxl.graph_input(x.shape, x.dtype, name=f"scan_input_{j}") for j, x in enumerate(xs)]
        for name, a in zip(outer, args):
            sub.values[name] = popxl.graph_input(a.shape, a.dtype, name=_safe(name))
        for i, x, axis, rev in zip(body.input[n_state:], full, in_axes, in_rev):
            piece = ops.dynamic_slice(x, back if rev else t, [axis], [1], True)
            sub.values[i.name] = ops.squeeze(piece, [axis])
        _translate_branch(sub, body)
        popxl.graph_output(ops.add(t, popxl.constant(np.array([1], np.int32))))
        for o, v in zip(body.output[:n_state], states):
            out = sub.tensor(o.name)
            if out.shape != v.shape or out.dtype != v.dtype:
                raise node.error(f"state {o.name!r} changes from {v.dtype.name} {v.shape} to {out.dtype.name} "
                                 f"{out.shape}: the repeat needs it fixed")
            popxl.graph_output(out)
        for o, buf, axis, rev in zip(body.output[n_state:], bufs, out_axes, out_rev):
            shape = list(buf.shape)
            shape[axis] = 1
            step = ops.reshape(sub.tensor(o.name), tuple(shape))
            popxl.graph_output(ops.dynamic_update(buf, back if rev else t, step, [axis], [1], True))
    t0 = popxl.constant(np.zeros(1, np.int32), name="scan_t0")
    buf0 = [popxl.constant(np.zeros(s, d.as_numpy()), name="scan_out0") for s, d in buf_specs]
    outs = ops.repeat(graph, steps, t0, *states, *buf0, *xs, *args)
    return list(outs[1:])
