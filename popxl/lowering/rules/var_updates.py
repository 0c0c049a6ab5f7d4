"""Variable updates (popxl.ops.var_updates) with the formulas of PopART's optimizers (seed 002):
accumulators, Adam / LAMB / AdaMax updater terms and the Adam / LAMB weight update. Each updates its
first input in place; they are chains of element-wise vertices (and reductions for norms)."""
from __future__ import annotations

import ipu
from codelets.elementwise import BINARY_OPS

from .. import blocks as B
from ..layouts import in_order, storage_order
from ..registry import lowering_rule


def _inputs(op) -> dict:
    return dict(zip(op.attrs["input_names"], op.inputs))


def _hyper(ctx, op, name, et, default=None):
    """A hyper-parameter as an ipu tensor: the op's tensor input, else a constant of attrs[name]."""
    ins = _inputs(op)
    if name in ins:
        value = ctx.value(ins[name]).reshape(())
        if value.dtype != et:  # e.g. popxl-addons' float32 mean counter of a float16 accumulator: PopART takes it
            value = B.elementwise(ctx, "Cast", [value], ["in"], value.shape, et, suffix=f"{name}_cast")
        return value
    value = op.attrs.get(name)
    if value is None:
        value = default
    if value is None:
        return None
    return B.scalar_constant(ctx, value, et, name)


def _write(ctx, op, result, dst_name="t"):
    """Copy the result into the updated tensor and bind the op's output to it."""
    dst = ctx.value(_inputs(op)[dst_name])
    ctx.copy(result, dst, "update")
    ctx.bind(op.outputs[0], dst)


def _in_place(ctx, op, *others):
    """The updated tensor t and `others` (tensors shaped like t) as the operands of an update that
    writes t's variable in place, and that variable (None when t is part of a variable, written
    back by a copy). PopART's VarUpdateOps modify their input in place (popops::scaledAddTo on the
    variable's own tiles): over t's storage order when t is a permuting view of a variable its
    consumer laid out (lowering/creators.py), so only the other operands move."""
    target = ctx.value(_inputs(op)["t"])
    order = storage_order(target)
    if not target.is_identity and order is None:
        return (target, *others), None
    whole = target.variable
    flat = whole.flatten()
    if order is None:
        return (flat, *(v.broadcast(target.shape).flatten() for v in others)), whole
    return (flat, *(in_order(v.broadcast(target.shape), order).flatten() for v in others)), whole


def _last(ctx, name, a, b, into, suffix):
    """The update's last step, a BinaryOp written straight into `into` when there is one."""
    if into is None or a.dtype != into.dtype:
        return B.binary(ctx, name, a, b, shape=a.shape, suffix=suffix)
    return B.elementwise(ctx, "BinaryOp", [a, b], ["a", "b"], a.shape, into.dtype, ip={"op": BINARY_OPS[name]},
                         out=into, suffix=suffix)


def _finish(ctx, op, res, into):
    """Bind the op's output to t, after the result is in t (cast or copied into it if need be)."""
    target = ctx.value(_inputs(op)["t"])
    if into is None:
        if res.dtype != target.dtype:
            res = B.elementwise(ctx, "Cast", [res], ["in"], res.shape, target.dtype, suffix="accumulate_cast")
        _write(ctx, op, res)
        return
    if res is not into:
        B.elementwise(ctx, "Cast", [res], ["in"], res.shape, into.dtype, out=into, suffix="accumulate_cast")
    ctx.bind(op.outputs[0], target)


