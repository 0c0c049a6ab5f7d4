"""Gradients of the element-wise ops (popxl/ops/elementwise.py)."""
import math

import popxl.ops as ops
from popxl import op_table

from ._registry import grad_rule, non_differentiable
from ._util import Grads, const, mask, no_grads, unbroadcast, zeros

non_differentiable("equal", "greater", "less", "not_equal", "logical_and", "logical_or", "logical_not", "isnan",
                   "isinf", "isfinite", "increment_mod")


# -- unary ops of the op table with a derivative: g * dy/dx(x, y) ------------------------------------
def _from_derivative(entry):
    def rule(ctx, op, grads):
        g = grads[0]
        return [ops.mul(g, entry.derivative(ctx.input(0), ctx.output(0)))]

    rule.__name__ = f"_{entry.name}"
    return rule


def _unary_entry(entry):
    if entry.derivative is not None:
        grad_rule(entry.name)(_from_derivative(entry))
    elif entry.gradient == "none":
        non_differentiable(entry.name)


op_table.on_register(op_table.UnaryOpType, _unary_entry)


# -- unary ------------------------------------------------------------------------------------------
@grad_rule("exp")
def _exp(ctx, op, grads):
    return [ops.mul(grads[0], ctx.output(0))]


@grad_rule("log")
def _log(ctx, op, grads):
    return [ops.div(grads[0], ctx.input(0))]


@grad_rule("sqrt")
def _sqrt(ctx, op, grads):
    g = grads[0]
    return [ops.div(ops.mul(g, const(0.5, g.dtype)), ctx.output(0))]


def _nl_grad(g, t, kind, p0=0.0, p1=0.0):
    """g x f'(t) as one op (popnn's NonLinearityGrad: codelets/nonlinearity.py) for float data."""
    from popxl.ops.nn import _nonlinearity_grad
    return _nonlinearity_grad(g, t, kind, p0, p1)


@grad_rule("relu")
def _relu(ctx, op, grads):
    g = grads[0]
    y = ctx.output(0)  # relu_ overwrites its input, so read the output
    if y.dtype.name in ("float32", "float16"):
        return [_nl_grad(g, y, "relu")]
    return [ops.mul(g, mask(ops.greater(y, const(0, y.dtype)), g.dtype))]


@grad_rule("sigmoid")
def _sigmoid(ctx, op, grads):
    """g y (1 - y), from the output."""
    return [_nl_grad(grads[0], ctx.output(0), "sigmoid")]


@grad_rule("gelu")
def _gelu(ctx, op, grads):
    """gelu(x) = 0.5 x (1 + tanh(k (x + c x^3))), k = sqrt(2 / pi), c = 0.044715: from the input, for
    float data one NonLinearityGrad op, as PopART's GeluGradOpx is one popnn
    nonLinearityInputGradient(GELU) (the decomposition below kept a dozen ops and their temporaries)."""
    g, x = grads[0], ctx.input(0)
    dt = g.dtype
    if dt.name in ("float32", "float16"):
        return [_nl_grad(g, x, "gelu")]
    k, c = math.sqrt(2.0 / math.pi), 0.044715
    x2 = ops.mul(x, x)
    inner = ops.mul(ops.mul(x, const(k, dt)), ops.add(const(1.0, dt), ops.mul(x2, const(c, dt))))
    t = ops.tanh(inner)
    dinner = ops.mul(const(k, dt), ops.add(const(1.0, dt), ops.mul(x2, const(3 * c, dt))))
    one_minus_t2 = ops.sub(const(1.0, dt), ops.mul(t, t))
    d = ops.add(ops.mul(const(0.5, dt), ops.add(const(1.0, dt), t)),
                ops.mul(ops.mul(ops.mul(const(0.5, dt), x), one_minus_t2), dinner))
    return [ops.mul(g, d)]


@grad_rule("geluerf")
def _geluerf(ctx, op, grads):
    # y = x Phi(x); dy/dx = Phi(x) + x phi(x). Phi(x) = y / x (x != 0), 1/2 at x = 0.
    g, x, y = grads[0], ctx.input(0), ctx.output(0)
    dt = g.dtype
    is_zero = ops.equal(x, const(0.0, dt))
    x_safe = ops.where(is_zero, const(1.0, dt), x)
    cdf = ops.where(is_zero, const(0.5, dt), ops.div(y, x_safe))
    pdf = ops.mul(ops.exp(ops.mul(ops.mul(x, x), const(-0.5, dt))), const(1.0 / math.sqrt(2.0 * math.pi), dt))
    return [ops.mul(g, ops.add(cdf, ops.mul(x, pdf)))]


