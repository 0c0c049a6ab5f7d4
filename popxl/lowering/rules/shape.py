"""Layout ops. The in-place (`_`) forms are views of their input: nothing moves. The others copy
into a new tensor; when the result keeps the source's element order (reshape, slice, ...), the new
tensor is mapped element by element where its source lives, so the copy never leaves a tile."""
from __future__ import annotations

import numpy as np

import ipu

from ..registry import lowering_rule


def _is_view(op) -> bool:
    return 0 in op.aliases.values() if op.aliases else False


def materialise(ctx, t_out, view: ipu.Tensor, suffix="copy") -> ipu.Variable:
    """A new variable for popxl tensor t_out holding `view`'s data."""
    out = ctx.g.add_variable(t_out.id, t_out.shape, view.dtype, ipu.TEMPORARY, debug=ctx.name())
    if out.numel:
        flat = view.flat_index()
        if flat.size < 2 or np.all(np.diff(flat) > 0):
            out.tile_of[:] = view.variable.tile_of[flat]  # order kept: copy stays on each tile
        else:
            ctx.tiles.map(ctx.g, out)
        ctx.copy(view, out, suffix)
    ctx.bind(t_out, out)
    return out


def _view_or_copy(ctx, op, view):
    if _is_view(op):
        ctx.bind(op.outputs[0], view)
    else:
        materialise(ctx, op.outputs[0], view)


@lowering_rule("reshape")
def reshape(ctx, op):
    view = ctx.value(op.inputs[0]).reshape(tuple(op.outputs[0].shape))
    src = op.inputs[0].producer
    if (not _is_view(op) and src is not None and src.type == "transpose" and not _is_view(src)
            and _read_only_by_gathering_ops(src)):
        # a transpose kept as a view, reshaped on its way to the ops that gather it (a
        # convolution's weights, transposed and regrouped for its input gradient)
        ctx.bind(op.outputs[0], view)
        return
    _view_or_copy(ctx, op, view)


def _root(t):
    """The tensor whose storage `t` is a view of (following view ops up to their source)."""
    while t.producer is not None and t.producer.aliases:
        p = t.producer
        t = p.inputs[next(iter(p.aliases.values()))]
    return t


# Ops that copy an operand into a layout of their own anyway (a matmul into its blocks, a
# variable update into the variable's storage order), so they may read it as a transposing view.
_GATHERING_READERS = {"matmul", "accumulate", "copy_var_update"}
# Ops that gather their weights (input 1) into blocks of their own: a convolution's weights move
# into its plan's blocks by one Copy from whatever view they are (rules/conv.py)
_GATHERING_WEIGHTS = {"conv", "conv_pow2scaled"}


def _call_sites(graph) -> list:
    """The call ops (of any graph of the Ir) that call `graph`."""
    return [o for g in graph.ir.graphs for o in g.ops if o.type == "call"
            and (o.attrs["graph"] if "graph" in o.attrs else (o.called_graphs or [None])[0]) is graph]


def _called(op):
    """The graph a call op calls."""
    return op.attrs["graph"] if "graph" in op.attrs else (op.called_graphs or [None])[0]


def _gathering_readers(t, depth: int = 0, spans: list | None = None) -> list | None:
    """The ids of the ops that read `t` when all of them gather their operand from a view
    (_GATHERING_READERS, reading `t` as an input they do not change), directly, through transposes
    (autodiff's dA = dY @ (W^T)^T reads a forward transpose through another) and reshapes (a
    convolution's input gradient reads its weights transposed and regrouped), for a graph output
    through the outputs of the calls of its graph (a backward graph's dW^T read by the optimizer's
    update in the caller), and for a call's argument through the called graph's input (a forward
    graph's W^T, kept for the backward graph, read there by dX = dY @ (W^T)^T); None otherwise.
    `spans` collects (caller graph, call site, consuming call) for every output followed into a
    call: the caller must not change the storage in between."""
    ids = []
    if depth > 8:
        return None
    for c in t.consumers:
        if c.type in _GATHERING_READERS and not any(c.inputs[i] is t for i in c.modified):
            ids.append(c.id)
        elif (c.type in _GATHERING_WEIGHTS and not c.modified
              and all(i == 1 for i, x in enumerate(c.inputs) if x is t)):
            ids.append(c.id)
        elif c.type in ("transpose", "reshape") and not _is_view(c):
            sub = _gathering_readers(c.outputs[0], depth + 1, spans)
            if sub is None:
                return None
            ids += sub
        elif c.type == "call" and _called(c) is not None and not any(c.inputs[i] is t for i in c.modified):
            graph = _called(c)
            for i, x in enumerate(c.inputs):
                if x is t:
                    if i >= len(graph.inputs):
                        return None
                    sub = _gathering_readers(graph.inputs[i], depth + 1, spans)
                    if sub is None:
                        return None
                    ids += sub
        else:
            return None
    outs = t.graph.outputs
    if any(o is t for o in outs):
        if t.graph.is_main_graph:
            return None
        j = next(k for k, o in enumerate(outs) if o is t)
        sites = _call_sites(t.graph)
        if not sites or any(len(c.outputs) != len(outs) for c in sites):
            return None
        for c in sites:
            sub = _gathering_readers(c.outputs[j], depth + 1, spans)
            if sub is None:
                return None
            if spans is not None:
                spans += [(c, d) for d in c.outputs[j].consumers if d.type == "call"]
            ids += sub
    return ids