@lowering_rule("accumulate")
def accumulate(ctx, op):
    (t, x), into = _in_place(ctx, op, ctx.value(_inputs(op)["X"]))
    if x.dtype != t.dtype:  # e.g. float16 moments of a float32 gradient: computed in the wider type, rounded once
        wide = ipu.FLOAT32 if ipu.FLOAT32 in (x.dtype, t.dtype) else t.dtype
        t = t if t.dtype == wide else B.elementwise(ctx, "Cast", [t], ["in"], t.shape, wide, suffix="t_wide")
        x = x if x.dtype == wide else B.elementwise(ctx, "Cast", [x], ["in"], x.shape, wide, suffix="x_wide")
    kind = op.attrs["accumulation_type"]
    et = t.dtype
    f = _hyper(ctx, op, "f", et, op.attrs.get("factor"))
    one = B.scalar_constant(ctx, 1.0, et, "one")
    if kind in ("dampened_add_square", "moving_average_square"):
        x = B.binary(ctx, "mul", x, x, suffix="square")
    if kind == "add":
        res = _last(ctx, "add", t, x, into, "accumulate")
    elif kind in ("dampened_add", "dampened_add_square"):
        res = _last(ctx, "add", t, B.binary(ctx, "mul", x, f, shape=x.shape, suffix="scale"), into, "accumulate")
    elif kind in ("moving_average", "moving_average_square"):
        keep = B.binary(ctx, "mul", t, f, shape=t.shape, suffix="decay")
        new = B.binary(ctx, "mul", x, B.binary(ctx, "sub", one, f, suffix="one_minus_f"), shape=x.shape,
                       suffix="blend")
        res = _last(ctx, "add", keep, new, into, "accumulate")
    elif kind == "mean":
        # t = (step * t + X) / (step + 1)
        num = B.binary(ctx, "add", B.binary(ctx, "mul", t, f, shape=t.shape, suffix="weighted"), x, shape=t.shape,
                       suffix="sum")
        res = _last(ctx, "div", num, B.binary(ctx, "add", f, one, suffix="count"), into, "mean")
    else:
        raise NotImplementedError(f"accumulate: accumulation type {kind!r}")
    _finish(ctx, op, res, into)


@lowering_rule("accumulator_scale")
def accumulator_scale(ctx, op):
    (t,), into = _in_place(ctx, op)
    f = _hyper(ctx, op, "f", t.dtype, op.attrs.get("factor"))
    _finish(ctx, op, _last(ctx, "mul", t, f, into, "scale"), into)


@lowering_rule("copy_var_update")
def copy_var_update(ctx, op):
    ins = _inputs(op)
    ctx.copy(ctx.value(ins["X"]), ctx.value(ins["t"]), "copy_var_update")
    ctx.bind(op.outputs[0], ctx.value(ins["t"]))


@lowering_rule("adam_updater")
def adam_updater(ctx, op):
    ins = _inputs(op)
    m, v = ctx.value(ins["acc_first_order"]), ctx.value(ins["acc_second_order"])
    et = ipu.FLOAT32 if ipu.FLOAT32 in (m.dtype, v.dtype) else m.dtype  # float16 / float32 moments: in float32
    if m.dtype != et:
        m = B.elementwise(ctx, "Cast", [m], ["in"], m.shape, et, suffix="m_wide")
    if v.dtype != et:
        v = B.elementwise(ctx, "Cast", [v], ["in"], v.shape, et, suffix="v_wide")
    mode = op.attrs["mode"]
    one = B.scalar_constant(ctx, 1.0, et, "one")
    eps = _hyper(ctx, op, "epsilon", et, 1e-7)
    if "time_step" in ins:
        # the step counts this update first (PopART increments it, then corrects the bias)
        ts = ctx.value(ins["time_step"])
        inc = B.binary(ctx, "add", ts, B.scalar_constant(ctx, 1, ts.dtype, "one_step"), suffix="step")
        ctx.copy(inc, ts, "step_update")
        step = inc if ts.dtype == et else B.elementwise(ctx, "Cast", [inc], ["in"], inc.shape, et, suffix="step_cast")
        t = step.reshape(())
        b1 = _hyper(ctx, op, "beta1", et, 0.9)
        mc = B.binary(ctx, "div", m, B.binary(ctx, "sub", one, B.binary(ctx, "pow", b1, t, suffix="b1_t"),
                                              suffix="bias1"), shape=m.shape, suffix="mc")
    else:
        mc = m
    if mode == "adamax":
        denom = B.binary(ctx, "add", v, eps, shape=v.shape, suffix="denom")
    else:
        if "time_step" in ins:
            b2 = _hyper(ctx, op, "beta2", et, 0.999)
            vc = B.binary(ctx, "div", v, B.binary(ctx, "sub", one, B.binary(ctx, "pow", b2, t, suffix="b2_t"),
                                                  suffix="bias2"), shape=v.shape, suffix="vc")
        else:
            vc = v
        denom = B.binary(ctx, "add", B.unary(ctx, "sqrt", vc), eps, shape=v.shape, suffix="denom")
    upd = B.binary(ctx, "div", mc, denom, shape=m.shape, suffix="updater")
    wd = _hyper(ctx, op, "weight_decay", et)
    if wd is not None and "weight" in ins:
        w = ctx.value(ins["weight"])
        if w.dtype != et:  # a float32 weight with float16 moments (popxl-addons' Adam): decay in the moments' type
            w = B.elementwise(ctx, "Cast", [w], ["in"], w.shape, et, suffix="weight_cast")
        upd = B.binary(ctx, "add", upd, B.binary(ctx, "mul", w, wd, shape=w.shape, suffix="decay"), shape=m.shape,
                       suffix="updater_wd")
    out_et = ctx.etype(op.outputs[0])
    if out_et != et:  # PopART: the updater has the weight's type when the weight is an input
        upd = B.elementwise(ctx, "Cast", [upd], ["in"], upd.shape, out_et, suffix="updater_cast")
    ctx.bind(op.outputs[0], upd)