@grad_rule("tanh")
def _tanh(ctx, op, grads):
    g, y = grads[0], ctx.output(0)
    return [ops.mul(g, ops.sub(const(1.0, g.dtype), ops.mul(y, y)))]


@grad_rule("sin")
def _sin(ctx, op, grads):
    return [ops.mul(grads[0], ops.cos(ctx.input(0)))]


@grad_rule("cos")
def _cos(ctx, op, grads):
    return [ops.negate(ops.mul(grads[0], ops.sin(ctx.input(0))))]


@grad_rule("abs")
def _abs(ctx, op, grads):
    return [ops.mul(grads[0], ops.sign(ctx.input(0)))]


@grad_rule("negate")
def _negate(ctx, op, grads):
    return [ops.negate(grads[0])]


@grad_rule("swish")
def _swish(ctx, op, grads):
    """g s (1 + x (1 - s)), s = sigmoid(x), from the input: for float data one NonLinearityGrad op, as
    PopART's SwishGradOpx is one popnn nonLinearityInputGradient(SWISH) (no sigmoid, products or sums
    kept beside it: each would be a temporary the size of x)."""
    g, x = grads[0], ctx.input(0)
    dt = g.dtype
    if dt.name in ("float32", "float16"):
        return [_nl_grad(g, x, "swish")]
    s = ops.mul(ops.add(ops.tanh(ops.mul(x, const(0.5, dt))), const(1.0, dt)), const(0.5, dt))
    d = ops.mul(s, ops.add(const(1.0, dt), ops.mul(x, ops.sub(const(1.0, dt), s))))
    return [ops.mul(g, d)]


@grad_rule("sign", "ceil", "floor")
def _zero_grad(ctx, op, grads):
    """Piecewise constant: the gradient is zero."""
    x = op.inputs[0]
    return [zeros(x.shape, x.dtype)]


# -- binary ---------------------------------------------------------------------------------------
@grad_rule("add")
def _add(ctx, op, grads):
    g = grads[0]
    a, b = op.inputs
    return [unbroadcast(g, a.shape) if ctx.wants(0) else None,
            unbroadcast(g, b.shape) if ctx.wants(1) else None]


@grad_rule("sub")
def _sub(ctx, op, grads):
    g = grads[0]
    a, b = op.inputs
    return [unbroadcast(g, a.shape) if ctx.wants(0) else None,
            unbroadcast(ops.negate(g), b.shape) if ctx.wants(1) else None]


@grad_rule("mul")
def _mul(ctx, op, grads):
    g = grads[0]
    a, b = op.inputs
    if 0 in op.modified and ctx.wants(1):
        raise NotImplementedError(f"autodiff: the gradient of the in-place mul '{op.name}' needs the value of "
                                  f"{a.id} before it was overwritten; use ops.mul instead of an in-place form.")
    return [unbroadcast(ops.mul(g, ctx.input(1)), a.shape) if ctx.wants(0) else None,
            unbroadcast(ops.mul(g, ctx.input(0)), b.shape) if ctx.wants(1) else None]


@grad_rule("div")
def _div(ctx, op, grads):
    g = grads[0]
    a, b = op.inputs
    gb = ops.div(g, ctx.input(1))
    out = [unbroadcast(gb, a.shape) if ctx.wants(0) else None, None]
    if ctx.wants(1):  # d(a/b)/db = -(a/b)/b
        out[1] = unbroadcast(ops.negate(ops.mul(gb, ctx.output(0))), b.shape)
    return out


@grad_rule("pow")
def _pow(ctx, op, grads):
    g = grads[0]
    a, b = op.inputs
    out = no_grads(2)
    if ctx.wants(0):  # b a^(b-1)
        av, bv = ctx.input(0), ctx.input(1)
        d = ops.mul(bv, ops.pow(av, ops.sub(bv, const(1.0, bv.dtype))))
        out[0] = unbroadcast(ops.mul(g, d), a.shape)
    if ctx.wants(1):  # a^b log a
        out[1] = unbroadcast(ops.mul(g, ops.mul(ctx.output(0), ops.log(ctx.input(0)))), b.shape)
    return out


