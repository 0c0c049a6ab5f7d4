"""softmax, the norms and the negative log likelihood losses (PopART's definitions)."""
import numpy as np

from ..registry import reference_rule
from ._util import wide


@reference_rule("softmax")
def softmax(ctx, op, ins):
    x, ax = wide(ins[0]), op.attrs["axis"]
    with np.errstate(invalid="ignore"):
        e = np.exp(x - np.max(x, ax, keepdims=True))
        return [e / np.sum(e, ax, keepdims=True)]


@reference_rule("group_norm")
def group_norm(ctx, op, ins):
    x, w, b = (wide(v) for v in ins)
    n, c = x.shape[:2]
    g = op.attrs["num_groups"]
    x3 = x.reshape(n, g, int(np.prod(x.shape[1:], dtype=np.int64)) // g)  # not -1: n may be 0
    mean = x3.mean(-1)
    var = ((x3 - mean[..., None]) ** 2).mean(-1)
    inv = 1 / np.sqrt(var + x.dtype.type(op.attrs["epsilon"]))
    y = ((x3 - mean[..., None]) * inv[..., None]).reshape(x.shape)
    cs = (1, c) + (1,) * (x.ndim - 2)
    return [y * w.reshape(cs) + b.reshape(cs), mean.ravel(), inv.ravel()]


@reference_rule("batch_norm_inference")
def batch_norm_inference(ctx, op, ins):
    x, s, b, m, v = (wide(t) for t in ins)
    cs = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    eps = x.dtype.type(op.attrs["epsilon"])
    return [s.reshape(cs) * (x - m.reshape(cs)) / np.sqrt(v.reshape(cs) + eps) + b.reshape(cs)]


@reference_rule("batch_norm_training")
def batch_norm_training(ctx, op, ins):
    x, s, b = (wide(t) for t in ins)
    axes = tuple(i for i in range(x.ndim) if i != 1)
    cs = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    mean = x.mean(axes)
    var = ((x - mean.reshape(cs)) ** 2).mean(axes)
    inv = 1 / np.sqrt(var + x.dtype.type(op.attrs["epsilon"]))
    return [(x - mean.reshape(cs)) * (inv * s).reshape(cs) + b.reshape(cs), mean, inv]


@reference_rule("batch_norm_training_grad")
def batch_norm_training_grad(ctx, op, ins):
    g, x, s, m, inv = (wide(t) for t in ins)
    axes = tuple(i for i in range(x.ndim) if i != 1)
    cs = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    count = x.size // max(x.shape[1], 1)
    xhat = (x - m.reshape(cs)) * inv.reshape(cs)
    dbias = g.sum(axes)
    dscale = (g * xhat).sum(axes)
    dx = (s * inv).reshape(cs) * (g - (dbias.reshape(cs) + xhat * dscale.reshape(cs)) / count)
    return [dx, dscale, dbias]


@reference_rule("nonlinearity_grad")
def nonlinearity_grad(ctx, op, ins):
    from codelets.nonlinearity import nonlinearity_grad_reference
    a = op.attrs
    g, t = np.asarray(ins[0]), np.asarray(ins[1])
    if g.dtype == np.float64:  # the finite-difference interpreter's float64: the same formulas
        return [_nl_grad64(g, t, a["kind"], a["p0"], a["p1"])]
    return [nonlinearity_grad_reference(g, t, a["kind"], a["p0"], a["p1"])]


def _nl_grad64(g, t, kind, p0, p1):
    if kind == "relu":
        d = (t > 0).astype(g.dtype)
    elif kind == "sigmoid":
        d = t * (1 - t)
    elif kind == "tanh":
        d = 1 - t * t
    elif kind == "clip":
        d = ((t > p0) & (t < p1)).astype(g.dtype)
    elif kind == "hard_sigmoid":
        u = p0 * t + p1
        d = np.where((u > 0) & (u < 1), p0, 0.0)
    elif kind == "gelu":
        k, c = np.sqrt(2 / np.pi), 0.044715
        u = np.tanh(k * t * (1 + c * t * t))
        d = 0.5 * (1 + u + (1 - u * u) * t * k * (1 + 3 * c * t * t))
    else:
        s = 1 / (1 + np.exp(-t))
        d = s * (1 + t * (1 - s))
    return g * d


def _nll(op, probs, labels):
    """Per-sample losses, the one-hot of the labels and the valid mask (labels != ignore_index)."""
    classes = probs.shape[-1]
    labels = np.asarray(labels).astype(np.int64).reshape(probs.shape[:-1])
    hot = labels[..., None] == np.arange(classes)
    ign = op.attrs.get("ignore_index")
    valid = np.ones(labels.shape, bool) if ign is None else labels != ign
    picked = np.sum(np.where(hot, probs, 0), -1)
    # PopART's NllOpx takes log(max(p, eps)): 1e-7, or 6.104e-5 for float16 probabilities
    eps = 6.104e-05 if np.dtype(op.inputs[0].dtype.as_numpy()) == np.float16 else 1.0e-7
    per = -(picked if op.attrs.get("log_prob") else np.log(np.maximum(picked, picked.dtype.type(eps))))
    return np.where(valid, per, 0), hot, valid


def _reduce(per, valid, reduction):
    if reduction == "none":
        return per
    total = per.sum()
    return total if reduction == "sum" else total / (valid.sum() if valid is not None else max(per.size, 1))


@reference_rule("nll_loss")
def nll_loss(ctx, op, ins):
    probs = wide(ins[0])
    per, _, valid = _nll(op, probs, ins[1])
    loss = _reduce(per, valid if op.attrs.get("ignore_index") is not None else None, op.attrs["reduction"])
    return [np.reshape(loss, op.outputs[0].shape)]


@reference_rule("nll_loss_with_softmax_grad")
def nll_loss_with_softmax_grad(ctx, op, ins):
    probs, labels, loss_grad = wide(ins[0]), ins[1], wide(ins[2])
    per, hot, valid = _nll(op, probs, labels)
    ignoring = op.attrs.get("ignore_index") is not None
    red = op.attrs["reduction"]
    loss = _reduce(per, valid if ignoring else None, red)
    scale = loss_grad.reshape(())
    if red == "mean":
        scale = scale / (valid.sum() if ignoring else max(per.size, 1))
    dx = (probs - hot) * scale * valid[..., None]
    return [np.reshape(loss, op.outputs[0].shape), dx]


@reference_rule("lamb_square")
def lamb_square(ctx, op, ins):
    x = ins[0].astype(np.float64 if ctx.upcast else np.float32)
    return [np.sum(x * x)]
