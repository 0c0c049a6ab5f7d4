"""Element-wise ops: one vertex per contiguous piece of the output on each tile.

Inputs are brought into the output's layout first (a Copy, i.e. an exchange, when they live
elsewhere or are broadcast); then a single compute set runs the codelet over every piece.
In-place forms write into the modified input (through a temporary when it is a view).
"""
from __future__ import annotations

import numpy as np

import ipu
from codelets.elementwise import BINARY_OPS, UNARY_OPS

from ..registry import lowering_rule

# popxl op type -> codelet op name, where they differ
_UNARY_NAMES = {}
_BINARY_NAMES = {"maximum": "max", "minimum": "min"}


def map_elementwise(ctx, op, codelet: str, inputs, field_names, out_field="out", out_et=None,
                    fp=None, ip=None, out_index=0, inplace_input=None, suffix=""):
    """Run `codelet` over the pieces of op.outputs[out_index].

    inputs: ipu views (broadcastable to the output shape), connected to `field_names`.
    inplace_input: index into op.inputs whose storage receives the result (for `_` forms).
    """
    t_out = op.outputs[out_index]
    shape = tuple(t_out.shape)
    et = out_et or ctx.etype(t_out)
    target_view = None
    if inplace_input is not None:
        target_view = ctx.value(op.inputs[inplace_input])
        if target_view.is_identity:
            out = target_view.variable
            target_view = None
        else:
            out = ctx.new_var(shape, et, f"{t_out.id}/tmp")
    else:
        like = next((v for v in inputs if v.is_identity and v.shape == shape), None)
        out = ctx.new_var(shape, et, t_out.id, like=like)
    if out.numel:
        laid = [ctx.like(v, out) for v in inputs]
        c = ipu.get_codelet(codelet)
        tiles, starts, counts = ctx.pieces(out, split_for_workers=not c.supervisor)
        fields = {name: (var, starts, counts) for name, var in zip(field_names, laid)}
        fields[out_field] = (out, starts, counts)
        cs = ctx.compute_set(suffix or codelet)
        ctx.g.add_vertices(cs, codelet, tiles, fields, fp=fp, ip=ip)
        ctx.emit(ipu.Execute(cs, name=cs.name))
    if target_view is not None:
        ctx.copy(out, target_view, "write_back")
        ctx.bind(t_out, ctx.value(op.inputs[inplace_input]))
    else:
        ctx.bind(t_out, out if inplace_input is None else ctx.value(op.inputs[inplace_input]))
    return out


def _inplace(op):
    return 0 if 0 in getattr(op, "modified", ()) else None


@lowering_rule(*[t for t in ("abs", "ceil", "cos", "exp", "floor", "gelu", "geluerf", "log", "negate", "relu",
                             "sign", "sin", "sqrt", "swish", "tanh", "isnan", "isinf", "isfinite",
                             "logical_not", "sigmoid", "reciprocal")])
def unary(ctx, op):
    name = _UNARY_NAMES.get(op.type, op.type)
    map_elementwise(ctx, op, "UnaryOp", [ctx.value(op.inputs[0])], ["in"],
                    ip={"op": UNARY_OPS[name]}, inplace_input=_inplace(op), suffix=op.type)


@lowering_rule("add", "sub", "mul", "div", "fmod", "pow", "equal", "greater", "less", "logical_and",
               "logical_or", "maximum", "minimum", "not_equal")
def binary(ctx, op):
    name = _BINARY_NAMES.get(op.type, op.type)
    vals = [ctx.value(t) for t in op.inputs]
    code = BINARY_OPS[name]
    if len(vals) == 1:  # maximum(x)
        ctx.bind(op.outputs[0], _copy_out(ctx, op, vals[0]))
        return
    if len(vals) > 2:  # maximum(a, b, c, ...): a chain of binary vertices
        acc = vals[0]
        shape = tuple(op.outputs[0].shape)
        for k, v in enumerate(vals[1:]):
            tmp = ctx.new_var(shape, ctx.etype(op.outputs[0]), f"{op.outputs[0].id}/partial{k}")
            _binary_into(ctx, "BinaryOp", code, acc, v, tmp, f"{op.type}{k}")
            acc = tmp
        ctx.bind(op.outputs[0], acc)
        return
    map_elementwise(ctx, op, "BinaryOp", vals, ["a", "b"], ip={"op": code},
                    inplace_input=_inplace(op), suffix=op.type)


def _binary_into(ctx, codelet, code, a, b, out, suffix):
    """out = a (op) b for an already created output variable."""
    laid = [ctx.like(a, out), ctx.like(b, out)]
    tiles, starts, counts = ctx.pieces(out, split_for_workers=not ipu.get_codelet(codelet).supervisor)
    cs = ctx.compute_set(suffix)
    ctx.g.add_vertices(cs, codelet, tiles, {"a": (laid[0], starts, counts), "b": (laid[1], starts, counts),
                                            "out": (out, starts, counts)}, ip={"op": code})
    ctx.emit(ipu.Execute(cs, name=cs.name))


def _copy_out(ctx, op, view, index=0):
    t = op.outputs[index]
    out = ctx.new_var(t.shape, ctx.etype(t), t.id, like=view if view.is_identity else None)
    ctx.copy(view, out)
    return out


