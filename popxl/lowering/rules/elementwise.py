"""Element-wise ops: one vertex per contiguous piece of the output on each tile (blocks.elementwise).

In-place forms write into the modified input: directly when it is a whole variable, else through
a temporary that is copied back into the view.
"""
from __future__ import annotations

import numpy as np

import ipu

from codelets.elementwise import BINARY_OPS, UNARY_OPS
from popxl import op_table

from .. import blocks as B
from ..layouts import in_order, storage_order
from ..registry import lowering_rule


def map_elementwise(ctx, op, codelet: str, inputs, field_names, fp=None, ip=None, suffix=""):
    """Run `codelet` element-wise into op.outputs[0]; for in-place ops into op.inputs[0]."""
    t_out = op.outputs[0]
    shape = tuple(t_out.shape)
    et = ctx.etype(t_out)
    if 0 not in op.modified:
        ctx.bind(t_out, B.elementwise(ctx, codelet, inputs, field_names, shape, et, fp=fp, ip=ip, suffix=suffix))
        return
    target = ctx.value(op.inputs[0])
    order = storage_order(target)
    if target.is_identity:
        B.elementwise(ctx, codelet, inputs, field_names, shape, et, fp=fp, ip=ip, out=target.variable, suffix=suffix)
    elif order is not None:
        # a variable stored in its consumer's order (lowering/creators.py): the map runs over its
        # storage, every input read in that order (an update of a weight moves only the update)
        ins = [v if v.numel == 1 else in_order(v if tuple(v.shape) == shape else v.broadcast(shape), order)
               for v in inputs]
        B.elementwise(ctx, codelet, ins, field_names, (target.numel,), et, fp=fp, ip=ip, out=target.variable,
                      suffix=suffix)
    else:
        tmp = B.elementwise(ctx, codelet, inputs, field_names, shape, et, fp=fp, ip=ip, suffix=suffix)
        ctx.copy(tmp, target, "write_back")
    ctx.bind(t_out, target)


def unary(ctx, op):
    """Every UnaryOpType of the op table: a vertex of the entry's codelet per piece (UnaryOp with
    the entry's codelet op, or the entry's own in -> out codelet)."""
    entry = op_table.unary_op_type(op.type)
    ip = {"op": UNARY_OPS[entry.codelet_op]} if entry.codelet == "UnaryOp" else None
    map_elementwise(ctx, op, entry.codelet, [ctx.value(op.inputs[0])], ["in"], ip=ip, suffix=op.type)


op_table.on_register(op_table.UnaryOpType, lambda entry: lowering_rule(entry.name)(unary))


def _binary_code(op_type: str) -> int:
    entry = op_table.op_type(op_type)
    return BINARY_OPS[entry.codelet_op if isinstance(entry, op_table.BinaryOpType) else "max"]


@lowering_rule("maximum")
def binary(ctx, op):
    """Every BinaryOpType of the op table (one BinaryOp vertex per piece), and maximum of any
    number of tensors (a chain of them)."""
    code = _binary_code(op.type)
    vals = [ctx.value(t) for t in op.inputs]
    if len(vals) == 1:  # maximum(x)
        map_elementwise(ctx, op, "Copy", vals, ["in"], suffix=op.type)
        return
    acc = vals[0]
    for k, v in enumerate(vals[1:-1]):  # maximum(a, b, c, ...): a chain of binary vertices
        acc = B.elementwise(ctx, "BinaryOp", [acc, v], ["a", "b"], tuple(op.outputs[0].shape),
                            ctx.etype(op.outputs[0]), ip={"op": code}, suffix=f"{op.type}{k}")
    map_elementwise(ctx, op, "BinaryOp", [acc, vals[-1]], ["a", "b"], ip={"op": code}, suffix=op.type)


op_table.on_register(op_table.BinaryOpType, lambda entry: lowering_rule(entry.name)(binary))


@lowering_rule("cast")
def cast(ctx, op):
    src = ctx.value(op.inputs[0])
    codelet = "Copy" if src.dtype == ctx.etype(op.outputs[0]) else "Cast"
    map_elementwise(ctx, op, codelet, [src], ["in"], suffix="cast")


@lowering_rule("clip")
def clip(ctx, op):
    lo, hi = op.attrs.get("min", -np.inf), op.attrs.get("max", np.inf)
    map_elementwise(ctx, op, "Clamp", [ctx.value(op.inputs[0])], ["in"], fp={"lo": lo, "hi": hi}, suffix="clip")


