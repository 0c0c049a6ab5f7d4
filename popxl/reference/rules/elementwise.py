"""Element-wise ops: the codelets' NumPy references (UnaryOp / BinaryOp, Select, Clamp, Cast) are
their definitions; float16 is computed in float32 and rounded once, int32 wraps, integer division
truncates toward zero (x / 0 = 0)."""
import numpy as np

import ipu
from codelets.elementwise import binary_reference, unary_reference
from popxl import op_table

from ..registry import reference_rule
from ._util import wide


def _unary(ctx, op, ins):
    entry = op_table.unary_op_type(op.type)
    x = ins[0]
    if entry.inputs == "bool":
        x = x.astype(bool)
    if entry.codelet != "UnaryOp":  # the entry's own codelet: its NumPy reference
        return [np.asarray(ipu.get_codelet(entry.codelet).reference(x))]
    return [unary_reference(x, entry.codelet_op)]


op_table.on_register(op_table.UnaryOpType, lambda entry: reference_rule(entry.name)(_unary))


def _binary(ctx, op, ins):
    entry = op_table.binary_op_type(op.type)
    a, b = ins
    if entry.kind == "logical":
        a, b = a.astype(bool), b.astype(bool)
    return [binary_reference(a, b, entry.codelet_op)]


op_table.on_register(op_table.BinaryOpType, lambda entry: reference_rule(entry.name)(_binary))


@reference_rule("maximum")
def maximum(ctx, op, ins):
    acc = ins[0]
    for x in ins[1:]:
        acc = binary_reference(acc, x, "max")
    return [np.broadcast_to(acc, op.outputs[0].shape)]


@reference_rule("where")
def where(ctx, op, ins):
    cond, a, b = ins
    return [np.where(cond.astype(bool), a, b)]


@reference_rule("clip")
def clip(ctx, op, ins):
    x = ins[0]
    lo, hi = op.attrs.get("min", -np.inf), op.attrs.get("max", np.inf)
    w = wide(x)
    with np.errstate(invalid="ignore"):
        r = np.where(np.isnan(w), w, np.minimum(np.maximum(w, lo), hi)) if w.dtype.kind == "f" else \
            np.clip(w.astype(np.float64), lo, hi)
    return [r.astype(x.dtype)]


@reference_rule("scaled_add")
def scaled_add(ctx, op, ins):
    names = list(op.attrs.get("input_names", ("X", "Y")))
    X, Y = ins[0], ins[1]
    a = op.attrs["a"] if op.attrs.get("a") is not None else ins[names.index("a")].reshape(())
    b = op.attrs["b"] if op.attrs.get("b") is not None else ins[names.index("b")].reshape(())
    if X.dtype.kind in "iu":
        r = binary_reference(binary_reference(X, np.asarray(a, X.dtype), "mul"),
                             binary_reference(Y, np.asarray(b, X.dtype), "mul"), "add")
        return [r]
    ct = wide(X).dtype
    return [(wide(X) * ct.type(a) + wide(Y) * ct.type(b)).astype(X.dtype)]


@reference_rule("increment_mod")
def increment_mod(ctx, op, ins):
    x = ins[0]
    inc = np.asarray(op.attrs["increment"]).astype(x.dtype)
    mod = np.asarray(op.attrs["modulus"]).astype(x.dtype)
    return [binary_reference(binary_reference(x, inc, "add"), mod, "fmod")]