@lowering_rule("adam_var_update")
def adam_var_update(ctx, op):
    ins = _inputs(op)
    t, x = ctx.value(ins["t"]), ctx.value(ins["x"])
    et = t.dtype
    lr = _hyper(ctx, op, "learning_rate", et, 1.0)
    step = B.binary(ctx, "mul", x, lr, shape=x.shape, suffix="step")
    if "r1" in ins and "r2" in ins:
        # LAMB trust ratio r1 / r2, r1 clipped to max_weight_norm; 1 when either norm is 0
        r1 = ctx.value(ins["r1"]).reshape(())
        r2 = ctx.value(ins["r2"]).reshape(())
        mwn = _hyper(ctx, op, "max_weight_norm", et)
        if mwn is not None:
            r1 = B.binary(ctx, "min", r1, mwn, suffix="clip_r1")
        zero = B.scalar_constant(ctx, 0.0, et, "zero")
        one = B.scalar_constant(ctx, 1.0, et, "one")
        both = B.binary(ctx, "logical_and", B.binary(ctx, "greater", r1, zero, suffix="r1_pos"),
                        B.binary(ctx, "greater", r2, zero, suffix="r2_pos"), suffix="norms_pos")
        safe_r2 = B.elementwise(ctx, "Select", [both, r2, one], ["cond", "a", "b"], (), et, suffix="safe_r2")
        ratio = B.elementwise(ctx, "Select", [both, B.binary(ctx, "div", r1, safe_r2, suffix="trust"), one],
                              ["cond", "a", "b"], (), et, suffix="ratio")
        step = B.binary(ctx, "mul", step, ratio, shape=x.shape, suffix="trust_step")
    _write(ctx, op, B.binary(ctx, "sub", t, step, shape=t.shape, suffix="update"))


@lowering_rule("lamb_square")
def lamb_square(ctx, op):
    x = ctx.value(op.inputs[0])
    out = B.reduce(ctx, x, tuple(range(x.rank)), "sum_squares", et=ipu.FLOAT32, suffix="lamb_square")
    ctx.bind(op.outputs[0], out.reshape(()))


@lowering_rule("sparse_accumulate")
def sparse_accumulate(ctx, op):
    """t[indices] += f * X along axis: the scatter-add of the indexing rules (column plan, one
    MultiUpdate vertex per block), starting from t."""
    from codelets.indexing import UPDATE_OPS

    from .indexing import ColumnPlan, _from_front, _to_front, multi_update

    ins = _inputs(op)
    t, x, idx = ctx.value(ins["t"]), ctx.value(ins["X"]), ctx.value(ins["indices"])
    axis = op.attrs.get("axis", 0)
    f = _hyper(ctx, op, "f", t.dtype, op.attrs.get("factor"))
    if f is not None:
        x = B.binary(ctx, "mul", x, f, shape=x.shape, suffix="scale")
    rows = t.shape[axis]
    plan = ColumnPlan(ctx, 1, t.numel // max(rows, 1), rows, t.dtype.itemsize)
    base, base_view = plan.place(_to_front(t, axis), "sparse_accumulate/t")
    if idx.numel:
        upd, _ = plan.place(_to_front(x.reshape(t.shape[:axis] + (idx.numel,) + t.shape[axis + 1:]), axis),
                            "sparse_accumulate/X")
        offs = plan.broadcast(idx.reshape(1, idx.numel), "sparse_accumulate/indices")
        multi_update(ctx, plan, base, rows, offs, False, upd, UPDATE_OPS["sum"], suffix="sparse_accumulate")
    ctx.copy(_from_front(base_view, t.shape, axis), t, "update")
    ctx.bind(op.outputs[0], t)