@lowering_rule("where")
def where(ctx, op):
    map_elementwise(ctx, op, "Select", [ctx.value(t) for t in op.inputs], ["cond", "a", "b"], suffix="where")


@lowering_rule("scaled_add")
def scaled_add(ctx, op):
    names = list(op.attrs.get("input_names", ("X", "Y")))
    a, b = op.attrs.get("a"), op.attrs.get("b")
    X, Y = ctx.value(op.inputs[0]), ctx.value(op.inputs[1])
    if a is not None and b is not None:
        _scaled_add_float(ctx, op, X, Y, float(a), float(b))
        return
    # tensor scales: a * X + b * Y through multiply and add vertices, in float32 when X, Y or a
    # scale is float32 (poplibs' mixed scaledAddTo computes in float), rounded once to X's type
    et = ctx.etype(op.outputs[0])
    shape = tuple(op.outputs[0].shape)
    scales = {key: (ctx.value(op.inputs[names.index(key)]) if val is None else None)
              for key, val in (("a", a), ("b", b))}
    kinds = {X.dtype, Y.dtype} | {v.dtype for v in scales.values() if v is not None}
    wide = ipu.FLOAT32 if et.is_float and ipu.FLOAT32 in kinds else et

    def as_wide(v, suffix):
        return v if v.dtype == wide else B.elementwise(ctx, "Cast", [v], ["in"], v.shape, wide, suffix=suffix)

    terms = []
    for key, val, src in (("a", a, X), ("b", b, Y)):
        given = scales[key]  # a tensor scale, or None for a float one
        scale = given if given is not None else B.scalar_constant(ctx, val, wide, key)
        scale = as_wide(scale.reshape(()), f"scale_{key}_wide")
        terms.append(B.binary(ctx, "mul", as_wide(src, f"{key}_wide"), scale, shape=shape, suffix=f"scale_{key}"))
    if wide == et:
        map_elementwise(ctx, op, "BinaryOp", terms, ["a", "b"], ip={"op": BINARY_OPS["add"]}, suffix="sum")
        return
    total = B.binary(ctx, "add", terms[0], terms[1], shape=shape, suffix="sum")
    map_elementwise(ctx, op, "Cast", [total], ["in"], suffix="narrow")


def _scaled_add_float(ctx, op, X, Y, a, b):
    """ScaledAdd vertices update their data field in place: seed it with X unless X itself is the
    (whole-variable) destination."""
    out_t = op.outputs[0]
    shape = tuple(out_t.shape)
    inplace = 0 in op.modified
    order = storage_order(X) if inplace else None
    if inplace and X.is_identity:
        out = X.variable
    elif order is not None:  # a weight stored in its consumer's order: updated over its storage
        B.elementwise(ctx, "ScaledAdd", [in_order(Y if Y.shape == shape else Y.broadcast(shape), order)],
                      ["deltas"], (X.numel,), X.dtype, fp={"a": a, "b": b}, out=X.variable, out_field="data",
                      suffix="scaled_add")
        ctx.bind(out_t, X)
        return
    else:
        out = ctx.new_var(shape, ctx.etype(out_t), out_t.id, like=X if X.is_identity and X.shape == shape else None)
        ctx.copy(X.broadcast(shape) if X.shape != shape else X, out, "seed")
    B.elementwise(ctx, "ScaledAdd", [Y], ["deltas"], shape, out.dtype, fp={"a": a, "b": b}, out=out,
                  out_field="data", suffix="scaled_add")
    if inplace and not X.is_identity:
        ctx.copy(out, X, "write_back")
        ctx.bind(out_t, X)
    else:
        ctx.bind(out_t, out)


@lowering_rule("increment_mod")
def increment_mod(ctx, op):
    t = ctx.value(op.inputs[0])
    inc = B.scalar_constant(ctx, op.attrs["increment"], t.dtype, "increment")
    mod = B.scalar_constant(ctx, op.attrs["modulus"], t.dtype, "modulus")
    total = B.binary(ctx, "add", t, inc, shape=t.shape, suffix="increment")
    map_elementwise(ctx, op, "BinaryOp", [total, mod], ["a", "b"], ip={"op": BINARY_OPS["fmod"]}, suffix="modulus")