def _changed_between(root, graph, first: int, last: int, context=None) -> bool:
    """Whether an op of `graph` changes `root`'s storage in place after op `first` up to op
    `last`, or in another execution context than `context` (when given)."""
    for other in graph.ops:
        if any(_root(other.inputs[i]) is root for i in other.modified):
            if first < other.id <= last or (context is not None and other.execution_context != context):
                return True
    return False


def _read_only_by_gathering_ops(op) -> bool:
    """True when a transpose's result may stay a view of its input: only matmuls and variable
    updates read it (as _gathering_readers finds them) and no op of the graph changes the input's
    storage in place between the transpose and the last of those readers (ops are lowered in id
    order; a weight updated after the backward pass, as SGD does, is read by every matmul before
    it changes), nor, where the view leaves its graph for another call, an op of the caller
    between the two calls. A matmul then gathers its blocks from the view as contiguous source rows and
    transposes them on the tiles (codelets/plans/matmul.py), or finds the weight already laid out
    as its blocks (lowering/creators.py); an update reads its operand in the variable's storage
    order (lowering/layouts.py). Either way the tensor moves once, not first element by
    element into a copy here (Poplar's dimShuffle is a view)."""
    spans: list = []
    readers = _gathering_readers(op.outputs[0], spans=spans)
    if not readers:
        return False
    root = _root(op.inputs[0])
    if _changed_between(root, op.graph, op.id, max(readers), op.execution_context):
        return False
    for site, consumer in spans:
        # the caller's storage behind the view: the site's argument for the graph input the view
        # reads (a view of a tensor the called graph makes itself is the graph's own)
        graph = op.graph
        if _called(site) is not graph or site.graph is not consumer.graph:
            return False  # deeper than one call: not followed
        if not any(x is root for x in graph.inputs):
            continue
        k = next(i for i, x in enumerate(graph.inputs) if x is root)
        if k >= len(site.inputs):
            return False
        caller_root = _root(site.inputs[k])
        if _changed_between(caller_root, site.graph, site.id, consumer.id - 1, site.execution_context):
            return False
        # the consuming call may change that storage itself (a weight's update in the backward
        # graph, PopART's VarUpdate placed next to its gradient), but only after its last reader
        callee = _called(consumer)
        inside = {o.id for o in callee.ops}
        last = max([r for r in readers if r in inside] or readers)
        for j, x in enumerate(consumer.inputs):
            if _root(x) is not caller_root:
                continue
            if j >= len(callee.inputs) or _changed_between(callee.inputs[j], callee, -1, last):
                return False
    return True


@lowering_rule("transpose")
def transpose(ctx, op):
    view = ctx.value(op.inputs[0]).transpose(tuple(op.attrs["permutation"]))
    if not _is_view(op) and _read_only_by_gathering_ops(op):
        ctx.bind(op.outputs[0], view)
        return
    _view_or_copy(ctx, op, view)


@lowering_rule("slice")
def slice_(ctx, op):
    _view_or_copy(ctx, op, ctx.value(op.inputs[0])[tuple(op.attrs["index"])])


@lowering_rule("subsample")
def subsample(ctx, op):
    key = tuple(slice(None, None, s) for s in op.attrs["strides"])
    _view_or_copy(ctx, op, ctx.value(op.inputs[0])[key])


