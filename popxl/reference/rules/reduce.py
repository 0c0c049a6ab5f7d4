"""Reductions: floats accumulate in float32 (float64 upcast) and round once; int32 sums wrap;
max / min propagate NaN; arg ops and topk take the first of equal values."""
import numpy as np

from ..registry import reference_rule
from ._util import wide


def _acc(x):
    if x.dtype.kind in "iu":
        return x.astype(np.int64)
    if x.dtype == np.bool_:
        return x
    return wide(x)


def _wrap(r, dt):
    r = np.asarray(r)
    if np.dtype(dt) == np.int32 and r.dtype.kind in "iu":
        return (r.astype(np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
    return r.astype(dt)


_REDUCE = {
    "sum": lambda x, a, k: np.sum(x, a, keepdims=k),
    "mean": lambda x, a, k: np.mean(x, a, keepdims=k),
    "max": lambda x, a, k: np.max(x, a, keepdims=k),
    "min": lambda x, a, k: np.min(x, a, keepdims=k),
    "prod": lambda x, a, k: np.prod(x, a, keepdims=k),
    "logsum": lambda x, a, k: np.log(np.sum(x, a, keepdims=k)),
    "logsumexp": lambda x, a, k: _logsumexp(x, a, k),
    "l1": lambda x, a, k: np.sum(np.abs(x), a, keepdims=k),
    "l2": lambda x, a, k: np.sqrt(np.sum(x * x, a, keepdims=k)),
    "sumsquare": lambda x, a, k: np.sum(x * x, a, keepdims=k),
}


def _logsumexp(x, axes, keepdims):
    if x.size == 0:
        return np.log(np.sum(np.exp(x), axes, keepdims=keepdims))
    m = np.max(x, axes, keepdims=True)
    m = np.where(np.isfinite(m), m, np.zeros_like(m))
    r = m + np.log(np.sum(np.exp(x - m), axes, keepdims=True))
    return r if keepdims else np.squeeze(r, axes)


@reference_rule(*_REDUCE)
def reduce(ctx, op, ins):
    x = ins[0]
    axes = tuple(op.attrs["axes"])
    with np.errstate(all="ignore"):
        r = _REDUCE[op.type](_acc(x), axes, bool(op.attrs["keepdims"]))
    return [_wrap(r, ctx.out_dtype())]


@reference_rule("median")
def median(ctx, op, ins):
    x, axes = ins[0], tuple(op.attrs["axes"])
    kept = [i for i in range(x.ndim) if i not in axes]
    xt = np.transpose(x, kept + list(axes))
    rows = xt.reshape(int(np.prod([x.shape[i] for i in kept], dtype=np.int64)),
                      int(np.prod([x.shape[i] for i in axes], dtype=np.int64)))  # not -1: may be empty
    idx = np.argsort(rows, axis=1, kind="stable")[:, (rows.shape[1] - 1) // 2]
    vals = rows[np.arange(rows.shape[0]), idx]
    shape = op.outputs[0].shape
    return [vals.reshape(shape), idx.astype(np.int32).reshape(shape)]


@reference_rule("argmax", "argmin")
def argminmax(ctx, op, ins):
    f = np.argmax if op.type == "argmax" else np.argmin
    return [f(_acc(ins[0]), op.attrs["axis"], keepdims=bool(op.attrs["keepdims"])).astype(np.int32)]


@reference_rule("cumsum")
def cumsum(ctx, op, ins):
    x, ax = ins[0], op.attrs["axis"]
    w = _acc(x)
    if op.attrs.get("reverse"):
        w = np.flip(w, ax)
    r = np.cumsum(w, ax)
    if op.attrs.get("exclusive"):
        r = r - w
    if op.attrs.get("reverse"):
        r = np.flip(r, ax)
    return [_wrap(r, ctx.out_dtype())]


@reference_rule("topk")
def topk(ctx, op, ins):
    x, k, ax = ins[0], op.attrs["k"], op.attrs["axis"]
    w = _acc(x)
    order = np.argsort(-w if op.attrs["largest"] else w, axis=ax, kind="stable")
    idx = np.take(order, np.arange(k), axis=ax)
    return [np.take_along_axis(x, idx, ax), idx.astype(np.int32)]