@lowering_rule("cast")
def cast(ctx, op):
    src = ctx.value(op.inputs[0])
    if src.dtype == ctx.etype(op.outputs[0]):
        ctx.bind(op.outputs[0], _copy_out(ctx, op, src))
        return
    map_elementwise(ctx, op, "Cast", [src], ["in"], suffix="cast")


@lowering_rule("clip")
def clip(ctx, op):
    lo, hi = op.attrs.get("min", -np.inf), op.attrs.get("max", np.inf)
    map_elementwise(ctx, op, "Clamp", [ctx.value(op.inputs[0])], ["in"], fp={"lo": lo, "hi": hi},
                    inplace_input=_inplace(op), suffix="clip")


@lowering_rule("where")
def where(ctx, op):
    vals = [ctx.value(t) for t in op.inputs]
    map_elementwise(ctx, op, "Select", vals, ["cond", "a", "b"], suffix="where")


@lowering_rule("scaled_add")
def scaled_add(ctx, op):
    names = list(op.attrs.get("input_names", ("X", "Y")))
    a, b = op.attrs.get("a"), op.attrs.get("b")
    X, Y = ctx.value(op.inputs[0]), ctx.value(op.inputs[1])
    if a is not None and b is not None:
        _scaled_add_float(ctx, op, X, Y, float(a), float(b))
        return
    # tensor scales: a * X + b * Y through multiply and add vertices
    out_t = op.outputs[0]
    shape = tuple(out_t.shape)
    et = ctx.etype(out_t)
    terms = []
    for key, val, src in (("a", a, X), ("b", b, Y)):
        if val is None:
            scale = ctx.value(op.inputs[names.index(key)])
        else:
            scale = ctx.g.add_constant(ctx.name(f"{key}_scale"), np.array([val], et.numpy), et)
            ctx.tiles.map(ctx.g, scale)
        term = ctx.new_var(shape, et, f"{out_t.id}/{key}_term")
        _binary_into(ctx, "BinaryOp", BINARY_OPS["mul"], src, scale.reshape(()) if scale.numel == 1 else scale,
                     term, f"scale_{key}")
        terms.append(term)
    if 0 in op.modified:
        dst = ctx.value(op.inputs[0])
        tmp = ctx.new_var(shape, et, f"{out_t.id}/sum")
        _binary_into(ctx, "BinaryOp", BINARY_OPS["add"], terms[0], terms[1], tmp, "sum")
        ctx.copy(tmp, dst, "write_back")
        ctx.bind(out_t, dst)
    else:
        out = ctx.new_var(shape, et, out_t.id)
        _binary_into(ctx, "BinaryOp", BINARY_OPS["add"], terms[0], terms[1], out, "sum")
        ctx.bind(out_t, out)


def _scaled_add_float(ctx, op, X, Y, a, b):
    """ScaledAdd vertices update their data field in place: seed it with X unless X itself is the
    (whole-variable) destination."""
    out_t = op.outputs[0]
    shape = tuple(out_t.shape)
    inplace = 0 in op.modified
    if inplace and X.is_identity:
        out = X.variable
    else:
        out = ctx.new_var(shape, ctx.etype(out_t), out_t.id, like=X if X.is_identity and X.shape == shape else None)
        ctx.copy(X.broadcast(shape) if X.shape != shape else X, out, "seed")
    if out.numel:
        deltas = ctx.like(Y, out)
        tiles, starts, counts = ctx.pieces(out)
        cs = ctx.compute_set("scaled_add")
        ctx.g.add_vertices(cs, "ScaledAdd", tiles, {"data": (out, starts, counts), "deltas": (deltas, starts, counts)},
                           fp={"a": a, "b": b})
        ctx.emit(ipu.Execute(cs, name=cs.name))
    if inplace and not X.is_identity:
        ctx.copy(out, X, "write_back")
        ctx.bind(out_t, X)
    else:
        ctx.bind(out_t, out)


@lowering_rule("increment_mod")
def increment_mod(ctx, op):
    t = ctx.value(op.inputs[0])
    et = t.dtype
    out_t = op.outputs[0]
    inc = ctx.g.add_constant(ctx.name("increment"), np.array(op.attrs["increment"], et.numpy), et)
    mod = ctx.g.add_constant(ctx.name("modulus"), np.array(op.attrs["modulus"], et.numpy), et)
    ctx.tiles.map(ctx.g, inc)
    ctx.tiles.map(ctx.g, mod)
    tmp = ctx.new_var(t.shape, et, f"{out_t.id}/sum", like=t if t.is_identity else None)
    _binary_into(ctx, "BinaryOp", BINARY_OPS["add"], t, inc, tmp, "increment")
    if 0 in op.modified:
        res = ctx.new_var(t.shape, et, f"{out_t.id}/mod", like=tmp)
        _binary_into(ctx, "BinaryOp", BINARY_OPS["fmod"], tmp, mod, res, "modulus")
        ctx.copy(res, t, "write_back")
        ctx.bind(out_t, t)
    else:
        res = ctx.new_var(t.shape, et, out_t.id, like=tmp)
        _binary_into(ctx, "BinaryOp", BINARY_OPS["fmod"], tmp, mod, res, "modulus")
        ctx.bind(out_t, res)
