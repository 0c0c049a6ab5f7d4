"""Variable updates with the formulas of PopART's optimizers, as the lowering computes them: each
writes its first input (returned as output 0, which aliases it), except adam_updater, whose output
is new and which increments its time_step input."""
import numpy as np

from ..registry import reference_rule
from ._util import inputs_by_name, scalar, wide


def _f(v, dt):
    return np.asarray(v).astype(dt)


@reference_rule("accumulate")
def accumulate(ctx, op, ins):
    named = inputs_by_name(op, ins)
    t, x = wide(named["t"]), wide(named["X"])
    dt = t.dtype
    kind = op.attrs["accumulation_type"]
    f = scalar(op, ins, "f", op.attrs.get("factor"))
    f = _f(f, dt) if f is not None else None
    if kind in ("dampened_add_square", "moving_average_square"):
        x = x * x
    if kind == "add":
        r = t + x
    elif f is None:
        raise ValueError(f"accumulate: accumulation type {kind!r} needs a factor (op {op.name})")
    elif kind in ("dampened_add", "dampened_add_square"):
        r = t + x * f
    elif kind in ("moving_average", "moving_average_square"):
        r = t * f + x * (1 - f)
    elif kind == "mean":
        r = (t * f + x) / (f + 1)
    else:
        raise NotImplementedError(f"accumulate: accumulation type {kind!r}")
    return [r]


@reference_rule("accumulator_scale")
def accumulator_scale(ctx, op, ins):
    t = wide(inputs_by_name(op, ins)["t"])
    return [t * _f(scalar(op, ins, "f", op.attrs.get("factor")), t.dtype)]


@reference_rule("copy_var_update")
def copy_var_update(ctx, op, ins):
    return [np.array(inputs_by_name(op, ins)["X"], copy=True)]


@reference_rule("sparse_accumulate")
def sparse_accumulate(ctx, op, ins):
    from .indexing import scatter_into

    named = inputs_by_name(op, ins)
    t, x, idx = wide(named["t"]), wide(named["X"]), named["indices"]
    axis = op.attrs.get("axis", 0)
    f = scalar(op, ins, "f", op.attrs.get("factor"))
    if f is not None:
        x = x * _f(f, t.dtype)
    out = t.copy()
    idx = np.asarray(idx).reshape(-1)
    x = x.reshape(t.shape[:axis] + (idx.size,) + t.shape[axis + 1:])
    scatter_into(out, idx, x, axis, 1)  # UpdateOpCode.ADD
    return [out]


@reference_rule("adam_updater")
def adam_updater(ctx, op, ins):
    named = inputs_by_name(op, ins)
    m, v = wide(named["acc_first_order"]), wide(named["acc_second_order"])
    dt = m.dtype
    mode = op.attrs["mode"]
    eps = _f(scalar(op, ins, "epsilon", 1e-7), dt)
    if "time_step" in named:
        i = list(op.attrs["input_names"]).index("time_step")
        ts = named["time_step"]
        step = (np.asarray(ts) + 1).astype(ts.dtype)
        ctx.write(i, step)  # the step counts this update first (PopART increments, then corrects)
        t = _f(step, dt).reshape(())
        mc = m / (1 - _f(scalar(op, ins, "beta1", 0.9), dt) ** t)
    else:
        mc = m
    if mode == "adamax":
        denom = v + eps
    else:
        vc = v / (1 - _f(scalar(op, ins, "beta2", 0.999), dt) ** t) if "time_step" in named else v
        denom = np.sqrt(vc) + eps
    upd = mc / denom
    wd = scalar(op, ins, "weight_decay")
    if wd is not None and "weight" in named:
        upd = upd + wide(named["weight"]).astype(dt) * _f(wd, dt)
    return [np.asarray(upd).astype(ctx.out_dtype(0))]


@reference_rule("adam_var_update")
def adam_var_update(ctx, op, ins):
    named = inputs_by_name(op, ins)
    t, x = wide(named["t"]), wide(named["x"])
    dt = t.dtype
    step = x * _f(scalar(op, ins, "learning_rate", 1.0), dt)
    if "r1" in named and "r2" in named:
        r1, r2 = wide(named["r1"]).reshape(()), wide(named["r2"]).reshape(())
        mwn = scalar(op, ins, "max_weight_norm")
        if mwn is not None:
            r1 = np.minimum(r1, _f(mwn, dt))
        both = (r1 > 0) & (r2 > 0)
        step = step * (r1 / np.where(both, r2, 1) if both else _f(1, dt))
    return [t - step]