@lowering_rule("identity", "detach")
def identity(ctx, op):
    _view_or_copy(ctx, op, ctx.value(op.inputs[0]))


@lowering_rule("concat")
def concat(ctx, op):
    """PopART's ConcatOpx: the output is a clone of the concatenation of its inputs
    (`cloneNcopy(prog, poplar::concat(...))`): each element lives where the input element it copies
    lives, so the copies never leave a tile (no exchange, no exchange code). An input that holds
    one value known at lowering (an `init` zero fill, a constant of one value: the zeros autodiff
    interleaves into a strided convolution's input gradient) is not copied: its elements take the
    tile of the element before them and Fill vertices write its value there. Inputs read through a
    reordering view (a transpose), or fills only, leave the output to the mapping policy."""
    from .. import blocks as B

    axis = op.attrs["axis"]
    views = [ctx.value(t) for t in op.inputs]
    t_out = op.outputs[0]
    et = ctx.etype(t_out)
    fills = [_fill_value(t, et) for t in op.inputs]
    out = ctx.g.add_variable(t_out.id, t_out.shape, et, ipu.TEMPORARY, debug=ctx.name())
    if out.numel:
        cloned = _concat_tiles(out, views, fills, axis)
        if cloned is None:
            ctx.tiles.map(ctx.g, out)
        else:
            out.tile_of[:] = cloned
        values = {f for f in fills if f is not None}
        for value in sorted(values):
            if len(values) == 1:  # one fill value: write all of out, the copies then overwrite the data
                B.elementwise(ctx, "Fill", [], [], out.shape, et, fp={"value": value}, out=out, suffix="concat_fill")
            else:
                k = 0
                for v, f in zip(views, fills):
                    n = v.shape[axis]
                    if n and f == value:
                        part = ctx.g.add_variable(ctx.name("fill"), v.shape, et, ipu.TEMPORARY, debug=ctx.name())
                        part.tile_of[:] = out.tile_of[out.slice(k, k + n, axis).flat_index()]
                        B.elementwise(ctx, "Fill", [], [], v.shape, et, fp={"value": value}, out=part,
                                      suffix="concat_fill")
                        ctx.copy(part, out.slice(k, k + n, axis), "concat")
                    k += n
    k = 0
    for v, f in zip(views, fills):
        n = v.shape[axis]
        if n and out.numel and f is None:
            ctx.copy(v, out.slice(k, k + n, axis), "concat")
        k += n
    ctx.bind(t_out, out)


def _fill_value(t, et) -> float | None:
    """The one value a float input holds everywhere when the lowering knows it (an `init` zero, a
    constant whose elements are all equal), else None."""
    from popxl.tensor import Constant

    if et not in (ipu.FLOAT32, ipu.FLOAT16) or not t.nelms:
        return None
    if isinstance(t, Constant):
        d = np.ascontiguousarray(np.asarray(t._data).astype(et.numpy)).reshape(-1)
        bits = d.view(np.uint16 if d.itemsize == 2 else np.uint32)
        return float(d[0]) if bool((bits == bits[0]).all()) else None  # every element the same bits
    p = t.producer
    if p is not None and p.type == "init" and p.attrs.get("init_type", "zero") == "zero":
        return 0.0
    return None


def _concat_tiles(out, views, fills, axis) -> np.ndarray | None:
    """The tile of every element of a concat's output cloned from its inputs (fill inputs: the
    tile of the element before, or after for leading ones), or None when an input is read through
    a reordering view or every input is a fill."""
    tiles = np.full(out.numel, -1, np.int64)
    k = 0
    for v, f in zip(views, fills):
        n = v.shape[axis]
        if n and f is None:
            flat = v.flat_index()
            if flat.size > 1 and not np.all(np.diff(flat) > 0):
                return None
            tiles[out.slice(k, k + n, axis).flat_index()] = v.variable.tile_of[flat]
        k += n
    have = tiles >= 0
    if not have.any():
        return None
    last = np.maximum.accumulate(np.where(have, np.arange(tiles.size), -1))
    first = int(np.argmax(have))
    return tiles[np.where(last >= 0, last, first)]


@lowering_rule("split")
def split(ctx, op):
    axis = op.attrs["axis"]
    src = ctx.value(op.inputs[0])
    k = 0
    for t_out, n in zip(op.outputs, op.attrs["splits"]):
        materialise(ctx, t_out, src.slice(k, k + n, axis), "split")
        k += n