@grad_rule("fmod")
def _fmod(ctx, op, grads):
    """Gradient for the dividend only (as PopART): d fmod(a, b) / da = 1."""
    return [unbroadcast(grads[0], op.inputs[0].shape) if ctx.wants(0) else None, None]


@grad_rule("maximum", "minimum")
def _maximum(ctx, op, grads):
    """Each input equal to the maximum (minimum) receives the gradient."""
    g, y = grads[0], ctx.output(0)
    out: Grads = []
    for i, x in enumerate(op.inputs):
        if not ctx.wants(i):
            out.append(None)
            continue
        m = mask(ops.equal(ctx.input(i), y), g.dtype)
        out.append(unbroadcast(ops.mul(g, m), x.shape))
    return out


@grad_rule("where")
def _where(ctx, op, grads):
    g = grads[0]
    _, a, b = op.inputs
    out = no_grads(3)
    if ctx.wants(1) or ctx.wants(2):
        cond = ctx.input(0)
        zero = const(0.0, g.dtype)
        if ctx.wants(1):
            out[1] = unbroadcast(ops.where(cond, g, zero), a.shape)
        if ctx.wants(2):
            out[2] = unbroadcast(ops.where(cond, zero, g), b.shape)
    return out


@grad_rule("clip")
def _clip(ctx, op, grads):
    """The gradient passes where min < x < max (PyTorch's hardtanh_backward), read from the output:
    min < y < max exactly where min < x < max, so the input need not be kept (one NonLinearityGrad
    op for float data)."""
    g, x = grads[0], ctx.input(0)
    dt = x.dtype
    lo, hi = op.attrs["min"], op.attrs["max"]
    if dt.name in ("float32", "float16"):
        return [_nl_grad(g, ctx.output(0), "clip", lo, hi)]
    m = None
    if lo != float("-inf"):
        m = ops.logical_not(ops.greater(const(lo, dt), x))
    if hi != float("inf"):
        m2 = ops.logical_not(ops.greater(x, const(hi, dt)))
        m = m2 if m is None else ops.logical_and(m, m2)
    if m is None:
        return [g]
    return [ops.mul(g, mask(m, g.dtype))]


@grad_rule("scaled_add")
def _scaled_add(ctx, op, grads):
    """out = a X + b Y (a, b floats or scalar tensors)."""
    g = grads[0]
    names = list(op.attrs.get("input_names", ("X", "Y")))
    idx = {n: i for i, n in enumerate(names)}
    X, Y = op.inputs[0], op.inputs[1]

    def scale(key):
        if op.attrs.get(key) is not None:
            return const(op.attrs[key], g.dtype)
        s = ops.reshape(ctx.input(idx[key]), ())
        return s if s.dtype == g.dtype else ops.cast(s, g.dtype)

    out = no_grads(len(op.inputs))
    if ctx.wants(0):
        out[0] = unbroadcast(ops.mul(g, scale("a")), X.shape)
    if ctx.wants(1):  # Y may be of the other float type (mixed precision): its gradient is of Y's
        gy = unbroadcast(ops.mul(g, scale("b")), Y.shape)
        out[1] = gy if gy.dtype == Y.dtype else ops.cast(gy, Y.dtype)
    for key, data in (("a", 0), ("b", 1)):
        if key in idx and ctx.wants(idx[key]):
            if 0 in op.modified and data == 0:
                raise NotImplementedError(f"autodiff: the gradient of scale `a` of the in-place scaled_add "
                                          f"'{op.name}' needs X before it was overwritten; use ops.scaled_add.")
            x = ctx.input(data)
            s = ops.sum(ops.mul(g, x if x.dtype == g.dtype else ops.cast(x, g.dtype)))
            scale_t = op.inputs[idx[key]]
            s = s if s.dtype == scale_t.dtype else ops.cast(s, scale_t.dtype)
            out[idx[key]] = ops.reshape(s, scale_t.shape)
    return out
